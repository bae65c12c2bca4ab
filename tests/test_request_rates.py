"""A batch sweep in requests per second (``batch --output-tokens``, issue 42): by Little's law
over decoding, the rate that keeps a batch of B busy is B / (N x TPOT(B)); speculation pays at
a rate where its TPOT, at the batch that rate keeps busy speculating, is below the plain TPOT at
the plain batch."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.planning.batch import BatchPoint
from breakeven.planning.rates import BEYOND_THE_SWEEP, request_rates
from tests.cli_checks import run_cli

CURVE = "data/llama3_8b_decode_curve.csv"
ENGINE = ["--engine", "vllm"]


def _points(plain_tpot, spec_tpot, batches=range(1, 129), k=3):
    """Points of a world where the plain TPOT at batch B is plain_tpot(B) and speculation's
    spec_tpot(B) [ms]."""
    return [
        BatchPoint(b, k, plain_tpot(b) / spec_tpot(b), plain_tpot(b), math.nan) for b in batches
    ]


def _solve(rate, tpot, n):
    """The batch a rate keeps busy, B = rate * N * TPOT(B) / 1000, by bisection (the test's
    own, from first principles)."""
    low, high = 1e-9, 128.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid < rate * n * tpot(mid) / 1000:
            low = mid
        else:
            high = mid
    return low


def test_each_batchs_rate_is_little_s_law_by_hand():
    points = _points(lambda b: 10 + 0.5 * b, lambda b: 6 + 0.9 * b, batches=(1, 2, 4, 8))
    view = request_rates(points, 200)
    for p, plain, spec in zip(points, view.plain_rps, view.spec_rps, strict=True):
        assert plain == pytest.approx(p.batch * 1000 / (200 * p.step_ms))
        assert spec == pytest.approx(p.batch * 1000 / (200 * p.step_ms / p.speedup))
    assert view.plain_capacity_rps == pytest.approx(max(view.plain_rps))


def test_the_break_even_rate_is_where_the_tpots_cross_each_at_its_own_batch():
    def plain(b):
        return 10 + 0.5 * b

    def spec(b):
        return 6 + 0.9 * b  # faster alone, slower loaded

    n = 256
    view = request_rates(_points(plain, spec), n)
    rate = view.breakeven_request_rate
    assert isinstance(rate, float)
    # At that rate, each side's own batch (solved here) gives the same TPOT.
    tb, ts = plain(_solve(rate, plain, n)), spec(_solve(rate, spec, n))
    assert ts == pytest.approx(tb, rel=0.01)
    # Below it speculation is faster, above it slower.
    for r, faster in ((0.8 * rate, True), (1.2 * rate, False)):
        assert (spec(_solve(r, spec, n)) < plain(_solve(r, plain, n))) is faster
    # At one rate speculation runs a smaller batch than the plain server: not the batch
    # where the speedup at one batch crosses 1 (B = 10 here).
    assert _solve(rate, spec, n) < _solve(rate, plain, n)


def test_never_paying_and_always_paying():
    assert (
        request_rates(_points(lambda b: 10.0, lambda b: 12.0), 100).breakeven_request_rate is None
    )
    view = request_rates(_points(lambda b: 10 + b, lambda b: 5 + 0.5 * b), 100)
    assert view.breakeven_request_rate == BEYOND_THE_SWEEP


def test_where_speculation_serves_less_it_pays_up_to_its_capacity():
    points = _points(lambda b: 10 + 0.1 * b, lambda b: 5 + 0.05 * b, batches=range(1, 129))
    points = [
        p if p.batch <= 32 else BatchPoint(p.batch, 0, math.nan, p.step_ms, math.nan)
        for p in points
    ]  # no room to speculate past batch 32 (the draft's memory)
    view = request_rates(points, 100)
    assert view.breakeven_request_rate == pytest.approx(view.spec_capacity_rps)
    assert view.spec_capacity_rps < view.plain_capacity_rps


@settings(max_examples=60, deadline=None)
@given(
    a=st.floats(1, 50),
    b=st.floats(0.01, 2),
    ratio=st.floats(0.2, 0.9),
    growth=st.floats(1.0, 4.0),
    n=st.integers(16, 4096),
)
def test_the_break_even_rate_lies_within_the_rates_served(a, b, ratio, growth, n):
    view = request_rates(_points(lambda x: a + b * x, lambda x: ratio * a + growth * b * x), n)
    rate = view.breakeven_request_rate
    if isinstance(rate, float):
        low = max(view.plain_rps[0], view.spec_rps[0])
        assert (
            low * (1 - 1e-9)
            <= rate
            <= min(view.plain_capacity_rps, view.spec_capacity_rps) * (1 + 1e-9)
        )
    else:
        assert rate in (None, BEYOND_THE_SWEEP)


def test_batch_states_its_thresholds_in_requests_per_second():
    r = run_cli(["batch", "--cost-curve", CURVE, "--accept-len", "2.1", "-k", "3"])
    assert r.exit_code == 0 and "req/s" not in r.output
    args = ["batch", "--cost-curve", CURVE, "--accept-len", "2.1", "-k", "3", "--output-tokens"]
    r = run_cli([*args, "256"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "In requests per second (256 tokens decoded each, by Little's law over decoding)" in text
    got = json.loads(run_cli([*args, "256", "--json"]).stdout)
    rates = got["request_rates"]
    assert len(rates["plain_rps"]) == len(got["speedup_by_batch"])
    first = got["speedup_by_batch"][0]
    assert rates["plain_rps"][0] == pytest.approx(first["batch"] * 1000 / (256 * first["step_ms"]))


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "many"])
def test_a_bad_output_tokens_is_one_line(value):
    r = run_cli(
        ["batch", "--cost-curve", CURVE, "--accept-len", "2.1", "-k", "3", "--output-tokens", value]
    )
    assert r.exit_code == 2, r.output
    assert "--output-tokens" in r.output and len(r.output.strip().splitlines()) == 1


def test_schedule_states_its_ranges_in_requests_per_second():
    common = ["--cost-curve", CURVE, "--fit", "linear", "--max-batch", "512"]
    acceptance = ["--accept-len-by-k", "2:2.36,3:2.79,4:3.08", "--draft-step-ms", "0.98"]
    r = run_cli(["schedule", *common, *acceptance, *ENGINE, "--output-tokens", "256", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    steps = {
        p["batch"]: p["step_ms"]
        for p in json.loads(run_cli(["batch", *common, *acceptance, "--json"]).stdout)[
            "speedup_by_batch"
        ]
    }
    speedup = {x["batch"]: x["speedup"] for x in got["by_batch"]}
    for x in got["ranges"]:
        for batch, rate in ((x["first"], x["rate_from"]), (x["last"], x["rate_to"])):
            tpot = steps[batch] / (speedup[batch] if x["k"] else 1.0)
            assert rate == pytest.approx(batch * 1000 / (256 * tpot))
    bounds = [(x["rate_from"], x["rate_to"]) for x in got["ranges"]]
    assert all(a < b for a, b in bounds) and all(
        prev[1] < nxt[0] for prev, nxt in itertools.pairwise(bounds)
    )
    text = " ".join(
        run_cli(
            ["schedule", *common, *acceptance, *ENGINE, "--output-tokens", "256"]
        ).output.split()
    )
    assert "The ranges in requests per second: k = " in text
