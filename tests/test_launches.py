"""The baseline that wasn't, as a user's data shows it (issue 24): a baseline is fair when it
comes from the speculative run's launch, or from a launch whose settings differ only in
speculation; anything else is said, with what differs or how long before it ran.

The four cases a new user met, each a test: two numbers typed 24 days apart, two logs 24 days
apart, staleness read from the server's environment (not the client's), and two servers
launched alike on two ports (no flag).  Then bench -> check across real server processes
(tests/fake_server.py in processes of their own, whose environment is their own)."""

from __future__ import annotations

import csv
import json
import sys
import urllib.request
from pathlib import Path

import pytest
from cli_checks import run_cli
from local_process import free_port, serving

from breakeven.bench.config import Config
from breakeven.bench.session import run_bench
from breakeven.measurements.check import check, check_file

CASE = Path(__file__).parent / "data" / "case_study"
NCCL = {
    "NCCL_PROTO": "LL",
    "NCCL_ALGO": "Ring",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16",
    "NCCL_BUFFSIZE": "16777216",
    "NCCL_NTHREADS": "512",
}
NCCL_TEXT = " ".join(f"{k}={v}" for k, v in sorted(NCCL.items()))
HEADER = "label,timestamp,model,hardware,concurrency,num_spec_tokens,tok_s,accept_len,env,env_from,launch_id"


def codes(result):
    return {f.code for f in result.flags}


def flag(result, code):
    (found,) = [f for f in result.flags if f.code == code]
    return found.message


def test_two_numbers_typed_24_days_apart_are_unverified_with_their_age(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text(
        HEADER + "\n"
        "baseline,2026-02-02,Kimi,8x PCIe,1,0,90,,,,\n"
        "eagle3-k3,2026-02-26,Kimi,8x PCIe,1,3,75.9,2.1,,,\n"
    )
    result = check_file(str(path))
    assert codes(result) == {"baseline_unverified"}
    message = flag(result, "baseline_unverified")
    assert "24 days earlier (2026-02-02; the run 2026-02-26)" in message
    assert "nothing shows whether that launch was configured the same way" in message
    (c,) = result.comparisons
    assert c.measured_speedup == pytest.approx(75.9 / 90)
    # The same two numbers typed on compare's command line: one line, the same answer.
    r = run_cli(
        [
            "compare",
            *("--baseline-tok-s", "90", "--baseline-at", "2026-02-02"),
            *("--spec-tok-s", "75.9", "--spec-at", "2026-02-26", "--accept-len", "2.1", "-k", "3"),
        ],
    )
    assert r.exit_code == 0, r.output
    first, why = r.output.splitlines()[:2]
    assert first == "spec: 0.84x the baseline's rate, no interval; flagged: baseline_unverified."
    assert why.startswith("  The baseline came from another launch 24 days earlier")


def test_two_launches_dated_the_same_day_have_no_order_and_no_age(tmp_path):
    """Two dates without a time, the same day: not "0 s earlier" (issue 43)."""
    path = tmp_path / "same.csv"
    path.write_text(
        HEADER + "\n"
        "baseline,2026-02-26,Kimi,8x PCIe,1,0,90,,,,\n"
        "eagle3-k3,2026-02-26,Kimi,8x PCIe,1,3,75.9,2.1,,,\n"
    )
    message = flag(check_file(str(path)), "baseline_unverified")
    assert "0 s" not in message and "earlier" not in message
    assert (
        "another launch dated as the run (2026-02-26; the run 2026-02-26: no order between "
        "them at that precision)" in message
    )


def test_typed_rows_with_nothing_recorded_of_their_launch_say_nothing():
    """No date, no launch, no env: nothing to say (as before), rather than a flag on every
    hand-typed comparison."""
    import pandas as pd

    data = pd.DataFrame(
        [
            {"label": "b", "num_spec_tokens": 0, "tok_s": 50.0},
            {"label": "s", "num_spec_tokens": 3, "tok_s": 60.0, "accept_len": 2.0},
        ]
    )
    assert not check(data).flags


def _dated_sglang_log(path: Path, date: str, rate: float) -> None:
    """A baseline log as the seed's team would have had from 2026-02-02: the real SGLang
    "Decode batch" lines of tests/data/case_study/sglang_baseline.log, CONSTRUCTED here with
    their date and throughput changed (the seeds quote that launch's rate, 90 tok/s, and no
    line of it)."""
    lines = [
        line.replace("2026-02-26", date).split("gen throughput (token/s): ")[0]
        + f"gen throughput (token/s): {rate:.2f}, #queue-req: 0"
        for line in (CASE / "sglang_baseline.log").read_text().splitlines()
        if "Decode batch" in line
    ]
    path.write_text("\n".join(lines) + "\n")


def test_two_logs_24_days_apart_are_flagged_with_their_dates(tmp_path):
    old = tmp_path / "old_baseline.log"
    _dated_sglang_log(old, "2026-02-02", 90.0)
    r = run_cli(
        [
            "compare",
            f"baseline-feb02={old}",
            f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}",
            "-k",
            "3",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    (run,) = body["runs"]
    assert run["measured_speedup"] == pytest.approx(75.9 / 90, rel=0.01)
    assert run["flags"] == ["baseline_unverified"]
    assert "24 days earlier (2026-02-02 16:41; the run 2026-02-26 17:02)" in run["launch_note"]
    (message,) = [f["message"] for f in body["flags"] if f["code"] == "baseline_unverified"]
    assert "Neither launch's settings are recorded" in message


def _bench_rows(env_from, launch, env, label, k, tok_s, when, accept_len=""):
    return f"{label},{when},Kimi,8x PCIe,1,{k},{tok_s},{accept_len},{env},{env_from},{launch}"


def test_the_servers_lost_variables_are_named_with_both_launches_times(tmp_path):
    """Rows as bench writes them from the servers' own processes: the baseline's launch had the
    NCCL tuning, the speculative run's launch (after a restart) has none of it."""
    path = tmp_path / "runs.csv"
    path.write_text(
        "\n".join(
            [
                HEADER,
                _bench_rows(
                    "server",
                    "h:8000@2026-02-02T09:14:00Z",
                    f"--tp=8 {NCCL_TEXT}",
                    "base",
                    0,
                    90,
                    "2026-02-02T09:20:00Z",
                ),
                _bench_rows(
                    "server",
                    "h:8000@2026-02-26T16:41:00Z",
                    "--tp=8 --speculative-algorithm=EAGLE3",
                    "eagle3-k3",
                    3,
                    75.9,
                    "2026-02-26T16:50:00Z",
                    2.1,
                ),
            ]
        )
        + "\n"
    )
    result = check_file(str(path))
    assert codes(result) == {"stale_baseline"}
    message = flag(result, "stale_baseline")
    assert (
        f"the baseline's launch (2026-02-02 09:20) had {NCCL_TEXT}; the speculative run's "
        "launch (2026-02-26 16:50) has none of them" in message
    )
    assert "restore the settings" in message
    assert "the server's own process" in message


def test_a_client_that_had_the_variables_is_not_a_server_that_had_them(tmp_path):
    """Old bench rows held the client's NCCL_* variables: they say nothing of the server's."""
    path = tmp_path / "runs.csv"
    client = "url=http://h:8000 client_host=box model=Kimi"
    path.write_text(
        "\n".join(
            [
                HEADER,
                _bench_rows("", "", f"NCCL_PROTO=LL {client}", "base", 0, 90, "2026-02-02"),
                _bench_rows("", "", client, "eagle3-k3", 3, 75.9, "2026-02-26", 2.1),
            ]
        )
        + "\n"
    )
    result = check_file(str(path))
    assert codes(result) == {"baseline_unverified"}
    assert "24 days earlier" in flag(result, "baseline_unverified")


def test_two_servers_launched_alike_on_two_ports_are_fair_and_a_lost_variable_is_not(tmp_path):
    env = f"--tp=8 --port=8000 {NCCL_TEXT} url=http://h:8000 client_host=box"
    spec_env = env.replace("8000", "8001") + " --speculative-algorithm=EAGLE3"
    rows = [
        HEADER,
        _bench_rows("server", "h:8000@t0", env, "base", 0, 60, "2026-02-26T16:40"),
        _bench_rows("server", "h:8001@t1", spec_env, "spec", 3, 75, "2026-02-26T16:41", 2.1),
    ]
    path = tmp_path / "ab.csv"
    path.write_text("\n".join(rows) + "\n")
    assert not check_file(str(path)).flags
    lost = tmp_path / "lost.csv"
    lost.write_text("\n".join([*rows[:2], rows[2].replace("NCCL_PROTO=LL ", "")]) + "\n")
    result = check_file(str(lost))
    assert codes(result) == {"stale_baseline"}
    assert "had NCCL_PROTO=LL; the speculative run's launch" in flag(result, "stale_baseline")


def test_the_runs_own_launch_is_preferred(tmp_path):
    """Baselines of the speculative run's own launch win over a fair one of another launch."""
    env = "--tp=8 NCCL_PROTO=LL"
    rows = [HEADER]
    for i, rate in enumerate([50, 51, 49, 50]):
        rows.append(_bench_rows("server", "A", env, "base-a", 0, rate, f"2026-02-26T16:0{i}"))
    for i, rate in enumerate([40, 41, 39, 40]):
        rows.append(_bench_rows("server", "B", env, "base-b", 0, rate, f"2026-02-26T17:0{i}"))
    rows.append(_bench_rows("server", "B", env, "spec", 3, 60, "2026-02-26T17:10", 2.0))
    path = tmp_path / "runs.csv"
    path.write_text("\n".join(rows) + "\n")
    result = check_file(str(path))
    (c,) = result.comparisons
    assert c.baseline_tok_s == pytest.approx(40)
    assert "stale_baseline" not in codes(result) and "baseline_unverified" not in codes(result)


# --- bench -> check across launches of real server processes ------------------------------


def _ready(port):
    def ready():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
            return reply.status == 200

    return ready


def _launch(tmp_path, port, env, *flags):
    args = [sys.executable, str(Path(__file__).parent / "fake_server.py"), "--port", str(port)]
    return serving([*args, *flags], tmp_path / f"server-{port}.log", _ready(port), "fake", env)


def test_bench_then_check_across_restarts_names_the_servers_lost_variables(tmp_path):
    """The seed's story end to end: a baseline on a server launched with NCCL tuning in its
    own environment; a restart without it; a baseline and a speculative run there.  The
    client never has the variables."""
    out = tmp_path / "runs.csv"
    port = free_port()
    with _launch(tmp_path, port, NCCL, "--tp", "8"):
        run_bench(Config(url=f"http://127.0.0.1:{port}", label="tuned", requests=2), out)
    stale_only = tmp_path / "stale.csv"
    with _launch(tmp_path, port, {}, "--tp", "8", "--num-spec-tokens", "3"):
        run_bench(
            Config(url=f"http://127.0.0.1:{port}", label="eagle3", requests=2, num_spec_tokens=3),
            out,
        )
    stale_only.write_text(out.read_text())
    result = check_file(str(stale_only))
    assert codes(result) == {"stale_baseline"}
    message = flag(result, "stale_baseline")
    assert f"had {NCCL_TEXT}; the speculative run's launch" in message
    assert "has none of them" in message
    # Re-measured in the restarted configuration: the fair baseline is chosen, no stale flag.
    port2 = free_port()
    with _launch(tmp_path, port2, {}, "--tp", "8"):
        run_bench(Config(url=f"http://127.0.0.1:{port2}", label="restarted", requests=2), out)
    result = check_file(str(out))
    assert "stale_baseline" not in codes(result) and "baseline_unverified" not in codes(result)
    # The two baselines' launches differ in their settings: that is drift, said once.
    assert "baseline_drift" in codes(result)
    assert NCCL_TEXT.split()[0] in flag(result, "baseline_drift")
    with out.open() as f:
        rows = list(csv.DictReader(f))
    launches = {r["label"]: r["launch_id"] for r in rows}
    assert len(set(launches.values())) == 3
    assert {r["env_from"] for r in rows} == {"server"}
    (c,) = result.comparisons
    restarted = [float(r["tok_s"]) for r in rows if r["label"] == "restarted" and r["tok_s"]]
    assert c.baseline_runs == len(restarted)


def test_the_intervals_unit_is_the_launch_not_the_benchmark_call():
    """Two bench runs within one server launch are repeats inside that launch: the interval
    says it covers one launch a side; the same rows without their launch are two runs a side."""
    import pandas as pd

    rows = []
    for side, k, rate, launch in (("base", 0, 50.0, "A"), ("spec", 3, 60.0, "B")):
        for run in (1, 2):
            for i in range(20):
                rows.append(
                    {
                        "label": side,
                        "run_id": f"{side}-{run}",
                        "launch_id": launch,
                        "env": "NCCL_PROTO=LL",
                        "env_from": "server",
                        "num_spec_tokens": k,
                        "tok_s": rate * (1 + 0.01 * ((i * 7 + run) % 5 - 2)),
                        "accept_len": 2.0 if k else None,
                    }
                )
    data = pd.DataFrame(rows)
    (interval,) = check(data).intervals
    assert interval.covers.startswith("within one run each")
    (interval,) = check(data.drop(columns=["launch_id"])).intervals
    assert interval.covers.startswith("across 2 and 2 runs")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--baseline-tok-s", "-5", "--spec-tok-s", "75.9"], "--baseline-tok-s: got -5.0"),
        (["--baseline-tok-s", "nan", "--spec-tok-s", "75.9"], "--baseline-tok-s: got nan"),
        (["--baseline-tok-s", "90", "--spec-tok-s", "0"], "--spec-tok-s: got 0.0"),
        (["--baseline-tok-s", "90", "--spec-tok-s", "75.9", "--accept-len", "0.5"], "--accept-len"),
        (
            ["--baseline-tok-s", "90", "--baseline-at", "yesterday", "--spec-tok-s", "75"],
            "ISO 8601",
        ),
        (["--baseline-at", "2026-02-02", "x.log", "y.log"], "--baseline-at: dates a typed-in"),
        (["--spec-tok-s", "75.9"], "BASELINE: give a baseline file"),
        (["--baseline-tok-s", "90"], "SPEC: give a speculative run's file"),
        (["--baseline-tok-s", "90", "--accept-len", "2"], "--accept-len: goes with"),
    ],
)
def test_a_typed_in_run_that_is_wrong_is_one_line_naming_its_flag(args, expected):
    r = run_cli(["compare", *args])
    assert r.exit_code == 2, r.output
    assert expected in r.output and len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output
