"""The rows ``breakeven bench`` writes: a bench CSV's columns, a request's row and a level's
server row, stamped with the run's settings and the server's launch, and :class:`RowWriter`,
which appends them to a measurements CSV as they come.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import platform
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from breakeven.bench.config import Config, Load
from breakeven.bench.stream import RequestResult
from breakeven.core.credentials import Redactor
from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.provenance import SAMPLING_PREFIX
from breakeven.core.schema import (
    COLUMN_NAMES,
    COUNTERS_OVER_LEVEL,
    SAMPLING_COLUMNS,
    SPECULATIVE_SERVER,
    csv_row,
    text_column,
)
from breakeven.iotools.paths import check_output_path, output_error
from breakeven.iotools.records import iso_timestamp
from breakeven.iotools.server import ServerLaunch

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
_CATEGORY = (*_LAUNCH_COLUMNS, "category")
_OPEN_LOOP = (*_CATEGORY, "e2e_ms", "start_s", "request_rate")
_SAMPLED = (*_OPEN_LOOP, *SAMPLING_COLUMNS)
BENCH_COLUMNS = (*_SAMPLED, "node")
"""After the schema's and the timings: a tree's branches and verify tokens (``--topk``,
``--verify-tokens``); the tokens the server drafted and accepted for the request
(llama.cpp's ``timings``, vLLM's ``metrics.speculative_decoding``); and, where the server says
them per request (vLLM with ``--per-request-spec-decode-metrics``), its verify cycles that
drafted (``num_drafts``) and how many cycles accepted 0, 1, ... k drafted tokens
(``acceptance_histogram``, counts joined by ``;``); then the server's launch
(:mod:`breakeven.iotools.server`): ``launch_id``, ``launched_at`` and where ``env`` came from,
``env_from``; the request's workload ``category`` (the prompts file's, empty where none,
and on the level's server row); last, its end-to-end latency ``e2e_ms`` (send to last token),
when it was sent, ``start_s`` (due, open loop; since its level began), and its level's
offered ``request_rate`` (open loop; empty for a closed-loop level), which the level's server
row carries too; then the sampling settings every request was sent with
(:data:`~breakeven.core.schema.SAMPLING_COLUMNS`: ``temperature``, ``top_p``, ``max_tokens``,
``ignore_eos``), on the server row too; and the cluster ``node`` that measured it
(``sweep --ray``; empty from bench itself)."""
HEADERS = (
    BENCH_COLUMNS,
    _SAMPLED,
    _OPEN_LOOP,
    _CATEGORY,
    _LAUNCH_COLUMNS,
    _PER_REQUEST_DRAFTS,
    _TREE_AND_DRAFTS,
    _FIRST_COLUMNS,
)
"""Headers bench appends to: its own, and those of bench CSVs written before its last columns
(rows appended to such a file keep its columns)."""


def model_name(served: str | None) -> str | None:
    """The model as rows record it: the id the server serves, less the directories of a model
    file's path (llama.cpp serves ``-m /models/x.gguf`` as that path, unless ``--alias``)."""
    if served and served.lower().endswith(".gguf") and ("/" in served or "\\" in served):
        return served.replace("\\", "/").rsplit("/", 1)[-1]
    return served


def environment(
    root: str,
    model: str,
    version: str | None,
    launch: ServerLaunch | None = None,
    config: Config | None = None,
) -> str:
    """The launch written to every row: the server's own settings (``launch``: its arguments
    and environment, or its endpoints' configuration), model and version, then the URL and
    the client's host, an open-loop run's arrivals (``config``'s ``burstiness`` and
    ``arrival_seed``) and the sampling settings every request was sent with
    (``sampling_temperature``, ``sampling_top_p``, ``sampling_max_tokens``,
    ``sampling_ignore_eos``).  The URL, host and sampling are the client's choices, kept for provenance and
    left out of the fingerprint ``check`` compares
    (:func:`breakeven.core.provenance.is_client_key`).  The client's own environment is not
    recorded: the variables that tune a server are the server's."""
    pairs = list(launch.pairs) if launch is not None else []
    pairs += [f"model={model.replace(' ', '_')}"]
    if version:
        pairs.append(f"server_version={version}")
    pairs += [f"url={root}", f"client_host={platform.node()}"]
    if config is not None and config.request_rate:
        pairs += [f"burstiness={config.burstiness:g}", f"arrival_seed={config.seed}"]
    if config is not None:  # the client's choice: kept out of the fingerprint
        pairs += [
            f"{SAMPLING_PREFIX}{key}={value:g}"
            if isinstance(value, float)
            else f"{SAMPLING_PREFIX}{key}={value}"
            for key, value in config.sampling().items()
        ]
    return " ".join(pairs)


def _whole(count: Any) -> Any:
    """A count read from /metrics (a float there) as an int where it is whole."""
    return int(count) if isinstance(count, float) and count.is_integer() else count


class RunStamp(Protocol):
    """What every row of a bench run carries, as :class:`breakeven.bench.session.Bench` holds
    it: the run's settings and start, the server as it answered and its launch."""

    config: Config
    redact: Redactor
    shown_root: str
    started: str
    engine: str
    model: str | None
    env: str
    launch: ServerLaunch
    launch_id: str
    launched_at: str


def request_row(
    bench: RunStamp,
    load: Load,
    i: int,
    r: RequestResult,
    level: dict,
    category: str = "",
    speculating: bool = False,
) -> dict[str, Any]:
    """The row of a level's (``load``'s) ``i``-th timed request ``r`` (``origin=client``), with the level's
    client columns so far (``level``, its summary) and the request's workload ``category``;
    ``speculating``: whether the server showed spec-decode counters when the level began."""
    c = bench.config
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
    source = f"bench {bench.shown_root} {load.words} request {i + 1}"
    if k is None and (speculating or (r.draft_tokens or 0) > 0):
        source += f"; {SPECULATIVE_SERVER}"
    row = {
        "run_id": f"{c.label}-{load.tag}-{bench.started}",
        "label": c.label,
        "timestamp": iso_timestamp(time.time()),
        "engine": bench.engine,
        "model": model_name(bench.model),
        "hardware": c.hardware,
        "concurrency": load.concurrency,
        "num_spec_tokens": k,
        "spec_method": c.spec_method,
        "spec_topk": c.spec_topk,
        "verify_tokens": c.verify_tokens,
        "tok_s": r.decode_tok_s if timed else None,
        "aggregate_tok_s": level["aggregate_tok_s"],
        **row_acceptance(r),
        "env": bench.env,
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
        **launch_columns(bench),
        "category": category,
        "e2e_ms": r.e2e_ms,
        "start_s": r.start_s,
        "request_rate": load.request_rate,
        **c.sampling(),
    }
    return {key: bench.redact(v) if isinstance(v, str) else v for key, v in row.items()}


def launch_columns(bench: RunStamp) -> dict[str, Any]:
    """The server's launch as every row carries it: ``launch_id``, ``launched_at`` and
    ``env_from``."""
    return {
        "launch_id": bench.launch_id,
        "launched_at": bench.launched_at,
        "env_from": bench.launch.env_from,
    }


def row_acceptance(r: RequestResult) -> dict[str, Any]:
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


def server_row(bench: RunStamp, load: Load, level: dict, server: dict[str, Any]) -> dict[str, Any]:
    """The level as the server's counters saw it (``origin=server``): its per-sequence
    rate, and its own decode step (a baseline) or cycle (a speculative run), where they
    tell them; its acceptance over the whole level, the verify cycles that drafted, and
    the tokens they drafted and accepted."""
    c = bench.config
    k = c.num_spec_tokens if c.num_spec_tokens is not None else server.get("num_spec_tokens")
    row = {
        "run_id": f"{c.label}-{load.tag}-{bench.started}",
        "label": c.label,
        "timestamp": iso_timestamp(time.time()),
        "engine": bench.engine,
        "model": model_name(bench.model),
        "hardware": c.hardware,
        "concurrency": load.concurrency,
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
        "env": bench.env,
        "source": f"bench {bench.shown_root}/metrics {load.words}: " + COUNTERS_OVER_LEVEL,
        "origin": "server",
        "level_requests": level["requests"],
        **launch_columns(bench),
        "request_rate": load.request_rate,
        **c.sampling(),
    }
    return {key: bench.redact(v) if isinstance(v, str) else v for key, v in row.items()}


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
        values = csv_row([text_column(c) for c in self.columns], values)
        with self._locked():
            self._append(values)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
