"""check: pairing, measured against predicted, intervals by launch, and every flag."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from cli_checks import run_cli

from breakeven import BreakevenError
from breakeven.measurements.check import check, check_file, fingerprint

ROOT = Path(__file__).resolve().parents[1]
CASE_STUDY = ROOT / "data" / "case_study.csv"
COMMON = {"model": "m", "hardware": "h", "concurrency": 1, "engine": "vllm"}


def rows(*specs):
    return pd.DataFrame([{**COMMON, **s} for s in specs])


class TestCaseStudy:
    def test_flags_the_drifting_baseline_and_compares_with_the_right_one(self):
        result = check_file(CASE_STUDY)
        codes = [f.code for f in result.flags]
        assert codes == ["baseline_drift"]
        assert "90.00 tok/s" in result.flags[0].message and "62.90 tok/s" in result.flags[0].message
        assert "NCCL_PROTO=LL" in result.flags[0].message
        by_label = {c.label: c for c in result.comparisons}
        k3 = by_label["eagle3-k3"]
        assert k3.baseline_tok_s == 62.9  # the baseline of the same environment, not 90
        assert k3.measured_speedup == pytest.approx(75.9 / 62.9)  # the 20% win
        k6 = by_label["eagle3-k6"]
        assert k6.predicted_speedup == pytest.approx(2.1 * (1000 / 62.9) / 29.9)  # 1.117
        assert k6.verdict == "not measured"

    def test_server_log_agrees_with_the_client_benchmark(self):
        (server_check,) = check_file(CASE_STUDY).server_checks
        assert server_check.run_id == "s2-baseline" and server_check.agree
        assert server_check.server_tok_s == pytest.approx((62.66 + 62.97 + 62.57) / 3)

    def test_without_the_fresh_baseline_the_old_one_is_stale(self):
        data = pd.read_csv(CASE_STUDY, comment="#")
        data = data[data["run_id"] != "s2-baseline"]
        result = check(data)
        codes = {f.code for f in result.flags}
        assert "stale_baseline" in codes
        k3 = next(c for c in result.comparisons if c.label == "eagle3-k3")
        assert k3.baseline_tok_s == 90 and k3.measured_speedup == pytest.approx(75.9 / 90)
        assert "stale_baseline" in k3.flags
        stale = next(f for f in result.flags if f.code == "stale_baseline")
        assert "NCCL_PROTO=LL" in stale.message  # it says what differs

    def test_cli_text_and_json(self):
        text = run_cli(["check", str(CASE_STUDY)])
        assert text.exit_code == 0
        assert "[baseline_drift]" in text.output and "eagle3-k3" in text.output
        d = json.loads(run_cli(["check", str(CASE_STUDY), "--json"]).output)
        assert d["flags"][0]["code"] == "baseline_drift" and d["flags"][0]["lines"] == [9, 10]
        assert {c["label"] for c in d["comparisons"]} == {"eagle3-k3", "eagle3-k6"}


def test_published_results_check_without_error():
    result = check_file(ROOT / "data" / "published.csv")
    assert len(result.comparisons) >= 10
    assert all(c.measured_speedup > 1 for c in result.comparisons)
    assert not [f for f in result.flags if f.code == "accept_len_out_of_range"]


def test_predicted_against_measured_and_mismatch():
    data = rows(
        {"num_spec_tokens": 0, "tok_s": 50.0},
        {"num_spec_tokens": 3, "tok_s": 70.0, "accept_len": 2.5, "cycle_ms": 28.0, "label": "ok"},
        {"num_spec_tokens": 4, "tok_s": 70.0, "accept_len": 2.5, "cycle_ms": 40.0, "label": "off"},
    )
    result = check(data)
    ok, off = result.comparisons
    assert ok.predicted_speedup == pytest.approx(2.5 * 20 / 28)  # 1.786
    assert ok.measured_speedup == pytest.approx(1.4)
    assert ok.implied_cycle_ms == pytest.approx(1000 * 2.5 / 70)
    assert "prediction_mismatch" in ok.flags  # 1.4 vs 1.786
    assert off.residual == pytest.approx(1.4 - 2.5 * 20 / 40)
    data.loc[1, "cycle_ms"] = 1000 * 2.5 / 70
    assert "prediction_mismatch" not in check(data).comparisons[0].flags


def test_request_to_request_spread_within_one_run_is_not_drift():
    # bench writes a row per request: rates vary between requests of the same run.
    base = [{"num_spec_tokens": 0, "tok_s": t, "run_id": "b1"} for t in (55, 62, 66, 58, 64)]
    spec = [{"num_spec_tokens": 3, "tok_s": t, "run_id": "s1"} for t in (80, 84, 79)]
    result = check(rows(*base, *spec))
    assert not [f for f in result.flags if f.code == "baseline_drift"]
    again = rows(*base, *[{"num_spec_tokens": 0, "tok_s": 90.0, "run_id": "b2"}])
    assert [f.code for f in check(again).flags] == ["baseline_drift"]  # a second run disagrees


def test_accept_len_is_pooled_from_counts_never_a_mean_of_ratios():
    # Two logging intervals of one run: 1 draft that kept its token, 23 drafts that kept 5.
    # vLLM's own counters say 1 + 6 / 24 = 1.25; the mean of the two ratios says 1.61.
    spec = {"label": "s", "num_spec_tokens": 3, "spec_method": "ngram", "run_id": "r"}
    df = rows(
        {"label": "b", "num_spec_tokens": 0, "tok_s": 50.0},
        {**spec, "tok_s": 60.0, "accept_len": 2.0, "num_drafts": 1},
        {**spec, "tok_s": 60.0, "accept_len": 1 + 5 / 23, "num_drafts": 23},
    )
    (c,) = check(df).comparisons
    assert c.accept_len == pytest.approx(1 + 6 / 24)
    # A source that prints only the ratio (no draft counts) can only be averaged.
    unweighted = df.drop(columns="num_drafts")
    assert check(unweighted).comparisons[0].accept_len == pytest.approx((2 + 1 + 5 / 23) / 2)


def test_baseline_missing():
    result = check(rows({"num_spec_tokens": 3, "tok_s": 70.0, "accept_len": 2.0}))
    assert [f.code for f in result.flags] == ["baseline_missing"]


def test_accept_len_out_of_range():
    result = check(
        rows(
            {"num_spec_tokens": 0, "tok_s": 50.0},
            {"num_spec_tokens": 2, "tok_s": 70.0, "accept_len": 3.4},
        )
    )
    flag = next(f for f in result.flags if f.code == "accept_len_out_of_range")
    assert "above k + 1 = 3" in flag.message


def test_itl_per_chunk_on_the_real_vllm_table():
    # vllm bench serve on GLM-5.2 with MTP k=5 (tests/data/engines/..._selfllm_glm52_mtp5.txt):
    # Mean TPOT 13.45 ms, Mean ITL 34.88 ms, acceptance length 2.61. Rating it from ITL undercounts.
    data = rows(
        {"num_spec_tokens": 0, "tok_s": 1000 / 21.7},
        {
            "num_spec_tokens": 5,
            "tok_s": 1000 / 34.88,
            "itl_ms": 34.88,
            "tpot_ms": 13.45,
            "accept_len": 2.61,
        },
    )
    assert "itl_per_chunk" in check(data).comparisons[0].flags
    data.loc[1, "tok_s"] = 1000 / 13.45
    assert "itl_per_chunk" not in check(data).comparisons[0].flags


def test_server_client_mismatch():
    data = rows(
        {"num_spec_tokens": 0, "tok_s": 60.0, "run_id": "r", "origin": "client"},
        {"num_spec_tokens": 0, "tok_s": 90.0, "run_id": "r", "origin": "server"},
    )
    result = check(data)
    assert [f.code for f in result.flags] == ["server_client_mismatch"]
    assert not result.server_checks[0].agree


def test_a_client_set_against_the_server_is_a_ratio_of_sums():
    # Two requests of 64 tokens at 50 and 200 tok/s decoded 126 tokens in 1.575 s: 80 tok/s,
    # as the server's counters pool them; the mean of the two rates says 125.
    client = {"num_spec_tokens": 0, "run_id": "r", "origin": "client", "completion_tokens": 64}
    data = rows(
        {**client, "tok_s": 50.0},
        {**client, "tok_s": 200.0},
        {"num_spec_tokens": 0, "tok_s": 80.0, "run_id": "r", "origin": "server"},
    )
    (checked,) = check(data).server_checks
    assert checked.client_tok_s == pytest.approx(80.0) and checked.agree


class TestRepeats:
    def test_rows_typed_as_runs_and_a_clear_win(self):
        base = [{"num_spec_tokens": 0, "tok_s": t} for t in (62.6, 63.0, 62.8, 63.1)]
        spec = [{"num_spec_tokens": 3, "tok_s": t, "label": "k3"} for t in (75.5, 76.2, 75.9, 76.0)]
        (c,) = check(rows(*base, *spec)).comparisons
        assert c.runs == 4 and c.baseline_runs == 4
        assert c.ci_low < c.measured_speedup < c.ci_high
        assert c.ci_low > 1 and c.verdict == "faster"

    def test_within_noise(self):
        base = [{"num_spec_tokens": 0, "tok_s": t} for t in (60, 66, 58, 65)]
        spec = [{"num_spec_tokens": 3, "tok_s": t, "label": "k3"} for t in (61, 67, 59, 63)]
        (c,) = check(rows(*base, *spec)).comparisons
        assert c.ci_low <= 1 <= c.ci_high and c.verdict == "within noise"

    def test_single_runs_say_so(self):
        (c,) = check(
            rows({"num_spec_tokens": 0, "tok_s": 60.0}, {"num_spec_tokens": 3, "tok_s": 70.0})
        ).comparisons
        assert c.verdict == "no interval" and math.isnan(c.ci_low)

    def test_large_groups_use_the_normal_approximation(self):
        base = [{"num_spec_tokens": 0, "tok_s": 60 + (i % 7) * 0.1} for i in range(500)]
        spec = [{"num_spec_tokens": 3, "tok_s": 70 + (i % 5) * 0.1} for i in range(500)]
        (c,) = check(rows(*base, *spec)).comparisons
        assert c.ci_low < c.measured_speedup < c.ci_high and c.ci_high - c.ci_low < 0.01


def test_fingerprint_ignores_speculation_settings():
    a = fingerprint("tp=8 NCCL_PROTO=LL --speculative-num-draft-tokens=3 draft_model=x")
    b = fingerprint("NCCL_PROTO=LL tp=8")
    assert a == b == "NCCL_PROTO=LL tp=8"


def test_bad_tolerance():
    with pytest.raises(BreakevenError, match="tolerance: got 2"):
        check(rows({"num_spec_tokens": 0, "tok_s": 1.0}), tolerance=2)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model,hardware,concurrency,tok_s\nm,h,1,5\n", "line 1: no num_spec_tokens column(s)"),
        (
            "model,hardware,concurrency,num_spec_tokens,tok_s\nm,h,1,0,5\nm,h,1,3,fast\n",
            "line 3: tok_s is 'fast', expected a number [tok/s] or empty",
        ),
        ("# only a comment\n", "holds only comments"),
        ("", "is empty"),
    ],
)
def test_bad_csv_names_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "m.csv"
    path.write_text(content)
    r = run_cli(["check", str(path)])
    assert r.exit_code == 2 and message in r.output and str(path) in r.output
    assert r.output.count("\n") == 1


def test_check_leaves_the_callers_frame_as_it_was():
    from breakeven.iotools.csvfile import read_measurements

    data, _ = read_measurements(CASE_STUDY)
    before = data.copy(deep=True)
    check(data)
    pd.testing.assert_frame_equal(data, before)
    frame = rows({"num_spec_tokens": 0, "tok_s": 50.0}, {"num_spec_tokens": 3, "tok_s": 60.0})
    before = frame.copy(deep=True)
    check(frame)
    pd.testing.assert_frame_equal(frame, before)


def test_windows_of_one_log_are_one_launch_not_repeats():
    # The issue's case: two decode windows of one SGLang log a side came out "faster,
    # 1.203-1.215", as if the windows were independent launches.  They are one launch each.
    base = [
        {"num_spec_tokens": 0, "tok_s": t, "source": f"base.log:{i}"}
        for i, t in enumerate((62.7, 62.9), start=3)
    ]
    spec = [
        {"num_spec_tokens": 3, "tok_s": t, "label": "k3", "source": f"spec.log:{i}"}
        for i, t in enumerate((75.6, 76.1), start=3)
    ]
    (c,) = check(rows(*base, *spec)).comparisons
    assert c.measured_speedup == pytest.approx(75.85 / 62.8)
    assert c.verdict == "no interval" and math.isnan(c.ci_low)


def test_a_bench_level_has_the_servers_final_accept_len_not_a_mean_of_running_values():
    # Issue 23, finding 4.  bench's request rows carry the level's accept_len up to each
    # request, read from /metrics as it went (1.2, 1.8, 2.4 here: the first request's window
    # was short); the level's server row holds the whole level's (2.5, over 40 drafts).  The
    # run's accept_len is the level's, not the mean of the running values (1.8).
    run = {"run_id": "spec-c1", "num_spec_tokens": 3, "completion_tokens": 65}
    base = {"run_id": "base-c1", "num_spec_tokens": 0, "completion_tokens": 65}
    data = rows(
        *({**base, "tok_s": t, "origin": "client"} for t in (50.0, 50.0, 50.0)),
        *(
            {**run, "tok_s": t, "accept_len": a, "origin": "client"}
            for t, a in ((100.0, 1.2), (100.0, 1.8), (100.0, 2.4))
        ),
        {**run, "tok_s": 100.0, "accept_len": 2.5, "num_drafts": 40, "origin": "server"},
    )
    (comparison,) = check(data).comparisons
    assert comparison.accept_len == pytest.approx(2.5)
    # Rows that give their own drafts (vLLM's per-request metrics) are pooled from counts.
    own = rows(
        *({**base, "tok_s": 50.0, "origin": "client"} for _ in range(2)),
        {**run, "tok_s": 100.0, "accept_len": 2.0, "num_drafts": 30, "origin": "client"},
        {**run, "tok_s": 100.0, "accept_len": 3.0, "num_drafts": 10, "origin": "client"},
        {**run, "tok_s": 100.0, "accept_len": 2.25, "num_drafts": 40, "origin": "server"},
    )
    (comparison,) = check(own).comparisons
    assert comparison.accept_len == pytest.approx(1 + (30 * 1 + 10 * 2) / 40)


def test_two_servers_launched_alike_on_two_ports_are_a_fair_ab():
    # Issue 23, finding 6: the URL, port and client host are the client's choices.  A baseline
    # server and a speculative server started the same way, benchmarked from one machine at
    # two ports, compare without stale_baseline; a server variable that differs still flags.
    common = "NCCL_ALGO=Ring model=m server_version=0.32.0 client_host=box"
    data = rows(
        {
            "num_spec_tokens": 0,
            "tok_s": 50.0,
            "env": f"url=http://127.0.0.1:8000 {common}",
            "env_from": "server",
        },
        {
            "num_spec_tokens": 3,
            "tok_s": 60.0,
            "accept_len": 2.0,
            "env": f"url=http://127.0.0.1:8001 {common}",
            "env_from": "server",
        },
    )
    result = check(data)
    assert not result.flags
    assert result.comparisons[0].measured_speedup == pytest.approx(1.2)
    assert fingerprint(f"url=http://u:secret@h:1 host=a {common}") == fingerprint(common)
    other = data.assign(env=[f"NCCL_PROTO=LL {common}", f"url=http://127.0.0.1:8001 {common}"])
    assert "stale_baseline" in {f.code for f in check(other).flags}


def test_a_run_rate_is_the_tokens_over_the_time_across_check_and_compare(tmp_path):
    # A rate is a ratio of sums: two requests of 101 tokens at 50 and 200 tok/s decoded 200
    # tokens in 2.5 s, 80 tok/s (the mean of their rates says 125).  check's run rate, its
    # speedup and the baseline's rate all pool so.
    def request(label, k, rate, run_id):
        return {
            "label": label,
            "num_spec_tokens": k,
            "tok_s": rate,
            "completion_tokens": 101,
            "run_id": run_id,
            "origin": "client",
        }

    data = rows(
        request("base", 0, 40.0, "b"),
        request("base", 0, 40.0, "b"),
        request("spec", 3, 50.0, "s"),
        request("spec", 3, 200.0, "s"),
    )
    (comparison,) = check(data).comparisons
    assert comparison.tok_s == pytest.approx(80.0)
    assert comparison.baseline_tok_s == pytest.approx(40.0)
    assert comparison.measured_speedup == pytest.approx(2.0)
    path = tmp_path / "runs.csv"
    data.to_csv(path, index=False)
    r = run_cli(["compare", f"base={path}", f"spec={path}", "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.output)["runs"]
    assert row["tok_s"] == pytest.approx(80.0) and row["measured_speedup"] == pytest.approx(2.0)


def test_checks_first_line_is_its_answer():
    """The answer first (issue 26): how many runs pay, lose or are within noise, and the
    flags, in one line under 100 characters, before the table; the report page opens with it."""
    from breakeven.measurements.check import check_file
    from breakeven.render.report import check_page

    result = check_file(str(Path(__file__).parents[1] / "data" / "case_study.csv"))
    first = result.report().splitlines()[0]
    assert first == "2 speculative runs: 1 no interval, 1 not measured; flags: baseline_drift (1)."
    assert len(first) <= 100
    page = check_page(result, "case_study.csv")
    assert page.index(first) < page.index("<h2>Flags</h2>") < page.index("How to read this")


def test_to_dict_gives_each_comparison_and_baseline_as_asdict_does():
    """``plain_json`` takes a result's dataclasses field by field, without ``asdict``'s deep
    copy (issue 43: 0.2 s of ``check --json`` on 10^6 rows); what it gives is what it gave."""
    from dataclasses import asdict

    from breakeven.core.quantities import plain_json

    result = check_file(str(CASE_STUDY))
    data = result.to_dict()
    assert data["comparisons"] == [
        plain_json(asdict(c), keep_infinite=True) for c in result.comparisons
    ]
    assert data["baselines"] == [
        plain_json(asdict(b), keep_infinite=True) for b in result.baselines
    ]
    assert json.dumps(data["comparisons"]) == json.dumps(
        [plain_json(asdict(c), keep_infinite=True) for c in result.comparisons]
    )
