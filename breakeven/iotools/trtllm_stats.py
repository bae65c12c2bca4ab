"""trtllm-serve's ``/metrics``: a JSON list of iteration stats, pooled into one server's counts.

``trtllm-serve`` (``tensorrt_llm/serve/openai_server.py``, ``get_iteration_stats``) answers
``GET /metrics`` with the iteration stats its engine queued since the last read, and takes
them off the queue as it answers (``get_stats_async``): a second read gets only the newer
iterations, an empty list when there were none, and two readers of one server each get part.
The queue holds the last 1,000 iterations (older ones are dropped before any read), and is
filled only with ``enable_iter_perf_stats: true`` (the PyTorch backend).  With
``return_perf_metrics: true`` the server's own Prometheus collector drains the same queue in
the background, so ``/metrics`` gets little or nothing: read its Prometheus series then.

Each iteration (``IterationStats``, ``cpp/include/tensorrt_llm/executor/types.h``) has
``iterLatencyMS``, ``numActiveRequests``, ``inflightBatchingStats`` (``numContextRequests``,
``numGenRequests``) and, when the server speculates, ``specDecodingStats``:
``numDraftTokens``, ``numAcceptedTokens``, ``numRequestsWithDraftTokens`` (the requests that
drafted this iteration: one verify cycle each) and ``acceptanceLength = (numAcceptedTokens +
numRequestsWithDraftTokens) / numRequestsWithDraftTokens``; it is null when the server does not
speculate.  Pooled over the iterations read (:func:`pool_iteration_stats`), from counts,
never from each iteration's ratio:

- ``accept_len = 1 + sum(numAcceptedTokens) / sum(numRequestsWithDraftTokens)`` (bonus token
  included) and ``k = sum(numDraftTokens) / sum(numRequestsWithDraftTokens)``;
- over the decode-only iterations (no context request) whose every generation request drafted
  (or that do not speculate), which emit ``numAcceptedTokens + numGenRequests`` tokens: the
  aggregate rate ``sum(tokens) / sum(iterLatencyMS)`` and the per-sequence rate ``sum(tokens)
  / sum(numGenRequests * iterLatencyMS)``;
- the batch: the mean of ``numActiveRequests`` over the iterations.

An item of the list that is not an object, or a field that is absent, not a number or
negative, leaves that iteration out (counted in :attr:`IterationTotals.skipped`); ``iter``
going backwards says the server restarted between two iterations read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces


@dataclass(frozen=True)
class IterationTotals:
    """One read of ``/metrics``, pooled (see the module)."""

    iterations: int = 0
    """Iterations read and counted."""
    skipped: int = 0
    """Iterations left out: not an object, or a field absent, not a number or negative."""
    spec_iterations: int = 0
    """Iterations with a request that drafted."""
    draft_tokens: float = 0.0
    accepted: float = 0.0
    drafts: float = 0.0
    """Requests that drafted, summed over iterations: verify cycles [cycles]."""
    tokens: float = 0.0
    """Tokens of the decode-only iterations timed (see the module) [tokens]."""
    latency_ms: float = 0.0
    """Their time [ms]."""
    request_ms: float = 0.0
    """Their time times their generation requests [request-ms]."""
    active: float = 0.0
    """``numActiveRequests`` summed over the iterations [requests]."""
    restarted: bool = False
    """``iter`` went backwards: the server restarted between two iterations read."""

    @property
    def accept_len(self) -> float:
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else math.nan

    @property
    def k(self) -> float:
        return self.draft_tokens / self.drafts if self.drafts > 0 else math.nan

    @property
    def aggregate_tok_s(self) -> float:
        return 1000.0 * self.tokens / self.latency_ms if self.latency_ms > 0 else math.nan

    @property
    def tok_s(self) -> float:
        return 1000.0 * self.tokens / self.request_ms if self.request_ms > 0 else math.nan

    @property
    def batch(self) -> float:
        return self.active / self.iterations if self.iterations else math.nan


class _Skip(Exception):
    """An iteration whose fields cannot be counted."""


def _count(obj: Any, key: str) -> float:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Skip
    # NaN, infinity and hundreds of digits too: no engine counts that far in one iteration
    if not 0 <= value < 1e15:
        raise _Skip
    return float(value)


def _iteration(item: Any) -> dict[str, float]:
    """One iteration's counts (:class:`_Skip` when it cannot be counted)."""
    if not isinstance(item, dict):
        raise _Skip
    batching = item.get("inflightBatchingStats")
    spec = item.get("specDecodingStats")
    out = {
        "latency": _count(item, "iterLatencyMS"),
        "active": _count(item, "numActiveRequests"),
        "gen": _count(batching, "numGenRequests") if batching is not None else math.nan,
        "ctx": _count(batching, "numContextRequests") if batching is not None else math.nan,
        "draft_tokens": 0.0,
        "accepted": 0.0,
        "drafts": 0.0,
    }
    if spec is not None:
        out["draft_tokens"] = _count(spec, "numDraftTokens")
        out["accepted"] = _count(spec, "numAcceptedTokens")
        out["drafts"] = _count(spec, "numRequestsWithDraftTokens")
        if out["accepted"] > out["draft_tokens"] or (out["draft_tokens"] and not out["drafts"]):
            raise _Skip
    out["speculates"] = float(spec is not None)
    out["iter"] = item["iter"] if isinstance(item.get("iter"), int) else -1
    return out


def pool_iteration_stats(answer: Any, where: str, name: str) -> IterationTotals:
    """The iterations of one ``/metrics`` answer (a list), pooled from their counts (see the
    module); anything but a list is a BreakevenError naming ``name`` and ``where``."""
    if not isinstance(answer, list):
        raise BreakevenError(
            "{0}: "
            + escape_braces(
                f"{where} answered a JSON {type(answer).__name__}, where trtllm-serve's "
                "/metrics is a list of iteration stats: is this trtllm-serve?"
            ),
            name,
        )
    sums = dict.fromkeys(
        ("draft_tokens", "accepted", "drafts", "tokens", "latency_ms", "request_ms", "active"),
        0.0,
    )
    counted = skipped = spec_iterations = 0
    last_iter, restarted = -1, False
    for item in answer:
        try:
            it = _iteration(item)
        except _Skip:
            skipped += 1
            continue
        counted += 1
        restarted = restarted or 0 <= it["iter"] < last_iter
        last_iter = it["iter"] if it["iter"] >= 0 else last_iter
        for key in ("draft_tokens", "accepted", "drafts"):
            sums[key] += it[key]
        sums["active"] += it["active"]
        spec_iterations += it["drafts"] > 0
        gen = it["gen"]
        every_one_drafted = not it["speculates"] or it["drafts"] == gen
        if it["ctx"] == 0 and gen > 0 and it["latency"] > 0 and every_one_drafted:
            sums["tokens"] += it["accepted"] + gen
            sums["latency_ms"] += it["latency"]
            sums["request_ms"] += gen * it["latency"]
    return IterationTotals(
        iterations=counted,
        skipped=skipped,
        spec_iterations=spec_iterations,
        restarted=restarted,
        **sums,
    )


__all__ = ["IterationTotals", "pool_iteration_stats"]
