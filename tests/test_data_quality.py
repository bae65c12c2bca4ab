"""Issue 38: an answer never more confident than its data.  A pair given the wrong way round,
launches of one configuration that disagree far beyond their own spread, a speedup no cycle can
give and an aggregate rate written as per-sequence each lead the answer with what is wrong, and
the speedup of several launches is one number in check, compare and sweep."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import invoke, one_line_exit_2
from hypothesis import given, settings
from hypothesis import strategies as st
from local_process import free_port

from breakeven.core.quantities import DEFAULT_TOLERANCE, LAUNCH_SPREAD_LIMIT
from breakeven.measurements.check import check
from breakeven.measurements.flags import DOUBT
from breakeven.measurements.intervals import launch_spread

CASE = Path(__file__).parent / "data" / "case_study"
BASELINE_LOG = CASE / "sglang_baseline.log"  # SGLang's own log lines (tests/data/README.md)
EAGLE3_LOG = CASE / "sglang_eagle3_k3.log"
FAKE = Path(__file__).parent / "fake_server.py"
COMMON = {"model": "m", "hardware": "h", "concurrency": 1, "engine": "vllm"}


def _requests(label, k, launch, rate, n=20, seed=0, **extra):
    """``n`` request rows of one launch (bench's shape: a rate and its tokens each), spread
    2% about ``rate``."""
    rng = np.random.default_rng(seed)
    return [
        {
            **COMMON,
            "label": label,
            "num_spec_tokens": k,
            "launch_id": launch,
            "run_id": launch,
            "origin": "client",
            "tok_s": float(r),
            "completion_tokens": 64,
            **extra,
        }
        for r in rate * (1 + 0.02 * rng.standard_normal(n))
    ]


def _launches(base_rates, spec_rates, k=4):
    rows = []
    for i, (b, s) in enumerate(zip(base_rates, spec_rates, strict=True)):
        rows += _requests("baseline", 0, f"b{i}", b, seed=2 * i)
        rows += _requests(f"k{k}", k, f"s{i}", s, seed=2 * i + 1, accept_len=2.5, num_drafts=40)
    return pd.DataFrame(rows)


# --- which side is which -------------------------------------------------------------------


def test_logs_given_the_wrong_way_round_are_said_to_look_swapped_first():
    """The case study's two SGLang logs, swapped: the "baseline" prints accept len 2.10 and
    the "speculative" run none.  Before: a silent, reversed 0.83x."""
    r = invoke("compare", f"baseline={EAGLE3_LOG}", f"eagle3-k3={BASELINE_LOG}", "-k", "3")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("eagle3-k3 and baseline look swapped"), r.output
    said = " ".join(r.output.split())
    assert "[swapped_pair]" in said and "then about 1.21x, not 0.83x" in said
    data = json.loads(
        invoke(
            "compare", f"baseline={EAGLE3_LOG}", f"eagle3-k3={BASELINE_LOG}", "-k", "3", "--json"
        ).stdout
    )
    (run,) = data["runs"]
    assert run["verdict"] == "looks swapped" and "swapped_pair" in run["flags"]
    # The right way round: no such flag, and the 1.21x win.
    right = invoke("compare", f"baseline={BASELINE_LOG}", f"eagle3-k3={EAGLE3_LOG}", "-k", "3")
    assert "swapped" not in right.output and "1.21x" in right.output.splitlines()[0]


def test_a_measurements_frame_with_acceptance_on_the_baseline_side_looks_swapped():
    rows = [
        {**COMMON, "label": "baseline", "num_spec_tokens": 0, "tok_s": 75.9, "accept_len": 2.1},
        {**COMMON, "label": "eagle3-k3", "num_spec_tokens": 3, "tok_s": 62.9},
    ]
    result = check(pd.DataFrame(rows))
    (c,) = result.comparisons
    assert c.verdict == "looks swapped" and "swapped_pair" in c.flags
    assert result.report().startswith("The baseline and the speculative run look swapped")
    # Both sides showing speculation (two speculative servers) is no swap.
    rows[1]["accept_len"] = 2.4
    assert check(pd.DataFrame(rows)).comparisons[0].verdict != "looks swapped"


# --- launches that disagree ----------------------------------------------------------------


def test_a_baseline_that_varies_several_fold_across_launches_decides_nothing():
    result = check(_launches([100, 98, 14], [180, 176, 181]))
    (c,) = result.comparisons
    assert c.verdict == "too noisy" and "launches_disagree" in c.flags
    assert c.launch_spread == pytest.approx(100 / 14, rel=0.05)
    text = result.report()
    assert text.startswith("Too noisy to decide: launches of one configuration disagree up to")
    (flag,) = [f for f in result.flags if f.code == "launches_disagree"]
    assert "Launches of the baseline at concurrency 1 disagree" in flag.message
    assert "quiet host" in flag.message and "--repeats" in flag.message
    data = result.to_dict()["comparisons"][0]
    assert data["verdict"] == "too noisy" and data["launch_spread"] > LAUNCH_SPREAD_LIMIT


def test_launches_that_differ_as_real_engines_do_are_no_noise_verdict():
    """1.15x between launches, as llama-server's on a loaded CPU: an interval, not a flag."""
    (c,) = check(_launches([100, 115, 108], [180, 170, 190])).comparisons
    assert "launches_disagree" not in c.flags and c.verdict == "faster"


def test_a_gap_that_the_launches_own_spread_explains_is_not_the_hosts():
    """Two launches of 3 requests each, whose requests spread 60%: a 1.6x gap is theirs."""
    values = [50, 100, 150, 80, 160, 240]
    spread = launch_spread(values, ["a"] * 3 + ["b"] * 3)
    assert spread.ratio == pytest.approx(1.6) and spread.explained
    tight = launch_spread([99, 100, 101, 159, 160, 161], ["a"] * 3 + ["b"] * 3)
    assert tight.ratio == pytest.approx(1.6) and not tight.explained
    assert tight.disagree(LAUNCH_SPREAD_LIMIT) and not spread.disagree(LAUNCH_SPREAD_LIMIT)


def _noisy_sweep(tmp_path, slowdowns):
    count = tmp_path / "launches"
    serve = (
        f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.002 "
        f"--launch-slowdowns {slowdowns} --launch-count-file {count}"
    )
    out = tmp_path / "sweep"
    args = ["sweep", "--serve", serve, "--engine", "vllm", "--spec-method", "ngram", "-k", "0,4"]
    args += ["--repeats", "3", "--port", free_port(), "--max-tokens", "16", "--requests", "4"]
    r = invoke(*args, "--out", out, "--ready-timeout", "30")
    return out, r


def test_a_sweep_on_a_noisy_host_gives_the_data_quality_verdict_and_pastes_nothing(tmp_path):
    """The fake server's third launch (the second baseline) runs 10x slower, as a busy host's
    launches do: the sweep's answer is that the data cannot decide, with no config, fit or
    schedule, and ``schedule --fit-file`` has no fit of these runs to paste from."""
    out, r = _noisy_sweep(tmp_path, "1,1,10,1,1,1")
    assert r.exit_code == 0, r.output
    answer = r.output[r.output.index("runs.csv.\n") :].split("\n", 1)[1]
    assert answer.startswith("Too noisy to decide: launches of one configuration disagree up to")
    assert "Config to paste: none: the data cannot decide" in answer
    assert "--speculative-config" not in answer
    assert "Best k" not in answer  # no fit's answer below the verdict
    assert not (out / "fit.json").exists() and not (out / "schedule.json").exists()
    r = invoke("schedule", "--fit-file", out / "fit.json", "--engine", "vllm")
    assert r.exit_code == 2 and "fit.json" in r.output
    # One speedup: the sweep's, compare DIR's and check DIR/runs.csv's are one number.
    checked = json.loads(invoke("check", out / "runs.csv", "--json").stdout)["comparisons"]
    compared = json.loads(invoke("compare", out, "--json").stdout)["runs"]
    assert [c["measured_speedup"] for c in checked] == [c["measured_speedup"] for c in compared]
    assert [c["verdict"] for c in compared] == ["too noisy"]
    from breakeven.sweep.answer import answer_sweep

    swept = answer_sweep(str(out), write=False)
    assert [c.measured_speedup for c in swept.check.comparisons] == [
        c["measured_speedup"] for c in checked
    ]
    assert [b.decided for b in swept.best] == [False]
    page = (out / "report.html").read_text()
    assert "Too noisy to decide" in page


# --- rates no cycle can give ---------------------------------------------------------------


def test_a_speedup_above_k_plus_one_is_implausible_and_said_first():
    rows = [
        {**COMMON, "label": "baseline", "num_spec_tokens": 0, "tok_s": 62.9},
        {**COMMON, "label": "k6", "num_spec_tokens": 6, "tok_s": 500.0, "accept_len": 2.1},
    ]
    result = check(pd.DataFrame(rows))
    (c,) = result.comparisons
    assert c.verdict == "implausible" and "speedup_above_bound" in c.flags
    assert result.report().startswith("A measured speedup is above k + 1")


def test_typed_rates_whose_ratio_is_above_k_plus_one_are_refused():
    """The aggregate typed as per-sequence: 7.95x at k = 6 (before: "7.95x ... Flags: none")."""
    r = invoke(
        "compare", "--baseline-tok-s", "62.9", "--spec-tok-s", "500", "--accept-len", "2.1", "-k", 6
    )
    one_line_exit_2(r, "--spec-tok-s", "500 tok/s is 7.95x", "--baseline-tok-s", "k + 1 = 7")
    ok = invoke("compare", "--baseline-tok-s", "62.9", "--spec-tok-s", "75.9", "-k", 3)
    assert ok.exit_code == 0 and "1.21x" in ok.output


def test_an_aggregate_rate_written_as_per_sequence_is_flagged(tmp_path):
    csv = tmp_path / "runs.csv"
    pd.DataFrame(
        [
            {**COMMON, "concurrency": 8, "label": "baseline", "num_spec_tokens": 0}
            | {"tok_s": 62.9, "aggregate_tok_s": 480.0},
            {**COMMON, "concurrency": 8, "label": "k4", "num_spec_tokens": 4}
            | {"tok_s": 500.0, "aggregate_tok_s": 500.0, "accept_len": 2.5},
        ]
    ).to_csv(csv, index=False)
    r = invoke("check", csv)
    assert r.exit_code == 0
    assert "[aggregate_rate] Line 3: tok_s 500.00 equals the aggregate rate 500.00" in r.output
    assert "baseline" not in r.output.split("[aggregate_rate]")[1].split("\n")[0]


@settings(max_examples=150, deadline=None)
@given(
    base=st.floats(1, 1e4),
    ratio=st.floats(0.05, 50),
    k=st.integers(1, 16),
    conc=st.sampled_from([1, 4, 64]),
)
def test_no_speedup_above_k_plus_one_goes_unflagged(base, ratio, k, conc):
    rows = [
        {**COMMON, "concurrency": conc, "label": "b", "num_spec_tokens": 0, "tok_s": base},
        {**COMMON, "concurrency": conc, "label": "s", "num_spec_tokens": k, "tok_s": base * ratio},
    ]
    result = check(pd.DataFrame(rows))
    (c,) = result.comparisons
    if c.measured_speedup > (k + 1) * (1 + DEFAULT_TOLERANCE):
        assert c.verdict == "implausible" and "speedup_above_bound" in c.flags
        assert result.report().startswith("A measured speedup is above k + 1")
    else:
        assert c.verdict not in DOUBT.values()
    assert not math.isnan(c.measured_speedup)


# --- the engine's own count first ----------------------------------------------------------


def test_the_servers_counters_are_the_headlines_rates_and_the_client_the_cross_check(tmp_path):
    """bench against two servers whose /metrics time their own decode; the speculative one's
    clock reads 30% short of the client's (timing_scale 0.7), as a client that falls behind its
    streams reads the other way.  compare's speedup is the ratio of the servers' own rates,
    and the client's disagreement is the flag, not the headline."""
    import csv as csv_module

    from fake_server import Behaviour, FakeServer

    from breakeven.bench.config import Config
    from breakeven.bench.session import run_bench

    plain = Behaviour(seconds_per_token=0.004, timing_counters=True)
    spec = Behaviour(
        seconds_per_token=0.004,
        timing_counters=True,
        timing_scale=0.7,
        num_spec_tokens=2,
        tokens_per_chunk=2,
        cycle_s=0.005,
    )
    written = []
    for label, k, behaviour in (("baseline", 0, plain), ("k2", 2, spec)):
        with FakeServer(behaviour) as server:
            config = Config(
                url=server.url, label=label, max_tokens=24, requests=4, num_spec_tokens=k
            )
            run_bench(config, str(tmp_path / f"{label}.csv"))
        with open(tmp_path / f"{label}.csv", newline="") as f:
            written += list(csv_module.DictReader(f))
    server_rate = {r["label"]: float(r["tok_s"]) for r in written if r["origin"] == "server"}
    base, k2 = tmp_path / "baseline.csv", tmp_path / "k2.csv"
    r = invoke("compare", f"baseline={base}", f"k2={k2}", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (run,) = data["runs"]
    assert run["measured_speedup"] == pytest.approx(
        server_rate["k2"] / server_rate["baseline"], rel=1e-6
    )
    assert run["tok_s"] == pytest.approx(server_rate["k2"], rel=1e-6)
    mismatch = [f["message"] for f in data["flags"] if f["code"] == "server_client_mismatch"]
    assert mismatch and "The server's counters are the run's rate here" in mismatch[0]


def test_a_run_faster_than_its_accept_len_allows_is_flagged():
    rows = [
        {**COMMON, "label": "baseline", "num_spec_tokens": 0, "tok_s": 100.0},
        {**COMMON, "label": "k4", "num_spec_tokens": 4, "tok_s": 200.0, "accept_len": 1.8},
    ]
    result = check(pd.DataFrame(rows))
    (c,) = result.comparisons
    assert "cycle_below_step" in c.flags and c.implied_cycle_ms == pytest.approx(9.0)
    (flag,) = [f for f in result.flags if f.code == "cycle_below_step"]
    assert "implies a 9.000 ms cycle" in flag.message and "10.000 ms plain step" in flag.message
    rows[1]["accept_len"] = 2.5  # 2x at accept_len 2.5: a 12.5 ms cycle, plausible
    assert "cycle_below_step" not in check(pd.DataFrame(rows)).comparisons[0].flags
