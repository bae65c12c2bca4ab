"""Each workload category's acceptance from its own requests' counts (issue 38, item 7): bench
against a server whose categories accept differently, then ``check``, ``compare`` and the API.

The field report: llama.cpp's request rows carry their own drafted and accepted tokens
(``timings.draft_n``, ``draft_n_accepted``), yet every category read the level's pooled
accept_len.  A category's accept_len is ``1 + sum(accepted) / sum(cycles)`` over its own
requests and its acceptance rate ``sum(accepted) / sum(drafted)``; llama.cpp counts no cycles per
request, so a request's are its drafted tokens over the level's drafted tokens per cycle (its
``/metrics`` counters, the level's server row).  Where requests carry no counts of their own (a
server that counts only on ``/metrics``), every category keeps the level's value and says so.

The fake server (tests/fake_server.py) streams a verify cycle a chunk: a code prompt's cycles
carry 4 tokens (3 drafts accepted), chat's 2 and math's 1, so the answers are known exactly."""

from __future__ import annotations

import csv
import json
import math

import pandas as pd
import pytest
from cli_checks import run_cli
from engine_fixtures import DATA
from fake_server import Behaviour, FakeServer

from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.ingest import ingest
from breakeven.measurements.check import check
from breakeven.measurements.workload import CategoryRow
from breakeven.model.pooling import request_drafts

K = 4
CYCLE_TOKENS = {"code": 4, "chat": 2, "math": 1}
"""Tokens a verify cycle of each category's requests emits: 1 + the drafts it accepted."""
MAX_TOKENS = 24  # a whole number of cycles in every category
REQUESTS = 12  # two prompts a category, each sent twice


def _prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    lines = [
        json.dumps({"prompt": f"a {cat} question, number {i}", "category": cat})
        for i in range(2)
        for cat in CYCLE_TOKENS
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _bench(tmp_path, out, label, k, **behaviour):
    """``breakeven bench`` of the prompts file against a fake server at concurrency 2."""
    with FakeServer(Behaviour(seconds_per_token=0.001, **behaviour)) as server:
        args = ["bench", "--url", server.url, "--label", label, "-k", k]
        args += ["--max-tokens", MAX_TOKENS, "--requests", REQUESTS, "--concurrency", 2]
        args += ["--prompts", _prompts(tmp_path), "--out", out]
        r = run_cli([str(a) for a in args])
    assert r.exit_code == 0, r.output


def _runs(tmp_path, **speculative):
    """A baseline, then a speculative run whose categories accept as CYCLE_TOKENS says, in
    one CSV."""
    out = tmp_path / "runs.csv"
    _bench(tmp_path, out, "base", 0)
    by_prompt = {cat: n for cat, n in CYCLE_TOKENS.items()}
    _bench(
        tmp_path, out, "spec", K, num_spec_tokens=K, chunk_tokens_by_prompt=by_prompt, **speculative
    )
    return out


def _rows(path, origin):
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["origin"] == origin and r["label"] == "spec"]


def _expected(path):
    """Each category's accept_len and acceptance rate pooled by hand from the bench rows: the
    requests' cycles their own (num_drafts) where they give them, else their drafted tokens
    over the level's drafted tokens per cycle (its server row)."""
    (level,) = _rows(path, "server")
    per_cycle = float(level["draft_tokens"]) / float(level["num_drafts"])
    out = {}
    for cat in CYCLE_TOKENS:
        mine = [r for r in _rows(path, "client") if r["category"] == cat]
        accepted = sum(int(r["accepted_tokens"]) for r in mine)
        drafted = sum(int(r["draft_tokens"]) for r in mine)
        cycles = sum(
            int(r["num_drafts"]) if r["num_drafts"] else int(r["draft_tokens"]) / per_cycle
            for r in mine
        )
        out[cat] = (1 + accepted / cycles, accepted / drafted)
    return out


def _check_json(path):
    r = run_cli(["check", str(path), "--json"])
    assert r.exit_code == 0, r.output
    return {x["category"]: x for x in json.loads(r.stdout)["categories"]}


# llama.cpp: each request's drafted and accepted tokens, no cycles.


@pytest.fixture(scope="module")
def llamacpp_runs(tmp_path_factory):
    """llama-server's way: each request's ``timings`` (draft_n, draft_n_accepted), its drafts
    3 tokens long where k is 4 (a draft model stops short under --draft-p-min)."""
    return _runs(tmp_path_factory.mktemp("llamacpp"), llamacpp_timings=True, draft_len=3)


def test_llamacpp_rows_keep_each_requests_counts_and_the_levels(llamacpp_runs):
    client, (level,) = _rows(llamacpp_runs, "client"), _rows(llamacpp_runs, "server")
    assert len(client) == REQUESTS
    for r in client:
        cycles = MAX_TOKENS // CYCLE_TOKENS[r["category"]]
        assert int(r["draft_tokens"]) == 3 * cycles
        assert int(r["accepted_tokens"]) == (CYCLE_TOKENS[r["category"]] - 1) * cycles
        # Its own fraction of drafted tokens accepted; no accept_len: it counts no cycles.
        rate = int(r["accepted_tokens"]) / int(r["draft_tokens"])
        assert float(r["acceptance_rate"]) == pytest.approx(rate)
        assert r["accept_len"] == "" and r["num_drafts"] == ""
    # The level's counters: its drafted tokens per cycle (3, not k) give a request's cycles.
    assert int(level["draft_tokens"]) == sum(int(r["draft_tokens"]) for r in client)
    assert int(level["accepted_tokens"]) == sum(int(r["accepted_tokens"]) for r in client)
    assert int(level["draft_tokens"]) == 3 * int(level["num_drafts"])


def test_llamacpp_categories_accept_as_their_own_requests_did(llamacpp_runs):
    data, _ = read_measurements(llamacpp_runs)
    rows = {r.category: r for r in check(data).categories}
    expected = _expected(llamacpp_runs)
    assert set(rows) == set(CYCLE_TOKENS)
    for cat, (accept_len, rate) in expected.items():
        row = rows[cat]
        assert row.accept_len == pytest.approx(accept_len, rel=1e-12)
        assert row.accept_len == pytest.approx(CYCLE_TOKENS[cat])  # 1 + 3, 1 + 1, 1 + 0
        assert row.acceptance_rate == pytest.approx(rate, rel=1e-12)
        assert row.acceptance_from == "requests"
        assert row.requests <= REQUESTS // 3  # its requests with a rate (a burst has none)
    assert len({round(r.accept_len, 9) for r in rows.values()}) == 3
    assert rows["code"].acceptance_rate == 1.0 and rows["math"].acceptance_rate == 0.0
    # The categories pool back to the level's own accept_len, from its counters.
    (level,) = _rows(llamacpp_runs, "server")
    client = _rows(llamacpp_runs, "client")
    cycles = sum(int(r["draft_tokens"]) for r in client) / 3
    pooled = 1 + sum(int(r["accepted_tokens"]) for r in client) / cycles
    assert float(level["accept_len"]) == pytest.approx(pooled)


def test_llamacpp_categories_through_check_and_compare(llamacpp_runs):
    expected = _expected(llamacpp_runs)
    cats = _check_json(llamacpp_runs)
    args = ["compare", f"base={llamacpp_runs}", f"spec={llamacpp_runs}", "--json"]
    r = run_cli(args)
    assert r.exit_code == 0, r.output
    compared = {x["category"]: x for x in json.loads(r.stdout)["categories"]}
    for got in (cats, compared):
        for cat, (accept_len, rate) in expected.items():
            assert got[cat]["accept_len"] == pytest.approx(accept_len, rel=1e-12)
            assert got[cat]["acceptance_rate"] == pytest.approx(rate, rel=1e-12)
            assert got[cat]["acceptance_from"] == "requests"
    text = run_cli(["check", str(llamacpp_runs), "--wide"]).output
    table = text[text.index("By workload category") :]
    assert "(level)" not in table
    for cat, (accept_len, rate) in expected.items():
        (line,) = [x for x in table.splitlines() if f"  spec  {cat} " in x]
        assert f"{accept_len:.3f}" in line and f"{rate:.3f}" in line


# vLLM's per-request metrics and SGLang's spec_tokens_details count each request's cycles.


def test_vllm_per_request_metrics_give_each_category_its_own(tmp_path):
    out = _runs(tmp_path, per_request_spec=True)
    expected = _expected(out)
    cats = _check_json(out)
    for cat, (accept_len, _) in expected.items():
        assert cats[cat]["accept_len"] == pytest.approx(accept_len, rel=1e-12)
        assert cats[cat]["accept_len"] == pytest.approx(CYCLE_TOKENS[cat])
        assert cats[cat]["acceptance_from"] == "requests"
    rows = {r.category: r for r in check(read_measurements(out)[0]).categories}
    for cat, (accept_len, rate) in expected.items():
        assert rows[cat].accept_len == pytest.approx(accept_len, rel=1e-12)
        # vLLM drafts k tokens a cycle: 3 of 4, 1 of 4 and none accepted.
        assert rows[cat].acceptance_rate == pytest.approx(rate, rel=1e-12)
        assert rows[cat].acceptance_rate == pytest.approx((CYCLE_TOKENS[cat] - 1) / K)


def test_sglang_spec_tokens_details_give_each_category_its_own(tmp_path):
    out = _runs(tmp_path, sglang_spec=True)
    client = _rows(out, "client")
    assert {r["engine"] for r in client} == {"sglang"} and all(r["num_drafts"] for r in client)
    expected = _expected(out)
    cats = _check_json(out)
    for cat, (accept_len, _) in expected.items():
        assert cats[cat]["accept_len"] == pytest.approx(accept_len, rel=1e-12)
        assert cats[cat]["accept_len"] == pytest.approx(CYCLE_TOKENS[cat])
        assert cats[cat]["acceptance_from"] == "requests"


# Only the level's counters: every category has the level's value, and says so.


def test_a_server_that_counts_only_on_metrics_gives_every_category_the_levels(tmp_path):
    out = _runs(tmp_path)
    client, (level,) = _rows(out, "client"), _rows(out, "server")
    assert not any(r["draft_tokens"] or r["accept_len"] for r in client)
    cats = _check_json(out)
    for row in cats.values():
        assert row["accept_len"] == pytest.approx(float(level["accept_len"]))
        assert row["acceptance_from"] == "level"
        # One value of the level's, not a sample of the requests: no interval over them.
        assert row["accept_len_low"] is None and row["accept_len_high"] is None
        assert row["acceptance_rate"] is None
    text = run_cli(["check", str(out)]).output
    table = text[text.index("By workload category") :]
    assert table.count(f"{float(level['accept_len']):.3f} (level)") == 3
    said = " ".join(table.split())
    assert "(level): the run's accept_len over the whole level, from the server's counters" in said


# The pieces, on rows made by hand.


def test_a_requests_cycles_are_its_own_or_its_drafted_tokens_at_the_levels_draft_length():
    rows = pd.DataFrame(
        [
            # vLLM: the request's own cycles.
            {"run_id": "a", "origin": "client", "num_spec_tokens": 4, "num_drafts": 7}
            | {"draft_tokens": 28, "accepted_tokens": 13},
            # llama.cpp: tokens only; its level drafted 30 tokens in 12 cycles (2.5 a cycle).
            {"run_id": "b", "origin": "client", "num_spec_tokens": 4, "num_drafts": None}
            | {"draft_tokens": 10, "accepted_tokens": 6},
            {"run_id": "b", "origin": "server", "num_spec_tokens": 4, "num_drafts": 12}
            | {"draft_tokens": 30, "accepted_tokens": 20},
            # No level's counts (a level stopped before its scrape): every cycle drafts k.
            {"run_id": "c", "origin": "client", "num_spec_tokens": 4, "num_drafts": None}
            | {"draft_tokens": 8, "accepted_tokens": 2},
            # More accepted than drafted (a server's fault), and no counts at all: none.
            {"run_id": "b", "origin": "client", "num_spec_tokens": 4, "num_drafts": None}
            | {"draft_tokens": 1, "accepted_tokens": 5},
            {"run_id": "b", "origin": "client", "num_spec_tokens": 4, "num_drafts": None},
        ]
    )
    echo = rows["origin"] == "server"
    got = request_drafts(rows, echo)
    assert list(got[:4]) == [7, 4, 12, 2] and got[4:].isna().all()


def test_a_category_row_made_by_position_still_has_no_acceptance_rate():
    row = CategoryRow("r", 1.0, "code", 4, 4, 2.0, 1.9, 2.1, 80.0, 50.0, 1.6, 1.5, 1.7, "faster")
    assert math.isnan(row.acceptance_rate) and row.acceptance_from == ""


# Real engine output: two SGLang requests' meta_info, each its own category.


def test_real_sglang_requests_each_pool_their_own_counts(tmp_path):
    """pr13425's JSON-grammar request (4 verify forwards, 9 of 20 drafts accepted) and
    pr13754's length-capped answer (188 forwards, 11 of 940): as two categories of one run,
    each has its own request's 1 + accepted / forwards, never their mean."""
    paths = [
        DATA / "sglang_request_meta_info_pr13425_generate_result.txt",
        DATA / "sglang_request_meta_info_pr13754_generate_json_cut.txt",
    ]
    records = ingest(paths, num_spec_tokens=4).records
    spec = pd.DataFrame(records)
    spec = spec.assign(category=["json", "chat"], label="spec", run_id="spec")
    spec = spec.assign(model="m", hardware="h", concurrency=1, tok_s=50.0)
    base = spec.assign(label="base", run_id="base", num_spec_tokens=0, tok_s=40.0)
    base = base.assign(accept_len=None, num_drafts=None, draft_tokens=None, accepted_tokens=None)
    rows = {r.category: r for r in check(pd.concat([base, spec])).categories}
    assert rows["json"].accept_len == pytest.approx(1 + 9 / 4)
    assert rows["chat"].accept_len == pytest.approx(1 + 11 / 188)
    assert rows["json"].acceptance_rate == pytest.approx(9 / 20)
    assert rows["chat"].acceptance_rate == pytest.approx(11 / 940)
    assert {r.acceptance_from for r in rows.values()} == {"requests"}
