"""bench writes a request's row when the request completes, never after a ``/metrics`` scrape: a
bench killed while a slow ``/metrics`` is read keeps every completed request's row, whole, and
``check`` reads them; and a compressed reply is decoded within a bound (a gzip bomb fails its
request with the limit named, and the process's memory stays near that bound)."""

import asyncio
import csv
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import replace

import pytest
from cli_checks import run_cli
from fake_server import Behaviour, FakeServer, gzip_bomb, timed

from breakeven.bench.config import Config
from breakeven.bench.rows import BENCH_COLUMNS
from breakeven.bench.session import run_bench
from breakeven.core.schema import SPECULATIVE_SERVER
from breakeven.iotools.server import MAX_REPLY_BYTES, ReplyError, bounded_bytes

SLOW_METRICS_S = float(os.environ.get("BREAKEVEN_TEST_SLOW_METRICS_S", "8"))
"""How long the fake server's ``/metrics`` takes once the level's requests are done [s] (the
issue's: 8 s)."""


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _bench(url, out, *args):
    return subprocess.Popen(
        [sys.executable, "-m", "breakeven", "bench", "--url", url, "--out", str(out)]
        + [str(a) for a in args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, seconds=60.0):
    """Poll ``condition`` (a hang guard, not a speed target)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


N = 6


def _killed_during_the_closing_scrape(tmp_path, concurrency, slow_from, *k):
    """A baseline of 4 requests, then a speculative level of N requests (``k``: bench's -k, or
    none) killed once every request is done and the scrape that closes the level is under way
    (sleeping on the server): the CSV and its speculative rows."""
    out = tmp_path / "runs.csv"
    with FakeServer(Behaviour(seconds_per_token=0.004)) as server:
        baseline = Config(url=server.url, label="baseline", max_tokens=30, hardware="h")
        run_bench(replace(baseline, concurrency=(concurrency,), requests=4), out)
    behaviour = Behaviour(
        seconds_per_token=0.002,
        tokens_per_chunk=2,
        num_spec_tokens=2,
        metrics_delay=SLOW_METRICS_S,
        metrics_slow_after=slow_from,
    )
    with FakeServer(behaviour) as server:
        process = _bench(
            server.url,
            out,
            *("--label", "spec", "--hardware", "h", "--max-tokens", 30, *k),
            *("--requests", N, "--concurrency", concurrency),
        )
        try:
            _wait_for(lambda: behaviour.finished >= N and behaviour.metrics_waiting >= 1)
            process.send_signal(signal.SIGKILL)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == -signal.SIGKILL, stderr
    return out, [row for row in rows(out) if row["label"] == "spec"]


# Slow from N requests done: only the scrape that closes the level is slow; from 0: every
# scrape is (the launch's and the level's first too), the server.
@pytest.mark.parametrize(("concurrency", "slow_from"), [(1, N), (3, N), (3, 0)])
def test_sigkill_during_a_slow_metrics_scrape_keeps_every_completed_row(
    tmp_path, concurrency, slow_from
):
    out, got = _killed_during_the_closing_scrape(tmp_path, concurrency, slow_from, "-k", 2)
    # Every completed request's row, whole; the level's server row needed the scrape.
    assert len(got) == N
    assert all(row["origin"] == "client" for row in got)
    assert all(len(row) == len(BENCH_COLUMNS) and None not in row.values() for row in got)
    assert all(timed(row) and row["completion_tokens"] == "30" for row in got)
    assert out.read_text().endswith("\n")
    # check reads the cut run: its rows, against the baseline's.
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output
    (comparison,) = json.loads(r.output)["comparisons"]
    assert comparison["runs"] == N and comparison["baseline_runs"] == 4


def test_a_cut_level_without_k_is_a_speculative_run_never_a_baseline(tmp_path):
    # Without -k a request row's k is its level's server row's, which the scrape that closes
    # the level would have written.  The server showed spec-decode counters when the level
    # began, and each row says so: check reads the rows as a speculative run of unknown k,
    # against the baseline, not as more baseline.
    out, got = _killed_during_the_closing_scrape(tmp_path, 1, N)
    assert len(got) == N and all(row["num_spec_tokens"] == "" for row in got)
    assert all(SPECULATIVE_SERVER in row["source"] for row in got)
    baseline = [row for row in rows(out) if row["label"] == "baseline"]
    assert baseline and not any(SPECULATIVE_SERVER in row["source"] for row in baseline)
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output
    (comparison,) = json.loads(r.output)["comparisons"]
    assert comparison["label"] == "spec" and comparison["runs"] == N
    assert comparison["baseline_runs"] == 4
    assert comparison["num_spec_tokens"] is None  # unknown: no server row told it
    assert comparison["measured_speedup"] > 0


def test_sigterm_during_a_slow_level_keeps_its_rows_and_its_server_row(tmp_path):
    """SIGTERM while requests stream: every completed row, and the level's server row from one
    last scrape (the server's /metrics answers within that scrape's 3 s)."""
    out = tmp_path / "runs.csv"
    behaviour = Behaviour(
        seconds_per_token=0.01,
        tokens_per_chunk=2,
        num_spec_tokens=2,
        metrics_delay=0.5,
        metrics_slow_after=1,
    )
    with FakeServer(behaviour) as server:
        process = _bench(
            server.url, out, *("--label", "spec", "--max-tokens", 20, "--requests", 200)
        )
        try:
            _wait_for(lambda: behaviour.finished >= 4)
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        finished = behaviour.finished
    assert process.returncode == 143, stderr
    assert "Terminated (SIGTERM)" in stderr and "Traceback" not in stderr
    got = rows(out)
    client = [row for row in got if row["origin"] == "client"]
    (server_row,) = [row for row in got if row["origin"] == "server"]
    assert finished - 1 <= len(client) <= finished  # but the one in flight
    assert float(server_row["accept_len"]) == pytest.approx(2.0)
    assert int(server_row["level_requests"]) >= len(client)


def test_a_gzip_reply_is_read_decoded(tmp_path):
    """A server that compresses every reply (the stream flushed at each chunk, /metrics,
    /v1/models, /version) is measured as one that does not."""
    out = tmp_path / "runs.csv"
    behaviour = Behaviour(
        seconds_per_token=0.004, tokens_per_chunk=2, num_spec_tokens=2, gzip_replies=True
    )
    with FakeServer(behaviour) as server:
        (level,), failures, _ = run_bench(
            Config(url=server.url, label="spec", max_tokens=30, requests=3), out
        )
    assert failures == []
    client = [row for row in rows(out) if row["origin"] == "client"]
    assert len(client) == 3 and all(row["completion_tokens"] == "30" for row in client)
    assert level["accept_len"] == pytest.approx(2.0)  # from the compressed /metrics
    assert level["server"]["accept_len"] == pytest.approx(2.0)


_PEAK = (
    "import atexit, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = [line.split()[1] for line in f if line.startswith('VmHWM:')][0]\n"
    "    sys.stderr.write(f'PEAK {kb}\\n')\n"
    "atexit.register(peak)\n"
    "from breakeven.cli import main\n"
    "sys.argv[0] = 'breakeven'\n"
    "main()\n"
)
"""bench, saying its peak resident memory at exit (VmHWM: its own since exec, where a
forked child's ru_maxrss counts the parent's pages it started with)."""

BOMB = 300 << 20
"""The issue's bomb: about 300 KB of gzip that decodes to 300 MiB of zeros."""


def test_a_gzip_bomb_fails_its_request_naming_the_limit_and_memory_stays_bounded(tmp_path):
    assert len(gzip_bomb(BOMB)) < BOMB // 500  # a bomb indeed
    out = tmp_path / "runs.csv"
    with FakeServer(Behaviour(gzip_replies=True, gzip_bomb=BOMB)) as server:
        process = subprocess.Popen(
            [
                *(sys.executable, "-c", _PEAK, "bench", "--url", server.url),
                *("--out", str(out), "--label", "t", "--requests", "2"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, stderr
    problems = [line for line in stderr.splitlines() if line.startswith("Problem:")]
    assert len(problems) == 2, stderr
    assert all("decoded to more than" in line and "bench's limit" in line for line in problems)
    assert "Traceback" not in stderr
    assert len(rows(out)) == 0
    # The reply was read to its limit, never whole: the process's peak memory stays within a
    # few limits of a bench's own (the bench grew by 663 MB).
    (peak,) = [
        int(line.split()[1]) << 10 for line in stderr.splitlines() if line.startswith("PEAK")
    ]
    assert peak < 4 * MAX_REPLY_BYTES + (128 << 20), peak


@pytest.mark.parametrize("route", ["/metrics", "/version", "/v1/models"])
def test_a_gzip_bomb_elsewhere_is_read_no_further_than_the_limit(tmp_path, route):
    """/metrics: its counters are left empty, with a warning naming the limit; /version: the
    engine is not told; /v1/models: one readiness error naming the limit."""
    out = tmp_path / "runs.csv"
    behaviour = Behaviour(gzip_replies=True, gzip_bomb=BOMB, bomb_routes=(route,))
    with FakeServer(behaviour) as server:
        r = run_cli(
            ["bench", "--url", server.url, "--label", "t", "--requests", 2, "--out", str(out)],
        )
    said = " ".join(r.output.split())  # as wrapped at 100 columns
    assert "Traceback" not in said
    if route == "/v1/models":
        assert r.exit_code == 2 and "/v1/models: the reply decoded to more than" in said
        return
    assert r.exit_code == 0, r.output
    assert len([row for row in rows(out) if row["origin"] == "client"]) == 2
    if route == "/metrics":
        assert "/metrics: the reply decoded to more than" in said
        assert "accept_len and the server's own rates are left empty" in said
    else:  # the engine is not told by /version
        assert {row["engine"] for row in rows(out)} == {"openai-compatible"}


class _Reply:
    """A streamed reply as bounded_bytes reads it: its headers and its raw bytes in chunks."""

    def __init__(self, body: bytes, encoding: str, chunk: int = 1 << 16) -> None:
        self.headers = {"content-encoding": encoding}
        self.body, self.chunk = body, chunk
        self.sent = 0

    async def aiter_raw(self):
        for i in range(0, len(self.body), self.chunk):
            self.sent += len(self.body[i : i + self.chunk])
            yield self.body[i : i + self.chunk]


def _read(reply, **bounds):
    """The pieces bounded_bytes gives, and the error that ended them (None: none)."""

    async def read():
        pieces = []
        try:
            async for piece in bounded_bytes(reply, **bounds):
                pieces.append(piece)
        except ReplyError as e:
            return pieces, e
        return pieces, None

    return asyncio.run(read())


TEXT = b"".join(b'data: {"n": %d}\r\n\r\n' % i for i in range(20_000))


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_every_encoding_asked_for_decodes_as_sent_in_steps_of_64_kib(chunk):
    packer = zlib.compressobj(wbits=-15)
    raw_deflate = packer.compress(TEXT) + packer.flush()
    for body, encoding in [
        (TEXT, ""),
        (TEXT, "identity"),
        (gzip.compress(TEXT), "gzip"),
        (gzip.compress(TEXT), "x-gzip"),
        (zlib.compress(TEXT), "deflate"),
        (raw_deflate, "deflate"),
        (gzip.compress(zlib.compress(TEXT)), "deflate, gzip"),
    ]:
        pieces, error = _read(_Reply(body if chunk > 1 else body[:4000], encoding, chunk))
        assert error is None
        got = b"".join(pieces)
        # Byte by byte, its first 4,000 bytes sent: what they decode to.
        assert got == TEXT if chunk > 1 else (len(got) >= 4000 and TEXT.startswith(got))
        assert all(len(p) <= 1 << 16 for p in pieces)


def test_a_reply_is_read_no_further_than_its_limit_or_its_ratio():
    # Plain: past the limit, one chunk more at most was read.
    reply = _Reply(bytes(3 << 20), "")
    pieces, error = _read(reply, limit=1 << 20)
    assert "more than 1 MiB (bench's limit on a reply)" in str(error)
    assert sum(map(len, pieces)) <= 1 << 20 and reply.sent <= (1 << 20) + (1 << 16)
    # A bomb: past the ratio, what was decoded is about 1000x what was read, never the bomb.
    reply = _Reply(gzip_bomb(BOMB), "gzip")
    pieces, error = _read(reply)
    assert "more than 1000x the bytes sent" in str(error)
    assert sum(map(len, pieces)) <= 1000 * reply.sent <= MAX_REPLY_BYTES + (64 << 20)
    assert reply.sent < len(reply.body) // 4


@pytest.mark.parametrize(
    ("body", "encoding", "reason"),
    [
        (b"\x00" * 10, "br", "encoded as 'br', which bench does not decode"),
        (b"not gzip at all", "gzip", "a gzip reply that does not decode"),
    ],
)
def test_a_reply_bench_cannot_decode_is_one_reason(body, encoding, reason):
    _, error = _read(_Reply(body, encoding))
    assert reason in str(error) and "\n" not in str(error)


def test_a_full_disk_under_bench_out_is_one_line_and_no_half_row(tmp_path, monkeypatch):
    # Issue 29: a row write that fails for a full disk (ENOSPC, after half the row was
    # written) leaves no half row and is one line naming --out, exit 2, not an internal error.
    import errno
    import types

    import breakeven.bench.rows as bench_rows

    out = tmp_path / "runs.csv"
    real = os

    def write(fd, data):
        if fd == state["fd"] and state["rows"] >= 2:
            real.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        if fd == state["fd"]:
            state["rows"] += 1
        return real.write(fd, data)

    state = {"fd": None, "rows": 0}
    opened = real.open

    def open_(path, flags, *args):
        fd = opened(path, flags, *args)
        if os.fspath(path) == str(out):
            state["fd"] = fd
        return fd

    fake = types.SimpleNamespace(
        **{n: getattr(real, n) for n in dir(real) if not n.startswith("__")}
    )
    fake.write, fake.open = write, open_
    monkeypatch.setattr(bench_rows, "os", fake)
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = run_cli(
            [
                "bench",
                "--url",
                server.url,
                "--label",
                "b",
                "--requests",
                "4",
                "--max-tokens",
                "8",
                "--out",
                str(out),
            ],
        )
    assert r.exit_code == 2, r.output
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("Error: ")]
    assert "--out" in line and str(out) in line and "No space left" in line
    text = out.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 2  # the header and one whole row
