"""Inputs as users have them: fixtures as the engine wrote them (no '#' header), compressed,
piped, several files with their own labels, placeholders, baselines the log proves, appends."""

import bz2
import csv
import gzip
import json
import lzma
import math
import subprocess
import sys
from pathlib import Path

import pytest
from cli_checks import run_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from breakeven.iotools import lines, sources
from breakeven.iotools.ingest import Input, ingest
from breakeven.iotools.records import RECORD_KEYS
from breakeven.measurements.check import check_file

DATA = Path(__file__).parent / "data" / "engines"
CASE = Path(__file__).parent / "data" / "case_study"
FIXTURES = sorted(p for p in DATA.iterdir() if not p.name.endswith(".source.txt"))
COMPRESS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}


def as_written(text: str) -> str:
    """A fixture as the engine wrote it: without our '#' source header."""
    body = text.splitlines(keepends=True)
    while body and body[0].startswith("#"):
        body.pop(0)
    return "".join(body)


CITED = ("source", "launch_id")  # file:line citations


def comparable(result, path):
    """Records with the file's name taken out of ``source`` and ``launch_id`` (line numbers
    kept)."""
    return [
        {**r, **{c: r[c].replace(str(path), "") for c in CITED if r[c] is not None}}
        for r in result.records
    ]


def shifted(records, lines_removed):
    out = []
    for r in records:
        moved = {}
        for c in CITED:
            if r[c] is None:
                continue
            where, _, line = r[c].rpartition(":")
            moved[c] = f"{where}:{int(line) - lines_removed}" if line.isdigit() else r[c]
        out.append({**r, **moved})
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_as_the_engine_wrote_it_and_compressed(tmp_path, path):
    original = path.read_bytes()
    expected = comparable(ingest([path]), path)
    problems = [str(p).replace(str(path), "") for p in ingest([path]).problems]
    text = original.decode("utf-8")
    bare = as_written(text)
    removed = len(text.splitlines()) - len(bare.splitlines())
    plain = tmp_path / "as_written"
    plain.write_text(bare)
    # Without the header every line moves up; nothing else changes.
    assert comparable(ingest([plain]), plain) == shifted(expected, removed)
    for name, compress in COMPRESS.items():
        packed = tmp_path / f"packed_{name}"
        packed.write_bytes(compress(original))
        result = ingest([packed])
        assert comparable(result, packed) == expected, name
        assert [str(p).replace(str(packed), "") for p in result.problems] == problems


def test_fixtures_that_start_with_a_bracket_are_text(tmp_path):
    starts = 0
    for path in FIXTURES:
        bare = as_written(path.read_text())
        if not bare.startswith("["):
            continue
        starts += 1
        raw = tmp_path / path.name
        raw.write_text(bare)
        # "[53409] ..." (a process manager's prefix) even starts with a JSON value: still text.
        assert ingest([raw]).records or ingest([path]).records == []
        problems = " ".join(map(str, ingest([raw]).problems))
        assert "not JSON" not in problems
    assert starts >= 4  # SGLang logs, and the vLLM log whose colour codes lost their ESC byte


def test_colour_codes_that_lost_their_esc_byte(tmp_path):
    (record,) = ingest([DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt"]).records
    text = (DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt").read_text()
    real = next(ln for ln in text.splitlines() if "SpecDecoding" in ln)
    # The prefix as vllm-ascend issue 3024's paste shows it, before a real metric line.
    coloured = "[1;36m(APIServer pid=2236552)[0;0m " + real.split(") ", 1)[1]
    path = tmp_path / "coloured.log"
    path.write_text(coloured + "\n")
    (got,) = ingest([path]).records
    assert got["accept_len"] == record["accept_len"] and got["timestamp"] == record["timestamp"]
    r = ingest([DATA / "vllm_ascend_issue3024_ansi_colour_lost_esc.txt"])
    assert r.records == [] and "holds nothing breakeven reads" in str(r.problems[0])


def test_standard_input_and_a_named_pipe(tmp_path):
    log = (CASE / "sglang_baseline.log").read_bytes()
    run = subprocess.run(
        [sys.executable, "-m", "breakeven", "ingest", "-", "--json"],
        input=gzip.compress(log),
        capture_output=True,
        check=True,
    )
    records = json.loads(run.stdout)
    assert [r["gen_tok_s"] for r in records] == [62.66, 62.97, 62.57]
    assert records[0]["source"] == "-:5"
    fifo = tmp_path / "stream"
    import os

    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat {CASE / 'sglang_baseline.log'} > {fifo}"])
    try:
        assert len(ingest([fifo]).records) == 3
    finally:
        writer.wait(10)


def test_a_truncated_gzip_keeps_what_came_before(tmp_path):
    body = "".join((CASE / "sglang_baseline.log").read_text() for _ in range(2000))
    packed = gzip.compress(body.encode())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(packed[: len(packed) // 2])
    result = ingest([path])
    assert result.records and "ends early" in str(result.problems[-1])


class TestValuesAsPrinted:
    def test_placeholders_leave_one_field_missing(self, tmp_path):
        # SGLang prints "Max request concurrency: not set" when the client sets none.
        real = DATA / "sglang_bench_serving_accept_length_dsv3_mi300x.txt"
        text = real.read_text().replace(
            "Max request concurrency:                 1",
            "Max request concurrency:                 not set",
            1,
        )
        assert "not set" in text
        path = tmp_path / "table.txt"
        path.write_text(
            text + "[2026-02-26 16:41:43 TP0] Decode batch, #running-req: 1, #token: "
            "338, token usage: 0.00, cuda graph: True, gen throughput (token/s): "
            "62.66, #queue-req: N/A\n"
        )
        result = ingest([path])
        assert not result.problems
        tables = [r for r in result.records if r["format"] == "sglang_bench_serving_table"]
        (decode,) = [r for r in result.records if r["format"] == "sglang_decode"]
        assert len(tables) == 2 and tables[0]["concurrency"] is None
        assert tables[0]["accept_len"] == 2.61  # the rest of the table is kept
        assert decode["queue_reqs"] is None and decode["gen_tok_s"] == 62.66

    def test_a_value_that_is_not_a_number_is_named(self, tmp_path):
        path = tmp_path / "bad.log"
        path.write_text(
            "[2026-02-26 16:41:43 TP0] Decode batch, #running-req: 1, #token: 338, "
            "gen throughput (token/s): fast, #queue-req: 0\n"
        )
        (problem,) = ingest([path]).problems
        assert str(problem).endswith(
            "line 1: sglang_decode line does not parse: gen throughput "
            "(token/s) is 'fast', expected a number"
        )

    def test_metrics_k_from_counts_when_per_position_series_fall_short(self, tmp_path):
        name = 'model_name="m"'
        text = "".join(
            f"# TYPE vllm:spec_decode_num_{n} counter\n"
            f"vllm:spec_decode_num_{n}_total{{{name}}} {v}\n"
            for n, v in (("drafts", 100000), ("draft_tokens", 499998), ("accepted_tokens", 300000))
        )
        text += "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
        for i, v in enumerate((90000, 80000, 70000, 50000)):  # position 4 missing
            text += (
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{name},position="{i}"}} {v}\n'
            )
        path = tmp_path / "metrics.prom"
        path.write_text(text)
        (r,) = ingest([path]).records
        assert r["num_spec_tokens"] == 5 and "drafted / drafts" in r["note"]


class TestBaselines:
    def test_sglang_decode_lines_without_accept_len_are_a_baseline(self):
        rs = ingest([DATA / "sglang_decode_batch_pr22331_no_spec_comma_format.txt"]).records
        assert {r["num_spec_tokens"] for r in rs} == {0}
        spec = ingest([DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"])
        assert {r["num_spec_tokens"] for r in spec.records} == {None}  # k is not printed

    def test_vllm_throughput_without_spec_lines_is_a_baseline(self, tmp_path):
        text = (DATA / "vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt").read_text()
        path = tmp_path / "plain.log"
        path.write_text("".join(ln + "\n" for ln in text.splitlines() if "SpecDecoding" not in ln))
        rs = ingest([path]).records
        assert rs and all(r["num_spec_tokens"] == 0 and "baseline" in r["note"] for r in rs)
        spec = ingest([DATA / "vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt"]).records
        assert spec[-1]["format"] == "vllm_throughput" and spec[-1]["num_spec_tokens"] is None

    def test_llama_cpp_requests(self):
        (r,) = ingest([DATA / "llamacpp_server_reference_cpu_build_0_6_0_dev.txt"]).records
        assert r["tok_s"] == 155.11 and r["accept_len"] == 4.15
        assert r["accepted_tokens"] == 145 and r["draft_tokens"] == 184
        assert r["acceptance_rate"] == pytest.approx(145 / 184)
        (plain,) = ingest([DATA / "llamacpp_server_issue9013_plain_no_spec_2025.txt"]).records
        assert plain["tok_s"] == 11.94 and plain["num_spec_tokens"] == 0
        (eagle,) = ingest(
            [DATA / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"]
        ).records
        assert eagle["num_spec_tokens"] == 3 and eagle["accept_len"] == 2.92
        assert eagle["tok_s"] == 111.46 and eagle["per_position"] == [0.805, 0.632, 0.483]
        old_log = DATA / "llamacpp_server_pr23269_old_multiline_draft_acceptance_rate_mtp.txt"
        old = ingest([old_log])
        (r,) = old.records
        assert r["tok_s"] == 13.40 and r["accepted_tokens"] == 118 and r["accept_len"] is None
        # With k (-k 2): every draft of k tokens, 72 cycles, accept_len 1 + k x rate, said.
        (r,) = ingest([old_log], num_spec_tokens=2).records
        assert r["accept_len"] == pytest.approx(1 + 2 * 118 / 144) and r["num_drafts"] == 72
        assert r["note"].startswith("accept_len = 1 + k x accepted / generated")
        # A build that prints mean len keeps it, with or without -k.
        (new,) = ingest(
            [DATA / "llamacpp_server_reference_cpu_build_0_6_0_dev.txt"], num_spec_tokens=4
        ).records
        assert new["accept_len"] == 4.15 and new["note"] is None
        two = ingest([DATA / "llamacpp_server_club3090_issue1106_dsv4_dspark_mean_len.txt"]).records
        assert [r["accept_len"] for r in two] == [4.38, 5.64] and two[1]["tok_s"] == 33.25
        (none,) = ingest([DATA / "llamacpp_server_pr23269_spec_configured_no_drafts.txt"]).records
        assert none["num_spec_tokens"] == 0  # no draft line anywhere: the log cannot tell more

    def test_llama_cpp_metrics(self):
        (r,) = ingest([DATA / "llamacpp_metrics__synthetic_from_source_and_reference.prom"]).records
        assert r["engine"] == "llamacpp" and r["accept_len"] == pytest.approx(1 + 145 / 46)
        assert r["tok_s"] == pytest.approx(192 / 1.23137)


class TestSeveralFiles:
    def test_the_case_study_end_to_end(self, tmp_path):
        out = tmp_path / "runs.csv"
        r = run_cli(
            [
                "ingest",
                f"baseline={CASE / 'sglang_baseline.log'}",
                f"eagle3-k3={CASE / 'sglang_eagle3_k3.log'}",
                "-k",
                "3",
                "--out",
                str(out),
            ],
        )
        assert r.exit_code == 0, r.output
        result = check_file(str(out))
        (c,) = result.comparisons  # one comparison: the window after idle is not a run
        assert c.label == "eagle3-k3" and c.num_spec_tokens == 3
        assert c.measured_speedup == pytest.approx(75.897 / 62.77, rel=1e-3)
        assert c.baseline_runs == 2 and c.runs == 3
        assert not any("-1" in f.message for f in result.flags)

    def test_flags_once_or_once_per_file(self, tmp_path):
        files = [str(CASE / "sglang_baseline.log"), str(CASE / "sglang_eagle3_k3.log")]
        r = run_cli(
            ["ingest", *files, "--label", "a", "--label", "b", "-k", "3", "--env", "X=1", "--json"],
        )
        records = json.loads(r.stdout)
        assert [rec["label"] for rec in records] == ["a"] * 3 + ["b"] * 4
        assert {rec["env"] for rec in records} == {"X=1"}
        bad = run_cli(["ingest", *files, "--label", "a", "--label", "b", "--label", "c"])
        assert bad.exit_code == 2 and "--label: given 3 times for 2 files" in bad.output
        assert "Traceback" not in bad.output

    def test_a_label_replaces_what_the_file_says(self):
        path = DATA / "vllm_benchmark_serving__nerdalert_llmd_goodput_colon.jsonl"
        own = {r["label"] for r in ingest([path]).records}
        stamped = ingest([Input(str(path), {"label": "mine"})]).records
        assert own != {"mine"} and {r["label"] for r in stamped} == {"mine"}

    def test_a_result_table_and_log_lines_in_one_file(self, tmp_path):
        table = (DATA / "vllm_bench_serve_specdecode_selfllm_glm52_mtp5.txt").read_text()
        log = (DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt").read_text()
        path = tmp_path / "both.txt"
        path.write_text(log + table)
        formats = sorted(r["format"] for r in ingest([path]).records)
        assert formats == ["vllm_bench_serve_table", "vllm_bench_serve_table", "vllm_v1"]

    def test_summary_says_what_tok_s_is_for_each_file(self):
        r = run_cli(
            [
                "ingest",
                str(CASE / "sglang_baseline.log"),
                str(DATA / "vllm_benchmark_serving__nerdalert_llmd_goodput_colon.jsonl"),
            ],
        )
        assert "sglang_decode: gen throughput / #running-req" in r.output
        assert "vllm_bench_serve: 1000 / mean TPOT" in r.output


class TestAppend:
    def test_append_adds_rows_under_one_header(self, tmp_path):
        out = tmp_path / "runs.csv"
        for name in ("sglang_baseline.log", "sglang_eagle3_k3.log"):
            r = run_cli(["ingest", str(CASE / name), "--out", str(out), "--append"])
            assert r.exit_code == 0, r.output
        rows = list(csv.reader(out.open()))
        assert rows[0] == list(RECORD_KEYS) and len(rows) == 1 + 3 + 4
        other = tmp_path / "other.csv"
        other.write_text("a,b\n1,2\n")
        r = run_cli(["ingest", str(CASE / "sglang_baseline.log"), "--out", str(other), "--append"])
        assert r.exit_code == 2 and "does not start with the header" in r.output
        assert other.read_text() == "a,b\n1,2\n"

    def test_concurrent_appends_lose_nothing(self, tmp_path):
        out = tmp_path / "runs.csv"
        args = [
            sys.executable,
            "-m",
            "breakeven",
            "ingest",
            str(CASE / "sglang_eagle3_k3.log"),
            "--out",
            str(out),
            "--append",
        ]
        procs = [
            subprocess.Popen(args, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            for _ in range(6)
        ]
        assert all(p.wait(60) == 0 for p in procs)
        rows = list(csv.reader(out.open()))
        assert rows.count(list(RECORD_KEYS)) == 1 and len(rows) == 1 + 6 * 4

    def test_two_writers_without_force_one_wins(self, tmp_path):
        out = tmp_path / "runs.csv"
        args = [
            sys.executable,
            "-m",
            "breakeven",
            "ingest",
            str(CASE / "sglang_eagle3_k3.log"),
            "--out",
            str(out),
        ]
        procs = [
            subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
            for _ in range(4)
        ]
        codes = [p.wait(60) for p in procs]
        assert codes.count(0) == 1 and codes.count(2) == 3
        assert len(list(csv.reader(out.open()))) == 1 + 4


# Hypothesis: any file of known lines in any order, cut into blocks anywhere, gives the same
# records through every path (block sizes, batch sizes, compression, CSV and JSON views).
_KNOWN = sorted(
    {
        ln
        for p in FIXTURES
        if p.suffix == ".txt"
        for ln in p.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    }
)[:400]
_LINE = st.one_of(
    st.sampled_from(_KNOWN),
    st.sampled_from(_KNOWN).map(lambda s: s[: len(s) // 2]),  # cut short
    st.sampled_from(_KNOWN).map(lambda s: "# " + s),  # a comment
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r\x00"), max_size=60),
)


def _view(result):
    """The records as they compare across ways of reading one text: ``source`` and
    ``launch_id`` cite the file (``mix.log`` or ``mix.log.gz``), so only their lines count."""
    return [
        {k: v for k, v in r.items() if k not in ("source", "launch_id")}
        | {"line": r["source"].rpartition(":")[2]}
        | {"launch_line": (r.get("launch_id") or "").rpartition(":")[2]}
        for r in result.records
    ]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.lists(_LINE, max_size=40),
    block=st.integers(1, 300),
    batch=st.integers(1, 50),
    crlf=st.booleans(),
)
# Found by hypothesis: a result table cut after its acceptance length (no drafts, no drafted
# tokens) made k from NaN counts and raised.
@example(
    body=["============ Serving Benchmark Result ============", "Acceptance length:   1.83"],
    block=1,
    batch=1,
    crlf=False,
)
# Found by hypothesis: llama.cpp's completion_tokens differed in the last digit with the
# parse block's size.
@example(
    body=[
        "eval time =   23038.87 ms /   275 tokens (   83.78 ms per token,    11.94 tokens per second)"
    ]
    * 3,
    block=1,
    batch=1,
    crlf=False,
)
def test_any_mix_of_lines_gives_the_same_records_every_way(
    tmp_path, monkeypatch, body, block, batch, crlf
):
    text = ("\r\n" if crlf else "\n").join(body) + "\n"
    path = tmp_path / "mix.log"
    path.write_text(text, newline="")
    reference = ingest([path])
    with monkeypatch.context() as m:
        m.setattr(sources, "BLOCK_BYTES", block)
        m.setattr(lines, "PARSE_ROWS", batch)
        cut = ingest([path])
        packed = tmp_path / "mix.log.gz"
        packed.write_bytes(gzip.compress(text.encode()))
        compressed = ingest([packed])
    # The same records, each engine's in line order.  Across engines the order may differ:
    # an engine that holds its rows until the end (SGLang's baseline, known only once no line
    # speculated) hands them over after the others, sooner or later with the batch size.
    views = [_view(r) for r in (cut, reference, compressed)]
    for view in views:
        for fmt in {r["format"] for r in view}:
            numbers = [int(r["line"]) for r in view if r["format"] == fmt]
            assert numbers == sorted(numbers)
    key = lambda r: (int(r["line"]), r["format"])  # noqa: E731
    assert sorted(views[0], key=key) == sorted(views[1], key=key) == sorted(views[2], key=key)
    assert [str(p) for p in cut.problems] == [str(p) for p in reference.problems]
    # The CSV view holds the same values as the records.
    from breakeven.iotools.records import csv_bytes

    rows = list(
        csv.DictReader(
            (",".join(RECORD_KEYS) + "\n" + csv_bytes(reference.frame).decode()).splitlines()
        )
    )
    assert len(rows) == len(reference.records)
    for row, record in zip(rows, reference.records, strict=True):
        for key, value in record.items():
            cell = row[key]
            if value is None:
                assert cell == ""
            elif isinstance(value, bool):
                assert cell == str(value)
            elif isinstance(value, float):
                assert float(cell) == value and not math.isnan(value)
            elif isinstance(value, list):
                assert json.loads(cell) == value
            else:
                assert cell == str(value)


class TestTensorRTLLM:
    def test_trtllm_bench_reports(self):
        (r,) = ingest([DATA / "trtllm_bench_pr5206_qwen3_eagle3_old_ar_format.txt"]).records
        assert r["format"] == "trtllm_bench" and r["origin"] == "client"
        assert r["accept_len"] == 1.81 and r["tpot_ms"] == 4.688
        assert r["tok_s"] == pytest.approx(1000 / 4.688)
        two = ingest([DATA / "trtllm_bench_pr4168_eagle3_old_ar_bs1_bs4_excerpt.txt"]).records
        assert [r["accept_len"] for r in two] == [2.62, 2.62]  # "[AR]" before August 2025
        (al,) = ingest(
            [DATA / "trtllm_bench_issue9208_qwen3_235b_eagle3_al_bs8_excerpt.txt"]
        ).records
        assert al["accept_len"] == 1.86 and al["num_spec_tokens"] is None
        (k,) = ingest(
            [DATA / "trtllm_bench_issue9208_qwen3_235b_eagle3_al_bs8_excerpt.txt"],
            num_spec_tokens=3,
        ).records
        assert k["num_spec_tokens"] == 3

    def test_a_report_without_tpot_gives_its_aggregate_rate_and_concurrency(self):
        # Issue 44: a report run without --streaming ("Total Output Throughput (tokens/sec):
        # 7517.2584", "Number of concurrent requests:  1018.8281", no TPOT) was no record.
        (r,) = ingest([DATA / "trtllm_bench_pr7104_dsr1_no_spec_excerpt.txt"]).records
        assert r["aggregate_tok_s"] == 7517.2584 and r["concurrency"] == 1018.8281
        assert r["tok_s"] is None and "run without --streaming" in r["note"]

    def test_a_report_with_no_rate_nor_acceptance_gives_nothing(self, tmp_path):
        text = (DATA / "trtllm_bench_pr7104_dsr1_no_spec_excerpt.txt").read_text()
        path = tmp_path / "no_rate.txt"
        path.write_text(text[: text.index("= PERFORMANCE OVERVIEW")])
        result = ingest([path])
        assert result.records == [] and "holds nothing" in str(result.problems[0])


def test_llama_cpp_scrapes_are_differenced(tmp_path):
    after = (DATA / "llamacpp_metrics__synthetic_from_source_and_reference.prom").read_text()
    before = tmp_path / "before.prom"
    # The same server earlier: 100 tokens in 0.6 s, 10 cycles drafting 40 tokens, 25 accepted.
    before.write_text(
        after.replace("tokens_predicted_total 192", "tokens_predicted_total 100")
        .replace("seconds_total 1.23137", "seconds_total 0.6")
        .replace("draft_tokens_total 184", "draft_tokens_total 40")
        .replace("accepted_tokens_total 145", "accepted_tokens_total 25")
        .replace("drafts_total 46", "drafts_total 10")
    )
    path = tmp_path / "after.prom"
    path.write_text(after)
    (r,) = ingest([path], before=before).records
    assert r["num_drafts"] == 36 and r["accept_len"] == pytest.approx(1 + 120 / 36)
    assert r["tok_s"] == pytest.approx(92 / 0.63137)


def test_trtllm_iteration_stats():
    (r,) = ingest([DATA / "trtllm_iteration_stats_issue6364_trt_backend_no_spec.json"]).records
    assert r["format"] == "trtllm_iteration_stats" and r["num_spec_tokens"] == 0  # null spec stats
    assert r["step_ms"] == 13.021209 and r["tok_s"] == pytest.approx(1000 / 13.021209)
    assert r["concurrency"] == 1


def test_trtllm_iteration_with_spec_stats_follows_the_executor():
    # No real paste with specDecodingStats values exists (see the fixture's source note): this
    # checks the formula of py_executor._update_iter_stats on an object of that shape.
    from breakeven.iotools import bench_results as bench

    obj = {
        "iterLatencyMS": 20.0,
        "timestamp": "t",
        "numQueuedRequests": 0,
        "inflightBatchingStats": {"numGenRequests": 4, "numContextRequests": 0},
        "specDecodingStats": {
            "numDraftTokens": 12,
            "numAcceptedTokens": 6,
            "numRequestsWithDraftTokens": 4,
            "acceptanceLength": 2.5,
        },
    }
    assert bench.bench_format(obj) == bench.TRTLLM_ITERATION
    r = bench.result_record(obj, bench.TRTLLM_ITERATION, "x:1")
    assert r["accept_len"] == 2.5 == (6 + 4) / 4
    assert r["tok_s"] == pytest.approx(1000 * 2.5 / 20) and r["cycle_ms"] == 20.0


def test_bench_one_batch_as_printed():
    rs = ingest([DATA / "sglang_bench_one_batch_pr3232_dsv3_tp8_bs1.txt"]).records
    # the warm-up run and the benchmark run: "Decode.  median latency: 0.02719 s, ..."
    assert [r["step_ms"] for r in rs] == pytest.approx([27.11, 27.19])
    assert all(r["concurrency"] == 1 and r["num_spec_tokens"] == 0 for r in rs)
    assert rs[1]["aggregate_tok_s"] == 36.78 and rs[1]["tok_s"] == pytest.approx(1 / 0.02719)


def test_a_gzip_header_over_a_damaged_deflate_stream(tmp_path):
    path = tmp_path / "damaged.gz"  # found by the fuzz below: zlib's error is not an OSError
    path.write_bytes(b"\x1f\x8b\x08" + bytes(12))
    r = run_cli(["ingest", str(path)])
    assert r.exit_code == 2 and "cannot read it (" in r.output and "Traceback" not in r.output


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    head=st.sampled_from(
        [b"", b"\x1f\x8b\x08", b"BZh9", b"\xfd7zXZ\x00", b"[", b"{", b"# TYPE vllm:x counter\n"]
    ),
    body=st.binary(max_size=300),
    json_flag=st.booleans(),
)
def test_hostile_files_get_one_clear_line_never_a_traceback(tmp_path, head, body, json_flag):
    path = tmp_path / "hostile"
    path.write_bytes(head + body)
    r = run_cli(["ingest", str(path), *(["--json"] if json_flag else [])])
    assert r.exit_code in (0, 2), r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception


class TestReadingInThreads:
    """Blocks are marked in threads and parsed in order; what a thread raises is raised."""

    def test_mapped_keeps_the_order_and_raises_in_place(self):
        import random
        import time

        def slow_square(x):
            time.sleep(random.random() / 200)
            if x == 7:
                raise ValueError("seven")
            return x * x

        got = []
        with pytest.raises(ValueError, match="seven"):
            for x, y in sources.mapped(slow_square, range(20), workers=3):
                got.append((x, y))
        assert got == [(x, x * x) for x in range(7)]
        assert list(sources.mapped(abs, [-2, 3], workers=1)) == [(-2, 2), (3, 3)]

    def test_ahead_raises_after_the_items_before_and_stops_its_producer(self):
        def producer(log):
            try:
                for i in range(1000):
                    log.append(i)
                    yield i
            finally:
                log.append("closed")

        def failing():
            yield 1
            yield 2
            raise OSError("disk gone")

        items = []
        with pytest.raises(OSError, match="disk gone"):
            for i in sources.ahead(failing()):
                items.append(i)
        assert items == [1, 2]
        log: list = []
        for i in sources.ahead(producer(log), depth=1):
            if i == 2:
                break
        import time

        deadline = time.monotonic() + 5
        while "closed" not in log and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "closed" in log and len(log) < 10  # it stopped, a few items ahead at most

    @pytest.mark.parametrize("workers", [1, 2, 4])
    def test_lines_are_numbered_alike_for_any_number_of_workers(
        self, tmp_path, monkeypatch, workers
    ):
        import importlib

        ingest_module = importlib.import_module("breakeven.iotools.ingest")
        body = "".join(
            f"[2026-01-01 00:00:{i % 60:02d} TP0] Decode batch, #running-req: 2, #token: {i}, "
            f"gen throughput (token/s): {i}.5, #queue-req: 0\n"
            if i % 3 == 0
            else "noise\n"
            for i in range(1, 400)
        )
        path = tmp_path / "log.txt"
        path.write_text(body + "z" * 300 + "\nend\n")  # line 400 is too long
        monkeypatch.setattr(sources, "BLOCK_BYTES", 64)
        monkeypatch.setattr(sources, "MAX_LINE_BYTES", 200)
        monkeypatch.setattr(ingest_module, "MARK_WORKERS", workers)
        result = ingest([path])
        assert [r["source"] for r in result.records] == [f"{path}:{i}" for i in range(3, 400, 3)]
        assert len(result.problems) == 1
        assert str(result.problems[0]).startswith(f"{path}, line 400: line is longer than")
