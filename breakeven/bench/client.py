"""``breakeven bench``: measure decode rates against any OpenAI-compatible server.

Measure the baseline right before the server changes, in the same
environment, and record that environment with every row: the two mistakes of
the case study (a doubled ``/v1`` and a baseline from another launch) are what
this module exists to prevent.

For each request, streamed: time to first token (TTFT), the decode rate with
prefill excluded (``(tokens - 1) / (last token time - first token time)``),
the time per output token (TPOT), the number of streamed chunks and tokens per
chunk (under speculation one chunk carries several tokens), and the server's
usage counts.  For each concurrency level: the per-sequence and aggregate
rates with their spread, and ``accept_len`` from the change of the server's
spec-decode counters on ``/metrics``.  Rows are appended to a measurements CSV
as each request completes, so a crash or Ctrl-C loses nothing measured.

HTTP and server-sent events are handled by httpx and httpx-sse, the ``bench``
extra: ``pip install 'breakeven[bench]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import math
import os
import platform
import signal
import stat
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from breakeven.core.credentials import (
    MASK,
    AmbiguousURL,
    Redactor,
    hide_url_passwords,
    masked_url,
    shown_url,
    split_url,
)
from breakeven.core.errors import (
    BreakevenError,
    UnreadableInput,
    escape_braces,
    invalid_value,
    shorten,
)
from breakeven.core.provenance import is_secret_key, secret_name
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.core.schema import COLUMN_NAMES, COUNTERS_OVER_LEVEL, SPECULATIVE_SERVER
from breakeven.iotools.httpclient import require_http
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.metrics import shows_spec_decode_counters, spec_decode_series
from breakeven.iotools.paths import check_output_path, output_error
from breakeven.iotools.prometheus import parse_metrics
from breakeven.iotools.records import iso_timestamp
from breakeven.iotools.replies import Drafts, count, reply_drafts
from breakeven.iotools.server import (
    ACCEPT_ENCODING,
    ReplyError,
    ServerLaunch,
    bounded_bytes,
    endpoint_pairs,
    launch_metrics,
    local_server,
    read_bounded,
    read_head,
    read_server_env,
    started_iso,
    user_pairs,
)
from breakeven.iotools.sources import read_whole
from breakeven.render import printable

DEFAULT_PROMPTS = (
    "Explain how speculative decoding speeds up large language model inference.",
    "Write a short story about a lighthouse keeper who collects old maps.",
    "List the steps to profile a distributed training job and find its bottleneck.",
    "Describe the water cycle to a ten-year-old.",
)
# Columns of a bench CSV: the schema's, then what bench measures besides.
_FIRST_COLUMNS = (
    *COLUMN_NAMES,
    "origin",
    "tpot_ms",
    "itl_ms",
    "ttft_ms",
    "completion_tokens",
    "context_tokens",
    "chunks",
    "tokens_per_chunk",
    "tok_s_sd",
    "level_requests",
)
_TREE_AND_DRAFTS = (
    *_FIRST_COLUMNS,
    "spec_topk",
    "verify_tokens",
    "draft_tokens",
    "accepted_tokens",
)
_PER_REQUEST_DRAFTS = (*_TREE_AND_DRAFTS, "num_drafts", "acceptance_histogram")
_LAUNCH_COLUMNS = (*_PER_REQUEST_DRAFTS, "launch_id", "launched_at", "env_from")
BENCH_COLUMNS = (*_LAUNCH_COLUMNS, "category")
"""After the schema's and the timings: a tree's branches and verify tokens (``--topk``,
``--verify-tokens``); the tokens the server drafted and accepted for the request
(llama.cpp's ``timings``, vLLM's ``metrics.speculative_decoding``); and, where the server says
them per request (vLLM with ``--per-request-spec-decode-metrics``), its verify cycles that
drafted (``num_drafts``) and how many cycles accepted 0, 1, ... k drafted tokens
(``acceptance_histogram``, counts joined by ``;``); then the server's launch
(:mod:`breakeven.iotools.server`): ``launch_id``, ``launched_at`` and where ``env`` came from,
``env_from``; last, the request's workload ``category`` (the prompts file's, empty where none,
and on the level's server row)."""
HEADERS = (BENCH_COLUMNS, _LAUNCH_COLUMNS, _PER_REQUEST_DRAFTS, _TREE_AND_DRAFTS, _FIRST_COLUMNS)
"""Headers bench appends to: its own, and those of bench CSVs written before its last columns
(rows appended to such a file keep its columns)."""


def server_root(url: str) -> str:
    """The server's root URL from any of ``http://host:8000``, ``.../``, ``.../v1``, ``.../v1/``,
    without a user and password (requests carry those in a header).

    Endpoints are then ``root + "/v1/models"`` and so on: never ``/v1/v1/``.
    """
    shown = masked_url(url.strip())
    expected = "an http:// or https:// URL with a host, such as http://localhost:8000"
    try:
        bare, _ = split_url(url.strip())
        parts = urlsplit(bare)
        host = parts.hostname
    except AmbiguousURL as e:  # refused, never guessed: its password is not shown
        raise invalid_value("url", shown, f"{expected} ({e})") from None
    except ValueError:  # an unclosed IPv6 bracket, say
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise invalid_value("url", shown, expected)
    try:
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise invalid_value("url", shown, "a port number between 0 and 65535") from None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass
class RequestResult:
    """One streamed request."""

    ok: bool
    error: str = ""
    ttft_ms: float = math.nan
    decode_s: float = math.nan
    completion_tokens: int = 0
    first_chunk_tokens: float = 1.0
    chunks: int = 0
    chunk_gaps_ms: list[float] = field(default_factory=list)
    draft_tokens: int | None = None
    """Tokens the server drafted for the request (llama.cpp's ``timings.draft_n``, vLLM's
    ``metrics.speculative_decoding.num_draft_tokens``)."""
    accepted_tokens: int | None = None
    """Of them, accepted (``timings.draft_n_accepted``, ``num_accepted_draft_tokens``)."""
    num_drafts: int | None = None
    """Its verify cycles that drafted (vLLM's ``num_spec_steps``)."""
    acceptance_histogram: str | None = None
    """Its cycles that accepted 0, 1, ... k drafted tokens, joined by ``;`` (vLLM's
    ``acceptance_histogram``)."""
    num_spec_tokens: int | None = None
    """The server's k, where it says it per request (vLLM's ``num_spec_tokens``)."""
    prompt_tokens: int | None = None
    """The prompt's tokens, where the server's usage says them [tokens]."""

    @property
    def context_tokens(self) -> float:
        """The mean tokens in the request's KV cache while it decoded [tokens]: its prompt and
        half its completion (the cache grows by one token a step); NaN without the prompt's
        count."""
        if self.prompt_tokens is None:
            return math.nan
        return self.prompt_tokens + self.completion_tokens / 2

    @property
    def accept_len(self) -> float:
        """The request's own accept_len [tokens/cycle], ``1 + accepted / num_drafts``, where
        the server says both per request; else NaN."""
        if self.num_drafts and self.accepted_tokens is not None:
            return 1 + self.accepted_tokens / self.num_drafts
        return math.nan

    trailing_tokens: int = 0
    """Tokens after its last chunk with text [tokens] (they came after the decode time)."""

    @property
    def decoded_tokens(self) -> float:
        """Tokens between the first chunk and the last with text [tokens]: what the decode
        time streamed."""
        return self.completion_tokens - self.first_chunk_tokens - self.trailing_tokens

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first chunk over the time after it [tok/s]: prefill excluded."""
        decoded = self.decoded_tokens
        if decoded <= 0 or not self.decode_s > 0:
            return math.nan
        return decoded / self.decode_s

    @property
    def burst(self) -> bool:
        """Whether the request's output came in one burst: its decode time under
        :data:`BURST_SHARE` of its time to first token, at a rate over :data:`BURST_TOK_S`.
        Its chunks were held back (a server that sent them late, a proxy that buffered, a
        client that fell behind), so its decode time is not the server's.  (A short fast
        reply after a slow first token is no burst: 7 tokens decoded at 1 ms each after a
        first token of 200 ms are under the share and far under the rate.)
        (Chunks that came together mid-stream do not make a burst: the decode time runs from
        the first chunk to the last, which a late chunk between them does not move; leaving
        such requests out read 5-11% off the server's own rate where keeping them read
        0.1-0.5%.)"""
        decoded = self.decoded_tokens
        return (
            decoded > 0
            and self.decode_s < BURST_SHARE * self.ttft_ms / 1000.0
            and self.decode_s * BURST_TOK_S < decoded
        )

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first [ms]."""
        rate = self.decode_tok_s
        return 1000.0 / rate if rate > 0 else math.nan

    @property
    def itl_ms(self) -> float:
        """Mean gap between streamed chunks [ms]; about accept_len x TPOT under speculation."""
        return statistics.fmean(self.chunk_gaps_ms) if self.chunk_gaps_ms else math.nan


INTERRUPTED_SCRAPE_S = 3.0
"""How long a stopped level waits for its last ``/metrics`` scrape [s]."""

BURST_SHARE = 0.05
"""A request whose decode time is under this share of its time to first token came in one burst
[fraction] (:attr:`RequestResult.burst`): a decode of tens of tokens takes longer than a
twentieth of a prefill on any engine, where a burst's tokens arrive within a millisecond."""

BURST_TOK_S = 5000.0
"""A burst's tokens come faster than this [tok/s per sequence] (:attr:`RequestResult.burst`):
read from a buffer, 13,600-255,000 tok/s on a vLLM CPU server that held whole replies back,
where the fastest engines decode one sequence at 2,000-3,000."""

# Bounds of what one run may ask for: beyond them a run is a typing mistake, and would hold
# that many requests' results in memory.
MAX_REQUESTS = 1_000_000
MAX_CONCURRENCY = 10_000
MAX_TOKENS = 1_000_000
MAX_TIMEOUT_S = 86_400.0


@dataclass
class Config:
    """What to measure and how to label it."""

    url: str
    label: str
    model: str | None = None
    concurrency: Sequence[int] = (1,)
    max_tokens: int = 512
    requests: int | None = None  # per level; default 4 x concurrency, at least 8
    prompts: Sequence[str] = DEFAULT_PROMPTS
    categories: Sequence[str] | None = None
    """Each prompt's workload category, in the order of ``prompts`` ('' for none), written in
    each request's row; None: those ``prompts`` carries (:func:`read_prompts`'s
    :class:`Prompts`), else none."""
    chat: bool = False
    api_key: str | None = field(default=None, repr=False)  # never printed, never written
    num_spec_tokens: int | None = None
    spec_topk: int | None = None
    """A tree draft's branches per step [branches], stamped on every row."""
    verify_tokens: int | None = None
    """A tree's tokens per sequence in the verify forward [tokens], stamped on every row."""
    spec_method: str | None = None
    hardware: str | None = None
    env: str | None = None
    """More of the server's launch, as ``K=V`` pairs the client cannot see."""
    server_env_from: str | None = None
    """Where the server's environment is written, when bench cannot read its process: a
    process id, a systemd unit, a docker inspect JSON or a KEY=VALUE file."""
    ready_timeout_s: float = 120.0
    """How long the server may take to become ready (503 while loading, a stalled reply) [s]."""
    connect_timeout_s: float = 5.0
    """How long a connection may take [s]."""
    idle_timeout_s: float = 60.0
    """How long a request may go without a byte from the server [s]."""
    request_timeout_s: float = 600.0
    """How long one request may take in all [s] (a server that trickles bytes)."""
    ignore_eos: bool = True

    def __repr__(self) -> str:
        """The fields, the API key as ``***``, the URL's password as ``***`` (whatever it
        holds: :func:`breakeven.core.credentials.masked_url`) and the value of each ``env`` pair
        named like a secret as ``***``: a traceback or a log that shows a configuration shows
        no secret."""
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key" and value is not None:
                value = MASK
            elif f.name == "url" and isinstance(value, str):
                value = masked_url(value)
            elif f.name == "env" and isinstance(value, str):
                value = _masked_env(value)
            shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def check(self) -> None:
        server_root(self.url)
        for c in self.concurrency:
            if not isinstance(c, int) or not 1 <= c <= MAX_CONCURRENCY:
                raise invalid_value(
                    "concurrency", c, f"a whole number of requests from 1 to {MAX_CONCURRENCY:,}"
                )
        if not isinstance(self.max_tokens, int) or not 2 <= self.max_tokens <= MAX_TOKENS:
            raise invalid_value(
                "max_tokens",
                self.max_tokens,
                f"a whole number of tokens from 2 (so that a decode rate exists) to {MAX_TOKENS:,}",
            )
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            raise invalid_value(
                "requests", self.requests, f"a whole number from 1 to {MAX_REQUESTS:,}"
            )
        for name in ("ready_timeout_s", "connect_timeout_s", "idle_timeout_s", "request_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= MAX_TIMEOUT_S):
                raise invalid_value(name, value, f"seconds above 0 and at most {MAX_TIMEOUT_S:g}")
        if not self.prompts:
            raise BreakevenError("{0}: holds no prompts", "prompts")
        if self.categories is not None and (
            isinstance(self.categories, str)
            or len(self.categories) != len(self.prompts)
            or not all(isinstance(c, str) for c in self.categories)
        ):
            raise BreakevenError(
                "{0}: expected one category string per prompt "
                + escape_braces(f"({len(self.prompts)}), '' for none"),
                "categories",
            )

    def prompt_at(self, i: int) -> PromptRow:
        """The prompt of a level's ``i``-th request (the prompts in turn) and its category."""
        j = i % len(self.prompts)
        categories = self.categories
        if categories is None:
            categories = getattr(self.prompts, "categories", ())
        return PromptRow(self.prompts[j], categories[j] if j < len(categories) else "")

    def requests_at(self, concurrency: int) -> int:
        """Requests of the level at ``concurrency``."""
        return self.requests or max(8, 4 * concurrency)


def _masked_env(env: str) -> str:
    """``--env``'s pairs as a configuration's ``repr`` shows them: the value of one named like a
    secret (:func:`breakeven.core.provenance.is_secret_key`, :func:`~breakeven.core.provenance.secret_name`)
    as ``***``, a URL's password hidden."""
    words = []
    for word in env.split():
        name, eq, _ = word.partition("=")
        secret = eq and (is_secret_key(name) or secret_name(name))
        words.append(f"{name}={MASK}" if secret else word)
    return hide_url_passwords(" ".join(words))


def model_name(served: str | None) -> str | None:
    """The model as rows record it: the id the server serves, less the directories of a model
    file's path (llama.cpp serves ``-m /models/x.gguf`` as that path, unless ``--alias``)."""
    if served and served.lower().endswith(".gguf") and ("/" in served or "\\" in served):
        return served.replace("\\", "/").rsplit("/", 1)[-1]
    return served


def environment(
    root: str, model: str, version: str | None, launch: ServerLaunch | None = None
) -> str:
    """The launch written to every row: the server's own settings (``launch``: its arguments
    and environment, or its endpoints' configuration), model and version, then the URL and
    the client's host.  The URL and host are the client's choices, kept for provenance and
    left out of the fingerprint ``check`` compares
    (:func:`breakeven.core.provenance.is_client_key`).  The client's own environment is not
    recorded: the variables that tune a server are the server's."""
    pairs = list(launch.pairs) if launch is not None else []
    pairs += [f"model={model.replace(' ', '_')}"]
    if version:
        pairs.append(f"server_version={version}")
    pairs += [f"url={root}", f"client_host={platform.node()}"]
    return " ".join(pairs)


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


def _printable(text: str, limit: int, redact: Redactor) -> str:
    """Server text as it may be shown: redacted (``redact``, a :class:`Redactor`) before
    anything is cut, then printable (:func:`breakeven.render.printable`) and redacted
    again (a secret with control characters inside), at most ``limit`` long.  (Cut first, an
    echoed key kept 26 of its 43 characters: too few for the redactor to find the key.)"""
    text = redact(printable(redact(text, pieces=False)[: 4 * limit]))
    return text[:limit] + ("..." if len(text) > limit else "")


class _Malformed(Exception):
    """A reply that breaks the protocol: the request fails with this reason."""


def _prompt_tokens(chunk: Any) -> int | None:
    """The prompt's tokens an event's usage gives (None where it gives none)."""
    usage = chunk.get("usage") if isinstance(chunk, dict) else None
    return count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None


def _chunk_text(chunk: Any) -> tuple[str, int | None]:
    """The text of one streamed chunk and the usage's completion tokens (None if absent)."""
    if not isinstance(chunk, dict):
        raise _Malformed(f"a server-sent event that is not a JSON object: {type(chunk).__name__}")
    usage = chunk.get("usage")
    tokens = count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    choices = chunk.get("choices")
    if choices is None:
        return "", tokens
    if not isinstance(choices, list):
        raise _Malformed(f"'choices' is {type(choices).__name__}, expected a list")
    if not choices:
        return "", tokens
    first = choices[0]
    if not isinstance(first, dict):
        raise _Malformed(f"a choice is {type(first).__name__}, expected an object")
    text = first.get("text")
    if not text:
        delta = first.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    return (text if isinstance(text, str) else ""), tokens


class _Lines:
    """A stream's lines as its bytes come, each ended by CR, LF or CRLF (a CR that ends a
    piece waits for the next: it may begin a CRLF)."""

    def __init__(self) -> None:
        self.head: list[bytes] = []  # the line so far
        self.cr = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines that ``data`` ends."""
        if self.cr:
            data, self.cr = b"\r" + data, False
        if data.endswith(b"\r"):
            data, self.cr = data[:-1], True
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop()
        if lines:
            lines[0] = b"".join([*self.head, lines[0]])
            self.head = []
        if rest:
            self.head.append(rest)
        return lines

    def end(self) -> list[bytes]:
        """The line a CR that ended the stream ended (a line without an end is none)."""
        ended = [b"".join(self.head)] if self.cr else []
        self.head, self.cr = [], False
        return ended


async def _event_data(response: Any) -> AsyncIterator[str]:
    """The data of each server-sent event of a streamed reply as the event ends, read within
    bench's bound on a reply (:func:`~breakeven.iotools.server.bounded_bytes`, which raises
    :class:`ReplyError` past it: an endless line is never held whole).  As the event-stream
    rules say: an event's ``data`` lines joined by LF, ended by a blank line; one without
    data is no event; other fields and comments are not read."""
    lines = _Lines()
    data: list[bytes] = []
    pieces = bounded_bytes(response)
    async with contextlib.aclosing(pieces):
        while True:
            piece = await anext(pieces, None)
            for line in lines.feed(piece) if piece is not None else lines.end():
                if not line:
                    if data:
                        yield b"\n".join(data).decode("utf-8", errors="replace")
                        data = []
                    continue
                name, _, value = line.partition(b":")
                if name == b"data":
                    data.append(value[1:] if value.startswith(b" ") else value)
            if piece is None:
                return


@dataclass
class _Level:
    """What a concurrency level has measured so far."""

    concurrency: int
    started: float
    before: str | None
    results: list[RequestResult] = field(default_factory=list)
    streamed: int = 0  # tokens streamed to the level's requests so far
    written: int = 0

    @property
    def speculating(self) -> bool:
        """Whether the server showed spec-decode counters when the level began."""
        return self.before is not None and shows_spec_decode_counters(self.before)


CAUGHT_UP_GAP = 0.1
"""Chunks that came within this share of the request's median gap after the one before had
waited unread: the client (or the server's streaming process) was behind [fraction]."""


def _live_window(gaps: list[float]) -> tuple[int, int]:
    """The chunks (first, last: indexes) between which a request's stream was read as it was
    sent, from the gaps between its chunks with text [ms].

    A stream read late at its start brings its first chunk late and the tokens made meanwhile
    right after it, within :data:`CAUGHT_UP_GAP` of the median gap: the decode time from the
    first chunk is short by the delay (bench read 12% above vLLM's own rate).  The window then
    starts at the last of those chunks, the tokens before it not counted; likewise it ends
    before a final run of such chunks that came after a wait.  Chunks that came together
    mid-stream move neither end.  With fewer than 4 gaps, or no live window, the whole
    stream (a burst is told by :attr:`RequestResult.burst`).
    """
    n = len(gaps)
    if n < 4:
        return 0, n
    quick = [g < CAUGHT_UP_GAP * statistics.median(gaps) for g in gaps]
    first = 0
    while first < n and quick[first]:
        first += 1
    end = n
    while end > first and quick[end - 1]:
        end -= 1
    last = end - 1 if end < n else n  # before a final run that came after a wait
    return (first, last) if last > first else (0, n)


@dataclass
class _Timing:
    """One streamed request's tokens as they arrive: times from ``time.perf_counter`` [s],
    counts [tokens]."""

    start: float
    tokens_seen: int = 0  # the usage's count, or one per chunk without it
    usage_tokens: int | None = None  # the latest usage's completion tokens
    prompt_tokens: int | None = None  # the latest usage's prompt tokens
    times: list[float] = field(default_factory=list)  # when each chunk with text came
    seen: list[int] = field(default_factory=list)  # the tokens streamed up to each of them
    counted: bool = True  # whether every chunk with text came with its usage (a token count)
    drafts: Drafts = field(default_factory=Drafts)

    @property
    def chunks(self) -> int:
        """Chunks with text."""
        return len(self.times)

    def add(self, now: float, text: str, usage: int | None, drafts: Drafts) -> int:
        """Take one event that came at ``now`` [s]; returns the tokens it newly streamed."""
        if usage is not None:
            self.usage_tokens = usage
        if drafts.drafted is not None:
            self.drafts = drafts
        if not text:
            return 0
        if usage is None:
            self.counted = False
        seen = self.usage_tokens if self.usage_tokens is not None else self.tokens_seen + 1
        streamed = max(0, seen - self.tokens_seen)
        self.tokens_seen = seen
        self.times.append(now)
        self.seen.append(seen)
        return streamed

    def result(self, done: bool) -> RequestResult:
        """The request's record: failed if the stream ended before ``[DONE]`` (``done``
        false) or brought no tokens."""
        if not done:
            return RequestResult(False, "the stream ended before [DONE]")
        if not self.times:
            return RequestResult(False, "no tokens came back")
        total = self.usage_tokens if self.usage_tokens is not None else self.tokens_seen
        gaps = [1000.0 * (b - a) for a, b in zip(self.times, self.times[1:], strict=False)]
        # Without a token count in every chunk (llama.cpp streams none), a chunk may hold
        # several tokens: the stream is timed whole, its first chunk taken as the prefill's
        # one token and every token as come by its last chunk.
        first, last = _live_window(gaps) if self.counted else (0, len(gaps))
        seen = self.seen if self.counted else [1] + [total] * len(gaps)
        return RequestResult(
            True,
            ttft_ms=1000.0 * (self.times[0] - self.start),
            decode_s=self.times[last] - self.times[first],
            completion_tokens=total,
            prompt_tokens=self.prompt_tokens,
            # The first chunk's tokens arrive with the first token (prefill); decode is the
            # rest.  Without per-chunk usage a chunk counts one token: a speculating server
            # streams a verify cycle's tokens together, but its first token comes alone.
            first_chunk_tokens=seen[first],
            # Tokens after the last chunk timed (after the last with text: half a
            # character, a stop string) came after the decode time measured.
            trailing_tokens=max(0, total - seen[last]),
            chunks=self.chunks,
            chunk_gaps_ms=gaps,
            draft_tokens=self.drafts.drafted,
            accepted_tokens=self.drafts.accepted,
            num_drafts=self.drafts.steps,
            acceptance_histogram=self.drafts.histogram,
            num_spec_tokens=self.drafts.k,
        )


class Bench:
    """One benchmark session against one server."""

    def __init__(
        self, config: Config, on_result: Callable[[int, RequestResult], None] | None = None
    ):
        config.check()
        self.config = config
        self.root = server_root(config.url)
        _, auth = split_url(config.url.strip())
        if auth is not None and config.api_key:
            raise BreakevenError(
                "{0}: holds a user and password, and an API key is given too: "
                "a request carries one Authorization header; give one of them",
                "url",
            )
        self.auth = auth
        self.shown_root = shown_url(self.root, auth)
        self.redact = Redactor(config.api_key, auth=auth)
        self.on_result = on_result or (lambda level, result: None)
        self.httpx, self.httpx_sse = require_http()
        self.headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self.model = config.model
        self.version: str | None = None
        self.engine = "openai-compatible"
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.told = 0  # the warnings a level's summary has carried (before the first: none)
        self.loading = False  # the last /v1/models reply was 503
        self.started = ""
        self.env = ""
        self.served: dict[str, Any] | None = None  # /props or /get_server_info
        self.launch = ServerLaunch()
        self.launch_id = ""
        self.launched_at = ""

    def _client(self) -> Any:
        c = self.config
        timeout = self.httpx.Timeout(
            connect=c.connect_timeout_s,
            read=c.idle_timeout_s,
            write=c.idle_timeout_s,
            pool=c.request_timeout_s,
        )
        limits = self.httpx.Limits(max_connections=max(c.concurrency) + 2)
        auth = self.httpx.BasicAuth(*self.auth) if self.auth else None
        # Only the encodings read within bench's bound on a reply (bounded_bytes): a server's
        # gzip is decoded a step at a time, never whole.
        headers = {**self.headers, "Accept-Encoding": ACCEPT_ENCODING}
        return self.httpx.AsyncClient(timeout=timeout, headers=headers, limits=limits, auth=auth)

    async def _get(self, client: Any, path: str) -> Any:
        """``GET`` of the server's ``path``, its body read within bench's bound on a reply
        (:func:`~breakeven.iotools.server.read_bounded`; past it, :class:`ReplyError`): a
        reply whose ``text`` and ``json()`` are its decoded body's."""
        async with client.stream("GET", self.root + path) as response:
            body = await read_bounded(response)
        headers = [
            (key, value)
            for key, value in response.headers.multi_items()
            if key.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return self.httpx.Response(
            response.status_code, headers=headers, content=body, request=response.request
        )

    def _error(self, message: str, name: str = "url") -> BreakevenError:
        """A readiness error: redacted, one line, naming ``name``."""
        text = escape_braces(self.redact(message))
        return BreakevenError("{0}: " + text, name)

    def _timeout_reason(self, e: BaseException) -> str:
        c = self.config
        if isinstance(e, self.httpx.ConnectTimeout):
            return f"no connection within {c.connect_timeout_s:g} s (--connect-timeout)"
        if isinstance(e, self.httpx.PoolTimeout):
            return f"no free connection within {c.request_timeout_s:g} s (--request-timeout)"
        return f"the server sent nothing for {c.idle_timeout_s:g} s (--idle-timeout)"

    async def probe(self, client: Any) -> None:
        """Wait until the server serves its models; say precisely what is wrong if it never does.

        The whole wait, a stalled reply included, is bounded by ``ready_timeout_s``.
        """
        c = self.config
        url = self.shown_root + "/v1/models"
        try:
            response = await asyncio.wait_for(self._models(client), c.ready_timeout_s)
        except asyncio.TimeoutError:
            if self.loading:
                raise self._error(
                    f"{url} still answers 503 (loading) after "
                    f"{c.ready_timeout_s:g} s (--ready-timeout)"
                ) from None
            raise self._error(
                f"{url} sent no reply within {c.ready_timeout_s:g} s (--ready-timeout)"
            ) from None
        served = self._served(response, url)
        if self.model is None:
            if not served:
                raise self._error(f"the server lists no models at {url}")
            self.model = served[0]
        elif self.model not in served:
            listed = ", ".join(repr(self.redact(s)) for s in served) or "nothing"
            raise self._error(
                f"the server does not serve {self.model!r}; it serves {listed}", "model"
            )
        await self._identify(client)

    async def _models(self, client: Any) -> Any:
        """The first reply of ``/v1/models`` that is not 503 (loading)."""
        url = self.shown_root + "/v1/models"
        while True:
            try:
                response = await self._get(client, "/v1/models")
            except ReplyError as e:
                raise self._error(f"{url}: {e}") from None
            except self.httpx.ConnectError as e:
                reason = str(e) or type(e).__name__
                if (
                    "Name or service not known" in reason
                    or "nodename nor servname" in reason
                    or "getaddrinfo" in reason
                ):
                    why = f"the host name does not resolve ({reason})"
                else:
                    why = f"the connection was refused or failed ({reason}): is the server running?"
                raise self._error(f"cannot reach {url}: {why}") from None
            except self.httpx.TimeoutException as e:
                raise self._error(f"{url}: {self._timeout_reason(e)}") from None
            except self.httpx.HTTPError as e:  # a reset, a broken reply
                raise self._error(
                    f"{url}: the connection failed while reading the reply "
                    f"({type(e).__name__}: {_printable(str(e), 120, self.redact)})"
                ) from None
            self.loading = response.status_code == 503
            if self.loading:
                await asyncio.sleep(0.5)
                continue
            return response

    def _served(self, response: Any, url: str) -> list[str]:
        """The model ids a ``/v1/models`` reply lists."""
        status = response.status_code
        if status == 404:
            hint = (
                " The URL holds /v1 twice: give the server root or one /v1."
                if "/v1/v1/" in url
                else " Is this an OpenAI-compatible server, and is the URL's path its root?"
            )
            raise self._error(f"404 Not Found for {url}.{hint}")
        if status in (401, 403):
            raise self._error(f"{status} from {url}: give the API key with --api-key-env")
        if status != 200:
            raise self._error(f"{status} from {url}: {_printable(response.text, 200, self.redact)}")
        try:
            body = loads_bounded(response.content, what="the answer")
        except ValueError:
            raise self._error(
                f"{url} answered with a body that is not JSON "
                f"({_printable(response.text, 80, self.redact)!r}): is this an "
                "OpenAI-compatible server?"
            ) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._error(
                f'{url} answered JSON without a list of models under "data" (a '
                f"{type(body).__name__}): is this an OpenAI-compatible server?"
            )
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    async def _identify(self, client: Any) -> None:
        """The engine and its version, where the server says (a few seconds at most):
        llama.cpp's ``/props`` (``build_info``), vLLM's ``/version``, SGLang's
        ``/get_server_info`` (``version``)."""
        for path, engine, key in (
            ("/props", "llamacpp", "build_info"),
            ("/version", "vllm", "version"),
            ("/get_server_info", "sglang", "version"),
        ):
            try:
                reply = await asyncio.wait_for(
                    self._get(client, path), min(5.0, self.config.request_timeout_s)
                )
                body = loads_bounded(reply.content) if reply.status_code == 200 else None
            except (self.httpx.HTTPError, ValueError, asyncio.TimeoutError):
                continue
            if isinstance(body, dict) and isinstance(body.get(key), (str, int, float)):
                self.version = _printable(str(body[key]), 40, self.redact).replace(" ", "_")
                self.engine = engine
                self.served = body
                break

    async def _find_launch(self, client: Any) -> None:
        """The server's launch: its settings (from its own process on this host, else the
        file named by ``server_env_from``, else what its endpoints serve), its start and so
        its identity (``launch_id``: the server's address and start, to the second)."""
        metrics = await self.scrape(client)
        started, cache = launch_metrics(metrics)
        served = endpoint_pairs(self.engine, self.served, cache, self.redact)
        parts = urlsplit(self.root)
        if self.config.server_env_from:
            launch = read_server_env(self.config.server_env_from)
        else:
            launch = local_server(parts.hostname or "", parts.port or _default_port(parts.scheme))
        if launch is None or not launch.pairs:
            note = launch.note if launch is not None else ""
            launch = ServerLaunch(env_from="endpoints", where=f"{self.shown_root}", note=note)
        launch = ServerLaunch(
            (*launch.pairs, *served, *user_pairs(self.config.env)),
            launch.env_from,
            launch.started if launch.started is not None else started,
            launch.where,
            launch.note,
        )
        self.launch = launch
        self.launched_at = started_iso(launch.started)
        pid = launch.where.split()[1] if launch.where.startswith("pid ") else ""
        # A launch's start to the second, and its process where known: two launches on one
        # port a second apart (a fast test server) are still two.
        ident = f"{parts.netloc}@{self.launched_at}" + (f"#{pid}" if pid else "")
        self.launch_id = ident if self.launched_at else ""
        if launch.note:
            self.warn(launch.note)

    def launch_summary(self) -> dict[str, Any]:
        """The server's launch as the rows record it, and where its fingerprint came from."""
        return {
            "launch_id": self.launch_id or None,
            "launched_at": self.launched_at or None,
            "env_from": self.launch.env_from,
            "read_from": self.launch.where,
            "settings": len(self.launch.pairs),
        }

    def _payload(self, prompt: str) -> tuple[str, dict[str, Any]]:
        c = self.config
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": c.max_tokens,
            "stream": True,
            "temperature": 0.0,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if c.ignore_eos:
            body["ignore_eos"] = True
        if self.engine == "sglang":
            # SGLang sends a request's draft counts (sglext.spec_tokens_details, read by
            # reply_drafts) only when asked (python/sglang/srt/entrypoints/openai/protocol.py,
            # return_spec_tokens_details on CompletionRequest and ChatCompletionRequest);
            # an SGLang without the field ignores it (pydantic's default).  Not sent to other
            # servers: trtllm-serve refuses unknown fields (OpenAIBaseModel extra="forbid").
            # (return_meta_info would not do: python/sglang/srt/entrypoints/openai/
            # serving_chat.py refuses it with stream=true.)
            body["return_spec_tokens_details"] = True
        if c.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", body
        body["prompt"] = prompt
        return "/v1/completions", body

    async def one_request(
        self, client: Any, prompt: str, level: _Level | None = None
    ) -> RequestResult:
        """Stream one request and time its tokens; any fault is a failed request with a reason
        (redacted), never an exception.  ``request_timeout_s`` bounds the whole request."""
        try:
            return await asyncio.wait_for(
                self._stream(client, prompt, level), self.config.request_timeout_s
            )
        except asyncio.TimeoutError:
            return RequestResult(
                False,
                f"the request took longer than "
                f"{self.config.request_timeout_s:g} s (--request-timeout)",
            )

    async def _stream(self, client: Any, prompt: str, level: _Level | None) -> RequestResult:
        """One request, streamed and timed; a fault is a failed request with its reason."""
        path, body = self._payload(prompt)
        url = self.shown_root + path
        timing = _Timing(time.perf_counter())
        try:
            async with self.httpx_sse.aconnect_sse(
                client, "POST", self.root + path, json=body
            ) as source:
                if source.response.status_code != 200:
                    return await self._refused(source.response, url)
                try:
                    done = await self._read_events(source.response, timing, level)
                except (_Malformed, ReplyError) as e:
                    return RequestResult(False, str(e))
        except self.httpx.TimeoutException as e:
            return RequestResult(False, self._timeout_reason(e))
        except (self.httpx.HTTPError, self.httpx_sse.SSEError) as e:
            reason = _printable(str(e), 200, self.redact)
            return RequestResult(False, f"{type(e).__name__} mid-stream: {reason}")
        return timing.result(done)

    async def _refused(self, response: Any, url: str) -> RequestResult:
        """The failed request of a reply other than 200, with its body (redacted, shortened)."""
        try:  # its beginning only: 64 KiB, of which 200 characters are shown
            head = await read_head(response, 1 << 16)
        except ReplyError as e:
            return RequestResult(False, f"HTTP {response.status_code} from {url}: {e}")
        body = head.decode(response.encoding or "utf-8", errors="replace")
        text = _printable(body, 200, self.redact)
        return RequestResult(False, f"HTTP {response.status_code} from {url}: {text}")

    async def _read_events(self, response: Any, timing: _Timing, level: _Level | None) -> bool:
        """Time the stream's events until ``[DONE]``; returns whether it came.  Each token
        streamed counts in ``level``; raises :class:`_Malformed` for an event off the protocol,
        :class:`ReplyError` for a stream past bench's bound on a reply (:func:`_event_data`)."""
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "text/event-stream":
            shown = _printable(kind, 80, self.redact)
            raise _Malformed(f"a reply of Content-Type {shown!r}, not text/event-stream")
        async with contextlib.aclosing(_event_data(response)) as events:
            async for data in events:
                if data.strip() == "[DONE]":
                    return True
                now = time.perf_counter()
                text, usage, drafted, prompt = self._event(data)
                if prompt is not None:
                    timing.prompt_tokens = prompt
                streamed = timing.add(now, text, usage, drafted)
                if level is not None:
                    level.streamed += streamed
        return False

    def _event(self, data: str) -> tuple[str, int | None, Drafts, int | None]:
        """One server-sent event's text, its usage's completion tokens, what it says of the
        request's drafts (:func:`~breakeven.iotools.replies.reply_drafts`) and its usage's prompt tokens."""
        try:
            chunk = loads_bounded(data, what="the event")
            text, usage = _chunk_text(chunk)
            drafted = reply_drafts(chunk)
        except ValueError:  # UnreadableInput too: not JSON, nested too deep
            shown = _printable(data, 80, self.redact)
            raise _Malformed(f"malformed server-sent event: {shown!r}") from None
        return text, usage, drafted, _prompt_tokens(chunk)

    async def scrape(self, client: Any) -> str | None:
        """The server's ``/metrics`` text, or None (absent, failing, not in time, or past
        bench's bound on a reply: then a warning says so)."""
        try:
            response = await asyncio.wait_for(
                self._get(client, "/metrics"), min(10.0, self.config.request_timeout_s)
            )
        except (self.httpx.HTTPError, asyncio.TimeoutError):
            return None
        except ReplyError as e:
            self.warn(
                f"{self.shown_root}/metrics: {e}; accept_len and the server's own rates are "
                "left empty"
            )
            return None
        return response.text if response.status_code == 200 else None

    async def level(self, client: Any, concurrency: int, write: Callable[[dict], None]) -> dict:
        """Run one concurrency level, writing each request's row as it completes, then the
        level's server row (its counters' change over the level).

        ``/metrics`` is read only before and after the level, never while its requests
        stream: a vLLM server builds ``/metrics`` in the process that streams the replies,
        and a scrape between requests held the next request's first token back (first tokens
        of 1.7-3.1 s, then bursts, on this suite's CPU server), so the client measured the
        scrape.  A row's level columns (aggregate_tok_s, tok_s_sd, level_requests) describe
        the level from its start to that row's completion; its accept_len is the request's
        own where the server says it per request, else empty: the level's is the server
        row's.  An interruption (Ctrl-C, SIGTERM) loses only the requests in flight: the
        server row of the level so far is written first (one scrape, at most a few seconds).
        """
        c = self.config
        n = c.requests_at(concurrency)
        warned = self.told  # and those said before the first level (its launch, its scrape)
        level = _Level(concurrency, time.perf_counter(), await self.scrape(client))
        queued = iter(range(n))  # prompts are taken as requests start: nothing grows with n
        speculating = level.speculating

        async def worker() -> None:
            for i in queued:
                prompt, category = c.prompt_at(i)
                result = await self.one_request(client, prompt, level)
                level.results.append(result)
                self.on_result(concurrency, result)
                if not result.ok:
                    self.failures.append(f"concurrency {concurrency}: {self.redact(result.error)}")
                elif not math.isnan(result.decode_tok_s):
                    row = self._row(
                        concurrency, level.written, result, _summary(level), category, speculating
                    )
                    write(row)
                    level.written += 1

        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        except asyncio.CancelledError:
            # Stopped: the level's counters so far, read once (briefly), are not lost.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                after = await asyncio.wait_for(self.scrape(client), INTERRUPTED_SCRAPE_S)
                self._close_level(level, after, write)
            raise
        summary = self._close_level(level, await self.scrape(client), write)
        self._warn_no_counters(concurrency, level.before, summary.pop("_after"), summary)
        if summary["bursts"]:
            self.warn(_burst_warning(concurrency, summary))
        summary["launch"] = self.launch_summary()
        if len(self.warnings) > warned:
            summary["warnings"] = self.warnings[warned:]
        self.told = len(self.warnings)
        return summary

    def _close_level(
        self, level: _Level, after: str | None, write: Callable[[dict], None]
    ) -> dict[str, Any]:
        """The level's summary with its counters' change since its start (``after``, a
        scrape), and its server row written where the counters tell something."""
        concurrency = level.concurrency
        summary = _summary(level)
        summary.update(self._acceptance(level.before, after))
        server = self._server_view(level.before, after, summary["requests"] - summary["failed"])
        if server:
            summary["server"] = server
            write(self._server_row(concurrency, summary, server))
            self._warn_disagreement(concurrency, summary["tok_s"], server.get("tok_s"))
        summary["_after"] = after
        return summary

    def _records(
        self, before: str | None, after: str | None, requests: int | None = None
    ) -> list[dict[str, Any]]:
        """The change of the server's counters over a level (:mod:`breakeven.iotools.prometheus`)."""
        if before is None or after is None:
            return []
        try:
            return parse_metrics(
                after,
                before,
                source="bench",
                num_spec_tokens=self.config.num_spec_tokens,
                requests=requests,
            )
        except ImportError:
            self.warn(
                "reading /metrics needs prometheus_client: pip install 'breakeven[bench]'; "
                "accept_len and the server's own rates are left empty"
            )
        except ValueError:
            self.warn(
                f"{self.shown_root}/metrics is not Prometheus text: accept_len and the "
                "server's own rates are left empty"
            )
        return []

    def _acceptance(self, before: str | None, after: str | None) -> dict[str, Any]:
        return _acceptance(self._records(before, after))

    def _server_view(self, before: str | None, after: str | None, requests: int) -> dict[str, Any]:
        """The level as the server's counters saw it over its ``requests`` (those that
        finished): its own rate and step or cycle where they tell them (llama.cpp's
        generation time, vLLM's decode-time histograms), and its acceptance, pooled over the
        whole level.  Empty where they tell neither."""
        keys = (
            "tok_s",
            "step_ms",
            "cycle_ms",
            "accept_len",
            "acceptance_rate",
            "num_spec_tokens",
            "num_drafts",
            "draft_tokens",
            "accepted_tokens",
        )
        for r in self._records(before, after, requests):
            timed = r.get("tok_s") is not None and (r.get("step_ms") or r.get("cycle_ms"))
            accepted = r.get("accept_len") is not None and not math.isnan(r["accept_len"])
            if timed or accepted:
                return {key: r.get(key) for key in keys if r.get(key) is not None}
        return {}

    def _warn_disagreement(self, concurrency: int, client: float, server: Any) -> None:
        """A warning where the level's per-sequence rate and the server's own differ by more
        than :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`: one of them did not measure
        decoding (a client that fell behind its streams, or requests of others)."""
        if not isinstance(server, float) or not (client > 0 and server > 0):
            return
        if abs(client / server - 1) > DEFAULT_TOLERANCE:
            self.warn(
                f"at concurrency {concurrency} the client measured {client:.4g} tok/s per "
                f"sequence and the server's counters {server:.4g} ({client / server - 1:+.0%}): "
                "other requests on the server, or a client that fell behind its streams?"
            )

    def warn(self, message: str) -> None:
        """One warning line for the command to print (each said once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def _warn_no_counters(
        self, concurrency: int, before: str | None, after: str | None, summary: dict[str, Any]
    ) -> None:
        """Why a level given ``-k`` has no accept_len, as it is: ``/metrics`` answered nothing,
        has no spec-decode series, or has them and they did not move (nothing was drafted
        at this level: ngram drafts only where a prompt repeats itself)."""
        k = self.config.num_spec_tokens
        if not k or summary.get("accept_len") is not None:
            return
        where = f"{self.shown_root}/metrics"
        series = spec_decode_series()
        # llama-server shows them only when started so; another engine's flags differ.
        hint = (
            " (llama-server needs --metrics and --spec-type)"
            if self.engine in ("llamacpp", "openai-compatible")
            else ""
        )
        if before is None or after is None:
            why = "answers nothing"
        elif any(name.rstrip("*") in after for name in series):
            why = (
                "has spec-decode counters that did not move (nothing was drafted: is a draft set?)"
            )
            hint = ""
        else:
            why = f"shows no spec-decode counters ({', '.join(series)})"
        self.warn(
            f"-k {k} was given, but {where} {why}: accept_len is left empty at "
            f"concurrency {concurrency}{hint}"
        )

    def _row(
        self,
        concurrency: int,
        i: int,
        r: RequestResult,
        level: dict,
        category: str = "",
        speculating: bool = False,
    ) -> dict[str, Any]:
        c = self.config
        # Written as the request completes, so nothing in it waits for /metrics: its level
        # columns (aggregate_tok_s, tok_s_sd, level_requests) are the client's, the level from
        # its start to this request; its accept_len, acceptance_rate and num_drafts are the
        # request's own (the server's per-request counts) or empty; the level's from its
        # counters (accept_len, acceptance_rate, num_drafts, step_ms, cycle_ms, the server's
        # tok_s, and k where -k is not given) are in its server row, written after the scrape
        # that closes it, from which check, compare and fit give them to these rows.  A level
        # killed before that scrape keeps these rows and has no server row.
        # k: as given, else the request's own (vLLM's per-request metrics), else the level's
        # server row says it (check takes it from there).
        k = c.num_spec_tokens if c.num_spec_tokens is not None else r.num_spec_tokens
        # A burst's decode time is not the server's (its chunks were held back): its row keeps
        # the request (tokens, first token) with no rate, which pooling would otherwise count
        # as tokens decoded in no time (a CI run's baseline read 23,016 tok/s where the
        # server's counters said 338.65, and check called speculation 55x slower).
        timed = not r.burst
        source = f"bench {self.shown_root} concurrency {concurrency} request {i + 1}"
        if k is None and (speculating or (r.draft_tokens or 0) > 0):
            source += f"; {SPECULATIVE_SERVER}"
        row = {
            "run_id": f"{c.label}-c{concurrency}-{self.started}",
            "label": c.label,
            "timestamp": iso_timestamp(time.time()),
            "engine": self.engine,
            "model": model_name(self.model),
            "hardware": c.hardware,
            "concurrency": concurrency,
            "num_spec_tokens": k,
            "spec_method": c.spec_method,
            "spec_topk": c.spec_topk,
            "verify_tokens": c.verify_tokens,
            "tok_s": r.decode_tok_s if timed else None,
            "aggregate_tok_s": level["aggregate_tok_s"],
            **self._row_acceptance(r),
            "env": self.env,
            "source": source if timed else f"{source} (came in one burst: no rate)",
            "origin": "client",
            "tpot_ms": r.tpot_ms if timed else None,
            "itl_ms": r.itl_ms if timed else None,
            "ttft_ms": r.ttft_ms,
            "completion_tokens": r.completion_tokens,
            "context_tokens": r.context_tokens if math.isfinite(r.context_tokens) else None,
            "chunks": r.chunks,
            "tokens_per_chunk": r.completion_tokens / r.chunks if r.chunks else None,
            "tok_s_sd": level["tok_s_sd"],
            "level_requests": level["requests"],
            "draft_tokens": r.draft_tokens,
            "accepted_tokens": r.accepted_tokens,
            "num_drafts": r.num_drafts,
            "acceptance_histogram": r.acceptance_histogram,
            **self._launch_columns(),
            "category": category,
        }
        return {key: self.redact(v) if isinstance(v, str) else v for key, v in row.items()}

    def _launch_columns(self) -> dict[str, Any]:
        return {
            "launch_id": self.launch_id,
            "launched_at": self.launched_at,
            "env_from": self.launch.env_from,
        }

    @staticmethod
    def _row_acceptance(r: RequestResult) -> dict[str, Any]:
        """A request row's accept_len and acceptance_rate, its own where the server says them
        per request, else empty (the level's are its server row's: ``/metrics`` is not read
        while the level runs).  Its accept_len needs its verify cycles (vLLM's per-request
        metrics, SGLang's ``spec_verify_ct``: ``num_drafts`` then weighs it when rows are
        pooled); its acceptance_rate only its drafted and accepted tokens, which llama.cpp's
        ``timings`` give too (without cycles: check and compare pool its accept_len from
        them, :func:`breakeven.model.pooling.request_drafts`)."""
        drafted, accepted = r.draft_tokens, r.accepted_tokens
        own_rate = drafted and accepted is not None and accepted <= drafted
        return {
            "accept_len": None if math.isnan(r.accept_len) else r.accept_len,
            "acceptance_rate": accepted / drafted if own_rate else None,
        }

    def _server_row(self, concurrency: int, level: dict, server: dict[str, Any]) -> dict[str, Any]:
        """The level as the server's counters saw it (``origin=server``): its per-sequence
        rate, and its own decode step (a baseline) or cycle (a speculative run), where they
        tell them; its acceptance over the whole level, the verify cycles that drafted, and
        the tokens they drafted and accepted."""
        c = self.config
        k = c.num_spec_tokens if c.num_spec_tokens is not None else server.get("num_spec_tokens")
        row = {
            "run_id": f"{c.label}-c{concurrency}-{self.started}",
            "label": c.label,
            "timestamp": iso_timestamp(time.time()),
            "engine": self.engine,
            "model": model_name(self.model),
            "hardware": c.hardware,
            "concurrency": concurrency,
            "num_spec_tokens": k if k is not None else 0,
            "spec_method": c.spec_method,
            "spec_topk": c.spec_topk,
            "verify_tokens": c.verify_tokens,
            "tok_s": server.get("tok_s"),
            "accept_len": server.get("accept_len"),
            "acceptance_rate": server.get("acceptance_rate"),
            "num_drafts": _whole(server.get("num_drafts")),
            # The level's drafted and accepted tokens: its drafted tokens per cycle give a
            # request's cycles where the server counts only its tokens (llama.cpp's timings).
            "draft_tokens": _whole(server.get("draft_tokens")),
            "accepted_tokens": _whole(server.get("accepted_tokens")),
            "step_ms": server.get("step_ms"),
            "cycle_ms": server.get("cycle_ms"),
            "env": self.env,
            "source": f"bench {self.shown_root}/metrics concurrency {concurrency}: "
            + COUNTERS_OVER_LEVEL,
            "origin": "server",
            "level_requests": level["requests"],
            **self._launch_columns(),
        }
        return {key: self.redact(v) if isinstance(v, str) else v for key, v in row.items()}

    async def run(self, write: Callable[[dict], None]) -> list[dict]:
        async with self._client() as client:
            await self.probe(client)
            self.started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            await self._find_launch(client)
            self.env = environment(self.shown_root, self.model, self.version, self.launch)
            return [await self.level(client, c, write) for c in self.config.concurrency]


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _acceptance(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The level's acceptance in the first record that has one (none: {})."""
    for r in records:
        if r.get("accept_len") is not None and not math.isnan(r["accept_len"]):
            return {
                "accept_len": r["accept_len"],
                "acceptance_rate": r.get("acceptance_rate"),
                "num_spec_tokens": r.get("num_spec_tokens"),
                "per_position": r.get("per_position"),
            }
    return {}


def _whole(count: Any) -> Any:
    """A count read from /metrics (a float there) as an int where it is whole."""
    return int(count) if isinstance(count, float) and count.is_integer() else count


def _burst_warning(concurrency: int, summary: dict[str, Any]) -> str:
    """What a level's bursts mean for its rate: left out of ``tok_s``, or, where every request
    came in one, no client rate at all (``tok_s`` empty) and the server's own instead."""
    bursts, done = summary["bursts"], summary["requests"] - summary["failed"]
    what = (
        f"{bursts} of {done} requests at concurrency {concurrency} came in one burst (decode "
        f"time under {BURST_SHARE:.0%} of their time to first token: their chunks were held "
        "back, by the server or on the way, or waited unread)"
    )
    if bursts < done:
        return what + "; they are left out of tok_s"
    server = summary.get("server", {}).get("tok_s")
    instead = (
        f"; the server's own counters give {server:.4g} tok/s per sequence (its server row)"
        if isinstance(server, float) and server > 0
        else ""
    )
    return f"{what}: the client measured no decode rate at this level (tok_s empty){instead}"


def _summary(level: _Level) -> dict[str, Any]:
    """A level so far: its request counts, per-sequence decode rate and spread, bursts, and
    aggregate rate.

    ``tok_s`` is a ratio of sums, the tokens the requests decoded over their decode time
    [tok/s], never a mean of per-request rates (one request with a decode time near 0 would
    read as 100,000 tok/s and carry the mean).  Requests that came in one burst
    (:attr:`RequestResult.burst`) are counted in ``bursts`` and left out of it and of the
    spread: ``tok_s_median`` and ``tok_s_iqr`` (the per-request rates' median and
    interquartile range) and ``tok_s_sd``.  ``aggregate_tok_s`` is the tokens streamed to all
    its requests since it started over that time.
    """
    results = level.results
    good = [r for r in results if r.ok and not math.isnan(r.decode_tok_s)]
    steady = [r for r in good if not r.burst]
    rates = sorted(r.decode_tok_s for r in steady)
    seconds = sum(r.decode_s for r in steady)
    wall_s = time.perf_counter() - level.started
    quartiles = statistics.quantiles(rates, n=4, method="inclusive") if len(rates) > 1 else None
    return {
        "concurrency": level.concurrency,
        "requests": len(results),
        "failed": len(results) - len(good),
        "bursts": len(good) - len(steady),
        "tok_s": sum(r.decoded_tokens for r in steady) / seconds if seconds > 0 else math.nan,
        "tok_s_median": statistics.median(rates) if rates else math.nan,
        "tok_s_iqr": quartiles[2] - quartiles[0] if quartiles else math.nan,
        "tok_s_sd": statistics.stdev(rates) if len(rates) > 1 else math.nan,
        "aggregate_tok_s": level.streamed / wall_s if wall_s > 0 else math.nan,
    }


class RowWriter:
    """Appends rows to a measurements CSV, each flushed to disk as it is written.

    Every write (the header of a new file, then each row) is one append under an
    exclusive lock on the file, so concurrent benches writing one file give one
    header and whole rows; a crash keeps every row written.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.rows = 0
        self.fd: int | None = None
        self.columns: tuple[str, ...] = BENCH_COLUMNS
        if path is None:
            return

        check_output_path(path, "out")  # a missing directory, a directory, no permission
        shown = escape_braces(repr(path))
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = True  # a new file (or one that cannot be read: said below)
        if not regular:
            raise BreakevenError(
                "{0}: " + shown + " is not a regular file (a directory, a "
                "named pipe, a device); expected a CSV file to append to",
                "out",
            )
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as e:
            raise BreakevenError(
                "{0}: cannot write " + shown + f" ({e.strerror or e})", "out"
            ) from None
        try:
            with self._locked():
                self._check_header(path, shown)
        except BaseException:
            os.close(self.fd)
            self.fd = None
            raise

    def _check_header(self, path: str, shown: str) -> None:
        assert self.fd is not None
        if os.fstat(self.fd).st_size == 0:
            self._append(BENCH_COLUMNS)
            self.columns = BENCH_COLUMNS
            return
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        if b"\0" in head:
            raise BreakevenError(
                "{0}: " + shown + " is binary data; append to a bench CSV or give a new file", "out"
            )
        lines = head.decode("utf-8", errors="replace").splitlines()
        first = next((line for line in lines if not line.startswith("#")), "")
        header = next(csv.reader([first]), [])
        if tuple(header) not in HEADERS:
            raise BreakevenError(
                "{0}: " + shown + " has other columns than bench writes; append "
                "to a bench CSV or give a new file",
                "out",
            )
        self.columns = tuple(header)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            import fcntl  # lazy: POSIX only
        except ImportError:  # not POSIX: appends of whole lines, without a lock
            yield
            return
        assert self.fd is not None
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _append(self, values: Sequence[Any]) -> None:

        assert self.fd is not None
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerow(values)
        data = buffer.getvalue().encode("utf-8")
        end = os.lseek(self.fd, 0, os.SEEK_END)  # under the lock: where this row starts
        try:
            while data:
                data = data[os.write(self.fd, data) :]
            os.fsync(self.fd)
        except OSError as e:  # a full disk: no half row left, and one line naming --out
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, end)
            raise output_error("out", self.path, e) from None

    def __call__(self, row: dict[str, Any]) -> None:
        self.rows += 1
        if self.fd is None:
            return
        values = [
            "" if (v := row.get(col)) is None or (isinstance(v, float) and math.isnan(v)) else v
            for col in self.columns
        ]
        with self._locked():
            self._append(values)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: the rows written are kept."""


async def _until_terminated(run: Any) -> Any:
    """``await run``, cancelled at its next await on SIGTERM (then :class:`Terminated`): a row
    being written is never cut."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run)
    terminated = []

    def on_sigterm() -> None:
        terminated.append(True)
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        return await task
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise Terminated() from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run_bench(
    config: Config, out: str | None, on_result: Callable[[int, RequestResult], None] | None = None
) -> tuple[list[dict], list[str], int]:
    """Measure every concurrency level; returns (level summaries, failures, rows written).

    Rows are appended to ``out`` as requests complete.  SIGTERM (``timeout``,
    ``docker stop``) is handled like Ctrl-C: the run stops at once and
    :class:`Terminated` (a KeyboardInterrupt) is raised; every row written is kept.
    """
    bench = Bench(config, on_result)
    writer = RowWriter(out)
    try:
        levels = asyncio.run(_until_terminated(bench.run(writer)))
    finally:
        writer.close()
    return levels, bench.failures, writer.rows
