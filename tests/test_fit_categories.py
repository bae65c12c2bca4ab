"""fit by workload category (issue 28, item 2): each category's accept_len at each k priced with
its group's step and fitted cycle, the best k of each, and a traffic mix's speedup at each k.

The requests are simulated from a known model, so the answers are known: a step of 10 ms, a
cycle of 10 + 2.5 k ms, and acceptance i.i.d. at alpha 0.8 for code and 0.35 for math.  Each
request decodes ``accept_len x drafts`` tokens in ``drafts`` cycles, so its time is ``drafts x
cycle`` and the pooled rates imply the cycle exactly, whatever the mix of categories."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from cli_checks import run_cli

from breakeven.fitting.fit import fit
from breakeven.model.acceptance import accept_len_from_alpha

STEP = 10.0
ALPHA = {"code": 0.8, "math": 0.35}
KS = (1, 2, 3, 4, 5, 6)


def cycle(k: int) -> float:
    return 10.0 + 2.5 * k


def _rows() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    rows = []
    for cat, alpha in ALPHA.items():
        for i in range(12):
            rows.append(_row("base", 0, cat, 1.0, 100, 1000.0 / STEP))
            for k in KS:
                drafts = int(rng.integers(30, 60))
                tau = float(accept_len_from_alpha(alpha, k))
                accepted = round((tau - 1) * drafts) + (i % 3) - 1  # requests differ
                accepted = min(max(accepted, 0), k * drafts)
                t = 1 + accepted / drafts
                rows.append(_row(f"k{k}", k, cat, t, drafts, 1000.0 * t / cycle(k)))
    return pd.DataFrame(rows)


def _row(label, k, cat, tau, drafts, tok_s):
    return {
        "label": label,
        "model": "m",
        "hardware": "h",
        "concurrency": 1,
        "num_spec_tokens": k,
        "accept_len": tau if k else None,
        "num_drafts": drafts if k else None,
        "tok_s": tok_s,
        "completion_tokens": tau * drafts + 1,
        "category": cat,
    }


def _pooled(rows, cat, k):
    mine = rows[(rows["category"] == cat) & (rows["num_spec_tokens"] == k)]
    d = mine["num_drafts"]
    return 1 + ((mine["accept_len"] - 1) * d).sum() / d.sum()


def test_each_category_is_priced_with_the_groups_cycle():
    rows = _rows()
    result = fit(rows)
    (g,) = result.groups
    assert g.step_ms == pytest.approx(STEP)
    for k in KS:
        assert g.cycle_ms(k) == pytest.approx(cycle(k), rel=1e-9)
    by = {(r.category, r.k): r for r in result.categories}
    assert set(by) == {(c, k) for c in ALPHA for k in KS}
    for (cat, k), r in by.items():
        tau = _pooled(rows, cat, k)
        assert r.requests == 12
        assert r.accept_len == pytest.approx(tau)
        assert r.accept_len_low < tau < r.accept_len_high
        assert r.predicted_speedup == pytest.approx(tau * STEP / cycle(k), rel=1e-9)
        assert r.predicted_low < r.predicted_speedup < r.predicted_high
    # Code pays most at a deep k; math barely pays at k = 1 and loses beyond.
    best = {r.category: r.k for r in result.categories if r.best}
    speedups = {c: [by[c, k].predicted_speedup for k in KS] for c in ALPHA}
    assert best == {c: KS[int(np.argmax(speedups[c]))] for c in ALPHA}
    assert best["code"] > best["math"]
    assert by["code", best["code"]].verdict == "faster"
    assert by["math", 6].verdict == "slower"


def test_a_mix_is_the_token_weighted_harmonic_mean_of_acceptance():
    # 70% of the tokens code, 30% math: a token of each costs cycle / accept_len of its
    # category, so the mix's tokens per cycle are 1 / (0.7 / tau_code + 0.3 / tau_math).
    rows = _rows()
    result = fit(rows, mix="code=0.7,math=0.3")
    assert [m.k for m in result.mix] == list(KS)
    for m in result.mix:
        tau = 1 / (0.7 / _pooled(rows, "code", m.k) + 0.3 / _pooled(rows, "math", m.k))
        assert m.accept_len == pytest.approx(tau)
        assert m.predicted_speedup == pytest.approx(tau * STEP / cycle(m.k), rel=1e-9)
        assert m.predicted_low < m.predicted_speedup < m.predicted_high
    (best,) = [m for m in result.mix if m.best]
    assert best.predicted_speedup == max(m.predicted_speedup for m in result.mix)


def test_the_cli_prints_and_writes_them(tmp_path):
    path = tmp_path / "runs.csv"
    _rows().to_csv(path, index=False)
    got = run_cli(["fit", str(path), "--mix", "code=0.7,math=0.3", "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert len(data["categories"]) == 2 * len(KS) and len(data["mix"]) == len(KS)
    text = run_cli(["fit", str(path), "--mix", "code=0.7,math=0.3"]).output
    assert "By workload category" in text
    assert "the mix (code 70%, math 30% of the tokens; * its best k):" in text
    bad = run_cli(["fit", str(path), "--mix", "code=x"])
    assert bad.exit_code == 2 and "--mix" in bad.output and "Traceback" not in bad.output


def test_no_category_no_rows():
    rows = _rows().drop(columns="category")
    result = fit(rows, mix="code=1")
    assert result.categories == () and result.mix == ()
    assert "categories" not in result.to_dict()
