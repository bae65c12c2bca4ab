"""optimize, batch and moe on the command line."""

import json

import pytest
from cli_checks import invoke

CURVE = """# A made-up forward-time curve for tests: flat, then compute-bound.
tokens,ms
1,10
2,10
4,10.1
8,10.2
16,10.4
32,11
64,14
128,22
256,38
"""


@pytest.fixture
def curve(tmp_path):
    path = tmp_path / "curve.csv"
    path.write_text(CURVE)
    return path


def test_optimize_leviathan_json():
    d = json.loads(invoke("optimize", "--alpha", 0.8, "--cost-ratio", 0.05, "--json").output)
    assert d["best_k"] == 8 and d["speedup"] == pytest.approx(3.092, abs=5e-4)
    assert [row["k"] for row in d["by_k"]] == list(range(1, 17))
    assert set(d["by_k"][0]) == {"k", "accept_len", "speedup", "regret"}
    assert d["by_k"][7]["regret"] == 0 and d["by_k"][0]["regret"] > 0
    assert "step_ms" not in d  # normalised: no absolute times


def test_optimize_max_k():
    d = json.loads(
        invoke("optimize", "--alpha", 0.8, "--cost-ratio", 0.05, "--max-k", 4, "--json").output
    )
    assert d["best_k"] == 4 and len(d["by_k"]) == 4


def test_optimize_measured_json():
    r = invoke(
        "optimize",
        "--baseline-tok-s",
        62.9,
        "--verify-ms",
        28.7,
        "--draft-step-ms",
        0.2,
        "--accept-len-by-k",
        "1.6,1.9,2.05,2.1",
        "--json",
    )
    d = json.loads(r.output)
    assert d["best_k"] == 4
    assert d["by_k"][3]["cycle_ms"] == pytest.approx(29.5)
    assert d["step_ms"] == pytest.approx(15.898, abs=5e-4)


def test_optimize_says_do_not_speculate():
    r = invoke("optimize", "--alpha", 0.1, "--cost-ratio", 0.9)
    assert r.exit_code == 0
    assert r.output.startswith("Do not speculate")
    assert (
        json.loads(invoke("optimize", "--alpha", 0.1, "--cost-ratio", 0.9, "--json").output)[
            "best_k"
        ]
        == 0
    )


def test_optimize_with_a_verify_curve(curve):
    d = json.loads(
        invoke("optimize", "--cost-curve", curve, "--alpha", 0.7, "--batch", 16, "--json").output
    )
    assert d["best_k"] == 3
    assert d["step_ms"] == pytest.approx(10.4)  # the curve at 16 tokens
    assert "k stops at 15" in d["note"]
    fitted = json.loads(
        invoke(
            "optimize",
            "--cost-curve",
            curve,
            "--fit",
            "knee",
            "--alpha",
            0.7,
            "--batch",
            16,
            "--json",
        ).output
    )
    assert len(fitted["by_k"]) == 16


def test_batch_single_k(curve):
    d = json.loads(
        invoke("batch", "--cost-curve", curve, "--accept-len", 2.5, "-k", 3, "--json").output
    )
    assert d["breakeven_batch"] == 52 and d["max_batch"] == 64
    assert d["speedup_by_batch"][0] == {
        "batch": 1,
        "k": 3,
        "speedup": pytest.approx(2.5 * 10 / 10.1),
        "step_ms": 10.0,
        "cycle_ms": pytest.approx(10.1),
    }
    assert "best_k_by_batch" not in d


def test_batch_schedule(curve):
    r = invoke("batch", "--cost-curve", curve, "--alpha", 0.7, "--max-k", 8, "--json")
    d = json.loads(r.output)
    assert d["best_k_by_batch"][0] == [1, 3, 8]
    assert d["best_k_by_batch"][-1][2] == 0
    text = invoke("batch", "--cost-curve", curve, "--alpha", 0.7, "--max-k", 8).output
    assert "Best k by batch" in text and "[1, 3, 8]" in text


def test_batch_beyond_the_curve(tmp_path):
    flat = tmp_path / "flat.csv"
    flat.write_text("tokens,ms\n1,10\n1024,10\n")
    d = json.loads(
        invoke("batch", "--cost-curve", flat, "--accept-len", 2, "-k", 1, "--json").output
    )
    assert d["breakeven_batch"] == "beyond the curve"
    text = invoke("batch", "--cost-curve", flat, "--accept-len", 2, "-k", 1).output
    assert "beyond the curve" in text


def test_moe_json():
    d = json.loads(
        invoke("moe", "--experts", 384, "--top-k", 8, "--tokens", 7, "--shared", 1, "--json").output
    )
    assert d["active_experts"] == pytest.approx(1 + 384 * (1 - (376 / 384) ** 7))
    assert "verify_step_ratio" not in d
    d = json.loads(
        invoke(
            "moe",
            "--experts",
            384,
            "--top-k",
            8,
            "--tokens",
            7,
            "--dense-bytes",
            5.5e9,
            "--expert-bytes",
            1.32e9,
            "--json",
        ).output
    )
    assert d["verify_step_ratio"] > 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tokens,ms\n1,10\n4,12\n2,11\n", "line 4: tokens 2 after 4; expected strictly increasing"),
        ("tokens,ms\n1,10\n2,-1\n", "line 3: ms is -1, expected a time >= 0 ms"),
        ("tokens,ms\n1,10\n", "has 1 data row(s); expected at least two points"),
        ("tokens,time\n1,10\n2,11\n", "line 1: no 'ms' column (found: tokens, time)"),
        ("tokens,ms\n1,10\n2,abc\n", "line 3: ms is 'abc', expected a number"),
        ("", "is empty"),
        ("# only a comment\n", "is empty"),
    ],
)
def test_bad_curve_files_name_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    r = invoke("batch", "--cost-curve", path, "--accept-len", 2, "-k", 1)
    assert r.exit_code == 2
    assert r.output.startswith(f"Error: {path}")
    assert message in r.output
    assert r.output.count("\n") == 1


def test_binary_and_missing_curve_files(tmp_path):
    binary = tmp_path / "curve.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    r = invoke("batch", "--cost-curve", binary, "--accept-len", 2, "-k", 1)
    assert r.exit_code == 2 and "is not UTF-8 text" in r.output
    r = invoke("batch", "--cost-curve", tmp_path / "nope.csv", "--accept-len", 2, "-k", 1)
    assert r.exit_code == 2 and "cannot read it" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["optimize", "--alpha", "0.8", "--cost-ratio", "0.05", "--verify-ms", "3"],
            "--cost-ratio (Leviathan's normalised form) and --verify-ms (a measured cost)",
        ),
        (["optimize", "--alpha", "0.8"], "give the verify cost: --verify-ms, --cost-curve"),
        (["optimize", "--verify-ms", "28.7", "--alpha", "0.8"], "--verify-ms needs a baseline"),
        (["optimize", "--step-ms", "10", "--verify-ms", "28.7"], "give exactly one of --alpha"),
        (["optimize", "--alpha", "1.5", "--cost-ratio", "0.1"], "--alpha: got 1.5"),
        (["optimize", "--alpha", "0.5", "--cost-ratio", "-0.1"], "--cost-ratio: got -0.1"),
        (["optimize", "--alpha", "0.5", "--cost-ratio", "0.1", "--max-k", "0"], "--max-k: got 0"),
        (
            ["optimize", "--accept-len-by-k", "2.5", "--cost-ratio", "0.1"],
            "--accept-len-by-k: got 2.5, expected at most k + 1 = 2",
        ),
        (
            ["optimize", "--alpha", "0.5", "--cost-ratio", "0.1", "--fit", "knee"],
            "--fit needs --cost-curve",
        ),
        (
            ["moe", "--experts", "8", "--top-k", "9", "--tokens", "2"],
            "--top-k: got 9, expected at most",
        ),
        (["moe", "--experts", "8", "--top-k", "2", "--tokens", "0"], "--tokens: got 0.0"),
        (
            ["moe", "--experts", "8", "--top-k", "2", "--tokens", "2", "--dense-bytes", "1e9"],
            "--dense-bytes and --expert-bytes go together",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args, message):
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert r.output.count("\n") == 1 and "Traceback" not in r.output


def test_batch_needs_acceptance(curve):
    r = invoke("batch", "--cost-curve", curve, "--accept-len", 2)
    assert r.exit_code == 2 and "--accept-len and -k/--num-spec-tokens go together" in r.output
