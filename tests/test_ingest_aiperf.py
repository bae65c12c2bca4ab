"""NVIDIA AIPerf's outputs (:mod:`breakeven.iotools.aiperf`): real output only, each value checked
by hand against the fixture's own printed numbers; text fixtures read as stored and as AIPerf
wrote them (no '#' header)."""

import json

import pytest
from cli_checks import run_cli
from engine_fixtures import DATA, both, header_lines

from breakeven.iotools import aiperf, bench_results, sources
from breakeven.iotools.ingest import ingest
from breakeven.iotools.records import Tally

SPEC = DATA / "aiperf_docs_speedbench_llama31_8b_draft_k5_spec_decode_console.txt"
REPORT = DATA / "aiperf_docs_speedbench_llama31_8b_draft_k5_report_console.txt"
REPORT_CSV = DATA / "aiperf_abatilo_dflash_minimax_m27_speed_bench_report.csv"
CONSOLE = DATA / "aiperf_docs_customdataset_qwen3_06b_c2_console.txt"
SUMMARY = DATA / "aiperf_anud18_qwen3vl_30b_c1_summary_json.json"
SUMMARY_CSV = DATA / "aiperf_anud18_qwen3vl_30b_c1_summary_csv.csv"
REQUESTS = DATA / "aiperf_anud18_qwen3vl_30b_c1_records_excerpt.jsonl"


def read(path):
    result = ingest([path])
    assert result.problems == []
    return result.records


class TestSpecDecodeConsole:
    def test_accept_len_is_the_token_weighted_one_bonus_included(self, tmp_path):
        for rs in both(SPEC, tmp_path):
            (r,) = rs
            # "Token-Weighted Acceptance Length (ratio) 4.63": 1 + sum(accepted) / sum(steps)
            # over the run, bonus included; not "Acceptance Length (ratio) 4.19", the mean of
            # the requests' own ratios.
            assert r["accept_len"] == 4.63
            assert r["acceptance_rate"] == pytest.approx(0.7265)  # "Overall ... Rate (%) 72.65"
            # (4.63 - 1) / 0.7265 = 4.997 drafted tokens per verify step: k = 5, the server's
            # num_speculative_tokens.
            assert r["num_spec_tokens"] == 5
            assert r["accept_len"] <= r["num_spec_tokens"] + 1
            assert r["num_drafts"] is None  # the console prints no totals
            assert r["tok_s"] is None and r["format"] == "aiperf_profile_table"
            assert r["engine"] is None and r["origin"] == "client"
            assert "per-request mean is not used" in r["note"]

    def test_the_source_is_the_tables_title_line(self, tmp_path):
        stored, written = both(SPEC, tmp_path)
        assert stored[0]["source"].endswith(f":{header_lines(SPEC) + 1}")
        assert written[0]["source"].endswith("as_written.txt:1")


class TestSpeedBenchReport:
    def test_a_record_per_category_and_not_the_overall(self, tmp_path):
        for rs in both(REPORT, tmp_path):
            by = {r["category"]: r["accept_len"] for r in rs}
            assert len(rs) == len(by) == 11 and "Overall" not in by
            assert by["coding"] == 5.01 and by["math"] == 5.24 and by["roleplay"] == 3.34
            assert {r["model"] for r in rs} == {"meta-llama/Llama-3.1-8B-Instruct"}
            assert all(r["format"] == "aiperf_speed_bench_report_table" for r in rs)
            # Overall 4.56 is the mean of the cells (50.22 / 11 = 4.565 of the rounded ones): a
            # mean of ratios, left out; the run's pooled figure is the console's 4.63.
            assert sum(by.values()) / 11 == pytest.approx(4.56, abs=0.01)
            assert all(r["num_drafts"] is None and r["num_spec_tokens"] is None for r in rs)

    def test_the_csv_it_writes(self, tmp_path):
        for rs in both(REPORT_CSV, tmp_path):
            by = {r["category"]: r["accept_len"] for r in rs}
            assert len(by) == 11 and by["multilingual"] == 2.78 and by["roleplay"] == 2.35
            assert {r["model"] for r in rs} == {"minimax-m2p7-v001-pb8-hd128-g4-s1337-dflash"}
            # Overall 2.52: 27.70 / 11 = 2.518, the cells' mean, not read.
            assert sum(by.values()) / 11 == pytest.approx(2.52, abs=0.005)
            assert all(r["format"] == "aiperf_speed_bench_report" for r in rs)
            assert all("does not name its metric" in r["note"] for r in rs)


class TestConsole:
    def test_each_runs_rates_concurrency_and_model(self, tmp_path):
        for rs in both(CONSOLE, tmp_path):
            first, second = rs
            # "Inter Token Latency (ms) 3.52" is AIPerf's (latency - TTFT) / (tokens - 1), a
            # time per token: tok_s = 1000 / 3.52 = 284.09 per sequence.
            assert first["tpot_ms"] == 3.52 and first["tok_s"] == pytest.approx(1000 / 3.52)
            # "Output Token Throughput (tokens/sec) 527.06", all requests together: 10 requests
            # x 833.40 tokens / "Benchmark Duration: 15.81 sec" = 527.13.
            assert first["aggregate_tok_s"] == 527.06
            assert 10 * 833.40 / 15.81 == pytest.approx(first["aggregate_tok_s"], rel=1e-3)
            # Two at a time decode below 2 x 284.09 tok/s together: prefill and the gaps between.
            assert first["aggregate_tok_s"] < 2 * first["tok_s"]
            # "--concurrency" and "2" are on two lines of the CLI command Rich wrapped.
            assert first["concurrency"] == 2 and first["model"] == "Qwen/Qwen3-0.6B"
            assert first["ttft_ms"] == 19.99
            assert first["context_tokens"] == pytest.approx(5.00 + 833.40 / 2)
            assert first["itl_ms"] is None  # no Inter Chunk Latency row in the console
            # AIPerf cannot tell whether the server speculated: unknown, not a baseline.
            assert first["num_spec_tokens"] is None and first["accept_len"] is None
            assert second["tpot_ms"] == 3.50 and second["aggregate_tok_s"] == 533.83
            assert second["concurrency"] == 2
            assert second["context_tokens"] == pytest.approx(379.80 + 565.60 / 2)


class TestSummary:
    def test_the_json_export(self):
        (r,) = read(SUMMARY)
        assert r["format"] == "aiperf_profile" and r["engine"] is None
        # inter_token_latency avg 49.9045 ms: 20.04 tok/s per sequence.
        assert r["tpot_ms"] == 49.90450843911913
        assert r["tok_s"] == pytest.approx(1000 / 49.90450843911913)
        # output_token_throughput 12.6529 = total_output_tokens 5970 / benchmark_duration 471.828 s
        assert r["aggregate_tok_s"] == pytest.approx(5970 / 471.827992497)
        assert r["itl_ms"] == 50.27950054685125  # inter_chunk_latency: gaps between chunks
        assert r["concurrency"] == 1  # input_config.phases[profiling].concurrency
        assert r["model"] == "Qwen3-VL-30B-A3B-Instruct-optimumxt"
        assert r["context_tokens"] == pytest.approx(584.9 + 298.5 / 2)
        assert r["ttft_ms"] == 8693.7119547
        assert r["timestamp"] == "2026-07-29T09:03:51.478161"
        assert r["num_spec_tokens"] is None and r["accept_len"] is None

    def test_the_csv_export_of_the_same_run(self, tmp_path):
        (whole,) = read(SUMMARY)
        for rs in both(SUMMARY_CSV, tmp_path):
            (r,) = rs
            assert r["format"] == "aiperf_profile_csv"
            # "Inter Token Latency (ms),49.90": the JSON's 49.9045 to two decimals.
            assert r["tpot_ms"] == 49.90 and r["tok_s"] == pytest.approx(whole["tok_s"], rel=2e-4)
            assert r["aggregate_tok_s"] == 12.65 and r["itl_ms"] == 50.28
            assert r["ttft_ms"] == 8693.71
            assert r["context_tokens"] == pytest.approx(584.90 + 298.50 / 2)
            assert r["concurrency"] is None and r["model"] is None  # the CSV prints neither

    def test_aiperfs_summary_is_not_taken_for_vllm_bench_serve(self):
        # Both hold a spec_decode_acceptance_length key; only vLLM's is a number.
        keys = ("spec_decode_acceptance_length", "spec_decode_token_weighted_acceptance_length")
        assert bench_results.bench_format(dict.fromkeys(keys)) == aiperf.PROFILE
        assert bench_results.bench_format(json.loads(SUMMARY.read_text())) == aiperf.PROFILE


class TestRequests:
    def test_a_row_per_request_with_its_own_rate(self):
        rows = read(REQUESTS)
        lines = [json.loads(line) for line in REQUESTS.read_text().splitlines()]
        assert len(rows) == len(lines) == 2
        for row, line in zip(rows, lines, strict=True):
            m = {tag: entry["value"] for tag, entry in line["metrics"].items()}
            decode_ms = m["request_latency"] - m["time_to_first_token"]
            # (252 - 1) tokens / (12912.955548 - 1714.313534) ms = 22.413 tok/s: AIPerf's own
            # output_token_throughput_per_user of the request.
            assert row["tok_s"] == pytest.approx(
                1000 * (m["output_sequence_length"] - 1) / decode_ms
            )
            assert row["tok_s"] == pytest.approx(m["output_token_throughput_per_user"])
            assert row["tpot_ms"] == pytest.approx(m["inter_token_latency"])
            assert row["completion_tokens"] == m["output_sequence_length"]
            assert row["completion_tokens"] == m["usage_completion_tokens"]
            assert (
                row["context_tokens"] == m["input_sequence_length"] + row["completion_tokens"] / 2
            )
            assert row["ttft_ms"] == m["time_to_first_token"]
            gaps = m["inter_chunk_latency"]  # itl_ms: the request's mean gap between chunks
            assert row["itl_ms"] == pytest.approx(sum(gaps) / len(gaps))
            assert row["format"] == "aiperf_records" and row["accept_len"] is None
        assert [r["completion_tokens"] for r in rows] == [252, 329]
        # request_start_ns 1785315831479615692: 09:03:51 UTC, the summary's start_time.
        assert rows[0]["timestamp"] == "2026-07-29T09:03:51+00:00"
        assert json.loads(SUMMARY.read_text())["start_time"].startswith("2026-07-29T09:03:51")

    def test_the_requests_pool_as_a_ratio_of_sums(self):
        tally = Tally()
        tally.count(ingest([REQUESTS]).frame)
        (group,) = tally.groups.values()
        # (251 + 328) tokens / (11198.642014 + 15630.249914) ms = 21.58 tok/s, not the mean
        # of the requests' 22.41 and 20.98 (21.70).
        assert tally.mean(group, "tok_s") == pytest.approx(1000 * 579 / 26828.891928)

    def test_warmup_and_failed_requests_are_left_out(self, tmp_path):
        # AIPerf leaves them out of every figure: so does ingest.  The real records, one
        # marked warmup and one failed, as AIPerf marks them.
        first, second = (json.loads(line) for line in REQUESTS.read_text().splitlines())
        first["metadata"]["benchmark_phase"] = "warmup"
        failed = json.loads(json.dumps(second))
        failed["error"] = {"code": 500, "type": "InternalServerError", "message": "boom"}
        path = tmp_path / "profile_export.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in (first, failed, second)))
        (row,) = read(path)
        assert row["source"].endswith(":3") and row["completion_tokens"] == 329


@pytest.mark.parametrize("block", [7, 64, 300, 1000])
@pytest.mark.parametrize("fixture", [SPEC, REPORT, REPORT_CSV, CONSOLE, SUMMARY_CSV])
def test_tables_cut_by_block_boundaries_read_the_same(monkeypatch, fixture, block):
    # A table, a wrapped label or a CLI command split between two blocks of the text scanner
    # is read again whole with the next block.
    whole = ingest([fixture]).records
    monkeypatch.setattr(sources, "BLOCK_BYTES", block)
    result = ingest([fixture])
    assert result.problems == [] and result.records == whole


class TestHostile:
    def test_a_cut_off_summary_is_one_clear_problem(self, tmp_path):
        text = SUMMARY.read_text()
        path = tmp_path / "profile_export_aiperf.json"
        path.write_text(text[: len(text) // 3])
        result = ingest([path])
        (problem,) = result.problems
        assert result.records == [] and "does not parse" in problem.message
        assert "cut off" in problem.message and "\n" not in str(problem)

    def test_a_cut_off_last_record_keeps_the_ones_before(self, tmp_path):
        text = REQUESTS.read_text()
        path = tmp_path / "profile_export.jsonl"
        path.write_text(text[:-3000])  # an interrupted run's last line
        result = ingest([path])
        (problem,) = result.problems
        assert len(result.records) == 1 and problem.line == 2 and "cut off" in problem.message

    @pytest.mark.parametrize(
        ("fixture", "old", "new", "expected"),
        [
            (
                CONSOLE,
                "│  Inter Token Latency │     3.52",
                "│  Inter Token Latency │     x.52",
                "'x.52'",
            ),
            (SUMMARY, '"avg": 49.90450843911913', '"avg": "fast"', "'fast', expected a number"),
            (SUMMARY, '"inter_token_latency": {', '"inter_token_latency": [1], "x": {', "[1]"),
            (REQUESTS, '"unit":"ms"}', '"unit":"minutes"}', "'minutes'"),
            (REPORT, "│   5.01 │", "│   five │", "'five'"),
        ],
    )
    def test_a_garbled_value_is_a_problem_naming_its_line(
        self, tmp_path, fixture, old, new, expected
    ):
        text = fixture.read_text()
        assert old in text
        path = tmp_path / fixture.name
        path.write_text(text.replace(old, new, 1))
        result = ingest([path])
        assert result.problems and all(p.line is not None for p in result.problems)
        assert any(expected in p.message for p in result.problems)
        assert all("\n" not in str(p) for p in result.problems)

    def test_a_console_cut_inside_its_table(self, tmp_path):
        lines = CONSOLE.read_text().splitlines(keepends=True)
        path = tmp_path / "console.txt"
        path.write_text("".join(lines[: header_lines(CONSOLE) + 16]))  # inside the first table
        result = ingest([path])
        (problem,) = result.problems
        assert "without its bottom border" in problem.message
        (r,) = result.records  # the rows above the cut: TTFT, latency, ITL
        assert r["tpot_ms"] == 3.52 and r["aggregate_tok_s"] is None


def test_the_summary_keeps_each_category_apart():
    # ingest's summary is per file, run, concurrency and category: the report's 11 categories
    # are 11 lines, each its own accept_len (roleplay 3.34 beside math 5.24), never one mean.

    path = DATA / "aiperf_docs_speedbench_llama31_8b_draft_k5_report_console.txt"
    r = run_cli(["ingest", str(path), "--wide"])
    assert r.exit_code == 0, r.output
    assert "by file, run, concurrency and category:" in r.output
    lines = [line for line in r.output.splitlines() if "report_console.txt" in line]
    assert len(lines) == 11
    assert any("roleplay" in x and "3.340" in x for x in lines)
    assert any("math" in x and "5.240" in x for x in lines)
