"""The prompts ``breakeven bench`` sends: its built-in ones, and a prompts file read (a prompt
per line, or JSON Lines with Spec-Bench's and SPEED-Bench's ``turns``), each with its workload
category.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces, shorten
from breakeven.iotools.sources import read_whole
from breakeven.render import printable

DEFAULT_PROMPTS = (
    "Explain how speculative decoding speeds up large language model inference.",
    "Write a short story about a lighthouse keeper who collects old maps.",
    "List the steps to profile a distributed training job and find its bottleneck.",
    "Describe the water cycle to a ten-year-old.",
)


class PromptRow(NamedTuple):
    """One prompt of a prompts file, and its workload category ('' where the row has none)."""

    prompt: str
    category: str = ""


class Prompts(list):  # list[str]
    """A prompts file's prompts (a list of str, as before categories), with ``categories``: each
    prompt's workload category, in the same order, '' where its row has none."""

    categories: tuple[str, ...] = ()


SPEED_BENCH_PLACEHOLDER = (
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
)
"""What SPEED-Bench's published rows hold in ``turns`` where the prompt comes from another data
set: NVIDIA's ``specdec_bench/prepare_data.py`` fills them in (Model-Optimizer,
``examples/specdec_bench/specdec_bench/datasets/speed.py``, ``TURNS_PLACEHOLDER``)."""

_PROMPT_ROW = (
    'a JSON object with a "prompt" string (or a "turns" list of strings, the Spec-Bench and '
    'SPEED-Bench layout) and an optional "category" string, or a plain line'
)


def _shown(value: Any) -> str:
    """A value of a prompts file as a message shows it: JSON, printable, shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return escape_braces(shorten(printable(text)))


def _json_row(line: str, where: str) -> PromptRow:
    """One JSON Lines row of a prompts file: its prompt (``prompt``, else the first of
    ``turns``) and its ``category``."""

    def bad(message: str) -> BreakevenError:
        return BreakevenError("{0}: " + where + ": " + message, "prompts")

    try:
        row = json.loads(line)
    except RecursionError:
        raise bad(
            f"JSON nested too deep to read: {_shown(line.strip())}; expected {_PROMPT_ROW}"
        ) from None
    except ValueError as e:
        reason = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
        raise bad(
            f"not JSON ({escape_braces(reason)}): {_shown(line.strip())}; expected {_PROMPT_ROW}"
        ) from None
    if not isinstance(row, dict):
        raise bad(f"{_shown(row)} is not a JSON object; expected {_PROMPT_ROW}")
    if "prompt" in row:
        prompt = row["prompt"]
        if not isinstance(prompt, str):
            raise bad(f'"prompt" is {_shown(prompt)}, expected a string')
    elif "turns" in row:
        turns = row["turns"]
        if not (isinstance(turns, list) and turns and isinstance(turns[0], str)):
            raise bad(
                f'"turns" is {_shown(turns)}, expected a list of strings (the conversation\'s '
                "user turns; the first is sent)"
            )
        prompt = turns[0]
        if prompt.startswith(SPEED_BENCH_PLACEHOLDER):
            raise bad(
                f'"turns" holds SPEED-Bench\'s placeholder "{SPEED_BENCH_PLACEHOLDER}...", '
                "expected the prompt: fill it in with specdec_bench's prepare_data.py "
                "(NVIDIA Model-Optimizer) first"
            )
    else:
        raise bad(f'{_shown(row)} has no "prompt" or "turns"; expected {_PROMPT_ROW}')
    category = row.get("category")
    if category is None:
        category = ""
    elif not isinstance(category, str):
        raise bad(
            f'"category" is {_shown(category)}, expected a string (the workload: code, chat, '
            "math, writing, ...) or none"
        )
    return PromptRow(prompt, category)


def read_prompt_rows(path: str) -> list[PromptRow]:
    """Prompts and their workload categories from a file (UTF-8 text; a named pipe is read as
    a stream): one prompt per line, or JSON Lines, each row a ``prompt`` string, or a
    ``turns`` list whose first turn is the prompt (Spec-Bench's ``question.jsonl``; SPEED-Bench
    exported as JSON Lines), with an optional ``category`` string.  Rows of one file may mix
    the layouts; a row without a category has none ('').

    Raises
    ------
    BreakevenError
        Naming ``prompts``, the file and line, the value and what was expected.
    """

    shown = escape_braces(repr(path))
    try:  # a named pipe is read as a stream, or refused when no process writes it
        data = read_whole(path, 64 << 20)
    except UnreadableInput as e:
        message = escape_braces(str(e))
        raise BreakevenError("{0}: " + shown + ": " + message, "prompts") from None
    if data.startswith(b"PAR1"):
        raise BreakevenError(
            "{0}: " + shown + " is a Parquet file (SPEED-Bench's prepared test.parquet?); "
            'expected text: JSON Lines, e.g. python -c "import polars as pl; '
            "pl.read_parquet('test.parquet').write_ndjson('prompts.jsonl')\"",
            "prompts",
        )
    if b"\0" in data:
        raise BreakevenError(
            "{0}: " + shown + " is binary data (a NUL byte); expected text, a prompt per line",
            "prompts",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BreakevenError(
            "{0}: " + shown + f" is not UTF-8 text (byte {e.start})", "prompts"
        ) from None
    rows = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            rows.append(_json_row(line, f"{shown}, line {i}"))
        else:
            rows.append(PromptRow(line))
    if not rows:
        raise BreakevenError("{0}: " + shown + " holds no prompts", "prompts")
    return rows


def read_prompts(path: str) -> Prompts:
    """Prompts from a file (:func:`read_prompt_rows`): a list of the prompts, carrying their
    categories (:class:`Prompts`)."""
    rows = read_prompt_rows(path)
    prompts = Prompts(row.prompt for row in rows)
    prompts.categories = tuple(row.category for row in rows)
    return prompts
