"""JSON Lines are read a line at a time, with no size limit (issue 40, item 4): AIPerf's
``profile_export.jsonl`` of 67 MiB peaked at 614 MiB read whole, and a file over 256 MiB was
refused.  Each line is parsed and made records as it comes; a file's records, problems and
fallbacks (a file that is not JSON after all is read as text) are what reading it whole gave.
The whole read is still the reader of JSON documents: it is the oracle here.  Peak memory is a
figure of ``benchmarks/jsonl_memory.py``."""

from __future__ import annotations

import os
import threading

import pytest
from engine_fixtures import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.iotools import jsonlines, jsonsafe, sources
from breakeven.iotools.ingest import ingest

RECORDS = DATA / "aiperf_anud18_qwen3vl_30b_c1_records_excerpt.jsonl"
FIRST, SECOND = RECORDS.read_bytes().splitlines()
VLLM_LINE = (
    b"(APIServer pid=1) INFO 09-09 11:51:35 [metrics.py:96] SpecDecoding metrics: Draft "
    b"acceptance rate: 88.8%, Mean acceptance length: 5.44, Accepted throughput: 4.37 "
    b"tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 262 tokens, Drafted: 295 tokens"
)

LINES = {
    "record": FIRST,
    "other record": SECOND,
    "unknown object": b'{"a": 1, "b": [2]}',
    "list": b'[{"a": 1}, 2]',
    "scalar": b'"text"',
    "blank": b"",
    "spaces": b"   \t",
    "bad": b"not json",
    "cut record": FIRST[: len(FIRST) // 2],
    "log line": VLLM_LINE,
    "nul": b'{"a": 1}\x00',
    "not utf-8": b'{"a": "\xff"}',
    "deep": b"[" * 70 + b"]" * 70,
    "open brackets": b'[{"a": [',
    "open string": b'{"a": "[[[[',
    "long number": b'{"a": ' + b"1" * 5000 + b"}",
    "garbled record": FIRST.replace(b'"unit":"ms"}', b'"unit":"minutes"}', 1),
}


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='[]{}"\\ a\n', max_size=60))
def test_nesting_counted_a_line_at_a_time_is_the_whole_texts(text):
    """Brackets, strings, escapes and open strings carried from line to line."""
    counter = jsonsafe.NestingDepth()
    for line in text.encode().splitlines(keepends=True):
        counter.feed(line)
    assert counter.depth == jsonsafe.nesting_depth(text)


def _whole(monkeypatch, paths, **kwargs):
    """ingest as it read JSON before: every JSON input whole."""
    with monkeypatch.context() as m:
        m.setattr(jsonlines, "first_value", lambda lines: None)
        return ingest(paths, **kwargs)


def _same(got, want):
    assert [str(p) for p in got.problems] == [str(p) for p in want.problems]
    assert got.records == want.records


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(st.sampled_from(sorted(LINES)), min_size=1, max_size=8),
    end=st.sampled_from([b"\n", b"\r\n"]),
    last_end=st.booleans(),
    format=st.sampled_from(["auto", "aiperf_records"]),
)
def test_a_file_read_a_line_at_a_time_reads_as_it_did_whole(
    tmp_path, monkeypatch, kinds, end, last_end, format
):
    """Records and problems (their lines and messages), whatever the lines: documents,
    blank lines, a bad line before the last (the file is then text), a cut last line, NUL
    bytes, text that is not UTF-8, nesting too deep, a single value (a list's items)."""
    data = end.join(LINES[k] for k in kinds) + (end if last_end else b"")
    path = tmp_path / "profile_export.jsonl"
    path.write_bytes(data)
    _same(ingest([path], format=format), _whole(monkeypatch, [path], format=format))


def test_a_file_past_the_old_limit_is_read_whole(tmp_path, monkeypatch):
    """The limit a JSON document is read whole to (256 MiB, made 64 KiB here: the file is 20
    times the fixture, 235 KB) does not apply to JSON Lines: every record is read.  The same
    records as one JSON document are refused at that limit, as they were."""
    monkeypatch.setattr(sources, "MAX_DOCUMENT_BYTES", 1 << 16)
    path = tmp_path / "profile_export.jsonl"
    path.write_bytes((FIRST + b"\n" + SECOND + b"\n") * 20)
    assert path.stat().st_size > sources.MAX_DOCUMENT_BYTES
    result = ingest([path])
    assert result.problems == [] and len(result.records) == 40
    assert [r["source"] for r in result.records] == [f"{path}:{n}" for n in range(1, 41)]
    document = tmp_path / "profile_export.json"
    document.write_bytes(b"[\n" + b",\n".join([FIRST, SECOND] * 20) + b"\n]\n")
    (problem,) = ingest([document]).problems
    assert (
        "is over" in problem.message
        and "a JSON or metrics file may hold at most" in problem.message
    )


def test_a_line_past_the_line_limit_is_one_problem_naming_it(tmp_path, monkeypatch):
    """A line may be as long as a whole document was (256 MiB; 8 KiB here): one longer is
    one problem naming its line, and nothing of the file is read, as a file past the limit."""
    monkeypatch.setattr(jsonlines, "MAX_LINE_BYTES", 8 << 10)
    path = tmp_path / "profile_export.jsonl"
    path.write_bytes(FIRST + b"\n" + b'{"a": "' + b"x" * (20 << 10) + b'"}\n' + SECOND + b"\n")
    result = ingest([path])
    (problem,) = result.problems
    assert result.records == [] and problem.line == 2
    assert problem.message.startswith("a line over 0.0078125 MiB; a line of JSON Lines may hold")
    assert "\n" not in str(problem)


def _through_a_pipe(tmp_path, data):
    """``data`` written to a named pipe, read back by ingest (it cannot be opened again)."""
    fifo = tmp_path / "export.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        return ingest([str(fifo)])
    finally:
        writer.join(timeout=10)


@pytest.mark.parametrize(
    "data",
    [
        FIRST + b"\n" + SECOND + b"\n",  # JSON Lines
        FIRST + b"\n" + VLLM_LINE + b"\n" + VLLM_LINE + b"\n",  # a log after all
    ],
)
def test_a_pipe_reads_as_a_file_does(tmp_path, monkeypatch, data):
    """From a pipe, JSON Lines stream too, and a file that is text after all is read again
    as text from what was kept of it."""
    path = tmp_path / "same.jsonl"
    path.write_bytes(data)
    got = _through_a_pipe(tmp_path, data)
    want = _whole(monkeypatch, [path])
    assert [p.message for p in got.problems] == [p.message for p in want.problems]
    strip = [{k: v for k, v in r.items() if k != "source"} for r in got.records]
    assert strip == [{k: v for k, v in r.items() if k != "source"} for r in want.records]
    assert got.records  # the records of the JSON, or of the log's lines
