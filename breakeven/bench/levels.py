"""A level of ``breakeven bench`` (a concurrency, or a request rate): what it has measured so
far, its summary (the rates and their spread, its bursts, its load and latencies), its
acceptance from the server's counters, and what its bursts mean.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from breakeven.bench.config import Load
from breakeven.bench.stream import BURST_SHARE, RequestResult
from breakeven.iotools.metrics import shows_spec_decode_counters


@dataclass
class _Level:
    """What a level has measured so far; times from ``time.perf_counter`` [s]."""

    load: Load  # or a concurrency (int): a closed-loop level
    started: float
    before: str | None
    results: list[RequestResult] = field(default_factory=list)
    streamed: int = 0  # tokens streamed to the level's requests so far
    written: int = 0
    sent: int = 0  # requests sent to the server so far
    last_sent: float = math.nan  # when the last was sent
    in_flight: int = 0  # requests sent and not finished
    most_in_flight: int = 0
    last_done: float = math.nan  # when the last finished

    def __post_init__(self) -> None:
        if isinstance(self.load, int):  # a concurrency: a closed-loop level
            self.load = Load(self.load)

    @property
    def concurrency(self) -> int | None:
        """Requests in flight: the level's (closed loop) or its cap (open loop), else None."""
        return self.load.concurrency

    def sending(self) -> float:
        """Count a request sent now; returns now."""
        now = time.perf_counter()
        self.sent += 1
        self.last_sent = now
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return now

    def done(self, result: RequestResult, start: float) -> None:
        """Count a request finished, that was due (or sent) at ``start``."""
        self.in_flight -= 1
        self.last_done = time.perf_counter()
        result.start_s = start - self.started
        self.results.append(result)

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


def _burst_warning(words: str, summary: dict[str, Any]) -> str:
    """What a level's bursts mean for its rate: left out of ``tok_s``, or, where every request
    came in one, no client rate at all (``tok_s`` empty) and the server's own instead."""
    bursts, done = summary["bursts"], summary["requests"] - summary["failed"]
    what = (
        f"{bursts} of {done} requests at {words} came in one burst (decode "
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
        "request_rate": level.load.request_rate,
        "requests": len(results),
        "failed": len(results) - len(good),
        "bursts": len(good) - len(steady),
        "tok_s": sum(r.decoded_tokens for r in steady) / seconds if seconds > 0 else math.nan,
        "tok_s_median": statistics.median(rates) if rates else math.nan,
        "tok_s_iqr": quartiles[2] - quartiles[0] if quartiles else math.nan,
        "tok_s_sd": statistics.stdev(rates) if len(rates) > 1 else math.nan,
        "aggregate_tok_s": level.streamed / wall_s if wall_s > 0 else math.nan,
    }


def _percentiles(name: str, values: list[float]) -> dict[str, float]:
    """``{name}_p50_ms``, ``_p90_ms`` and ``_p99_ms`` of ``values`` [ms], interpolated
    between order statistics as ``numpy.percentile`` does (NaN for none)."""
    if len(values) > 1:
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        p50, p90, p99 = cuts[49], cuts[89], cuts[98]
    else:
        p50 = p90 = p99 = values[0] if values else math.nan
    return {f"{name}_p50_ms": p50, f"{name}_p90_ms": p90, f"{name}_p99_ms": p99}


def _load_summary(level: _Level) -> dict[str, Any]:
    """A level's load and latencies: the offered rate (``request_rate``, open loop), the
    achieved arrival rate (requests sent over the time to the last send), the completed
    requests per second over the level's duration (its start to its last request's end),
    the mean requests in flight (the completed requests' e2e_ms summed over the duration:
    Little's law) and the most at once, and the percentiles of ttft_ms, tpot_ms and
    e2e_ms (those of requests that came in one burst have no tpot_ms)."""
    ok = [r for r in level.results if r.ok]
    duration = level.last_done - level.started
    sending = level.last_sent - level.started
    has_duration = duration > 0
    return {
        "duration_s": duration if has_duration else math.nan,
        "arrival_rate": level.sent / sending if sending > 0 else math.nan,
        "request_throughput": len(ok) / duration if has_duration else math.nan,
        "mean_in_flight": (
            sum(r.e2e_ms for r in ok) / 1000.0 / duration if has_duration else math.nan
        ),
        "max_in_flight": level.most_in_flight,
        **_percentiles("ttft", [r.ttft_ms for r in ok]),
        **_percentiles("tpot", [r.tpot_ms for r in ok if not r.burst and r.tpot_ms > 0]),
        **_percentiles("e2e", [r.e2e_ms for r in ok]),
    }
