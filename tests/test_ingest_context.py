"""``context_tokens`` from engine output: each value checked against the fixture's own printed
numbers, by hand, read as the fixture is and as the engine wrote it (no '#' header)."""

import pytest
from engine_fixtures import DATA, as_written, both

from breakeven.iotools import sources
from breakeven.iotools.ingest import ingest


class TestSglang:
    def test_token_per_running_request_issue11948(self, tmp_path):
        # "#running-req: 1, #token: 108" ... "#token: 412": one request, its tokens in the cache.
        path = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
        for rs in both(path, tmp_path, num_spec_tokens=3):
            assert [r["context_tokens"] for r in rs] == [
                108 / 1,
                186 / 1,
                258 / 1,
                340 / 1,
                412 / 1,
            ]

    def test_32_running_requests_issue4759(self, tmp_path):
        # "#running-req: 32, #token: 7352": 7352 / 32 = 229.75 tokens per sequence.
        path = DATA / "sglang_decode_batch_issue4759_mar2025_old_format.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["context_tokens"] == pytest.approx(7352 / 32)

    def test_none_without_running_requests_or_with_preallocated_kv(self, tmp_path):
        path = tmp_path / "log.txt"
        path.write_text(
            "[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 0, #token: 0, token usage: "
            "0.00, cuda graph: True, gen throughput (token/s): 0.00, #queue-req: 0\n"
            "[2026-01-01 00:00:02 TP0] Decode batch, #running-req: 4, #token: 4000, token usage: "
            "0.10, pre-allocated usage: 0.05, #prealloc-req: 2, #transfer-req: 0, "
            "#retracted-req: 0, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0\n"
            "[2026-01-01 00:00:03 TP0] Decode batch, #running-req: 4, #token: 4000, token usage: "
            "0.10, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, "
            "#retracted-req: 0, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0\n"
        )
        rs = ingest([path]).records
        assert [r["context_tokens"] for r in rs] == [None, None, 4000 / 4]


class TestLlamacpp:
    def test_release_line_gives_the_prompt_pr24536(self, tmp_path):
        # "eval time = 2296.72 ms / 256 tokens" and "stop processing: n_tokens = 275" of task 0:
        # the slot held the prompt and 256 - 1 generated tokens, so the prompt is
        # 275 - 255 = 20 (the "prompt eval ... / 20 tokens" line agrees: nothing was cached),
        # and the mean context while it decoded 20 + 256 / 2 = 148.
        path = DATA / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["context_tokens"] == (275 - (256 - 1)) + 256 / 2 == 148

    def test_prompt_eval_alone_gives_none(self, tmp_path):
        # Its "prompt eval ... / 13 tokens" then "/ 1 tokens" for the same prompt again: the
        # second reused 12 cached tokens, so the count processed is no prompt length.
        path = DATA / "llamacpp_server_lv4_launch_lines_this_suite.txt"
        for rs in both(path, tmp_path):
            assert [r["context_tokens"] for r in rs] == [None, None]

    def test_new_prompt_line_and_either_order_of_the_release_line(self, tmp_path):
        """The issue9013 log (2025), its lines given the 2026 prefix: 'new prompt' gives P = 51;
        its release line alone (before the timings, as 2025 builds print it, or after, as 2026
        ones do) gives 325 - (275 - 1) = 51 too; mean context 51 + 275 / 2."""
        source = (DATA / "llamacpp_server_issue9013_plain_no_spec_2025.txt").read_text()
        prefix = "0.01.000.000 I slot update_slots: id  0 | task 0 | "
        lines = {
            "prompt": "new prompt, n_ctx_slot = 4096, n_keep = 0, n_prompt_tokens = 51",
            "stop": "stop processing: n_past = 325, truncated = 0",
            "eval": "       eval time =   23038.87 ms /   275 tokens (   83.78 ms per token, "
            "   11.94 tokens per second)",
        }
        for text in lines.values():
            assert text.strip() in source
        expected = 51 + 275 / 2
        for order in (("prompt", "eval"), ("stop", "eval"), ("eval", "stop")):
            path = tmp_path / ("_".join(order) + ".txt")
            path.write_text("".join(prefix + lines[name] + "\n" for name in order))
            (r,) = ingest([path]).records
            assert r["context_tokens"] == expected, order
        other = tmp_path / "other_task.txt"
        other.write_text(
            prefix
            + lines["eval"]
            + "\n"
            + prefix.replace("task 0", "task 1")
            + lines["stop"]
            + "\n"
        )
        assert ingest([other]).records[0]["context_tokens"] is None

    @pytest.mark.parametrize("block", [16, 64, 200])
    def test_a_release_line_in_a_later_parse(self, tmp_path, monkeypatch, block):
        """The release line after its request's timings, parsed with the next lines: the
        record waits for it."""
        from breakeven.iotools import lines

        path = DATA / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
        whole = ingest([path]).records
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        monkeypatch.setattr(lines, "PARSE_ROWS", 1)
        assert ingest([path]).records == whole


class TestTrtllm:
    def test_average_input_and_output_length(self, tmp_path):
        """REQUEST DETAILS of the pr7104 report (1024 in, 1024 out; taken up to its next
        section, before its own PERFORMANCE OVERVIEW) followed by the pr5206 report's
        PERFORMANCE OVERVIEW and DECODING STATISTICS: one report, context 1024 + 1024 / 2 =
        1536."""
        details = as_written(DATA / "trtllm_bench_pr7104_dsr1_no_spec_excerpt.txt", tmp_path)
        details = details.read_text()
        details = details[: details.index("= WORLD + RUNTIME INFORMATION")]
        rest = as_written(
            DATA / "trtllm_bench_pr5206_qwen3_eagle3_old_ar_format.txt", tmp_path, "rest.txt"
        )
        path = tmp_path / "report.txt"
        path.write_text(details + rest.read_text())
        (r,) = ingest([path]).records
        assert r["context_tokens"] == 1024.0000 + 1024.0000 / 2 == 1536
        assert r["tpot_ms"] == 4.688 and r["accept_len"] == 1.81

    def test_none_without_the_lengths(self, tmp_path):
        path = DATA / "trtllm_bench_pr5206_qwen3_eagle3_old_ar_format.txt"
        for rs in both(path, tmp_path):
            assert [r["context_tokens"] for r in rs] == [None]


def test_vllm_server_log_gives_none(tmp_path):
    path = DATA / "vllm_v1_specdecoding_issue19254_ngram_qwen3_32b.txt"
    for rs in both(path, tmp_path):
        assert rs and all(r["context_tokens"] is None for r in rs)


class TestVllmBenchServe:
    def test_table_totals_cpu_v0320(self, tmp_path):
        # "Successful requests: 16", "Total input tokens: 1029", "Total generated tokens: 1024":
        # (1029 + 1024 / 2) / 16 = 96.3125 tokens per request.
        path = DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["context_tokens"] == (1029 + 1024 / 2) / 16

    def test_save_detailed_gives_each_request_its_own(self):
        # input_lens[4] = 66, output_lens[4] = 64: 66 + 64 / 2 = 98.
        path = DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.json"
        rs = ingest([path]).records
        assert [r["context_tokens"] for r in rs[:5]] == [96, 96, 96, 96, 66 + 64 / 2]
