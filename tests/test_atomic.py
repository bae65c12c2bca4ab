"""Atomic writers: no overwrite without --force even under races (tests/test_ingest_inputs.py),
every file on disk before it takes its name, and temporary files left by a killed writer
removed by the next writer in the same directory."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_checks import run_cli

from breakeven.iotools import atomic

CASE = Path(__file__).resolve().parent / "data" / "case_study"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_killed_writers_temporary_file_is_removed_by_the_next_writer(tmp_path):
    stale = tmp_path / f"{atomic.TEMP_PREFIX}{atomic._host()}-{_dead_pid()}-abc.tmp.csv"
    stale.write_bytes(b"x" * 1000)
    other_host = tmp_path / f"{atomic.TEMP_PREFIX}elsewhere-1-abc.tmp.csv"  # not this host's
    other_host.write_bytes(b"y")
    live = tmp_path / f"{atomic.TEMP_PREFIX}{atomic._host()}-{os.getpid()}-abc.tmp.csv"
    live.write_bytes(b"z")  # a writer that is still running
    r = run_cli(["ingest", str(CASE / "sglang_baseline.log"), "--out", str(tmp_path / "runs.csv")])
    assert r.exit_code == 0, r.output
    assert not stale.exists() and other_host.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted(
        [other_host.name, live.name]
    )


def test_kill_9_during_a_write_leaves_nothing_the_next_run_keeps(tmp_path):
    big = tmp_path / "big.log"
    line = (
        b"[2026-02-26 16:41:43 TP0] Decode batch, #running-req: 8, #token: 100, token usage:"
        b" 0.01, accept len: 2.50, gen throughput (token/s): 387.18, #queue-req: 0\n"
    )
    big.write_bytes(line * 400_000)  # about 55 MB: the write takes a while
    out = tmp_path / "runs.csv"
    process = subprocess.Popen(
        [sys.executable, "-m", "breakeven", "ingest", str(big), "--out", str(out)],
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        p.name.startswith(atomic.TEMP_PREFIX) for p in tmp_path.iterdir()
    ):
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    left = [p for p in tmp_path.iterdir() if p.name.startswith(atomic.TEMP_PREFIX)]
    assert left and not out.exists()  # killed mid-write: a temporary file, no half CSV
    r = run_cli(["ingest", str(CASE / "sglang_baseline.log"), "--out", str(tmp_path / "small.csv")])
    assert r.exit_code == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(atomic.TEMP_PREFIX)]


def test_every_atomic_file_is_flushed_to_disk_before_its_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_link = os.fsync, os.link
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "link", lambda a, b: (events.append("link"), real_link(a, b))[1])
    with atomic.atomic_path(str(tmp_path / "picture.png")) as tmp, open(tmp, "wb") as f:
        f.write(b"not flushed by its writer")  # as savefig writes and closes
    assert events == ["fsync", "link"]
    assert (tmp_path / "picture.png").read_bytes() == b"not flushed by its writer"
