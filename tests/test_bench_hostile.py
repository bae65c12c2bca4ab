"""bench against a hostile server (tests/hostile_server.py): every fault is a failed request or
one clear readiness error, never a traceback or a hang; the rows completed before a fault are
kept; secrets never reach stdout, stderr or a written file; SIGTERM and SIGKILL lose at most
the requests in flight."""

import csv
import signal
import subprocess
import sys
import time

import pytest
from cli_checks import run_cli
from fake_server import timed
from hostile_server import MODELS_MODES, STREAM_MODES, HostileServer, Hostility

from breakeven.bench.rows import BENCH_COLUMNS

KEY = "sk-hostile-0123456789abcdef"
PASSWORD = "pw-hunter2-secret"

# What each stream fault becomes: the failed request's reason (None: the request survives).
STREAM_REASONS = {
    "sse_number": "not a JSON object",
    "sse_list": "not a JSON object",
    "usage_strings": None,
    "choices_not_list": "'choices' is dict, expected a list",
    "invalid_json": "malformed server-sent event",
    "no_done": "ended before [DONE]",
    "reset_mid": "mid-stream",
    "stall_headers": "the server sent nothing for 1 s (--idle-timeout)",
    "stall_stream": "the server sent nothing for 1 s (--idle-timeout)",
    "drip": "the request took longer than 2.5 s (--request-timeout)",
    "huge_event": None,
    "echo_headers": "HTTP 500 from",
}
MODELS_REASONS = {
    "reset": "the connection failed while reading the reply",
    "html": "answered with a body that is not JSON",
    "list": 'without a list of models under "data" (a list)',
    "string": 'without a list of models under "data" (a str)',
    "bad_ids": "the server lists no models",
    "stall": "sent no reply within 1 s (--ready-timeout)",
}
# Short enough that a stall ends soon, long enough that a loaded CI machine's good requests pass.
FAST = [
    "--max-tokens",
    "8",
    "--idle-timeout",
    "1",
    "--request-timeout",
    "2.5",
    "--connect-timeout",
    "2",
]


def bench(*args, env=None):
    return run_cli(["bench", *map(str, args)], env=env)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_every_mode_has_an_expectation():
    assert set(STREAM_REASONS) == set(STREAM_MODES) and set(MODELS_REASONS) == set(MODELS_MODES)


@pytest.mark.parametrize("mode", MODELS_MODES)
def test_a_broken_models_route_is_one_readiness_error(mode):
    with HostileServer(Hostility(models=mode)) as server:
        start = time.monotonic()
        r = bench("--url", server.url, "--label", "t", "--ready-timeout", 1, "--idle-timeout", 5)
    assert r.exit_code == 2, r.output
    assert MODELS_REASONS[mode] in r.output and "Traceback" not in r.output
    assert r.output.startswith("Error: --url: ") and r.output.count("\n") == 1
    assert time.monotonic() - start < 10


def test_a_stalled_models_reply_names_the_wait_that_ended_it():
    with HostileServer(Hostility(models="stall")) as server:
        r = bench("--url", server.url, "--label", "t", "--ready-timeout", 5, "--idle-timeout", 0.5)
    # The idle timeout ended it, not the 5 s ready timeout: the message names which.
    assert r.exit_code == 2 and "the server sent nothing for 0.5 s (--idle-timeout)" in r.output


@pytest.mark.parametrize("secret", ["key", "password"])
@pytest.mark.parametrize("mode", STREAM_MODES)
def test_a_fault_fails_one_request_keeps_the_others_and_no_secret_shows(tmp_path, mode, secret):
    out = tmp_path / "runs.csv"
    with HostileServer(Hostility(stream=mode, fault_every=2)) as server:
        if secret == "key":  # as a CRLF .env file leaves it
            url, env, extra = (
                server.url,
                {"HOSTILE_KEY": KEY + "\r\n"},
                ["--api-key-env", "HOSTILE_KEY"],
            )
        else:
            url, env, extra = server.url.replace("://", f"://bench:{PASSWORD}@"), None, []
        # A 50 MB event takes a loaded machine a while to send and parse: longer waits, as
        # hang guards (2.5 s per request failed one under stress-ng --cpu 8 on 2 CPUs).
        slow = ["--idle-timeout", 30, "--request-timeout", 120] if mode == "huge_event" else []
        r = bench(
            "--url",
            url,
            "--label",
            "t",
            "--requests",
            4,
            "--out",
            out,
            *FAST,
            *slow,
            *extra,
            env=env,
        )
        seen = server.hostility.authorizations
    reason = STREAM_REASONS[mode]
    got = rows(out)
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    if reason is None:
        assert r.exit_code == 0, r.output
        assert len(got) == 4
    else:
        assert r.exit_code == 2, r.output
        assert "2 request(s) failed" in r.output and reason in r.output
        assert len(got) == 2  # requests 1 and 3, completed around the faults
    assert all(len(row) == len(BENCH_COLUMNS) and timed(row) for row in got)
    written = out.read_text()
    for text in (r.output, written):
        assert KEY not in text and PASSWORD not in text
    if secret == "key":
        assert "white space around it" in r.output
        assert set(seen) == {f"Bearer {KEY}"}  # stripped, then sent
    else:
        assert all(a.startswith("Basic ") for a in seen)
        assert all("url=http://bench:***@127.0.0.1" in row["env"] for row in got)
        assert all(row["source"].startswith("bench http://bench:***@") for row in got)


def test_a_key_that_cannot_be_a_header_is_refused_without_showing_it():
    r = bench(
        "--url",
        "http://127.0.0.1:9",
        "--label",
        "t",
        "--api-key-env",
        "BAD_KEY",
        env={"BAD_KEY": "sk-abc\x07def-secret"},
    )
    assert r.exit_code == 2 and "--api-key-env: the key in BAD_KEY holds a character" in r.output
    assert "secret" not in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(
    "url", ["http://u:hunter2pw@[::1", "ftp://u:hunter2pw@host/", "http://u:hunter2pw@host:99999"]
)
def test_a_bad_url_is_shown_without_its_password(url):
    r = bench("--url", url, "--label", "t")
    assert r.exit_code == 2 and r.output.startswith("Error: --url: got ")
    assert "hunter2pw" not in r.output and "u:***@" in r.output


@pytest.mark.parametrize(
    "flag", ["--connect-timeout", "--idle-timeout", "--request-timeout", "--ready-timeout"]
)
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_timeouts_must_be_positive_and_finite(flag, value):
    r = bench("--url", "http://127.0.0.1:9", "--label", "t", flag, value)
    assert r.exit_code == 2 and r.output.startswith(f"Error: {flag}: got ")


def test_sizes_are_bounded():
    r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--requests", 10**20)
    assert r.exit_code == 2 and "--requests: got" in r.output and "1,000,000" in r.output


def _bench_process(url, out, requests=400):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "breakeven",
            "bench",
            "--url",
            url,
            "--label",
            "t",
            "--max-tokens",
            "10",
            "--requests",
            str(requests),
            "--out",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sigterm_and_sigkill_lose_at_most_the_requests_in_flight(tmp_path, sig):
    out = tmp_path / "runs.csv"
    with HostileServer(Hostility(seconds_per_token=0.005)) as server:
        process = _bench_process(server.url, out)
        _wait_for(lambda: server.hostility.requests_seen >= 6)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=30)
        started = server.hostility.requests_seen
    got = rows(out)
    assert process.returncode == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
    # Concurrency 1: every request that had started has its row, but the one in flight (a
    # row never waits for /metrics: tests/test_bench_rows_first.py); SIGKILL is allowed one
    # more, a request whose last bytes the server had sent and the client not yet read.
    assert started - (1 if sig == signal.SIGTERM else 2) <= len(got) <= started
    assert all(len(row) == len(BENCH_COLUMNS) and timed(row) for row in got)
    if sig == signal.SIGTERM:
        assert "Terminated (SIGTERM)" in stderr and "Traceback" not in stderr


def test_two_benches_appending_to_one_new_file_write_one_header(tmp_path):
    out = tmp_path / "runs.csv"
    with HostileServer(Hostility()) as server:
        procs = [_bench_process(server.url, out, requests=12) for _ in range(2)]
        for p in procs:
            p.communicate(timeout=60)
    assert [p.returncode for p in procs] == [0, 0]
    lines = out.read_text().splitlines()
    assert lines.count(",".join(BENCH_COLUMNS)) == 1 and lines[0] == ",".join(BENCH_COLUMNS)
    assert len(rows(out)) == 24


def test_the_hostile_server_listens_on_loopback_only():
    with HostileServer(Hostility()) as server:
        assert server.httpd.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing_directory"])
def test_an_out_that_cannot_take_rows_is_one_line(tmp_path, kind):
    import os

    out = tmp_path / "out.csv"
    if kind == "fifo":
        os.mkfifo(out)  # opening it to write would wait for a reader for ever
    elif kind == "directory":
        out.mkdir()
    else:
        out = tmp_path / "no" / "such" / "out.csv"
    with HostileServer(Hostility()) as server:
        r = bench("--url", server.url, "--label", "t", "--requests", 1, "--out", out, *FAST)
    assert r.exit_code == 2 and r.output.startswith("Error: ") and r.output.count("\n") == 1
    assert "--out" in r.output and "Traceback" not in r.output


def test_check_shows_a_url_password_in_an_env_as_stars(tmp_path):
    from breakeven.measurements.check import fingerprint

    # The URL bench reached the server at is the client's choice, left out of a fingerprint;
    # any other URL in an env keeps its place, its password as stars.
    assert fingerprint("url=http://u:hunter2pw@h:8000 tp=8") == "tp=8"
    shown = fingerprint("proxy=http://u:hunter2pw@h:8000 tp=8")
    assert shown == "proxy=http://u:***@h:8000 tp=8"


def test_a_prompts_pipe_that_no_process_writes_is_refused(tmp_path):
    import os

    fifo = tmp_path / "prompts"
    os.mkfifo(fifo)
    start = time.monotonic()
    r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--prompts", fifo)
    assert r.exit_code == 2 and r.output.startswith("Error: --prompts: ")
    assert time.monotonic() - start < 10
