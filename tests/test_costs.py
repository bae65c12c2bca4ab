"""Cost models: constant, measured table, fitted, MoE expert union, roofline, drafting."""

import math
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven import BreakevenError
from breakeven.model.costs import (
    ConstantCost,
    DraftCost,
    MoECost,
    RooflineCost,
    TableCost,
    _fitted,
    expected_distinct_experts,
    fit_cost_curve,
    overlap_from_measurement,
)


class TestDistinctExperts:
    @pytest.mark.parametrize(("experts", "top_k"), [(384, 8), (64, 6), (8, 2)])
    @pytest.mark.parametrize("tokens", [1, 2, 4, 7, 16])
    def test_matches_a_monte_carlo_simulation_of_top_k_routing(self, experts, top_k, tokens):
        # Each token picks top_k distinct experts uniformly at random; count the union.
        rng = np.random.default_rng(20261129 + experts * 100 + tokens)
        trials = 4000
        picks = np.argsort(rng.random((trials, tokens, experts)), axis=-1)[..., :top_k]
        loaded = np.zeros((trials, experts), dtype=bool)
        np.put_along_axis(loaded, picks.reshape(trials, -1), True, axis=1)
        counts = loaded.sum(axis=1)
        standard_error = counts.std(ddof=1) / math.sqrt(trials)
        expected = expected_distinct_experts(experts, top_k, tokens)
        assert abs(counts.mean() - expected) <= 4 * standard_error + 1e-9

    def test_known_values(self):
        assert expected_distinct_experts(384, 8, 1) == pytest.approx(8)
        assert expected_distinct_experts(384, 8, 4) == pytest.approx(384 * (1 - (1 - 8 / 384) ** 4))
        assert expected_distinct_experts(8, 8, 5) == pytest.approx(8)  # every expert, always
        assert expected_distinct_experts(384, 8, 7, shared=1) == pytest.approx(
            1 + 384 * (1 - (376 / 384) ** 7)
        )

    def test_overlap_scales_the_extra_experts(self):
        uniform = expected_distinct_experts(384, 8, 7)
        assert expected_distinct_experts(384, 8, 7, overlap=0.0) == pytest.approx(8)
        assert expected_distinct_experts(384, 8, 7, overlap=0.5) == pytest.approx(
            8 + 0.5 * (uniform - 8)
        )

    @given(st.floats(0, 1))
    def test_overlap_calibration_round_trips(self, f):
        measured = expected_distinct_experts(256, 8, 5, overlap=f)
        assert overlap_from_measurement(256, 8, 5, measured) == pytest.approx(f, abs=1e-9)

    @given(st.integers(2, 512), st.integers(1, 16), st.floats(1, 64), st.floats(1, 64))
    def test_never_falls_with_tokens_and_stays_within_bounds(self, e, k, t1, t2):
        k = min(k, e)
        lo, hi = sorted((t1, t2))
        a, b = expected_distinct_experts(e, k, lo), expected_distinct_experts(e, k, hi)
        assert a <= b * (1 + 1e-12)
        assert k * (1 - 1e-9) <= b <= min(e, k * hi) * (1 + 1e-9)

    def test_bad_input(self):
        with pytest.raises(BreakevenError, match="top_k: got 9, expected at most the number"):
            expected_distinct_experts(8, 9, 2)
        with pytest.raises(BreakevenError, match=r"overlap: got 1\.5"):
            expected_distinct_experts(8, 2, 2, overlap=1.5)


class TestTableCost:
    curve = TableCost((1, 2, 4, 8, 16), (10.0, 10.0, 10.5, 11.0, 13.0))

    def test_interpolates_linearly_between_points(self):
        assert self.curve(1) == 10.0
        assert self.curve(3) == pytest.approx(10.25)
        assert self.curve(12) == pytest.approx(12.0)
        np.testing.assert_allclose(self.curve(np.array([1, 3, 12, 16])), [10, 10.25, 12, 13])

    def test_outside_the_table_is_a_clear_error(self):
        with pytest.raises(BreakevenError) as info:
            self.curve(17)
        assert "tokens: got 17, expected a token count the cost model covers, 1 to 16" in str(
            info.value
        )
        assert "fit" in str(info.value)

    def test_a_fitted_model_extrapolates(self):
        fitted = self.curve.fit("linear")
        assert fitted(64) > fitted(16)

    @pytest.mark.parametrize(
        ("tokens", "ms", "message"),
        [
            ((1, 4, 2), (1, 2, 3), "tokens 2 at point 3 after 4, expected strictly increasing"),
            ((1, 1), (1, 2), "expected strictly increasing"),
            ((1, 2), (1, -2), "ms -2 at point 2, expected a finite time >= 0"),
            ((1,), (1,), "got 1 point(s), expected at least two"),
            ((0, 2), (1, 2), "tokens 0 at point 1, expected a count >= 1"),
        ],
    )
    def test_bad_curves(self, tokens, ms, message):
        with pytest.raises(BreakevenError) as info:
            TableCost(tokens, ms)
        assert message in str(info.value)


class TestFits:
    def test_linear_recovers_its_coefficients(self):
        n = np.array([1, 2, 4, 8, 16, 32.0])
        fitted = fit_cost_curve(n, 5.0 + 0.25 * n, "linear")
        assert (fitted.a, fitted.b) == (pytest.approx(5.0), pytest.approx(0.25))
        assert fitted.max_abs_residual_ms < 1e-9

    @given(st.floats(2, 20), st.floats(0.01, 1.0), st.floats(0, 10))
    @settings(max_examples=30, deadline=None)
    def test_knee_recovers_a_roofline(self, a, b, c):
        n = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024.0])
        assume_knee_inside = 2 < a / b < 512
        if not assume_knee_inside:
            return
        ms = np.maximum(a, b * n) + c
        fitted = fit_cost_curve(n, ms, "knee")
        assert fitted.rms_residual_ms <= 1e-6 * (a + c)
        np.testing.assert_allclose(fitted(n), ms, rtol=1e-6)
        assert fitted.knee_tokens == pytest.approx(a / b, rel=1e-4)

    def test_knee_reports_residuals_of_noisy_data(self):
        n = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256.0])
        ms = np.array([10, 10, 10.1, 10.2, 10.4, 11, 14, 22, 38])
        fitted = fit_cost_curve(n, ms, "knee")
        assert len(fitted.residuals_ms) == len(n)
        form = _fitted("knee", n, fitted.a, fitted.b, fitted.c)
        np.testing.assert_allclose(form - ms, fitted.residuals_ms)
        np.testing.assert_allclose(fitted(n), ms)  # the measured points are kept
        assert fitted.rms_residual_ms < 0.5
        assert fitted.rms_residual_ms < fit_cost_curve(n, ms, "linear").rms_residual_ms

    def test_unknown_form(self):
        with pytest.raises(BreakevenError, match="form: got 'cubic', expected one of linear, knee"):
            fit_cost_curve([1, 2], [1, 2], "cubic")


class TestMoECost:
    def test_scales_the_expert_part_by_experts_loaded(self):
        m = MoECost(dense_ms=8.0, expert_ms=8.0, experts=384, top_k=8)
        assert m(1) == pytest.approx(16.0)
        assert m(7) == pytest.approx(8.0 + 8.0 * expected_distinct_experts(384, 8, 7) / 8)

    def test_full_overlap_makes_verify_cost_one_step(self):
        m = MoECost(dense_ms=8.0, expert_ms=8.0, experts=384, top_k=8, overlap=0.0)
        assert m(7) == pytest.approx(m(1))


class TestRoofline:
    # Roughly Kimi-K2.5 INT4 over 8 PCIe GPUs: 11 B dense and 2.64 B per expert at 0.5 byte.
    spec: ClassVar[dict] = dict(
        dense_bytes=5.5e9,
        active_params=32e9,
        mem_bw=1.6e12,
        peak_flops=1e15,
        expert_bytes=1.32e9,
        experts=384,
        top_k=8,
    )

    def test_memory_bound_at_small_token_counts_and_compute_bound_at_large(self):
        r = RooflineCost(**self.spec)
        small, large = r.breakdown(1), r.breakdown(100_000)
        assert small["memory"] > small["compute"] and small["total"] == small["memory"]
        assert large["compute"] > large["memory"] and large["total"] == large["compute"]

    def test_tensor_parallel_allreduce(self):
        r = RooflineCost(
            **self.spec,
            tp=8,
            allreduces_per_forward=122,
            allreduce_bytes_per_token=7168 * 2,
            allreduce_latency_us=30,
            link_bw=25e9,
        )
        parts = r.breakdown(1)
        ring_ms = 1000 * 2 * 7 / 8 * 7168 * 2 / 25e9
        assert parts["allreduce"] == pytest.approx(122 * (0.030 + ring_ms))
        assert parts["total"] == pytest.approx(
            max(parts["memory"], parts["compute"]) + parts["allreduce"]
        )
        no_tp = RooflineCost(**self.spec, allreduces_per_forward=122, allreduce_latency_us=30)
        assert no_tp.breakdown(1)["allreduce"] == 0.0

    def test_vectorised(self):
        r = RooflineCost(**self.spec)
        t = np.array([1, 7, 64])
        np.testing.assert_allclose(r(t), [r(1), r(7), r(64)])


class TestDraftCost:
    def test_kinds(self):
        assert DraftCost("autoregressive", 2.0)(3) == 6.0
        assert DraftCost("head", 0.5, fixed_ms=0.1)(4) == pytest.approx(2.1)
        assert DraftCost("single-pass", 1.5)(4) == 1.5
        assert DraftCost("ngram", 9.0, fixed_ms=0.05)(4) == 0.05

    def test_step_cost_can_grow_with_batch(self):
        d = DraftCost("autoregressive", TableCost((1, 64), (1.0, 2.0)))
        assert d(3, batch=1) == pytest.approx(3.0)
        assert d(3, batch=64) == pytest.approx(6.0)

    def test_unknown_kind(self):
        with pytest.raises(BreakevenError, match="kind: got 'tree'"):
            DraftCost("tree", 1.0)


def test_constant_cost_ignores_tokens_but_checks_them():
    c = ConstantCost(28.7)
    assert c(7) == 28.7
    with pytest.raises(BreakevenError, match="tokens: got 0"):
        c(0)


def test_a_fit_keeps_the_measured_points_and_extrapolates_beyond_them():
    # Issue 13: --fit linear replaced a measured 4.495 ms at batch 1 with the line's 4.017 ms.
    n = np.array([1.0, 2, 8, 64])
    ms = np.array([4.495, 4.6, 5.1, 9.0])
    fitted = fit_cost_curve(n, ms, "linear")
    assert fitted(1.0) == 4.495 and fitted(5.0) == pytest.approx(np.interp(5, n, ms))
    # Beyond the points: the fitted slope, from the last point (no jump at the edge).
    assert fitted(128.0) == pytest.approx(9.0 + fitted.b * 64)
    assert fitted(np.array([64.0, 65.0]))[1] - 9.0 == pytest.approx(fitted.b)
