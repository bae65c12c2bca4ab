"""breakeven compare: two runs to a verdict in one command, on the case study's logs and on
simulated long logs with a known answer; --fail-if exit codes; bad input."""

import json
from pathlib import Path

import numpy as np
import pytest
from cli_checks import run_cli

from breakeven.measurements.compare import compare, parse_run

HERE = Path(__file__).resolve().parent
CASE = HERE / "data" / "case_study"
DATA = HERE.parent / "data"


def run(*args):
    return run_cli(["compare", *map(str, args)])


def sglang_log(path, rates, accept_len=None, start_minute=0):
    """An SGLang decode log with these per-window rates (concurrency 1)."""
    lines = []
    for i, rate in enumerate(rates):
        s = start_minute * 60 + i
        spec = f"accept len: {accept_len:.2f}, accept rate: 0.40, " if accept_len else ""
        lines.append(
            f"[2026-02-26 10:{s // 60 % 60:02d}:{s % 60:02d} TP0] Decode batch, "
            f"#running-req: 1, #token: {100 + 40 * i}, token usage: 0.00, {spec}"
            f"cuda graph: True, gen throughput (token/s): {rate:.2f}, #queue-req: 0"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_case_study_from_two_sglang_logs():
    r = run(
        f"baseline={CASE / 'sglang_baseline.log'}",
        f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}",
        "-k",
        3,
        "--verify-ms",
        28.7,
        "--draft-ms",
        1.2,
        "--json",
    )
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["runs"]
    assert row["measured_speedup"] == pytest.approx(75.9 / 62.9, rel=0.01)  # about 1.2x
    assert row["num_spec_tokens"] == 3 and row["accept_len"] == pytest.approx(2.1)
    assert row["breakeven_accept_len"] == pytest.approx(29.9 / (1000 / 62.7667), rel=1e-3)
    # Three decode windows a side: too few for an honest interval, and it says so.
    assert row["verdict"] == "no interval" and "too few for an interval" in row["interval_method"]
    text = run(
        f"baseline={CASE / 'sglang_baseline.log'}", f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}"
    )
    first, why = text.output.splitlines()[:2]
    assert first == (
        "eagle3-k3: 1.21x the baseline's rate, no interval; flagged: baseline_unverified."
    )
    assert why.startswith("  The baseline came from another launch 20 minutes earlier")
    assert "Repeat both runs in new launches" in text.output


def test_against_the_stale_baseline_it_is_flagged(tmp_path):
    rows = (DATA / "case_study.csv").read_text().splitlines()
    header = next(line for line in rows if line.startswith("run_id,"))
    stale = tmp_path / "stale.csv"
    stale.write_text(header + "\n" + next(line for line in rows if line.startswith("s1-")) + "\n")
    r = run(
        f"stale={stale}",
        f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}",
        "-k",
        3,
        "--env",
        "tp=8",
        "--json",
    )
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    (row,) = result["runs"]
    assert row["measured_speedup"] == pytest.approx(75.9 / 90, rel=0.01)
    assert "stale_baseline" in row["flags"]
    assert any("NCCL_PROTO=LL" in f["message"] for f in result["flags"])


def test_long_logs_give_an_interval_within_one_launch(tmp_path):
    rng = np.random.default_rng(3)
    base = sglang_log(tmp_path / "base.log", 60 + rng.normal(0, 1.5, 64))
    spec = sglang_log(tmp_path / "spec.log", 72 + rng.normal(0, 2.0, 64), accept_len=2.2)
    result = compare(parse_run(f"baseline={base}"), [parse_run(f"eagle3={spec}")])
    (row,) = result.runs
    assert row.verdict == "faster" and row.ci_low < 1.2 < row.ci_high
    assert row.headline.startswith("eagle3 is 1.2")
    assert "faster than baseline (95% interval 1.1" in row.headline
    assert ", within one run each); flagged: baseline_unverified" in row.headline
    assert row.interval_covers == (
        "within one run each, so run-to-run variation (a server restart) is not included"
    )
    # The first window of a log may follow idle time: it keeps no rate, 63 are left.
    assert "batch means over 63 values in 4 batches" in row.interval_method


def test_launches_apart_and_files_of_one_launch_joined(tmp_path):
    rng = np.random.default_rng(4)

    def launch(name, mean, accept_len=None):
        return sglang_log(tmp_path / name, mean + rng.normal(0, 1.0, 20), accept_len)

    bases = [launch(f"b{i}.log", 60 * (1 + rng.normal(0, 0.03))) for i in range(3)]
    specs = [launch(f"s{i}.log", 72 * (1 + rng.normal(0, 0.03)), 2.2) for i in range(3)]
    result = compare(
        parse_run("base=" + ",".join(map(str, bases))),
        [parse_run("spec=" + ",".join(map(str, specs)))],
    )
    (row,) = result.runs
    assert row.interval_covers == "across 3 and 3 runs" and row.verdict == "faster"
    assert row.ci_low < 1.2 < row.ci_high and not result.advice
    joined = compare(
        parse_run("base=" + "+".join(map(str, bases))),
        [parse_run("spec=" + "+".join(map(str, specs)))],
    )
    assert joined.runs[0].interval_covers.startswith("within one run each")


@pytest.mark.parametrize(
    ("condition", "code"), [("slower", 0), ("not-faster", 1), ("flagged", 1), (None, 0)]
)
def test_fail_if_exit_codes(condition, code):
    args = [
        f"baseline={CASE / 'sglang_baseline.log'}",
        f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}",
        "-k",
        3,
        "--verify-ms",
        28.7,
        "--draft-ms",
        1.2,
    ]
    r = run(*args, *(["--fail-if", condition] if condition else []))
    assert r.exit_code == code, r.output  # no interval: not faster; prediction_mismatch: flagged


def test_a_slower_run_fails_the_gate(tmp_path):
    rng = np.random.default_rng(5)
    base = sglang_log(tmp_path / "base.log", 60 + rng.normal(0, 1.0, 40))
    spec = sglang_log(tmp_path / "spec.log", 50 + rng.normal(0, 1.0, 40), accept_len=1.4)
    r = run(f"baseline={base}", f"ngram={spec}", "--fail-if", "slower")
    assert r.exit_code == 1 and r.output.startswith("ngram is slower than baseline: 0.8")


@pytest.mark.parametrize(
    "args",
    [
        ["missing.log", str(CASE / "sglang_eagle3_k3.log")],
        [f"a={CASE / 'sglang_baseline.log'}", f"a={CASE / 'sglang_eagle3_k3.log'}"],
        [
            str(CASE / "sglang_baseline.log"),
            str(CASE / "sglang_eagle3_k3.log"),
            "--cycle-ms",
            "29.9",
            "--verify-ms",
            "28.7",
        ],
        [
            str(CASE / "sglang_baseline.log"),
            str(CASE / "sglang_eagle3_k3.log"),
            "-k",
            "3",
            "-k",
            "4",
        ],
        [
            str(CASE / "sglang_baseline.log"),
            str(CASE / "sglang_eagle3_k3.log"),
            "--verify-ms",
            "nan",
        ],
    ],
)
def test_bad_input_is_one_line(args):
    r = run(*args)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and r.output.count("\n") == 1
    assert "Traceback" not in r.output


def first_line(page: str, n: int = 0) -> str:
    """The first line of text a reader sees on a report page (what <body> shows first), or the
    line ``n`` after it."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.inside, self.skip, self.parts = False, 0, []

        def handle_starttag(self, tag, attrs):
            self.inside |= tag == "body"
            self.skip += tag in ("style", "script", "title")

        def handle_endtag(self, tag):
            self.skip -= tag in ("style", "script", "title")

        def handle_data(self, data):
            if self.inside and not self.skip and data.strip():
                self.parts.append(data.strip())

    parser = Text()
    parser.feed(page)
    return parser.parts[n]


VLLM_BASE = CASE / "vllm_bench_serve_baseline.json"
VLLM_SPEC = CASE / "vllm_bench_serve_eagle3_k3.json"


@pytest.mark.parametrize(
    ("base", "spec"),
    [
        (CASE / "sglang_baseline.log", CASE / "sglang_eagle3_k3.log"),
        (VLLM_BASE, VLLM_SPEC),
    ],
)
def test_the_case_study_end_to_end_with_compare_only(tmp_path, base, spec):
    # k = 3 is about 1.2x faster than the real baseline; the report's first line says so.
    report = tmp_path / "report"
    r = run(f"baseline={base}", f"eagle3-k3={spec}", "-k", 3, "--json", "--report", report)
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["runs"]
    assert row["measured_speedup"] == pytest.approx(75.9 / 62.9, rel=0.01)
    assert row["accept_len"] == pytest.approx(2.1, abs=0.01) and row["num_spec_tokens"] == 3
    assert row["implied_cycle_ms"] == pytest.approx(1000 * 2.1 / 75.9, rel=0.01)
    page = (report / "report.html").read_text()
    line, why = first_line(page), first_line(page, 1)
    assert line.startswith("eagle3-k3: 1.21x the baseline's rate, no interval")
    assert 'class="headline noise"' in page  # no interval
    # Two files of two launches, neither recording its server's environment: the headline says
    # so, and the line under it how long before the baseline ran (the constructed vLLM files
    # share one date).
    assert line.endswith("flagged: baseline_unverified.")
    line = why
    assert line.startswith("The baseline came from another launch ")
    if base.suffix == ".log":
        assert "20 minutes earlier (2026-02-26 16:41; the run 2026-02-26 17:02)" in line
    assert "nothing shows whether that launch was configured the same way" in line
    # The same files with the launches' settings named: a fair pair.
    r = run(f"baseline={base}", f"eagle3-k3={spec}", "-k", 3, "--env", "tp=8", "--json")
    assert json.loads(r.stdout)["runs"][0]["flags"] == ["baseline_unverified"]  # one side
    r = run(
        f"baseline={base}",
        f"eagle3-k3={spec}",
        *("-k", 3, "--env", "tp=8", "--baseline-env", "tp=8", "--json"),
    )
    assert json.loads(r.stdout)["runs"][0]["flags"] == []


@pytest.mark.parametrize("spec", [CASE / "sglang_eagle3_k3.log", VLLM_SPEC])
def test_against_the_stale_90_baseline_the_report_says_so_first(tmp_path, spec):
    rows = (DATA / "case_study.csv").read_text().splitlines()
    header = next(line for line in rows if line.startswith("run_id,"))
    stale = tmp_path / "stale.csv"
    row = next(line for line in rows if line.startswith("s1-"))
    if spec.suffix == ".json":  # the same deployment, as vLLM names its model
        row = row.replace("Kimi-K2.5 INT4", json.loads(spec.read_text())["model_id"])
    stale.write_text(header + "\n" + row + "\n")
    report = tmp_path / "report"
    r = run(f"stale={stale}", f"eagle3-k3={spec}", "-k", 3, "--env", "tp=8", "--report", report)
    assert r.exit_code == 0, r.output
    page = (report / "report.html").read_text()
    line, why = first_line(page), first_line(page, 1)
    assert line == "eagle3-k3: 0.84x the stale's rate, no interval; flagged: stale_baseline."
    assert why == (
        "The baseline's launch had NCCL_ALGO=Ring NCCL_BUFFSIZE=16777216 "
        "NCCL_MAX_NCHANNELS=16 NCCL_NTHREADS=512 NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL; the "
        "speculative run's launch (2026-02-26 17:02) has none of them."
    )
    assert r.output.splitlines()[0] == line  # the terminal's first line is the page's


def test_the_report_is_never_written_over_without_force(tmp_path):
    report = tmp_path / "report"
    args = [str(VLLM_BASE), str(VLLM_SPEC), "--report", report]
    assert run(*args).exit_code == 0
    before = (report / "report.html").read_text()
    r = run(*args)
    assert r.exit_code == 2 and "--report" in r.output and "--force" in r.output, r.output
    assert (report / "report.html").read_text() == before
    assert run(*args, "--force").exit_code == 0
    r = run(*args[:2], "--report", tmp_path / "report" / "report.html")  # a file, not a directory
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output


def test_a_report_leaves_out_a_figure_with_nothing_to_show(tmp_path):
    # No costs given: no predicted speedup, so no measured-against-predicted figure; the page
    # says what is missing instead of drawing an empty chart.
    report = tmp_path / "report"
    assert run(str(VLLM_BASE), str(VLLM_SPEC), "--report", report).exit_code == 0
    page = (report / "report.html").read_text()
    assert page.count("<svg") == 1  # the surface, with the run placed
    assert "Measured against predicted speedup: left out, no run has both" in page


def test_a_baseline_of_another_model_is_named_in_the_flag(tmp_path):
    # The CSV's baseline is of "Kimi-K2.5 INT4"; vLLM's JSON names its model by its id: no
    # pairing across models, and the flag says which baselines there were.
    rows = (DATA / "case_study.csv").read_text().splitlines()
    header = next(line for line in rows if line.startswith("run_id,"))
    stale = tmp_path / "stale.csv"
    stale.write_text(header + "\n" + next(line for line in rows if line.startswith("s1-")) + "\n")
    r = run(f"stale={stale}", str(VLLM_SPEC), "--json")
    (flag,) = json.loads(r.stdout)["flags"]
    assert flag["code"] == "baseline_missing"
    assert (
        "moonshotai/Kimi-K2.5" in flag["message"] and "Kimi-K2.5 INT4 on 8x RTX" in flag["message"]
    )


def test_two_bench_invocations_are_two_runs_not_two_launches(tmp_path):
    # Issue 23, finding 5: a bench CSV's run_ids are invocations of bench, not server starts
    # (the server was never restarted between them).  compare counts them as runs and never
    # calls them launches.
    rng = np.random.default_rng(5)
    lines = [
        "model,hardware,concurrency,run_id,label,num_spec_tokens,tok_s,accept_len,"
        "completion_tokens,origin"
    ]
    for run_id, k, mean in (("b-1", 0, 60), ("b-2", 0, 60), ("s-1", 3, 72), ("s-2", 3, 72)):
        for rate in mean + rng.normal(0, 1.0, 20):
            accept = 2.2 if k else ""
            lines.append(f"m,h,1,{run_id},{run_id[0]},{k},{rate:.3f},{accept},65,client")
    path = tmp_path / "bench.csv"
    path.write_text("\n".join(lines) + "\n")
    result = compare(parse_run(f"base={path}"), [parse_run(f"spec={path}")])
    (row,) = result.runs
    assert row.interval_covers == "across 2 and 2 runs"
    assert "launch" not in row.headline and "launch" not in row.interval_method


def test_a_label_with_braces_is_named_as_written():
    # Issue 29: a run label with a brace reached an error template unescaped (a ValueError
    # from str.format).  The message names the labels as written; and a template that gets
    # an unescaped value anyway prints it, never raises.
    from breakeven.core.errors import BreakevenError

    r = run(f"{{x={VLLM_BASE}", f"{{x={VLLM_SPEC}")
    assert r.exit_code == 2
    assert "two runs are named alike ({x, {x)" in r.output
    assert str(BreakevenError("{0}: a {1} b {x} }{ {{ok}}", "runs")) == "runs: a {1} b {x} }{ {ok}"


def test_a_csv_of_many_empty_columns_compares_as_its_used_columns(tmp_path):
    # Issue 29: compare read every column of a CSV run (100,000 empty ones took over a minute,
    # benchmarks/wide_csv.py); it reads the columns check uses, with the same answer.
    head = "label,model,hardware,concurrency,num_spec_tokens,tok_s,accept_len"
    rows = [f"b,m,h,1,0,{50 + i % 3}," for i in range(6)] + [
        f"s,m,h,1,3,{60 + i % 3},2.1" for i in range(6)
    ]
    narrow, wide = tmp_path / "narrow.csv", tmp_path / "wide.csv"
    narrow.write_text("\n".join([head, *rows]) + "\n")
    extra = "," * 2000
    head_wide = head + "".join(f",x{i}" for i in range(2000))
    wide.write_text("\n".join([head_wide, *(r + extra for r in rows)]) + "\n")
    answers = []
    for path in (narrow, wide):
        r = run(f"b={path}", f"s={path}", "--json")
        assert r.exit_code == 0, r.output
        answer = json.loads(r.stdout)
        answer.pop("sources")
        answers.append(answer)
    assert answers[0] == answers[1]
