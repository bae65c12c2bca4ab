"""``ingest --out``'s fast path (breakeven.iotools.logrows) writes exactly the rows of the
record path: the same bytes, the same problems, for any log and any block size.

The record path (``iter_log`` -> ``complete`` -> ``csv_rows``) is the reference: it is what
``ingest --json`` and the Python API return, and what test_ingest.py checks against real
engine output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.cli import cli
from breakeven.iotools import logrows, logs
from breakeven.iotools.ingest import detect_format
from breakeven.iotools.logrows import CANONICAL_DECODE, iter_log_rows
from breakeven.iotools.records import Tally, complete, csv_rows

DATA = Path(__file__).parent / "data" / "engines"
LOG_FIXTURES = sorted(
    p for p in DATA.iterdir() if p.suffix == ".txt" and detect_format(str(p)) == "log"
)


def by_records(path, k=None, stamp=None):
    problems = []
    rows = csv_rows(complete(r, stamp or {}) for r in logs.iter_log(path, problems, k))
    return rows, [str(p) for p in problems]


def by_rows(path, k=None, stamp=None, workers=1, block_bytes=None):
    problems, tally = [], Tally()
    rows = b"".join(iter_log_rows(path, problems, tally, num_spec_tokens=k, stamp=stamp,
                                  workers=workers, block_bytes=block_bytes))  # fmt: skip
    assert tally.records == rows.count(b"\n")  # a row a record: no field here holds a newline
    return rows, [str(p) for p in problems]


def test_there_are_log_fixtures():
    assert len(LOG_FIXTURES) >= 12


@pytest.mark.parametrize("path", LOG_FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("block", [None, 64, 700])
def test_real_logs_give_the_same_rows(path, k, block):
    assert by_rows(path, k, block_bytes=block) == by_records(path, k)


@pytest.mark.parametrize(
    "stamp",
    [
        {"label": "eagle3-k3", "model": "Kimi-K2.5", "run_id": "r1"},
        {"label": "a, b", "env": 'NCCL_P2P_LEVEL=SYS "x"'},  # cells that need quoting
        {"label": "50%~ of ~7~"},  # template syntax in a value: the general path writes
    ],
)
def test_stamps_give_the_same_rows(stamp):
    path = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
    assert by_rows(path, 3, stamp) == by_records(path, 3, stamp)


def test_a_path_that_needs_quoting(tmp_path):
    src = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
    path = tmp_path / 'odd, "name" 100%.log'
    path.write_bytes(src.read_bytes())
    rows, problems = by_rows(path)
    assert (rows, problems) == by_records(path)
    assert b'"' in rows  # the source cell is quoted


# --- Generated logs: every kind of line, in any order, cut into blocks anywhere ---------------

STAMPS = st.builds(lambda h, m, s: f"2026-02-26 {h:02d}:{m:02d}:{s:02d}", st.integers(0, 23),
                   st.integers(0, 1), st.integers(0, 2))  # fmt: skip
DECIMAL = st.one_of(
    st.floats(0, 999, allow_nan=False).map(lambda x: f"{x:.2f}"),  # trailing zeros: 2.50
    st.sampled_from(["0.00", "1.0", "0.0001", "0.00001", "12.3456", "007.5", "1e3", "inf"]),
)
COUNT = st.one_of(st.integers(0, 300).map(str), st.sampled_from(["0", "05", "1" * 16]))


GOOD_DECIMAL = st.floats(0, 999, allow_nan=False).map(lambda x: f"{x:.2f}")  # 2.50 too
GOOD_COUNT = st.integers(1, 300).map(str)


@st.composite
def decode_line(draw):
    """Mostly lines the column-wise path takes, sometimes ones it must leave alone."""
    odd = draw(st.integers(0, 4)) == 4  # shrinks towards canonical lines
    decimal, count = (DECIMAL, COUNT) if odd else (GOOD_DECIMAL, GOOD_COUNT)
    tags = draw(st.sampled_from(["", " TP0", " DP1 TP3", " tp0", " TP12345"] if odd else
                                [" TP0", " DP1 TP3"]))  # fmt: skip
    sep = draw(st.sampled_from([",", ".", ";"] if odd else [",", "."]))
    fields = [f"#running-req: {draw(count)}", f"#token: {draw(count)}",
              f"token usage: {draw(decimal)}"]  # fmt: skip
    if draw(st.booleans()):
        fields.append(f"accept len: {draw(decimal)}")
        if draw(st.booleans()):
            fields.append(f"accept rate: {draw(decimal)}")
    if draw(st.booleans()):
        fields.append(f"cuda graph: {draw(st.sampled_from(['True', 'False']))}")
    fields.append(f"gen throughput (token/s): {draw(decimal)}")
    if draw(st.integers(0, 9)) == 0:
        fields.append("largest-len: 0")
    if odd and draw(st.booleans()):
        fields.insert(draw(st.integers(0, len(fields))), "#retracted-req: 1")  # unknown field
    fields.append(f"#queue-req: {draw(count)}")
    end = draw(st.sampled_from(["", ", ", ",", " ", "\r"] if odd else ["", ", "]))
    return f"[{draw(STAMPS)}{tags}] Decode batch{sep} " + ", ".join(fields) + end


@st.composite
def prefill_line(draw):
    running = draw(st.sampled_from(["0", "3", "0.5"]))
    end = draw(st.sampled_from(["", ", "]))
    return (f"[{draw(STAMPS)} TP0] Prefill batch, #new-seq: 1, #new-token: 12, #cached-token: 0, "
            f"token usage: 0.01, #running-req: {running}, #queue-req: 0{end}")  # fmt: skip


def vllm_prefix(stamp):
    return f"(APIServer pid=1) INFO {stamp[5:]} [loggers.py:123] "


@st.composite
def throughput_line(draw, stamp=None):
    odd = draw(st.integers(0, 4)) == 4  # shrinks towards lines the templates take
    decimal, count = (DECIMAL, COUNT) if odd else (GOOD_DECIMAL, st.integers(0, 300).map(str))
    queue = draw(st.sampled_from(["Waiting", "Pending"]))
    extra = draw(st.sampled_from(["", ", GPU KV cache usage: 1.2%", ", Swapped: 0 reqs"]))
    return (vllm_prefix(stamp or draw(STAMPS)) + f"Engine 000: Avg prompt throughput: "
            f"{draw(decimal)} tokens/s, Avg generation throughput: {draw(decimal)} tokens/s, "
            f"Running: {draw(count)} reqs, {queue}: {draw(count)} reqs{extra}")  # fmt: skip


@st.composite
def v1_line(draw, stamp=None):
    drafted = draw(st.integers(0, 900))
    accepted = draw(st.integers(0, max(drafted, 0)))
    rates = draw(st.sampled_from(["", ", Per-position acceptance rate: 0.900, 0.700, 0.500",
                                  ", Per-position acceptance rate: 0.6",
                                  ", Per-position acceptance rate: 0.900, 0.700, 0.500, "
                                  "Avg Draft acceptance rate: 70.0%"]))  # fmt: skip
    return (vllm_prefix(stamp or draw(STAMPS)) + "SpecDecoding metrics: Mean acceptance length: "
            f"2.10, Accepted: {accepted} tokens, Drafted: {drafted} tokens{rates}")  # fmt: skip


@st.composite
def vllm_interval(draw):
    """What vLLM prints every interval: the throughput line, then the spec-decode line."""
    stamp = draw(STAMPS)
    return [draw(throughput_line(stamp)), draw(v1_line(stamp))]


@st.composite
def v0_line(draw):
    n = draw(st.integers(0, 5000))
    return (vllm_prefix(draw(STAMPS)) + "Speculative metrics: Draft acceptance rate: 0.500, "
            f"System efficiency: 0.400, Number of speculative tokens: 3, Number of accepted "
            f"tokens: {n}, Number of draft tokens: {2 * n}, Number of emitted tokens: {n + 7}")  # fmt: skip


OTHER_LINES = st.sampled_from([
    "", "INFO:     10.0.0.1:4000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "# [2026-02-26 00:00:00 TP0] Decode batch, #running-req: 1, a comment",
    "[2026-02-26 00:00:00 TP0] Decode batch, garbage",  # does not parse: a problem
    "(APIServer pid=1) INFO 02-26 00:00:00 [loggers.py:1] Avg generation throughput: x",
    "x [2026-02-26 00:00:01 TP0] Decode batch, #running-req: 1, #token: 2, token usage: 0.1, "
    "gen throughput (token/s): 1.5, #queue-req: 0",  # not at the line's start
    "[2026-02-26 00:00:02 TP0] Decode batch, #running-req: 2, #token: 2, token usage: 0.1, "
    "gen throughput (token/s): 9.25, #queue-req: 0 SpecDecoding metrics: Accepted: 1 tokens",
    "\xe9t\xe9 [2026-02-26 00:00:03 TP0] Decode batch, #running-req: 1",
])  # fmt: skip
# Runs of decode lines, as servers print them, among the other kinds.
DECODE_RUN = st.lists(decode_line(), min_size=1, max_size=12)
LINES = st.one_of(DECODE_RUN, DECODE_RUN, DECODE_RUN, prefill_line().map(lambda x: [x]),
                  throughput_line().map(lambda x: [x]), v1_line().map(lambda x: [x]),
                  vllm_interval(), vllm_interval(),
                  v0_line().map(lambda x: [x]), OTHER_LINES.map(lambda x: [x]))  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(groups=st.lists(LINES, min_size=5, max_size=30), block=st.integers(40, 20000),
       k=st.sampled_from([None, 4]), newline=st.booleans())  # fmt: skip
def test_generated_logs_give_the_same_rows(tmp_path, groups, block, k, newline):
    lines = [line for group in groups for line in group]
    path = tmp_path / "server.log"
    path.write_bytes(("\n".join(lines) + ("\n" if newline else "")).encode("utf-8"))
    assert by_rows(path, k, block_bytes=block) == by_records(path, k)


def test_canonical_runs_take_the_column_wise_path(tmp_path, monkeypatch):
    """The properties above test the column-wise path only if runs of canonical lines reach
    it: here they do (and the rows are still the record path's)."""
    path = tmp_path / "server.log"
    path.write_text(
        (DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt").read_text() * 3
    )
    expected = by_records(path, 3)
    runs, add = [], Tally.add
    monkeypatch.setattr(Tally, "add", lambda self, *args: (runs.append(args[2]), add(self, *args)))
    assert by_rows(path, 3) == expected
    assert sum(runs) > 10


def test_worker_processes_give_the_same_rows(tmp_path):
    lines = [line.decode() for line in (DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
                                        ).read_bytes().splitlines()]  # fmt: skip
    vllm = (DATA / "vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt").read_text().splitlines()
    v0 = (DATA / "vllm_v0_speculative_issue7301_cumulative.txt").read_text().splitlines()
    path = tmp_path / "mixed.log"
    path.write_text("\n".join((lines + vllm + v0) * 20) + "\n")
    expected = by_records(path, 3)
    assert by_rows(path, 3, workers=2, block_bytes=500) == expected
    assert by_rows(path, 3, workers=3, block_bytes=4096) == expected


class TestCanonicalDecode:
    """The column-wise path writes an engine's number as printed only when that text is what
    repr prints for its float; other lines go the general way (and still come out the same)."""

    LINE = ("[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: "
            "0.00, accept len: {tau}, accept rate: 0.54, cuda graph: True, gen throughput "
            "(token/s): {gen}, #queue-req: 0, ")  # fmt: skip

    @pytest.mark.parametrize(("printed", "captured"), [
        ("2.17", b"2.17"), ("2.50", b"2.5"), ("2.00", b"2.0"), ("0.39", b"0.39"),
        ("900.00", b"900.0"), ("0.0001", b"0.0001"), ("123456.25", b"123456.25"),
    ])  # fmt: skip
    def test_captures_repr_text(self, printed, captured):
        m = CANONICAL_DECODE.fullmatch(self.LINE.format(tau=printed, gen=printed).encode())
        assert m is not None and m.group(5) == m.group(6) == captured
        assert captured == repr(float(printed)).encode()

    @pytest.mark.parametrize("printed", ["0.00001", "07.5", "1e3", "inf", "2.", ".5", "-1.0"])
    def test_leaves_other_numbers_to_the_general_path(self, printed):
        assert CANONICAL_DECODE.fullmatch(self.LINE.format(tau=printed, gen="1.5").encode()) is None

    def test_narrowed_pattern_matches_only_its_shape(self):
        line = self.LINE.format(tau="2.17", gen="5.5").encode()
        narrowed = re.compile(logrows._decode_pattern(line))
        assert narrowed.fullmatch(line).groups() == CANONICAL_DECODE.fullmatch(line).groups()
        other = line.replace(b"cuda graph: True", b"cuda graph: False")
        assert narrowed.fullmatch(other) is None and CANONICAL_DECODE.fullmatch(other)


class TestBlocks:
    def test_lines_before_binary_data_are_read(self, tmp_path):
        path = tmp_path / "log.txt"
        good = (b"[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 1, #token: 5, token usage: "
                b"0.01, gen throughput (token/s): 9.5, #queue-req: 0\n")  # fmt: skip
        path.write_bytes(good * 3 + b"bin\0ary\n" + good)
        rows, problems = by_rows(path)
        assert rows.count(b"\n") == 3 and problems == [f"{path}, line 4: binary data (a NUL "
                                                       "byte); expected a text log; stopped reading"]  # fmt: skip
        assert (rows, problems) == by_records(path)

    def test_a_long_line_inside_a_block_is_read_across_blocks_skipped(self, tmp_path, monkeypatch):
        monkeypatch.setattr(logs, "MAX_LINE_BYTES", 300)
        path = tmp_path / "log.txt"
        path.write_text("z" * 250 + "\n" + "y" * 400 + "\nend\n")
        blocks = list(logs.iter_blocks(str(path), 100))
        problems = [b for b in blocks if isinstance(b, logs.Problem)]
        assert [str(p) for p in problems] == [f"{path}, line 2: line is longer than 0 MiB; skipped"]
        assert blocks[-1][:2] == (3, 652) and blocks[-1][2] == b"end\n"

    def test_offsets_point_at_the_blocks(self, tmp_path):
        path = tmp_path / "log.txt"
        text = b"".join(b"line %d %s\n" % (i, b"x" * (i % 37)) for i in range(500)) + b"last"
        path.write_bytes(text)
        lines = 0
        for first, offset, data in logs.iter_blocks(str(path), 97):
            assert first == lines + 1
            assert text[offset : offset + len(data)] == data or data == b"last\n"
            lines += data.count(b"\n")
        assert lines == 501


def test_cli_out_matches_the_json_path(tmp_path):
    """--out without --json takes the fast path; with --json, the record path: same file."""
    files = [str(p) for p in LOG_FIXTURES if "issue" in p.name][:6]
    runner = CliRunner()
    fast = runner.invoke(cli, ["ingest", *files, "--label", "x", "--out", str(tmp_path / "a.csv")])
    slow = runner.invoke(cli, ["ingest", *files, "--label", "x", "--json", "--out",
                               str(tmp_path / "b.csv")])  # fmt: skip
    assert fast.exit_code == slow.exit_code
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.csv").read_bytes().count(b"\n") > 10


# --- vLLM lines: the whole-line patterns give what the general field splitter gives ---------

V1_PIECES = st.lists(st.sampled_from([
    "Draft acceptance rate: 38.8%", "Mean acceptance length: 2.16", "Mean acceptance length: 2.1",
    "Accepted throughput: 4.37 tokens/s", "Drafted throughput: 4.92 tokens/s",
    "Accepted: 150 tokens", "Drafted: 387 tokens", "Accepted: 0 tokens", "Drafted: 0 tokens",
    "Per-position acceptance rate: 0.543, 0.357, 0.264", "Per-position acceptance rate: 0.600",
    "Avg Draft acceptance rate: 27.6%", "accepted: 9 tokens", "Drafted: 12", "Accepted: 1e3 tokens",
]), max_size=8)  # fmt: skip
THROUGHPUT_PIECES = st.lists(st.sampled_from([
    "Avg generation throughput: 25.9 tokens/s", "Running: 5 reqs", "Swapped: 0 reqs",
    "Pending: 0 reqs", "Waiting: 633 reqs", "GPU KV cache usage: 35.1%", "Running: 7%",
    "CPU KV cache usage: 0.0%", "Prefix cache hit rate: 0.5%", "waiting: 3 reqs",
]), max_size=7)  # fmt: skip


@given(pieces=V1_PIECES, end=st.sampled_from(["", ".", ",", " "]))
def test_vllm_v1_fields_pattern_agrees_with_the_splitter(pieces, end):
    line = ("INFO 06-06 14:20:34 [metrics.py:86] SpecDecoding metrics: " + ", ".join(pieces)
            + end).encode()  # fmt: skip
    assert_same_parse(logs.VLLM_V1, line)


@given(prompt=st.sampled_from(["1239.8", "0.0", "12"]), pieces=THROUGHPUT_PIECES,
       end=st.sampled_from(["", ".", ", "]))  # fmt: skip
def test_vllm_throughput_fields_pattern_agrees_with_the_splitter(prompt, pieces, end):
    line = (f"INFO 08-05 11:33:17 [loggers.py:1] Engine 000: Avg prompt throughput: {prompt} "
            "tokens/s, " + ", ".join(pieces) + end).encode()  # fmt: skip
    assert_same_parse(logs.VLLM_THROUGHPUT, line)


def assert_same_parse(kind, line):
    reader = logs.LogReader("x.log", None)

    def parse():
        try:
            return reader.parse(7, kind, line)
        except logs.LineError as e:
            return str(e)

    fast = parse()
    logs.FAST_FIELDS = False
    try:
        general = parse()
    finally:
        logs.FAST_FIELDS = True
    assert repr(fast) == repr(general)  # repr: NaN equals NaN


def test_real_vllm_lines_take_the_patterns():
    """The patterns are for what vLLM prints: its lines in the fixtures match them."""
    matched = 0
    for path in LOG_FIXTURES:
        for line in path.read_text().splitlines():
            if "SpecDecoding metrics: " in line and not line.startswith("#"):
                rest = line.partition("SpecDecoding metrics:")[2].strip().rstrip(",").rstrip(".")
                matched += logs._fast_v1_fields(rest) is not None
            if "Avg prompt throughput:" in line and not line.startswith("#"):
                rest = line.partition("Avg prompt throughput:")[2].rstrip(".")
                matched += logs._fast_throughput_fields(rest) is not None
    assert matched >= 10


def test_no_input_makes_the_patterns_slow():
    """Every pattern is linear in the line: long adversarial lines take milliseconds (an
    exponential pattern would take hours); 2 s is a bound no linear pattern comes near."""
    import time

    rates = ", ".join(["0.5"] * 50_000)
    lines = [
        "SpecDecoding metrics: Accepted: 1 tokens, Drafted: 2 tokens, Per-position acceptance "
        f"rate: {rates}, x",
        " 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs"
        + ", GPU KV cache usage: 1.0%" * 20_000
        + ", x",
    ]
    decode = ("[2026-01-01 00:00:00" + " TP0" * 20_000 + "] Decode batch, #running-req: "
              + "1" * 100_000 + "\n").encode()  # fmt: skip
    prefix = "(APIServer pid=1) INFO 02-26 10:00:00 [loggers.py:1] "
    whole = [(prefix + "Avg prompt throughput: 1.0 tokens/s," + lines[1].partition(",")[2]).encode(),
             (prefix + lines[0].replace("Per-position", "Per-position") + "0" * 50_000).encode(),
             (prefix * 10_000).encode()]  # fmt: skip
    start = time.perf_counter()
    for line in lines:
        logs._V1_FIELDS.fullmatch(line.partition("metrics: ")[2])
        logs._THROUGHPUT_FIELDS.fullmatch(line)
    for line in whole:
        logrows.VLLM_THROUGHPUT_LINE.fullmatch(line)
        logrows.VLLM_V1_LINE.fullmatch(line)
    list(CANONICAL_DECODE.finditer(decode * 20))
    assert time.perf_counter() - start < 2.0


def test_workers_started_by_spawn_give_the_same_rows(tmp_path, monkeypatch):
    """macOS and Windows start workers by spawning (and Python 3.14 by a fork server): the
    workers then get everything by pickling and import breakeven themselves."""
    import multiprocessing

    path = tmp_path / "server.log"
    path.write_text(
        (DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt").read_text() * 4
    )
    expected = by_records(path, 3, {"label": "a,b"})
    spawn = multiprocessing.get_context("spawn")
    monkeypatch.setattr(logrows.multiprocessing, "get_context", lambda: spawn)
    assert by_rows(path, 3, {"label": "a,b"}, workers=2, block_bytes=300) == expected


def test_without_process_pools_the_rows_are_read_in_this_process(tmp_path, monkeypatch):
    """Where processes cannot be pooled (no POSIX semaphores: some containers and serverless
    runtimes), the log is read in the calling process, with the same rows."""

    class NoPools:
        def Pool(self, *args, **kwargs):
            raise OSError(38, "Function not implemented")

    path = tmp_path / "server.log"
    path.write_text((DATA / "vllm_v0_speculative_issue7301_cumulative.txt").read_text() * 5)
    expected = by_records(path)
    monkeypatch.setattr(logrows.multiprocessing, "get_context", lambda: NoPools())
    assert by_rows(path, workers=2, block_bytes=200) == expected


def test_cli_jobs(tmp_path):
    path = str(DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
    runner = CliRunner()
    one = runner.invoke(cli, ["ingest", path, "--jobs", "1", "--out", str(tmp_path / "1.csv")])
    default = runner.invoke(cli, ["ingest", path, "--out", str(tmp_path / "d.csv")])
    assert one.exit_code == default.exit_code == 0
    assert (tmp_path / "1.csv").read_bytes() == (tmp_path / "d.csv").read_bytes()
    bad = runner.invoke(cli, ["ingest", path, "--jobs", "0"])
    assert bad.exit_code == 2 and "--jobs" in bad.output and "0 is not in the range" in bad.output
