"""vLLM server-log lines as users paste them (issue 44): cut, clipped, quoted in prose, or run
together with their newlines lost.

Every fixture is real text (its '#' header names the source); each test reads it as stored and
as it was printed, without the header.  Where no real sample of a kind was found, the test cuts
or joins a real fixture the way the kind describes, and says so.
"""

import pytest
from cli_checks import run_cli
from engine_fixtures import DATA, as_written, both

from breakeven.iotools.ingest import ingest

CUT_LIST = DATA / "vllm_v1_specdecoding_issue26402_per_position_list_cut.txt"


class TestCutPerPositionList:
    def test_k_is_not_the_length_of_a_cut_list_issue26402(self, tmp_path):
        # "Mean acceptance length: 1.99, ..., Accepted: 162 tokens, Drafted: 820 tokens,
        # Per-position acceptance rate: 0.616, 0.244, 0.1..." (the quote cut the list).
        for rs in both(CUT_LIST, tmp_path):
            (r,) = rs
            # 820 x (1.99 - 1) / 162 = 5.01 tokens a draft: k = 5, not the 3 values printed.
            assert r["num_spec_tokens"] == 5
            assert r["num_drafts"] == 820 / 5
            assert r["accept_len"] == pytest.approx(1 + 162 / (820 / 5))
            assert round(r["accept_len"], 2) == 1.99  # as printed
            # What the cut left: the two whole values; "0.1..." is no value.
            assert r["per_position"] == [0.616, 0.244]
            assert "cut after 2 values: k = 5" in r["note"]
            assert r["acceptance_rate"] == pytest.approx(162 / 820)

    def test_k_given_for_a_cut_list_is_taken(self, tmp_path):
        for rs in both(CUT_LIST, tmp_path, num_spec_tokens=5):
            (r,) = rs
            assert r["num_spec_tokens"] == 5 and "from -k or the launch" in r["note"]

    def test_a_cut_list_with_no_k_to_tell_keeps_the_printed_mean(self, tmp_path):
        # The same line without its mean's digits: the counts cannot tell k.
        text = CUT_LIST.read_text().replace("Mean acceptance length: 1.99, ", "")
        path = tmp_path / "no_mean.txt"
        path.write_text(text)
        for rs in both(path, tmp_path):
            (r,) = rs
            assert r["num_spec_tokens"] is None and r["accept_len"] is None
            assert "nothing tells k" in r["note"]


WINDOWS = DATA / "vllm_v1_windows_club3090_issue105_prefill_then_decode.txt"


def _cut_after_drafted_throughput(path, tmp_path, name):
    """The fixture with each SpecDecoding line cut right after "Drafted throughput: N
    tokens/s" (no real sample of such a cut was found: club-3090 issue 105's log, cut)."""
    out = []
    for line in path.read_text().splitlines():
        if "SpecDecoding metrics:" in line and not line.startswith("#"):
            line = line[: line.index(" tokens/s, Accepted: ") + len(" tokens/s")]
        out.append(line + "\n")
    cut = tmp_path / name
    cut.write_text("".join(out))
    return cut


class TestCutAfterThroughputs:
    def test_a_spec_line_cut_after_drafted_throughput_gives_acceptance(self, tmp_path):
        # club-3090 issue 105: "Accepted throughput: 48.90 tokens/s, Drafted throughput:
        # 157.19 tokens/s" (k = 6 from the launch; -k here), then "45.49" and "158.98".
        cut = _cut_after_drafted_throughput(WINDOWS, tmp_path, "cut.txt")
        assert "Drafted: " not in cut.read_text().replace("Drafted throughput", "")
        for rs in both(cut, tmp_path, num_spec_tokens=6):
            assert [r["format"] for r in rs] == ["vllm_v1", "vllm_v1"]  # one record a window
            prefill, decode = rs
            assert prefill["accept_len"] == pytest.approx(1 + 48.90 / (157.19 / 6))
            assert decode["accept_len"] == pytest.approx(1 + 45.49 / (158.98 / 6))
            # The counts gave 2.87 and 2.72 (the full lines, printed so as well).
            assert [round(r["accept_len"], 2) for r in rs] == [2.87, 2.72]
            assert decode["acceptance_rate"] == pytest.approx(45.49 / 158.98)
            assert [r["num_spec_tokens"] for r in rs] == [6, 6]
            assert all(r["accepted_tokens"] is None and r["num_drafts"] is None for r in rs)
            assert all("cut after its throughputs" in r["note"] for r in rs)
            assert decode["tok_s"] == 72.0  # the throughput line beside it is whole

    def test_without_k_the_printed_mean_stands(self, tmp_path):
        cut = _cut_after_drafted_throughput(WINDOWS, tmp_path, "cut.txt")
        for rs in both(cut, tmp_path):
            assert [r["accept_len"] for r in rs] == [2.87, 2.72]
            assert [r["num_spec_tokens"] for r in rs] == [None, None]


PROSE = DATA / "vllm_prose_issue10252_bullet_quotes_generation_throughput.txt"


class TestProseQuotingALogLine:
    def test_a_bullet_quoting_the_throughput_field_is_no_log_line_issue10252(self, tmp_path):
        # "... significantly slower: - Avg generation throughput: 6.5 tokens/s (compared to
        # 43.5 tokens/s in version 0.6.3)." is prose: the file holds no log line at all.
        for path in (PROSE, as_written(PROSE, tmp_path)):
            result = run_cli(["ingest", path])
            assert result.exit_code == 2
            assert "does not parse" not in result.output
            assert "holds nothing breakeven reads" in result.output

    def test_a_log_with_the_prose_after_it_is_read_whole(self, tmp_path):
        # club-3090 issue 105's log with vLLM issue 10252's sentence after it (as notes kept
        # beside a log): its two windows, and no problem.
        mixed = tmp_path / "log_and_notes.txt"
        mixed.write_text(WINDOWS.read_text() + as_written(PROSE, tmp_path).read_text())
        result = run_cli(["ingest", mixed, "--json"])
        assert result.exit_code == 0, result.output
        assert "does not parse" not in result.output
        for rs in both(mixed, tmp_path):
            assert [r["gen_tok_s"] for r in rs] == [74.7, 72.0]


def _clip_throughput_lines(path, tmp_path, at, name):
    """The fixture with each throughput line clipped to start at ``at`` (no real sample of a
    clipped line followed by its spec line was found: club-3090 issue 105's log, clipped)."""
    out = []
    for line in path.read_text().splitlines():
        if "Avg generation throughput" in line and not line.startswith("#"):
            line = line[line.index(at) :]
        out.append(line + "\n")
    clipped = tmp_path / name
    clipped.write_text("".join(out))
    return clipped


class TestClippedThroughputLine:
    def test_a_throughput_line_without_its_prefix_is_joined_to_its_spec_line(self, tmp_path):
        # "Engine 000: Avg prompt throughput: 0.0 tokens/s, ..." with "(APIServer pid=13026)
        # INFO 05-08 16:25:19 [loggers.py:271] " clipped; its SpecDecoding line keeps its own.
        clipped = _clip_throughput_lines(WINDOWS, tmp_path, "Engine 000:", "clipped.txt")
        for rs in both(clipped, tmp_path):
            assert [r["format"] for r in rs] == ["vllm_v1", "vllm_v1"]  # one record a window
            prefill, decode = rs
            assert [r["gen_tok_s"] for r in rs] == [74.7, 72.0]
            assert [r["prompt_tok_s"] for r in rs] == [2.5, 0.0]
            assert decode["tok_s"] == 72.0 and prefill["tok_s"] is None
            assert [r["timestamp"] for r in rs] == ["05-08 16:25:09", "05-08 16:25:19"]
            assert all("timestamp clipped" in r["note"] for r in rs)
            assert decode["accept_len"] == pytest.approx(1 + 455 / (1590 / 6))

    def test_a_line_clipped_past_its_prompt_throughput_gives_no_rate(self, tmp_path):
        # Clipped to "Avg generation throughput: 72.0 tokens/s, Running: 1 reqs, ...": whether
        # a request started in the window is lost with the prompt throughput.
        at = "Avg generation throughput"
        clipped = _clip_throughput_lines(WINDOWS, tmp_path, at, "no_prompt.txt")
        for rs in both(clipped, tmp_path):
            assert [r["format"] for r in rs] == ["vllm_v1", "vllm_v1"]
            assert [r["gen_tok_s"] for r in rs] == [74.7, 72.0]
            assert [r["prompt_tok_s"] for r in rs] == [None, None]
            assert all(r["tok_s"] is None and r["aggregate_tok_s"] is not None for r in rs)
            assert all("prompt throughput is lost" in r["note"] for r in rs)


JOINED = DATA / "vllm_v1_joined_issue15958_newlines_lost.txt"


class TestNewlinesLost:
    def test_records_run_together_on_one_line_are_split_issue15958(self, tmp_path):
        # "... hit rate: 50.0% INFO 04-02 18:03:41 [metrics.py:53] SpecDecoding metrics: Draft
        # acceptance rate: nan%, Accepted: 0 tokens, Drafted: 0 tokens INFO 04-02 18:03:51
        # [loggers.py:87] Engine 000: ...": three windows, the first two with their spec line.
        for rs in both(JOINED, tmp_path):
            assert [r["format"] for r in rs] == ["vllm_v1", "vllm_v1", "vllm_throughput"]
            assert [r["timestamp"] for r in rs] == [
                "04-02 18:03:41",
                "04-02 18:03:51",
                "04-02 18:04:01",
            ]
            assert [r["gen_tok_s"] for r in rs] == [0.0, 0.0, 0.0]
            assert [r["running_reqs"] for r in rs] == [0, 0, 0]
            # Nothing drafted (the issue's bug: spec lines with spec decoding off).
            assert [r["draft_tokens"] for r in rs] == [0, 0, None]
            assert all(r["accept_len"] is None and r["tok_s"] is None for r in rs)
            # Each part cites the line it was pasted on.
            assert len({r["source"] for r in rs}) == 1

    def test_a_joined_paste_reads_as_the_lines_it_joined(self, tmp_path):
        # The paste's log with each record on its own line again gives the same records.
        text = as_written(JOINED, tmp_path).read_text()
        log = text[text.index("INFO 04-02") :]
        apart = tmp_path / "apart.txt"
        apart.write_text(log.replace(" INFO 04-02", "\nINFO 04-02"))
        assert len(apart.read_text().splitlines()) == 5
        keys = ("format", "timestamp", "gen_tok_s", "running_reqs", "draft_tokens")
        joined = [{k: r[k] for k in keys} for r in both(JOINED, tmp_path)[1]]
        for rs in both(apart, tmp_path):
            assert [{k: r[k] for k in keys} for r in rs] == joined

    def test_read_with_other_files_it_gives_the_same_records(self, tmp_path):
        # Small inputs are marked together in one query (breakeven.iotools.batch): the split
        # holds there too.
        paths = [JOINED, CUT_LIST, WINDOWS]
        together = ingest(paths).records
        alone = [r for p in paths for r in ingest([p]).records]
        assert together == alone and len(together) == 3 + 1 + 2
