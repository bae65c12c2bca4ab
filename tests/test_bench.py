"""breakeven bench against a real HTTP server on 127.0.0.1 (tests/fake_server.py) that speaks the
OpenAI streaming protocol, emits multi-token chunks like a speculating server, keeps /metrics
counters, and misbehaves on request."""

import csv
import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from cli_checks import run_cli
from fake_server import Behaviour, FakeServer, timed
from local_process import free_port, serving

from breakeven import BreakevenError
from breakeven.bench.config import Config, server_root
from breakeven.bench.levels import _Level, _summary
from breakeven.bench.rows import BENCH_COLUMNS
from breakeven.bench.session import run_bench
from breakeven.bench.stream import RequestResult
from breakeven.measurements.check import check_file

HERE = Path(__file__).resolve().parent


def bench(*args):
    return run_cli(["bench", *map(str, args)])


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_every_url_form_reaches_the_right_routes(suffix, tmp_path):
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        out = tmp_path / "runs.csv"
        r = bench(
            "--url",
            server.url + suffix,
            "--label",
            "t",
            "--max-tokens",
            8,
            "--requests",
            2,
            "--out",
            out,
        )
        assert r.exit_code == 0, r.output
        assert len(rows(out)) == 2
        # Issue 26: bench's text fits 100 columns (tests/conftest.py sets COLUMNS=100), and
        # its first line is its answer: the rate at each level.
        assert max(len(line) for line in r.output.splitlines()) <= 100, r.output
        assert re.match(
            r"t: \d+\.\d\d tok/s per sequence at concurrency 1\.$", r.stdout.split("\n")[0]
        )
        chat = bench(
            "--url",
            server.url + suffix,
            "--label",
            "t",
            "--max-tokens",
            8,
            "--requests",
            1,
            "--chat",
        )
        assert chat.exit_code == 0, chat.output


def test_server_root():
    assert server_root("http://h:8000") == server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("https://h/api/v1") == "https://h/api"
    with pytest.raises(BreakevenError, match="url: got 'localhost:8000', expected an http"):
        server_root("localhost:8000")


def _server_rates(path):
    """Each level's rate as the fake server timed it (its own decode-time counters: the
    level's ``origin=server`` row), by concurrency."""
    return {r["concurrency"]: float(r["tok_s"]) for r in rows(path) if r["origin"] == "server"}


def test_measured_rate_is_the_servers_rate(tmp_path):
    """10 ms per token, at concurrency 1 and 4: each level's per-sequence rate is the server's
    own over the same requests (its decode-time counters), never faster than it generates.
    No clock is asserted: on a loaded machine both views slow alike (the server's sleeps
    lengthen), and what is checked is that bench reads the same decode the server timed."""
    out = tmp_path / "r.csv"
    with FakeServer(Behaviour(seconds_per_token=0.01, timing_counters=True)) as server:
        levels, failures, _ = run_bench(
            Config(url=server.url, label="t", concurrency=(1, 4), max_tokens=40, requests=4),
            out,
        )
    assert not failures
    served = _server_rates(out)
    for level in levels:
        assert level["tok_s"] == pytest.approx(served[str(level["concurrency"])], rel=0.10)
        assert level["tok_s"] < 100 * 1.05  # 10 ms a token is the fastest it can stream
    # Four streams at once: the aggregate is their sum, four per-sequence rates.
    for level in levels:
        assert level["aggregate_tok_s"] <= level["concurrency"] * level["tok_s"] * 1.05


def test_multi_token_chunks_and_accept_len_from_metrics(tmp_path):
    # Three tokens per chunk, as a speculating server streams them; k = 4 on /metrics.
    spec = Behaviour(
        seconds_per_token=0.004, tokens_per_chunk=3, num_spec_tokens=4, timing_counters=True
    )
    with FakeServer(spec) as server:
        out = tmp_path / "r.csv"
        levels, _, _ = run_bench(
            Config(url=server.url, label="eagle", max_tokens=90, requests=3), out
        )
    assert levels[0]["accept_len"] == pytest.approx(3.0)
    # Three tokens a chunk are three tokens of rate: the server's own, not a third of it.
    assert levels[0]["tok_s"] == pytest.approx(_server_rates(out)["1"], rel=0.10)
    row = rows(out)[0]
    assert float(row["tokens_per_chunk"]) == pytest.approx(3.0)
    assert float(row["itl_ms"]) == pytest.approx(3 * float(row["tpot_ms"]), rel=0.15)
    # /metrics is read between levels only: a request row has no acceptance of its own here
    # (this server does not say it per request); the level's server row has the level's, and
    # check gives it, and its k, to the run.
    assert row["num_spec_tokens"] == "" and row["accept_len"] == ""
    (level,) = [r for r in rows(out) if r["origin"] == "server"]
    assert level["num_spec_tokens"] == "4" and float(level["accept_len"]) == pytest.approx(3.0)
    (comparison,) = check_file(str(out)).comparisons
    assert comparison.num_spec_tokens == 4 and comparison.accept_len == pytest.approx(3.0)


def test_counters_that_did_not_move_are_not_called_missing(tmp_path):
    # The server shows vLLM's spec-decode counters but drafts nothing (ngram without a match):
    # the warning says so, and names no other engine's flags.
    with FakeServer(Behaviour(seconds_per_token=0.001, spec_counters=True)) as server:
        result = bench("--url", server.url, "-k", 3, "--requests", 2, "--label", "s")
    assert result.exit_code == 0, result.output
    # The warning is one message, wrapped to 100 columns: its lines up to the next message.
    warning = " ".join(result.stderr.split("Warning:", 1)[1].split("\n\n")[0].split())
    warning = warning.split(" Appended ")[0].split(" Launch: ")[0]
    assert "spec-decode counters that did not move" in warning
    assert "no spec-decode counters" not in warning and "llama-server" not in warning


def test_a_level_rate_is_a_ratio_of_sums_and_a_burst_is_left_out():
    # Three requests: 100 tokens in 2 s, 100 in 0.5 s, and 100 that came in 1 ms after a
    # 0.5 s first token (a burst).  The level decoded 200 tokens in 2.5 s: 80 tok/s, where the
    # mean of the rates says 125 without the burst and 33,375 with it.
    results = [
        RequestResult(True, ttft_ms=100.0, decode_s=2.0, completion_tokens=101),
        RequestResult(True, ttft_ms=100.0, decode_s=0.5, completion_tokens=101),
        RequestResult(True, ttft_ms=500.0, decode_s=0.001, completion_tokens=101),
        RequestResult(False, "reset mid-stream"),
    ]
    assert [r.burst for r in results[:3]] == [False, False, True]
    level = _Level(1, time.perf_counter(), None, results)
    summary = _summary(level)
    assert summary["tok_s"] == pytest.approx(200 / 2.5)
    assert summary["bursts"] == 1 and summary["failed"] == 1 and summary["requests"] == 4
    assert summary["tok_s_median"] == pytest.approx((50 + 200) / 2)
    assert summary["tok_s_iqr"] == pytest.approx(0.5 * (200 - 50))


def test_a_level_whose_every_request_came_in_one_burst_has_no_client_rate_and_says_so(tmp_path):
    # A vLLM CPU server whose API process was starved by its engine's threads sent each
    # request's 384 tokens within a millisecond, 2.4-4.5 s after it was sent (a clean-clone CI
    # run: 16 of 16 requests at concurrency 4).  The client timed no decode: the level's tok_s
    # is empty (null in JSON), never a rate of 20,000 tok/s, and the warning gives the server's
    # own rate instead.  The CSV keeps the server row, which check reads.
    held = Behaviour(seconds_per_token=0.004, timing_counters=True, held=True)
    out = tmp_path / "r.csv"
    with FakeServer(held) as server:
        r = bench(
            "--url",
            server.url,
            "--label",
            "b",
            "--max-tokens",
            40,
            "--requests",
            3,
            "--out",
            out,
            "--json",
        )
    assert r.exit_code == 0, r.output
    (level,) = json.loads(r.stdout)
    assert level["tok_s"] is None and level["bursts"] == 3 and level["failed"] == 0
    (said,) = [w for w in level["warnings"] if "burst" in w]
    assert "3 of 3 requests at concurrency 1" in said and "no decode rate" in said
    server_rate = level["server"]["tok_s"]
    assert server_rate > 0  # its value is the machine's speed: nothing is asserted of it
    assert f"{server_rate:.4g} tok/s per sequence" in said
    (row,) = [r for r in rows(out) if r["origin"] == "server"]
    assert float(row["tok_s"]) == pytest.approx(server_rate)
    # The requests' rows keep their tokens and first token, with no rate: pooled, a burst's
    # tokens in no time would read the baseline tens of times too fast.
    client = [r for r in rows(out) if r["origin"] == "client"]
    assert len(client) == 3 and all(not r["tok_s"] and not r["tpot_ms"] for r in client)
    assert all(r["source"].endswith("(came in one burst: no rate)") for r in client)
    assert all(float(r["ttft_ms"]) > 100 and r["completion_tokens"] == "40" for r in client)
    # Each request's context: the server's 5 prompt tokens and half its 40 (issue 27, item 4).
    assert all(float(r["context_tokens"]) == 25 for r in client)
    # A speculative run against it: check's baseline is the server's own rate.
    spec = Behaviour(seconds_per_token=0.004, num_spec_tokens=2, tokens_per_chunk=3, cycle_s=0.006)
    with FakeServer(spec) as server:
        run_bench(
            Config(url=server.url, label="s", max_tokens=40, requests=3, num_spec_tokens=2), out
        )
    (comparison,) = check_file(str(out)).comparisons
    assert comparison.baseline_tok_s == pytest.approx(server_rate)
    assert comparison.measured_speedup == pytest.approx(comparison.tok_s / server_rate)
    with FakeServer(Behaviour(seconds_per_token=0.004, timing_counters=True, held=True)) as server:
        text = bench("--url", server.url, "--label", "b", "--max-tokens", 40, "--requests", 2)
    assert text.exit_code == 0, text.output
    headline = " ".join(text.stdout.split("\n\n")[0].split())
    assert (
        headline.startswith("b: ") and "(server's) tok/s per sequence at concurrency 1" in headline
    )
    assert "every request came in one burst" in headline and "nan" not in text.output


def test_reading_metrics_parses_only_the_counters_it_reads(tmp_path, monkeypatch):
    # Each row's acceptance comes from /metrics, read in the event loop that streams the other
    # requests.  A real /metrics holds thousands of histogram lines: parsed whole (0.2-0.4 s a
    # scrape of a real vLLM on a loaded machine) it stalled every other stream, whose chunks
    # then came as one burst.  Here the server's holds 20,000: the parser is given only the
    # few counters bench reads.
    import prometheus_client.parser

    parse = prometheus_client.parser.text_string_to_metric_families
    parsed_lines = []

    def counting(text):
        parsed_lines.append(len(text.splitlines()))
        return parse(text)

    monkeypatch.setattr(prometheus_client.parser, "text_string_to_metric_families", counting)
    padded = Behaviour(seconds_per_token=0.001, num_spec_tokens=2, metrics_padding=20_000)
    with FakeServer(padded) as server:
        config = Config(url=server.url, label="s", max_tokens=30, requests=6, concurrency=(3,))
        (level,), failures, _ = run_bench(config, str(tmp_path / "r.csv"))
    assert not failures and level["accept_len"] is not None
    assert parsed_lines and max(parsed_lines) <= 3, parsed_lines  # of 20,000 and more


def test_rows_carry_the_servers_launch_not_the_clients_environment(tmp_path, monkeypatch):
    """The variables that tune a server are the server's: the client's NCCL_* are not its."""
    monkeypatch.setenv("NCCL_PROTO", "LL")
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        out = tmp_path / "r.csv"
        run_bench(
            Config(
                url=server.url, label="b", max_tokens=8, requests=1, num_spec_tokens=0, env="tp=8"
            ),
            out,
        )
    (row,) = rows(out)
    for part in (
        f"url={server.url}",
        "model=fake-model",
        "server_version=fake-0.1",
        "tp=8",
        "client_host=",
    ):
        assert part in row["env"]
    # This fake server runs in the test's own process, started before the variable was set.
    assert "NCCL_PROTO=LL" not in row["env"]
    assert row["env_from"] == "server" and row["launch_id"] and row["launched_at"]
    assert row["num_spec_tokens"] == "0" and row["origin"] == "client" and row["timestamp"]


SERVER_SECRETS = {
    "VLLM_API_KEY": "sk-vllm-server-secret",
    "HF_TOKEN": "hf_server_secret_token",
    "NCCL_IB_TOKEN": "nccl-secret-value",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "DATABASE_URL": "postgres://u:dbpassword@db/x",
}


@contextmanager
def server_process(tmp_path, env, *flags):
    """The fake server in a process of its own, with ``env`` in its environment only."""
    port = free_port()
    args = [sys.executable, str(Path(__file__).parent / "fake_server.py"), "--port", str(port)]
    with serving([*args, *flags], tmp_path / f"server-{port}.log", _ready(port), "fake", env):
        yield f"http://127.0.0.1:{port}"


def _ready(port):
    def ready():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            return r.status == 200

    return ready


def test_the_servers_own_environment_is_read_from_its_process_and_secrets_never_are(
    tmp_path, monkeypatch
):
    server_env = {"NCCL_PROTO": "LL", "LLAMA_ARG_THREADS": "2", "OMP_NUM_THREADS": "4"}
    server_env |= SERVER_SECRETS
    flags = ("--api-key", "sk-cmdline-secret", "--hf-token=hf_cmd_secret", "--tp", "8")
    out = tmp_path / "r.csv"
    with server_process(tmp_path, server_env, *flags) as url:
        monkeypatch.setenv("NCCL_ALGO", "Tree")  # the client's, set after the server started
        result = run_cli(
            [
                "bench",
                "--url",
                url,
                "--label",
                "b",
                "--requests",
                "1",
                "--max-tokens",
                "8",
                "-k",
                "0",
                "--out",
                str(out),
                "--json",
            ],
        )
    assert result.exit_code == 0, result.output
    (row,) = rows(out)
    for part in ("NCCL_PROTO=LL", "LLAMA_ARG_THREADS=2", "OMP_NUM_THREADS=4", "--tp=8"):
        assert part in row["env"].split()
    assert "--api-key=***" in row["env"].split()
    assert "NCCL_ALGO" not in row["env"]
    assert row["env_from"] == "server"
    launched = datetime.fromisoformat(row["launched_at"].replace("Z", "+00:00"))
    assert abs((datetime.now(timezone.utc) - launched).total_seconds()) < 600
    written = out.read_text() + result.output
    for name, secret in SERVER_SECRETS.items():
        assert secret not in written and name not in written
    assert "sk-cmdline-secret" not in written and "hf_cmd_secret" not in written
    assert "Launch:" in result.output and "the server's own process" in result.output


def test_two_launches_on_one_port_have_two_launch_ids_and_two_servers_on_two_ports_are_alike(
    tmp_path,
):
    """A restart is a new launch; two servers started alike on two ports have one fingerprint."""
    out = tmp_path / "r.csv"
    port = free_port()
    args = [sys.executable, str(Path(__file__).parent / "fake_server.py"), "--port", str(port)]
    for label in ("first", "restarted"):
        with serving(args, tmp_path / "s.log", _ready(port), "fake", {"NCCL_PROTO": "LL"}):
            run_bench(Config(url=f"http://127.0.0.1:{port}", label=label, requests=1), out)
        time.sleep(1.1)  # launches are told apart to the second
    with server_process(tmp_path, {"NCCL_PROTO": "LL"}) as other:
        run_bench(Config(url=other, label="other-port", requests=1), out)
    first, restarted, other_port = rows(out)
    assert len({first["launch_id"], restarted["launch_id"], other_port["launch_id"]}) == 3
    from breakeven.core.provenance import fingerprint

    # The port (--port=N, url=) is the client's choice: the three launches look alike.
    assert fingerprint(first["env"]) == fingerprint(restarted["env"])
    assert fingerprint(first["env"]) == fingerprint(other_port["env"])
    assert "NCCL_PROTO=LL" in fingerprint(first["env"]).split()


def test_server_env_from_a_systemd_unit_docker_inspect_and_a_key_value_file(tmp_path):
    from breakeven.iotools.server import read_server_env

    extra = tmp_path / "extra.env"
    extra.write_text("NCCL_BUFFSIZE=16777216\nVLLM_API_KEY=sk-in-env-file\n")
    unit = tmp_path / "sglang.service"
    unit.write_text(
        "[Unit]\nDescription=SGLang\n[Service]\n"
        'Environment="NCCL_PROTO=LL" "NCCL_ALGO=Ring" HF_TOKEN=hf_x\n'
        f"EnvironmentFile={extra}\n"
        "ExecStart=/usr/bin/python -m sglang.launch_server --model-path /m --tp 8 "
        "--api-key sk-unit --speculative-algorithm EAGLE3\n"
    )
    launch = read_server_env(str(unit))
    assert launch.env_from == "file"
    for part in ("NCCL_PROTO=LL", "NCCL_ALGO=Ring", "NCCL_BUFFSIZE=16777216", "--tp=8"):
        assert part in launch.pairs
    text = " ".join(launch.pairs)
    assert "sk-unit" not in text and "hf_x" not in text and "sk-in-env-file" not in text
    docker = tmp_path / "inspect.json"
    docker.write_text(
        json.dumps(
            [
                {
                    "Config": {
                        "Env": ["NCCL_P2P_LEVEL=SYS", "PATH=/usr/bin", "HF_TOKEN=hf_y"],
                        "Cmd": ["--model", "m", "--tensor-parallel-size", "8"],
                        "Entrypoint": ["vllm", "serve"],
                    },
                    "State": {"StartedAt": "2026-02-26T16:41:03.123456789Z"},
                }
            ]
        )
    )
    launch = read_server_env(str(docker))
    assert "NCCL_P2P_LEVEL=SYS" in launch.pairs and "--tensor-parallel-size=8" in launch.pairs
    assert not any(p.startswith(("PATH=", "HF_TOKEN")) for p in launch.pairs)
    start = datetime(2026, 2, 26, 16, 41, 3, 123456, tzinfo=timezone.utc).timestamp()
    assert launch.started == pytest.approx(start)
    plain = tmp_path / "server.env"
    plain.write_text("# saved from the server\nexport NCCL_PROTO='LL'\nSECRET_THING=x\n")
    assert read_server_env(str(plain)).pairs == ("NCCL_PROTO=LL",)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read it"),
        ("just some words\n", "holds no KEY=VALUE line"),
    ],
)
def test_a_bad_server_env_from_is_one_line_naming_the_flag(tmp_path, content, expected):
    path = tmp_path / "env.txt"
    if content is not None:
        path.write_text(content)
    result = run_cli(
        ["bench", "--url", "http://127.0.0.1:9", "--label", "x", "--server-env-from", str(path)],
    )
    assert result.exit_code == 2
    assert "--server-env-from" in result.output and expected in result.output
    assert "Traceback" not in result.output


def test_bench_rows_feed_check(tmp_path):
    out = tmp_path / "r.csv"
    with FakeServer(Behaviour(seconds_per_token=0.004)) as server:
        run_bench(
            Config(
                url=server.url,
                label="baseline",
                max_tokens=60,
                requests=4,
                num_spec_tokens=0,
                hardware="h",
            ),
            out,
        )
    with FakeServer(
        Behaviour(seconds_per_token=0.002, tokens_per_chunk=2, num_spec_tokens=2)
    ) as server:
        run_bench(
            Config(url=server.url, label="spec", max_tokens=60, requests=4, hardware="h"), out
        )
    r = run_cli(["check", str(out), "--json"])
    import json

    (comparison,) = json.loads(r.output)["comparisons"]
    # The speedup is the ratio of the two levels' rates as bench wrote them (tokens over
    # time, each a ratio of sums): check reads bench's rows as bench measured them.
    rate = {
        label: sum(float(x["completion_tokens"]) - 1 for x in got)
        / sum((float(x["completion_tokens"]) - 1) / float(x["tok_s"]) for x in got)
        for label in ("baseline", "spec")
        if (got := [x for x in rows(out) if x["label"] == label and x["origin"] == "client"])
    }
    assert comparison["measured_speedup"] == pytest.approx(rate["spec"] / rate["baseline"])
    assert comparison["runs"] == 4 and comparison["baseline_runs"] == 4


class TestReadiness:
    def test_connection_refused(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # nothing listens once the socket closes
        r = bench("--url", f"http://127.0.0.1:{port}", "--label", "t")
        assert r.exit_code == 2
        assert f"cannot reach http://127.0.0.1:{port}/v1/models" in r.output
        assert "is the server running?" in r.output

    def test_a_name_that_does_not_resolve(self):
        start = time.monotonic()
        r = bench("--url", "http://no-such-host.invalid:8000/v1", "--label", "t")
        assert r.exit_code == 2 and "does not resolve" in r.output
        assert time.monotonic() - start < 30

    def test_404_prints_the_url_and_a_hint_about_a_doubled_v1(self):
        with FakeServer(Behaviour(models_404=True)) as server:
            r = bench("--url", server.url + "/v1", "--label", "t")
            assert r.exit_code == 2 and f"404 Not Found for {server.url}/v1/models" in r.output
            doubled = bench("--url", server.url + "/v1/v1", "--label", "t")
            assert "holds /v1 twice" in doubled.output

    def test_waits_while_the_model_loads(self, tmp_path):
        with FakeServer(
            Behaviour(seconds_per_token=0.001, loading_until=time.monotonic() + 0.5)
        ) as server:
            r = bench("--url", server.url, "--label", "t", "--max-tokens", 4, "--requests", 1)
            assert r.exit_code == 0, r.output
        with FakeServer(Behaviour(loading_until=time.monotonic() + 60)) as server:
            r = bench("--url", server.url, "--label", "t", "--ready-timeout", 0.3)
            assert r.exit_code == 2 and "still answers 503" in r.output

    def test_wrong_model_lists_the_served_ones(self):
        with FakeServer() as server:
            r = bench("--url", server.url, "--label", "t", "--model", "llama")
            assert r.exit_code == 2
            assert "does not serve 'llama'; it serves 'fake-model'" in r.output


class TestFaults:
    def test_reset_mid_stream_keeps_the_completed_rows(self, tmp_path):
        out = tmp_path / "r.csv"
        with FakeServer(
            Behaviour(seconds_per_token=0.001, reset_after_chunks=3, reset_requests=2)
        ) as server:
            r = bench(
                "--url",
                server.url,
                "--label",
                "t",
                "--max-tokens",
                10,
                "--requests",
                5,
                "--out",
                out,
            )
        assert r.exit_code == 2 and "2 request(s) failed" in r.output
        assert "mid-stream" in r.output
        got = rows(out)
        assert len(got) == 3 and all(timed(row) for row in got)

    def test_malformed_sse(self):
        with FakeServer(Behaviour(seconds_per_token=0.001, malformed_sse=True)) as server:
            r = bench("--url", server.url, "--label", "t", "--max-tokens", 6, "--requests", 1)
        assert r.exit_code == 2 and "malformed server-sent event" in r.output

    def test_slow_start_counts_as_ttft_not_decode(self, tmp_path):
        """A server that waits before its first token: the wait is TTFT, never decode.  On a
        fake clock (a stream's chunks at set times): the rate is exactly the decode's; a
        real server's wait is at least its sleep (how fast the rest came is a machine's)."""
        from breakeven.bench.stream import _Timing
        from breakeven.iotools.replies import Drafts

        timing = _Timing(start=10.0)
        for i in range(80):  # the first token at 0.3 s, then one every 5 ms
            timing.add(10.3 + 0.005 * i, "x", i + 1, Drafts())
        result = timing.result(done=True)
        assert result.ttft_ms == pytest.approx(300)
        assert result.decode_tok_s == pytest.approx(200)
        out = tmp_path / "r.csv"
        with FakeServer(Behaviour(seconds_per_token=0.005, first_token_delay=0.3)) as server:
            run_bench(Config(url=server.url, label="t", max_tokens=80, requests=1), out)
        (row,) = rows(out)
        assert float(row["ttft_ms"]) >= 300
        assert float(row["completion_tokens"]) == 80

    def test_an_interrupted_run_keeps_every_row_written(self, tmp_path):
        out = tmp_path / "r.csv"
        with FakeServer(Behaviour(seconds_per_token=0.01)) as server:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "breakeven",
                    "bench",
                    "--url",
                    server.url,
                    "--label",
                    "t",
                    "--max-tokens",
                    "10",
                    "--requests",
                    "200",
                    "--out",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                # A shell that runs the tests in the background ignores SIGINT in its children;
                # restore the default so Python turns Ctrl-C into KeyboardInterrupt.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and server.behaviour.requests_seen < 5:
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
        got = rows(out)
        assert 3 <= len(got) < 200  # the requests completed before Ctrl-C
        assert all(len(row) == len(BENCH_COLUMNS) and row["tok_s"] for row in got)


class TestBadInput:
    def test_invalid_url(self):
        r = bench("--url", "localhost:8000", "--label", "t")
        assert r.exit_code == 2 and r.output.startswith("Error: --url: got 'localhost:8000'")

    @pytest.mark.parametrize("levels", [["0"], ["-2"], ["1", "x"]])
    def test_concurrency_below_one(self, levels):
        r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--concurrency", *levels)
        assert r.exit_code == 2 and "--concurrency" in r.output

    def test_missing_prompts_file(self, tmp_path):
        r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--prompts", tmp_path / "none.txt")
        assert r.exit_code == 2 and "--prompts: " in r.output and "cannot read it" in r.output

    def test_api_key_is_never_printed_or_written(self, tmp_path, monkeypatch):
        monkeypatch.setenv("SECRET_KEY_FOR_TEST", "sk-very-secret")
        out = tmp_path / "r.csv"
        with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
            r = bench(
                "--url",
                server.url,
                "--label",
                "t",
                "--max-tokens",
                4,
                "--requests",
                1,
                "--api-key-env",
                "SECRET_KEY_FOR_TEST",
                "--out",
                out,
                "--json",
            )
        assert r.exit_code == 0
        assert "sk-very-secret" not in r.output and "sk-very-secret" not in out.read_text()
        missing = bench("--url", server.url, "--label", "t", "--api-key-env", "NOT_SET_ANYWHERE")
        assert missing.exit_code == 2 and "NOT_SET_ANYWHERE is not set" in missing.output

    def test_appending_to_a_csv_of_other_columns_is_refused(self, tmp_path):
        out = tmp_path / "other.csv"
        out.write_text("a,b\n1,2\n")
        with FakeServer() as server:
            r = bench("--url", server.url, "--label", "t", "--out", out)
        assert r.exit_code == 2 and "has other columns" in r.output
        assert out.read_text() == "a,b\n1,2\n"

    def test_without_the_extra_it_says_what_to_install(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "httpx", None)
        r = bench("--url", "http://127.0.0.1:9", "--label", "t")
        assert r.exit_code == 2 and "pip install '.[bench]' in breakeven's folder" in r.output


def test_fake_server_listens_on_loopback_only():
    with FakeServer() as server:
        assert server.httpd.server_address[0] == "127.0.0.1"


def test_vllm_per_request_acceptance_is_recorded_and_pools_to_the_counters(tmp_path):
    # Issue 23: a vLLM started with --per-request-spec-decode-metrics summary sends each
    # request's drafts in its last chunk (metrics.speculative_decoding).  bench records them
    # per request, with the histogram; pooled over the level they equal the change of the
    # server's counters, which the level's server row holds.  (The fake server streams a
    # verify cycle per chunk: 3 tokens a cycle, the last chunk of a request shorter.)
    out = tmp_path / "r.csv"
    behaviour = Behaviour(
        seconds_per_token=0.001, tokens_per_chunk=3, num_spec_tokens=3, per_request_spec=True
    )
    with FakeServer(behaviour) as server:
        run_bench(
            Config(url=server.url, label="s", max_tokens=20, requests=4, num_spec_tokens=3), out
        )
    got = rows(out)
    client = [r for r in got if r["origin"] == "client"]
    (level,) = [r for r in got if r["origin"] == "server"]
    assert len(client) == 4
    for r in client:
        # 20 tokens in chunks of 3: six cycles that accepted 2 drafts, one that accepted 1.
        assert r["num_drafts"] == "7" and r["acceptance_histogram"] == "0;1;6;0"
        assert float(r["accept_len"]) == pytest.approx(1 + 13 / 7)
        assert r["accepted_tokens"] == "13" and r["draft_tokens"] == "21"
    pooled = 1 + sum(int(r["accepted_tokens"]) for r in client) / sum(
        int(r["num_drafts"]) for r in client
    )
    assert float(level["accept_len"]) == pytest.approx(pooled)
    assert level["num_drafts"] == "28"


def test_vllm_timing_histograms_give_a_server_row_and_a_disagreement_is_said(tmp_path):
    # Issue 23, finding 8: vLLM's own view (its request decode-time and inter-token latency
    # histograms) gives the level's server row: the server's per-sequence rate and its step
    # (a baseline) or cycle.  A server whose decode time reads 30% low disagrees with the
    # client by more than the tolerance: one warning line with both figures.
    out = tmp_path / "r.csv"
    with FakeServer(Behaviour(seconds_per_token=0.004, timing_counters=True)) as server:
        run_bench(
            Config(url=server.url, label="b", max_tokens=20, requests=3, num_spec_tokens=0),
            out,
        )
    (level,) = [r for r in rows(out) if r["origin"] == "server"]
    client = [r for r in rows(out) if r["origin"] == "client"]
    assert level["run_id"] == client[0]["run_id"] and level["step_ms"] and not level["cycle_ms"]
    # The server's rate is its tokens over its own time: 1000 / step, one token a step.
    assert float(level["tok_s"]) == pytest.approx(1000 / float(level["step_ms"]), rel=0.02)
    lying = Behaviour(seconds_per_token=0.004, timing_counters=True, timing_scale=0.7)
    with FakeServer(lying) as server:
        r = bench("--url", server.url, "--label", "l", "--max-tokens", 20, "--requests", 3)
    assert r.exit_code == 0, r.output
    assert "tok/s per sequence and the server's counters" in r.output


def test_tokens_after_the_last_chunk_with_text_took_no_decode_time():
    # Tokens after the last chunk with text (half a character, which streams no text) came
    # after the decode time measured: they are not counted in it.
    from breakeven.bench.stream import _Timing
    from breakeven.iotools.replies import Drafts  # lazy: private timing, tested here

    timing = _Timing(start=0.0)
    for i in range(40):
        timing.add(0.05 + 0.01 * i, "x", i + 1, Drafts())
    timing.add(0.5, "", 42, Drafts())  # two tokens of half a character
    result = timing.result(done=True)
    assert result.completion_tokens == 42 and result.trailing_tokens == 2
    assert result.decoded_tokens == 39 and not result.burst
    assert result.decode_tok_s == pytest.approx(39 / 0.39)


def test_a_stream_read_late_at_its_start_or_end_is_timed_where_it_was_live():
    # A stream whose first chunk was read 0.3 s late brings the tokens made meanwhile right
    # after it: its decode time from the first chunk would be short by 0.3 s.  It is timed
    # from the last of those chunks, and before a final run that came after a wait.
    from breakeven.bench.stream import _Timing
    from breakeven.iotools.replies import Drafts  # lazy: private timing, tested here

    def stream(times):
        timing = _Timing(start=0.0)
        for i, t in enumerate(times):
            timing.add(t, "x", i + 1, Drafts())
        return timing.result(done=True)

    step = 0.010
    live = [0.05 + step * i for i in range(100)]
    assert stream(live).decode_tok_s == pytest.approx(1 / step)
    late_start = [0.35] + [0.35 + 1e-5 * i for i in range(1, 30)] + live[30:]
    assert stream(late_start).decode_tok_s == pytest.approx(1 / step, rel=0.02)
    late_end = live[:70] + [live[99] + 0.3 + 1e-5 * i for i in range(30)]
    assert stream(late_end).decode_tok_s == pytest.approx(1 / step, rel=0.02)
    # Chunks that came in pairs mid-stream move neither end.
    pairs = [t + (0.005 if i % 2 else 0) for i, t in enumerate(live)]
    assert stream(pairs).decode_tok_s == pytest.approx(1 / step, rel=0.01)


def test_a_stream_without_token_counts_is_timed_whole():
    # llama.cpp streams no usage per chunk, and a chunk may hold several tokens: the stream
    # is timed from its first chunk (the prefill's one token) to its last, every token of the
    # final usage counted (the real llama-server test read 2x slow when chunks were counted).
    from breakeven.bench.stream import _Timing
    from breakeven.iotools.replies import Drafts  # lazy: private timing, tested here

    timing = _Timing(start=0.0)
    for i in range(20):
        timing.add(0.05 + 0.01 * i, "xyz", None, Drafts())
    timing.add(0.3, "", 64, Drafts())  # the final usage: 64 tokens in 20 chunks
    result = timing.result(done=True)
    assert result.decoded_tokens == 63 and result.trailing_tokens == 0
    assert result.decode_tok_s == pytest.approx(63 / 0.19)
