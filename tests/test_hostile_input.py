"""One test per class of bad input the CLI fuzz (tests/test_fuzz_cli.py) and issue 11 found.

Each class is fixed where every command passes: output paths in ``iotools/paths.py``, named
pipes and long cells in ``iotools/sources.py``, cells in the measurement readers, numbers as
typed in the CLI's float type, overflow in ``_emit``, control characters in ``formatting``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import invoke, one_line_exit_2, run_cli

from breakeven import BreakevenError
from breakeven.core.errors import UnreadableInput
from breakeven.iotools import read_cost_curve, read_measurements, sources
from breakeven.iotools.paths import check_output_path
from breakeven.measurements.check import check, check_file
from breakeven.model.costs import expected_distinct_experts

ROOT = Path(__file__).resolve().parents[1]
CASE_STUDY = ROOT / "data" / "case_study.csv"
CURVE = ROOT / "data" / "llama3_8b_decode_curve.csv"
LOG = ROOT / "tests" / "data" / "case_study" / "sglang_baseline.log"
PROM = ROOT / "tests" / "data" / "engines" / "vllm_metrics__pr41916_spec_decode_excerpt.prom"
HEADER = CASE_STUDY.read_text().splitlines()[7]
ROW = "r,{label},,sglang,m,h,1,{k},eagle3,{tok_s},,{tau},,,,,,{env},src,client"


def measurements(tmp_path, *rows, header=HEADER, name="m.csv"):
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def row(label="spec", k=3, tok_s=70, tau=2.1, env="tp=8"):
    return ROW.format(label=label, k=k, tok_s=tok_s, tau=tau, env=env)


BASE = row(label="base", k=0, tau="")


def _as_nobody(call):
    """``call()``'s exit code and last line of stderr, run as an unprivileged user (in a forked
    child when the tests run as root, with every module it needs already imported)."""

    def summary(r):
        return {"exit_code": r.exit_code, "last": r.stderr.rstrip("\n").rsplit("\n", 1)[-1]}

    if os.geteuid() != 0:
        return summary(call())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report, and leave without cleaning up
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, json.dumps(summary(call())).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


# Each writer, with the flags it needs besides --out, and whether --out is a directory.
WRITERS = {
    "ingest": (["ingest", LOG], False),
    "plot surface": (["plot", "surface", "--baseline-tok-s", 62.9, "--verify-ms", 28.7], False),
    "plot k": (["plot", "k", "--alpha", 0.8, "--cost-ratio", 0.05], False),
    "plot batch": (["plot", "batch", "--cost-curve", CURVE, "--alpha", 0.7], False),
    "plot check": (["plot", "check", CASE_STUDY], False),
    "plot sensitivity": (
        ["plot", "sensitivity", "--baseline-tok-s", 62.9, "--verify-ms", 28.7, "--accept-len", 2.1],
        False,
    ),
    "report": (["report", CASE_STUDY], True),
}


class TestOutputPaths:
    """A place that cannot be written: one line naming --out and the path, before any work."""

    @pytest.mark.parametrize("writer", list(WRITERS))
    @pytest.mark.parametrize("where", ["empty", "missing_dir", "proc", "under_a_file", "a_dir"])
    def test_every_writer_refuses_in_one_line(self, tmp_path, writer, where):
        args, directory = WRITERS[writer]
        name = "report" if directory else ("out.csv" if writer == "ingest" else "out.png")
        out = {
            "empty": "",
            "missing_dir": str(tmp_path / "no" / "such" / name),
            "proc": f"/proc/{name}",
            "under_a_file": str(CASE_STUDY / name),
            "a_dir": str(tmp_path),
        }[where]
        if directory and where == "a_dir":
            out = str(CASE_STUDY)  # a file where a directory goes
        if directory and where == "missing_dir":
            return  # report creates missing directories (README: "created if missing")
        r = invoke(*args, "--out", out)
        line = one_line_exit_2(r, "--out")
        assert repr(out) in line or where == "a_dir", line
        assert not (tmp_path / "no").exists()

    @pytest.mark.parametrize("writer", list(WRITERS))
    def test_an_unwritable_directory(self, tmp_path, writer):
        args, directory = WRITERS[writer]
        # Root writes through chmod 0o500: as root, the command runs in a child process that
        # is the unprivileged user nobody, in a directory it may enter.
        place = Path(tempfile.mkdtemp(prefix="breakeven-locked-"))
        try:
            place.chmod(0o755)
            locked = place / "locked"
            locked.mkdir(mode=0o555)
            out = locked / ("report" if directory else "out.png")
            invoke(*args, "--out", tmp_path / "warm.png" if not directory else tmp_path / "w")
            r = _as_nobody(lambda: invoke(*args, "--out", out))
            assert r["exit_code"] == 2, r
            assert r["last"].startswith("Error: --out: cannot write") and "denied" in r["last"], r
        finally:
            shutil.rmtree(place, ignore_errors=True)

    def test_the_check_bench_calls(self, tmp_path):
        assert check_output_path(tmp_path / "runs.csv", "out") == str(tmp_path / "runs.csv")
        assert check_output_path(tmp_path / "a" / "b", "out", directory=True)
        with pytest.raises(BreakevenError, match=r"^out: cannot write '/proc/x.csv': no file"):
            check_output_path("/proc/x.csv")
        with pytest.raises(BreakevenError, match="does not exist"):
            check_output_path(tmp_path / "missing" / "runs.csv")
        with pytest.raises(BreakevenError, match="names a directory"):
            check_output_path(f"{tmp_path}/new/")  # a directory's name, not a file's

    def test_a_failed_write_names_the_flag(self, tmp_path, monkeypatch):
        from breakeven.iotools import atomic

        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(atomic, "_publish", full)
        r = invoke(*WRITERS["plot surface"][0], "--out", tmp_path / "s.png")
        one_line_exit_2(r, "--out", "No space left on device")
        assert not list(tmp_path.iterdir())


# Each reader of a file, given the file.
READERS = {
    "check": lambda p: ["check", p],
    "report": lambda p: ["report", p, "--out", "{tmp}/r"],
    "plot check": lambda p: ["plot", "check", p, "--out", "{tmp}/c.png"],
    "batch": lambda p: ["batch", "--cost-curve", p, "--accept-len", 2.1, "-k", 3],
    "ingest --before": lambda p: ["ingest", PROM, "--before", p],
    "ingest": lambda p: ["ingest", p],
}


class TestNamedPipes:
    """A FIFO is read as a stream, and one that no process writes is refused, never waited on."""

    @pytest.mark.parametrize("reader", list(READERS))
    def test_without_a_writer_is_refused(self, tmp_path, monkeypatch, reader):
        monkeypatch.setattr(sources, "FIFO_WRITER_WAIT_S", 0.2)
        fifo = tmp_path / "pipe.csv"
        os.mkfifo(fifo)
        args = [str(a).replace("{tmp}", str(tmp_path)) for a in READERS[reader](fifo)]
        start = time.monotonic()
        r = invoke(*args)
        assert time.monotonic() - start < 10
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert "no process wrote to within 0.2 s" in r.output

    @pytest.mark.parametrize("reader", ["check", "batch"])
    def test_with_a_writer_is_read_as_a_stream(self, tmp_path, reader):
        fifo = tmp_path / "pipe.csv"
        os.mkfifo(fifo)
        source = CASE_STUDY if reader == "check" else CURVE

        def write():
            time.sleep(0.3)  # the reader waits for its writer
            with open(fifo, "wb") as f:
                f.write(source.read_bytes())

        writer = threading.Thread(target=write)
        writer.start()
        r = invoke(*[str(a) for a in READERS[reader](fifo)], "--json")
        writer.join()
        assert r.exit_code == 0, r.output
        direct = invoke(*[str(a) for a in READERS[reader](source)], "--json")
        assert json.loads(r.stdout) == json.loads(direct.stdout)

    def test_the_wait_is_the_documented_one(self, tmp_path):
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        start = time.monotonic()
        with pytest.raises(UnreadableInput, match="within 2 s"):
            sources.open_file(str(fifo))
        assert sources.FIFO_WRITER_WAIT_S <= time.monotonic() - start < 10


class TestCells:
    def test_a_200_kib_cell_is_read_by_every_reader(self, tmp_path):
        long_env = "NCCL_X=" + "x" * (200 << 10)
        path = measurements(tmp_path, BASE, row(env=long_env))
        data, _ = read_measurements(path)
        assert data["env"].iloc[1] == long_env
        assert invoke("check", path).exit_code == 0
        drawn = invoke("plot", "check", path, "--out", tmp_path / "c.png")  # no cycle cost given
        assert drawn.exit_code == 2 and "nothing to draw" in drawn.output, drawn.output
        assert invoke("plot", "surface", "--from", path, "--out", tmp_path / "s.png").exit_code == 0
        assert invoke("report", path, "--out", tmp_path / "r").exit_code == 0
        wide_header = measurements(
            tmp_path, BASE, header=HEADER + ",n" + "o" * (200 << 10), name="wide.csv"
        )
        assert invoke("check", wide_header).exit_code == 0
        curve = tmp_path / "curve.csv"
        curve.write_text("tokens,ms,note\n1,7,a\n128,12," + "n" * (200 << 10) + "\n")
        assert read_cost_curve(curve)[0]["ms"].tolist() == [7, 12]
        assert invoke("batch", "--cost-curve", curve, "--accept-len", 2.1, "-k", 3).exit_code == 0

    @pytest.mark.parametrize(
        ("tok_s", "shown"), [("inf", "inf"), ("-inf", "-inf"), ("-70", "-70"), ("1e400", "inf")]
    )
    def test_non_finite_or_negative_numbers_name_file_line_and_column(self, tmp_path, tok_s, shown):
        path = measurements(tmp_path, BASE, row(tok_s=tok_s))
        for command in (
            ["check", path],
            ["check", path, "--json"],
            ["report", path, "--out", tmp_path / "r"],
        ):
            one_line_exit_2(
                invoke(*command), f"{path}, line 3: tok_s is {shown}, expected a finite number >= 0"
            )

    def test_check_on_a_dataframe_refuses_them_too(self):
        base = {"model": "m", "hardware": "h", "concurrency": 1, "num_spec_tokens": 0}
        data = pd.DataFrame(
            [{**base, "tok_s": math.inf}, {**base, "num_spec_tokens": 3, "tok_s": 70.0}]
        )
        with pytest.raises(BreakevenError, match="line 2: tok_s is inf, expected a finite"):
            check(data)

    def test_a_zero_rate_divides_by_nothing(self, tmp_path):
        path = measurements(tmp_path, row(label="base", k=0, tok_s=0, tau=""), row(tok_s=0))
        r = invoke("check", path, "--json")
        assert r.exit_code == 0, r.output
        (c,) = json.loads(r.stdout)["comparisons"]
        assert c["measured_speedup"] is None and c["implied_cycle_ms"] is None

    def test_a_negative_rate_is_never_faster(self, tmp_path):
        rows = [row(label="base", k=0, tau="", tok_s=60)] * 3 + [row(tok_s=-70)] * 3
        r = invoke("check", measurements(tmp_path, *rows))
        one_line_exit_2(r, "tok_s is -70")
        assert "faster" not in r.output

    def test_duplicate_header_names_are_one_line(self, tmp_path):
        path = measurements(tmp_path, BASE, header=HEADER + ",tok_s")
        one_line_exit_2(
            invoke("check", path),
            f"{path}, line 1: column 'tok_s' appears twice",
            "columns 10 and 21",
        )
        curve = tmp_path / "curve.csv"
        curve.write_text("tokens,ms,latency_ms\n1,7,8\n128,12,13\n")
        one_line_exit_2(
            invoke("batch", "--cost-curve", curve, "--accept-len", 2.1, "-k", 1),
            "columns 2 ('ms') and 3 ('latency_ms') both name the 'ms' column",
        )

    def test_flag_text_names_whole_lines(self, tmp_path):
        path = measurements(tmp_path, BASE, row(tau=9.5))
        (flag,) = [f for f in check_file(path).flags if f.code == "accept_len_out_of_range"]
        assert flag.message.startswith("Line 3: accept_len 9.5 is above k + 1 = 4")


class TestNumbers:
    def test_json_is_strict_or_the_command_refuses(self):
        cases = [
            [
                "moe",
                "--experts",
                384,
                "--top-k",
                8,
                "--tokens",
                7,
                "--dense-bytes",
                "1e308",
                "--expert-bytes",
                "1e308",
            ],
            [
                "optimize",
                "--baseline-tok-s",
                "1e308",
                "--verify-ms",
                28.7,
                "--draft-step-ms",
                0.2,
                "--accept-len-by-k",
                "1.6,1.9",
            ],
            ["predict", "--accept-len", "1e308", "--cycle-ms", 29.9, "--baseline-tok-s", 60],
            [
                "moe",
                "--experts",
                384,
                "--top-k",
                8,
                "--tokens",
                7,
                "--dense-bytes",
                "1e308",
                "--expert-bytes",
                "4e7",
            ],
        ]

        def strict(name):
            raise AssertionError(f"{name} in --json output")

        for args in cases:
            r = invoke(*args, "--json")
            assert r.exit_code in (0, 2) and "Traceback" not in r.output, r.output
            if r.exit_code == 0:
                json.loads(r.stdout, parse_constant=strict)
            else:
                one_line_exit_2(r, "overflows")

    def test_no_table_prints_inf_or_300_digits(self):
        r = invoke(
            "moe",
            "--experts",
            384,
            "--top-k",
            8,
            "--tokens",
            7,
            "--dense-bytes",
            "1e308",
            "--expert-bytes",
            "4e7",
        )
        assert r.exit_code == 0, r.output
        assert "1.000e+308 bytes" in r.output and "inf" not in r.output
        assert max(len(word) for word in r.output.split()) < 40
        overflow = invoke(
            "moe",
            "--experts",
            384,
            "--top-k",
            8,
            "--tokens",
            7,
            "--dense-bytes",
            "1e308",
            "--expert-bytes",
            "1e308",
        )
        one_line_exit_2(overflow, "forward_bytes overflows")

    def test_ingest_writes_no_infinity(self, tmp_path):
        result = json.loads(
            (
                ROOT
                / "tests"
                / "data"
                / "engines"
                / "vllm_benchmark_serving__nerdalert_llmd_goodput_colon.jsonl"
            )
            .read_text()
            .splitlines()[0]
        )
        result["mean_tpot_ms"] = 1e-320  # tok_s = 1000 / it overflows
        source = tmp_path / "bench.json"
        source.write_text(json.dumps(result))
        out = tmp_path / "runs.csv"
        assert invoke("ingest", source, "--out", out).exit_code == 0
        assert ",inf," not in out.read_text()
        assert json.loads(invoke("ingest", source, "--json").stdout)[0]["tok_s"] is None
        assert invoke("check", out).exit_code == 0

    def test_values_are_reported_as_typed(self):
        one_line_exit_2(
            invoke("predict", "--cycle-ms", "1e400", "--baseline-tok-s", 62.9),
            "--cycle-ms: got 1e400, expected a number a double holds",
        )
        last = one_line_exit_2(
            invoke("predict", "--cycle-ms", "1e308", "--step-ms", 0.5, "--accept-len", 2.1),
            "--cycle-ms and --step-ms: got",
        )
        assert "1e+308" in last and "inf" not in last
        last = one_line_exit_2(invoke("predict", "--step-ms", "1e-320", "--verify-ms", 28.7))
        assert "--step-ms: got 1e-320" in last and "--cycle-ms" not in last
        last = one_line_exit_2(invoke("moe", "--experts", "9" * 400, "--top-k", 8, "--tokens", 3))
        assert "(400 characters)" in last and len(last) < 200

    def test_plot_surface_of_huge_acceptance_is_refused(self, tmp_path):
        r = invoke(
            "plot",
            "surface",
            "--accept-len",
            "1e308",
            "--baseline-tok-s",
            62.9,
            "--verify-ms",
            28.7,
            "--out",
            tmp_path / "s.png",
        )
        one_line_exit_2(r, "--accept-len: got 1e+308, too large to draw the surface to")

    def test_labels_are_drawn_as_given(self, tmp_path):
        r = invoke(
            "plot",
            "surface",
            "--accept-len",
            2.1,
            "--baseline-tok-s",
            62.9,
            "--verify-ms",
            28.7,
            "--label",
            "$\\frac{$",
            "--out",
            tmp_path / "s.svg",
        )
        assert r.exit_code == 0, r.output

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (
                ["optimize", "--alpha", 0.8, "--cost-ratio", 0.05, "--max-k", 10**6],
                "--max-k: got 1000000, expected a whole number from 1 to 128",
            ),
            (
                [
                    "batch",
                    "--cost-curve",
                    CURVE,
                    "--fit",
                    "linear",
                    "--alpha",
                    0.7,
                    "--max-batch",
                    10**6,
                ],
                "--max-batch: got 1000000, expected a whole number from 1 to 4096",
            ),
            (
                [
                    "plot",
                    "surface",
                    "--alpha-k",
                    "--cost-ratio",
                    0.05,
                    "-k",
                    3,
                    "--max-k",
                    10**6,
                    "--out",
                    "/tmp/never.png",
                ],
                "--max-k: got 1000000, expected a whole number",
            ),
            (
                ["ingest", LOG, "-k", 10**20],
                "-k/--num-spec-tokens: got 100000000000000000000",
            ),
        ],
    )
    def test_sizes_are_bounded_and_the_bound_is_named(self, args, message):
        start = time.monotonic()
        one_line_exit_2(invoke(*args), message)
        # A hang guard, not a speed target: a size honoured would allocate for ever.
        assert time.monotonic() - start < 60

    def test_the_bounds_are_in_help(self):
        assert "1 to 128" in invoke("optimize", "--help").output
        assert "1 to 4096" in invoke("batch", "--help").output


class TestDistinctExperts:
    @pytest.mark.parametrize("experts", [384, 10**6, 10**17, 10**20, 10**300])
    def test_a_one_token_forward_loads_top_k(self, experts):
        assert expected_distinct_experts(experts, 8, 1) == pytest.approx(8, rel=1e-12)
        # With experts far more than tokens * top_k, tokens barely share experts.
        if experts >= 10**6:
            assert expected_distinct_experts(experts, 8, 3) == pytest.approx(24, rel=1e-4)

    def test_scalars_and_arrays_agree(self):
        experts = np.array([8.0, 384, 1e17, 1e20])
        array = expected_distinct_experts(experts, 8, 3)
        assert array.tolist() == [expected_distinct_experts(float(e), 8, 3) for e in experts]
        assert array[0] == 8.0  # K = E: every expert, exactly

    def test_the_cli_says_eight(self):
        r = invoke("moe", "--experts", 10**17, "--top-k", 8, "--tokens", 3, "--json")
        assert json.loads(r.stdout)["step_active_experts"] == pytest.approx(8)


class TestControlCharacters:
    LABEL = "\x1b[2J\x1b[31mspec\x07"
    ENV = "tp=8 X=\x1b]0;title\x07y"

    def test_text_output_strips_them_and_json_keeps_them(self, tmp_path):
        path = measurements(
            tmp_path,
            row(label="base", k=0, tau="", env=self.ENV),
            row(label=self.LABEL, env="tp=8"),
        )
        text = invoke("check", path)
        assert text.exit_code == 0, text.output
        assert "spec" in text.output and "X=y" in text.output
        assert not any(c in text.output for c in "\x1b\x07")
        assert all(c.isprintable() or c == "\n" for c in text.output)
        data = json.loads(invoke("check", path, "--json").stdout)
        assert data["comparisons"][0]["label"] == self.LABEL
        invoke("report", path, "--out", tmp_path / "r")
        page = (tmp_path / "r" / "report.html").read_text()
        assert "\x1b" not in page and "\x07" not in page


@pytest.mark.parametrize(
    "command",
    [
        ["check", "{csv}"],
        ["fit", "{csv}"],
        ["plot", "check", "{csv}", "--out", "{out}.png"],
        ["report", "{csv}", "--out", "{out}.html"],
        ["compare", "b={csv}", "s={csv}"],
    ],
)
def test_a_400_digit_cell_is_one_line(tmp_path, command):
    # Issue 29: a whole number of 400 digits in a CSV cell broke check, fit, compare, report
    # and plot check (pandas raised OverflowError converting it).
    path = tmp_path / "big.csv"
    path.write_text(
        "label,model,hardware,concurrency,num_spec_tokens,tok_s,accept_len\n"
        f"b,m,h,1,0,50,\ns,m,h,1,3,{'9' * 400},2.1\n"
    )
    out = str(tmp_path / "out")
    args = [a.replace("{csv}", str(path)).replace("{out}", out) for a in command]
    r = run_cli(args)
    assert r.exit_code == 2, r.output
    assert "line 3: tok_s is 99999" in r.output and "a double holds" in r.output


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_endless_device_stops_at_a_bound(device):
    # Issue 29: ingest /dev/zero never ended (no line end, so its NULs were never looked at).
    if not os.path.exists(device):
        pytest.skip(f"{device} does not exist on this system")
    r = run_cli(["ingest", device])
    assert r.exit_code == 2
    assert "binary data (a NUL byte)" in r.output and "stopped reading" in r.output


def test_a_line_that_never_ends_stops_at_a_bound(tmp_path, monkeypatch):
    # A stream without NULs or line ends (random letters): past MAX_SKIPPED_BYTES of one
    # over-long line, reading stops with a problem (the bound made small for the test).
    from breakeven.iotools import sources

    monkeypatch.setattr(sources, "MAX_LINE_BYTES", 1 << 10)
    monkeypatch.setattr(sources, "MAX_SKIPPED_BYTES", 1 << 16)
    path = tmp_path / "letters.txt"
    path.write_bytes(b"x" * (1 << 20))
    problems = [
        item
        for item in sources.iter_blocks(sources.open_input(str(path)), block_bytes=4096)
        if isinstance(item, sources.Problem)
    ]
    assert [p.message for p in problems][-1].startswith("no line end in ")


def test_report_reads_a_named_pipe_once(tmp_path):
    # Issue 29: report read a named pipe, then waited on it again.  One writer writes the CSV
    # once and closes: the page is written from it, and nothing waits for a second writer.
    import threading

    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)
    data = (Path(__file__).parent.parent / "data" / "case_study.csv").read_bytes()
    writes = []

    def write() -> None:
        with open(fifo, "wb") as f:  # waits for the reader
            f.write(data)
        writes.append(1)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    r = run_cli(["report", str(fifo), "--out", str(tmp_path / "page")])
    writer.join(5)
    assert r.exit_code == 0, r.output
    assert writes == [1] and (tmp_path / "page" / "report.html").is_file()


@pytest.mark.parametrize(
    "bomb", ['{"a":' * 100_000 + "1" + "}" * 100_000, "[" * 100_000 + "]" * 100_000]
)
@pytest.mark.parametrize(
    "command",
    [
        ["ingest", "{bomb}"],
        ["predict", "--fit-file", "{bomb}"],
        ["check", "{csv}", "--schedule", "{bomb}"],
    ],
)
def test_json_nested_past_the_recursion_limit_is_one_line(tmp_path, bomb, command):
    # Issue 29: JSON nested 100,000 deep exhausted Python's recursion limit (RecursionError)
    # in every reader of JSON; it is refused, naming its depth, before it is parsed.
    path = tmp_path / "bomb.json"
    path.write_text(bomb)
    csv = tmp_path / "runs.csv"
    csv.write_text("label,model,hardware,concurrency,num_spec_tokens,tok_s\nb,m,h,1,0,50\n")
    args = [a.replace("{bomb}", str(path)).replace("{csv}", str(csv)) for a in command]
    r = run_cli(args)
    assert r.exit_code == 2, r.output
    assert "nested 100,000 levels deep" in r.output and "internal error" not in r.output
