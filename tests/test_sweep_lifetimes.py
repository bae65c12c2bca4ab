"""A sweep's servers never outlive it (issue 40): the command killed with SIGKILL, SIGTERM and
SIGINT, once and twice, in each phase (starting, measuring, stopping, answering), against a
fake engine whose processes behave as real servers' do (tests/fake_server.py ``--children``:
a child that ignores SIGTERM, as vLLM's engine core does, and a grandchild that escapes with a
double fork and ``setsid``; ``--stubborn``; ``--daemonize``; ``--ready-after``).  Each time:
no process of any launch is left, the exit code is the signal's (130, 143), and nothing
measured is lost (every row written before the kill is still there, every recorded launch
still recorded).  The fake server writes each of its processes' ids to a file: the evidence
is the server's own, not the keeper's."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from local_process import free_port

from breakeven.sweep.run import answer_of

FAKE = Path(__file__).parent / "fake_server.py"
GRACE_S = 2
"""--stop-grace of these sweeps [s]: the stubborn processes are killed after it."""


def _alive(pid: int) -> bool:
    """Whether a process exists and has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in "ZX"
    except OSError:
        return False


def _rows(out: Path) -> list[dict]:
    path = out / "runs.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _done(out: Path) -> list[dict]:
    try:
        return json.loads((out / "manifest.json").read_text())["done"]
    except (OSError, ValueError, KeyError):
        return []


class Sweep:
    """``breakeven sweep`` in a process of its own (as a terminal runs it: the signals go to
    it alone; its keepers are in sessions of their own), its stderr read as it comes."""

    def __init__(self, tmp_path: Path, serve_extra: str = "", *, answer_delay_s: float = 0.0):
        self.port = free_port()
        self.out = tmp_path / "sweep"
        self.pids = tmp_path / "pids"
        serve = (
            f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.02 "
            f"--pid-file {self.pids} --children {serve_extra}"
        )
        self.args = ["sweep", "--serve", serve, "--engine", "vllm", "--spec-method", "ngram"]
        self.args += ["-k", "0,2", "--port", str(self.port), "--max-tokens", "16"]
        self.args += ["--requests", "2", "--out", str(self.out), "--ready-timeout", "60"]
        self.args += ["--stop-grace", str(GRACE_S)]
        self.answer_delay_s = answer_delay_s
        self.stderr: list[str] = []
        self.process = self._start(self.args)

    def _start(self, args: list[str]) -> subprocess.Popen:
        # The answer made slow where a test must signal the sweep while it answers.
        code = (
            "import sys, time; import breakeven.sweep.answer as a; slow = a.answer_sweep; "
            f"a.answer_sweep = lambda *x, **k: (time.sleep({self.answer_delay_s}), "
            "slow(*x, **k))[1]; from breakeven.cli import main; main(sys.argv[1:])"
        )
        process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, args=(process,), daemon=True).start()
        return process

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            self.stderr.append(line)

    def said(self, text: str) -> bool:
        return any(text in line for line in self.stderr)

    def wait_until(self, condition, timeout_s: float = 120.0) -> None:
        end = time.monotonic() + timeout_s
        while not condition():
            assert self.process.poll() is None, "".join(self.stderr)
            assert time.monotonic() < end, "".join(self.stderr)
            time.sleep(0.05)

    def server_pids(self) -> list[int]:
        return [int(p) for p in self.pids.read_text().split()] if self.pids.exists() else []

    def left(self, timeout_s: float) -> list[int]:
        """The servers' processes still there after up to ``timeout_s``."""
        end = time.monotonic() + timeout_s
        while (alive := [p for p in self.server_pids() if _alive(p)]) and time.monotonic() < end:
            time.sleep(0.1)
        return alive

    def kill_what_is_left(self) -> None:
        for pid in self.server_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.process.poll() is None:
            self.process.kill()


PHASES = {
    # phase: (the fake server's extra flags, what shows the sweep is in it)
    "starting": ("--ready-after 30", lambda s: len(s.server_pids()) >= 3),
    "measuring": ("", lambda s: len(_rows(s.out)) >= 1),
    # Launch 2 starting, after launch 1 ran bench (whose event loop took SIGTERM for itself).
    "restarting": ("--ready-after 2", lambda s: len(s.server_pids()) >= 6),
    "stopping": ("--stubborn", lambda s: s.said("(baseline, repeat 1): stopping")),
    "answering": ("", lambda s: s.said("2 of 2 launches measured")),
}
SIGNALS = [
    (signal.SIGKILL, 1, -9),
    (signal.SIGTERM, 1, 143),
    (signal.SIGTERM, 2, 143),
    (signal.SIGINT, 1, 130),
    (signal.SIGINT, 2, 130),
]


@pytest.mark.parametrize("phase", list(PHASES))
@pytest.mark.parametrize(("signum", "times", "code"), SIGNALS, ids=lambda x: str(x))
def test_no_process_of_a_launch_outlives_the_sweep_however_it_ends(
    tmp_path, phase, signum, times, code
):
    extra, in_phase = PHASES[phase]
    sweep = Sweep(tmp_path, extra, answer_delay_s=60 if phase == "answering" else 0)
    try:
        sweep.wait_until(lambda: in_phase(sweep))
        if phase == "stopping":
            time.sleep(GRACE_S / 2)  # within the grace the stubborn server is given
        rows, done = _rows(sweep.out), _done(sweep.out)
        for _ in range(times):
            sweep.process.send_signal(signum)
            time.sleep(0.3)
        sweep.process.wait(timeout=60)
        stderr = "".join(sweep.stderr)
        assert sweep.process.returncode == code, stderr
        # A signal the sweep handles: its processes are gone when it exits.  SIGKILL: its
        # keepers end them, within the grace and the kill's bound.
        assert sweep.left(0.5 if signum != signal.SIGKILL else GRACE_S + 20) == []
        assert answer_of(f"http://127.0.0.1:{sweep.port}").startswith("no answer")
        assert len(sweep.server_pids()) >= 3  # the server and both children were there
        if signum != signal.SIGKILL:
            assert "Traceback" not in stderr and "Aborted" not in stderr, stderr
            said = "Terminated (SIGTERM)" if code == 143 else "Interrupted"
            assert any(line.startswith(said) for line in stderr.splitlines()), stderr
        # Nothing measured is lost: every row and every recorded launch is still there.
        after = _rows(sweep.out)
        assert after[: len(rows)] == rows
        assert _done(sweep.out)[: len(done)] == done
    finally:
        sweep.kill_what_is_left()


def test_a_sweep_killed_with_its_keeper_leaves_servers_that_resume_ends_and_names(tmp_path):
    """The OOM killer may take the keeper too: the servers then live on, re-parented to init.
    They carry the sweep's mark, so --resume ends them (and says so) instead of failing every
    launch on "another server is there"; then it measures what was left."""
    sweep = Sweep(tmp_path)
    try:
        sweep.wait_until(lambda: len(_rows(sweep.out)) >= 1)
        keepers = [
            int(pid)
            for pid in os.listdir("/proc")
            if pid.isdigit() and _keeper_of(int(pid), sweep.process.pid)
        ]
        assert keepers
        for pid in [sweep.process.pid, *keepers]:
            os.kill(pid, signal.SIGKILL)
        sweep.process.wait(timeout=30)
        time.sleep(1)
        assert [p for p in sweep.server_pids() if _alive(p)]  # left running, as described
        resumed = sweep._start([*sweep.args, "--resume"])
        resumed.wait(timeout=300)
        stderr = "".join(sweep.stderr)
        assert resumed.returncode == 0, stderr
        assert "ended what an earlier run of this sweep left running: pid " in stderr
        assert sweep.left(1) == []
        assert [d["ok"] for d in _done(sweep.out)] == [True, True]
    finally:
        sweep.kill_what_is_left()


def _keeper_of(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return ppid == parent and b"breakeven.sweep.keeper" in cmdline


def test_a_daemonizing_serve_command_is_measured_and_ended(tmp_path):
    """A serve command that double-forks the server away and exits 0, with no --stop: the
    server is still the launch's (re-parented to its keeper), measured, and ended with it."""
    sweep = Sweep(tmp_path, "--daemonize")
    try:
        sweep.process.wait(timeout=300)
        stderr = "".join(sweep.stderr)
        assert sweep.process.returncode == 0, stderr
        assert "2 of 2 launches measured" in stderr
        assert len(sweep.server_pids()) == 6  # two launches: a server and two children each
        assert sweep.left(0.5) == []
    finally:
        sweep.kill_what_is_left()


def test_a_token_in_the_serve_command_reaches_no_output_and_no_file(tmp_path):
    """--hf-token in --serve, printed by the server itself with a terminal's escapes: no
    output, manifest, log or row holds the token, and no escape reaches the terminal."""
    token = "hf_SeCrEt0123456789abcdef"
    sweep = Sweep(tmp_path, f"--print-args --hf-token {token}")
    try:
        sweep.process.wait(timeout=300)
        stdout = sweep.process.stdout.read()
        stderr = "".join(sweep.stderr)
        assert sweep.process.returncode == 0, stderr
        written = [p.read_bytes() for p in sweep.out.rglob("*") if p.is_file()]
        assert written and all(token.encode() not in b for b in written)
        assert token not in stdout + stderr
        logs = b"".join(p.read_bytes() for p in (sweep.out / "logs").iterdir())
        assert b"--hf-token ***" in logs  # the server's own line, masked
        assert b"ready soon" in logs and b"\x1b" not in logs and b"\x07" not in logs
        assert "\x1b" not in stderr and "\x07" not in stderr
        plan = subprocess.run(
            [sys.executable, "-m", "breakeven", *sweep.args, "--plan", "--out", "x"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert plan.returncode == 0 and "--hf-token '***'" in plan.stdout.replace('"', "'")
        assert token not in plan.stdout + plan.stderr
    finally:
        sweep.kill_what_is_left()
