"""Many small inputs read together (:mod:`breakeven.iotools.batch`) give what each gives read
alone: the same records (``source`` numbered per file), the same problems (file and line),
each file's own sequence state (never carried from one file to the next), in the same order.

The reference is ``breakeven ingest`` of each file alone with batching off
(``batch.SMALL_BYTES = 0``: the scanner reads the file block by block, as before batching),
its CSV rows, JSON records and problems concatenated in file order."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from unittest import mock

import pytest
from cli_checks import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.iotools import batch, lines, sources

DATA = Path(__file__).parent / "data"
ENGINES = DATA / "engines"
SGLANG = DATA / "case_study" / "sglang_eagle3_k3.log"
VLLM_WINDOWS = ENGINES / "vllm_v1_windows_club3090_issue105_prefill_then_decode.txt"
REAL = [
    SGLANG,
    DATA / "case_study" / "sglang_baseline.log",
    ENGINES / "vllm_v1_specdecoding_pr24127_throughput_format.txt",  # throughput + spec merged
    VLLM_WINDOWS,  # the last window's state
    ENGINES / "vllm_engine_config__p2pbench_qwen36_mtp3_v0230.txt",  # launch lines, year
    ENGINES / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt",
    ENGINES / "llamacpp_server_issue9013_plain_no_spec_2025.txt",  # held, then baselines
    ENGINES
    / "llamacpp_speculative_pr2926_aug2023_verify_steps_unknown_excerpt.txt",  # short drafts
    ENGINES / "trtllm_bench_pr5206_qwen3_eagle3_old_ar_format.txt",
    ENGINES / "aiperf_docs_speedbench_llama31_8b_draft_k5_report_console.txt",  # tables
    ENGINES / "vllm_bench_serve_specdecode_pr48892_mtp1_vs_mtp8.txt",  # result tables
    ENGINES / "vllm_offline_spec_decode_pr26498_specbench_k10.txt",  # an offline summary
    ENGINES / "sglang_decode_batch_pr25960_npu_accept_rate_without_accept_len.txt",
]


def _ingest(paths, *extra, small=None):
    """``breakeven ingest PATHS EXTRA`` (batching off where ``small`` is 0): exit code,
    stdout, problem lines."""
    with mock.patch.object(batch, "SMALL_BYTES", batch.SMALL_BYTES if small is None else small):
        r = run_cli(["ingest", *map(str, paths), *extra])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert r.exit_code in (0, 2), r.output
    problems = [line for line in r.stderr.splitlines() if line.startswith("Problem: ")]
    return r.exit_code, r.stdout, problems


def _outputs(paths, tmp_path, small=None):
    """The CSV, the JSON records and the problems of ingesting ``paths`` at once."""
    out = tmp_path / "out.csv"
    _, _, problems = _ingest(paths, "--out", out, "--force", small=small)
    _, text, again = _ingest(paths, "--json", small=small)
    assert again == problems
    return out.read_text(encoding="utf-8"), json.loads(text), problems


def _one_by_one(paths, tmp_path):
    """The same, each path ingested alone with batching off, concatenated in order."""
    header, rows, records, problems = None, [], [], []
    for path in paths:
        csv, found, more = _outputs([path], tmp_path, small=0)
        rows_in = csv.splitlines(keepends=True)
        header = header or rows_in[0]
        assert rows_in[0] == header
        rows += rows_in[1:]
        records += found
        problems += more
    return (header or "") + "".join(rows), records, problems


def _hostile(tmp_path):
    """An empty file, a binary one (lines, then a NUL), a gzip, UTF-16, a file with a byte-order
    mark on every line, lines that do not parse, a line that does not end, and two engines'
    lines in one file."""
    real = SGLANG.read_bytes()
    vllm = VLLM_WINDOWS.read_bytes()
    offline = (ENGINES / "vllm_offline_spec_decode_pr26498_specbench_k10.txt").read_bytes()
    made = {
        "empty.log": b"",
        "binary.log": real[:700] + b"\0\0 binary\n" + real,
        "sglang.log.gz": gzip.compress(real),
        "utf16.log": b"\xff\xfe" + vllm.decode("utf-8").encode("utf-16-le"),
        # A mark on every line: polars drops it where a block starts (offline summary lines
        # are read from the line's start).
        "boms.log": b"".join(b"\xef\xbb\xbf" + line for line in offline.splitlines(keepends=True)),
        "damaged.log": real.replace(b"accept len: 2.10", b"accept len: two", 2)
        + b"[2026-02-26 17:03:00 TP0] Decode batch, #running-req: 1, \xff\xfe not UTF-8\n",
        "no_end.log": vllm.rstrip(b"\n"),
        "two_engines.log": real + vllm + real,  # SGLang's records, vLLM's, SGLang's again
    }
    paths = []
    for name, data in made.items():
        path = tmp_path / name
        path.write_bytes(data)
        paths.append(path)
    return paths


def _mixed(tmp_path):
    """Real logs, hostile files, the same file twice, and a JSON result and a Prometheus
    scrape between them (read as they always are: small text inputs on either side)."""
    hostile = _hostile(tmp_path)
    return [
        *REAL[:5],
        hostile[0],
        DATA / "case_study" / "vllm_bench_serve_baseline.json",
        *hostile[1:4],
        SGLANG,  # the same file twice
        ENGINES / "vllm_metrics__pr41916_spec_decode_excerpt.prom",
        *REAL[5:],
        *hostile[4:],
        SGLANG,
        tmp_path / "missing.log",
        tmp_path,  # a directory
    ]


@pytest.mark.parametrize(
    "block_bytes, small, parse_rows",
    [(None, None, None), (977, None, None), (None, 1500, None), (300, 2500, None), (977, None, 7)],
    ids=["one-block", "many-blocks", "some-streamed", "small-blocks-some-streamed", "crowded"],
)
def test_many_files_read_as_each_alone(tmp_path, monkeypatch, block_bytes, small, parse_rows):
    # Blocks of 977 bytes: tables and vLLM's merged lines span blocks of a small file; with
    # SMALL_BYTES low, the larger files stream between batches of the small ones; with
    # PARSE_ROWS low, a file's scanner parses some lines before its end (those files of a
    # batch are read alone).
    if block_bytes is not None:
        monkeypatch.setattr(sources, "BLOCK_BYTES", block_bytes)
    if small is not None:
        monkeypatch.setattr(batch, "SMALL_BYTES", small)
    if parse_rows is not None:
        monkeypatch.setattr(lines, "PARSE_ROWS", parse_rows)
    paths = _mixed(tmp_path)
    csv, records, problems = _outputs(paths, tmp_path)
    assert (csv, records, problems) == _one_by_one(paths, tmp_path)
    assert len(records) > 50 and len(problems) >= 7
    # Line numbers are each file's: the second reading of the same file cites the same lines.
    cited = [r["source"] for r in records if r["source"].startswith(f"{SGLANG}:")]
    assert cited[: len(cited) // 3] == cited[len(cited) // 3 : 2 * len(cited) // 3]


def test_batched_and_unbatched_print_the_same(tmp_path):
    # The whole command line's output (the summary's per-file tally, its problems, the CSV)
    # is the same with small files read together or each alone.
    paths = _mixed(tmp_path)
    for extra in (["--json"], ["--wide"], ["--year", "2025", "-k", "3", "--label", "x"]):
        assert _ingest(paths, *extra) == _ingest(paths, *extra, small=0)


def test_state_is_never_carried_from_one_file_to_the_next(tmp_path):
    # A vLLM log cut between a throughput line and the spec-decode line beside it: read
    # together or alone, the second file's spec line is not merged into the first file's
    # throughput line.  (Until issue 44 the second file's next window was also its first,
    # after idle; a log's first window with prompt throughput 0.0 is now a decode window,
    # read alone or in the whole log.)
    text = VLLM_WINDOWS.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(text) if ln.startswith("(") and "SpecDecoding" in ln)
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_text("".join(text[:cut]), encoding="utf-8")
    second.write_text("".join(text[cut:]), encoding="utf-8")
    csv, records, problems = _outputs([first, second], tmp_path)
    assert (csv, records, problems) == _one_by_one([first, second], tmp_path)
    by = {r["source"]: r for r in records}
    assert [r["format"] for r in records] == ["vllm_throughput", "vllm_v1", "vllm_v1"]
    assert by[f"{first}:{cut}"]["gen_tok_s"] == 74.7
    assert by[f"{second}:1"]["gen_tok_s"] is None  # not merged across files
    assert by[f"{second}:3"]["first_after_idle"] is False
    assert by[f"{second}:3"]["prompt_tok_s"] == 0.0 and by[f"{second}:3"]["tok_s"] == 72.0
    whole = _outputs([VLLM_WINDOWS], tmp_path)[1]
    assert [r["first_after_idle"] for r in whole] == [False, False]


def test_a_year_and_k_per_file_stay_with_their_file(tmp_path):
    paths = [REAL[4], REAL[4], REAL[0], REAL[0]]
    extra = ["-k", "3", "-k", "5", "-k", "2", "-k", "4", "--year", "2025"]
    extra += ["--label", "a", "--label", "b", "--label", "a", "--label", "a"]
    assert _ingest(paths, *extra) == _ingest(paths, *extra, small=0)


_LOG = [
    line
    for path in (SGLANG, VLLM_WINDOWS, REAL[4], REAL[5], REAL[9], REAL[2])
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
]
"""A real log: the lines of real SGLang, vLLM (launch and windows), llama.cpp and AIPerf
output, one after the other."""


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cuts=st.lists(st.integers(1, len(_LOG) - 1), max_size=6, unique=True),
    block_bytes=st.sampled_from([None, 64, 500, 4096]),
    small=st.sampled_from([None, 3000]),
)
def test_a_log_split_into_files_reads_as_its_files_one_by_one(tmp_path, cuts, block_bytes, small):
    bounds = [0, *sorted(cuts), len(_LOG)]
    paths = []
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        path = tmp_path / f"part{i}.log"
        path.write_text("".join(_LOG[start:end]), encoding="utf-8")
        paths.append(path)
    with (
        mock.patch.object(sources, "BLOCK_BYTES", block_bytes or sources.BLOCK_BYTES),
        mock.patch.object(batch, "SMALL_BYTES", small or batch.SMALL_BYTES),
    ):
        _, text, problems = _ingest(paths, "--json")
        alone, found = [], []
        for path in paths:
            _, more, also = _ingest([path], "--json", small=0)
            alone += json.loads(more)
            found += also
    assert json.loads(text) == alone
    assert problems == found
