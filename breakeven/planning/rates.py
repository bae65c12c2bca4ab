"""Load in requests per second: a batch sweep's thresholds stated as request rates, by Little's
law over the decode phase (``breakeven batch --output-tokens``; issue 42).

In a steady state, the sequences a server decodes together are the requests arriving per
second times the time each spends decoding: ``B = rate * N * TPOT(B)``, with N the tokens each
request decodes and TPOT its time per output token at batch B.  So the rate that keeps a
batch of B busy is ``rate(B) = B / (N * TPOT(B))``: the plain step's at ``TPOT = t(B)``, and
speculation's at ``TPOT = t(B) / speedup(B)``.  Speculation decodes faster, so at one rate it
runs a smaller batch: it pays at a rate where its TPOT at its own batch is below the plain
TPOT at the plain batch, which is not the same as paying at the batch of that rate.

This holds for the mean batch of a steady state below saturation, where each request's time is
mostly decoding (a prefill short against N tokens of decode, or one the engine overlaps), and
the requests running are all decoding.  A Poisson stream's batch fluctuates around its mean
(by about its square root), which this mean-value reading leaves out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from breakeven.core.quantities import plain_json

BEYOND_THE_SWEEP = "beyond the batches swept"
"""The break-even request rate where speculation still pays at the most the sweep serves."""


@dataclass(frozen=True)
class RateView:
    """A batch sweep in requests per second (:func:`request_rates`)."""

    output_tokens: float
    """Tokens each request decodes, on average [tokens]: N of ``rate = B / (N * TPOT)``."""
    plain_rps: tuple[float, ...]
    """At each batch swept, the rate that keeps it busy without speculation [req/s]."""
    spec_rps: tuple[float, ...]
    """The same with speculation at that batch's k [req/s] (NaN: it cannot run there)."""
    breakeven_request_rate: float | str | None
    """The highest rate at which speculation's TPOT is below the plain one's, each at its own
    batch [req/s]: interpolated where two rates bracket the crossing; speculation's capacity
    where it pays up to the most it serves and the plain server serves more;
    :data:`BEYOND_THE_SWEEP` where it pays up to the most the plain server serves in the
    sweep; None where it never pays."""
    plain_capacity_rps: float
    """The most the plain server serves in the batches swept [req/s]."""
    spec_capacity_rps: float
    """The most it serves speculating [req/s]."""

    def to_dict(self) -> dict[str, Any]:
        return plain_json(asdict(self))


def _at(rate: float, rates: Sequence[float], values: Sequence[float]) -> float:
    """``values`` linearly interpolated at ``rate`` along the increasing ``rates`` (NaN outside
    them: a rate the sweep's batches do not serve)."""
    return float(np.interp(rate, rates, values, left=math.nan, right=math.nan))


def _rate(batch: int, output_tokens: float, tpot_ms: float) -> float:
    """The rate that keeps ``batch`` busy, each request decoding ``output_tokens`` at
    ``tpot_ms`` [req/s] (NaN where the TPOT is none)."""
    return batch * 1000.0 / (output_tokens * tpot_ms) if tpot_ms > 0 else math.nan


def _rising(rates: Sequence[float], tpots: Sequence[float]) -> tuple[list[float], list[float]]:
    """The sweep's rates and TPOTs while the rate rises with batch (past the most a server
    serves, a larger batch serves no more), finite ones only."""
    kept_rates: list[float] = []
    kept: list[float] = []
    for rate, tpot in zip(rates, tpots, strict=True):
        if not (math.isfinite(rate) and math.isfinite(tpot)):
            continue
        if kept_rates and rate <= kept_rates[-1]:
            break
        kept_rates.append(rate)
        kept.append(tpot)
    return kept_rates, kept


def request_rates(points: Sequence[Any], output_tokens: float) -> RateView:
    """A batch sweep's ``points`` (:class:`breakeven.planning.batch.BatchPoint`: batch, k,
    speedup, step_ms) in requests per second, each request decoding ``output_tokens``."""
    n = float(output_tokens)
    plain_tpot = [float(p.step_ms) for p in points]
    spec_tpot = [
        float(p.step_ms) / float(p.speedup) if p.k > 0 and p.speedup and p.speedup > 0 else math.nan
        for p in points
    ]
    plain = [_rate(p.batch, n, t) for p, t in zip(points, plain_tpot, strict=True)]
    spec = [_rate(p.batch, n, t) for p, t in zip(points, spec_tpot, strict=True)]
    plain_r, plain_t = _rising(plain, plain_tpot)
    spec_r, spec_t = _rising(spec, spec_tpot)
    return RateView(
        n,
        tuple(plain),
        tuple(spec),
        _breakeven_rate(plain_r, plain_t, spec_r, spec_t),
        max(plain_r, default=math.nan),
        max(spec_r, default=math.nan),
    )


def _breakeven_rate(
    plain_r: list[float], plain_t: list[float], spec_r: list[float], spec_t: list[float]
) -> float | str | None:
    """Where speculation's TPOT, at the batch a rate keeps busy speculating, stops being below
    the plain one at the batch that rate keeps busy without (both served)."""
    if not plain_r or not spec_r:
        return None
    if spec_r[0] > plain_r[-1]:  # speculation at batch 1 already serves more
        return BEYOND_THE_SWEEP
    low, high = max(plain_r[0], spec_r[0]), min(plain_r[-1], spec_r[-1])
    grid = sorted({r for r in (*plain_r, *spec_r) if low <= r <= high} | {low, high})
    gains = [_at(r, plain_r, plain_t) - _at(r, spec_r, spec_t) for r in grid]
    paying = [i for i, g in enumerate(gains) if g > 0]
    if not paying:
        return None
    last = paying[-1]
    if last == len(grid) - 1:  # paying where the first of the two stops serving more
        return spec_r[-1] if spec_r[-1] < plain_r[-1] else BEYOND_THE_SWEEP
    a, b = gains[last], gains[last + 1]  # a > 0 >= b: the crossing between them
    return grid[last] + (grid[last + 1] - grid[last]) * a / (a - b)


__all__ = ["BEYOND_THE_SWEEP", "RateView", "request_rates"]
