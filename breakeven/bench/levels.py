"""A concurrency level of ``breakeven bench``: what it has measured so far, its summary (the
rates and their spread, its bursts), its acceptance from the server's counters, and what its
bursts mean.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from breakeven.bench.stream import BURST_SHARE, RequestResult
from breakeven.iotools.metrics import shows_spec_decode_counters


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
