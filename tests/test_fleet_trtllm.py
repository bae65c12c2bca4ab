"""breakeven fleet reads TensorRT-LLM's series (trtllm-serve's /prometheus/metrics) from a real
Prometheus (tests/prometheus_server.py).

TensorRT-LLM counts a finished request's drafted and accepted tokens by draft position
(``tensorrt_llm/metrics/collector.py``); drafted tokens at position 0 are the cycles that
drafted, so ``accept_len = 1 + rate(accepted) / rate(drafted at 0)``, pooled from counts.  Its
acceptance-length gauge (one iteration's ratio) is never read: here it always says 9.

The history is backfilled with known answers: server f drafts 3 a cycle and accepts 1.8 (accept
τ = 2.8) and restarts halfway (its counters fall to 0); server g is an older TensorRT-LLM with
only the per-iteration counters and the gauge (no accept_len, its rates still read); server h
has no decode-time histogram (its per-sequence rate is aggregate / running).  A live test has
Prometheus scrape the stored sample of the format, its counters growing at each scrape.
"""

import json
import os
import re
import time
import urllib.request
from pathlib import Path

import pytest
from cli_checks import run_cli
from prometheus_server import backfill, binaries, exporter, prometheus

pytestmark = pytest.mark.skipif(
    binaries() is None and not os.environ.get("CI"),
    reason="Prometheus is not installed (apt-get install prometheus); CI installs it",
)

END = (int(time.time()) // 60) * 60 - 600
START = END - 2 * 3600
RESTART = START + 60 * 60
FIXTURE = (
    Path(__file__).parent
    / "data"
    / "engines"
    / "trtllm_prometheus_metrics__synthetic_prometheus_client_from_collector.prom"
)


def _om() -> str:
    out: list[str] = []

    def series(name, instance, rate, extra=""):
        """``name`` growing at ``rate``/s from START (counters and sums: from RESTART again on
        f), or at ``rate`` (a gauge)."""
        labels = f'instance="{instance}",job="trtllm",model_name="undefined"{extra}'
        for t in range(START, END + 1, 15):
            if _gauge(name):
                value = rate
            else:
                since = t - RESTART if instance == "f:8000" and t >= RESTART else t - START
                value = rate * since
            out.append(f"{name}{{{labels}}} {value:.6f} {t}")

    for instance in ("f:8000", "h:8000"):
        for pos, (drafted, accepted) in enumerate([(10.0, 8.0), (10.0, 6.0), (10.0, 4.0)]):
            extra = f',token_position="{pos}"'
            series("trtllm_spec_decode_drafted_tokens_total", instance, drafted, extra)
            series("trtllm_spec_decode_accepted_tokens_total", instance, accepted, extra)
    for instance in ("f:8000", "g:8000", "h:8000"):
        series("trtllm_generation_tokens_total", instance, 330.0)
        series("trtllm_request_success_total", instance, 2.0, ',finished_reason="length"')
        series("trtllm_num_requests_running", instance, 8.0, ',pid="7"')
        series("trtllm_spec_decode_acceptance_length", instance, 9.0, ',pid="7"')
        series("trtllm_spec_decode_num_draft_tokens_total", instance, 30.0)
        series("trtllm_spec_decode_num_accepted_tokens_total", instance, 18.0)
    for instance in ("f:8000", "g:8000"):
        series("trtllm_request_decode_time_seconds_sum", instance, 4.0)
    # One TYPE line a family, before its samples (OpenMetrics): counters' names less _total.
    body, families = [], {}
    for line in out:
        families.setdefault(line.split("{", 1)[0], []).append(line)
    for name, lines in families.items():
        family = name.removesuffix("_total")
        kind = "gauge" if _gauge(name) else "counter" if name.endswith("_total") else "unknown"
        body.append(f"# TYPE {family} {kind}")
        body += lines
    return "\n".join(body) + "\n# EOF\n"


def _gauge(name: str) -> bool:
    return name.endswith(("_running", "_acceptance_length"))


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tsdb = tmp_path_factory.mktemp("prom") / "tsdb"
    backfill(_om(), tsdb)
    with prometheus(tsdb) as url:
        yield url


def fleet(url, *args):
    return run_cli(
        ["fleet", "--prometheus", url, "--start", str(START), "--end", str(END), *map(str, args)]
    )


def by_instance(r):
    assert r.exit_code == 0, r.output
    return {i["instance"]: i for i in json.loads(r.stdout)["instances"]}


def test_accept_len_is_pooled_from_the_per_position_counters_never_the_gauge(prom):
    got = by_instance(fleet(prom, "--json", "--step", "60s"))
    f = got["f:8000"]
    assert f["engine"] == "trtllm" and f["model"] == "undefined"
    # 1 + (8 + 6 + 4) / 10: not the gauge's 9, nor the per-iteration counters' ratio
    assert f["accept_len"] == pytest.approx(2.8, rel=1e-6)
    assert f["k"] == pytest.approx(3.0, rel=1e-6)
    assert f["batch"] == pytest.approx(8.0)
    assert f["aggregate_tok_s"] == pytest.approx(330.0, rel=0.01)  # the first windows
    # the finished requests' own decode rate: (330 - 2) tokens / 4 s of decode, a second
    assert f["tok_s"] == pytest.approx(82.0, rel=0.01)


def test_a_restart_is_rate_s_job(prom):
    """f's counters fall to 0 at RESTART: no step around it is negative or absurd."""
    r = fleet(prom, "--json", "--step", "60s", "--match", '{instance="f:8000"}')
    (f,) = json.loads(r.stdout)["instances"]
    assert f["points"] >= 110 and f["accept_len"] == pytest.approx(2.8, rel=1e-6)


def test_an_older_trtllm_without_per_position_counters_has_rates_and_no_accept_len(prom):
    got = by_instance(fleet(prom, "--json"))
    g = got["g:8000"]
    assert g["accept_len"] is None and g["k"] is None
    assert g["aggregate_tok_s"] == pytest.approx(330.0, rel=0.01)
    assert g["tok_s"] == pytest.approx(82.0, rel=0.01)


def test_without_the_decode_histogram_the_rate_is_aggregate_over_running(prom):
    h = by_instance(fleet(prom, "--json"))["h:8000"]
    assert h["accept_len"] == pytest.approx(2.8, rel=1e-6)
    assert h["tok_s"] == pytest.approx(330.0 / 8.0, rel=0.01)


def test_the_match_is_joined_with_the_position_selector(prom):
    r = fleet(prom, "--json", "--match", '{job="trtllm", }')
    assert r.exit_code == 0, r.output
    query = json.loads(r.stdout)["queries"]["trtllm"]["accept_len"]
    assert 'trtllm_spec_decode_drafted_tokens_total{job="trtllm", token_position="0"}' in query


def _growing(text: str):
    """The stored sample served with every counter and sum times the number of scrapes so far
    (gauges as they are): a server whose requests keep coming at the sample's rates."""
    scrapes = [0]
    sample = re.compile(r"^(trtllm_\w+?)(\{[^}]*\})? (\S+)$")

    def render() -> str:
        scrapes[0] += 1
        lines = []
        for line in text.splitlines():
            m = sample.match(line)
            if m and not m.group(1).endswith(("_running", "_acceptance_length")):
                line = f"{m.group(1)}{m.group(2) or ''} {float(m.group(3)) * scrapes[0]}"
            lines.append(line)
        return "\n".join(lines) + "\n"

    return render


def test_a_live_scrape_of_the_format_at_prometheus_metrics(tmp_path):
    text = "".join(
        ln for ln in FIXTURE.read_text().splitlines(keepends=True) if not ln.startswith("# SOURCE")
    )
    with (
        exporter(_growing(text)) as target,
        prometheus(tmp_path / "tsdb", scrape=target, path="/prometheus/metrics") as url,
    ):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            query = urllib.request.quote("count_over_time(trtllm_num_requests_running[1m])")
            with urllib.request.urlopen(f"{url}/api/v1/query?query={query}") as reply:
                result = json.loads(reply.read())["data"]["result"]
            if result and float(result[0]["value"][1]) >= 6:
                break
            time.sleep(0.5)
        args = ["--since", "30s", "--step", "1s", "--window", "5s", "--json"]
        r = run_cli(["fleet", "--prometheus", url, *args])
    assert r.exit_code == 0, r.output
    (server,) = json.loads(r.stdout)["instances"]
    assert server["engine"] == "trtllm" and server["model"] == "undefined"
    assert server["accept_len"] == pytest.approx(2.8, rel=1e-6)  # 1 + 144 / 80, not the gauge
    assert server["k"] == pytest.approx(3.0, rel=1e-6)
    assert server["batch"] == pytest.approx(4.0)
    assert server["tok_s"] == pytest.approx((260 - 4) / 1.6, rel=1e-6)
