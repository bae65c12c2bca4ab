"""SGLang's per-request meta_info (a request log's ``out={...}``, or ``/generate``'s reply
printed by a script or pasted as JSON): each request's verify forwards and accepted drafts give
its own accept_len, ``1 + accepted / forwards``.  Each value is checked by hand against the
fixture's printed numbers, read as stored and as the engine wrote it (no '#' header)."""

import pytest
from engine_fixtures import DATA, both

from breakeven.iotools.engines.sglang import REQUEST
from breakeven.iotools.ingest import ingest


def test_a_generate_result_printed_as_a_python_dict_pr13425(tmp_path):
    # completion_tokens 14, spec_verify_ct 4, spec_accept_token_num 9, spec_draft_token_num
    # 20: 1 + 9 / 4 = 3.25 tokens a forward.  SGLang printed spec_accept_length 3.5 = 14 / 4,
    # which counts the token the prefill made: 14 = 1 + 4 forwards + 9 accepted.
    path = DATA / "sglang_request_meta_info_pr13425_generate_result.txt"
    for rs in both(path, tmp_path):
        (r,) = rs
        assert r["format"] == REQUEST and r["engine"] == "sglang"
        assert (r["num_drafts"], r["accepted_tokens"], r["draft_tokens"]) == (4, 9, 20)
        assert r["accept_len"] == 1 + 9 / 4 == (14 - 1) / 4
        assert r["completion_tokens"] == 14 and r["tok_s"] is None


def test_a_json_reply_cut_and_wrapped_as_pasted_pr13754(tmp_path):
    # The reply is wrapped inside "type", so the meta_info's counts are on a line of their own:
    # 200 tokens, 188 forwards, 11 accepted: 1 + 11 / 188 = 1.0585 (SGLang printed 200 / 188 =
    # 1.0638, the count that PR fixed).  -k 4 gives k; the drafts, 940 = 188 x 5, are the
    # verify tokens, the root included.
    path = DATA / "sglang_request_meta_info_pr13754_generate_json_cut.txt"
    for rs in both(path, tmp_path, num_spec_tokens=4):
        (r,) = rs
        assert (r["num_drafts"], r["accepted_tokens"], r["draft_tokens"]) == (188, 11, 940)
        assert r["accept_len"] == pytest.approx(1 + 11 / 188)
        assert r["accept_len"] == pytest.approx((200 - 1) / 188)
        assert r["num_spec_tokens"] == 4


def test_without_the_accepted_count_it_comes_from_the_tokens(tmp_path):
    # The 2025 meta_info before spec_accept_token_num (PR 3152: "average acceptance length =
    # completion_tokens / spec_verify_ct") gives the forwards and the tokens: accepted = 14 - 1
    # - 4 = 9, the same request as pr13425's.
    line = "{'meta_info': {'prompt_tokens': 58, 'completion_tokens': 14, 'spec_verify_ct': 4}}\n"
    path = tmp_path / "old.txt"
    path.write_text(line)
    (r,) = ingest([path]).records
    assert r["accepted_tokens"] == 9 and r["accept_len"] == 3.25
