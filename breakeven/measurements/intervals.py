"""Intervals for a measured speedup that mean what they say.

The unit of repetition is a *run*: a ``run_id`` (one ``bench`` invocation), else one
log or file, or the files you join as one launch.  The logging intervals or requests
of one run are correlated in time, and share whatever that run got (placement, clocks,
a cold cache), so they are not independent repeats.  A run is not known to be a server
launch: two ``bench`` invocations against one server are two runs of one launch, and
launch-to-launch variation shows only between runs of separate launches.  Two cases:

- **Within one run** (a side has a single run): the mean rate's standard
  error comes from *batch means*, the series cut into about n^(1/3) consecutive
  batches, at least 4 (the method for correlated simulation output; batches of
  about n^(2/3) values keep their means nearly independent: sqrt(n) batches
  covered 84-91% on an AR(1) series with phi 0.8-0.95, n^(1/3) covered 93%).  The
  interval covers the noise inside the run only, not run-to-run (or
  launch-to-launch) variation, and says so.
- **Across runs** (a side has two or more runs): each run is reduced to
  its rate, and the runs are the sample.

A rate is a ratio of sums, tokens over time, never a mean of rates
(:func:`pooled_rate`): where the values give the tokens each one decoded (a ``bench``
row's ``completion_tokens``), a run's rate, and each batch's, is the tokens over the
time they took.

The speedup is the ratio of mean rates, speculative over baseline; its interval
is built on the log scale, ``log(m_s) - log(m_b)`` with the two standard errors
combined (delta method) and Welch-Satterthwaite degrees of freedom, then
exponentiated.  For the handful of runs a side usually has, this covers better
than a bootstrap over runs (tests/test_intervals.py measures both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import stdtrit  # t.ppf's own kernel, without its per-call checks

from breakeven import render
from breakeven.core.quantities import plain_json
from breakeven.model.pooling import group_pooled_rates, pooled_rate

CONFIDENCE = 0.95
MIN_BATCHES = 4
"""Batches of one run, at least."""
MIN_VALUES = 16
"""Values (logging intervals, requests) one run needs for an interval of its own."""


@dataclass(frozen=True)
class MeanEstimate:
    """One side's mean rate, its standard error and where the error comes from."""

    mean: float
    """Rate [tok/s]: the mean of the runs' rates, or one run's rate (a ratio of sums where
    its values give their tokens)."""
    se: float
    """Standard error of ``mean`` [tok/s] (NaN where too few values)."""
    df: float
    """Degrees of freedom of ``se``."""
    launches: int
    """Runs the side holds (a run_id, a file, or files joined as one launch)."""
    method: str
    """'batch means over N values in B batches', 'across N runs', or why there is no error."""


@dataclass(frozen=True)
class SpeedupInterval:
    """A speedup (ratio of mean rates) and its interval."""

    speedup: float
    low: float
    high: float
    covers: str
    """What the interval covers, in words: 'within one run each, so run-to-run variation (a
    server restart) is not included', 'across 3 and 4 runs'."""
    covers_brief: str
    """The same in a few words, for a headline: 'within one run each', 'the baseline within
    one run', 'across 3 and 4 runs'."""
    method: str
    """How each side's error was estimated."""

    def to_dict(self) -> dict[str, Any]:
        """``speedup`` and its interval ``ci_low``-``ci_high`` [x] (None where there is none),
        ``interval_covers`` and ``interval_method``."""
        return plain_json(
            {
                "speedup": self.speedup,
                "ci_low": self.low,
                "ci_high": self.high,
                "interval_covers": self.covers,
                "interval_method": self.method,
            }
        )

    def report(self) -> str:
        """The speedup, its 95% interval, what the interval covers and how it was estimated."""
        return render.speedup_interval_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.speedup_interval_html(self.to_dict())


def batch_means(values: Sequence[float], tokens: Any = None) -> MeanEstimate:
    """The rate of one run's time-ordered values and its batch-means standard error.

    The series is cut into ``b = max(4, round(n ** (1/3)))`` consecutive batches of
    ``n // b`` values (the first ``n mod b`` values, the warm-up end, are left out of
    the error but not of the rate); the batches' rates' spread gives the error with
    ``b - 1`` degrees of freedom.  With ``tokens`` (each value's decoded tokens), the run's
    rate and each batch's are ratios of sums (:func:`pooled_rate`).
    """

    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    w = None if tokens is None else np.asarray(tokens, dtype=float)[finite]
    x = x[finite]
    n = len(x)
    mean = pooled_rate(x, w) if n else math.nan
    if n < MIN_VALUES:
        return MeanEstimate(
            mean,
            math.nan,
            math.nan,
            1,
            f"one run of {n} values: too few for an interval (needs {MIN_VALUES})",
        )
    b = max(MIN_BATCHES, round(n ** (1 / 3)))
    size = n // b
    skip = n - b * size
    batch = np.repeat(np.arange(b), size)
    batches, _ = group_pooled_rates(batch, x[skip:], None if w is None else w[skip:], b)
    se = float(batches.std(ddof=1) / math.sqrt(b))
    return MeanEstimate(mean, se, b - 1.0, 1, f"batch means over {n} values in {b} batches")


def across_launches(run_means: Sequence[float]) -> MeanEstimate:
    """The mean of two or more runs' rates, and its standard error."""

    x = np.asarray(run_means, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 2:
        raise ValueError("across_launches needs two or more runs")
    return MeanEstimate(
        float(x.mean()), float(x.std(ddof=1) / math.sqrt(n)), n - 1.0, n, f"across {n} runs"
    )


def side(runs: Sequence[Sequence[float]]) -> MeanEstimate:
    """One side's estimate from its runs (each a time-ordered sequence of rates)."""

    runs = [r for r in runs if len(r)]
    if len(runs) == 1:
        return batch_means(runs[0])
    if not runs:
        return MeanEstimate(math.nan, math.nan, math.nan, 0, "no values")
    return across_launches([float(np.mean(np.asarray(r, dtype=float))) for r in runs])


def side_of_launches(values: Any, launches: Any, tokens: Any = None) -> MeanEstimate:
    """One side's estimate from its rates and each rate's run (any labels), in time order;
    vectorised, for many runs.  With ``tokens`` (each value's decoded tokens), each run's
    rate is a ratio of sums (:func:`pooled_rate`)."""
    return side_and_spread(values, launches, tokens)[0]


def side_and_spread(
    values: Any, launches: Any, tokens: Any = None
) -> tuple[MeanEstimate, LaunchSpread]:
    """:func:`side_of_launches` and :func:`launch_spread` of one side, its launches' rates
    computed once."""
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values)
    values = values[keep]
    w = None if tokens is None else np.asarray(tokens, dtype=float)[keep]
    codes = _launch_codes(np.asarray(launches)[keep])
    if not len(codes):
        return side([]), LaunchSpread((), math.nan, True)
    groups = int(codes.max()) + 1
    rates, counts = group_pooled_rates(codes, values, w, groups)
    if groups == 1:
        return batch_means(values, w), LaunchSpread(tuple(rates.tolist()), math.nan, True)
    return across_launches(rates[counts > 0]), _spread(codes, values, rates, counts, groups)


@dataclass(frozen=True)
class LaunchSpread:
    """How far the launches (runs) of one side disagree, and whether their own spread explains
    it."""

    rates: tuple[float, ...]
    """Each launch's rate [tok/s], a ratio of sums, in the order the launches came."""
    ratio: float
    """Fastest over slowest launch [x]; NaN with fewer than two launches."""
    explained: bool
    """Whether each launch's own spread (the standard error of its rate, from its values)
    explains the gap: the log-ratio is within :data:`SPREAD_Z` standard errors.  False where a
    launch has too few values to tell (fewer than 2)."""

    def disagree(self, limit: float) -> bool:
        """The launches disagree beyond ``limit`` [x], and beyond their own spread."""
        return self.ratio > limit and not self.explained


SPREAD_Z = 3.0
"""Standard errors of the log-ratio of two launches' rates within which their own spread
explains their gap (:class:`LaunchSpread`)."""


def launch_spread(values: Any, launches: Any, tokens: Any = None) -> LaunchSpread:
    """The launches' rates of one side (``values`` and each value's launch, as for
    :func:`side_of_launches`), fastest over slowest, and whether the two launches' own spread
    explains that ratio: each launch's relative standard error is the spread of its values
    over their mean, over the square root of their count."""
    return side_and_spread(values, launches, tokens)[1]


def _spread(codes: Any, values: Any, rates: Any, counts: Any, groups: int) -> LaunchSpread:
    measured = np.flatnonzero((counts > 0) & (rates > 0))
    if len(measured) < 2:
        return LaunchSpread(tuple(rates[counts > 0].tolist()), math.nan, True)
    total = np.bincount(codes, weights=values, minlength=groups)
    squares = np.bincount(codes, weights=values**2, minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / counts
        var = np.maximum(squares / counts - mean**2, 0.0) * counts / (counts - 1)
        rel_se = np.sqrt(var / counts) / mean
    fast = measured[np.argmax(rates[measured])]
    slow = measured[np.argmin(rates[measured])]
    ratio = float(rates[fast] / rates[slow])
    se = math.hypot(rel_se[fast], rel_se[slow])
    explained = bool(math.log(ratio) <= SPREAD_Z * se) if math.isfinite(se) else False
    return LaunchSpread(tuple(rates[measured].tolist()), ratio, explained)


def _launch_codes(launches: Any) -> Any:
    """Each value's launch as 0, 1, ...: in one pass where the launches come in order (as
    a log's do), else by sorting them."""

    if (
        launches.dtype.kind in "iuf"
        and len(launches)
        and bool(np.all(launches[1:] >= launches[:-1]))
    ):
        return np.concatenate(([0], np.cumsum(launches[1:] != launches[:-1])))
    return np.unique(launches, return_inverse=True)[1].reshape(-1)


def speedup_interval(
    spec_runs: Sequence[Sequence[float]],
    base_runs: Sequence[Sequence[float]],
    confidence: float = CONFIDENCE,
) -> SpeedupInterval:
    """The speedup mean(spec) / mean(base) and its ``confidence`` interval.

    Parameters
    ----------
    spec_runs, base_runs : sequence of sequences of float
        Per-sequence decode rates [tok/s] of each launch, in time order.
    """
    return interval_of(side(spec_runs), side(base_runs), confidence)


def interval_of(
    s: MeanEstimate, b: MeanEstimate, confidence: float = CONFIDENCE
) -> SpeedupInterval:
    """The speedup ``s.mean / b.mean`` of two sides' estimates, and its interval (log scale,
    delta method, Welch-Satterthwaite degrees of freedom)."""

    ratio = s.mean / b.mean if b.mean > 0 and s.mean >= 0 else math.nan
    covers, brief = _covers(s.launches, b.launches)
    method = f"speculative: {s.method}; baseline: {b.method}"
    if not (ratio > 0) or not (s.se >= 0 and b.se >= 0):
        return SpeedupInterval(ratio, math.nan, math.nan, covers, brief, method)
    rel_s, rel_b = s.se / s.mean, b.se / b.mean
    se_log = math.hypot(rel_s, rel_b)
    if se_log == 0:
        return SpeedupInterval(ratio, ratio, ratio, covers, brief, method)
    df = se_log**4 / (rel_s**4 / s.df + rel_b**4 / b.df)  # Welch-Satterthwaite
    t = float(stdtrit(df, (1 + confidence) / 2))
    half = t * se_log  # the half-width on the log scale
    if not half < _MAX_LOG_HALF_WIDTH:  # a side's error dwarfs its mean: no bound above
        return SpeedupInterval(ratio, 0.0, math.inf, covers, brief, method)
    low, high = ratio * math.exp(-half), ratio * math.exp(half)
    return SpeedupInterval(ratio, low, high, covers, brief, method)


_MAX_LOG_HALF_WIDTH = 700.0
"""Beyond this half-width on the log scale, ``exp`` overflows a float: the interval is then
(0, inf).  One real case: ``vllm bench serve`` at concurrency 4 on a loaded machine, whose
client read a request's tokens all at once, so that its decode time was near 0 and its rate
huge."""


def verdict(speedup: float, low: float, high: float) -> str:
    """'faster' or 'slower' when the interval excludes 1, 'within noise' when it holds 1,
    'no interval' without one, 'not measured' without a speedup."""
    if math.isnan(speedup):
        return "not measured"
    if math.isnan(low) or math.isnan(high):
        return "no interval"
    if low <= 1.0 <= high:
        return "within noise"
    return "faster" if low > 1.0 else "slower"


def agrees(
    measured: float,
    ci_low: float | None,
    ci_high: float | None,
    predicted: float,
    predicted_low: float | None = None,
    predicted_high: float | None = None,
    tolerance: float = 0.0,
) -> bool:
    """Whether a measured speedup agrees with a prediction [x]: their intervals overlap.  The
    measured side is its 95% interval (the point where it has none); the predicted side is
    its interval where one was sized (a fit file's), else the point widened by
    ``tolerance`` [fraction] each way, which stands in for the interval it lacks."""
    low = measured if ci_low is None or math.isnan(ci_low) else ci_low
    high = measured if ci_high is None or math.isnan(ci_high) else ci_high
    if predicted_low is None or predicted_high is None or math.isnan(predicted_low):
        return low * (1 - tolerance) <= predicted <= high * (1 + tolerance)
    return predicted_low <= high and low <= predicted_high


def _covers(spec_launches: int, base_launches: int) -> tuple[str, str]:
    """What an interval over these runs covers: in full, and in a few words."""
    if spec_launches == base_launches == 1:
        return (
            "within one run each, so run-to-run variation (a server restart) is not included",
            "within one run each",
        )
    if spec_launches == 1 or base_launches == 1:
        one, many = (
            ("speculative", base_launches) if spec_launches == 1 else ("baseline", spec_launches)
        )
        return (
            f"across {many} runs on one side, within one run of the {one} side, whose "
            "run-to-run variation is not included",
            f"the {one} within one run",
        )
    across = f"across {spec_launches} and {base_launches} runs"
    return across, across


ADVICE_ONE_LAUNCH = (
    "repeat both runs in new launches (restart the server) to measure launch-to-launch variation"
)
