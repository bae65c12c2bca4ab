"""What the fake server (tests/fake_server.py) serves as trtllm-serve: its Prometheus text at
``/prometheus/metrics`` and its JSON iteration stats at ``/metrics``, in TensorRT-LLM's own
formats.

- ``/prometheus/metrics`` (``return_perf_metrics: true``): the families of
  ``tensorrt_llm/metrics/collector.py`` (MetricsCollector) that fleet reads, as
  prometheus_client writes them (the stored sample
  ``tests/data/engines/trtllm_prometheus_metrics__synthetic_prometheus_client_from_collector.prom``
  is this layout): per-request counters by ``token_position``, the finished requests' tokens,
  count and decode time, the running requests (a gauge with the multiprocess ``pid`` label),
  and the per-iteration counters and acceptance-length gauge fleet does not read.
- ``/metrics`` (``enable_iter_perf_stats: true``): a JSON list of the iterations since the last
  read, each drained as it is returned (``openai_server.get_iteration_stats`` drains the
  engine's stats queue), at most :data:`QUEUE` kept; a cycle of one request is an iteration
  here, with ``specDecodingStats`` as ``py_executor._update_iter_stats`` fills it.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

QUEUE = 1000
"""Iterations kept between reads (the executor's stats deque keeps 1000)."""

_LABELS = 'engine_type="undefined",model_name="undefined"'


def on_cycle(b: Any, tokens: int, drafted: int, latency_s: float) -> None:
    """Count one verify cycle of a request that emitted ``tokens`` (1 + the drafts it
    accepted) after drafting ``drafted`` tokens, as TensorRT-LLM counts it; call with
    ``b.lock`` held."""
    while len(b.drafted_per_pos) < drafted:
        b.drafted_per_pos.append(0)
        b.accepted_per_pos.append(0)
    for i in range(drafted):
        b.drafted_per_pos[i] += 1
    for i in range(min(tokens - 1, drafted)):
        b.accepted_per_pos[i] += 1
    b.iterations += 1
    if b.iteration_stats:
        stats = b.stats if b.stats is not None else deque(maxlen=QUEUE)
        b.stats = stats
        spec = None
        if drafted:
            spec = {
                "numDraftTokens": drafted,
                "numAcceptedTokens": tokens - 1,
                "numRequestsWithDraftTokens": 1,
                "acceptanceLength": float(tokens),
                "iterLatencyMS": 0.0,
                "draftOverhead": 0.0,
            }
        stats.append(
            {
                "iter": b.iterations,
                "iterLatencyMS": 1000.0 * latency_s,
                "numActiveRequests": b.in_flight,
                "numQueuedRequests": 0,
                "numCompletedRequests": 0,
                "inflightBatchingStats": {
                    "numContextRequests": 0,
                    "numGenRequests": 1,
                    "numPausedRequests": 0,
                    "numScheduledRequests": 1,
                    "numCtxTokens": 0,
                    "microBatchId": 0,
                    "avgNumDecodedTokensPerIter": float(tokens),
                },
                "specDecodingStats": spec,
                "timestamp": "12-06-2026 04:00:00.000000",
            }
        )


def iteration_stats(b: Any) -> bytes:
    """``/metrics``: the iterations kept since the last read, drained."""
    with b.lock:
        items = list(b.stats or ())
        if b.stats is not None:
            b.stats.clear()
    return json.dumps(items).encode()


def prometheus_text(b: Any) -> str:
    """``/prometheus/metrics``: the counters so far, in prometheus_client's layout."""
    with b.lock:
        lines = [
            "# HELP trtllm_num_requests_running Number of active requests",
            "# TYPE trtllm_num_requests_running gauge",
            f'trtllm_num_requests_running{{{_LABELS},pid="4242"}} {float(b.in_flight)}',
            "# HELP trtllm_request_success_total Count of successfully processed requests.",
            "# TYPE trtllm_request_success_total counter",
            f'trtllm_request_success_total{{{_LABELS},finished_reason="length"}} {float(b.finished)}',
            "# HELP trtllm_generation_tokens_total Cumulative number of generation (output) "
            "tokens produced.",
            "# TYPE trtllm_generation_tokens_total counter",
            f"trtllm_generation_tokens_total{{{_LABELS}}} {float(b.generated)}",
            "# TYPE trtllm_request_decode_time_seconds histogram",
            f"trtllm_request_decode_time_seconds_sum{{{_LABELS}}} {float(b.decode_s)}",
            f"trtllm_request_decode_time_seconds_count{{{_LABELS}}} {float(b.finished)}",
        ]
        if b.num_spec_tokens:
            for family, counts in (
                ("drafted", b.drafted_per_pos),
                ("accepted", b.accepted_per_pos),
            ):
                lines.append(f"# TYPE trtllm_spec_decode_{family}_tokens_total counter")
                lines += [
                    f'trtllm_spec_decode_{family}_tokens_total{{{_LABELS},token_position="{i}"}} '
                    f"{float(n)}"
                    for i, n in enumerate(counts)
                    if n
                ]
            lines += [
                "# TYPE trtllm_spec_decode_num_draft_tokens_total counter",
                f"trtllm_spec_decode_num_draft_tokens_total{{{_LABELS}}} "
                f"{float(sum(b.drafted_per_pos))}",
                "# TYPE trtllm_spec_decode_acceptance_length gauge",
                f'trtllm_spec_decode_acceptance_length{{{_LABELS},pid="4242"}} 9.0',
            ]
    return "\n".join(lines) + "\n"
