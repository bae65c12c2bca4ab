"""Best k, Leviathan's optimum, and break-even concurrency."""

import itertools
import json
import math

import numpy as np
import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

import breakeven as be
from breakeven import BreakevenError
from breakeven.model.costs import DraftCost, FittedCost, TableCost
from breakeven.planning.batch import BEYOND_THE_CURVE, batch_sweep
from breakeven.prediction.moe import moe_summary
from breakeven.prediction.optimize import (
    acceptance_by_k,
    optimal_k,
    optimize,
    optimize_k,
    optimize_leviathan,
)


class TestLeviathanPublished:
    """Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative
    Decoding" (arXiv 2211.17192): Table 1 (c = 0), Table 4 (Appendix A.3) and Section 3.6."""

    @pytest.mark.parametrize(
        ("alpha", "gamma", "c", "printed", "decimals"),
        [
            (0.6, 2, 0.0, 1.96, 2),  # Table 1
            (0.7, 3, 0.0, 2.53, 2),
            (0.8, 2, 0.0, 2.44, 2),
            (0.8, 5, 0.0, 3.69, 2),
            (0.9, 2, 0.0, 2.71, 2),
            (0.9, 10, 0.0, 6.86, 2),
            (0.75, 7, 0.02, 3.2, 1),  # Table 4, EnDe T5-small, "Exp"
            (0.8, 7, 0.04, 3.3, 1),  # Table 4, EnDe T5-base
            (0.82, 7, 0.11, 2.5, 1),  # Table 4, EnDe T5-large
            (0.2, 3, 0.0, 1.25, 2),  # Section 3.6, bigram draft
        ],
    )
    def test_printed_speedups(self, alpha, gamma, c, printed, decimals):
        assert round(be.leviathan_speedup(alpha, gamma, c), decimals) == printed

    @pytest.mark.parametrize(
        # Figure 3 plots the optimal gamma against alpha; these points of it, for alpha = 0.8,
        # come from maximising Theorem 3.8 over gamma = 1..99.
        ("c", "gamma", "speedup"),
        [
            (0.01, 14, 4.232),
            (0.02, 11, 3.817),
            (0.04, 9, 3.282),
            (0.05, 8, 3.092),
            (0.1, 6, 2.470),
            (0.2, 4, 1.868),
            (0.5, 2, 1.220),
        ],
    )
    def test_optimal_gamma_at_alpha_0_8(self, c, gamma, speedup):
        result = optimize_leviathan(0.8, c, k_max=99)
        assert result.best_k == gamma
        assert result.speedup == pytest.approx(speedup, abs=5e-4)

    @given(st.floats(0.01, 0.99), st.floats(0, 0.99))
    def test_corollary_3_9_bound(self, alpha, c):
        # If alpha > c, the optimal improvement is at least (1 + alpha) / (1 + c).
        if alpha <= c:
            return
        assert optimize_leviathan(alpha, c).speedup >= (1 + alpha) / (1 + c) * (1 - 1e-12)


def test_do_not_speculate_when_no_k_beats_one():
    result = optimize_leviathan(0.1, 0.9)
    assert result.best_k == 0 and result.speedup == 1.0
    assert all(o.speedup < 1 for o in result.by_k)
    assert result.to_dict()["best_k"] == 0


def test_optimal_k_vectorised_matches_the_scalar_search():
    alpha = np.array([0.8, 0.6, 0.95, 0.1])
    c = np.array([0.05, 0.2, 0.01, 0.9])
    best, speedup = optimal_k(alpha, c)
    for i in range(4):
        r = optimize_leviathan(float(alpha[i]), float(c[i]))
        assert best[i] == r.best_k and speedup[i] == pytest.approx(r.speedup)


def test_measured_case_study_best_k():
    # Verify 28.7 ms at every k, 0.2 ms per EAGLE head step, tau measured at k = 1..4.
    r = optimize(
        baseline_tok_s=62.9,
        verify_ms=28.7,
        draft_step_ms=0.2,
        accept_len_by_k=[1.6, 1.9, 2.05, 2.1],
    )
    assert r.best_k == 4
    assert r.speedup == pytest.approx(2.1 * (1000 / 62.9) / (28.7 + 0.8))
    assert [o.k for o in r.by_k] == [1, 2, 3, 4]


def test_acceptance_forms_agree():
    rates = [0.8, 0.6, 0.45]
    assert acceptance_by_k(per_position=rates) == pytest.approx((1.8, 2.4, 2.85))
    assert acceptance_by_k(3, alpha=0.5) == pytest.approx((1.5, 1.75, 1.875))
    with pytest.raises(BreakevenError, match="give exactly one of alpha, per_position"):
        acceptance_by_k(alpha=0.5, per_position=rates)
    with pytest.raises(BreakevenError, match="expected at most k \\+ 1 = 2 for k = 1"):
        acceptance_by_k(accept_len_by_k=[2.5])


def test_curve_limits_the_k_considered():
    curve = TableCost((1, 2, 4, 8, 16), (10.0, 10.0, 10.5, 11.0, 13.0))
    r = optimize_k(verify=curve, alpha=0.7, batch=4)
    assert [o.k for o in r.by_k] == [1, 2, 3]  # 4 x (k + 1) <= 16
    assert "k stops at 3" in r.note
    assert r.step_ms == curve(4)
    assert optimize_k(verify=curve.fit("linear"), alpha=0.7, batch=4).by_k[-1].k == 16


def _linear(a, b):
    return FittedCost("linear", a, b)


class TestProperties:
    @given(st.floats(0, 1), st.floats(1, 100), st.floats(1, 100), st.floats(1, 50), st.floats(0, 5))
    def test_speedup_never_rises_with_verify_cost(self, alpha, v1, v2, step, draft):
        # A verify forward of k + 1 tokens costs at least the plain step: a shorter one (a
        # speedup above k + 1) is refused (tests/test_plausible_inputs.py).
        lo, hi = sorted((step + v1, step + v2))
        s = [
            optimize(alpha=alpha, step_ms=step, verify_ms=v, draft_step_ms=draft).by_k
            for v in (lo, hi)
        ]
        for cheap, dear in zip(*s, strict=True):
            assert dear.speedup <= cheap.speedup
        best = [
            optimize(alpha=alpha, step_ms=step, verify_ms=v, draft_step_ms=draft).speedup
            for v in (lo, hi)
        ]
        assert best[1] <= best[0]

    @given(
        st.floats(0, 1), st.floats(0.5, 60), st.floats(0, 0.1), st.floats(0, 20), st.floats(0, 20)
    )
    def test_best_k_never_falls_as_drafting_gets_cheaper(self, alpha, verify, slope, d1, d2):
        cheap, dear = sorted((d1, d2))
        verify_model = _linear(verify, slope)  # V(k)/k falls with k, as for real forwards
        k_cheap = optimize_k(
            verify=verify_model,
            step_ms=verify,
            alpha=alpha,
            draft=DraftCost("autoregressive", cheap),
        ).best_k
        k_dear = optimize_k(
            verify=verify_model,
            step_ms=verify,
            alpha=alpha,
            draft=DraftCost("autoregressive", dear),
        ).best_k
        assert k_cheap >= k_dear

    @given(st.floats(1.2, 3.5), st.integers(1, 4), st.floats(0, 10), st.floats(0, 10))
    @settings(max_examples=60, deadline=None)
    def test_breakeven_batch_never_rises_with_verify_cost(self, tau, k, extra1, extra2):
        tau = min(tau, k + 1)
        curve = TableCost((1, 8, 32, 64, 128, 256, 512), (10, 10.2, 11, 14, 22, 38, 70))
        lo, hi = sorted((extra1, extra2))

        def rank(extra):  # added verify time per cycle
            b = batch_sweep(curve, accept_len=tau, k=k, overhead_ms=extra).breakeven_batch
            return math.inf if b == BEYOND_THE_CURVE else (0 if b is None else b)

        assert rank(hi) <= rank(lo)


class TestBatch:
    curve = TableCost(
        (1, 2, 4, 8, 16, 32, 64, 128, 256), (10, 10, 10.1, 10.2, 10.4, 11, 14, 22, 38)
    )

    def test_speedup_by_batch_covers_every_batch_the_curve_covers(self):
        r = batch_sweep(self.curve, accept_len=2.5, k=3)
        assert [p.batch for p in r.speedup_by_batch] == list(range(1, 65))  # 64 x 4 = 256
        p = r.speedup_by_batch[15]  # batch 16
        assert p.speedup == pytest.approx(2.5 * self.curve(16) / self.curve(64))

    def test_breakeven_batch(self):
        r = batch_sweep(self.curve, accept_len=2.5, k=3)
        assert r.breakeven_batch == 52
        assert r.speedup_by_batch[51].speedup >= 1 > r.speedup_by_batch[52].speedup

    def test_never_pays_is_null_and_always_pays_is_beyond_the_curve(self):
        assert batch_sweep(self.curve, accept_len=1.0, k=2).breakeven_batch is None
        flat = TableCost((1, 1024), (10.0, 10.0))
        assert batch_sweep(flat, accept_len=2.0, k=1).breakeven_batch == BEYOND_THE_CURVE

    def test_best_k_schedule_covers_every_batch_once(self):
        r = batch_sweep(self.curve, alpha=0.7, k_max=8)
        schedule = r.best_k_by_batch
        assert schedule[0][0] == 1 and schedule[-1][1] == r.max_batch
        for (_, b0, k0), (a1, _, k1) in itertools.pairwise(schedule):
            assert a1 == b0 + 1 and k0 != k1
        ks = [k for _, _, k in schedule]
        assert ks == sorted(ks, reverse=True)  # heavier load, fewer draft tokens

    def test_draft_and_overhead_enter_the_cycle(self):
        plain = batch_sweep(self.curve, accept_len=2.5, k=3).speedup_by_batch[0]
        taxed = batch_sweep(
            self.curve, accept_len=2.5, k=3, draft_step_ms=0.5, overhead_ms=0.2
        ).speedup_by_batch[0]
        assert taxed.cycle_ms == pytest.approx(plain.cycle_ms + 3 * 0.5 + 0.2)

    def test_a_fitted_curve_sweeps_to_max_batch(self):
        fitted = self.curve.fit("knee")
        assert batch_sweep(fitted, accept_len=2.5, k=3).max_batch == 256  # the default
        r = batch_sweep(fitted, accept_len=2.5, k=3, max_batch=500)
        assert r.max_batch == 500 and len(r.speedup_by_batch) == 500
        assert batch_sweep(self.curve, accept_len=2.5, k=3, max_batch=10).max_batch == 10

    def test_bad_combinations(self):
        with pytest.raises(BreakevenError, match="accept_len and k go together"):
            batch_sweep(self.curve, accept_len=2.0)
        with pytest.raises(BreakevenError, match="give exactly one of alpha"):
            batch_sweep(self.curve)


def test_moe_summary():
    s = moe_summary(384, 8, 7, shared=1, dense_bytes=5.5e9, expert_bytes=1.32e9)
    n7 = 384 * (1 - (376 / 384) ** 7)
    assert s["active_experts"] == pytest.approx(n7 + 1)
    assert s["verify_step_ratio"] == pytest.approx(
        (5.5e9 + 1.32e9 * (n7 + 1)) / (5.5e9 + 1.32e9 * 9)
    )
    with pytest.raises(BreakevenError, match="dense_bytes and expert_bytes go together"):
        moe_summary(384, 8, 7, dense_bytes=1e9)


def test_best_k_at_the_largest_k_tried_says_so():
    # Issue 13: at alpha = 0.9 and c = 0.01 the default stops at 16; the optimum is 24.
    capped = optimize(alpha=0.9, cost_ratio=0.01)
    assert capped.best_k == 16 and "raise --max-k" in capped.note
    wide = optimize(alpha=0.9, cost_ratio=0.01, k_max=64)
    assert wide.best_k == 24 and wide.note == ""
    measured = optimize(
        baseline_tok_s=141.44, verify_ms=7.7, draft_step_ms=0.1, accept_len_by_k=[1.8, 2.4, 2.9]
    )
    assert measured.best_k == 3 and "largest with an accept_len" in measured.note


def test_accept_len_at_explicit_k():
    result = optimize(
        baseline_tok_s=141.44,
        verify_ms=7.7,
        draft_step_ms=0.74,
        accept_len_by_k={2: 2.1, 3: 2.29, 5: 2.43},
    )
    assert [o.k for o in result.by_k] == [2, 3, 5] and result.best_k == 3
    r = run_cli(
        [
            "optimize",
            "--baseline-tok-s",
            "141.44",
            "--verify-ms",
            "7.7",
            "--draft-step-ms",
            "0.74",
            "--accept-len-by-k",
            "2:2.1,3:2.29,5:2.43",
            "--json",
        ],
    )
    assert r.exit_code == 0 and [o["k"] for o in json.loads(r.stdout)["by_k"]] == [2, 3, 5]
    bad = run_cli(
        [
            "optimize",
            "--baseline-tok-s",
            "100",
            "--verify-ms",
            "7",
            "--accept-len-by-k",
            "2:2.1,0:1.5",
        ],
    )
    assert bad.exit_code == 2 and "K:TAU" in bad.output


def test_a_verify_curve_skips_the_k_below_its_first_point():
    curve = TableCost((16, 64, 256), (10, 12, 20))
    result = optimize(verify_curve=curve, alpha=0.7, draft_step_ms=0.2, baseline_tok_s=100)
    assert result.by_k[0].k == 15 and "k = 1 to 14 skipped" in result.note
