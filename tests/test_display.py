"""Issue 26: every command's text fits a terminal 100 columns wide (``COLUMNS=100``, as
``tests/conftest.py`` sets for every test), and ``--wide`` gives back every column.

Each command runs on the bundled data as a user would run it first.  ``bench``, ``fleet`` and
``sweep`` need a server: their widths are checked where their suites run one
(``test_bench.py``, ``test_fleet.py``, ``test_sweep_run.py``)."""

import io
import json
import re
import shlex
import subprocess

import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

CASE = "tests/data/case_study"
CURVE = "--cost-curve data/llama3_8b_decode_curve.csv"
ACCEPTANCE = "--accept-len-by-k 2:2.36,3:2.79,4:3.08,5:3.32,6:3.46,7:3.54 --draft-step-ms 0.98"
VLLM_FIT = "tests/data/published/vllm_issue20780_llama31_8b_eagle_bs1.csv"

COMMANDS = [
    "predict --step-ms 11.1 --cycle-ms 29.9 --accept-len 2.1",
    "predict --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1 -k 6",
    "optimize --baseline-tok-s 62.9 --verify-ms 28.7 --draft-step-ms 0.2 "
    "--accept-len-by-k 1.6,1.9,2.05,2.1",
    "optimize --alpha 0.8 --cost-ratio 0.05",
    "optimize --tree --cost-curve data/llama3_8b_decode_curve.csv --alpha 0.7 "
    "--rank-decay 0.2 --draft-step-ms 0.2 --batch 2",
    f"batch {CURVE} --alpha 0.7 --max-k 8",
    f"batch {CURVE} --fit linear --accept-len 2.1 -k 3 --max-batch 1000",
    "moe --experts 384 --top-k 8 --shared 1 --tokens 7",
    "check data/case_study.csv",
    "check data/published.csv",
    f"compare baseline={CASE}/sglang_baseline.log eagle3-k3={CASE}/sglang_eagle3_k3.log -k 3 "
    "--verify-ms 28.7 --draft-ms 1.2",
    "compare --baseline-tok-s 90 --baseline-at 2026-02-02 --spec-tok-s 75.9 "
    "--spec-at 2026-02-26 --accept-len 2.1 -k 3",
    f"compare {CASE}/vllm_bench_serve_baseline.json {CASE}/vllm_bench_serve_eagle3_k3.json",
    f"fit {VLLM_FIT}",
    "fit data/published.csv",
    f"schedule {CURVE} {ACCEPTANCE} --engine vllm --spec-method eagle3 --min-gain 0.005 "
    "--max-num-seqs 256",
    f"schedule {CURVE} {ACCEPTANCE} --engine sglang --min-gain 0",
    f"schedule {CURVE} {ACCEPTANCE} --engine vllm-legacy",
    f"ingest {CASE}/sglang_baseline.log {CASE}/sglang_eagle3_k3.log",
    "sweep --serve 'vllm serve /models/kimi-k2.5 --tensor-parallel-size 8 --port {port}' "
    "--engine vllm --spec-method eagle3 --draft /models/eagle3 -k 0,3,6 --concurrency 1,8 "
    "--repeats 2 --ready-timeout 1800 --plan",
    "sweep --serve 'llama-server -m /models/target.gguf --port {port}' --engine llamacpp "
    "--draft /models/draft.gguf -k 0,4,8 --plan",
]


def _run(command):
    r = run_cli(shlex.split(command))
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_fits_100_columns(command, monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).parents[1])
    out = _run(command)
    wide = [line for line in out.splitlines() if len(line) > 100]
    assert not wide, f"{len(wide)} lines over 100 columns, e.g. {wide[0]!r}"
    assert out.strip(), "the command printed nothing"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith(("check", "compare"))])
def test_wide_shows_every_column_and_says_nothing_is_left_out(command, monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).parents[1])
    narrow, wide = _run(command), _run(f"{command} --wide")
    assert "(not shown: " in narrow and "--wide" in narrow
    assert "not shown" not in wide and "residual [x]" in wide
    assert max(len(line) for line in wide.splitlines()) > 100


def test_color_marks_the_verdicts_and_leaves_the_layout_as_it_is(monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).parents[1])
    plain = _run("check data/case_study.csv")  # CliRunner's output is not a terminal
    coloured = _run("check data/case_study.csv --color")
    assert "\x1b" not in plain and _run("check data/case_study.csv --no-color") == plain
    assert "\x1b[33mno interval\x1b[0m" in coloured  # warn: yellow
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain  # colour takes no column
    first = _run(
        "predict --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1 -k 6 --color"
    )
    assert first.startswith("\x1b[1;32mSpeculation pays: ")  # a win: green


def test_colour_follows_the_terminal_unless_no_color_is_set(monkeypatch):
    from breakeven.cli.group import use_color

    terminal = type("Terminal", (), {"isatty": lambda self: True})()
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(None, terminal) and not use_color(None, io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(None, terminal)
    assert use_color(True, io.StringIO()) and not use_color(False, terminal)


def test_text_fits_the_width_it_is_given_and_a_pasted_config_stays_one_command():
    """A flag and its JSON value broken over lines inside its quotes: the shell reads the same
    arguments, and the JSON the same object."""
    from breakeven.core.display import display
    from breakeven.render.text import command_lines

    words = shlex.split(
        "vllm serve /m --port 8000 --speculative-config '"
        + json.dumps({"method": "eagle3", "num_speculative_tokens": 3, "a_long_key": [1] * 20})
        + "'"
    )
    for width in (40, 60, 100):
        with display(width):
            lines = command_lines(words)
        assert len(lines) > 1 and all(len(line) <= width for line in lines[:-1])
        r = subprocess.run(
            ["bash", "-c", 'printf "%s\\0" ' + "\n".join(lines)[2:].removeprefix("vllm ")],
            capture_output=True,
            text=True,
            check=True,
        )
        got = r.stdout.split("\0")[:-1]
        assert got[:-1] == words[1:-1] and json.loads(got[-1]) == json.loads(words[-1])


@pytest.mark.parametrize(
    "command",
    [
        "check data/case_study.csv",
        f"compare {CASE}/vllm_bench_serve_baseline.json {CASE}/vllm_bench_serve_eagle3_k3.json",
        f"fit {VLLM_FIT}",
        f"schedule {CURVE} {ACCEPTANCE} --engine vllm",
        f"batch {CURVE} --alpha 0.7 --max-k 8",
        "optimize --alpha 0.8 --cost-ratio 0.05",
    ],
)
def test_format_prints_the_main_table_every_column_as_markdown_or_csv(command, monkeypatch):
    """Issue 26: --format markdown|csv print a command's main table whole (the columns text
    leaves out at 100 columns included), for a planning doc or a spreadsheet; json is --json."""
    import csv as csv_module

    monkeypatch.chdir(__import__("pathlib").Path(__file__).parents[1])
    text, markdown, table = (_run(f"{command} --format {f}") for f in ("text", "markdown", "csv"))
    assert text == _run(command) and _run(f"{command} --format json") == _run(f"{command} --json")
    rows = list(csv_module.reader(io.StringIO(table)))
    heads = rows[0]
    assert len(rows) >= 2 and all(len(row) == len(heads) for row in rows)
    assert all("[" in h for h in heads if h.startswith(("k ", "speedup", "measured")))  # units
    lines = markdown.splitlines()
    assert lines[0] == "| " + " | ".join(heads) + " |" and set(lines[1]) == {"|", "-"}
    assert len(lines) == len(rows) + 1


def test_format_csv_of_a_command_without_a_table_is_refused_in_one_line():
    r = run_cli(["predict", "--alpha", "0.8", "-k", "4", "--cost-ratio", "0.05", "--format", "csv"])
    assert r.exit_code == 2
    assert r.output == (
        "Error: --format: got 'csv', but this command prints no table; expected text or json\n"
    )


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(40, 120),
    flags=st.lists(
        st.sampled_from(
            ["baseline_drift", "baseline_unverified", "prediction_mismatch", "launches_disagree"]
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_a_table_never_splits_a_word_or_a_flag_code(width, flags):
    """Issue 43: a wrapped column breaks between words only (it showed ``baseline_unve`` and
    ``rified`` on two lines); where no word would fit, the table shortens or drops columns."""
    from breakeven.core.display import display
    from breakeven.render.text import grid

    heads = ["run", "k [tokens]", "speedup [x]", "verdict", "flags"]
    row = ["vllm_bench_serve_eagle3_k3", "3", "1.207", "no interval", ", ".join(flags)]
    with display(width=width):
        lines = grid(heads, [row], right=False, cut=("run",))
    words = {w for line in lines for w in line.replace(",", " ").split()}
    for code in flags:
        assert code in words or not any(code[:5] in line for line in lines), (width, lines)
