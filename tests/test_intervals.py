"""Speedup intervals whose coverage is measured: simulated runs with a known answer (500 datasets
each), against the naive interval that takes correlated intervals, or one launch's requests,
for independent repeats."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.measurements.intervals import batch_means, side, side_of_launches, speedup_interval
from breakeven.model.pooling import group_pooled_rates, pooled_rate

TRUE_SPEEDUP = 72.0 / 60.0
DATASETS = 500


def ar1(rng, n, mu, phi, sigma=3.0):
    """n rates with mean mu whose noise is AR(1) with lag-1 correlation phi."""
    e = np.empty(n)
    e[0] = rng.normal(0, sigma / math.sqrt(1 - phi**2))
    z = rng.normal(0, sigma, n)
    for t in range(1, n):
        e[t] = phi * e[t - 1] + z[t]
    return mu + e


def naive(spec, base):
    """The interval that treats every value as an independent repeat (normal, log scale)."""
    ms, mb = spec.mean(), base.mean()
    se = math.hypot(
        spec.std(ddof=1) / math.sqrt(len(spec)) / ms, base.std(ddof=1) / math.sqrt(len(base)) / mb
    )
    r = ms / mb
    return r * math.exp(-1.96 * se), r * math.exp(1.96 * se)


def coverage(make, seed):
    rng = np.random.default_rng(seed)
    ours = simple = 0
    for _ in range(DATASETS):
        spec_runs, base_runs = make(rng)
        got = speedup_interval(spec_runs, base_runs)
        ours += got.low <= TRUE_SPEEDUP <= got.high
        low, high = naive(np.concatenate(spec_runs), np.concatenate(base_runs))
        simple += low <= TRUE_SPEEDUP <= high
    return ours / DATASETS, simple / DATASETS


def test_one_launch_of_correlated_intervals_covers_about_95_percent():
    def make(rng):  # a decode log's windows: one launch a side, AR(1) with phi 0.8
        return [ar1(rng, 100, 72.0, 0.8)], [ar1(rng, 100, 60.0, 0.8)]

    ours, simple = coverage(make, seed=1)
    assert 0.90 <= ours <= 0.99
    assert simple < 0.65  # measured 0.48: the windows are not independent repeats


@pytest.mark.parametrize("launches", [2, 3, 5])
def test_repeated_launches_with_a_launch_effect_cover_about_95_percent(launches):
    def make(rng):  # each launch's mean moves by 4% (placement, clocks), noise AR(1) phi 0.5
        return (
            [ar1(rng, 50, 72.0 * (1 + rng.normal(0, 0.04)), 0.5) for _ in range(launches)],
            [ar1(rng, 50, 60.0 * (1 + rng.normal(0, 0.04)), 0.5) for _ in range(launches)],
        )

    ours, simple = coverage(make, seed=launches)
    assert 0.90 <= ours <= 0.995
    assert simple < 0.6  # measured 0.30-0.35: pooling launches hides their variation


def test_what_the_interval_covers_is_said():
    rng = np.random.default_rng(0)
    one = speedup_interval([ar1(rng, 64, 72, 0.5)], [ar1(rng, 64, 60, 0.5)])
    assert one.covers.startswith("within one run each") and "batch means over 64" in one.method
    many = speedup_interval(
        [ar1(rng, 20, 72, 0.5) for _ in range(3)], [ar1(rng, 20, 60, 0.5) for _ in range(4)]
    )
    assert many.covers == "across 3 and 4 runs" and many.low < many.speedup < many.high
    mixed = speedup_interval([ar1(rng, 64, 72, 0.5)], [ar1(rng, 20, 60, 0.5) for _ in range(3)])
    assert "within one run of the speculative side" in mixed.covers


def test_too_few_values_give_no_interval_and_say_why():
    got = speedup_interval([[70.0, 71.0, 72.0]], [[60.0, 61.0]])
    assert got.speedup == pytest.approx(71.0 / 60.5)
    assert math.isnan(got.low) and math.isnan(got.high)
    assert "too few for an interval (needs 16)" in got.method
    assert math.isnan(batch_means([]).mean) and side([]).launches == 0


rates = st.lists(st.floats(1.0, 1000.0), min_size=16, max_size=80)


@settings(max_examples=60, deadline=None)
@given(spec=rates, base=rates, scale=st.floats(0.01, 100.0))
def test_interval_properties(spec, base, scale):
    got = speedup_interval([spec], [base])
    if math.isnan(got.low):
        return
    assert got.low <= got.speedup * (1 + 1e-12) and got.speedup <= got.high * (1 + 1e-12)
    scaled = speedup_interval([[v * scale for v in spec]], [[v * scale for v in base]])
    assert scaled.low == pytest.approx(got.low, rel=1e-9)  # units do not matter
    swapped = speedup_interval([base], [spec])
    assert swapped.low == pytest.approx(1 / got.high, rel=1e-9)  # baseline over spec: inverse


def test_a_burst_does_not_carry_the_rate():
    # Issue 23, finding 1: 16 requests of 64 decoded tokens at about 10 tok/s, and one whose
    # 64 tokens came in one burst 0.5 ms long (128,000 tok/s).  The mean of the rates reads
    # 7,500 tok/s; the tokens over the time, 10.5 tok/s.
    rates = np.array([10.0] * 16 + [128_000.0])
    tokens = np.full(17, 64.0)
    assert rates.mean() > 7_000
    pooled = pooled_rate(rates, tokens)
    assert pooled == pytest.approx(17 * 64 / (16 * 6.4 + 0.0005))
    estimate = batch_means(rates, tokens)
    assert estimate.mean == pytest.approx(pooled) and estimate.se < 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.01, 1e5, allow_nan=False), st.floats(1, 1e4, allow_nan=False)),
        min_size=1,
        max_size=40,
    )
)
def test_pooled_rate_is_the_tokens_over_the_time(requests):
    rates = np.array([r for r, _ in requests])
    tokens = np.array([t for _, t in requests])
    seconds = tokens / rates
    assert pooled_rate(rates, tokens) == pytest.approx(tokens.sum() / seconds.sum(), rel=1e-9)
    # Splitting each request into two halves at its own rate changes nothing.
    halves = pooled_rate(np.repeat(rates, 2), np.repeat(tokens / 2, 2))
    assert halves == pytest.approx(pooled_rate(rates, tokens), rel=1e-9)
    # Between the slowest and the fastest request, and never above the mean of the rates.
    assert rates.min() * (1 - 1e-9) <= pooled_rate(rates, tokens) <= rates.max() * (1 + 1e-9)
    assert pooled_rate(rates, tokens) <= rates.mean() * (1 + 1e-9) or len(set(tokens)) > 1


def test_without_tokens_a_rate_is_the_mean_and_runs_are_the_unit():
    # A log's windows give only rates: their mean.  Where one value of a group has no tokens
    # the group is averaged, as nothing else can be done with it.
    assert pooled_rate([10.0, 30.0]) == pytest.approx(20.0)
    assert pooled_rate([10.0, 30.0], [5.0, np.nan]) == pytest.approx(20.0)
    assert math.isnan(pooled_rate([np.nan]))
    rates, counts = group_pooled_rates([0, 0, 1], [10.0, 30.0, 7.0], [30.0, 30.0, 1.0], 2)
    assert rates == pytest.approx([60 / 4, 7.0]) and list(counts) == [2, 1]
    # Two runs (bench invocations): each run's pooled rate, then across runs.
    two = side_of_launches([10.0, 30.0, 20.0, 20.0], ["a", "a", "b", "b"], [30.0] * 4)
    assert two.launches == 2 and two.mean == pytest.approx((15.0 + 20.0) / 2)
    assert two.method == "across 2 runs"


def test_an_error_that_dwarfs_its_mean_gives_an_unbounded_interval_not_an_overflow():
    """A side whose standard error is a thousand times its mean (a request whose tokens were
    read all at once: a decode time near 0, a rate near infinity) once overflowed exp()."""
    import math

    from breakeven.measurements.intervals import MeanEstimate, interval_of, verdict

    spec = MeanEstimate(100.0, 1e5, 1.0, 2, "across 2 runs")
    base = MeanEstimate(50.0, 1.0, 10.0, 2, "across 2 runs")
    interval = interval_of(spec, base)
    assert interval.speedup == 2.0
    assert interval.low == 0.0 and interval.high == math.inf
    assert verdict(interval.speedup, interval.low, interval.high) == "within noise"


# Issue 43, part 4: check estimates every run's side, and every set of baseline rows', in one
# pass (sides_and_spreads).  The oracle is the one-side computation it replaced, as it was
# written (breakeven before issue 43): each side's launches numbered on their own (in one pass
# where they come in order, else by np.unique), their rates pooled, then batch means for one
# launch, the spread across launches for several, and the fastest launch over the slowest.


def _old_side_and_spread(values, launches, tokens=None):
    from breakeven.measurements.intervals import SPREAD_Z, LaunchSpread, across_launches

    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values)
    values = values[keep]
    w = None if tokens is None else np.asarray(tokens, dtype=float)[keep]
    launches = np.asarray(launches)[keep]
    if launches.dtype.kind in "iuf" and len(launches) and np.all(launches[1:] >= launches[:-1]):
        codes = np.concatenate(([0], np.cumsum(launches[1:] != launches[:-1])))
    else:
        codes = np.unique(launches, return_inverse=True)[1].reshape(-1)
    if not len(codes):
        return side([]), LaunchSpread((), math.nan, True)
    groups = int(codes.max()) + 1
    rates, counts = group_pooled_rates(codes, values, w, groups)
    if groups == 1:
        return batch_means(values, w), LaunchSpread(tuple(rates.tolist()), math.nan, True)
    measured = np.flatnonzero((counts > 0) & (rates > 0))
    if len(measured) < 2:
        spread = LaunchSpread(tuple(rates[counts > 0].tolist()), math.nan, True)
    else:
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
        spread = LaunchSpread(tuple(rates[measured].tolist()), ratio, explained)
    return across_launches(rates[counts > 0]), spread


_SIDE = st.tuples(
    st.lists(
        st.one_of(
            st.floats(0.0, 500.0, allow_subnormal=False),
            st.sampled_from([float("nan"), 0.0]),
            st.floats(1e-3, 1e6),
        ),
        min_size=0,
        max_size=60,
    ),
    st.integers(1, 5),  # launches
    st.booleans(),  # launches in order
    st.booleans(),  # with tokens
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=150, deadline=None)
@given(sides=st.lists(_SIDE, min_size=1, max_size=6), labels=st.sampled_from(["int", "text"]))
def test_sides_of_many_groups_are_each_sides_own(sides, labels):
    from breakeven.measurements.intervals import side_and_spread, sides_and_spreads

    values, launches, tokens, number = [], [], [], []
    for g, (v, n_launches, in_order, with_tokens, seed) in enumerate(sides):
        rng = np.random.default_rng(seed)
        launch = rng.integers(0, n_launches, len(v)) * 3 + int(rng.integers(0, 2))
        launch = np.sort(launch) if in_order else launch
        if labels == "text":
            launch = np.array([f"launch-{x}" for x in launch], dtype=object)
        values.append(np.array(v, dtype=float))
        launches.append(launch)
        tokens.append(
            rng.integers(0, 40, len(v)).astype(float) if with_tokens else np.full(len(v), np.nan)
        )
        number.append(np.full(len(v), g))
    together = sides_and_spreads(
        np.concatenate(values),
        np.concatenate(launches) if labels == "text" else np.concatenate(launches).astype(int),
        np.concatenate(tokens),
        np.concatenate(number).astype(int),
        len(sides),
    )
    for g in range(len(sides)):
        old = _old_side_and_spread(values[g], launches[g], tokens[g])
        # Every field, bit for bit (repr: NaN equals NaN).
        assert repr(together[g]) == repr(old)
        assert repr(side_and_spread(values[g], launches[g], tokens[g])) == repr(old)
