"""SGLang decode lines that speculate without printing ``accept len``: real engine output, each
value checked by hand against the fixture's printed numbers, read as the fixture is and as the
engine wrote it (no '#' header)."""

import pytest
from engine_fixtures import DATA, both

CUT = DATA / "sglang_decode_batch_pr25960_npu_accept_rate_without_accept_len.txt"
PLAIN = DATA / "sglang_decode_batch_pr22331_no_spec_comma_format.txt"


class TestAcceptRateWithoutAcceptLen:
    def test_the_k_flag_wins_pr25960(self, tmp_path):
        # "Decode batch, #running-req: 45, #token: 44672, token usaccept rate: 0.32, ...":
        # accept len was cut from the paste, accept rate kept: the server speculated.
        for rs in both(CUT, tmp_path, num_spec_tokens=3):
            (r,) = rs
            assert r["num_spec_tokens"] == 3  # -k 3, not a baseline
            assert r["accept_len"] is None and r["acceptance_rate"] is None  # never 1
            assert "accept len not printed" in r["note"]

    def test_without_k_it_is_unknown_not_a_baseline_pr25960(self, tmp_path):
        for rs in both(CUT, tmp_path):
            (r,) = rs
            assert r["num_spec_tokens"] is None  # k is not printed, and no launch line
            assert r["accept_len"] is None

    def test_the_rest_of_the_line_is_read_pr25960(self, tmp_path):
        # "#running-req: 45, #token: 44672", "gen throughput (token/s): 863.65"; the first
        # decode line of the file: its window may span idle time, so no per-sequence rate.
        for rs in both(CUT, tmp_path, num_spec_tokens=3):
            (r,) = rs
            assert r["running_reqs"] == 45 and r["gen_tok_s"] == 863.65
            assert r["context_tokens"] == pytest.approx(44672 / 45)
            assert r["first_after_idle"] is True and r["tok_s"] is None
            assert r["timestamp"] == "2026-05-28T02:59:59"


class TestPlainLinesStayBaselines:
    def test_k_does_not_make_a_plain_line_speculative_pr22331(self, tmp_path):
        # "Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True,
        # gen throughput (token/s): 140.27": no accept len, no accept rate on any line.
        for rs in both(PLAIN, tmp_path, num_spec_tokens=3):
            assert len(rs) == 8 and {r["num_spec_tokens"] for r in rs} == {0}
            assert all(r["accept_len"] is None and r["note"] is None for r in rs)
            assert rs[1]["tok_s"] == pytest.approx(140.27 / 5)

    def test_printed_accept_len_is_kept_issue11948(self, tmp_path):
        # "accept len: 1.95, accept rate: 0.49": accept len as printed; 1.95 / 0.49 = 3.98, about
        # the k + 1 = 4 verify tokens accept rate divides by; acceptance_rate is (1.95 - 1) / 3.
        path = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
        for rs in both(path, tmp_path, num_spec_tokens=3):
            assert rs[1]["accept_len"] == 1.95 and rs[1]["num_spec_tokens"] == 3
            assert rs[1]["acceptance_rate"] == pytest.approx((1.95 - 1) / 3)
            assert rs[1]["accept_len"] / 0.49 == pytest.approx(3 + 1, abs=0.05)
            assert all(r["note"] is None for r in rs)


def test_the_first_decode_line_keeps_its_printed_concurrency_issue11948(tmp_path):
    """The first decode line of a log follows idle time, so its throughput is no decode rate
    (no tok_s), but '#running-req: 1' on the line itself is still its concurrency (found by
    the held-out fidelity set: five SGLang samples lost it)."""
    path = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
    for rs in both(path, tmp_path, num_spec_tokens=3):
        first = rs[0]
        assert first["first_after_idle"] and first["tok_s"] is None
        assert first["concurrency"] == 1  # "#running-req: 1,"
        assert rs[1]["tok_s"] == 178.86 / 1  # "gen throughput (token/s): 178.86"
