"""Acceptance by draft position, and the accept_len of every smaller k (issue 28, item 1):
pooled from the counts bench records per request (vLLM's per-request acceptance histogram) or
from vLLM's per-position log windows weighted by their drafts, then shown by check and compare.
"""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from cli_checks import run_cli
from engine_fixtures import DATA
from fake_server import Behaviour, FakeServer
from hypothesis import given
from hypothesis import strategies as st

from breakeven.bench.config import Config
from breakeven.bench.session import run_bench
from breakeven.iotools.ingest import ingest
from breakeven.measurements.check import check
from breakeven.measurements.positions import from_histogram, parse_histogram, parse_rates

histograms = st.lists(st.integers(0, 10**6), min_size=2, max_size=17).filter(lambda h: sum(h) > 0)


@given(histograms)
def test_the_run_k_accept_len_is_the_pooled_one_and_a_smaller_k_never_gains(counts):
    # accept_len(k) = 1 + a_1 + ... + a_k is 1 + accepted / cycles, the pooled accept_len; each
    # further position adds at most what the one before it did (a prefix is accepted).
    rates = from_histogram(counts)
    k = len(counts) - 1
    assert len(rates) == k
    accepted = sum(j * n for j, n in enumerate(counts))
    by_k = 1 + np.cumsum(rates)
    assert by_k[-1] == pytest.approx(1 + accepted / sum(counts), rel=1e-12)
    assert all(1 >= a >= b >= 0 for a, b in itertools.pairwise(rates))


def test_a_histogram_by_hand():
    # 10 cycles: 2 accepted nothing, 3 one draft, 5 both.  a_1 = 8/10, a_2 = 5/10.
    assert from_histogram([2, 3, 5]) == pytest.approx((0.8, 0.5))
    assert from_histogram([0, 0, 0]) == ()


@pytest.mark.parametrize(
    "text, expected",
    [("2;3;5", (2, 3, 5)), ("", None), ("2;x", None), ("7", None), ("1;-1", None), (None, None)],
)
def test_histogram_text(text, expected):
    assert parse_histogram(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("[0.9, 0.5]", (0.9, 0.5)), ("[]", None), ("[1.5]", None), ("[a]", None), (3.0, None)],
)
def test_rates_text(text, expected):
    assert parse_rates(text) == expected


def _bench(tmp_path, label, k):
    out = tmp_path / f"{label}.csv"
    behaviour = Behaviour(
        seconds_per_token=0.001,
        tokens_per_chunk=3 if k else 1,
        num_spec_tokens=k,
        per_request_spec=bool(k),
    )
    with FakeServer(behaviour) as server:
        config = Config(url=server.url, label=label, max_tokens=20, requests=4, num_spec_tokens=k)
        run_bench(config, out)
    return out


def test_bench_then_check_gives_each_position_and_the_smaller_k(tmp_path):
    # The fake vLLM streams 20 tokens in cycles of 3 and says so per request: six cycles that
    # accepted 2 drafts and one that accepted 1 ("0;1;6;0"), four requests: 28 cycles.
    # a_1 = 28/28, a_2 = 24/28, a_3 = 0, so accept_len at k = 1, 2, 3 is 2, 2.857, 2.857 and
    # the last is the run's own pooled accept_len, 1 + 52/28.
    spec = _bench(tmp_path, "s", 3)
    base = _bench(tmp_path, "b", 0)
    got = run_cli(["compare", str(base), str(spec), "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    (row,) = data["positions"]
    assert row["label"] == "s" and row["k"] == 3 and row["cycles"] == 28
    assert row["source"] == "histogram"
    assert row["per_position"] == pytest.approx([1, 24 / 28, 0])
    assert row["accept_len_by_k"] == pytest.approx([2, 1 + 52 / 28, 1 + 52 / 28])
    (run,) = data["runs"]
    assert run["accept_len"] == pytest.approx(row["accept_len_by_k"][-1])
    text = run_cli(["compare", str(base), str(spec)]).output
    assert "By draft position" in text
    assert "2.00, 2.86, 2.86" in text
    assert "breakeven optimize --per-position 1.000,0.857,0.000 --fit-file FIT.json" in text


def test_vllm_windows_are_weighted_by_their_drafts(tmp_path):
    # A real vLLM 0.32.0 CPU log (draft model, k = 3): each "SpecDecoding metrics" window
    # prints its per-position rates and its Accepted/Drafted tokens (drafts = Drafted / 3).
    # A run's a_i is its windows' rates weighted by their drafts, and 1 + their sum is its
    # pooled accept_len to the rates' three decimals.  (The log's windows come at two
    # concurrencies: the first after idle says none, so it is a run of its own.)
    path = DATA / "vllm_cpu_v0320_server_draft_model_k3.txt"
    records = pd.DataFrame(ingest([path]).records)
    result = check(records.assign(per_position=records["per_position"].map(_as_text)))
    spec = records[records["num_spec_tokens"] == 3]
    assert len(result.positions) == 2
    for row, (_, windows) in zip(
        result.positions, spec.groupby(spec["concurrency"].fillna(-1), sort=False), strict=True
    ):
        drafts = windows["num_drafts"].to_numpy(float)
        expected = drafts @ np.array(windows["per_position"].tolist()) / drafts.sum()
        assert row.source == "per_position" and row.cycles == drafts.sum()
        assert row.per_position == pytest.approx(expected)
        pooled = 1 + windows["accepted_tokens"].sum() / drafts.sum()
        assert row.accept_len_by_k[-1] == pytest.approx(pooled, abs=3 * 0.0005)


def _as_text(rates):
    return None if rates is None else "[" + ", ".join(map(str, rates)) + "]"


def test_rows_without_drafts_are_said_to_be_unweighted():
    rows = pd.DataFrame(
        {
            "label": ["s", "s"],
            "num_spec_tokens": [2, 2],
            "per_position": ["[0.8, 0.4]", "[0.6, 0.2]"],
        }
    )
    (row,) = check(rows).positions
    assert row.source == "per_position, unweighted"
    assert row.per_position == pytest.approx((0.7, 0.3))
    assert np.isnan(row.cycles)


def test_garbled_cells_are_left_out_not_raised():
    rows = pd.DataFrame(
        {
            "label": ["s", "s", "s"],
            "num_spec_tokens": [2, 2, 2],
            "acceptance_histogram": ["1;2;x", "", "0;0;4"],
        }
    )
    (row,) = check(rows).positions
    assert row.cycles == 4 and row.per_position == (1.0, 1.0)
    assert check(pd.DataFrame({"label": ["s"], "num_spec_tokens": [2]})).positions == ()


def test_ingest_then_check_reads_the_positions_back_from_the_csv(tmp_path):
    # The workflow across commands: ingest writes per_position as "[a, b, c]" in its CSV, and
    # check reads it back into the same rows as from the records.
    out = tmp_path / "m.csv"
    path = DATA / "vllm_cpu_v0320_server_draft_model_k3.txt"
    got = run_cli(["ingest", str(path), "--out", str(out)])
    assert got.exit_code == 0, got.output
    shown = run_cli(["check", str(out), "--json"])
    assert shown.exit_code == 0, shown.output
    from_csv = json.loads(shown.output)["positions"]
    records = pd.DataFrame(ingest([path]).records)
    direct = check(records.assign(per_position=records["per_position"].map(_as_text)))
    assert [r["per_position"] for r in from_csv] == [
        pytest.approx(r.per_position) for r in direct.positions
    ]
