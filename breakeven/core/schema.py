"""The one measurement schema: what a row of a measurements CSV means.

``breakeven ingest --out`` writes it, ``breakeven check`` reads it, and
docs/concepts/definitions.md documents it from :data:`MEASUREMENT_COLUMNS`.  A missing value is
empty in the CSV (NaN in pandas), never 0: a 0 is a measurement.

Conventions: ``tok_s`` is the decode rate of one sequence (per-sequence),
``aggregate_tok_s`` the rate of all running sequences together; they are
never mixed.  ``accept_len`` includes the bonus token.  ``num_spec_tokens`` is
k, and 0 marks a baseline run (no speculation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from breakeven.core.display import spreadsheet_text
from breakeven.core.quantities import as_percent


@dataclass(frozen=True)
class Column:
    """One column of the measurement schema."""

    name: str
    """Column header."""
    kind: str
    """'text', 'number' or 'integer'."""
    unit: str
    """Unit of the values ('-' for text and plain counts)."""
    definition: str
    """What the values mean."""
    lowest: float = 0.0
    """The smallest value a number of the column can be: every number the schema holds is a
    count, a rate, a time, a ratio or a fraction, none negative; an accept_len is at least 1."""
    highest: float = math.inf
    """The largest (finite) value a number of the column can be: a fraction is at most 1."""


MEASUREMENT_COLUMNS: tuple[Column, ...] = (
    Column("run_id", "text", "-", "identifies one benchmark run; repeated runs have their own ids"),
    Column("label", "text", "-", "a human name for the run, e.g. baseline or eagle3-k3"),
    Column(
        "timestamp",
        "text",
        "-",
        "when it was measured, ISO 8601 where the source gives a full date, else as printed",
    ),
    Column("engine", "text", "-", "vllm, sglang, trtllm, ... (lower case)"),
    Column("model", "text", "-", "the target model"),
    Column("hardware", "text", "-", "GPUs and interconnect, e.g. 8x RTX PRO 6000 PCIe"),
    Column(
        "concurrency",
        "number",
        "sequences",
        "requests decoded together (client max concurrency, or the engine's running requests)",
    ),
    Column(
        "num_spec_tokens", "integer", "tokens", "k, draft tokens per cycle; 0 marks a baseline run"
    ),
    Column(
        "spec_method",
        "text",
        "-",
        "eagle3, mtp, ngram, draft_model, medusa, ...; empty for a baseline",
    ),
    Column(
        "tok_s", "number", "tok/s", "decode rate of one sequence (per-sequence), prefill excluded"
    ),
    Column("aggregate_tok_s", "number", "tok/s", "decode rate of all running sequences together"),
    Column(
        "accept_len",
        "number",
        "tokens/cycle",
        "mean tokens emitted per cycle, bonus token included; 1 <= accept_len <= k + 1",
        lowest=1.0,
    ),
    Column(
        "acceptance_rate",
        "number",
        "-",
        "fraction of drafted tokens accepted, (accept_len - 1) / k, whatever the engine printed",
        highest=1.0,
    ),
    Column(
        "step_ms", "number", "ms", "plain decode step of one sequence (baseline runs: 1000 / tok_s)"
    ),
    Column("verify_ms", "number", "ms", "one target forward over k + 1 tokens"),
    Column("draft_ms", "number", "ms", "all drafting in one cycle"),
    Column("cycle_ms", "number", "ms", "one speculative cycle: draft + verify + overhead"),
    Column(
        "env",
        "text",
        "-",
        "key=value pairs separated by spaces: NCCL_* and CUDA_* variables, server flags, "
        "version; the run's environment fingerprint",
    ),
    Column("source", "text", "-", "where the row comes from: file:line, or a citation"),
)

# Columns check reads when present; ingest writes the ones it knows.
OPTIONAL_COLUMNS: tuple[Column, ...] = (
    Column(
        "origin",
        "text",
        "-",
        "client (a benchmark tool's view) or server (the engine's own log or metrics)",
    ),
    Column("tpot_ms", "number", "ms", "mean time per output token after the first, per request"),
    Column(
        "speedup",
        "number",
        "x",
        "a speedup as its source publishes it, for rows without absolute rates; check uses it "
        "as the measured speedup and then needs no baseline row",
    ),
    Column(
        "spec_topk",
        "integer",
        "branches",
        "a tree draft's branching: candidates kept at each draft step (SGLang's "
        "--speculative-eagle-topk); 1 or empty for a chain; num_spec_tokens is then the "
        "tree's depth in draft steps, so accept_len <= num_spec_tokens + 1",
    ),
    Column(
        "verify_tokens",
        "integer",
        "tokens",
        "tokens per sequence in the verify forward (SGLang's --speculative-num-draft-tokens); "
        "num_spec_tokens + 1 for a chain",
    ),
    Column(
        "itl_ms",
        "number",
        "ms",
        "mean inter-token latency between streamed chunks; under speculation a chunk carries "
        "about accept_len tokens, so itl_ms ~ accept_len x tpot_ms",
    ),
    Column(
        "model_config",
        "text",
        "-",
        "the path of the row's model's Hugging Face config.json, relative to the runs file's "
        "folder or absolute: fit's roofline form for that model, as fit --model-config",
    ),
    Column(
        "ttft_ms",
        "number",
        "ms",
        "a request's time to first token: from sending it to its first streamed token "
        "(queueing and prefill included)",
    ),
    Column(
        "e2e_ms",
        "number",
        "ms",
        "a request's end-to-end latency: from sending it to its last token (ttft_ms + decode time)",
    ),
    Column(
        "start_s",
        "number",
        "s",
        "when the request was sent, in seconds since its level began (bench): with e2e_ms "
        "it gives the level's duration, and so its goodput in requests per second",
    ),
    Column(
        "request_rate",
        "number",
        "req/s",
        "the level's offered request rate: requests sent per second on a schedule, whatever "
        "the server's progress (open loop: bench --request-rate); empty for a closed-loop "
        "level, whose load is its concurrency",
    ),
    Column(
        "completion_tokens",
        "number",
        "tokens",
        "tokens the server generated for the request (bench's rows); the first is the "
        "prefill's, the rest took the request's decode time, (completion_tokens - 1) / tok_s, "
        "so check pools the requests' rates as a ratio of sums",
    ),
    Column(
        "context_tokens",
        "number",
        "tokens",
        "mean tokens in the KV cache while the row decoded: a request's prompt and half its "
        "completion (bench, from the server's usage), or as the source gives it; fit groups "
        "runs by it, and runs at two or more fit how the step and the cycle grow with it",
    ),
    Column(
        "launch_id",
        "text",
        "-",
        "the server launch (one process start with one configuration and environment) the row "
        "was measured in: rows with the same launch_id ran in the same server process; empty "
        "when the source does not say",
    ),
    Column(
        "launched_at",
        "text",
        "-",
        "when that launch started, ISO 8601 (the server's process start time, or its log's "
        "launch line; a log date without a year is kept as printed)",
    ),
    Column(
        "env_from",
        "text",
        "-",
        "where env came from: server (the server process's own command line and environment, "
        "read on its host), file (a unit, docker inspect or KEY=VALUE file the user named), "
        "endpoints (what the server serves: its version and configuration, not its "
        "environment), log (the engine log's launch lines: its arguments, not its "
        "environment), client (only the client's side); empty: typed by hand, as written",
    ),
    Column(
        "num_drafts",
        "number",
        "cycles",
        "verify cycles that drafted in the row's interval (vLLM's spec_decode_num_drafts); "
        "a run's accept_len is pooled from counts, its rows' accept_len weighted by them",
    ),
    Column(
        "draft_tokens",
        "number",
        "tokens",
        "tokens the server drafted for the row's request (bench: llama.cpp's timings.draft_n, "
        "vLLM's and SGLang's per-request counts) or in its interval (a level's server row)",
    ),
    Column(
        "accepted_tokens",
        "number",
        "tokens",
        "of them, those the target accepted (no bonus token): accepted_tokens / draft_tokens "
        "is the acceptance rate, a workload category's pooled from its requests' counts",
    ),
    Column(
        "category",
        "text",
        "-",
        "the request's workload category (the prompts file's category: code, chat, math, "
        "writing, ...), empty where none",
    ),
    Column(
        "per_position",
        "text",
        "fraction",
        "acceptance at each draft position, [a_1, ..., a_k]: the fraction of the row's verify "
        "cycles whose i-th drafted token was accepted (vLLM's per-position acceptance rate); "
        "accept_len = 1 + a_1 + ... + a_k, and 1 + a_1 + ... + a_k' at a smaller k'",
    ),
    Column(
        "acceptance_histogram",
        "text",
        "cycles",
        "the request's verify cycles that accepted 0, 1, ..., k drafted tokens, joined by ; "
        "(bench, from vLLM's per-request metrics.speculative_decoding)",
    ),
    Column(
        "temperature",
        "number",
        "-",
        "the sampling temperature the requests were sent with (bench --temperature; 0: greedy); "
        "compare flags a pair measured with other sampling settings (sampling_differs)",
    ),
    Column(
        "top_p",
        "number",
        "fraction",
        "the nucleus sampling mass the requests were sent with (bench --top-p; 1: every token)",
        highest=1.0,
    ),
    Column(
        "max_tokens",
        "number",
        "tokens",
        "the most tokens a request was asked for (bench --max-tokens): with ignore_eos true, "
        "what each generated; else a cap, and completion_tokens says what each generated",
    ),
    Column(
        "ignore_eos",
        "text",
        "-",
        "true: each request was generated to max_tokens, past the end of its text (bench's "
        "default); false: each stopped where the model ended it (bench --no-ignore-eos)",
    ),
    Column(
        "node",
        "text",
        "-",
        "the cluster node that measured the row (breakeven sweep --ray: its Ray node id; its "
        "address and hostname are in env): each node runs the whole sweep, and rows of two "
        "nodes are never compared with each other; empty off a cluster",
    ),
)
SAMPLING_COLUMNS = ("temperature", "top_p", "max_tokens", "ignore_eos")
"""The sampling settings a bench row records (:meth:`breakeven.bench.config.Config.sampling`):
two runs measured with others are not a fair pair (``compare``'s ``sampling_differs``)."""

COLUMN_NAMES = tuple(c.name for c in MEASUREMENT_COLUMNS)
COUNTERS_OVER_LEVEL = "the server's counters over the level"
"""The end of the ``source`` of ``bench``'s server row: the server's counters read before and
after the level, so over the very requests its client rows timed; its rate is then the run's
(:func:`breakeven.model.pooling.adopt_server_rates`).  A log's windows are the server's too, but
sampled on its own clock, not over the client's requests."""

SPECULATIVE_SERVER = "speculating: k from the level's server row"
"""What bench adds to a request row's ``source`` where no k is given or told by the request,
and the server speculates (its ``/metrics`` showed spec-decode counters when the level began,
or the reply counted drafts): the level's row of ``origin=server`` gives the k.  A level
stopped before the scrape that writes that row keeps its request rows, which ``check`` then
reads as a speculative run of unknown k, never as a baseline."""
ALL_COLUMNS = {c.name: c for c in MEASUREMENT_COLUMNS + OPTIONAL_COLUMNS}
RANGED_COLUMNS = tuple(
    c.name
    for c in ALL_COLUMNS.values()
    if c.kind != "text" and (c.lowest, c.highest) != (0, math.inf)
)
"""The numeric columns whose range is narrower than >= 0: accept_len (>= 1) and
acceptance_rate (<= 1)."""


def first_bad_number(data: Any) -> tuple[str, int, float] | None:
    """The first cell, in row order, of a numeric schema column of ``data`` (a pandas
    DataFrame, numeric columns already numbers) that is not a finite number from the column's
    :attr:`~Column.lowest` to its :attr:`~Column.highest`: ``(column, row position, value)``,
    or None.  Empty cells (NaN) are fine: every number the schema holds is a count, a rate, a
    time, a ratio or a fraction, none of them negative or infinite; an accept_len counts the
    bonus token (at least 1) and an acceptance_rate is a fraction (at most 1)."""

    found: tuple[str, int, float] | None = None
    for column in data.columns:
        spec = ALL_COLUMNS.get(column)
        if spec is None or spec.kind == "text" or data[column].dtype.kind not in "fiub":
            continue
        values = data[column].to_numpy(dtype=float)
        # Its least and largest values first (NaN left out; all NaN: NaN): most columns hold
        # nothing out of range, and are then read once each way, not row by row.
        least, largest = (
            np.fmin.reduce(values, initial=np.nan),
            np.fmax.reduce(values, initial=np.nan),
        )
        if not (least < spec.lowest or largest > spec.highest or abs(largest) == math.inf):
            continue
        bad = np.isinf(values) | (values < spec.lowest) | (values > spec.highest)
        if bad.any():
            at = int(np.argmax(bad))
            if found is None or at < found[1]:
                found = (column, at, float(values[at]))
    return found


def bad_number_message(column: str, value: float) -> str:
    """What :func:`first_bad_number` found, in words, with the likely cause where one is known
    (an acceptance_rate written as a percent, an accept_len written as a per-token rate)."""
    spec = ALL_COLUMNS[column]
    if value < 0 or math.isinf(value) or (spec.lowest == 0 and spec.highest == math.inf):
        bounds = f"a finite number >= {spec.lowest:g}"
        if spec.highest < math.inf:
            bounds = f"a finite number from {spec.lowest:g} to {spec.highest:g}"
        return f"{column} is {value:g}, expected {bounds} [{spec.unit}] or empty"
    if value > spec.highest:
        fraction = as_percent(value)
        cause = (
            f": a percent? {value:g} reads as {fraction:.6g}"
            if fraction is not None
            else ": a fraction of the drafted tokens is at most 1"
        )
        return (
            f"{column} is {value:g}, expected a fraction from 0 to {spec.highest:g} or empty{cause}"
        )
    cause = ""
    if column == "accept_len":
        cause = ": it counts the bonus token, so it is at least 1"
        if value > 0:
            cause += "; a per-token rate? write it as acceptance_rate"
    return f"{column} is {value:g}, expected at least {spec.lowest:g} [{spec.unit}] or empty{cause}"


def text_column(name: str) -> bool:
    """Whether a measurements CSV's column holds text: the schema's text columns, and any
    column outside the schema (read back as text)."""
    spec = ALL_COLUMNS.get(name)
    return spec is None or spec.kind == "text"


def csv_row(texts: Sequence[bool], values: Sequence[Any]) -> list[Any]:
    """A row's cells as a measurements CSV holds them (``texts``: whether each column holds
    text, :func:`text_column`): text in a text column safe from a spreadsheet
    (:func:`~breakeven.core.display.spreadsheet_text`: a formula's start or a ``'`` start gets
    a ``'`` in front, which :func:`breakeven.iotools.csvfile.read_measurements` takes off),
    numbers as they are.  A carriage return in a text is written as a line feed: Python's
    csv writer (before 3.13) leaves a cell that holds a lone one unquoted, and a reader then
    ends the row there."""
    return [
        _csv_text(v) if text and isinstance(v, str) else v
        for text, v in zip(texts, values, strict=True)
    ]


def _csv_text(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return spreadsheet_text(text)
