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
import pandas as pd
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
        return _one_run(mean, n, math.nan, math.nan)
    (se,), (df,) = group_batch_errors(x, w, np.zeros(n, dtype=np.int64), 1)
    return _one_run(mean, n, se, df)


def _one_run(mean: float, n: int, se: float, df: float) -> MeanEstimate:
    """One run's estimate: its rate ``mean`` over its ``n`` values, with its batch-means error
    ``se`` and degrees of freedom ``df`` (NaN: too few values, below :data:`MIN_VALUES`)."""
    if n < MIN_VALUES:
        return MeanEstimate(
            mean,
            math.nan,
            math.nan,
            1,
            f"one run of {n} values: too few for an interval (needs {MIN_VALUES})",
        )
    b = int(df) + 1
    return MeanEstimate(
        mean, float(se), float(df), 1, f"batch means over {n} values in {b} batches"
    )


def group_batch_errors(values: Any, tokens: Any, number: Any, groups: int) -> tuple[Any, Any]:
    """Each group's batch-means standard error of its rate [the values' unit] and its degrees
    of freedom (:func:`batch_means`, vectorised over groups; NaN for a group of fewer than
    :data:`MIN_VALUES` values).  ``values`` are finite and in time order within each group;
    ``number`` is each value's group, 0 to ``groups`` - 1; ``tokens`` as for :func:`pooled_rate`
    (None: none)."""
    number = np.asarray(number, dtype=np.int64)
    n = np.bincount(number, minlength=groups)
    b = np.maximum(MIN_BATCHES, np.round(np.power(n, 1 / 3))).astype(np.int64)
    size = n // b
    skip = n - b * size  # the warm-up end of each group, left out of the error
    place = _places(number, groups)
    enough = n >= MIN_VALUES
    take = enough[number] & (place >= skip[number])
    first = np.concatenate(([0], np.cumsum(b)[:-1]))  # each group's first batch
    at = number[take]
    batch = first[at] + (place[take] - skip[at]) // size[at]
    w = None if tokens is None else np.asarray(tokens, dtype=float)[take]
    rates, _ = group_pooled_rates(batch, np.asarray(values, dtype=float)[take], w, int(b.sum()))
    _, sd, _ = group_mean_sd(rates, np.repeat(np.arange(groups), b), groups)
    with np.errstate(invalid="ignore"):
        se = np.where(enough, sd / np.sqrt(b), np.nan)
    return se, np.where(enough, b - 1.0, np.nan)


def group_mean_sd(x: Any, number: Any, groups: int) -> tuple[Any, Any, Any]:
    """Each group's mean of its finite values, their sample standard deviation (``ddof`` 1,
    two passes; NaN below two values) and their count, vectorised."""
    x = np.asarray(x, dtype=float)
    number = np.asarray(number, dtype=np.int64)
    ok = np.isfinite(x)
    x, number = x[ok], number[ok]
    count = np.bincount(number, minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(number, weights=x, minlength=groups) / count
        deviation = x - mean[number]
        squares = np.bincount(number, weights=deviation * deviation, minlength=groups)
        sd = np.where(count > 1, np.sqrt(squares / (count - 1)), np.nan)
    return mean, sd, count


def _places(number: Any, groups: int) -> Any:
    """Each value's place (0, 1, ...) among its group's values, in their order."""
    small = number.astype(np.uint16) if groups <= 1 << 16 else number  # radix-sorted: linear
    order = np.argsort(small, kind="stable")
    starts = np.searchsorted(number[order], np.arange(groups))
    place = np.empty(len(number), dtype=np.int64)
    place[order] = np.arange(len(number)) - starts[number[order]]
    return place


def across_launches(run_means: Sequence[float]) -> MeanEstimate:
    """The mean of two or more runs' rates, and its standard error."""

    x = np.asarray(run_means, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < 2:
        raise ValueError("across_launches needs two or more runs")
    (mean,), (sd,), _ = group_mean_sd(x, np.zeros(n, dtype=np.int64), 1)
    return _across(mean, sd, n)


def _across(mean: float, sd: float, n: int) -> MeanEstimate:
    """The estimate of ``n`` runs (two or more) from the mean and standard deviation of their
    rates."""
    return MeanEstimate(float(mean), float(sd / math.sqrt(n)), n - 1.0, n, f"across {n} runs")


def launch_mean_interval(values: Any, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The mean of launches' values (one value a launch, NaN ones left out) and its
    ``confidence`` interval across them, mean +- t(n - 1) x sd / sqrt(n) (:func:`across_launches`);
    no interval (NaN ends) with fewer than two launches: one launch's requests are not
    independent repeats."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return (float(x[0]) if len(x) else math.nan), math.nan, math.nan
    estimate = across_launches(x)
    half = float(stdtrit(estimate.df, (1 + confidence) / 2)) * estimate.se
    return estimate.mean, estimate.mean - half, estimate.mean + half


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
    return sides_and_spreads(values, launches, tokens, np.zeros(np.size(values), np.int64), 1)[0]


def sides_and_spreads(
    values: Any, launches: Any, tokens: Any, number: Any, groups: int
) -> list[tuple[MeanEstimate, LaunchSpread]]:
    """:func:`side_and_spread` of each group of values (``number``: each value's group, 0 to
    ``groups`` - 1; the values in time order within their group), in one pass over them:
    each group's numbers are those of its values alone.

    A side's launches are numbered in sorted order of their labels (as they come, where they
    come in order); its rate is the mean of its launches' rates (:func:`across_launches`),
    or with one launch, that launch's rate and its batch-means error (:func:`batch_means`)."""
    values, number, launches = (np.asarray(values, dtype=float), np.asarray(number), launches)
    w = None if tokens is None else np.asarray(tokens, dtype=float)
    keep = np.isfinite(values)
    if not keep.all():
        values, number, launches = values[keep], number[keep], np.asarray(launches)[keep]
        w = None if w is None else w[keep]
    number = number.astype(np.int64, copy=False)
    pair, pair_group = _launch_pairs(np.asarray(launches), number)
    rates, counts = group_pooled_rates(pair, values, w, len(pair_group))
    runs = np.bincount(pair_group, minlength=groups)  # each group's launches
    sizes = np.bincount(number, minlength=groups)  # and values
    mean, sd, finite = group_mean_sd(rates, pair_group, groups)
    one = (runs == 1)[number]  # the values of sides of one launch: a batch-means error
    se, df = group_batch_errors(values[one], None if w is None else w[one], number[one], groups)
    rel_se = _relative_errors(pair, values, counts, len(pair_group))
    starts = np.concatenate(([0], np.cumsum(runs)))
    found = []
    for g in range(groups):
        at = slice(starts[g], starts[g + 1])
        if runs[g] == 0:
            found.append((side([]), LaunchSpread((), math.nan, True)))
        elif runs[g] == 1:
            rate = float(rates[at][0])
            estimate = _one_run(rate, int(sizes[g]), se[g], df[g])
            found.append((estimate, LaunchSpread((rate,), math.nan, True)))
        else:
            estimate = _across(mean[g], sd[g], int(finite[g])) if finite[g] > 1 else None
            spread = _spread(rates[at], counts[at], rel_se[at])
            found.append((estimate or across_launches(rates[at]), spread))
    return found


def _launch_pairs(launches: Any, number: Any) -> tuple[Any, Any]:
    """Each value's (group, launch) pair, numbered in sorted order of group then launch label
    (0, 1, ...), and each pair's group."""
    if launches.dtype.kind in "iu" and len(launches) > 1:
        # In one pass where groups and their launches come in order (a log's launches do).
        new_group = number[1:] != number[:-1]
        rising = launches[1:] >= launches[:-1]
        if (number[1:] >= number[:-1]).all() and (new_group | rising).all():
            starts = np.concatenate(
                ([0], np.flatnonzero(new_group | ~(launches[1:] == launches[:-1])) + 1)
            )
            pair = np.zeros(len(launches), dtype=np.int64)
            pair[starts[1:]] = 1
            return np.cumsum(pair), number[starts]
    if launches.dtype.kind in "iu" and len(launches) and launches.min() >= 0:
        rank = launches.astype(np.int64)  # in the order of the labels themselves
    else:
        rank = _sorted_codes(launches)
    width = int(rank.max()) + 1 if len(rank) else 1
    pair = _sorted_codes(number * width + rank)
    pairs = np.zeros(int(pair.max()) + 1 if len(pair) else 0, dtype=np.int64)
    pairs[pair] = number
    return pair, pairs


def _sorted_codes(values: Any) -> Any:
    """Each value's rank among the distinct values, in sorted order (np.unique's inverse):
    small non-negative integers by a table of those present, else by hashing and a sort of the
    distinct values alone."""
    if (
        values.dtype.kind in "iu"
        and len(values)
        and 0 <= values.min() <= values.max() < (4 * len(values) + 1024)
    ):
        present = np.zeros(int(values.max()) + 1, dtype=np.int64)
        present[values] = 1
        return (np.cumsum(present) - 1)[values]
    codes, distinct = pd.factorize(values, use_na_sentinel=False)
    order = np.argsort(np.asarray(distinct), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes]


def group_sides(
    values: Any, launches: Any, tokens: Any, number: Any, groups: int
) -> tuple[Any, Any, Any]:
    """:func:`side_of_launches` of each group at once, in one pass over the values: each
    group's rate [tok/s], its standard error [tok/s] and degrees of freedom (arrays over the
    groups; NaN where a group has no value, or too few for an error).  ``number`` is each
    value's group (0 to ``groups`` - 1; negative: none), the values in time order within
    their group; a group of one launch takes the batch-means error, one of several the
    spread of its launches' rates."""
    values = np.asarray(values, dtype=float)
    number = np.asarray(number, dtype=np.int64)
    keep = np.isfinite(values) & (number >= 0)
    values, number = values[keep], number[keep]
    w = None if tokens is None else np.asarray(tokens, dtype=float)[keep]
    launch, _ = pd.factorize(np.asarray(launches)[keep])  # hashed: no sort
    width = int(launch.max()) + 1 if len(launch) else 1
    pair, pairs = pd.factorize(number * width + launch)
    pair_group = pairs // width  # each (group, launch) pair's group
    rates, _ = group_pooled_rates(pair, values, w, len(pairs))
    mean, sd, runs = group_mean_sd(rates, pair_group, groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        se, df = sd / np.sqrt(runs), runs - 1.0
    one = np.bincount(pair_group, minlength=groups) == 1
    alone = one[pair_group]
    one_rate = np.full(groups, np.nan)
    one_rate[pair_group[alone]] = rates[alone]
    batch_se, batch_df = group_batch_errors(values, w, number, groups)
    return np.where(one, one_rate, mean), np.where(one, batch_se, se), np.where(one, batch_df, df)


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


def _relative_errors(codes: Any, values: Any, counts: Any, groups: int) -> Any:
    """Each launch's relative standard error of its rate: the spread of its values over their
    mean, over the square root of their count (``codes``: each value's launch)."""
    total = np.bincount(codes, weights=values, minlength=groups)
    squares = np.bincount(codes, weights=values**2, minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / counts
        var = np.maximum(squares / counts - mean**2, 0.0) * counts / (counts - 1)
        return np.sqrt(var / counts) / mean


def _spread(rates: Any, counts: Any, rel_se: Any) -> LaunchSpread:
    """One side's :class:`LaunchSpread` from its launches' rates, counts of values and
    relative errors (:func:`_relative_errors`)."""
    measured = np.flatnonzero((counts > 0) & (rates > 0))
    if len(measured) < 2:
        return LaunchSpread(tuple(rates[counts > 0].tolist()), math.nan, True)
    fast = measured[np.argmax(rates[measured])]
    slow = measured[np.argmin(rates[measured])]
    ratio = float(rates[fast] / rates[slow])
    se = math.hypot(rel_se[fast], rel_se[slow])
    explained = bool(math.log(ratio) <= SPREAD_Z * se) if math.isfinite(se) else False
    return LaunchSpread(tuple(rates[measured].tolist()), ratio, explained)


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
    delta method, Welch-Satterthwaite degrees of freedom: :func:`interval_bounds`)."""

    covers, brief = _covers(s.launches, b.launches)
    method = f"speculative: {s.method}; baseline: {b.method}"
    ratio, low, high = interval_bounds(s.mean, s.se, s.df, b.mean, b.se, b.df, confidence)
    return SpeedupInterval(float(ratio), float(low), float(high), covers, brief, method)


def interval_bounds(
    s_mean: Any,
    s_se: Any,
    s_df: Any,
    b_mean: Any,
    b_se: Any,
    b_df: Any,
    confidence: float = CONFIDENCE,
) -> tuple[Any, Any, Any]:
    """The speedup ``s_mean / b_mean`` [x] and its interval's ends, from each side's mean rate,
    standard error and degrees of freedom (numbers, or arrays of many pairs of sides).

    On the log scale: the two relative errors combined (delta method), a t quantile at the
    Welch-Satterthwaite degrees of freedom, exponentiated.  No speedup (NaN) without a
    positive baseline; no interval (NaN ends) without a positive speedup and both errors; a
    point where both errors are 0; (0, inf) where a side's error dwarfs its mean."""
    s_mean, s_se, s_df, b_mean, b_se, b_df = (
        np.asarray(x, dtype=float) for x in (s_mean, s_se, s_df, b_mean, b_se, b_df)
    )
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = np.where((b_mean > 0) & (s_mean >= 0), s_mean / b_mean, np.nan)
        rel_s, rel_b = s_se / s_mean, b_se / b_mean
        se_log = np.hypot(rel_s, rel_b)
        df = se_log**4 / (rel_s**4 / s_df + rel_b**4 / b_df)  # Welch-Satterthwaite
        half = stdtrit(df, (1 + confidence) / 2) * se_log  # the half-width on the log scale
        bounded = half < _MAX_LOG_HALF_WIDTH  # beyond it, a side's error dwarfs its mean
        low = np.where(bounded, ratio * np.exp(-half), 0.0)
        high = np.where(bounded, ratio * np.exp(np.where(bounded, half, 0.0)), np.inf)
    point = se_log == 0
    low, high = np.where(point, ratio, low), np.where(point, ratio, high)
    sized = (ratio > 0) & (s_se >= 0) & (b_se >= 0)
    return ratio, np.where(sized, low, np.nan), np.where(sized, high, np.nan)


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
