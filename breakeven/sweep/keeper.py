"""A launch's keeper: the small process between ``breakeven sweep`` and the server a launch
starts, so that no process of the launch outlives it, whatever happens to the sweep.

The sweep starts ``python -m breakeven.sweep.keeper`` in a session of its own and writes it
the launch (a JSON line on its standard input, so that a token in the serve command is not in
the keeper's own command line).  The keeper:

- is a **child subreaper** (Linux's ``PR_SET_CHILD_SUBREAPER``): a descendant whose parent
  exits (a double fork, ``setsid``, a wrapper script that backgrounds the server and exits) is
  re-parented to the keeper, not to init, so the launch's whole tree stays under it;
- starts the serve command in a process group of its own, its environment marked with
  :data:`~breakeven.core.processes.MARK_VARIABLE` (``SWEEP_ID:INDEX``: every descendant
  inherits it, so that ``--resume`` finds what an earlier run left, should the keeper itself
  have been killed);
- copies the server's output to the launch's log a line at a time, with every secret of the
  serve command and of the environment's secret variables (``HF_TOKEN``, ...) masked, each line
  made printable;
- stops the launch on the line ``stop``, on the end of its input (the sweep has exited, by any
  means: the kernel closes a killed process's pipes, so SIGKILL and the OOM killer included),
  and on SIGTERM or SIGHUP: the stop command first (``--stop``: bounded by its timeout, its own
  group killed then), SIGTERM to the server's group, SIGTERM to every process left in the
  tree halfway through the grace period, SIGKILL to what is left after it, until the tree is
  empty; then it says which processes it could not end (none, or those it may not signal) and
  exits.

Why a keeper, and not ``PR_SET_PDEATHSIG`` or a cgroup: the parent-death signal reaches only
the process that asks for it and is cleared in its children (vLLM's engine core and workers,
a backgrounded server), and it follows the thread that forked, not the process; a cgroup
holds a whole tree, but making one needs a delegated hierarchy (systemd's user slice, or
root) that CI runners, containers and ssh logins often lack.  A subreaper needs neither.
Without ``/proc`` and the subreaper (macOS), the keeper stops the server's process group.  The
server's own process does get a parent-death SIGTERM, as a second line should the keeper be
killed (a Ray worker's exit kills its children): it reaches the server, not what it forked.

:class:`Keeper` is the sweep's side: it starts a keeper, reads what it says and stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from breakeven.core.credentials import MIN_REDACTED, Redactor
from breakeven.core.display import printable
from breakeven.core.processes import (
    MARK_VARIABLE,
    descendants,
    has_process_table,
    marked,
    named,
    process_table,
)
from breakeven.core.provenance import secret_name, secret_values

PR_SET_CHILD_SUBREAPER = 36
"""``prctl``'s option making a process the reaper of its orphaned descendants (Linux 3.4+)."""
PR_SET_PDEATHSIG = 1
"""``prctl``'s option giving a process a signal when its parent dies."""
KILL_TIMEOUT_S = 10.0
"""How long SIGKILL may take to empty a tree [s] before what is left is reported."""
LOG_LINE_BYTES = 1 << 16
"""A server's output line longer than this is written in pieces (each redacted)."""
TREE_LOOK_S = 1.0
"""How often the keeper looks for what is left of a server whose own process has exited [s]."""
_POLL_S = 0.1


def _subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # lazy: only the keeper process needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _term_with_parent() -> None:
    """In the server's process, before it runs: SIGTERM to it should the keeper die first
    (``PR_SET_PDEATHSIG``).  A second line behind the keeper, for the one case it cannot
    cover: the keeper itself killed, as a Ray worker's exit kills its children (a lost node
    of ``sweep --ray``), where no ``--resume`` on that node follows."""
    import ctypes  # lazy: only the keeper process needs it

    with contextlib.suppress(OSError, AttributeError):  # not Linux: the keeper alone
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def launch_tree(root: int | None, mark: str) -> list[int]:
    """The processes of a launch that have not ended: those under ``root`` (the keeper; None:
    none) and those carrying the launch's ``mark`` anywhere (never ``root`` itself)."""
    if not has_process_table():
        return []
    tree = set(marked(mark))
    if root is not None:
        tree |= set(descendants(root, process_table()))
        tree.discard(root)
    return sorted(tree)


def _signal(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _reap() -> dict[int, int]:
    """Collect every child that has ended (the server, and orphans re-parented here): their
    exit codes (a signal as 128 + its number, as a shell says it)."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = os.waitstatus_to_exitcode(status)
        if ended[pid] < 0:
            ended[pid] = 128 - ended[pid]


def end_tree(
    root: int | None,
    mark: str,
    group: int | None,
    grace_s: float,
    tick: Callable[[], object] | None = None,
) -> list[int]:
    """End a launch's processes (:func:`launch_tree`): SIGTERM to the server's process
    ``group``, to every process left halfway through ``grace_s``, SIGKILL to what is left
    after it; the processes still there :data:`KILL_TIMEOUT_S` later (none, unless they may
    not be signalled).  ``tick`` runs while it waits (the keeper reaps its children and
    copies the server's output, so that a server writing as it stops never blocks)."""
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
    start = time.monotonic()
    termed = False
    while (tree := launch_tree(root, mark)) or (group is not None and _group_alive(group)):
        if tick is not None:
            tick()
        waited = time.monotonic() - start
        if waited > grace_s + KILL_TIMEOUT_S:
            break
        if waited > grace_s:
            _signal(tree, signal.SIGKILL)
            if group is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
        elif waited > grace_s / 2 and not termed:
            _signal(tree, signal.SIGTERM)
            termed = True
        time.sleep(_POLL_S)
    if tick is not None:
        tick()
    return launch_tree(root, mark)


def _group_alive(group: int) -> bool:
    """Whether a process group (the server's) still has a process that has not ended, where
    there is no process table to read."""
    if has_process_table():
        return False  # the tree covers it
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class _Log:
    """The server's output, copied to the launch's log a line at a time, secrets masked and
    each line made printable (:func:`breakeven.core.display.printable`: a window title or a
    clipboard write a server prints is dropped, a tab or a carriage return is a space)."""

    def __init__(self, log: IO[bytes], redact: Redactor) -> None:
        self.log, self.redact, self.held = log, redact, b""

    def _write(self, data: bytes) -> None:
        text = self.redact(data.decode("utf-8", "replace"))
        lines = text.split("\n")  # each made printable: no escape reaches a terminal that shows it
        self.log.write("\n".join(printable(line) for line in lines).encode("utf-8"))
        self.log.flush()

    def add(self, data: bytes) -> None:
        self.held += data
        cut = self.held.rfind(b"\n") + 1
        if not cut and len(self.held) > LOG_LINE_BYTES:
            cut = len(self.held)
        if cut:
            self._write(self.held[:cut])
            self.held = self.held[cut:]

    def close(self) -> None:
        if self.held:
            self._write(self.held)
            self.held = b""


def _redactor(argv: Sequence[str]) -> Redactor:
    """The secrets a server might print: its command line's, and those of the environment's
    variables named like a secret's."""
    env = [v for k, v in os.environ.items() if secret_name(k) and len(v) >= MIN_REDACTED]
    return Redactor(*secret_values(argv), *env)


def _say(event: dict[str, Any]) -> None:
    """Tell the sweep (a JSON line on standard output); a sweep that is gone hears nothing."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def _run_stop_command(
    argv: Sequence[str], log: IO[bytes], timeout_s: float, drain: Callable[[], None]
) -> str:
    """Run ``--stop``, its output to the log, while the server's output is copied
    (``drain``); why it failed, or "".  At its timeout its whole process group is killed."""
    try:
        command = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return f"the stop command failed: {e}"
    end = time.monotonic() + timeout_s
    while (code := command.poll()) is None:
        drain()
        if time.monotonic() > end:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(command.pid, signal.SIGKILL)
            command.wait()
            return f"the stop command did not end within {timeout_s:g} s, and was killed"
        time.sleep(_POLL_S)
    return f"the stop command exited with {code}" if code else ""


class _Serving:
    """The keeper's state: its server, whether it has been asked to stop."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.stopping = False
        self.server: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None
        self.empty_said = False
        self.next_look = 0.0

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def start(self, log: IO[bytes]) -> int | None:
        """Start the serve command, its output on a pipe read here; its output's descriptor."""
        env = {**os.environ, MARK_VARIABLE: self.spec["mark"]}
        read, write = os.pipe()
        try:
            self.server = subprocess.Popen(
                list(self.spec["argv"]),
                stdout=write,
                stderr=write,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                preexec_fn=_term_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as e:
            os.close(read)
            os.close(write)
            log.write(f"breakeven sweep: cannot start it: {e}\n".encode())
            _say({"error": f"cannot start it: {e}"})
            return None
        os.close(write)
        _say({"started": self.server.pid})
        return read

    def notice(self, ended: dict[int, int]) -> None:
        """Tell the sweep when the server's own process ends, and when nothing is left."""
        assert self.server is not None
        if self.server.pid in ended and self.exit_code is None:
            self.exit_code = ended[self.server.pid]
            self.server.returncode = self.exit_code  # reaped here, not by Popen
            _say({"exited": self.exit_code})
        now = time.monotonic()
        if self.exit_code is not None and not self.empty_said and now >= self.next_look:
            self.next_look = now + TREE_LOOK_S  # a look reads every process's files
            if not launch_tree(os.getpid(), self.spec["mark"]):
                self.empty_said = True
                _say({"empty": True})


def _serve(state: _Serving, out: int, log: _Log) -> None:
    """Until told to stop (a line, the end of input, a signal): copy the server's output,
    reap what ends, say what the sweep must know."""
    selector = selectors.DefaultSelector()
    stdin = sys.stdin.fileno()
    selector.register(stdin, selectors.EVENT_READ, "stdin")
    selector.register(out, selectors.EVENT_READ, "out")
    while not state.stopping:
        for key, _ in selector.select(_POLL_S):
            data = os.read(key.fd, 1 << 16)
            if key.data == "out":
                if data:
                    log.add(data)
                else:
                    selector.unregister(out)
            elif not data or b"stop" in data:
                state.stopping = True
        state.notice(_reap())
    # What the server writes while it stops still reaches the log.
    with contextlib.suppress(KeyError, ValueError):
        selector.unregister(stdin)


def _drain(out: int, log: _Log) -> None:
    """What the server has written and not yet been copied (its descriptor non-blocking)."""
    with contextlib.suppress(OSError):
        while data := os.read(out, 1 << 16):
            log.add(data)


def _read_spec(fd: int) -> tuple[dict[str, Any], bytes]:
    """The launch, the first line of standard input, read from its descriptor (a buffered
    reader could take the ``stop`` after it too); and what came after it."""
    data = b""
    while b"\n" not in data:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    return json.loads(line or b"{}"), rest


def main() -> None:
    """The keeper process (see the module's text)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep decides, not a terminal's Ctrl-C
    spec, rest = _read_spec(sys.stdin.fileno())
    state = _Serving(spec)
    state.stopping = b"stop" in rest
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, state.on_signal)
    reaper = _subreaper()
    with open(spec["log"], "ab") as raw:
        log = _Log(raw, _redactor(spec["argv"]))
        out = state.start(raw)
        if out is None:
            return
        assert state.server is not None
        _serve(state, out, log)
        os.set_blocking(out, False)

        def tick() -> None:
            _drain(out, log)
            state.notice(_reap())

        problem = ""
        if spec.get("stop"):
            stop_s = float(spec["stop_timeout_s"])
            problem = _run_stop_command(spec["stop"], raw, stop_s, lambda: _drain(out, log))
        left = end_tree(os.getpid(), spec["mark"], state.server.pid, float(spec["grace_s"]), tick)
        tick()
        log.close()
        if left:
            problem = (problem + "; " if problem else "") + (
                f"{named(left)} could not be ended (another user's?)"
            )
        _say({"gone": not left, "problem": problem, "subreaper": reaper})


class Keeper:
    """The sweep's side of one launch's keeper: it starts it, hears what it says (the
    server's process id, its exit code, an empty tree) and stops it.

    Parameters
    ----------
    argv : sequence of str
        The serve command.
    log : str
        The launch's log, appended to.
    mark : str
        The launch's mark (``SWEEP_ID:INDEX``).
    grace_s : float
        How long the server may take to exit after SIGTERM [s].
    stop : sequence of str, optional
        The stop command, run first.
    stop_timeout_s : float
        How long the stop command may run [s].
    """

    def __init__(
        self,
        argv: Sequence[str],
        log: str,
        mark: str,
        *,
        grace_s: float,
        stop: Sequence[str] | None = None,
        stop_timeout_s: float = 300.0,
    ) -> None:
        self.mark, self.grace_s, self.stop_timeout_s = mark, grace_s, stop_timeout_s
        self.has_stop = bool(stop)
        self._heard: dict[str, Any] = {}
        self._changed = threading.Condition()
        spec = {
            "argv": list(argv),
            "log": log,
            "mark": mark,
            "grace_s": grace_s,
            "stop": list(stop) if stop else None,
            "stop_timeout_s": stop_timeout_s,
        }
        with open(log, "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "breakeven.sweep.keeper"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(spec) + "\n").encode())
        self.process.stdin.flush()
        threading.Thread(target=self._hear, daemon=True).start()

    def _hear(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                with self._changed:
                    self._heard.update(event if isinstance(event, dict) else {})
                    self._changed.notify_all()
        with self._changed:
            self._heard["ended"] = True
            self._changed.notify_all()

    def _wait_for(self, *keys: str, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: any(k in self._heard for k in (*keys, "ended")), timeout_s
            ) and any(k in self._heard for k in keys)

    def started(self, timeout_s: float = 60.0) -> str:
        """Wait for the server to start; why it could not, or ""."""
        if self._wait_for("started", "error", timeout_s=timeout_s) and "started" in self._heard:
            return ""
        return str(self._heard.get("error") or "its keeper did not start it")

    @property
    def pid(self) -> int | None:
        """The server's process id."""
        return self._heard.get("started")

    @property
    def exit_code(self) -> int | None:
        """The server's own process's exit code, once it has exited."""
        return self._heard.get("exited")

    @property
    def empty(self) -> bool:
        """Whether the server's process and every one under it have ended."""
        return bool(self._heard.get("empty"))

    def stop(self) -> tuple[bool, str]:
        """Stop the launch and wait until none of its processes is left: whether none is,
        and what went wrong ("" if nothing did: the stop command failing, a process that could
        not be ended)."""
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.write(b"stop\n")
            self.process.stdin.flush()
        bound = self.stop_timeout_s * self.has_stop + self.grace_s + KILL_TIMEOUT_S + 30
        heard = self._wait_for("gone", timeout_s=bound)
        gone, problem = bool(self._heard.get("gone")), str(self._heard.get("problem") or "")
        if not heard:  # the keeper itself failed: end what it kept from here
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            left = end_tree(None, self.mark, self.pid, self.grace_s)  # its tree is init's now
            gone = not left
            problem = "its keeper did not answer" + (
                f"; {named(left)} could not be ended" if left else ""
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        return gone, problem


if __name__ == "__main__":
    main()
