"""Natural stops and sampling settings (issue 44, part 4): bench's --ignore-eos/--no-ignore-eos,
--temperature and --top-p, sent with every request and recorded in every row and in the
launch it says; compare's sampling_differs on a pair measured with other settings, and no flag
where a file does not say them."""

import csv
import json

import pytest
from cli_checks import one_line_exit_2, run_cli
from fake_server import Behaviour, FakeServer
from hypothesis import given
from hypothesis import strategies as st

from breakeven import BreakevenError
from breakeven.bench.config import MAX_TEMPERATURE, Config
from breakeven.core.provenance import fingerprint
from breakeven.measurements.sampling import env_sampling, sampling_difference


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def bench(url, out, *args):
    return run_cli(
        ["bench", "--url", url, "--label", "b", "--requests", 2, "-k", 0, "--out", out, *args]
    )


def test_bench_sends_and_records_greedy_sampling_to_max_tokens_by_default(tmp_path):
    out = tmp_path / "runs.csv"
    with FakeServer(
        Behaviour(seconds_per_token=0.001, natural_stop=3, timing_counters=True)
    ) as server:
        r = bench(server.url, out, "--max-tokens", 8, "--json")
        bodies = list(server.behaviour.bodies)
    assert r.exit_code == 0, r.output
    for body in bodies:  # every request says its sampling: the server's defaults play no part
        assert body["ignore_eos"] is True and body["max_tokens"] == 8
        assert body["temperature"] == 0 and body["top_p"] == 1
    written = rows(out)
    assert {row["origin"] for row in written} == {"client", "server"}
    for row in written:  # the level's server row too
        assert float(row["temperature"]) == 0 and float(row["top_p"]) == 1
        assert row["max_tokens"] == "8" and row["ignore_eos"] == "true"
        for pair in (
            "sampling_temperature=0",
            "sampling_top_p=1",
            "sampling_max_tokens=8",
            "sampling_ignore_eos=true",
        ):
            assert pair in row["env"].split()
    # Forced past the model's end of text (3 tokens): every request generated max_tokens.
    assert {row["completion_tokens"] for row in written if row["origin"] == "client"} == {"8"}
    (level,) = json.loads(r.stdout)
    assert level["launch"]["sampling"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 8,
        "ignore_eos": "true",
    }
    assert "Requests sent with temperature 0, top_p 1, max_tokens 8, ignore_eos true." in r.stderr


def test_no_ignore_eos_stops_naturally_and_rates_count_the_tokens_generated(tmp_path):
    out = tmp_path / "runs.csv"
    behaviour = Behaviour(seconds_per_token=0.004, natural_stop=6)
    with FakeServer(behaviour) as server:
        r = bench(
            server.url,
            out,
            "--max-tokens",
            64,
            "--no-ignore-eos",
            "--temperature",
            0.7,
            "--top-p",
            0.9,
        )
        bodies = list(server.behaviour.bodies)
    assert r.exit_code == 0, r.output
    for body in bodies:
        assert "ignore_eos" not in body and body["max_tokens"] == 64
        assert body["temperature"] == 0.7 and body["top_p"] == 0.9
    client = [row for row in rows(out) if row["origin"] == "client"]
    assert len(client) == 2
    for row in client:
        assert row["ignore_eos"] == "false" and row["max_tokens"] == "64"
        assert float(row["temperature"]) == 0.7 and float(row["top_p"]) == 0.9
        # The server's usage count, not max_tokens: 6 tokens came, and the rate is theirs.
        assert row["completion_tokens"] == "6"
        decode_s = (float(row["e2e_ms"]) - float(row["ttft_ms"])) / 1000
        assert float(row["tok_s"]) == pytest.approx((6 - 1) / decode_s, rel=0.05)
        assert "sampling_ignore_eos=false" in row["env"].split()
    assert "ignore_eos false" in r.stderr


@pytest.mark.parametrize(
    "flag, value, expected",
    [
        ("--temperature", "-1", "expected a number from 0 (greedy)"),
        ("--temperature", "nan", "expected a number from 0 (greedy)"),
        ("--temperature", "inf", "expected a number from 0 (greedy)"),
        ("--top-p", "0", "expected a fraction above 0 and at most 1"),
        ("--top-p", "1.5", "expected a fraction above 0 and at most 1"),
    ],
)
def test_a_bad_sampling_setting_is_one_line_naming_its_flag(flag, value, expected):
    r = run_cli(["bench", "--url", "http://127.0.0.1:9", "--label", "b", flag, value])
    one_line_exit_2(r, flag, expected)


@given(
    temperature=st.floats(allow_nan=True, allow_infinity=True),
    top_p=st.floats(allow_nan=True, allow_infinity=True),
)
def test_sampling_settings_are_taken_exactly_in_their_ranges(temperature, top_p):
    config = Config(url="http://h:8000", label="b", temperature=temperature, top_p=top_p)
    good = 0 <= temperature <= MAX_TEMPERATURE and 0 < top_p <= 1
    if good:
        config.check()
        assert config.sampling()["temperature"] == temperature
    else:
        with pytest.raises(BreakevenError):
            config.check()


def test_sampling_pairs_are_the_clients_and_stay_out_of_the_launch_fingerprint():
    env = "tp=8 sampling_temperature=0.7 sampling_top_p=1 sampling_max_tokens=64"
    assert fingerprint(env) == "tp=8"
    assert env_sampling(env + " sampling_ignore_eos=TRUE") == (
        "temperature=0.7 top_p=1 max_tokens=64 ignore_eos=true"
    )
    assert env_sampling("tp=8 --temperature=0.7") == ""  # a server's own flag is not bench's


_settings = st.lists(
    st.sampled_from(
        [
            "",
            "temperature=0 top_p=1 max_tokens=256 ignore_eos=true",
            "temperature=0.7 top_p=1 max_tokens=256 ignore_eos=true",
            "temperature=0 top_p=1 max_tokens=256 ignore_eos=false",
            "temperature=0",
            "max_tokens=512",
        ]
    ),
    max_size=6,
)


@given(spec=_settings, baseline=_settings)
def test_a_sampling_difference_is_one_both_sides_know(spec, baseline):
    differs = sampling_difference(spec, baseline)
    assert sampling_difference(spec, spec) is None
    assert (differs is None) == (sampling_difference(baseline, spec) is None)
    if not any(spec) or not any(baseline):  # a side that says nothing is never flagged
        assert differs is None
    if differs is not None:
        assert differs[0] != differs[1]


def _runs_file(path, label, k, rate, temperature, *, columns=True, env_pairs=True):
    """Three runs of four rows each, in three launches, with these sampling settings (in their
    columns and as env's sampling_* pairs, or either left out: a file written before)."""
    header = (
        "run_id,label,model,hardware,concurrency,num_spec_tokens,tok_s,accept_len,env,launch_id"
    )
    header += ",temperature,top_p,max_tokens,ignore_eos" if columns else ""
    lines = [header]
    sampled = (
        f" sampling_temperature={temperature:g} sampling_top_p=1 sampling_max_tokens=256 "
        "sampling_ignore_eos=true"
    )
    for run in range(3):
        for i in range(4):
            env = "tp=8 url=http://h:8000" + (sampled if env_pairs else "")
            accept_len = "2.1" if k else ""
            row = f"{label}-{run},{label},m,h100,1,{k},{rate + 0.1 * i + 0.2 * run:.2f},"
            row += f"{accept_len},{env},{label}-L{run}"
            row += f",{temperature},1,256,true" if columns else ""
            lines.append(row)
    path.write_text("\n".join(lines) + "\n")
    return path


def _compare(baseline, spec, *more):
    return run_cli(["compare", f"baseline={baseline}", f"eagle={spec}", *more])


@pytest.mark.parametrize(
    "columns, env_pairs", [(True, True), (False, True), (True, False)], ids=str
)
def test_compare_flags_a_pair_measured_with_other_sampling(tmp_path, columns, env_pairs):
    base = _runs_file(
        tmp_path / "b.csv", "baseline", 0, 60, 0, columns=columns, env_pairs=env_pairs
    )
    spec = _runs_file(tmp_path / "s.csv", "eagle", 3, 80, 0.7, columns=columns, env_pairs=env_pairs)
    r = _compare(base, spec, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (run,) = data["runs"]
    assert "sampling_differs" in run["flags"] and "stale_baseline" not in run["flags"]
    assert run["verdict"] == "faster"  # flagged, still measured
    (flag,) = [f for f in data["flags"] if f["code"] == "sampling_differs"]
    assert "measured with temperature=0.7, its baseline with temperature=0" in flag["message"]
    text = _compare(base, spec)
    assert "flagged:" in text.output and "[sampling_differs] eagle at concurrency 1" in text.output


def test_compare_is_quiet_on_the_same_sampling_and_on_files_that_do_not_say(tmp_path):
    same = _compare(
        _runs_file(tmp_path / "b.csv", "baseline", 0, 60, 0.7),
        _runs_file(tmp_path / "s.csv", "eagle", 3, 80, 0.7),
        "--json",
    )
    old = _compare(  # written before the sampling was recorded: unknown, never flagged
        _runs_file(tmp_path / "ob.csv", "baseline", 0, 60, 0, columns=False, env_pairs=False),
        _runs_file(tmp_path / "os.csv", "eagle", 3, 80, 0.7, columns=False, env_pairs=False),
        "--json",
    )
    half = _compare(  # one side says its sampling, the other does not: nothing to compare
        _runs_file(tmp_path / "hb.csv", "baseline", 0, 60, 0, columns=False, env_pairs=False),
        _runs_file(tmp_path / "hs.csv", "eagle", 3, 80, 0.7),
        "--json",
    )
    for r in (same, old, half):
        assert r.exit_code == 0, r.output
        (run,) = json.loads(r.stdout)["runs"]
        assert "sampling_differs" not in run["flags"] and run["verdict"] == "faster"


def test_sweep_passes_its_sampling_settings_to_every_launchs_bench(tmp_path):
    import sys
    from pathlib import Path

    from local_process import free_port

    from breakeven.sweep.plan import plan_sweep
    from breakeven.sweep.run import run_sweep

    fake = Path(__file__).parent / "fake_server.py"
    serve = f"{sys.executable} {fake} --port {{port}} --seconds-per-token 0.002 --natural-stop 5"
    port = free_port()
    plan = plan_sweep(
        serve,
        "vllm",
        [2],
        method="ngram",
        ready_timeout_s=30,
        port=port,
        max_tokens=16,
        ignore_eos=False,
        temperature=0.5,
    )
    config = Config(url="http://unused", label="unused", max_tokens=16, requests=2)
    result = run_sweep(plan, str(tmp_path / "sweep"), config)
    assert all(o.ok for o in result.outcomes), result.report()
    written = rows(result.runs_csv)
    assert {row["label"] for row in written} == {"baseline", "ngram-k2"}
    for row in written:
        assert row["ignore_eos"] == "false" and float(row["temperature"]) == 0.5
        assert row["max_tokens"] == "16"
    client = [row for row in written if row["origin"] == "client"]
    assert {row["completion_tokens"] for row in client} == {"5"}  # stopped, as the model ends
    manifest = json.loads((tmp_path / "sweep" / "manifest.json").read_text())
    assert manifest["plan"]["ignore_eos"] is False and manifest["plan"]["temperature"] == 0.5


def test_sweep_plan_says_sampling_settings_only_where_they_are_not_the_defaults():
    serve = "vllm serve /models/m --port {port}"
    plan_json = ["sweep", "--serve", serve, "--engine", "vllm", "-k", 2, "--plan", "--json"]
    default = run_cli(plan_json)
    assert default.exit_code == 0, default.output
    assert not {"ignore_eos", "temperature", "top_p"} & set(json.loads(default.stdout))
    changed = run_cli([*plan_json, "--no-ignore-eos", "--top-p", 0.9])
    assert changed.exit_code == 0, changed.output
    plan = json.loads(changed.stdout)
    assert plan["ignore_eos"] is False and plan["top_p"] == 0.9 and "temperature" not in plan
    text = run_cli(["sweep", "--serve", serve, "--engine", "vllm", "-k", 2, "--plan"])
    assert "tokens), in this order" in text.output
    bad = run_cli(["sweep", "--serve", serve, "--engine", "vllm", "-k", 2, "--plan", "--top-p", 2])
    one_line_exit_2(bad, "--top-p", "expected a fraction above 0 and at most 1")
