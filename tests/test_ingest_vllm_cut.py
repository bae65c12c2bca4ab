"""vLLM server-log lines as users paste them (issue 44): cut, clipped, quoted in prose, or run
together with their newlines lost.

Every fixture is real text (its '#' header names the source); each test reads it as stored and
as it was printed, without the header.  Where no real sample of a kind was found, the test cuts
or joins a real fixture the way the kind describes, and says so.
"""

import pytest
from engine_fixtures import DATA, both

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
