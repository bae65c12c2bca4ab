"""The command line, through click's CliRunner, and its start-up cost."""

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_checks import run_cli

from breakeven.cli import cli
from breakeven.cli.group import command_paths


def run(*args):
    return run_cli(["predict", *args])


def test_issue_example_table():
    result = run("--baseline-tok-s", "62.9", "--verify-ms", "28.7")
    assert result.exit_code == 0, result.output
    assert "1.805 tokens/cycle" in result.output
    assert "15.898 ms" in result.output
    for k in range(1, 9):
        assert f"\n  {k:>2}  0." in result.output  # the smallest-alpha table, k = 1..8


def test_case_study_verdicts():
    wins = run(
        "--baseline-tok-s",
        "62.9",
        "--verify-ms",
        "28.7",
        "--draft-ms",
        "1.2",
        "--accept-len",
        "2.1",
    )
    assert "Speculation pays: 1.117x" in wins.output
    loses = run("--step-ms", "11.1", "--cycle-ms", "29.9", "--accept-len", "2.1")
    assert "Speculation loses: 0.780x" in loses.output
    assert "2.694" in loses.output


def test_json_contract():
    result = run(
        "--baseline-tok-s",
        "62.9",
        "--verify-ms",
        "28.7",
        "--draft-ms",
        "1.2",
        "--accept-len",
        "2.1",
        "-k",
        "6",
        "--json",
    )
    assert result.exit_code == 0
    d = json.loads(result.output)
    for key in (
        "step_ms",
        "baseline_tok_s",
        "cycle_ms",
        "breakeven_accept_len",
        "accept_len",
        "alpha",
        "k",
        "speedup",
        "spec_tok_s",
        "breakeven_alpha",
        "max_verify_ms",
        "max_draft_ms",
        "max_baseline_tok_s",
    ):
        assert key in d, key
    assert d["k"] == 6
    assert d["speedup"] == pytest.approx(1.1166, abs=1e-4)


def test_json_holds_only_determined_keys():
    d = json.loads(run("--baseline-tok-s", "62.9", "--verify-ms", "28.7", "--json").output)
    assert d["breakeven_accept_len"] == pytest.approx(1.80523)
    for absent in ("speedup", "accept_len", "alpha", "spec_tok_s", "max_verify_ms", "k"):
        assert absent not in d
    assert len(d["breakeven_alpha_by_k"]) == 8


def test_leviathan_flags():
    d = json.loads(run("--alpha", "0.8", "-k", "4", "--cost-ratio", "0.05", "--json").output)
    assert d["speedup"] == pytest.approx(3.3616 / 1.2)


def test_per_position_flag():
    d = json.loads(run("--per-position", "0.983,0.949,0.915,0.881,0.712", "--json").output)
    assert d["k"] == 5 and d["accept_len"] == pytest.approx(5.44)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--baseline-tok-s", "-62.9"],
            "--baseline-tok-s: got -62.9, expected a finite number > 0 [tok/s]",
        ),
        (["--baseline-tok-s", "0"], "--baseline-tok-s: got 0.0"),
        (["--step-ms", "nan"], "--step-ms: got nan"),
        (["--verify-ms", "inf"], "--verify-ms: got inf"),
        (["--verify-ms", "-1"], "--verify-ms: got -1.0"),
        (["--cycle-ms", "0"], "--cycle-ms: got 0.0"),
        (
            ["--verify-ms", "3", "--draft-ms", "-0.5"],
            "--draft-ms: got -0.5, expected a finite number >= 0",
        ),
        (["--verify-ms", "3", "--overhead-ms", "nan"], "--overhead-ms: got nan"),
        (["--alpha", "1.5", "-k", "3"], "--alpha: got 1.5, expected a probability in [0, 1]"),
        (["--alpha", "-0.1", "-k", "3"], "--alpha: got -0.1"),
        (["--accept-len", "0.9"], "--accept-len: got 0.9, expected a mean acceptance length >= 1"),
        (
            ["--accept-len", "4.5", "-k", "3"],
            "--accept-len: got 4.5, expected at most k + 1 = 4 for -k/--num-spec-tokens = 3",
        ),
        (
            ["--baseline-tok-s", "62.9", "--step-ms", "15.9"],
            "--baseline-tok-s and --step-ms cannot be given together",
        ),
        (
            ["--cycle-ms", "29.9", "--verify-ms", "28.7"],
            "--cycle-ms and --verify-ms cannot be given together",
        ),
        (["--alpha", "0.5"], "--alpha needs -k/--num-spec-tokens"),
        (["-k", "0", "--accept-len", "1"], "-k/--num-spec-tokens: got 0"),
        (["--cost-ratio", "-1", "-k", "2"], "--cost-ratio: got -1.0"),
        (["--target", "0", "--verify-ms", "3"], "--target: got 0.0"),
        (["--per-position", "0.5,0.9"], "--per-position: rate at position 2 (0.9) exceeds"),
        (["--verify-ms", "abc"], "'abc' is not a valid float"),
        (["--verfy-ms", "3"], "No such option"),
        ([], "nothing to compute"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, message):
    result = run_cli(["predict", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert result.output.startswith("Error: ")
    assert result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output


def test_api_and_cli_say_the_same_thing():
    from breakeven import BreakevenError, predict

    with pytest.raises(BreakevenError) as info:
        predict(baseline_tok_s=62.9, step_ms=15.9)
    api = str(info.value)
    cli_line = run("--baseline-tok-s", "62.9", "--step-ms", "15.9").output.strip()
    assert cli_line == "Error: " + api.replace("baseline_tok_s", "--baseline-tok-s").replace(
        "step_ms", "--step-ms"
    )


def test_help_defines_every_printed_quantity():
    text = run_cli(["predict", "--help"]).output
    for key in ("breakeven_accept_len", "speedup", "spec_tok_s", "max_baseline_tok_s"):
        assert key in text
    assert "bonus token included" in text


def _python(code, *args):
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_cli_start_up_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from breakeven.cli import main\n"
        "try:\n"
        "    main(['predict', '--baseline-tok-s', '62.9', '--verify-ms', '28.7', '--json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('numpy', 'pandas', 'scipy', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = _python(code)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


HEAVY = ("numpy", "pandas", "polars", "scipy", "matplotlib")
"""The libraries no ``--help`` imports (issue 43: help is instant)."""


@pytest.mark.parametrize(
    "path", [(), *command_paths(cli)], ids=lambda path: " ".join(path) or "breakeven"
)
def test_every_help_imports_nothing_heavy(path):
    """``--help`` lists each option's choices: they come from light modules
    (:mod:`breakeven.core.choices`), never from the analysis that uses them."""
    code = (
        "import sys\n"
        "from breakeven.cli import main\n"
        "try:\n"
        "    main([*sys.argv[1:], '--help'])\n"
        "except SystemExit as e:\n"
        "    print('EXIT', e.code)\n"
        f"print('HEAVY', [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = _python(code, *path)
    assert "Usage: breakeven" in out.stdout, out.stdout + out.stderr
    assert "EXIT 0" in out.stdout and "HEAVY []" in out.stdout, out.stdout[-500:] + out.stderr


def test_check_imports_only_what_the_check_needs():
    """``breakeven check`` reads a CSV and analyses it: no polars (ingest's), no scipy.optimize
    (fit's and the planners'), no matplotlib, and none of bench's, fleet's or the planners'
    modules (issue 43: a check of 10^6 rows within 2x pandas' read and group of the file,
    ``benchmarks/check_speed.py``); a schedule or a fit file is read only for its flag."""
    code = (
        "import sys\n"
        "from breakeven.cli import main\n"
        "try:\n"
        "    main(['check', sys.argv[1], '--json'])\n"
        "except SystemExit as e:\n"
        "    print('EXIT', e.code)\n"
        "heavy = ('polars', 'scipy.optimize', 'matplotlib', 'breakeven.bench.session',\n"
        "         'breakeven.fleet', 'breakeven.planning', 'breakeven.fitting',\n"
        "         'breakeven.iotools.ingest')\n"
        "print('HEAVY', [m for m in heavy if m in sys.modules])\n"
    )
    out = _python(code, str(Path(__file__).parent.parent / "data" / "case_study.csv"))
    assert "EXIT 0" in out.stdout and "HEAVY []" in out.stdout, out.stdout[-500:] + out.stderr


def test_a_sweeps_keeper_process_imports_nothing_heavy():
    """The keeper lives as long as its launch, one per launch: it imports no reader's
    library (it was 98 MB with pandas and polars, 14 MB without)."""
    code = (
        "import sys\n"
        "import breakeven.sweep.keeper\n"
        "heavy = [m for m in ('numpy', 'pandas', 'polars', 'scipy', 'matplotlib', 'click')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = _python(code)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_python_dash_m_works_like_the_command():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "breakeven",
            "predict",
            "--baseline-tok-s",
            "62.9",
            "--verify-ms",
            "28.7",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0
    assert json.loads(out.stdout)["breakeven_accept_len"] == pytest.approx(1.80523)
    bad = subprocess.run(
        [sys.executable, "-m", "breakeven", "predict", "--alpha", "2", "-k", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "Error: --alpha: got 2.0, expected a probability in [0, 1]: a percent? give 0.02"
    )


def test_bare_commands_print_their_help_and_exit_0():
    """``breakeven`` and ``breakeven plot`` alone are asking for help, not making a mistake:
    the help on stdout, exit 0 (it was one 1,386-character ``Error: Usage:`` line, exit 2)."""
    for args in ([], ["plot"]):
        r = subprocess.run(
            [sys.executable, "-m", "breakeven", *args], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith(f"Usage: breakeven {' '.join(args)}".rstrip() + " ")
        assert "Error" not in r.stdout


def test_the_top_help_lists_every_command_once_by_job_with_examples():
    from breakeven.cli.group import SECTIONS

    r = run_cli(["--help"], terminal_width=100)
    assert r.exit_code == 0
    listed = [name for _, names in SECTIONS for name in names]
    assert sorted(listed) == sorted(cli.commands), "a command is missing from SECTIONS"
    for title, _ in SECTIONS:
        assert f"\n{title}:\n" in r.output
    # Each command's whole first sentence, never cut off with "...".
    commands = r.output.split("Options:")[1].split("Examples:")[0]
    assert "..." not in commands.replace("(vLLM, SGLang, ...)", "")
    examples = r.output.split("Examples:\n")[1]
    assert examples.count("  breakeven ") >= len(SECTIONS)
    assert max(len(line) for line in r.output.splitlines()) <= 100


DATA = Path(__file__).parents[1] / "data"
CURVE = ["--cost-curve", str(DATA / "llama3_8b_decode_curve.csv")]
TAU = ["--accept-len", "2.1", "-k", "6"]
CASE_LOGS = Path(__file__).parent / "data" / "case_study"
ACCEPTANCE = ["--accept-len-by-k", "2:2.36,3:2.79,4:3.08", "--draft-step-ms", "0.98"]


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (
            [
                "predict",
                "--baseline-tok-s",
                "62.9",
                "--verify-ms",
                "28.7",
                "--draft-ms",
                "1.2",
                *TAU,
            ],
            "Speculation pays: 1.117x the baseline rate",
        ),
        (["check", str(DATA / "case_study.csv")], "2 speculative runs: "),
        (["fit", str(DATA / "published.csv")], "Best k: 2 for meta-llama/"),
        (
            ["optimize", "--baseline-tok-s", "62.9", "--verify-ms", "28.7", "--alpha", "0.6"],
            "Best k: ",
        ),
        (["batch", *CURVE, *ACCEPTANCE], "Break-even batch: "),
        (["schedule", *CURVE, *ACCEPTANCE, "--engine", "vllm", "--min-gain", "0"], "k by batch: "),
        (
            [
                "ingest",
                str(CASE_LOGS / "sglang_baseline.log"),
                str(CASE_LOGS / "sglang_eagle3_k3.log"),
            ],
            "7 records from 2 files (sglang_decode), by file, run and concurrency:",
        ),
        (
            [
                *("compare", "--baseline-tok-s", "90", "--baseline-at", "2026-02-02"),
                *("--spec-tok-s", "75.9", "--spec-at", "2026-02-26", "--accept-len", "2.1"),
                *("-k", "3"),
            ],
            "spec: 0.84x the baseline's rate, no interval; flagged: baseline_unverified.",
        ),
    ],
)
def test_each_commands_first_line_is_its_answer(args, answer):
    """Issue 26: the answer first, in at most 100 characters; the details follow."""
    r = run_cli(args, terminal_width=100)
    assert r.exit_code == 0, r.output
    first = r.stdout.splitlines()[0]
    assert first.startswith(answer) and len(first) <= 100, first


def test_every_commands_help_ends_with_its_examples():
    """Issue 26: each command's --help ends with examples, after the options, as gh's and
    git's do; the examples are whole command lines."""

    def commands(group, prefix):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, [*prefix, name])
            else:
                yield [*prefix, name]

    for path in commands(cli, []):
        r = run_cli([*path, "--help"], terminal_width=100)
        assert r.exit_code == 0, r.output
        tail = r.output.rstrip("\n").split("\nExamples:\n")
        assert len(tail) == 2, f"breakeven {' '.join(path)} --help has no Examples section last"
        lines = tail[1].splitlines()
        assert lines and all(
            line.lstrip().startswith(("breakeven ", "--", "ssh ")) for line in lines
        ), lines
        assert tail[1].count(f"breakeven {' '.join(path)}") >= 1


def test_an_internal_error_is_one_line_and_exit_3(monkeypatch):
    # A bug is never a traceback that exits 1 (compare --fail-if's "slower"): one line that
    # says it is a bug, with its URL password masked before the message is cut, and exit 3.
    def broken(*args, **kwargs):
        raise KeyError("http://user:s3cret-pass@host:8000/v1 " + "x" * 300)

    monkeypatch.setattr("breakeven.jobs.inputs.predict", broken)
    args = ["predict", "--baseline-tok-s", "62.9", "--cycle-ms", "29.9", "--accept-len", "2.1"]
    r = run_cli(args)
    assert r.exit_code == 3, r.output
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("Error: internal error (KeyError: ") and "a bug in breakeven" in line
    assert "s3cret" not in line and "Traceback" not in r.output
    monkeypatch.setenv("BREAKEVEN_DEBUG", "1")
    r = run_cli(args)
    assert isinstance(r.exception, KeyError)


def test_an_internal_error_masks_the_key_its_command_was_given(monkeypatch):
    # A bug whose message quotes the API key (from --api-key-env) shows it masked, before the
    # message is cut: the key's variable is read from the command line's --api-key-env.
    key = "sk-internal-0123456789abcdefghij"

    def broken(*args, **kwargs):
        raise RuntimeError("x" * 190 + key)

    monkeypatch.setattr("breakeven.jobs.measure.bench_config", broken)
    r = run_cli(
        ["bench", "--url", "http://127.0.0.1:9", "--label", "b", "--api-key-env", "K"],
        env={"K": key},
    )
    assert r.exit_code == 3, r.output
    assert key[:8] not in r.output and "internal error (RuntimeError" in r.output
