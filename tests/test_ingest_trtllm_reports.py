"""trtllm-bench logs holding several reports (each its own record, with its own fields only),
and reports whose values follow a tab (copied from a web page): every value checked against
the fixture's own printed numbers, read as the fixture is and as the engine wrote it (no '#'
header)."""

import pytest
from engine_fixtures import DATA, as_written, both, header_lines

from breakeven.iotools import sources
from breakeven.iotools.ingest import ingest

BLOG15 = DATA / "trtllm_bench_blog15_dsv32_two_reports_min_latency_max_throughput.txt"
NVBLOG = DATA / "trtllm_bench_nvblog_llama31_8b_report_then_tabbed_overview.txt"
PR5206 = DATA / "trtllm_bench_pr5206_qwen3_eagle3_old_ar_format.txt"
PR5206_TABS = DATA / "trtllm_bench_pr5206_tabs_after_colons_as_copied_from_a_web_page.txt"
VLLM = DATA / "vllm_v1_specdecoding_pr24127_throughput_format.txt"
VLLM_TABS = DATA / "vllm_v1_specdecoding_pr24127_tabs_after_colons_as_copied_from_a_web_page.txt"


class TestSeveralReports:
    def test_two_overviews_of_a_sweep_blog15(self, tmp_path):
        """Min-latency ("[TPOT] (ms): 3.2344", "Per User Output Speed: 312.0708") then
        max-throughput ("98.5219", "11.2591"): two records, neither with a concurrency (no
        REQUEST DETAILS was published) nor an acceptance length (no DECODING STATISTICS)."""
        for rs in both(BLOG15, tmp_path):
            assert [r["tpot_ms"] for r in rs] == [3.2344, 98.5219]
            assert [r["tok_s"] for r in rs] == pytest.approx([1000 / 3.2344, 1000 / 98.5219])
            assert [r["concurrency"] for r in rs] == [None, None]
            assert [r["accept_len"] for r in rs] == [None, None]
            assert [r["context_tokens"] for r in rs] == [None, None]
            assert all(r["format"] == "trtllm_bench" for r in rs)

    def test_each_record_cites_its_own_report_blog15(self):
        # Each report's last read line is its "Per User Output Speed" line: lines 13 and 26 of
        # the reports as written (3 header rules + 10 values, then 3 + 10 more), after ours.
        rs = ingest([BLOG15]).records
        skip = header_lines(BLOG15)
        assert [r["source"].rsplit(":", 1)[1] for r in rs] == [str(skip + 13), str(skip + 26)]

    def test_no_field_is_borrowed_from_the_report_before_nvblog(self, tmp_path):
        """The whole report (94.6050 concurrent requests, 128 in, 128 out, TPOT 7.3272) then
        the page's re-quoted PERFORMANCE OVERVIEW of it (TPOT 7.3272 again, no REQUEST
        DETAILS): the second record has no concurrency and no context of its own."""
        for rs in both(NVBLOG, tmp_path):
            first, second = rs
            assert first["concurrency"] == 94.6050
            assert first["context_tokens"] == 128.0000 + 128.0000 / 2 == 192
            assert first["tpot_ms"] == 7.3272
            assert first["tok_s"] == pytest.approx(1000 / 7.3272)
            assert second["concurrency"] is None and second["context_tokens"] is None
            assert second["tpot_ms"] == 7.3272
            assert second["tok_s"] == pytest.approx(1000 / 7.3272)
            assert first["accept_len"] is None and second["accept_len"] is None

    @pytest.mark.parametrize("order", [(NVBLOG, PR5206), (PR5206, NVBLOG)])
    def test_acceptance_stays_with_its_report(self, tmp_path, order):
        """pr5206's report ("[TPOT] (ms): 4.6880", "[AR] AVERAGE: 1.81", no REQUEST DETAILS)
        beside the NVIDIA blog's (concurrency 94.6050, TPOT 7.3272, no DECODING STATISTICS),
        in either order: the acceptance length and the concurrency each stay in their own."""
        path = tmp_path / "sweep.log"
        path.write_text(
            "".join(as_written(p, tmp_path, f"{i}.txt").read_text() for i, p in enumerate(order))
        )
        rs = ingest([path]).records
        by_tpot = {r["tpot_ms"]: r for r in rs}
        assert len(rs) == 3 and sorted(by_tpot) == [4.688, 7.3272]  # 7.3272 twice (nvblog)
        pr = by_tpot[4.688]
        assert pr["accept_len"] == 1.81 and pr["concurrency"] is None
        assert pr["context_tokens"] is None and pr["tok_s"] == pytest.approx(1000 / 4.688)
        blog = [r for r in rs if r["tpot_ms"] == 7.3272]
        assert [r["concurrency"] for r in blog] == [94.6050, None]
        assert [r["accept_len"] for r in blog] == [None, None]

    @pytest.mark.parametrize("block", [64, 300, 2000])
    def test_the_same_records_read_in_small_blocks(self, tmp_path, monkeypatch, block):
        """A report split across blocks (and parses) is still one report, its own."""
        from breakeven.iotools import lines

        path = tmp_path / "sweep.log"
        path.write_text(
            as_written(NVBLOG, tmp_path, "a.txt").read_text()
            + as_written(PR5206, tmp_path, "b.txt").read_text()
            + as_written(BLOG15, tmp_path, "c.txt").read_text()
        )
        whole = ingest([path]).records
        # nvblog: 7.3272 twice; pr5206: 4.6880; blog15: 3.2344, 98.5219.
        assert [r["tpot_ms"] for r in whole] == [7.3272, 7.3272, 4.688, 3.2344, 98.5219]
        assert [r["concurrency"] for r in whole] == [94.6050, None, None, None, None]
        monkeypatch.setattr(sources, "BLOCK_BYTES", block)
        monkeypatch.setattr(lines, "PARSE_ROWS", 1)
        assert ingest([path]).records == whole


class TestTabs:
    def test_trtllm_report_with_a_tab_after_each_colon(self, tmp_path):
        """pr5206's report with ':\\t' for ': ': TPOT 4.6880, "[AR] AVERAGE:\\t1.81", as
        with spaces."""
        (spaced,) = ingest([PR5206]).records
        for rs in both(PR5206_TABS, tmp_path):
            (r,) = rs
            assert r["tpot_ms"] == 4.688 and r["accept_len"] == 1.81
            assert r["tok_s"] == pytest.approx(1000 / 4.688)
            assert {k: v for k, v in r.items() if k != "source"} == {
                k: v for k, v in spaced.items() if k != "source"
            }

    def test_spaces_then_a_tab_as_the_web_pages_have_them(self, tmp_path):
        """blog15's "[TPOT] (ms):    \\t  3.2344" and the NVIDIA blog's "Per User Output Speed
        (tps/user):      \\t137.1475": the values are read, with no problem."""
        for path in (BLOG15, NVBLOG):
            assert not ingest([path]).problems
        (r, _) = ingest([BLOG15]).records
        assert r["tpot_ms"] == 3.2344

    def test_vllm_line_with_a_tab_after_each_colon(self, tmp_path):
        """vLLM's SpecDecoding line with ':\\t' for ': ' ("Accepted:\\t262 tokens, Drafted:\\t295
        tokens", 5 positions): read as with spaces."""
        (spaced,) = ingest([VLLM]).records
        for path in (VLLM_TABS, as_written(VLLM_TABS, tmp_path)):
            result = ingest([path])
            assert not result.problems
            (r,) = result.records
            assert r["accepted_tokens"] == 262 and r["draft_tokens"] == 295
            assert r["num_drafts"] == 295 / 5 == 59
            assert r["accept_len"] == pytest.approx(1 + 262 / 59)  # printed: 5.44
            assert r["per_position"] == [0.983, 0.949, 0.915, 0.881, 0.712]
            assert r["timestamp"] == "09-09 11:51:35"
            assert {k: v for k, v in r.items() if k != "source"} == {
                k: v for k, v in spaced.items() if k != "source"
            }
