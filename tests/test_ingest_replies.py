"""A saved reply of an OpenAI-compatible server (one request), read by ingest as bench reads
the same reply from a stream (``breakeven.iotools.replies``): its drafts, verify steps,
histogram and tokens.  The vLLM reply was captured from a real vLLM 0.32.0 (its .source.txt);
the llama.cpp reply comes from a real llama-server in tests/test_llamacpp.py."""

import json

import pytest
from engine_fixtures import DATA

from breakeven.iotools.ingest import ingest


def test_a_vllm_reply_with_its_per_request_metrics(tmp_path):
    # metrics.speculative_decoding: 11 verify steps, 23 of 33 drafts accepted, histogram
    # [1, 1, 5, 4] (k = 3).  accept_len 1 + 23 / 11; a_1 = 10/11, a_2 = 9/11, a_3 = 4/11, the
    # same request's "Per-position acceptance rate: 0.909, 0.818, 0.364" in the server's log
    # (vllm_cpu_v0320_server_draft_model_k3.txt, its first window: 11 drafts).
    path = DATA / "vllm_cpu_v0320_completion_draft_model.json"
    (r,) = ingest([path]).records
    assert r["format"] == "openai_reply" and r["engine"] == "vllm" and r["origin"] == "server"
    assert (r["num_drafts"], r["accepted_tokens"], r["draft_tokens"]) == (11, 23, 33)
    assert r["num_spec_tokens"] == 3 and r["completion_tokens"] == 32
    assert r["accept_len"] == pytest.approx(1 + 23 / 11)
    assert r["per_position"] == pytest.approx([10 / 11, 9 / 11, 4 / 11])
    assert [round(a, 3) for a in r["per_position"]] == [0.909, 0.818, 0.364]


def test_replies_as_json_lines_are_a_row_each(tmp_path):
    reply = json.loads((DATA / "vllm_cpu_v0320_completion_draft_model.json").read_text())
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join(json.dumps(reply) for _ in range(3)) + "\n")
    records = ingest([path]).records
    assert len(records) == 3 and sum(r["num_drafts"] for r in records) == 33


def test_a_reply_with_garbled_counts_gives_no_counts(tmp_path):
    reply = json.loads((DATA / "vllm_cpu_v0320_completion_draft_model.json").read_text())
    spec = reply["metrics"]["speculative_decoding"]
    spec.update(num_spec_steps="many", acceptance_histogram=[1, "x"])
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(reply))
    (r,) = ingest([path]).records
    assert r["num_drafts"] is None and r["accept_len"] is None and r["per_position"] is None


@pytest.mark.parametrize("value", [10**400, "9" * 400, -5, 2.5, "1e3", True, float("inf")])
def test_a_count_no_engine_sends_is_none(value):
    # Issue 29 (the server fuzz): completion_tokens of 400 digits overflowed a float later.
    from breakeven.iotools.replies import MAX_COUNT, count

    assert count(value) is None
    assert count(MAX_COUNT) == MAX_COUNT and count(" 42 ") == 42
