"""The cycle model: the case study, Leviathan's Theorem 3.8, and the break-even solves."""

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import breakeven as be

# Positive latencies [ms] and rates over the range engines see.
ms = st.floats(0.05, 500.0)
small_ms = st.floats(0.0, 50.0)
taus = st.floats(1.0, 17.0)
targets = st.floats(0.25, 4.0)


class TestCaseStudy:
    """Kimi-K2.5 INT4 on 8x RTX PRO 6000 over PCIe, EAGLE-3 (../shared/seeds/)."""

    def test_breakeven_against_the_phantom_90_tok_s_baseline(self):
        # 29.9 ms cycle against an 11.1 ms step needs tau > 2.69.
        assert be.breakeven_accept_len(29.9, 11.1) == pytest.approx(2.694, abs=5e-4)

    def test_breakeven_against_the_real_62_9_tok_s_baseline(self):
        step = be.step_ms_from_baseline(62.9)
        assert step == pytest.approx(15.898, abs=5e-4)
        assert be.breakeven_accept_len(29.9, step) == pytest.approx(1.881, abs=5e-4)

    def test_tau_2_1_loses_against_11_1_ms_and_wins_against_15_9_ms(self):
        assert be.speedup(2.1, 11.1, 29.9) == pytest.approx(0.78, abs=5e-3)
        assert be.speedup(2.1, be.step_ms_from_baseline(62.9), 29.9) == pytest.approx(
            1.117, abs=5e-4
        )

    def test_verify_only_breakeven_from_the_issue(self):
        # 28.7 / 15.898 = 1.805
        assert be.breakeven_accept_len(28.7, be.step_ms_from_baseline(62.9)) == pytest.approx(
            1.805, abs=5e-4
        )


class TestLeviathanTheorem38:
    """Improvement factor (1 - a^(g+1)) / ((1 - a)(g c + 1)), values computed by hand."""

    @pytest.mark.parametrize(
        ("alpha", "gamma", "c", "expected"),
        [
            (0.8, 4, 0.05, 3.3616 / 1.2),  # 2.80133
            (0.8, 4, 0.0, 3.3616),
            (0.6, 2, 0.1, 1.96 / 1.2),  # 1.63333
            (0.9, 10, 0.02, (1 - 0.9**11) / 0.1 / 1.2),  # 5.71825
            (0.5, 1, 1.0, 1.5 / 2.0),  # a draft as slow as the target loses
        ],
    )
    def test_values(self, alpha, gamma, c, expected):
        assert be.leviathan_speedup(alpha, gamma, c) == pytest.approx(expected, rel=1e-12)

    @given(st.floats(0, 1), st.integers(1, 16), st.floats(0, 2))
    def test_is_the_cycle_model_with_verify_one_step(self, alpha, k, c):
        tau = be.accept_len_from_alpha(alpha, k)
        assert be.leviathan_speedup(alpha, k, c) == pytest.approx(
            be.speedup(tau, 10.0, be.cycle_ms(10.0, draft_ms=10.0 * k * c)), rel=1e-12
        )


class TestSolvedBreakevenIsExactlyTheTarget:
    @given(ms, ms, targets)
    def test_accept_len(self, cycle, step, target):
        tau = be.breakeven_accept_len(cycle, step, target)
        assume(tau >= 1)
        assert be.speedup(tau, step, cycle) == pytest.approx(target, rel=1e-12)

    @given(taus, ms, small_ms, small_ms, targets)
    def test_verify_ms(self, tau, step, draft, overhead, target):
        verify = be.max_verify_ms(tau, step, draft, overhead, target)
        if math.isnan(verify):  # drafting and overhead alone use the whole budget
            assert draft + overhead >= be.max_cycle_ms(tau, step, target) * (1 - 1e-12)
            return
        cycle = be.cycle_ms(verify, draft, overhead)
        assert be.speedup(tau, step, cycle) == pytest.approx(target, rel=1e-9)

    @given(taus, ms, ms, small_ms, targets)
    def test_draft_ms(self, tau, step, verify, overhead, target):
        draft = be.max_draft_ms(tau, step, verify, overhead, target)
        assume(not math.isnan(draft))
        cycle = be.cycle_ms(verify, draft, overhead)
        assert be.speedup(tau, step, cycle) == pytest.approx(target, rel=1e-9)

    @given(taus, ms, targets)
    def test_baseline_tok_s(self, tau, cycle, target):
        baseline = be.max_baseline_tok_s(tau, cycle, target)
        step = be.step_ms_from_baseline(baseline)
        assert be.speedup(tau, step, cycle) == pytest.approx(target, rel=1e-12)

    @given(ms, ms, st.integers(1, 16))
    def test_alpha(self, cycle, step, k):
        needed = be.breakeven_accept_len(cycle, step)
        alpha = be.breakeven_alpha(needed, k)
        if needed > k + 1:
            assert math.isnan(alpha)
        elif needed <= 1:
            assert alpha == 0.0
        else:
            tau = be.accept_len_from_alpha(alpha, k)
            assert be.speedup(tau, step, cycle) == pytest.approx(1.0, rel=1e-9)


class TestMonotonicity:
    @given(taus, taus, ms, ms)
    def test_speedup_rises_with_accept_len(self, a, b, step, cycle):
        lo, hi = sorted((a, b))
        assert be.speedup(lo, step, cycle) <= be.speedup(hi, step, cycle)

    @given(taus, ms, ms, ms, small_ms)
    def test_speedup_falls_with_verify_cost(self, tau, step, v1, v2, draft):
        lo, hi = sorted((v1, v2))
        assert be.speedup(tau, step, be.cycle_ms(hi, draft)) <= be.speedup(
            tau, step, be.cycle_ms(lo, draft)
        )

    @given(taus, ms, ms, small_ms, small_ms)
    def test_speedup_falls_with_draft_cost(self, tau, step, verify, d1, d2):
        lo, hi = sorted((d1, d2))
        assert be.speedup(tau, step, be.cycle_ms(verify, hi)) <= be.speedup(
            tau, step, be.cycle_ms(verify, lo)
        )


def test_infeasible_solves_are_nan():
    # 2 tokens x 10 ms = 20 ms budget; 25 ms of drafting leaves nothing for verify.
    assert math.isnan(be.max_verify_ms(2.0, 10.0, draft_ms=25.0))
    assert math.isnan(be.max_draft_ms(2.0, 10.0, verify_ms=25.0))
    assert math.isnan(be.breakeven_alpha(5.0, 3))  # needs tau 5 > k + 1 = 4
    assert be.breakeven_alpha(0.8, 3) == 0.0  # cycle cheaper than a step: any alpha pays


def test_arrays_match_scalars_elementwise():
    tau = np.array([1.0, 2.1, 3.5])
    step = np.array([[11.1], [15.898]])
    cycle = 29.9
    grid = be.speedup(tau, step, cycle)
    assert grid.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert grid[i, j] == be.speedup(float(tau[j]), float(step[i, 0]), cycle)
    budget = be.max_verify_ms(tau, 11.1, draft_ms=20.0)
    assert math.isnan(budget[0]) and budget[2] == pytest.approx(3.5 * 11.1 - 20.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: be.step_ms_from_baseline(0),
            "baseline_tok_s: got 0, expected a finite number > 0",
        ),
        (lambda: be.step_ms_from_baseline(-62.9), "baseline_tok_s: got -62.9"),
        (lambda: be.speedup(2.0, 10.0, float("inf")), "cycle_ms: got inf"),
        (lambda: be.cycle_ms(28.7, draft_ms=-1), "draft_ms: got -1, expected a finite number >= 0"),
        (lambda: be.speedup(0.5, 10, 20), "accept_len: got 0.5"),
        (lambda: be.breakeven_accept_len(20, 10, target_speedup=0), "target_speedup: got 0"),
        (lambda: be.speedup(np.array([2.0, np.nan]), 10, 20), "accept_len: got nan"),
        (lambda: be.leviathan_speedup(0.5, 3, -0.1), "cost_ratio: got -0.1"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(be.BreakevenError, match=None) as info:
        call()
    assert message in str(info.value)
