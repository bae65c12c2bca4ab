"""Issue 44's remaining reader kinds: result tables and summaries as users paste them.

- ``vllm bench serve`` tables cut inside their Position rows: k from Draft tokens / Drafts;
- ``vllm bench serve`` tables with every line commented out (``# ``), as kept in a script;
- ``llama-speculative`` summaries whose drafts stopped short of k;
- ``trtllm-bench`` reports below another tool's block.

Every fixture is real text (its ``#`` header names the source); each test reads it as stored
and as it was printed, without the header.  Where no real sample of a kind was found, the test
cuts a real fixture the way the kind describes, and says so.
"""

import pytest
from engine_fixtures import DATA, as_written, both, header_lines
from hypothesis import given
from hypothesis import strategies as st

from breakeven.iotools import commented, sources
from breakeven.iotools.ingest import ingest

GLM = DATA / "vllm_bench_serve_specdecode_selfllm_glm52_mtp5.txt"
PR48892 = DATA / "vllm_bench_serve_specdecode_pr48892_mtp1_vs_mtp8.txt"
COMMENTED = DATA / "vllm_bench_serve_commented_out_yiliu30_pp_local_test_res.sh.txt"
PR2926 = DATA / "llamacpp_speculative_pr2926_aug2023_verify_steps_unknown_excerpt.txt"


def _cut(path, tmp_path, before, name="cut.txt"):
    """The fixture cut right before ``before`` (and everything after it)."""
    text = path.read_text()
    out = tmp_path / name
    out.write_text(text[: text.index(before)])
    return out


class TestBenchServeTableCut:
    def test_k_is_draft_tokens_over_drafts_not_the_position_rows_left(self, tmp_path):
        # No real table cut inside its Position rows was found: self-llm's GLM-5.2 MTP run
        # (k = 5: "Drafts: 3932", "Draft tokens: 19660", Positions 0 to 4), cut before
        # "Position 2:" as a paste that lost its end.
        cut = _cut(GLM, tmp_path, "  Position 2:")
        for rs in both(cut, tmp_path):
            baseline, spec = rs
            assert baseline["note"] is None  # its closing rule was read
            assert spec["num_spec_tokens"] == 5 == 19660 / 3932  # not the 2 rows left
            assert spec["per_position"] == [0.6745, 0.4260]
            assert spec["num_drafts"] == 3932 and spec["accept_len"] == pytest.approx(
                1 + 6319 / 3932
            )
            assert spec["tok_s"] == pytest.approx(1000 / 13.45)
            assert "cut after its 'Position 1' row" in spec["note"]
            assert "per-position rates for 2 of k = 5 positions" in spec["note"]

    def test_a_whole_table_says_nothing_was_lost(self, tmp_path):
        for rs in both(GLM, tmp_path):
            assert [r["num_spec_tokens"] for r in rs] == [None, 5]
            assert [r["note"] for r in rs] == [None, None]

    def test_a_table_without_its_closing_rule_says_where_it_ends_pr48892(self, tmp_path):
        # MTP 1 closes with its "====" rule; MTP 8's paste ends after "Position 7:" (8 rows,
        # 88344 / 11043 = 8): k is 8 either way, and its note says the rule is missing.
        for rs in both(PR48892, tmp_path):
            mtp1, mtp8 = rs
            assert (mtp1["num_spec_tokens"], mtp1["note"]) == (1, None)
            assert mtp8["num_spec_tokens"] == 8 == 88344 / 11043
            assert len(mtp8["per_position"]) == 8
            assert "cut after its 'Position 7' row (no closing rule)" in mtp8["note"]

    def test_a_cut_with_drafts_shorter_than_k_gives_no_k(self, tmp_path):
        # The same cut with "Draft tokens" 19661: 19661 / 3932 is no whole number (n-gram and
        # suffix drafts can be shorter than k), and the Position rows were cut: k is not told.
        cut = _cut(GLM, tmp_path, "  Position 2:")
        cut.write_text(cut.read_text().replace("19660", "19661"))
        for rs in both(cut, tmp_path):
            spec = rs[1]
            assert spec["num_spec_tokens"] is None
            assert "k not told" in spec["note"] and "19661 / 3932" in spec["note"]


def _as_printed(path, tmp_path):
    """The commented-out fixture as committed: without our header, which ends at its first
    blank line (every line after it starts with '#' too)."""
    text = path.read_text()
    out = tmp_path / "as_printed.sh"
    out.write_text(text[text.index("\n\n") + 2 :])
    return out


class TestCommentedOutTable:
    def test_a_table_commented_out_in_a_script_is_read_yiliu30(self, tmp_path):
        # "# Mean TPOT (ms):                          70.14" and "93.85", "# Output token
        # throughput (tok/s):         434.40" and "329.86": two runs of 32 prompts, 65536 in
        # and 65536 out each.
        for path in (COMMENTED, _as_printed(COMMENTED, tmp_path)):
            rs = ingest([path]).records
            assert [r["format"] for r in rs] == ["vllm_bench_serve_table"] * 2
            assert [r["tpot_ms"] for r in rs] == [70.14, 93.85]
            assert [r["tok_s"] for r in rs] == pytest.approx([1000 / 70.14, 1000 / 93.85])
            assert [r["aggregate_tok_s"] for r in rs] == [434.40, 329.86]
            assert [r["context_tokens"] for r in rs] == [(65536 + 65536 / 2) / 32] * 2
            assert all(r["note"] is None for r in rs)  # each table closes with '# ===='

    def test_the_records_cite_the_commented_title_lines(self, tmp_path):
        printed = _as_printed(COMMENTED, tmp_path)
        assert [r["source"] for r in ingest([printed]).records] == [f"{printed}:5", f"{printed}:31"]

    @pytest.mark.parametrize("block", [64, 300])
    def test_the_same_records_read_in_small_blocks(self, monkeypatch, block):
        whole = ingest([COMMENTED]).records
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        assert ingest([COMMENTED]).records == whole

    def test_a_comment_that_only_names_a_table_is_not_one(self, tmp_path):
        # Prose in a comment, and a commented table's rows without its title, are comments.
        text = _as_printed(COMMENTED, tmp_path).read_text()
        rows = "\n".join(ln for ln in text.splitlines() if "Serving Benchmark Result" not in ln)
        path = tmp_path / "notes.sh"
        path.write_text("# see the Serving Benchmark Result table below\n" + rows + "\n")
        result = ingest([path])
        assert result.records == []


_PIECES = st.sampled_from(
    [
        "# ============ Serving Benchmark Result ============",
        "# ---------------Speculative Decoding---------------",
        "# Mean TPOT (ms):   7.5",
        "# ==================================================",
        "  #   Position 0:   50.0",
        "Mean TPOT (ms):   8.5",
        "",
        "# just a comment",
        "\t# Output token throughput (tok/s):  10",
    ]
)


@given(st.lists(_PIECES, max_size=30))
def test_uncommenting_keeps_every_line_in_its_place(pieces):
    """Whatever the comments, the table readers see as many lines as were read, each a
    non-comment line unchanged, and no '#' line left as it was."""
    text = "\n".join(pieces)
    seen = commented.tables_uncommented(text).split("\n")
    assert len(seen) == len(text.split("\n"))
    for before, after in zip(text.split("\n"), seen, strict=True):
        if not before.lstrip().startswith("#"):
            assert after == before
        else:
            assert after == "" or not after.lstrip().startswith("#") or after != before


class TestLlamaDraftsShortOfK:
    def test_the_rate_is_read_with_the_acceptance_the_counts_give_pr2926(self, tmp_path):
        # "generated 129 tokens in 248.340 seconds, speed: 0.519 t/s", n_draft 8, n_predict 129,
        # n_drafted 132, n_accept 47: 132 < 8 x 81, drafts stopped short of k.
        for rs in both(PR2926, tmp_path):
            (r,) = rs
            assert r["format"] == "llamacpp_speculative" and r["concurrency"] == 1
            assert r["tok_s"] == 0.519 and r["completion_tokens"] == 129
            assert r["num_spec_tokens"] == 8
            assert r["accepted_tokens"] == 47 and r["draft_tokens"] == 132
            assert r["acceptance_rate"] == pytest.approx(47 / 132)
            # 81 steps (llama-speculative) or 82 (-simple): the summary does not say which.
            assert r["accept_len"] is None and r["num_drafts"] is None
            assert "drafts stopped short of k = 8" in r["note"]
            assert f"1 + 47/81 = {1 + 47 / 81:.3f}" in r["note"]
            assert f"1 + 47/82 = {1 + 47 / 82:.3f}" in r["note"]

    def test_where_only_the_simple_count_fits_accept_len_is_known(self, tmp_path):
        # pr2926's summary with n_drafted 650: more than 8 x 81 = 648, so it cannot be
        # llama-speculative's; llama-speculative-simple verified 129 - 47 = 82 times.
        path = tmp_path / "simple.txt"
        path.write_text(PR2926.read_text().replace("n_drafted = 132", "n_drafted = 650"))
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["num_drafts"] == 82 and r["accept_len"] == pytest.approx(1 + 47 / 82)
            assert r["acceptance_rate"] == pytest.approx(47 / 650)
            assert "only llama-speculative-simple's count fits" in r["note"]

    def test_it_cites_its_summary_line(self, tmp_path):
        (r,) = ingest([PR2926]).records
        assert r["source"] == f"{PR2926}:{header_lines(PR2926) + 1}"
        printed = as_written(PR2926, tmp_path)
        (r,) = ingest([printed]).records
        assert r["source"] == f"{printed}:1"


NVFP4 = DATA / "trtllm_bench_nvfp4_repo_report_below_another_tools_summary.txt"


class TestTrtllmReportBelowAnotherTool:
    def test_the_rate_and_concurrency_are_the_reports_own_nvfp4_repo(self, tmp_path):
        # Above the report: the author's own vLLM summary ("Per User Output Speed (tps/user):
        # 178.8775", "Total Output Throughput (tokens/sec):   1431.0198") and an unheaded
        # re-quote.  The report (not streamed: no TPOT) says "Number of concurrent requests:
        # 7.9940", 13 in, 256 out, "Total Output Throughput (tokens/sec): 1216.0159".
        for rs in both(NVFP4, tmp_path):
            (r,) = rs
            assert r["format"] == "trtllm_bench" and r["engine"] == "trtllm"
            assert r["tok_s"] is None  # not 178.8775: that is another tool's line
            assert r["concurrency"] == 7.9940
            assert r["aggregate_tok_s"] == 1216.0159
            assert r["context_tokens"] == 13.0 + 256.0 / 2
            assert "run without --streaming" in r["note"]

    def test_it_cites_the_reports_own_line(self, tmp_path):
        # The record's last line is the report's "Total Output Throughput" under its
        # "= PERFORMANCE OVERVIEW" (line 56 as printed), not the one above the report.
        printed = as_written(NVFP4, tmp_path)
        (r,) = ingest([printed]).records
        lines = printed.read_text().splitlines()
        cited = int(r["source"].rsplit(":", 1)[1])
        assert lines[cited - 1].startswith("Total Output Throughput (tokens/sec):")
        assert "= PERFORMANCE OVERVIEW" in lines[cited - 4]

    @pytest.mark.parametrize("block", [64, 500])
    def test_the_same_record_read_in_small_blocks(self, monkeypatch, block):
        whole = ingest([NVFP4]).records
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        assert ingest([NVFP4]).records == whole

    def test_a_streamed_report_keeps_its_tpot_below_the_same_block(self, tmp_path):
        # The other tool's block above the NVIDIA blog's streamed report (TPOT 7.3272,
        # concurrency 94.6050): its "Per User Output Speed 178.8775" is not read.
        above = as_written(NVFP4, tmp_path, "above.txt").read_text()
        above = above[: above.index("=====")]
        blog = as_written(
            DATA / "trtllm_bench_nvblog_llama31_8b_report_then_tabbed_overview.txt", tmp_path
        )
        path = tmp_path / "log.txt"
        path.write_text(above + blog.read_text())
        rs = ingest([path]).records
        assert [r["tpot_ms"] for r in rs] == [7.3272, 7.3272]
        assert rs[0]["concurrency"] == 94.6050
        assert all(r["tok_s"] == pytest.approx(1000 / 7.3272) for r in rs)
