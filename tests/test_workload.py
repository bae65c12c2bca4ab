"""Acceptance and speedup by workload category, a traffic mix's speedup and the break-even
mix (``breakeven.measurements.workload``; ``check`` and ``compare --mix``).

The rows are requests made for the test: the arithmetic is what is checked, by hand, against
the module's description (ratio-of-sums rates, acceptance pooled from counts)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.core.errors import BreakevenError
from breakeven.measurements.check import check
from breakeven.measurements.workload import (
    CategoryRow,
    accept_len_interval,
    mix_answers,
    parse_mix,
)

# Per category: baseline rate, speculative rate [tok/s], accept_len, drafts per request.
CATEGORIES = {
    "code": (50.0, 80.0, 3.2, 40),
    "chat": (50.0, 62.0, 2.4, 50),
    "math": (50.0, 42.0, 1.5, 60),
}


def _requests(n: int = 20) -> pd.DataFrame:
    """n requests a category on each side, rates jittered by request, 100 tokens each."""
    rows = []
    for cat, (base, spec, tau, drafts) in CATEGORIES.items():
        for i in range(n):
            wobble = 1 + 0.02 * ((i % 4) - 1.5)
            common = {"model": "m", "hardware": "h", "concurrency": 1, "category": cat}
            common |= {"completion_tokens": 101 + i}
            rows.append(
                {**common, "label": "base", "run_id": "base", "num_spec_tokens": 0}
                | {"tok_s": base * wobble}
            )
            rows.append(
                {**common, "label": "eagle3", "run_id": "eagle3", "num_spec_tokens": 3}
                | {"tok_s": spec * wobble, "accept_len": tau + 0.1 * ((i % 3) - 1)}
                | {"num_drafts": drafts + i}
            )
    return pd.DataFrame(rows)


def _ratio_of_sums(rates: list[float], tokens: list[float]) -> float:
    return sum(tokens) / sum(t / r for t, r in zip(tokens, rates, strict=True))


def test_each_category_is_its_own_comparison():
    df = _requests()
    rows = {r.category: r for r in check(df).categories}
    assert set(rows) == set(CATEGORIES)
    for cat in CATEGORIES:
        mine = df[df["category"] == cat]
        spec, base = mine[mine["num_spec_tokens"] > 0], mine[mine["num_spec_tokens"] == 0]
        decoded = list(spec["completion_tokens"] - 1)  # the first token is the prefill's
        s = _ratio_of_sums(list(spec["tok_s"]), decoded)
        b = _ratio_of_sums(list(base["tok_s"]), list(base["completion_tokens"] - 1))
        r = rows[cat]
        assert r.speedup == pytest.approx(s / b, rel=1e-12)
        accepted = ((spec["accept_len"] - 1) * spec["num_drafts"]).sum()
        assert r.accept_len == pytest.approx(1 + accepted / spec["num_drafts"].sum(), rel=1e-12)
        assert r.accept_len_low < r.accept_len < r.accept_len_high
        assert r.requests == r.baseline_requests == 20
    assert rows["code"].verdict == "faster" and rows["math"].verdict == "slower"


def test_a_category_without_baseline_requests_has_no_speedup():
    df = _requests()
    df = df[~((df["category"] == "math") & (df["num_spec_tokens"] == 0))]
    rows = {r.category: r for r in check(df).categories}
    assert math.isnan(rows["math"].speedup) and rows["math"].verdict == "not measured"
    assert rows["math"].baseline_requests == 0


def test_rows_without_a_category_are_left_out():
    assert check(_requests().drop(columns="category")).categories == ()
    df = _requests()
    df.loc[df["category"] == "chat", "category"] = None
    assert {r.category for r in check(df).categories} == {"code", "math"}


def test_the_mix_is_a_ratio_of_sums_of_time():
    """60% code, 30% chat, 10% math of the tokens: the baseline's time for them over
    speculation's, not the weighted mean of the speedups."""
    rows = check(_requests()).categories
    (answer,) = mix_answers(rows, parse_mix("code=0.6,chat=0.3,math=0.1"))
    by = {r.category: r for r in rows}
    w = {"code": 0.6, "chat": 0.3, "math": 0.1}
    base = sum(w[c] / by[c].baseline_tok_s for c in w)
    spec = sum(w[c] / by[c].tok_s for c in w)
    assert answer.speedup == pytest.approx(base / spec, rel=1e-12)
    weighted_mean = sum(w[c] * by[c].speedup for c in w)
    assert answer.speedup != pytest.approx(weighted_mean, rel=1e-6)
    assert answer.low < answer.speedup < answer.high
    assert [c for c, _ in answer.losing] == ["math"]
    # At the break-even share of math (code and chat in their 2:1 proportion) it pays 1.0x.
    s = answer.breakeven_share
    at = {"code": (1 - s) * 2 / 3, "chat": (1 - s) / 3, "math": s}
    (even,) = mix_answers(rows, at)
    assert even.speedup == pytest.approx(1.0, rel=1e-12)


def test_no_losing_category_has_no_breakeven_mix():
    rows = [r for r in check(_requests()).categories if r.category != "math"]
    (answer,) = mix_answers(rows, parse_mix("code=1,chat=1"))
    assert answer.losing == () and math.isnan(answer.breakeven_share)


def _row(cat: str, base: float, speedup: float) -> CategoryRow:
    return CategoryRow(
        "run",
        1.0,
        cat,
        4,
        4,
        2.0,
        1.9,
        2.1,
        base * speedup,
        base,
        speedup,
        speedup * 0.95,
        speedup * 1.05,
        "faster",
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(5, 500), st.floats(0.3, 3.0), st.floats(0.01, 1)),
        min_size=2,
        max_size=6,
    )
)
def test_the_mix_lies_between_its_categories(cats):
    """The mix's speedup is between its categories' least and greatest, and where some lose
    and some win, mixing at the break-even share gives exactly 1."""
    rows = [_row(f"c{i}", b, s) for i, (b, s, _) in enumerate(cats)]
    mix = {f"c{i}": w for i, (_, _, w) in enumerate(cats)}
    (answer,) = mix_answers(rows, parse_mix(mix))
    speedups = [s for _, s, _ in cats]
    assert min(speedups) * (1 - 1e-12) <= answer.speedup <= max(speedups) * (1 + 1e-12)
    share = answer.breakeven_share
    if any(s < 1 for s in speedups) and any(s >= 1 for s in speedups):
        assert 0 <= share <= 1
        losing = {c for c, _ in answer.losing}
        total_l = sum(w for c, w in parse_mix(mix).items() if c in losing)
        at = {
            c: (share * w / total_l if c in losing else (1 - share) * w / (1 - total_l))
            for c, w in parse_mix(mix).items()
        }
        (even,) = mix_answers(rows, {c: w for c, w in at.items() if w > 0} or at)
        if all(w > 0 for w in at.values()):
            assert even.speedup == pytest.approx(1.0, rel=1e-9)
    else:
        assert math.isnan(share)


@pytest.mark.parametrize(
    "text", ["", "code", "code=", "code=x", "=0.5", "code=-1", "code=0", "code=1,code=2", "a=inf"]
)
def test_a_bad_mix_is_refused(text):
    with pytest.raises(BreakevenError) as e:
        parse_mix(text)
    assert "expected CATEGORY=SHARE pairs" in str(e.value)


def test_a_mix_of_a_category_no_run_measured_is_refused():
    rows = check(_requests()).categories
    with pytest.raises(BreakevenError, match="poetry has no measured speedup in run eagle3"):
        mix_answers(rows, parse_mix("code=0.5,poetry=0.5"))


def test_accept_len_without_drafts_is_their_mean():
    centre, low, high = accept_len_interval([2.0, 2.2, 2.4], [None, None, None])
    assert centre == pytest.approx(2.2) and low < 2.2 < high
    assert math.isnan(accept_len_interval([2.0], [10])[1])  # one request: no interval


def test_check_prints_categories_and_the_mix(tmp_path):
    path = tmp_path / "runs.csv"
    _requests().to_csv(path, index=False)
    args = ["check", str(path), "--mix", "code=0.6,chat=0.3,math=0.1"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {x["category"] for x in data["categories"]} == set(CATEGORIES)
    (mix,) = data["mix"]
    assert mix["losing"][0][0] == "math" and 0 < mix["breakeven_share"] < 1
    text = run_cli(args).output
    assert "By workload category" in text and "Loses on math" in text
    assert "Speculation stops paying when the losing categories are above" in text


def test_check_refuses_a_mix_without_categories(tmp_path):
    path = tmp_path / "runs.csv"
    _requests().drop(columns="category").to_csv(path, index=False)
    r = run_cli(["check", str(path), "--mix", "code=1"])
    assert r.exit_code == 2 and "--mix needs rows with a category" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = run_cli(["check", str(path), "--mix", "code"])
    assert r.exit_code == 2 and "--mix: got 'code'" in r.output


def test_compare_gives_the_category_matrix_in_text_json_and_report(tmp_path):
    """compare of a measurements CSV's two runs: per-category rows, the mix, and the report's
    matrix with each cell coloured as its verdict."""
    path = tmp_path / "runs.csv"
    _requests().to_csv(path, index=False)
    args = ["compare", f"base={path}", f"eagle3={path}", "--mix", "code=0.6,chat=0.3,math=0.1"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    rows = {x["category"]: x for x in data["categories"]}
    assert rows["code"]["verdict"] == "faster" and rows["math"]["verdict"] == "slower"
    assert data["mix"][0]["label"] == "eagle3"
    text = run_cli(args).output
    assert "By workload category" in text and "eagle3 over the mix (code 60%" in text
    r = run_cli([*args, "--report", str(tmp_path / "report")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>By workload category</h2>" in page
    assert page.count('<td class="win">') >= 2 and page.count('<td class="loss">') >= 1
