"""Benchmark tools' result files: ``vllm bench serve`` JSON, SGLang ``bench_serving`` and
``bench_one_batch`` JSONL, NVIDIA AIPerf's ``profile_export_aiperf.json`` and
``profile_export.jsonl`` (:mod:`breakeven.iotools.aiperf`).

Under speculation a streamed chunk carries several tokens, so the inter-token
latency (ITL, between chunks) is about accept_len x the time per output token
(TPOT).  The per-sequence decode rate is therefore taken from TPOT:
``tok_s = 1000 / mean_tpot_ms``; ITL is kept as ``itl_ms`` so ``check`` can
tell when a rate was computed from it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from breakeven.core.choices import (
    BENCH_FORMATS as BENCH_FORMATS,  # re-exported: the names of the table below
)
from breakeven.core.choices import (
    OPENAI_REPLY,
    SGLANG_BENCH_ONE_BATCH,
    SGLANG_BENCH_SERVING,
    TRTLLM_ITERATION,
    VLLM_BENCH_SERVE,
)
from breakeven.iotools import aiperf, jsonsafe, replies, spec_tables
from breakeven.iotools.records import PLACEHOLDERS
from breakeven.iotools.replies import per_position_from_histogram


class FormatError(ValueError):
    """A result object that lacks what its format must hold."""


def _num(obj: dict[str, Any], key: str) -> float:
    """A number of a result; NaN where it is absent or a placeholder (``not set``, ``inf``)."""
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, str):
        if value.strip().lower() in PLACEHOLDERS:
            return math.nan
        try:
            value = float(value)
        except ValueError:
            raise FormatError(f"{key} is {value!r}, expected a number") from None
    if not isinstance(value, (int, float)):
        raise FormatError(f"{key} is {value!r}, expected a number")
    return float(value) if math.isfinite(value) else math.nan


@dataclass(frozen=True)
class BenchFormat:
    """A benchmark tool's result object: how it is recognised, and what its keys mean.

    A record is made in this order: ``derive`` (the columns computed from several keys,
    and the checks), ``numbers``, ``constants``, then ``texts``.
    """

    name: str
    """The record's ``format``, and a value of ``ingest --format``."""
    engine: str | None
    """The engine the results are of (the record's ``engine``); None for a client that serves
    every engine (AIPerf)."""
    recognised_by: tuple[tuple[str, ...], ...]
    """Key sets: an object holding every key of one of them is of this format (formats are
    tried in :data:`BENCH_FORMAT_TABLE`'s order)."""
    tok_s: str
    """What the record's ``tok_s`` (per sequence) is, in words."""
    fallback_by: tuple[tuple[str, ...], ...] = ()
    """Key sets tried only after every format's ``recognised_by`` (keys other tools share)."""
    numbers: tuple[tuple[str, str], ...] = ()
    """``(column, key)``: a number copied from the result (NaN where absent)."""
    constants: tuple[tuple[str, Any], ...] = ()
    """``(column, value)``: what every result of the tool is (e.g. k = 0: it never drafts)."""
    texts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(column, keys)``: a text copied from the first of ``keys`` that is set."""
    derive: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    """``derive(result, record)`` fills the columns computed from several keys; it raises
    :class:`FormatError` for a result that lacks what the format must hold."""
    origin: str = "client"
    """Whose view the numbers are: the benchmark client's, or the server's."""
    table: bool = False
    """Whether the tool also prints its result as a "Serving Benchmark Result" table
    (records of format ``name + "_table"``, :func:`parse_result_tables`)."""
    requests: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]] | None = None
    """``requests(result, record)``: the run's records, one per request where the result
    holds its requests (:func:`result_records`); None: the run's one record."""


def _client_rates(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """A serving benchmark's request rates: tok_s from TPOT, ITL kept (see the module)."""
    tpot = _num(obj, "mean_tpot_ms")
    if math.isnan(tpot):
        tpot = _num(obj, "median_tpot_ms")
    itl = _num(obj, "mean_itl_ms")
    record["itl_ms"] = _num(obj, "median_itl_ms") if math.isnan(itl) else itl
    if not math.isnan(tpot):
        if tpot <= 0:
            raise FormatError(f"mean_tpot_ms is {tpot:g}, expected a time > 0 ms")
        record["tpot_ms"] = tpot
        record["tok_s"] = 1000.0 / tpot  # per sequence: TPOT, not ITL (see the module doc)
    record["aggregate_tok_s"] = _num(obj, "output_throughput")
    record["concurrency"] = _num(obj, "max_concurrency")
    # The requests' mean prompt and half their mean output (what bench gives a request).
    done = _num(obj, "completed")
    if done > 0:
        total = _num(obj, "total_input_tokens") + _num(obj, "total_output_tokens") / 2
        record["context_tokens"] = total / done


def _vllm_serve(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """``vllm bench serve``: its request rates, and the spec-decode counts of the run (k from
    Draft tokens / Drafts where the Position rows may be cut:
    :func:`breakeven.iotools.spec_tables.spec_counts`; accept_len from Accepted tokens /
    Drafts where they are printed, not the rounded length)."""
    _client_rates(obj, record)
    if obj.get("_closed") is False and (note := spec_tables.cut_note(obj)) is not None:
        record["note"] = note
    if "spec_decode_acceptance_length" not in obj:
        return
    drafts = _num(obj, "spec_decode_num_drafts")
    drafted = _num(obj, "spec_decode_draft_tokens")
    per_position = obj.get("spec_decode_per_position_acceptance_rates")
    k, note = spec_tables.spec_counts(obj, drafts, drafted, per_position)
    if note:
        record["note"] = "; ".join(filter(None, (record.get("note"), note)))
    accepted = _num(obj, "spec_decode_accepted_tokens")
    # vLLM's own definition, 1 + accepted / drafts, from the counts where printed: the table
    # rounds the length to two decimals (2.98 for 1 + 23321/11807 = 2.9752).
    counted = drafts > 0 and accepted >= 0
    record.update(
        accept_len=1 + accepted / drafts if counted else _num(obj, "spec_decode_acceptance_length"),
        acceptance_rate=_num(obj, "spec_decode_acceptance_rate") / 100.0,
        num_drafts=drafts,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        per_position=per_position,
        num_spec_tokens=k,
    )


_DETAILED = ("output_lens", "ttfts", "latencies")
"""``vllm bench serve --save-detailed``'s per-request lists this reads (``serve.py``)."""


def _vllm_requests(obj: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    """With ``--save-detailed``, a record per request that completed, in the order they
    started: its own per-sequence rate, ``(output_len - 1) / (latency - ttft)`` [tok/s] (the
    first token is the prefill's), and ``completion_tokens``, so that a run's rate is pooled
    as a ratio of sums (:func:`breakeven.measurements.intervals.pooled_rate`: ``1000 / mean_tpot_ms`` where
    the requests are of one length) and its requests give an interval.  The run's
    acceptance, from the server's counters, is on every record.  Without the lists: the
    run's one record."""
    lists = [obj.get(key) for key in _DETAILED]
    if not all(isinstance(values, list) for values in lists):
        return [record]
    outputs, ttfts, latencies = lists
    inputs = obj.get("input_lens")
    if not isinstance(inputs, list) or len(inputs) != len(outputs):
        inputs = None
    n = len(outputs)
    if len(ttfts) != n or len(latencies) != n:
        raise FormatError(
            f"output_lens, ttfts and latencies hold {n}, {len(ttfts)} and {len(latencies)} "
            "values, expected one per request each"
        )
    errors = obj.get("errors") if isinstance(obj.get("errors"), list) else [""] * n
    starts = obj.get("start_times")
    order = range(n)
    if isinstance(starts, list) and len(starts) == n:
        keys = [_as_float(t) for t in starts]
        if not any(math.isnan(t) for t in keys):
            order = sorted(range(n), key=keys.__getitem__)
    run = {key: value for key, value in record.items() if key not in _RUN_ONLY}
    out = []
    for i in order:
        tokens, ttft, latency = (_as_float(v[i]) for v in lists)
        if (i < len(errors) and errors[i]) or not tokens > 1 or not latency > ttft >= 0:
            continue  # failed, or nothing decoded: no rate
        decode_s = latency - ttft
        prompt = _as_float(inputs[i]) if inputs is not None else math.nan
        out.append(
            {
                **run,
                "tok_s": (tokens - 1) / decode_s,
                "tpot_ms": 1000.0 * decode_s / (tokens - 1),
                "ttft_ms": 1000.0 * ttft,
                "completion_tokens": tokens,
                "context_tokens": prompt + tokens / 2,
            }
        )
    return out or [record]


_RUN_ONLY = frozenset({"tok_s", "tpot_ms", "itl_ms", "draft_tokens", "accepted_tokens"})
"""A run's columns left off its request records: its rates (each request has its own) and
its token totals (a sum over the records would count them once a request)."""


def _as_float(value: Any) -> float:
    """A list item as a number (NaN where it is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


def _sglang_serving(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """SGLang ``bench_serving``: its request rates; its accept length is the server's."""
    _client_rates(obj, record)
    if not math.isnan(_num(obj, "accept_length")):
        record["note"] = "accept_length is the server's lifetime average, not this run's"


def _sglang_one_batch(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """SGLang ``bench_one_batch``: the decode step of one batch size."""
    latency_s = _num(obj, "median_decode_latency")
    batch = _num(obj, "batch_size")
    if math.isnan(latency_s) or latency_s <= 0 or math.isnan(batch):
        raise FormatError("expected batch_size and median_decode_latency")
    record.update(step_ms=1000.0 * latency_s, tok_s=1.0 / latency_s)


def _trtllm_iteration(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """One TensorRT-LLM iteration (``trtllm-serve`` ``/metrics``, ``llm.get_stats()``).

    ``specDecodingStats`` is null unless the server speculates (the executor's
    ``_iteration_report``), so a null one is a baseline iteration.  Otherwise
    ``acceptanceLength = (numAcceptedTokens + numRequestsWithDraftTokens) /
    numRequestsWithDraftTokens`` (``py_executor._update_iter_stats``): tokens per
    drafting request this iteration, bonus included.  An iteration that decodes only
    (no context requests) gives a per-sequence rate, tokens per request over
    ``iterLatencyMS``, when every generation request drafted (or none speculates).
    """
    latency = _num(obj, "iterLatencyMS")
    batching = obj.get("inflightBatchingStats") or {}
    if not isinstance(batching, dict):
        raise FormatError(f"inflightBatchingStats is {batching!r}, expected an object")
    gen, ctx = _num(batching, "numGenRequests"), _num(batching, "numContextRequests")
    record.update(running_reqs=gen, queue_reqs=_num(obj, "numQueuedRequests"))
    spec = obj.get("specDecodingStats")
    tokens = math.nan
    if spec is None:
        record["num_spec_tokens"] = 0
        record["step_ms"] = latency
        tokens = 1.0
    elif isinstance(spec, dict):
        drafting = _num(spec, "numRequestsWithDraftTokens")
        record.update(
            accepted_tokens=_num(spec, "numAcceptedTokens"),
            draft_tokens=_num(spec, "numDraftTokens"),
        )
        if drafting > 0:
            record.update(
                accept_len=_num(spec, "acceptanceLength"), num_drafts=drafting, cycle_ms=latency
            )
            if drafting == gen:
                tokens = record["accept_len"]
    else:
        raise FormatError(f"specDecodingStats is {spec!r}, expected an object or null")
    if latency > 0 and gen > 0 and ctx == 0 and not math.isnan(tokens):
        record.update(
            tok_s=1000.0 * tokens / latency,
            concurrency=gen,
            aggregate_tok_s=1000.0 * tokens * gen / latency,
        )


def _aiperf_summary(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """AIPerf's ``profile_export_aiperf.json`` (:func:`breakeven.iotools.aiperf.summary_columns`)."""
    try:
        record.update(aiperf.summary_columns(obj))
    except aiperf.BadValue as e:
        raise FormatError(str(e)) from None


def _aiperf_requests(obj: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``profile_export.jsonl`` line: its request's record, none for a warmup or failed one."""
    try:
        columns = aiperf.request_columns(obj)
    except aiperf.BadValue as e:
        raise FormatError(str(e)) from None
    return [] if columns is None else [{**record, **columns}]


def _reply(obj: dict[str, Any], record: dict[str, Any]) -> None:
    """A saved reply of an OpenAI-compatible server (one request): its drafts, as bench reads
    them from a stream (:func:`breakeven.iotools.replies.reply_drafts`: vLLM's
    ``metrics.speculative_decoding``, SGLang's ``sglext.spec_tokens_details``, llama.cpp's
    ``timings``), its completion tokens, and from llama.cpp its own decode rate
    (``timings.predicted_per_second``, one sequence).  accept_len is ``1 + accepted / verify
    steps`` where the reply counts its steps, acceptance_rate ``accepted / drafted`` where it
    counts its drafted tokens; per-position acceptance from its histogram."""
    drafts = replies.reply_drafts(obj)
    engines = (("timings", "llamacpp"), ("sglext", "sglang"), ("metrics", "vllm"))
    record["engine"] = next(name for key, name in engines if key in obj)
    usage = obj.get("usage")
    tokens = replies.count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    timings = obj.get("timings")
    if isinstance(timings, dict):
        record["tok_s"] = _num(timings, "predicted_per_second")
        tokens = tokens if tokens is not None else replies.count(timings.get("predicted_n"))
    record.update(
        completion_tokens=tokens,
        accepted_tokens=drafts.accepted,
        draft_tokens=drafts.drafted,
        num_drafts=drafts.steps,
        num_spec_tokens=drafts.k,
    )
    if drafts.steps and drafts.accepted is not None:
        record["accept_len"] = 1 + drafts.accepted / drafts.steps
    if drafts.drafted and drafts.accepted is not None and drafts.accepted <= drafts.drafted:
        # The request's own fraction of drafted tokens accepted, as bench writes it: llama.cpp's
        # timings count no steps, so this is all of its acceptance a reply alone tells.
        record["acceptance_rate"] = drafts.accepted / drafts.drafted
    counts = [int(c) for c in drafts.histogram.split(";")] if drafts.histogram else []
    if sum(counts) > 0:
        record["per_position"] = list(per_position_from_histogram(counts))
        record["num_spec_tokens"] = drafts.k or len(counts) - 1


_TPOT_RATE = "1000 / mean TPOT of the benchmark's requests"

BENCH_FORMAT_TABLE = (
    BenchFormat(
        SGLANG_BENCH_ONE_BATCH,
        engine="sglang",
        recognised_by=(("median_decode_latency",), ("run_name", "batch_size")),
        tok_s="1 / median decode latency of the batch",
        derive=_sglang_one_batch,
        numbers=(
            ("concurrency", "batch_size"),
            ("aggregate_tok_s", "median_decode_throughput"),
        ),
        constants=(("num_spec_tokens", 0),),
        texts=(("label", ("run_name",)),),
    ),
    BenchFormat(
        TRTLLM_ITERATION,
        engine="trtllm",
        recognised_by=(
            ("iterLatencyMS", "inflightBatchingStats"),
            ("iterLatencyMS", "specDecodingStats"),
        ),
        tok_s="tokens per request in a decode-only iteration / iterLatencyMS",
        derive=_trtllm_iteration,
        texts=(("timestamp", ("timestamp",)),),
        origin="server",
    ),
    # AIPerf before vLLM: its summary holds vLLM's spec_decode_acceptance_length key too.
    BenchFormat(
        aiperf.PROFILE,
        engine=None,
        recognised_by=(
            ("aiperf_version",),
            ("output_token_throughput", "inter_token_latency"),
            ("spec_decode_token_weighted_acceptance_length",),
        ),
        tok_s=aiperf.TOK_S,
        derive=_aiperf_summary,
        table=True,
    ),
    BenchFormat(
        aiperf.RECORDS,
        engine=None,
        recognised_by=(("metadata", "metrics"),),
        tok_s=aiperf.RECORDS_TOK_S,
        requests=_aiperf_requests,
    ),
    BenchFormat(
        OPENAI_REPLY,
        engine=None,
        recognised_by=(("choices", "metrics"), ("choices", "sglext"), ("choices", "timings")),
        tok_s="llama.cpp's timings.predicted_per_second (one request); none from vLLM or SGLang",
        derive=_reply,
        texts=(("model", ("model",)),),
        origin="server",
    ),
    BenchFormat(
        VLLM_BENCH_SERVE,
        engine="vllm",
        recognised_by=(
            ("spec_decode_acceptance_length",),
            ("model_id",),
            ("request_goodput:",),
            ("tokenizer_id",),
        ),
        fallback_by=(
            ("output_throughput", "mean_tpot_ms"),
            ("output_throughput", "median_tpot_ms"),
        ),
        tok_s=_TPOT_RATE + "; with --save-detailed, each request's (output_len - 1) / "
        "(latency - ttft), a record per request",
        derive=_vllm_serve,
        texts=(("label", ("label", "backend")), ("model", ("model_id",)), ("timestamp", ("date",))),
        table=True,
        requests=_vllm_requests,
    ),
    BenchFormat(
        SGLANG_BENCH_SERVING,
        engine="sglang",
        recognised_by=(
            ("output_throughput", "mean_e2e_latency_ms"),
            ("output_throughput", "median_e2e_latency_ms"),
            ("output_throughput", "accept_length"),
        ),
        tok_s=_TPOT_RATE,
        derive=_sglang_serving,
        numbers=(("accept_len", "accept_length"),),
        texts=(("label", ("backend",)),),
        table=True,
    ),
)
"""Every benchmark result format, each defined once: adding one is adding an entry here
(and its fixtures in ``tests/data/engines/``), and its name to
:data:`breakeven.core.choices.BENCH_FORMATS`, in the same place (the names ``ingest --format``
offers: ``--help`` lists them without importing the readers)."""

_BY_NAME = {f.name: f for f in BENCH_FORMAT_TABLE}


def bench_format(obj: dict[str, Any]) -> str | None:
    """Which benchmark tool wrote this result object, by its keys (None if none): the first
    format of :data:`BENCH_FORMAT_TABLE` one of whose key sets it holds, else the first whose
    fallback key sets it holds."""
    for attribute in ("recognised_by", "fallback_by"):
        for fmt in BENCH_FORMAT_TABLE:
            if any(all(key in obj for key in keys) for keys in getattr(fmt, attribute)):
                return fmt.name
    return None


def bench_tok_s_meanings() -> dict[str, str]:
    """What ``tok_s`` (per sequence) is, by benchmark record format (tables included)."""
    meanings = {f.name: f.tok_s for f in BENCH_FORMAT_TABLE}
    meanings.update({f"{f.name}_table": f.tok_s for f in BENCH_FORMAT_TABLE if f.table})
    return meanings


def result_record(obj: dict[str, Any], fmt: str, source: str) -> dict[str, Any]:
    """One benchmark result object (a parsed JSON object) as a record in the measurement
    schema's names, as format ``fmt`` (one of :data:`BENCH_FORMATS`) maps its keys."""
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    if "_bad_position" in obj:
        raise FormatError(obj["_bad_position"])
    spec = _BY_NAME[fmt]
    record: dict[str, Any] = {
        "format": fmt,
        "source": source,
        "origin": spec.origin,
        "engine": spec.engine,
    }
    if spec.derive is not None:
        spec.derive(obj, record)
    for column, key in spec.numbers:
        record[column] = _num(obj, key)
    record.update(spec.constants)
    for column, keys in spec.texts:
        value = None
        for key in keys:
            value = obj.get(key)
            if value:
                break
        if column == "timestamp" and isinstance(value, str):
            value = _COMPACT_DATE.sub(r"\1-\2-\3T\4:\5:\6", value.strip())
        record[column] = value
    return record


_COMPACT_DATE = re.compile(r"^(\d{4})(\d\d)(\d\d)-(\d\d)(\d\d)(\d\d)$")
"""``vllm bench serve``'s ``date`` (``20260226-170210``: ``%Y%m%d-%H%M%S``, local time), made
ISO 8601."""


def result_records(obj: dict[str, Any], fmt: str, source: str) -> list[dict[str, Any]]:
    """One benchmark result object as its records: one per request where the format reads
    its requests (``vllm bench serve --save-detailed``), else :func:`result_record`'s one."""
    record = result_record(obj, fmt, source)
    expand = _BY_NAME[fmt].requests
    return expand(obj, record) if expand is not None else [record]


def parse_json_document(text: str) -> list[tuple[int, Any]]:
    """A JSON file (one value) or JSON Lines: ``(line, value)`` pairs; raises ValueError."""
    documents, cut = parse_json_lines(text)
    if cut is not None:
        raise ValueError(f"line {cut[0]}: {cut[1]}")
    return documents


def parse_json_lines(text: str) -> tuple[list[tuple[int, Any]], tuple[int, str] | None]:
    """A JSON file (one value) or JSON Lines: ``(line, value)`` pairs, and ``(line, message)``
    for a last line that does not parse (a file cut off while written), else None; raises
    ValueError where the text is neither (at the first bad line before the last), or is
    nested deeper than :data:`~breakeven.iotools.jsonsafe.MAX_DEPTH` (``json.loads`` would
    recurse past Python's limit)."""
    depth = jsonsafe.nesting_depth(text)
    if depth > jsonsafe.MAX_DEPTH:
        raise ValueError(
            f"JSON nested {depth:,} levels deep, more than the {jsonsafe.MAX_DEPTH} read"
        )
    try:
        value = jsonsafe.parse_json(text.strip())
    except json.JSONDecodeError as e:
        whole = f"line {e.lineno} column {e.colno}: {e.msg}"
    else:
        return [(1, v) for v in (value if isinstance(value, list) else [value])], None
    out: list[tuple[int, Any]] = []
    bad: tuple[int, str] | None = None
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if bad is not None:  # not JSON Lines: a document's own error, else the line's
            raise ValueError(f"line {bad[0]}: {bad[1]}" if out else whole)
        try:
            out.append((i, jsonsafe.parse_json(line)))
        except json.JSONDecodeError as e:
            bad = (i, f"not JSON ({e.msg} at column {e.colno})")
    if bad is not None and not out:
        raise ValueError(whole)
    return out, bad


TABLE_MARKER = "Serving Benchmark Result"
SPEC_SECTION = "-Speculative Decoding-"  # a section posted on its own also counts as a table

# Printed result-table rows (vllm bench serve, SGLang bench_serving) -> result JSON keys.
_TABLE_KEYS = {
    "backend": "backend",
    "successful requests": "completed",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "maximum request concurrency": "max_concurrency",
    "max request concurrency": "max_concurrency",
    "output token throughput (tok/s)": "output_throughput",
    "mean tpot (ms)": "mean_tpot_ms",
    "median tpot (ms)": "median_tpot_ms",
    "mean itl (ms)": "mean_itl_ms",
    "mean e2e latency (ms)": "mean_e2e_latency_ms",
    "accept length": "accept_length",
    "acceptance rate (%)": "spec_decode_acceptance_rate",
    "acceptance length": "spec_decode_acceptance_length",
    "drafts": "spec_decode_num_drafts",
    "draft tokens": "spec_decode_draft_tokens",
    "accepted tokens": "spec_decode_accepted_tokens",
}


def parse_result_tables(
    text: str, first_line: int = 1
) -> tuple[list[tuple[int, dict[str, Any]]], int | None]:
    """The printed "Serving Benchmark Result" tables in ``text``, as result-JSON-like objects.

    Returns ``(line, object)`` pairs, ``line`` being the table's title line
    (``text`` starting at line ``first_line``), and the title line of a last
    table that ``text`` ends inside (no closing rule yet), or None.  Per-position
    rates print as percents and become fractions; a placeholder (``not set``)
    leaves its row out.  Each object also says whether its closing rule was read
    (``_closed``: a table without one was cut) and the name of its last row read
    (``_last``), for the record's note (:func:`breakeven.iotools.spec_tables.spec_counts`).
    """
    tables: list[tuple[int, dict[str, Any]]] = []
    current: dict[str, Any] | None = None
    for i, line in enumerate(text.splitlines(), start=first_line):
        stripped = line.strip()
        if TABLE_MARKER in stripped or (current is None and SPEC_SECTION in stripped):
            current = {"_closed": False, "_last": None}
            tables.append((i, current))
            continue
        if current is None or stripped.startswith("#"):
            continue
        if stripped and set(stripped) == {"="}:
            current["_closed"] = True  # the closing rule
            current = None
            continue
        name, sep, value = stripped.partition(":")
        if not sep or not value.strip():
            continue
        current["_last"] = name.strip()
        name, value = name.strip().lower(), value.strip()
        if value.lower() in PLACEHOLDERS:
            continue
        if name.startswith("position "):
            rates = current.setdefault("spec_decode_per_position_acceptance_rates", [])
            try:
                rates.append(float(value.rstrip("%")) / 100.0)
            except ValueError:
                current["_bad_position"] = f"{name} is {value!r}, expected a percent"
        elif name in _TABLE_KEYS:
            try:
                current[_TABLE_KEYS[name]] = float(value)
            except ValueError:
                current[_TABLE_KEYS[name]] = value
    return tables, (tables[-1][0] if current is not None and tables else None)
