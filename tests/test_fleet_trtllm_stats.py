"""``breakeven fleet --trtllm-stats URL``: trtllm-serve's ``/metrics`` JSON iteration stats,
read once and pooled from counts (:mod:`breakeven.iotools.trtllm_stats`), where its Prometheus
text has no spec-decode counters.

The iterations are the real one of TensorRT-LLM issue 6364 (stored in tests/data/engines), with
``specDecodingStats`` filled in with the fields of ``SpecDecodingStats``
(``cpp/include/tensorrt_llm/executor/types.h``): no public sample of a speculating server's
stats was found.  The fake trtllm-serve (tests/fake_server.py with tests/fake_trtllm.py) drains
its queue on each read, as trtllm-serve does; tests/hostile_server.py answers it every wrong
way.  No Prometheus is needed: a fake one answers that it has no series.
"""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import pytest
from fake_server import Behaviour, FakeServer
from hostile_server import TRTLLM_STATS_MODES, HostileServer, Hostility
from test_fleet_hostile import FakePrometheus, answering, fleet, matrix, one_error

from breakeven.core.errors import BreakevenError
from breakeven.iotools.trtllm_stats import pool_iteration_stats

REAL = json.loads(
    (
        Path(__file__).parent
        / "data"
        / "engines"
        / "trtllm_iteration_stats_issue6364_trt_backend_no_spec.json"
    ).read_text()
)
EMPTY = json.dumps(matrix()).encode()


def iteration(gen: int, drafted: int, accepted: int, latency_ms: float, ctx: int = 0) -> dict:
    """The real iteration with ``gen`` generation requests (and ``ctx`` context ones), every
    one drafting ``drafted / gen`` tokens, ``accepted`` of them accepted."""
    batching = {**REAL["inflightBatchingStats"], "numGenRequests": gen, "numContextRequests": ctx}
    spec = {
        "numDraftTokens": drafted,
        "numAcceptedTokens": accepted,
        "numRequestsWithDraftTokens": gen,
        "acceptanceLength": (accepted + gen) / gen,
        "iterLatencyMS": 1.0,
        "draftOverhead": 0.1,
    }
    return {
        **REAL,
        "numActiveRequests": gen + ctx,
        "iterLatencyMS": latency_ms,
        "inflightBatchingStats": batching,
        "specDecodingStats": spec,
    }


def test_accept_len_is_pooled_from_counts_never_a_mean_of_iterations():
    # 4 requests accepting 6 of 12 (acceptanceLength 2.5), 1 accepting 3 of 3 (4.0):
    # pooled 1 + 9 / 5 = 2.8, where the mean of the two ratios is 3.25.
    totals = pool_iteration_stats(
        [iteration(4, 12, 6, 20.0), iteration(1, 3, 3, 10.0)], "t/metrics", "trtllm_stats"
    )
    assert totals.accept_len == pytest.approx(2.8) and totals.k == pytest.approx(3.0)
    assert (totals.iterations, totals.spec_iterations, totals.skipped) == (2, 2, 0)
    # tokens: (6 + 4) + (3 + 1) = 14 in 30 ms; per sequence 14 / (4 * 20 + 1 * 10) ms
    assert totals.aggregate_tok_s == pytest.approx(1000 * 14 / 30)
    assert totals.tok_s == pytest.approx(1000 * 14 / 90)
    assert totals.batch == pytest.approx(2.5)


def test_a_prefill_iteration_counts_its_acceptance_not_its_time():
    totals = pool_iteration_stats(
        [iteration(2, 6, 2, 20.0), iteration(2, 6, 4, 500.0, ctx=3)], "t", "trtllm_stats"
    )
    assert totals.accept_len == pytest.approx(1 + 6 / 4)
    assert totals.aggregate_tok_s == pytest.approx(1000 * 4 / 20)  # the decode-only one


def test_the_real_baseline_iteration_is_a_rate_and_no_accept_len():
    totals = pool_iteration_stats([REAL], "t", "trtllm_stats")
    assert math.isnan(totals.accept_len) and totals.spec_iterations == 0
    assert totals.tok_s == pytest.approx(1000 / REAL["iterLatencyMS"])


def test_anything_but_a_list_is_one_line():
    with pytest.raises(BreakevenError, match="is this trtllm-serve"):
        pool_iteration_stats(REAL, "t/metrics", "trtllm_stats")


def _complete(url: str, n: int) -> None:
    for _ in range(n):
        body = json.dumps({"model": "fake-model", "prompt": "x", "max_tokens": 30}).encode()
        request = urllib.request.Request(
            url + "/v1/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()


def test_a_fake_trtllm_serve_read_once_then_drained():
    """The fake server drafts 3 a cycle and accepts 2 (3 tokens a chunk): accept_len 3.  The
    read takes its iterations, so a second read has none, says why, and with no Prometheus
    series either is one line naming --prometheus."""
    behaviour = Behaviour(
        seconds_per_token=0.0005,
        trtllm=True,
        iteration_stats=True,
        num_spec_tokens=3,
        tokens_per_chunk=3,
    )
    with FakeServer(behaviour) as server, FakePrometheus(answering(EMPTY)) as prom:
        _complete(server.url, 3)
        r = fleet(prom.url, "--trtllm-stats", server.url, "--json")
        assert r.exit_code == 0, r.output
        (got,) = json.loads(r.stdout)["instances"]
        assert got["engine"] == "trtllm" and got["points"] == 1
        assert got["accept_len"] == pytest.approx(3.0) and got["k"] == pytest.approx(3.0)
        assert got["tok_s"] > 0 and got["aggregate_tok_s"] > 0
        again = fleet(prom.url, "--trtllm-stats", server.url)
        one_error(again, "--prometheus: no series", "held no iteration stats")


def test_the_prometheus_text_of_the_fake_is_the_stored_format():
    """The fake's /prometheus/metrics holds the stored sample's families and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    behaviour = Behaviour(trtllm=True, trtllm_prometheus=True, num_spec_tokens=3)
    behaviour.tokens_per_chunk = 3
    with FakeServer(behaviour) as server:
        _complete(server.url, 2)
        with urllib.request.urlopen(server.url + "/prometheus/metrics", timeout=10) as reply:
            text = reply.read().decode()
    fixture = (
        Path(__file__).parent
        / "data"
        / "engines"
        / "trtllm_prometheus_metrics__synthetic_prometheus_client_from_collector.prom"
    ).read_text()

    def labels(t):
        return {
            (s.name, tuple(sorted(s.labels)))
            for f in text_string_to_metric_families(t)
            for s in f.samples
            if not s.name.endswith(("_bucket", "_created"))
        }

    fake, stored = labels(text), labels(fixture)
    assert fake <= stored and len(fake) >= 8
    drafted = {
        s.labels["token_position"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "trtllm_spec_decode_drafted_tokens_total"
    }
    assert set(drafted) == {"0", "1", "2"} and len(set(drafted.values())) == 1


@pytest.mark.parametrize("mode", TRTLLM_STATS_MODES)
def test_every_hostile_answer_is_read_or_one_line(mode):
    """A valid iteration (2 requests drafting 3 each, 4 accepted: accept_len 3) and every way
    of being wrong after it: fields absent, odd, negative, huge or NaN leave their iteration
    out and say how many; a restart says so; not a list, or too deep, is one line."""
    with (
        HostileServer(Hostility(trtllm_stats=mode)) as server,
        FakePrometheus(answering(EMPTY)) as prom,
    ):
        r = fleet(prom.url, "--trtllm-stats", server.url, "--json")
    if mode in ("not_list", "deep"):
        one_error(r, "--trtllm-stats: ")
        return
    if mode == "empty":
        one_error(r, "--prometheus: no series", "held no iteration stats")
        return
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    (got,) = result["instances"]
    assert got["accept_len"] == pytest.approx(3.0) and got["k"] == pytest.approx(3.0)
    notes = " ".join(result["notes"])
    if mode == "backwards":
        assert "restarted" in notes and "left out" not in notes
    else:
        assert "iteration(s) left out" in notes
