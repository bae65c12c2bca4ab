"""Issue 40: Ctrl-C exits 130 and SIGTERM 143, everywhere, never 1.

click turns Ctrl-C into "Aborted!" and exit 1, which a deployment gate reads as
``compare --fail-if slower``'s "slower"; SIGTERM (``timeout``, ``docker stop``) killed the
process with no message.  The group now says "Interrupted" (exit 130) or "Terminated (SIGTERM)"
(exit 143) in one line; bench and sweep keep their own lines, which say where the rows are.

Each command runs as a user runs it, ``python -m breakeven`` in its own process, reading a
named pipe that a writer holds open and never writes: it waits there until the signal comes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_server import Behaviour, FakeServer

from breakeven.bench.config import Config
from breakeven.bench.session import run_bench
from breakeven.core.errors import Terminated

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "data" / "case_study.csv"

# Commands that read the pipe ({pipe}) as one of their inputs.
READERS = {
    "ingest": ["ingest", "{pipe}"],
    "check": ["check", "{pipe}"],
    "compare --fail-if slower": ["compare", "base={pipe}", f"spec={CASE}", "--fail-if", "slower"],
    "report": ["report", "{pipe}", "--out", "{tmp}/page"],
    "fit": ["fit", "{pipe}"],
}
SIGNALS = {
    "SIGINT": (signal.SIGINT, 130, "Interrupted"),
    "SIGTERM": (signal.SIGTERM, 143, "Terminated (SIGTERM)"),
}


def _reading(pid: int, path: Path, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has ``path`` open (it is then blocked reading it)."""
    deadline = time.monotonic() + timeout
    target = str(path)
    while time.monotonic() < deadline:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            break
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    time.sleep(0.2)  # into its read
                    return
            except OSError:
                continue
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never opened {path}")


def _signalled(args: list[str], tmp_path: Path, signum: int) -> subprocess.CompletedProcess:
    """``python -m breakeven ARGS`` waiting on a named pipe, sent ``signum``."""
    pipe = tmp_path / "runs.csv"
    os.mkfifo(pipe)
    held = os.open(pipe, os.O_RDWR)  # a writer that never writes: the reader waits
    try:
        argv = [a.replace("{pipe}", str(pipe)).replace("{tmp}", str(tmp_path)) for a in args]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("BREAKEVEN_DEBUG", None)
        child = subprocess.Popen(
            [sys.executable, "-m", "breakeven", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _reading(child.pid, pipe)
            child.send_signal(signum)
            out, err = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    finally:
        os.close(held)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_ctrl_c_exits_130_and_sigterm_143_in_one_line(tmp_path, reader, name):
    signum, code, line = SIGNALS[name]
    r = _signalled(READERS[reader], tmp_path, signum)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stderr == line + "\n", r.stderr  # one line: no "Aborted!", no traceback
    assert r.stdout == ""


def test_sigterm_is_put_back_as_it_was_after_the_command(tmp_path):
    """The group's SIGTERM handler lives as long as the command: the caller's comes back."""
    from cli_checks import run_cli

    def mine(signum, frame):  # pragma: no cover - never called
        raise AssertionError("not expected")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        r = run_cli(["predict", "--step-ms", "11.1", "--cycle-ms", "29.9", "--accept-len", "2.1"])
        assert r.exit_code == 0, r.output
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_bench_puts_back_the_sigterm_handler_it_replaced(tmp_path):
    """bench's event loop takes SIGTERM while it measures; removing its handler set SIGTERM to
    its default (death, no message), so a sweep's next launch died unstopped.  The Python
    handler that was there before is put back."""

    def mine(signum, frame):  # pragma: no cover - never called
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
            levels, failures, _ = run_bench(
                Config(url=server.url, label="t", max_tokens=4, requests=2), None
            )
        assert levels and not failures
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_terminated_is_one_class_importable_from_bench_session():
    from breakeven.bench import session

    assert session.Terminated is Terminated and issubclass(Terminated, KeyboardInterrupt)
