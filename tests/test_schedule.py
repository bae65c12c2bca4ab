"""breakeven schedule: the best k by batch size against a brute force on a synthetic t(B, q),
merging, load profiles, and round trips through validators written from vLLM's and SGLang's
own rules, and TensorRT-LLM's (tests/engine_rules.py), at every batch size."""

import json
import math
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_checks import run_cli
from engine_rules import (
    EngineRejects,
    sglang_check_launch,
    sglang_parse_flags,
    sglang_steps,
    trtllm_draft_len,
    trtllm_load_options,
    trtllm_validate,
    vllm_legacy_k,
    vllm_lookup,
    vllm_parse_flags,
    vllm_validate,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.core.errors import BreakevenError
from breakeven.iotools.load import read_load
from breakeven.model.costs import TableCost
from breakeven.planning.schedule import plan, schedule_report
from breakeven.render.engine_configs import render, trtllm_draft_len_schedule, yaml_text

ROOT = Path(__file__).resolve().parent.parent
CURVE = ROOT / "data" / "llama3_8b_decode_curve.csv"
ENGINES = Path(__file__).parent / "data" / "engines"
EAGLE3 = "2:2.36,3:2.79,4:3.08,5:3.32,6:3.46,7:3.54"  # vLLM issue 20780, Llama 3.1 8B
README_SWEEP = ("--cost-curve", CURVE, "--accept-len-by-k", EAGLE3, "--draft-step-ms", 0.98)
"""The README's worked example: the bundled Llama-3-8B curve, issue 20780's EAGLE-3 runs."""


def roofline(knee=64, floor=10.0, slope=0.25, top=8192):
    """A synthetic forward time: flat (memory-bound) to ``knee`` tokens, then linear."""
    tokens = [1, knee, top]
    return TableCost(tuple(tokens), (floor, floor, floor + slope * (top - knee)))


def t(n, knee=64, floor=10.0, slope=0.25):
    return floor + slope * max(0, n - knee)


def brute_best_k(batch, alpha, draft_step, k_max):
    """The best k at ``batch``, from the formula, not from breakeven's sweep."""
    best, value = 0, 1.0
    for k in range(1, k_max + 1):
        tau = (1 - alpha ** (k + 1)) / (1 - alpha)
        speedup = tau * t(batch) / (t(batch * (k + 1)) + draft_step * k)
        if speedup > value:
            best, value = k, speedup
    return best


def test_the_schedule_is_the_known_optimum_at_every_batch():
    curve = roofline()
    _, result = plan(curve, alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=300, min_gain=0.0)
    expected = [brute_best_k(b, 0.8, 0.5, 8) for b in range(1, 301)]
    assert [result.k_at(b) for b in range(1, 301)] == expected
    assert len({k for k in expected}) > 3 and expected[-1] == 0  # it turns down, then off
    assert result.merge_loss == 0 and result.unmerged_ranges == len(result.ranges)
    off = next(r for r in result.ranges if r.k == 0)
    assert result.breakeven_batch == off.first - 1


def test_merging_zero_keeps_every_change_and_a_large_min_gain_gives_one_k_where_it_pays():
    curve = roofline()
    _, every = plan(curve, alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=300, min_gain=0.0)
    _, some = plan(curve, alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=300, min_gain=0.02)
    _, most = plan(curve, alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=300, min_gain=1.0)
    assert len(every.ranges) > len(some.ranges) > 1
    assert 0 < some.merge_loss < 0.02 * len(every.ranges)
    assert every.gain >= some.gain >= most.gain >= 0
    # Issue 26: a merge trades one k for another, never speculation for none. However large
    # --min-gain, the schedule speculates exactly up to the break-even batch, and every k it
    # runs beats plain decoding at every batch where it runs it.
    for schedule in (every, some, most):
        assert schedule.ranges[-1].k == 0
        assert schedule.ranges[-1].first == schedule.breakeven_batch + 1
        assert all(v >= 1 for _, k, v in schedule.by_batch if k > 0)
    speculating = [r for r in most.ranges if r.k > 0]
    assert 1 <= len(speculating) < len([r for r in some.ranges if r.k > 0])
    # Each merged range says what it gives up against the ranges it was merged from.
    assert all(r.given_up == 0 for r in every.ranges)
    assert any(r.given_up > 0 for r in most.ranges) and all(r.given_up < 1 for r in most.ranges)


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.3, 0.95),
    st.floats(0.0, 3.0),
    st.integers(8, 512),
    st.floats(0, 0.2),
    st.sampled_from(["vllm", "sglang", "vllm-legacy"]),
)
def test_a_schedule_loses_to_the_best_fixed_k_only_what_it_merges_away(
    alpha, draft_step, knee, min_gain, engine
):
    curve = TableCost((1, knee, 4096), (5.0, 5.0, 5.0 + 0.05 * (4096 - knee)))
    _, result = plan(
        curve,
        engine=engine,
        alpha=alpha,
        draft_step_ms=draft_step,
        k_max=6,
        max_batch=128,
        min_gain=min_gain,
    )
    # The unmerged schedule runs the best k of every range, so it never loses to a fixed k;
    # merging gives up at most merge_loss of it.  (A fixed k may run where it loses to plain
    # decoding and so win a hair overall; the schedule never speculates where it loses.)
    assert 0 <= result.merge_loss <= 1
    assert result.gain >= -result.merge_loss - 1e-12
    assert all(v >= 1 for _, k, v in result.by_batch if k > 0)
    assert result.ranges[0].first == 1 and result.ranges[-1].last == 128
    assert all(
        a.last + 1 == b.first for a, b in zip(result.ranges, result.ranges[1:], strict=False)
    )


def _vllm_plan(**kw):
    return plan(roofline(), alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=300, **kw)[1]


@pytest.mark.parametrize("max_num_seqs", [None, 300, 1024, 40])
def test_vllm_round_trip_at_every_batch(max_num_seqs):
    result = _vllm_plan(min_gain=0.0)
    out = render(result, "vllm", method="eagle3", max_num_seqs=max_num_seqs)
    config = vllm_parse_flags(out["flags"])
    assert config == out["config"] and config["method"] == "eagle3"
    limit = max_num_seqs or 300
    dense = vllm_lookup(config, limit)
    assert dense[1:] == [result.k_at(b) for b in range(1, limit + 1)]
    assert config["num_speculative_tokens"] == max(r.k for r in result.ranges)


def test_the_validators_refuse_what_vllm_refuses():
    with pytest.raises(EngineRejects, match="must start at 1"):
        vllm_validate([[2, 8, 3]])
    with pytest.raises(EngineRejects, match="non-overlapping"):
        vllm_validate([[1, 16, 3], [16, 32, 2]])
    with pytest.raises(EngineRejects, match="3-item"):
        vllm_validate([{"1-16": 3}])
    with pytest.raises(EngineRejects, match="non-empty list"):
        vllm_validate({"1-16": 3})  # the dict of the PR's description is not what shipped
    assert (
        vllm_lookup(
            {
                "num_speculative_tokens": 3,
                "num_speculative_tokens_per_batch_size": [[1, 4, 3], [9, 12, 5]],
            },
            16,
        )[1:]
        == [3] * 8 + [3] * 8
    )  # gap, clamp


def test_legacy_vllm_round_trip():
    result = _vllm_plan(engine="vllm-legacy")
    assert len(result.ranges) == 2 and result.ranges[1].k == 0
    out = render(result, "vllm-legacy", method="eagle")
    config = vllm_parse_flags(out["flags"])
    assert [vllm_legacy_k(config, b) for b in range(1, 301)] == [
        result.k_at(b) for b in range(1, 301)
    ]
    assert "--speculative-disable-by-batch-size" in out["notes"][0]


GRAPHS = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 300]


@pytest.mark.parametrize("graphs", [GRAPHS, None])
def test_sglang_round_trip_at_every_batch(graphs):
    result = _vllm_plan(engine="sglang", min_gain=0.0, graph_sizes=graphs)
    out = render(result, "sglang", method="eagle3", config_path="spec.json")
    args = sglang_parse_flags(out["flags"])
    assert (
        args["speculative_adaptive"] is True and args["speculative_adaptive_config"] == "spec.json"
    )
    sglang_check_launch(args, out["config"])
    routed = [sglang_steps(out["config"], b, graphs) for b in range(1, 301)]
    assert routed == [result.k_at(b) for b in range(1, 301)]
    if graphs:  # every range is whole buckets: its first batch follows a graph size
        assert all(r.first == 1 or r.first - 1 in graphs for r in result.ranges)


def test_one_range_needs_no_schedule():
    _, result = plan(roofline(), alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=46, min_gain=1.0)
    assert len(result.ranges) == 1 and result.ranges[0].k > 0
    for engine in ("vllm", "vllm-legacy"):
        out = render(result, engine, method="eagle3")
        assert "num_speculative_tokens_per_batch_size" not in out["config"]
        assert "disable_by_batch_size" not in out["config"]
    out = render(result, "sglang", method="eagle3")
    assert "--speculative-adaptive" not in out["flags"] and out["config"] is None
    _, never = plan(roofline(), alpha=0.1, draft_step_ms=5, k_max=4, max_batch=64)
    out = render(never, "vllm")
    assert out["config"] is None and out["flags"] == "" and "without speculation" in out["notes"][0]


def test_a_load_profile_weights_the_gain(tmp_path):
    profile = tmp_path / "load.csv"
    profile.write_text("# time at each batch size\nbatch,share\n1,3\n2,1\n")
    load, meta = read_load(profile)
    assert load == {1: 0.75, 2: 0.25} and meta["shape"] == "table"
    result = schedule_report(
        roofline(),
        alpha=0.8,
        draft_step_ms=0.5,
        k_max=8,
        max_batch=300,
        load=load,
        load_source="load.csv",
    )
    assert result["best_fixed_k"] == brute_best_k(1, 0.8, 0.5, 8)
    assert result["ranges"][0]["share"] == pytest.approx(1.0)
    # Ranges the load gives no time are described as every batch alike, never NaN.
    assert all(math.isfinite(x["speedup"]) for x in result["ranges"])
    r = run(
        "--cost-curve",
        CURVE,
        "--alpha",
        0.7,
        "--engine",
        "vllm",
        "--load",
        profile,
        "--min-gain",
        0,
    )
    assert r.exit_code == 0, r.output


def test_a_server_log_is_a_load_profile():
    """SGLang's decode lines of issue 11948: one running request in every interval."""
    load, meta = read_load(ENGINES / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
    assert load == {1: 1.0} and meta["shape"] == "records"


def run(*args):
    return run_cli(["schedule", *map(str, args)])


def test_the_readme_example_ends_in_the_snippet():
    r = run(
        *README_SWEEP,
        "--engine",
        "vllm",
        "--spec-method",
        "eagle3",
        "--min-gain",
        0.005,
    )
    assert r.exit_code == 0, r.output
    flags = r.output.split("Launch with:\n")[1].strip()
    config = vllm_parse_flags(flags)
    assert config["num_speculative_tokens_per_batch_size"][0][:2] == [1, 32]


def test_cli_json_and_out_file(tmp_path):
    out = tmp_path / "adaptive.json"
    args = [
        *README_SWEEP,
        "--engine",
        "sglang",
        "--min-gain",
        0,
        "--out",
        out,
        "--json",
    ]
    r = run(*args)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert json.loads(out.read_text()) == data["config"]
    assert data["schedule"] == [[x["first"], x["last"], x["k"]] for x in data["ranges"]]
    assert str(out) in data["flags"]
    before = out.read_text()
    r = run(*args)
    assert r.exit_code == 2 and "--force" in r.output and out.read_text() == before


@pytest.mark.parametrize(
    "args,message",
    [
        (["--accept-len", "2.1", "-k", "3"], "a schedule needs acceptance at several k"),
        (["--alpha", "0.7", "--min-gain", "2"], "--min-gain: got 2.0, expected a fraction"),
        (["--alpha", "0.7", "--load", "missing.csv"], "--load"),
        (["--alpha", "0.7", "--cuda-graph-sizes", "1,x"], "--cuda-graph-sizes: got 'x'"),
        (
            ["--alpha", "0.7", "--base-config", "[1]"],
            "--base-config: got [1], expected a JSON object",
        ),
        (["--alpha", "0.7", "--base-config", "{"], "--base-config: is not JSON"),
    ],
)
def test_bad_input_is_one_line(args, message):
    r = run("--cost-curve", CURVE, "--engine", "vllm", *args)
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_fit_file_gives_the_surface_and_alpha(tmp_path):
    fit_json = tmp_path / "fit.json"
    sweep = (
        Path(__file__).parent
        / "data"
        / "published"
        / "angelslim_issue163_qwen3_30b_a3b_eagle3_batch.csv"
    )
    assert (
        run_cli(
            ["fit", str(sweep), "--experts", "128", "--top-k", "8", "--out", str(fit_json)]
        ).exit_code
        == 0
    )
    r = run("--fit-file", fit_json, "--engine", "vllm", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert "tree acceptance's alpha" in data["notes"][0]
    # This EAGLE-3 draft of Qwen3-30B-A3B on 4x H100 pays at batch 1 at most: off from there.
    assert data["ranges"][-1]["k"] == 0 and not math.isnan(data["gain"])
    # batch takes the same inputs the same way: the fit's alpha where none is typed (it was
    # "give exactly one of --alpha ..."), and says where it came from.
    r = run_cli(["batch", "--fit-file", str(fit_json), "--max-k", "8", "--json"])
    assert r.exit_code == 0, r.output
    batch = json.loads(r.stdout)
    assert "tree acceptance's alpha" in batch["acceptance"]
    assert batch["best_k_by_batch"][-1][2] == data["ranges"][-1]["k"] == 0
    r = run_cli(["batch", "--fit-file", str(fit_json), "--max-k", "8"])
    assert "Acceptance from the fit: alpha " in r.output


def _schedule_json(tmp_path):
    data = schedule_report(
        roofline(), alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=100, min_gain=0.0
    )
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps(data))
    return path, {x["batch"]: (x["k"], x["speedup"]) for x in data["by_batch"]}


def test_check_reports_runs_against_the_schedule(tmp_path):
    """Runs at several batch sizes and k (rows made for the test: the logic, not an engine's
    output): one as predicted, one 30% slower, one at another k, one past the sweep."""
    path, at = _schedule_json(tmp_path)
    rows = ["run_id,label,model,hardware,concurrency,num_spec_tokens,tok_s"]
    for b, tok_s in ((1, 100.0), (16, 50.0), (48, 20.0), (200, 5.0)):
        rows.append(f"base-{b},base,m,h,{b},0,{tok_s}")
    for label, b, factor, k in (
        ("as-predicted", 1, 1.0, None),
        ("slow", 16, 0.7, None),
        ("other", 48, 1.0, 1),
        ("past", 200, 1.0, 2),
    ):
        k = at[b][0] if k is None else k
        base = {1: 100.0, 16: 50.0, 48: 20.0, 200: 5.0}[b]
        speedup = at[b][1] if b in at else 1.0
        for i in range(3):  # three runs each: an interval
            rows.append(
                f"{label}-{i},{label},m,h,{b},{k},{base * speedup * factor * (1 + 0.001 * i)}"
            )
    runs = tmp_path / "runs.csv"
    runs.write_text("\n".join(rows) + "\n")
    r = run_cli(["check", str(runs), "--schedule", str(path), "--json"])
    assert r.exit_code == 0, r.output
    verdicts = {x["label"]: x["verdict"] for x in json.loads(r.stdout)["schedule_check"]}
    assert verdicts == {
        "as-predicted": "holds",
        "slow": "off",
        "other": "other k",
        "past": "beyond the schedule",
    }
    text = run_cli(["check", str(runs), "--schedule", str(path)]).output
    assert "Against the schedule" in text and "beyond the schedule" in text


def test_compare_takes_a_schedule(tmp_path):
    path, _ = _schedule_json(tmp_path)
    case = Path(__file__).parent / "data" / "case_study"
    r = run_cli(
        [
            "compare",
            str(case / "sglang_baseline.log"),
            str(case / "sglang_eagle3_k3.log"),
            "-k",
            "3",
            "--schedule",
            str(path),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["schedule_check"]
    assert row["batch"] == 1 and row["k"] == 3 and row["verdict"] == "other k"


@pytest.mark.parametrize(
    "content,message",
    [
        ("{", "is not JSON"),
        ("[]", "is not a schedule"),
        ('{"by_batch": [{"batch": 0, "k": 1, "speedup": 1}]}', "expected batch >= 1"),
    ],
)
def test_a_bad_schedule_file_is_one_line(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    runs = ROOT / "data" / "case_study.csv"
    r = run_cli(["check", str(runs), "--schedule", str(bad)])
    assert r.exit_code == 2 and message in r.output and "--schedule" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_curve_to_2_to_the_64_tokens_is_swept_to_the_documented_limit(tmp_path):
    # Issue 29: a cost curve whose last point is at 2^64 tokens was swept batch by batch to
    # 2^64 / (k + 1), which never ended.  The sweep stops at MAX_BATCH (4,096), as documented.

    from breakeven.core.quantities import MAX_BATCH

    curve = tmp_path / "huge.csv"
    curve.write_text("tokens,ms\n1,7.37\n18446744073709551616,1e12\n")
    for args in (
        ["batch", "--cost-curve", str(curve), "--accept-len", "2.1", "-k", "3", "--json"],
        ["schedule", "--cost-curve", str(curve), "--alpha", "0.7", "--engine", "vllm", "--json"],
    ):
        r = run_cli(args)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["max_batch"] == MAX_BATCH


@given(shares=st.lists(st.floats(1e300, 1.79e308), min_size=1, max_size=6))
def test_load_shares_that_sum_past_a_double_are_normalised(shares, tmp_path_factory):
    # Issue 29: shares whose sum overflows a double (math.fsum raised OverflowError).
    from breakeven.iotools.load import read_load

    path = tmp_path_factory.mktemp("load") / "load.csv"
    path.write_text("batch,share\n" + "".join(f"{i + 1},{v!r}\n" for i, v in enumerate(shares)))
    profile, _ = read_load(path)
    assert math.fsum(profile.values()) == pytest.approx(1.0)
    assert all(0 < v <= 1 for v in profile.values())


@pytest.mark.parametrize("max_num_seqs", [None, 300, 1024, 40, 8])
def test_trtllm_round_trip_at_every_batch(max_num_seqs):
    """The YAML read back as trtllm-serve reads it, checked by TensorRT-LLM's validator and
    looked up as its runtime does at every batch up to the server's max_batch_size."""
    result = _vllm_plan(min_gain=0.0)
    out = render(result, "trtllm", method="eagle3", max_num_seqs=max_num_seqs)
    assert shlex.split(out["flags"]) == ["--extra_llm_api_options", out["config_path"]]
    spec = trtllm_load_options(yaml_text(out["config"]))
    assert spec == out["config"]["speculative_config"] and spec["decoding_type"] == "Eagle3"
    schedule = trtllm_validate(spec)
    limit = max_num_seqs or 300
    ran = [trtllm_draft_len(schedule, b, spec["max_draft_len"]) for b in range(1, limit + 1)]
    assert ran == [result.k_at(b) for b in range(1, limit + 1)]
    # the LLM API's form: the same fields, given to the config class
    called = eval(out["python"], {"Eagle3DecodingConfig": lambda **kw: kw})
    assert called == {key: v for key, v in spec.items() if key != "decoding_type"}


def test_trtllm_fixed_k_and_the_validators_refuse_what_trtllm_refuses():
    _, result = plan(roofline(), alpha=0.8, draft_step_ms=0.5, k_max=8, max_batch=46, min_gain=1.0)
    out = render(result, "trtllm", base_config={"method": "mtp", "model": "/m"})
    spec = trtllm_load_options(yaml_text(out["config"]))
    assert "draft_len_schedule" not in spec and spec["decoding_type"] == "MTP"
    k = result.ranges[0].k
    assert {trtllm_draft_len(trtllm_validate(spec), b, k) for b in range(1, 500)} == {k}
    with pytest.raises(EngineRejects, match="smallest batch-size key"):
        trtllm_validate({"max_draft_len": 4, "draft_len_schedule": {4: 3, 8: 2}})
    with pytest.raises(EngineRejects, match="must be >= 1"):
        trtllm_validate({"max_draft_len": 4, "draft_len_schedule": {0: 4}})
    with pytest.raises(EngineRejects, match="<= max_draft_len"):
        trtllm_validate({"max_draft_len": 4, "draft_len_schedule": {4: 4, 8: 5}})
    with pytest.raises(EngineRejects, match="Invalid decoding type"):
        trtllm_load_options("speculative_config:\n  decoding_type: eagle3\n")
    assert [trtllm_draft_len({4: 4, 8: 2, 32: 1}, b, 4) for b in (1, 4, 5, 8, 9, 32, 33)] == [
        4,
        4,
        2,
        2,
        1,
        1,
        0,
    ]  # the docs' example: batches 33 and up draft nothing


def test_a_schedule_trtllm_cannot_take_is_refused_in_one_line():
    """TensorRT-LLM drafts max_draft_len at its smallest key: a schedule whose k rises past
    batch 1 has no form there."""
    rising = SimpleNamespace(
        ranges=[SimpleNamespace(first=1, last=4, k=2), SimpleNamespace(first=5, last=64, k=3)]
    )
    with pytest.raises(BreakevenError, match=r"^engine: TensorRT-LLM's draft_len_schedule"):
        trtllm_draft_len_schedule(rising, 64)
    off_then_on = SimpleNamespace(
        ranges=[SimpleNamespace(first=1, last=16, k=3), SimpleNamespace(first=17, last=64, k=0)]
    )
    assert trtllm_draft_len_schedule(off_then_on, 64) == {16: 3}  # no key past 16: off


def test_trtllm_cli_writes_the_yaml(tmp_path):
    out = tmp_path / "spec.yaml"
    r = run(
        *README_SWEEP,
        "--engine",
        "trtllm",
        "--min-gain",
        "0",
        "--max-batch",
        "128",
        "--spec-method",
        "eagle3",
        "--out",
        out,
    )
    spec = trtllm_load_options(out.read_text())
    assert f"--extra_llm_api_options {out}" in r.output and "Eagle3DecodingConfig(" in r.output
    assert trtllm_validate(spec) == spec["draft_len_schedule"]
