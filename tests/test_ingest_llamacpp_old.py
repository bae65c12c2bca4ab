"""Older llama.cpp output: llama-server's cumulative ``statistics`` lines, ``llama-cli``'s perf
block and ``llama-speculative``'s summary.  Each value is checked against the fixture's own
printed numbers, by hand, read as the fixture is and as the engine wrote it (no '#' header)."""

import pytest
from engine_fixtures import DATA, as_written, both, header_lines

from breakeven.iotools import sources
from breakeven.iotools.engines import llamacpp
from breakeven.iotools.ingest import ingest


class TestStatistics:
    def test_the_first_request_since_the_start_counts_its_own_drafts_pr24536(self, tmp_path):
        # "statistics draft-eagle3: #calls(b,g,a) = 1 87 87, #gen drafts = 87, ...,
        # #acc tokens = 167": b = 1, the first request since the start, so the counters are its
        # own: 87 drafts, each one verify step.  The printed mean len, 2.92, is kept; it is
        # 1 + 167 / 87 = 2.9195 to its two decimals, as the engine computes it.
        path = DATA / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["num_drafts"] == 87 and r["accept_len"] == 2.92
            assert 1 + 167 / 87 == pytest.approx(r["accept_len"], abs=0.005)
            assert r["note"] is None

    def test_two_requests_are_told_apart_by_the_difference_lv4(self, tmp_path):
        # b = 1 then 2: "#gen drafts = 41 ... #acc tokens = 22", then "65 ... 28".  The second
        # request drafted 65 - 41 = 24 times and 28 - 22 = 6 tokens were accepted (its draft
        # line says 6 of 250 - 159 = 91), so 1 + 6 / 24 = 1.25, its printed mean len.
        path = DATA / "llamacpp_server_lv4_acc_per_pos_statistics_this_suite.txt"
        for rs in both(path, tmp_path):
            assert [r["num_drafts"] for r in rs] == [41, 65 - 41]
            assert [r["accepted_tokens"] for r in rs] == [22, 28 - 22]
            assert [r["draft_tokens"] for r in rs] == [159, 250 - 159]
            assert (
                [r["accept_len"] for r in rs]
                == [1.54, 1.25]
                == [
                    round(1 + 22 / 41, 2),
                    round(1 + 6 / 24, 2),
                ]
            )

    def test_counts_from_before_the_excerpt_give_nothing_pr23269(self, tmp_path):
        # Task 229's lines say "#calls(b,g,a) = 4 ...": three requests came before, whose
        # counts the excerpt lacks, so the request's own are unknown; its draft line
        # ("128 accepted / 187 generated", no mean len) is all there is.
        path = DATA / "llamacpp_server_pr23269_statistics_task229_excerpt.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["accepted_tokens"] == 128 and r["draft_tokens"] == 187
            assert r["accept_len"] is None and r["num_drafts"] is None
        # With -k 2, the rate's assumption, as before (a note says so).
        (r,) = ingest([path], num_spec_tokens=2).records
        assert r["accept_len"] == pytest.approx(1 + 2 * 128 / 187)
        assert r["note"] == llamacpp.FROM_RATE_NOTE

    def test_requests_missing_between_two_lines_give_nothing_pr23269(self, tmp_path):
        # Two excerpts of one log, in its order: task 229 ("#calls(b,g,a) = 4 ...") and task
        # 689 ("= 10 ..."): six requests began between them, so the difference (727 - 281 +
        # 3 - 1 drafts) is not task 689's; its own draft line says 118 of 144.
        first = DATA / "llamacpp_server_pr23269_statistics_task229_excerpt.txt"
        second = DATA / "llamacpp_server_pr23269_old_multiline_draft_acceptance_rate_mtp.txt"
        path = tmp_path / "log.txt"
        path.write_text(
            as_written(first, tmp_path, "a.txt").read_text()
            + as_written(second, tmp_path, "b.txt").read_text()
        )
        rs = ingest([path]).records
        assert [r["accepted_tokens"] for r in rs] == [128, 118]
        assert [r["accept_len"] for r in rs] == [None, None]
        assert [r["num_drafts"] for r in rs] == [None, None]

    @staticmethod
    def request(task: int, accepted: int, generated: int, b: int, counts: tuple) -> str:
        """An older build's print_timing block (as in the PR #23269 fixtures) and its
        statistics line: counts are #gen drafts, #gen tokens, #acc tokens."""
        drafts, gen, acc = counts
        return (
            f"slot print_timing: id  0 | task {task} | \n"
            "prompt eval time =     100.00 ms /    10 tokens (   10.00 ms per token,   100.00 "
            "tokens per second)\n"
            "       eval time =    1000.00 ms /    40 tokens (   25.00 ms per token,    40.00 "
            "tokens per second)\n"
            "      total time =    1100.00 ms /    50 tokens\n"
            f"draft acceptance rate = {accepted / generated:.5f} ({accepted:5d} accepted / "
            f"{generated:5d} generated)\n"
            f"statistics draft: #calls(b,g,a) = {b} 30 30, #gen drafts = {drafts}, #acc drafts "
            f"= 1, #gen tokens = {gen}, #acc tokens = {acc}, dur(b,g,a) = 0.001, 1.000, 0.001 ms\n"
            f"slot      release: id  0 | task {task} | stop processing: n_past = 49, "
            "truncated = 0\n"
        )

    @pytest.mark.parametrize("block", [None, 16, 64, 200])
    def test_an_old_build_gets_accept_len_from_the_differences(self, tmp_path, monkeypatch, block):
        # Three requests: the first since the start (b = 1: 5 drafts, 10 of 20 tokens
        # accepted), the next (b = 2: 9 - 5 = 4 drafts, 13 - 10 = 3 of 32 - 20 = 12), then a
        # restart (the counters drop; b = 1 again: its own 2 drafts, 6 of 8).
        path = tmp_path / "log.txt"
        path.write_text(
            self.request(1, 10, 20, 1, (5, 20, 10))
            + self.request(2, 3, 12, 2, (9, 32, 13))
            + self.request(3, 6, 8, 1, (2, 8, 6))
        )
        if block is not None:
            monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        rs = ingest([path]).records
        assert [r["accept_len"] for r in rs] == [1 + 10 / 5, 1 + 3 / 4, 1 + 6 / 2]
        assert [r["num_drafts"] for r in rs] == [5, 9 - 5, 2]
        assert [r["note"] for r in rs] == [llamacpp.STATISTICS_NOTE] * 3

    def test_a_difference_that_disagrees_with_the_draft_line_gives_nothing(self, tmp_path):
        # The second line's difference says 3 accepted tokens (13 - 10) but the request's draft
        # line says 4: the lines are not this request's alone, so neither is used.
        path = tmp_path / "log.txt"
        path.write_text(
            self.request(1, 10, 20, 1, (5, 20, 10)) + self.request(2, 4, 12, 2, (9, 32, 13))
        )
        rs = ingest([path]).records
        assert [r["accept_len"] for r in rs] == [1 + 10 / 5, None]
        assert [r["num_drafts"] for r in rs] == [5, None]


class TestLlamaCli:
    def test_the_perf_block_is_a_one_sequence_baseline_issue5877(self, tmp_path):
        # "eval time =   27636.04 ms /   898 runs   (   30.78 ms per token,    32.49 tokens per
        # second)": 898 single-token decodes, every token but the first (the prompt's).
        path = DATA / "llamacpp_cli_issue5877_llama31_8b_rtx3060.txt"
        for p in (path, as_written(path, tmp_path)):
            read = ingest([p])
            assert not read.problems
            (r,) = read.records
            assert r["format"] == "llamacpp_cli" and r["engine"] == "llamacpp"
            assert r["tok_s"] == 32.49 and r["num_spec_tokens"] == 0 and r["concurrency"] == 1
            assert r["completion_tokens"] == 898 + 1
            assert r["accept_len"] is None

    def test_two_runs_give_two_records_issue34(self, tmp_path):
        # The Orange Pi's "127 runs ... 1.02 tokens per second", then the i5's "57.04".
        path = DATA / "llamacpp_cli_issue34_two_machines_excerpt.txt"
        for rs in both(path, tmp_path):
            assert [r["tok_s"] for r in rs] == [1.02, 57.04]
            assert [r["completion_tokens"] for r in rs] == [127 + 1, 127 + 1]
            assert [r["num_spec_tokens"] for r in rs] == [0, 0]


class TestLlamaSpeculative:
    def test_the_summary_issue5877(self, tmp_path):
        # n_draft 5, n_predict 673, n_drafted 730, n_accept 526: the first token comes from the
        # prompt, then 673 - 526 - 1 = 146 verify steps of 5 drafted tokens (5 x 146 = 730, as
        # printed) made the other 672: accept_len 672 / 146 = 1 + 526 / 146.
        path = DATA / "llamacpp_speculative_issue5877_llama31_8b_draft_1b_excerpt.txt"
        for p in (path, as_written(path, tmp_path)):
            read = ingest([p])
            assert not read.problems
            (r,) = read.records
            assert r["format"] == "llamacpp_speculative" and r["engine"] == "llamacpp"
            assert 5 * (673 - 526 - 1) == 730
            assert r["num_spec_tokens"] == 5 and r["num_drafts"] == 673 - 526 - 1
            assert r["accept_len"] == pytest.approx(1 + 526 / 146) == pytest.approx(672 / 146)
            assert r["accepted_tokens"] == 526 and r["draft_tokens"] == 730
            assert r["acceptance_rate"] == pytest.approx(526 / 730)  # "accept = 72.055%"
            # "decoded  673 tokens in   12.132 seconds, speed:   55.473 t/s": one sequence
            assert r["tok_s"] == 55.473 and r["completion_tokens"] == 673
            assert r["concurrency"] == 1
            # "encoded   14 tokens": the prompt, and half the 673 made
            assert r["context_tokens"] == 14 + 673 / 2

    def test_the_draft_models_eval_line_is_no_run_pr10455(self, tmp_path):
        # After the summary, the draft's "eval time = 8806.60 ms / 855 runs" is its decode
        # calls, not a llama-cli run: one record.  16 x (371 - 313 - 1) = 912 = n_drafted.
        path = DATA / "llamacpp_speculative_pr10455_qwen25_coder_32b_draft_3b_excerpt.txt"
        for rs in both(path, tmp_path):
            (r,) = rs
            assert 16 * (371 - 313 - 1) == 912
            assert r["format"] == "llamacpp_speculative" and r["num_spec_tokens"] == 16
            assert r["num_drafts"] == 57 and r["accept_len"] == pytest.approx(1 + 313 / 57)
            assert r["tok_s"] == 10.781

    @pytest.mark.parametrize("block", [8, 40, 100])
    def test_the_summary_reads_the_same_across_blocks(self, monkeypatch, block):
        path = DATA / "llamacpp_speculative_issue5877_llama31_8b_draft_1b_excerpt.txt"
        whole = ingest([path]).records
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        assert ingest([path]).records == whole

    def test_drafts_short_of_k_are_read_without_accept_len_pr2926(self, tmp_path):
        # August 2023: n_draft 8, n_predict 129, n_drafted 132, n_accept 47.  132 is less than
        # 8 x (129 - 47 - 1) = 648: the drafts stopped short of k (issue 44).  The run is read
        # (its rate is the sequence's), and the perf blocks after it ("214 runs") are no
        # llama-cli runs: one record, no problem.  tests/test_ingest_pasted_kinds.py reads the
        # rest of what it says.
        path = DATA / "llamacpp_speculative_pr2926_aug2023_verify_steps_unknown_excerpt.txt"
        for p, first in ((path, header_lines(path) + 1), (as_written(path, tmp_path), 1)):
            read = ingest([p])
            assert not read.problems
            (r,) = read.records
            assert r["source"] == f"{p}:{first}" and r["tok_s"] == 0.519

    def test_counts_that_do_not_add_up_are_one_problem_not_a_record(self, tmp_path, monkeypatch):
        # pr2926's summary with n_drafted 700, more than 8 x (129 - 47) = 656 (no draft holds
        # more than k tokens): one problem at its summary, no record.
        reported = []
        sequence = llamacpp.ENGINE.sequence

        def spy(rows, state, k, final):
            records, new = sequence(rows, state, k, final)
            reported.extend(new.get("problems") or ())
            return records, new

        monkeypatch.setattr(llamacpp.ENGINE, "sequence", spy)
        path = DATA / "llamacpp_speculative_pr2926_aug2023_verify_steps_unknown_excerpt.txt"
        bad = tmp_path / "bad.txt"
        bad.write_text(path.read_text().replace("n_drafted = 132", "n_drafted = 700"))
        for p, first in ((bad, header_lines(bad) + 1), (as_written(bad, tmp_path), 1)):
            reported.clear()
            read = ingest([p])
            assert read.records == []
            assert read.problems and all(str(p) in str(problem) for problem in read.problems)
            ((line, message),) = reported
            assert line == first
            assert "n_drafted = 700" in message and "= 656" in message
