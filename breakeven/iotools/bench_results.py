"""Benchmark tools' result files: ``vllm bench serve`` JSON, SGLang ``bench_serving`` and
``bench_one_batch`` JSONL.

Under speculation a streamed chunk carries several tokens, so the inter-token
latency (ITL, between chunks) is about accept_len x the time per output token
(TPOT).  The per-sequence decode rate is therefore taken from TPOT:
``tok_s = 1000 / mean_tpot_ms``; ITL is kept as ``itl_ms`` so ``check`` can
tell when a rate was computed from it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from breakeven.iotools.records import PLACEHOLDERS

VLLM_BENCH_SERVE = "vllm_bench_serve"
SGLANG_BENCH_SERVING = "sglang_bench_serving"
SGLANG_BENCH_ONE_BATCH = "sglang_bench_one_batch"
TRTLLM_ITERATION = "trtllm_iteration_stats"
BENCH_FORMATS = (VLLM_BENCH_SERVE, SGLANG_BENCH_SERVING, SGLANG_BENCH_ONE_BATCH, TRTLLM_ITERATION)


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


def bench_format(obj: dict[str, Any]) -> str | None:
    """Which benchmark tool wrote this result object, by its keys (None if none)."""
    if "median_decode_latency" in obj or ("run_name" in obj and "batch_size" in obj):
        return SGLANG_BENCH_ONE_BATCH
    if "iterLatencyMS" in obj and ("inflightBatchingStats" in obj or "specDecodingStats" in obj):
        return TRTLLM_ITERATION
    vllm_keys = ("spec_decode_acceptance_length", "model_id", "request_goodput:", "tokenizer_id")
    if any(key in obj for key in vllm_keys):
        return VLLM_BENCH_SERVE
    if "output_throughput" not in obj:
        return None
    if any(key in obj for key in ("mean_e2e_latency_ms", "median_e2e_latency_ms", "accept_length")):
        return SGLANG_BENCH_SERVING
    if "mean_tpot_ms" in obj or "median_tpot_ms" in obj:
        return VLLM_BENCH_SERVE
    return None


def _client_rates(obj: dict[str, Any], record: dict[str, Any]) -> None:
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


def read_result(obj: dict[str, Any], fmt: str, source: str) -> dict[str, Any]:
    """One benchmark result object as a record in the measurement schema's names."""
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    if "_bad_position" in obj:
        raise FormatError(obj["_bad_position"])
    record: dict[str, Any] = {"format": fmt, "source": source, "origin": "client"}
    if fmt == SGLANG_BENCH_ONE_BATCH:
        latency_s = _num(obj, "median_decode_latency")
        batch = _num(obj, "batch_size")
        if math.isnan(latency_s) or latency_s <= 0 or math.isnan(batch):
            raise FormatError("expected batch_size and median_decode_latency")
        record.update(
            engine="sglang",
            label=obj.get("run_name"),
            concurrency=batch,
            num_spec_tokens=0,
            step_ms=1000.0 * latency_s,
            tok_s=1.0 / latency_s,
            aggregate_tok_s=_num(obj, "median_decode_throughput"),
        )
        return record
    if fmt == TRTLLM_ITERATION:
        return _trtllm_iteration(obj, record)
    _client_rates(obj, record)
    if fmt == SGLANG_BENCH_SERVING:
        record.update(engine="sglang", label=obj.get("backend"))
        tau = _num(obj, "accept_length")
        if not math.isnan(tau):
            record["accept_len"] = tau
            record["note"] = "accept_length is the server's lifetime average, not this run's"
        return record
    record.update(
        engine="vllm",
        label=obj.get("label") or obj.get("backend"),
        model=obj.get("model_id"),
        timestamp=obj.get("date"),
    )
    if "spec_decode_acceptance_length" in obj:
        drafts = _num(obj, "spec_decode_num_drafts")
        drafted = _num(obj, "spec_decode_draft_tokens")
        per_position = obj.get("spec_decode_per_position_acceptance_rates")
        k = len(per_position) if per_position else (round(drafted / drafts) if drafts else None)
        record.update(
            accept_len=_num(obj, "spec_decode_acceptance_length"),
            acceptance_rate=_num(obj, "spec_decode_acceptance_rate") / 100.0,
            num_drafts=drafts,
            draft_tokens=drafted,
            accepted_tokens=_num(obj, "spec_decode_accepted_tokens"),
            per_position=per_position,
            num_spec_tokens=k,
        )
    return record


def _trtllm_iteration(obj: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
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
    record.update(
        engine="trtllm",
        origin="server",
        timestamp=obj.get("timestamp"),
        running_reqs=gen,
        queue_reqs=_num(obj, "numQueuedRequests"),
    )
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
    return record


def parse_json_document(text: str) -> list[tuple[int, Any]]:
    """A JSON file (one value) or JSON Lines: ``(line, value)`` pairs; raises ValueError."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        value = None
    else:
        values = value if isinstance(value, list) else [value]
        return [(1, v) for v in values]
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((i, json.loads(line)))
        except json.JSONDecodeError as e:
            raise ValueError(f"line {i}: not JSON ({e.msg} at column {e.colno})") from None
    return out


TABLE_MARKER = "Serving Benchmark Result"
SPEC_SECTION = "-Speculative Decoding-"  # a section posted on its own also counts as a table

# Printed result-table rows (vllm bench serve, SGLang bench_serving) -> result JSON keys.
_TABLE_KEYS = {
    "backend": "backend",
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
    leaves its row out.
    """
    tables: list[tuple[int, dict[str, Any]]] = []
    current: dict[str, Any] | None = None
    for i, line in enumerate(text.splitlines(), start=first_line):
        stripped = line.strip()
        if TABLE_MARKER in stripped or (current is None and SPEC_SECTION in stripped):
            current = {}
            tables.append((i, current))
            continue
        if current is None or stripped.startswith("#"):
            continue
        if stripped and set(stripped) == {"="}:
            current = None  # the closing rule
            continue
        name, sep, value = stripped.partition(":")
        if not sep or not value.strip():
            continue
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
