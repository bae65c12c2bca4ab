"""predict(): every quantity the inputs determine, and nothing else."""

import json
import math

import pytest

import breakeven as be
from breakeven import BreakevenError, predict


def test_issue_example_reports_breakeven_and_alpha_table():
    p = predict(baseline_tok_s=62.9, verify_ms=28.7)
    assert p.breakeven_accept_len == pytest.approx(28.7 / 15.898, abs=5e-4)  # 1.805
    assert [k for k, _ in p.breakeven_alpha_by_k] == list(range(1, 9))
    for k, alpha in p.breakeven_alpha_by_k:
        assert be.accept_len_from_alpha(alpha, k) == pytest.approx(p.breakeven_accept_len)
    assert p.speedup is None and p.accept_len is None  # not determined without acceptance


def test_full_case_study():
    p = predict(baseline_tok_s=62.9, verify_ms=28.7, draft_ms=1.2, accept_len=2.1, k=6)
    assert p.cycle_ms == pytest.approx(29.9)
    assert p.breakeven_accept_len == pytest.approx(1.881, abs=5e-4)
    assert p.speedup == pytest.approx(1.117, abs=5e-4)
    assert p.spec_tok_s == pytest.approx(1000 * 2.1 / 29.9)
    assert p.max_baseline_tok_s == pytest.approx(p.spec_tok_s)
    assert p.alpha == pytest.approx(be.alpha_from_accept_len(2.1, 6))
    # The solves are consistent with the speedup formula.
    assert be.speedup(2.1, p.step_ms, be.cycle_ms(p.max_verify_ms, 1.2)) == pytest.approx(1.0)
    assert be.speedup(2.1, p.step_ms, be.cycle_ms(28.7, p.max_draft_ms)) == pytest.approx(1.0)


def test_measured_cycle_leaves_component_budgets_undetermined():
    p = predict(step_ms=11.1, cycle_ms=29.9, accept_len=2.1)
    assert p.speedup == pytest.approx(0.78, abs=5e-3)
    assert p.max_cycle_ms == pytest.approx(2.1 * 11.1)
    assert p.max_verify_ms is None and p.max_draft_ms is None
    # k = 1 cannot break even when tau must exceed 2.69: determined, and none exists.
    assert math.isnan(dict(p.breakeven_alpha_by_k)[1])
    assert p.to_dict()["breakeven_alpha_by_k"][0] == {"k": 1, "breakeven_alpha": None}


def test_leviathan_form():
    p = predict(alpha=0.8, k=4, cost_ratio=0.05)
    assert p.speedup == pytest.approx(3.3616 / 1.2)
    assert p.breakeven_accept_len == pytest.approx(1.2)
    assert dict(p.breakeven_alpha_by_k)[1] == pytest.approx(0.05)  # tau(a, 1) = 1 + a = 1.05
    assert "cycle_ms" not in p.to_dict()  # no absolute times without a baseline
    with_step = predict(alpha=0.8, k=4, cost_ratio=0.05, step_ms=10.0)
    assert with_step.cycle_ms == pytest.approx(12.0) and with_step.verify_ms == 10.0


def test_per_position_sets_k_and_accept_len():
    p = predict(per_position=[0.983, 0.949, 0.915, 0.881, 0.712])
    assert p.k == 5 and p.accept_len == pytest.approx(5.44)


def test_target_speedup_moves_every_solve():
    p = predict(baseline_tok_s=62.9, verify_ms=28.7, accept_len=2.1, target_speedup=1.2)
    assert p.breakeven_accept_len == pytest.approx(1.2 * 28.7 / (1000 / 62.9))
    assert be.speedup(2.1, p.step_ms, p.max_verify_ms) == pytest.approx(1.2)
    assert p.max_baseline_tok_s == pytest.approx(p.spec_tok_s / 1.2)


def test_to_dict_is_json_without_nan():
    d = predict(step_ms=10.0, verify_ms=25.0, accept_len=1.5, k=1).to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text)["max_draft_ms"] is None  # verify alone exceeds 1.5 x 10 ms


def test_html_for_notebooks():
    html = predict(baseline_tok_s=62.9, verify_ms=28.7, accept_len=2.1)._repr_html_()
    assert "<table>" in html and "breakeven_accept_len" in html and "tok/s" in html


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"baseline_tok_s": 62.9, "step_ms": 15.9}, "baseline_tok_s and step_ms cannot be given"),
        ({"cycle_ms": 29.9, "verify_ms": 28.7}, "cycle_ms and verify_ms cannot be given"),
        ({"cost_ratio": 0.1, "verify_ms": 28.7, "k": 2}, "cost_ratio and verify_ms cannot"),
        ({"accept_len": 2.0, "alpha": 0.5, "k": 2}, "accept_len and alpha cannot"),
        ({"alpha": 0.5}, "alpha needs k"),
        ({"cost_ratio": 0.1}, "cost_ratio needs k"),
        ({"per_position": [0.9, 0.8], "k": 3}, "k: got 3, but per_position holds 2 rates"),
        ({"accept_len": 5.0, "k": 3}, "accept_len: got 5, expected at most k + 1 = 4"),
        ({}, "nothing to compute"),
        ({"k": 3}, "nothing to compute"),
    ],
)
def test_bad_combinations(kwargs, message):
    with pytest.raises(BreakevenError) as info:
        predict(**kwargs)
    assert message in str(info.value)
