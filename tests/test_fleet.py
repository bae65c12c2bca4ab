"""breakeven fleet against a real Prometheus (tests/prometheus_server.py).

The history is generated here with known answers and backfilled with promtool: two vLLM
servers at known acceptance and load, one of them restarted (its counters reset) and the
other with a gap; a third whose acceptance drops halfway; a llama.cpp server and an SGLang
server under their own metric names.  A live test has Prometheus scrape a local exporter that
serves a real SGLang /metrics text (the docs' sample), and reads it back.  Without
Prometheus (Debian's ``prometheus`` package) the suite is skipped, except under CI, where
``.ci/run`` installs it and a missing one fails.
"""

import csv
import json
import os
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cli_checks import run_cli
from prometheus_server import backfill, binaries, exporter, prometheus

pytestmark = pytest.mark.skipif(
    binaries() is None and not os.environ.get("CI"),
    reason="Prometheus is not installed (apt-get install prometheus); CI installs it",
)

END = (int(time.time()) // 60) * 60 - 600
START = END - 3 * 3600
RESTART = START + 90 * 60  # server a's counters start again from 0
GAP = (START + 60 * 60, START + 80 * 60)  # server b sends nothing
DROP = START + 90 * 60  # server c's acceptance falls from 3.0 to 1.5


def _om() -> str:
    out = []

    def family(name, kind, samples):
        out.append(f"# TYPE {name} {kind}")
        suffix = "_total" if kind == "counter" else ""
        for labels, fn in samples:
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            for t in range(START, END + 1, 15):
                value = fn(t)
                if value is not None:
                    out.append(f"{name}{suffix}{{{text}}} {value:.6f} {t}")

    def vllm(instance):
        return {"instance": instance, "job": "vllm", "model_name": "m"}

    def counter(rate, instance):
        def at(t):
            if instance == "b:8000" and GAP[0] <= t < GAP[1]:
                return None
            since = t - RESTART if instance == "a:8000" and t >= RESTART else t - START
            return rate(t) * since if not callable(rate(t)) else None

        return at

    def accepted_c(t):  # 20/s then 5/s: accept_len 3.0 then 1.5
        return 20.0 * (min(t, DROP) - START) + 5.0 * max(0, t - DROP)

    family(
        "vllm:spec_decode_num_drafts",
        "counter",
        [(vllm(i), counter(lambda t: 10.0, i)) for i in ("a:8000", "b:8000", "c:8000")],
    )
    family(
        "vllm:spec_decode_num_accepted_tokens",
        "counter",
        [
            (vllm("a:8000"), counter(lambda t: 20.0, "a:8000")),
            (vllm("b:8000"), counter(lambda t: 10.0, "b:8000")),
            (vllm("c:8000"), accepted_c),
        ],
    )
    family(
        "vllm:spec_decode_num_draft_tokens",
        "counter",
        [
            (vllm("a:8000"), counter(lambda t: 40.0, "a:8000")),
            (vllm("b:8000"), counter(lambda t: 30.0, "b:8000")),
            (vllm("c:8000"), counter(lambda t: 40.0, "c:8000")),
        ],
    )
    family(
        "vllm:generation_tokens",
        "counter",
        [
            (vllm("a:8000"), counter(lambda t: 300.0, "a:8000")),
            (vllm("b:8000"), counter(lambda t: 640.0, "b:8000")),
            (vllm("c:8000"), counter(lambda t: 100.0, "c:8000")),
        ],
    )
    family(
        "vllm:num_requests_running",
        "gauge",
        [
            (vllm("a:8000"), lambda t: 8.0),
            (vllm("b:8000"), lambda t: None if GAP[0] <= t < GAP[1] else 32.0),
            (vllm("c:8000"), lambda t: 4.0),
        ],
    )
    llama = {"instance": "d:8080", "job": "llamacpp"}
    for name, rate in (("drafts", 5.0), ("accepted_tokens", 10.0), ("draft_tokens", 20.0)):
        family(
            f"llamacpp:spec_decode_num_{name}",
            "counter",
            [(llama, lambda t, r=rate: r * (t - START))],
        )
    family("llamacpp:tokens_predicted", "counter", [(llama, lambda t: 50.0 * (t - START))])
    family("llamacpp:tokens_predicted_seconds", "counter", [(llama, lambda t: 0.25 * (t - START))])
    family("llamacpp:requests_processing", "gauge", [(llama, lambda t: 1.0)])
    sglang = {"instance": "e:30000", "job": "sglang", "model_name": "s"}
    family("sglang:spec_accept_length", "gauge", [(sglang, lambda t: 2.5)])
    family("sglang:gen_throughput", "gauge", [(sglang, lambda t: 400.0)])
    family("sglang:num_running_reqs", "gauge", [(sglang, lambda t: 16.0)])
    out.append("# EOF")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tsdb = tmp_path_factory.mktemp("prom") / "tsdb"
    backfill(_om(), tsdb)
    with prometheus(tsdb) as url:
        yield url


# A surface where speculation at accept_len 3 and k = 4 breaks even at batch 18, and at
# accept_len 2 and k = 3 at batch 5.
FIT = {
    "groups": [],
    "surfaces": [
        {
            "model": "m",
            "hardware": "",
            "spec_method": "",
            "coefficients": {
                "weights_ms": 10.0,
                "expert_ms": 0.0,
                "kv_ms": 0.5,
                "compute_ms": 1.0,
                "draft_step_ms": 0.5,
                "draft_token_ms": 0.0,
                "spec_seq_ms": 0.0,
            },
            "moe": None,
            "batches": [1, 64],
        }
    ],
}


def fleet(url, *args):
    return run_cli(
        ["fleet", "--prometheus", url, "--start", str(START), "--end", str(END), *map(str, args)],
    )


def by_instance(r):
    assert r.exit_code == 0, r.output
    return {i["instance"]: i for i in json.loads(r.stdout)["instances"]}


def test_accept_len_load_and_rates_per_server(prom):
    got = by_instance(fleet(prom, "--json"))
    assert set(got) == {"a:8000", "b:8000", "c:8000", "d:8080", "e:30000"}
    for name, tau, k, batch, tok_s in (
        ("a:8000", 3.0, 4, 8, 37.5),
        ("b:8000", 2.0, 3, 32, 20.0),
        ("d:8080", 3.0, 4, 1, 200.0),
        ("e:30000", 2.5, None, 16, 25.0),
    ):
        i = got[name]
        assert i["accept_len"] == pytest.approx(tau, rel=1e-6), name
        assert i["batch"] == pytest.approx(batch)
        assert i["tok_s"] == pytest.approx(tok_s, rel=0.01)  # a: the windows across its restart
        assert (i["k"] is None) if k is None else i["k"] == pytest.approx(k)
    assert got["d:8080"]["engine"] == "llamacpp" and got["e:30000"]["engine"] == "sglang"


def test_a_restart_is_rate_s_job_and_a_gap_is_a_gap(prom, tmp_path):
    out = tmp_path / "fleet.csv"
    r = fleet(prom, "--out", out, "--step", "60s")
    assert r.exit_code == 0, r.output
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    a = [float(x["accept_len"]) for x in rows if x["label"] == "a:8000"]
    assert a and all(v == pytest.approx(3.0, rel=1e-6) for v in a)  # across the reset too
    b = [x for x in rows if x["label"] == "b:8000"]
    from datetime import datetime

    times = [datetime.fromisoformat(x["timestamp"]).timestamp() for x in b]
    inside = [t for t in times if GAP[0] + 180 <= t < GAP[1]]  # past the rate window
    assert not inside and all(float(x["accept_len"]) == pytest.approx(2.0) for x in b)
    assert {x["origin"] for x in rows} == {"server"}
    assert all(x["source"].startswith("prometheus ") for x in rows)
    # The rows are measurements: check reads them.
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output


def test_acceptance_drop_is_flagged_with_its_time(prom):
    got = by_instance(fleet(prom, "--json", "--tolerance", 0.2))
    flagged = {n for n, i in got.items() if "acceptance_drop" in i["flags"]}
    assert flagged == {"c:8000"}
    (note,) = [n for n in got["c:8000"]["notes"] if "fell" in n]
    from datetime import datetime

    when = datetime.fromisoformat(note.split(" from ")[1].split(" on")[0]).timestamp()
    assert abs(when - DROP) <= 15 * 60


def test_a_long_range_is_read_in_chunks(prom):
    r = fleet(prom, "--json", "--step", "1s")  # 10,801 steps: more than one query takes
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["chunks"] == 2
    a = {i["instance"]: i for i in data["instances"]}["a:8000"]
    # Each step once, from the first with two samples (15 s apart) in the rate window on.
    assert a["points"] == len(range(START + 15, END + 1))
    assert a["accept_len"] == pytest.approx(3.0, rel=1e-6)


def test_time_above_the_breakeven_batch_with_a_cost_model(prom, tmp_path):
    """A surface where speculation at accept_len 3 and k = 4 breaks even at batch 18, and at
    accept_len 2 and k = 3 at batch 5: server a (batch 8) stays below, b (batch 32) does not."""
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(FIT))
    got = by_instance(fleet(prom, "--json", "--fit-file", path, "--match", '{job="vllm"}'))
    assert got["a:8000"]["breakeven_batch"] == 18 and got["a:8000"]["share_above_breakeven"] == 0
    assert got["b:8000"]["breakeven_batch"] == 5 and got["b:8000"]["share_above_breakeven"] == 1
    assert "above_breakeven" in got["b:8000"]["flags"]
    assert "above_breakeven" not in got["a:8000"]["flags"]
    assert got["a:8000"]["predicted_speedup"] == pytest.approx(3 * 22 / 56)
    b_speedup = 2 * (10 + 16 + 32) / (10 + 16 + 4 * 32 + 1.5)  # at batch 32, k = 3: 0.746
    assert got["b:8000"]["predicted_speedup"] == pytest.approx(b_speedup)
    # The best schedule turns speculation off at b's load (no k pays at batch 32), a gain of
    # 1 / 0.746 - 1; at a's it keeps a k that pays, never less than the k a ran.
    assert got["b:8000"]["schedule_gain"] == pytest.approx(1 / b_speedup - 1, rel=1e-6)
    assert got["a:8000"]["schedule_gain"] >= 0
    # Issue 27, item 3: where the fit measured a baseline at a server's batch (8), its step
    # is that baseline's (here 25 ms where t(8, 1) is 22), and said so.
    measured = {**FIT, "surfaces": [{**FIT["surfaces"][0], "baseline_steps": [[8, 25.0]]}]}
    path.write_text(json.dumps(measured))
    got = by_instance(fleet(prom, "--json", "--fit-file", path, "--match", '{job="vllm"}'))
    assert got["a:8000"]["predicted_speedup"] == pytest.approx(3 * 25 / 56)
    assert any("at batch 8 is the fit's measured baseline" in n for n in got["a:8000"]["notes"])
    path.write_text(json.dumps(FIT))
    text = fleet(prom, "--fit-file", path, "--match", '{job="vllm"}').output
    lines = [ln for ln in text.splitlines() if ln.startswith("  ") and ":80" in ln]
    assert lines[0].split()[0] == "b:8000"  # worst first
    # Issue 26: the table fits 100 columns (tests/conftest.py sets COLUMNS=100).
    assert max(len(line) for line in text.splitlines()) <= 100, text


def test_the_report_page(prom, tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps(FIT))
    r = fleet(prom, "--fit-file", path, "--report", tmp_path / "report")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "report" / "report.html").read_text()
    assert "flagged" in page and page.count("<svg") == 2 and "acceptance_drop" in page
    assert fleet(prom, "--report", tmp_path / "report").exit_code == 2  # exists: --force
    r = fleet(prom, "--report", tmp_path / "report", "--force")
    page = (tmp_path / "report" / "report.html").read_text()
    assert r.exit_code == 0 and page.count("<svg") == 1 and "needs a cost model" in page


@pytest.mark.parametrize(
    "args,message",
    [
        (["--match", '{job=~"("}'], "--match: Prometheus refused the query"),
        (
            ["--match", '{job="nothing"}'],
            "--prometheus: no series of vLLM, SGLang, llama.cpp or TensorRT-LLM",
        ),
        (["--match", "job=vllm"], "--match: got 'job=vllm', expected a label matcher"),
        (["--step", "0s"], "--step: got '0s'"),
        (["--since", "1h"], "--since and --start cannot be given together"),
    ],
)
def test_bad_input_is_one_line(prom, args, message):
    r = fleet(prom, *args)
    assert r.exit_code == 2, r.output
    assert message in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_unreachable_is_one_line():
    from prometheus_server import free_port

    r = fleet(f"http://127.0.0.1:{free_port()}")
    assert r.exit_code == 2 and "cannot reach" in r.output and "Traceback" not in r.output


def test_the_token_is_sent_and_never_shown(monkeypatch):
    """A server that refuses the query and echoes the request's Authorization header."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.headers.get("Authorization"))
            body = json.dumps(
                {
                    "status": "error",
                    "errorType": "auth",
                    "error": f"bad token in {self.headers.get('Authorization')}",
                }
            )
            self.send_response(401)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("FLEET_TOKEN", "s3cret-token-123456")
        r = fleet(f"http://127.0.0.1:{server.server_address[1]}", "--token-env", "FLEET_TOKEN")
    finally:
        server.shutdown()
    assert seen and seen[0] == "Bearer s3cret-token-123456"
    assert r.exit_code == 2 and "s3cret-token-123456" not in r.output and "***" in r.output


def test_a_live_scrape_of_a_real_metrics_text(tmp_path):
    """Prometheus scrapes an exporter serving SGLang's documented /metrics sample (as SGLang
    wrote it: the fixture less our '#' header), and fleet reads it back."""
    fixture = (
        Path(__file__).parent
        / "data"
        / "engines"
        / "sglang_metrics__docs_production_metrics_llama31_8b.prom"
    )
    text = "".join(
        ln for ln in fixture.read_text().splitlines(keepends=True) if not ln.startswith("# SOURCE")
    )
    with exporter(text) as target, prometheus(tmp_path / "tsdb", scrape=target) as url:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            query = urllib.request.quote("count_over_time(sglang:num_running_reqs[1m])")
            with urllib.request.urlopen(f"{url}/api/v1/query?query={query}") as reply:
                result = json.loads(reply.read())["data"]["result"]
            if result and float(result[0]["value"][1]) >= 3:
                break
            time.sleep(0.5)
        r = run_cli(
            [
                "fleet",
                "--prometheus",
                url,
                "--since",
                "30s",
                "--step",
                "1s",
                "--window",
                "5s",
                "--json",
            ],
        )
    assert r.exit_code == 0, r.output
    (server,) = json.loads(r.stdout)["instances"]
    assert server["engine"] == "sglang" and server["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert server["batch"] == pytest.approx(162.0)
    assert server["aggregate_tok_s"] == pytest.approx(86.50814177726902)
    assert server["tok_s"] == pytest.approx(86.50814177726902 / 162.0)
    assert server["accept_len"] is None  # that SGLang version had no spec gauge


def test_the_rows_are_a_load_profile_for_schedule(prom, tmp_path):
    """fleet --out gives the time at each batch size to schedule --load."""
    out = tmp_path / "fleet.csv"
    assert fleet(prom, "--out", out, "--match", '{job="vllm"}').exit_code == 0
    from breakeven.iotools.load import read_load

    load, meta = read_load(out)
    assert meta["shape"] == "records" and set(load) == {4, 8, 32}
    assert load[8] == pytest.approx(load[4], rel=0.02)  # a and c ran all the time, b had a gap
    curve = Path(__file__).resolve().parent.parent / "data" / "llama3_8b_decode_curve.csv"
    r = run_cli(
        [
            "schedule",
            "--cost-curve",
            str(curve),
            "--alpha",
            "0.7",
            "--engine",
            "vllm",
            "--load",
            str(out),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["load"].startswith(str(out))
