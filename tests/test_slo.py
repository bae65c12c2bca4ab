"""SLOs, goodput, latency percentiles and the break-even request rate (issue 42): ``check`` and
``compare`` with ``--slo``, over request rows as bench writes them (one row per request).

The rows here are synthetic requests with bench's columns; every expected figure is computed
in the test from its definition (vLLM's goodput: good completed requests over the benchmark's
duration; numpy's linear percentile written out), not by the tool's helpers."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from breakeven.core.errors import BreakevenError
from breakeven.measurements.check import check
from breakeven.measurements.slo import crossing, level_row, parse_slo
from tests.cli_checks import one_line_exit_2, run_cli

TOKENS = 129  # completion tokens of each request: the first is the prefill's


def request_rows(label, k, tpots, ttfts, starts, *, rate=4.0, cap=64.0, launch="L1", **extra):
    """bench's rows of one level: a request per value, its e2e = ttft + tpot x (tokens - 1)."""
    rows = []
    for i, (tpot, ttft, start) in enumerate(zip(tpots, ttfts, starts, strict=True)):
        rows.append(
            {
                "run_id": f"{label}-{launch}",
                "label": label,
                "timestamp": "2026-12-05T10:00:00Z",
                "engine": "vllm",
                "model": "Llama-3.1-8B",
                "hardware": "1x H100",
                "concurrency": cap,
                "request_rate": rate,
                "num_spec_tokens": k,
                "spec_method": "eagle3" if k else "",
                "tok_s": 1000.0 / tpot,
                "ttft_ms": ttft,
                "tpot_ms": tpot,
                "itl_ms": tpot * (2.4 if k else 1.0),
                "e2e_ms": ttft + tpot * (TOKENS - 1),
                "start_s": start,
                "completion_tokens": TOKENS,
                "accept_len": 2.4 if k else math.nan,
                "launch_id": f"127.0.0.1:8000@{launch}",
                "origin": "client",
                "source": f"bench:{label}:{i}",
                **extra,
            }
        )
    return rows


def linear_percentile(values, p):
    """numpy's linear method from its definition: rank h = (n - 1) p / 100, between the
    neighbours x[floor h] and x[floor h + 1]."""
    x = sorted(values)
    h = (len(x) - 1) * p / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(x) - 1)
    return x[lo] + (h - lo) * (x[hi] - x[lo])


BASE = {"tpots": [20.0, 22.0, 30.0, 24.0, 21.0], "ttfts": [80.0, 95.0, 400.0, 120.0, 90.0]}
SPEC = {"tpots": [12.0, 14.0, 26.0, 13.0, 15.0], "ttfts": [85.0, 100.0, 500.0, 110.0, 95.0]}
STARTS = [0.0, 0.25, 0.5, 0.75, 1.0]


def _one_level():
    return pd.DataFrame(
        request_rows("base", 0, starts=STARTS, **BASE)
        + request_rows("eagle3", 3, starts=STARTS, **SPEC)
    )


def _by_side(result):
    return {row["side"]: row for row in result.to_dict()["levels"]}


def test_goodput_attainment_and_percentiles_by_hand():
    result = check(_one_level(), slo="tpot_ms<=25,ttft_ms:p90<=300")
    levels = _by_side(result)
    for side, given_ in (("baseline", BASE), ("speculative", SPEC)):
        got = levels[side]
        tpots, ttfts = given_["tpots"], given_["ttfts"]
        e2e = [f + t * (TOKENS - 1) for t, f in zip(tpots, ttfts, strict=True)]
        good = sum(t <= 25 for t in tpots)
        duration = max(s + e / 1000 for s, e in zip(STARTS, e2e, strict=True)) - min(STARTS)
        assert got["requests"] == 5
        assert got["good_requests"] == good
        assert got["goodput_rps"] == pytest.approx(good / duration)
        assert got["slo_attainment"] == pytest.approx(good / 5)
        assert got["duration_s"] == pytest.approx(duration)
        assert got["goodput_low"] is None  # one launch: no interval across launches
        assert got["mean_tpot_ms"] == pytest.approx(sum(tpots) / 5)
        for p in (50, 90, 99):
            assert got[f"tpot_ms_p{p}"] == pytest.approx(linear_percentile(tpots, p))
            assert got[f"ttft_ms_p{p}"] == pytest.approx(linear_percentile(ttfts, p))
        p90_ttft = linear_percentile(ttfts, 90)
        assert got["slo_met"] is (p90_ttft <= 300)
    assert levels["baseline"]["good_requests"] == 4  # the 30 ms request misses 25 ms
    # p90 TTFT: rank 0.9 x 4 = 3.6 between 110 and 500 ms, 110 + 0.6 x 390 = 344 ms > 300 ms
    assert levels["speculative"]["slo_met"] is False
    assert levels["speculative"]["slo_missed"] == ["ttft_ms:p90 344 > 300"]
    assert levels["baseline"]["slo_met"] is True  # 120 + 0.6 x 280 = 288 ms


def test_several_launches_give_an_interval_across_launches():
    starts = [0.0, 0.5, 1.0, 1.5]
    launches = {
        "A": [20.0, 30.0, 22.0, 24.0],
        "B": [26.0, 21.0, 23.0, 27.0],
        "C": [19.0, 20.0, 31.0, 33.0],
    }
    rows = []
    for launch, tpots in launches.items():
        rows += request_rows("base", 0, tpots, [100.0] * 4, starts, launch=launch)
        rows += request_rows("k3", 3, [t / 2 for t in tpots], [100.0] * 4, starts, launch=launch)
    base = _by_side(check(pd.DataFrame(rows), slo="tpot_ms<25"))["baseline"]
    goodputs, attainments = [], []
    for tpots in launches.values():
        good = sum(t < 25 for t in tpots)
        end = max(s + (100 + t * (TOKENS - 1)) / 1000 for s, t in zip(starts, tpots, strict=True))
        goodputs.append(good / end)
        attainments.append(good / 4)
    t = stats.t.ppf(0.975, 2)
    half = t * np.std(goodputs, ddof=1) / math.sqrt(3)
    assert base["launches"] == 3
    assert base["goodput_rps"] == pytest.approx(np.mean(goodputs))
    assert base["goodput_low"] == pytest.approx(np.mean(goodputs) - half)
    assert base["goodput_high"] == pytest.approx(np.mean(goodputs) + half)
    assert base["slo_attainment"] == pytest.approx(np.mean(attainments))
    assert 0 <= base["slo_attainment_low"] <= base["slo_attainment_high"] <= 1


_REQUESTS = st.lists(
    st.tuples(
        st.floats(1, 200),  # tpot_ms
        st.floats(10, 5000),  # ttft_ms
        st.floats(0, 60),  # start_s
    ),
    min_size=1,
    max_size=30,
)


def _columns(requests):
    tpot, ttft, start = (np.array(x, dtype=float) for x in zip(*requests, strict=True))
    return {
        "tpot_ms": tpot,
        "ttft_ms": ttft,
        "itl_ms": tpot,
        "e2e_ms": ttft + tpot * (TOKENS - 1),
        "start_s": start,
    }


_WHO = {
    "label": "x",
    "side": "speculative",
    "num_spec_tokens": 3.0,
    "concurrency": 64.0,
    "request_rate": 4.0,
}


@settings(max_examples=150, deadline=None)
@given(_REQUESTS, st.floats(1, 200), st.floats(10, 5000))
def test_attainment_is_a_fraction_and_goodput_at_most_completed_over_duration(req, tpot, ttft):
    columns = _columns(req)
    row = level_row(_WHO, columns, ["L"] * len(req), parse_slo(f"tpot_ms<={tpot},ttft_ms<={ttft}"))
    assert 0 <= row.slo_attainment <= 1
    duration = np.max(columns["start_s"] + columns["e2e_ms"] / 1000) - np.min(columns["start_s"])
    assert row.goodput_rps <= len(req) / duration * (1 + 1e-12)
    assert row.good_requests <= row.requests == len(req)


@settings(max_examples=150, deadline=None)
@given(_REQUESTS, st.floats(1, 200), st.floats(0, 100), st.sampled_from(["<=", "<"]))
def test_a_looser_slo_never_lowers_attainment(req, bound, extra, op):
    columns, launch = _columns(req), ["L"] * len(req)
    tight = level_row(_WHO, columns, launch, parse_slo(f"tpot_ms{op}{bound}"))
    loose = level_row(_WHO, columns, launch, parse_slo(f"tpot_ms{op}{bound + extra}"))
    assert loose.slo_attainment >= tight.slo_attainment
    assert loose.goodput_rps >= tight.goodput_rps


def _rate_levels(base_tpot, spec_tpot, rates=(1.0, 2.0, 4.0, 8.0), n=20):
    """Levels of both sides at each rate: TPOT by rate given for each side, a little spread."""
    rows = []
    spread = np.linspace(0.9, 1.1, n)
    for rate in rates:
        starts = [i / rate for i in range(n)]
        ttfts = [60.0 + 10 * i % 40 for i in range(n)]
        rows += request_rows("base", 0, base_tpot(rate) * spread, ttfts, starts, rate=rate)
        rows += request_rows("eagle3", 3, spec_tpot(rate) * spread, ttfts, starts, rate=rate)
    return pd.DataFrame(rows)


def test_the_breakeven_rate_lies_between_the_bracketing_levels():
    # speculation's TPOT grows faster with load: lower at 1-4 req/s, higher at 8
    data = _rate_levels(lambda r: 20 + r, lambda r: 10 + 3 * r)
    (answer,) = check(data).to_dict()["breakeven_rates"]
    assert answer["by"] == "mean TPOT" and answer["how"] == "interpolated"
    assert 4 <= answer["breakeven_request_rate"] <= 8
    # mean TPOT 21, 22, 24, 28 ms against 13, 16, 22, 34: margins 8, 6, 2 and -6 ms, which
    # cross 0 at 4 + 4 x 2 / 8 = 5 req/s
    assert answer["margins"] == pytest.approx([8, 6, 2, -6])
    assert answer["breakeven_request_rate"] == pytest.approx(5.0)
    assert "interpolated between 4 and 8 req/s" in answer["sentence"]
    assert answer["sentence"].startswith("speculation pays up to 5 req/s (by mean TPOT)")


def test_under_an_slo_attainment_decides_and_where_it_ties_the_faster_wins():
    # tpot_ms <= 40 per request: the baseline (31-38 ms, +-10%) meets it at every rate;
    # speculation (13 and 20 ms at 1 and 2 req/s, 54 and 108 at 4 and 8) at 1 and 2 only.  At
    # 1 and 2 req/s both attain 100%: the faster wins, by its TPOT relative to the baseline's;
    # at 4 req/s speculation attains 0 against 1.
    data = _rate_levels(lambda r: 30 + r, lambda r: 13.5 * r if r > 2 else 6 + 7 * r)
    (answer,) = check(data, slo="tpot_ms<=40").to_dict()["breakeven_rates"]
    base = [31, 32, 34, 38]
    spec = [13, 20, 54, 108]
    expected = [(b - s) / b for b, s in zip(base[:2], spec[:2], strict=True)]
    assert answer["margins"][:2] == pytest.approx(expected)
    assert answer["margins"][2] == pytest.approx(-1.0)  # 0% attained against 100%
    assert answer["how"] == "interpolated" and 2 < answer["breakeven_request_rate"] < 4


def _launches(base_tpot, spec_tpot, rates=(1.0, 2.0, 4.0), launches=("L1", "L2", "L3"), n=12):
    """Both sides at each rate, each launch its own server start; TPOT by (rate, launch)."""
    rows = []
    spread = np.linspace(0.95, 1.05, n)
    for rate in rates:
        starts = [i / rate for i in range(n)]
        for launch in launches:
            ttfts = [50.0] * n
            for label, k, tpot in (("base", 0, base_tpot), ("eagle3", 3, spec_tpot)):
                tpots = tpot(rate, launch) * spread
                rows += request_rows(label, k, tpots, ttfts, starts, rate=rate, launch=launch)
    return pd.DataFrame(rows)


def test_the_break_even_rate_is_never_surer_than_the_runs():
    # Three launches a side agreeing within 2%: speculation faster beyond noise at 1 and 2
    # req/s, slower at 4: a break-even rate, and no word of noise.
    steady = _launches(lambda r, launch: 20.0, lambda r, launch: 8.0 + 3.5 * r)
    (answer,) = check(steady).to_dict()["breakeven_rates"]
    assert answer["how"] == "interpolated" and "noise" not in answer["sentence"]
    # One speculative launch 10x slower at 2 req/s: the launches disagree, the runs cannot
    # decide there, and no break-even rate is given.
    noisy = _launches(
        lambda r, launch: 20.0,
        lambda r, launch: (8.0 + 3.5 * r) * (10 if (r, launch) == (2.0, "L3") else 1),
    )
    (answer,) = check(noisy).to_dict()["breakeven_rates"]
    assert answer["how"] == "undecided" and answer["breakeven_request_rate"] is None
    assert answer["sentence"].startswith("the data cannot decide where speculation stops paying")
    assert "at 2 req/s the runs are too noisy" in answer["sentence"]
    # One launch a side: the rate is given, and said to be without an interval.
    one = _launches(lambda r, launch: 20.0, lambda r, launch: 8.0 + 3.5 * r, launches=("L1",))
    (answer,) = check(one).to_dict()["breakeven_rates"]
    assert answer["how"] == "interpolated"
    assert "at 1, 2 req/s its lead is without an interval" in answer["sentence"]


@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=8),
    st.lists(st.floats(0.1, 10), min_size=8, max_size=8),
)
def test_crossing_lies_between_the_bracketing_rates(margins, steps):
    rates = tuple(np.cumsum(steps[: len(margins)]).tolist())
    value, how, bracket = crossing(rates, tuple(margins))
    if how == "interpolated":
        low, high = bracket
        i = rates.index(low)
        assert rates[i + 1] == high and margins[i] > 0 >= margins[i + 1]
        assert low <= value <= high
        assert all(m <= 0 for m in margins[i + 1 :])
    elif how == "at least":
        assert value == rates[-1] and margins[-1] > 0
    else:
        assert how == "never" and math.isnan(value) and all(m <= 0 for m in margins)


def _write_sides(tmp_path, data):
    base, spec = tmp_path / "base.csv", tmp_path / "eagle3.csv"
    data[data["num_spec_tokens"] == 0].to_csv(base, index=False)
    data[data["num_spec_tokens"] > 0].to_csv(spec, index=False)
    return base, spec


def test_compare_says_the_breakeven_rate_first(tmp_path):
    # p90 TPOT <= 50 ms: the baseline (31-38 ms) meets it at every rate, speculation (17, 22,
    # 32 and 52 ms, its p90 8% above) up to 4 req/s, where it is still the faster
    data = _rate_levels(lambda r: 30 + r, lambda r: 12 + 5 * r)
    base, spec = _write_sides(tmp_path, data)
    r = run_cli(["compare", base, spec, "--slo", "tpot_ms:p90<=50"])
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("speculation pays up to ")
    assert "req/s (p90 TPOT <= 50 ms); above it, turn it off" in first
    assert "(interpolated between 4 and 8 req/s)" in " ".join(r.output.split())
    assert "eagle3 is slower than base at 8 req/s" in r.output  # each level's headline
    got = json.loads(run_cli(["compare", base, spec, "--slo", "tpot_ms:p90<=50", "--json"]).output)
    (answer,) = got["breakeven_rates"]
    assert answer["by"] == "goodput" and 4 <= answer["breakeven_request_rate"] <= 8
    assert got["slo"] == "tpot_ms:p90<=50"
    assert {row["request_rate"] for row in got["levels"]} == {1.0, 2.0, 4.0, 8.0}


def test_wins_everywhere_is_at_least_the_highest_rate():
    data = _rate_levels(lambda r: 30 + r, lambda r: 12 + r)
    (answer,) = check(data, slo="tpot_ms<=45").to_dict()["breakeven_rates"]
    assert answer["how"] == "at least" and answer["breakeven_request_rate"] == 8
    assert "up to at least 8 req/s" in answer["sentence"]
    assert "not extrapolated" in answer["sentence"]


def test_loses_everywhere_says_so():
    data = _rate_levels(lambda r: 10 + r, lambda r: 20 + r)
    (answer,) = check(data).to_dict()["breakeven_rates"]
    assert answer["how"] == "never" and answer["breakeven_request_rate"] is None
    assert answer["sentence"].startswith(
        "speculation does not pay at any measured rate (1 to 8 req/s, by mean TPOT)"
    )


def test_a_rate_level_never_pairs_with_a_concurrency_level():
    starts = [0.0, 0.5, 1.0, 1.5]
    closed = request_rows("base", 0, [40.0] * 4, [90.0] * 4, starts, rate=math.nan, cap=4.0)
    rate_base = request_rows("base", 0, [20.0] * 4, [90.0] * 4, starts, rate=4.0, cap=4.0)
    spec = request_rows("eagle3", 3, [10.0] * 4, [90.0] * 4, starts, rate=4.0, cap=4.0)
    # only a closed-loop baseline at concurrency 4: the rate level has no baseline
    alone = check(pd.DataFrame(closed + spec)).to_dict()
    (c,) = alone["comparisons"]
    assert "baseline_missing" in c["flags"] and c["baseline_tok_s"] is None
    assert c["request_rate"] == 4.0 and c["concurrency"] == 4.0
    # with both, the rate level pairs with the baseline at 4 req/s (50 tok/s), not 25 tok/s
    both = check(pd.DataFrame(closed + rate_base + spec)).to_dict()
    (c,) = both["comparisons"]
    assert c["baseline_tok_s"] == pytest.approx(50.0)
    assert c["measured_speedup"] == pytest.approx(2.0)
    baselines = {(b["concurrency"], b["request_rate"]) for b in both["baselines"]}
    assert baselines == {(4.0, None), (None, 4.0)}


def test_an_slo_on_rows_without_latencies_is_a_note():
    plain = run_cli(["check", "data/case_study.csv", "--json"])
    with_slo = run_cli(["check", "data/case_study.csv", "--slo", "tpot_ms<=50", "--json"])
    assert with_slo.exit_code == 0, with_slo.output
    plain, got = json.loads(plain.output), json.loads(with_slo.output)
    assert got["comparisons"] == plain["comparisons"] and got["flags"] == plain["flags"]
    assert "no row gives a request's latency" in got["slo_note"]
    assert "levels" not in got
    text = run_cli(["check", "data/case_study.csv", "--slo", "tpot_ms<=50"]).output
    assert sum("no row gives a request's latency" in line for line in text.splitlines()) == 1


BAD_SLOS = {
    "": "expected bounds such as",
    " , ": "expected bounds such as",
    "latency_ms<=50": "a metric of ttft_ms, tpot_ms, itl_ms, e2e_ms",
    "tpot<=50": "a metric of ttft_ms, tpot_ms, itl_ms, e2e_ms",
    "tpot_ms>=50": "the operator <= or < (a latency's bound is an upper bound)",
    "tpot_ms=50": "the operator <= or <",
    "tpot_ms=<50": "the operator <= or <",
    "tpot_ms 50": "METRIC[:pP]<=VALUE",
    "tpot_ms:p100<=50": "a percentile p1 to p99.9",
    "tpot_ms:q90<=50": "a percentile p1 to p99.9",
    "tpot_ms:p<=50": "a percentile p1 to p99.9",
    "tpot_ms<=0": "a positive finite value in ms",
    "tpot_ms<=-5": "a positive finite value in ms",
    "tpot_ms<=inf": "a positive finite value in ms",
    "tpot_ms<=nan": "a positive finite value in ms",
    "tpot_ms<=fast": "a positive finite value in ms",
    "tpot_ms<=": "a positive finite value in ms",
    "tpot_ms<=50,": "no empty bound between commas",
    "tpot_ms<=50,tpot_ms<60": "each metric bounded once per request (tpot_ms twice)",
    "tpot_ms:p90<=50,tpot_ms:p90.0<=60": "each metric bounded once at p90 (tpot_ms twice)",
}


@pytest.mark.parametrize("text", sorted(BAD_SLOS))
def test_bad_slos_raise_a_value_error(text):
    with pytest.raises(ValueError, match=r"^slo: got ") as caught:
        parse_slo(text)
    assert isinstance(caught.value, BreakevenError)
    assert BAD_SLOS[text] in str(caught.value)
    with pytest.raises(BreakevenError):
        check(_one_level(), slo=text)


@pytest.mark.parametrize("command", ["check", "compare"])
@pytest.mark.parametrize("text", sorted(BAD_SLOS))
def test_bad_slos_are_one_line_and_exit_2(tmp_path, command, text):
    base, spec = _write_sides(tmp_path, _one_level())
    files = [base] if command == "check" else [base, spec]
    r = run_cli([command, *files, "--slo", text])
    last = one_line_exit_2(r, "--slo: got ", BAD_SLOS[text])
    assert r.stderr.strip() == last


def test_good_slos_parse_as_written():
    slo = parse_slo(" tpot_ms <= 50ms , ttft_ms:p99.9<2000,e2e_ms:P50<=9000.5,itl_ms<1e3")
    assert slo.text == "tpot_ms<=50,ttft_ms:p99.9<2000,e2e_ms:p50<=9000.5,itl_ms<1000"
    assert [b.percentile for b in slo.bounds] == [None, 99.9, 50.0, None]
    assert (
        slo.words
        == "TPOT <= 50 ms, p99.9 TTFT < 2000 ms, p50 E2E latency <= 9000.5 ms, ITL < 1000 ms"
    )
    assert parse_slo(slo.text) == slo  # the normalised text reads back the same


_NEAR = st.lists(
    st.tuples(
        st.sampled_from(["tpot_ms", "ttft_ms", "itl_ms", "e2e_ms", "TPOT", "", "tpot_ms:"]),
        st.sampled_from(["", ":p90", ":p99.9", ":p0", ":p", ":90", ":pnan", ":p1e2"]),
        st.sampled_from(["<=", "<", ">=", "=<", "==", "", "<<"]),
        st.sampled_from(["50", "0", "-1", "1e400", "nan", "inf", "5ms", "", "x", "0x10"]),
    ),
    max_size=4,
).map(lambda parts: ",".join("".join(p) for p in parts))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=40), _NEAR))
def test_the_slo_parser_never_raises_anything_but_a_value_error(text):
    try:
        slo = parse_slo(text)
    except BreakevenError as e:
        assert "\n" not in str(e)
        return
    for bound in slo.bounds:
        assert bound.value_ms > 0 and math.isfinite(bound.value_ms)
        assert bound.percentile is None or 0 < bound.percentile < 100


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.one_of(st.text(max_size=20), _NEAR))
def test_the_cli_slo_never_gives_a_traceback(tmp_path, text):
    path = tmp_path / "levels.csv"
    if not path.exists():
        _one_level().to_csv(path, index=False)
    r = run_cli(["check", path, "--slo", text])
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output
