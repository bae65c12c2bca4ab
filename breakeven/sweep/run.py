"""``breakeven sweep``'s run: each planned launch started, waited for, measured and stopped.

Each launch (:class:`breakeven.sweep.plan.SweepLaunch`) goes through four phases:

- **starting**: its command runs in a process group of its own, its output in
  ``DIR/logs/NNN-LABEL.log``; it is ready when its URL lists its models, within the ready
  timeout.  A URL that answers before the command runs is another server's: the launch fails
  rather than measure it.  A command that exits first fails the launch, unless a stop command
  is given (``--stop``: the serve command may then hand the server to someone else, as
  ``systemctl restart`` or ``docker run -d`` do, and exit 0).  Then the server's settings are
  read (its own process where local, else ``--server-env-from``): a setting other than the
  speculation flags that differs from the sweep's first measured launch (a variable lost on a
  restart) fails the launch before it is measured.
- **warming**: one wave of requests at the highest load, recorded nowhere (first requests pay
  for compilation and caches).
- **measuring**: ``bench`` at every load level; rows appended to ``DIR/runs.csv`` as requests
  complete, with the server's launch.
- **stopping**: the stop command, if any; then SIGTERM to the group, SIGKILL after a grace
  period; then the URL must stop answering, so that the next launch is not this one.

A failed launch is recorded with the tail of its log, and the sweep goes on.
``DIR/manifest.json`` holds the plan and each launch's outcome, rewritten atomically after
each one, so that ``--resume`` skips what is done.  SIGTERM or Ctrl-C stops the launch under
way and keeps every row.  Two sweeps never write one directory (``DIR/.lock``).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from breakeven.bench.config import Config, server_root
from breakeven.bench.session import Terminated, run_bench
from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.provenance import fingerprint
from breakeven.iotools.manifest import manifest_path, read_manifest, write_manifest
from breakeven.iotools.server import local_server, read_server_env
from breakeven.sweep.plan import SweepLaunch, SweepPlan, serve_argv

STOP_GRACE_S = 15.0
"""How long a stopped server may take to exit before it is killed [s]."""
GONE_TIMEOUT_S = 60.0
"""How long a stopped server's URL may go on answering [s]."""
STOP_COMMAND_TIMEOUT_S = 300.0
"""How long a stop command may run [s]."""
LOG_TAIL_CHARS = 2000
PHASES = ("starting", "warming", "measuring", "stopping", "done", "failed")
"""A launch's phases, as the progress callback is told them."""


@dataclass(frozen=True)
class Progress:
    """Where a sweep is: told to the progress callback at each phase and each request."""

    launch: SweepLaunch
    phase: str
    """One of :data:`PHASES`."""
    launches: int
    """Launches in the sweep."""
    requests_done: int = 0
    """Requests of this launch's measurement done."""
    requests: int = 0
    """Requests this launch measures."""
    eta_s: float | None = None
    """Time left for the sweep [s], from the launches done so far; None before the first."""


@dataclass(frozen=True)
class LaunchOutcome:
    """What became of one launch."""

    index: int
    label: str
    num_spec_tokens: int
    ok: bool
    error: str = ""
    """Why it failed: an exit before it was ready, a ready timeout, a failed measurement."""
    start_s: float = 0.0
    """How long it took to become ready [s]."""
    log: str = ""
    fingerprint: str = ""
    """Its server's settings less the speculation flags and the client's choices
    (:func:`breakeven.core.provenance.fingerprint`); "" where they could not be read."""
    wall_s: float = 0.0
    """How long the launch took, start to stop [s]."""
    note: str = ""
    """What could not be checked (its settings, where they could not be read)."""


@dataclass(frozen=True)
class SweepRun:
    """The outcomes of a sweep's launches, and where its files are."""

    directory: str
    outcomes: tuple[LaunchOutcome, ...]

    @property
    def runs_csv(self) -> str:
        return os.path.join(self.directory, "runs.csv")

    def report(self) -> str:
        ok = [o for o in self.outcomes if o.ok]
        lines = [f"{len(ok)} of {len(self.outcomes)} launches measured; rows in {self.runs_csv}."]
        for o in self.outcomes:
            if not o.ok:
                lines.append(f"  launch {o.index} ({o.label}) failed: {o.error}")
        for note in dict.fromkeys(o.note for o in self.outcomes if o.note):
            lines.append(f"  Note: {note}")
        return "\n".join(lines) + "\n"


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_CHARS))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-5:] if line.strip())


def answer_of(url: str) -> str:
    """What ``URL/v1/models`` answers now, in words: ``ready`` (200, or 401/403: a server that
    wants a key is up, and bench then says so), ``404`` (a server is up but the URL's path is
    not its root), or why there is no answer yet (loading, refused)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=5) as reply:
            return "ready" if reply.status == 200 else f"HTTP {reply.status}"
    except urllib.error.HTTPError as e:
        return "ready" if e.code in (401, 403) else ("404" if e.code == 404 else f"HTTP {e.code}")
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"no answer ({reason})"


def _ready(url: str) -> bool:
    return answer_of(url) == "ready"


def stop(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Stop a launch's process group: SIGTERM, then SIGKILL after ``grace_s``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.wait(timeout=10)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raised as :class:`Terminated` outside bench's own handling (while a launch
    starts), so that the launch is stopped and the rows kept."""

    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _manifest(directory: str, plan: SweepPlan, outcomes: dict[int, LaunchOutcome]) -> None:
    write_manifest(directory, plan.to_dict(), [asdict(o) for _, o in sorted(outcomes.items())])


def _done(directory: str) -> dict[int, LaunchOutcome]:
    path = manifest_path(directory)
    try:
        body = read_manifest(directory)
        return {d["index"]: LaunchOutcome(**d) for d in body.get("done", [])}
    except (OSError, ValueError, TypeError, KeyError):
        raise BreakevenError(
            "{0}: " + f"{path} is missing or not a sweep's manifest: nothing to resume", "resume"
        ) from None


# What makes two plans one sweep: its launches (their order, k, labels and serve commands) and
# what each measures.  The ready timeout is not among them: a resume may give a slow start longer.
_SAME_SWEEP = ("engine", "concurrency", "requests", "max_tokens", "speculation")


def _plan_differences(stored: dict[str, Any], plan: SweepPlan) -> list[str]:
    """What differs between the plan a sweep's manifest holds and ``plan``, each as
    ``what: there, here`` (the serve command named, never shown: it may hold a token)."""
    here = plan.to_dict()
    differences = [
        f"{key} {stored.get(key)!r} there, {here[key]!r} here"
        for key in _SAME_SWEEP
        if stored.get(key) != here[key]
    ]
    launches = stored.get("launches") if isinstance(stored.get("launches"), list) else []
    kept = [(d.get("num_spec_tokens"), d.get("label")) for d in launches if isinstance(d, dict)]
    ks = [(launch.num_spec_tokens, launch.label) for launch in plan.launches]
    if kept != ks:
        there = ",".join(str(k) for k, _ in kept)
        differences.append(
            f"launches' k {there or 'none'} there, {','.join(str(k) for k, _ in ks)} here"
        )
    elif [list(d.get("argv") or ()) for d in launches] != [list(x.argv) for x in plan.launches]:
        differences.append("the serve command (--serve, --port) differs")
    return differences


def _refuse_another_plan(directory: str, plan: SweepPlan) -> None:
    """``--resume`` continues the sweep its directory holds, never another: launch i of one
    plan is not launch i of another, and skipping by index would answer for what was not run."""
    differences = _plan_differences(read_manifest(directory)["plan"], plan)
    if differences:
        raise BreakevenError(
            "{0}: "
            + escape_braces(manifest_path(directory))
            + " holds another sweep's plan ("
            + escape_braces("; ".join(differences))
            + "): resume it with the arguments it was planned with, or sweep into a new --out",
            "resume",
        )


@dataclass
class _Context:
    """What every launch of one sweep shares."""

    plan: SweepPlan
    directory: str
    url: str
    bench: Config
    stop_command: str | None = None
    say: Callable[[Progress], None] = lambda progress: None
    reference: tuple[int, str] | None = None
    """The first measured launch's index and fingerprint: every other launch's must match."""
    walls: list[float] = field(default_factory=list)
    """The seconds each launch of this run took, for the ETA."""
    left: int = 0
    """Launches left to run, this one included."""

    def tell(self, launch: SweepLaunch, phase: str, done: int = 0, requests: int = 0) -> None:
        eta = None
        if self.walls:
            eta = sum(self.walls) / len(self.walls) * self.left
        self.say(Progress(launch, phase, len(self.plan.launches), done, requests, eta))


def _settings(url: str, bench: Config) -> tuple[str, str]:
    """The launch's fingerprint (its settings less speculation and the client's choices), and
    why it is "" where it could not be read."""
    if bench.server_env_from:
        launch = read_server_env(bench.server_env_from)
    else:
        parts = urlsplit(url)
        launch = local_server(parts.hostname or "", parts.port or 80)
    if launch is None or not launch.pairs:
        why = (
            launch.note
            if launch is not None and launch.note
            else ("the server is not on this host: name its environment with --server-env-from")
        )
        return "", why
    return fingerprint(" ".join(launch.pairs)), ""


def _difference(ours: str, theirs: str) -> str:
    """The settings two fingerprints do not share, in words."""
    mine, other = set(ours.split()), set(theirs.split())
    keys = sorted({p.split("=", 1)[0] for p in mine ^ other})
    shown = []
    for key in keys[:6]:
        here = [p for p in mine if p.split("=", 1)[0] == key] or [f"{key} unset"]
        there = [p for p in other if p.split("=", 1)[0] == key] or [f"{key} unset"]
        shown.append(f"{' '.join(sorted(here))} here, {' '.join(sorted(there))} there")
    more = f" and {len(keys) - 6} more" if len(keys) > 6 else ""
    return "; ".join(shown) + more


def _run_stop_command(command: str, port: int, log: str) -> str:
    """Run ``--stop`` (``{port}`` filled in), its output to the launch's log; why it failed,
    or ""."""
    try:
        with open(log, "ab") as out:
            done = subprocess.run(
                serve_argv(command, port),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=STOP_COMMAND_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the stop command failed: {e}"
    return f"the stop command exited with {done.returncode}" if done.returncode else ""


def _wait_gone(url: str, timeout_s: float = GONE_TIMEOUT_S) -> bool:
    """Whether the URL stopped answering within ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while _ready(url):
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


def _why_not_ready(process: subprocess.Popen, start: float, log: str, ctx: _Context) -> str:
    """Wait for the launch started at ``start`` (``time.monotonic()``) to list its models; why
    it failed (a 404, an exit, the ready timeout: its log's tail), or "" once it is ready."""
    plan, url = ctx.plan, ctx.url
    while (answer := answer_of(url)) != "ready":
        if answer == "404":
            return (
                f"404 Not Found for {url}/v1/models: a server answers, but the URL's path "
                "is not its root (give the server root, with or without one /v1)"
            )
        code = process.poll()
        if code is not None and not (code == 0 and ctx.stop_command):
            return f"exited with {code} before it was ready: {_log_tail(log)}"
        if time.monotonic() - start > plan.ready_timeout_s:
            return (
                f"not ready within {plan.ready_timeout_s:g} s (--ready-timeout; "
                f"{url}/v1/models: {answer}): {_log_tail(log)}"
            )
        time.sleep(0.5)
    return ""


def _bench_failures(launch: SweepLaunch, ctx: _Context) -> list[str]:
    """Warm the ready launch (one wave at the highest load, recorded nowhere), then measure it
    with ``bench`` at every load, rows appended to ``DIR/runs.csv``; the failed requests."""
    plan, url = ctx.plan, ctx.url
    config = replace(
        ctx.bench,
        url=url,
        label=launch.label,
        num_spec_tokens=launch.num_spec_tokens,
        concurrency=plan.concurrency,
        max_tokens=plan.max_tokens,
    )
    ctx.tell(launch, "warming")
    top = max(plan.concurrency)
    run_bench(replace(config, concurrency=(top,), requests=top), None)
    total = sum(config.requests_at(c) for c in plan.concurrency)
    done = [0]

    def counted(level: int, result: Any) -> None:
        done[0] += 1
        ctx.tell(launch, "measuring", done[0], total)

    ctx.tell(launch, "measuring", 0, total)
    _, failures, _ = run_bench(config, os.path.join(ctx.directory, "runs.csv"), counted)
    return failures


def _stop_problem(process: subprocess.Popen, log: str, ctx: _Context) -> str:
    """Stop the launch: the stop command, if any, then its process group, then wait for its
    URL to stop answering; what went wrong, or ""."""
    plan, url = ctx.plan, ctx.url
    problem = _run_stop_command(ctx.stop_command, plan.port, log) if ctx.stop_command else ""
    stop(process)
    if not _wait_gone(url):
        problem = (problem + "; " if problem else "") + (
            f"{url} still answers {GONE_TIMEOUT_S:g} s after the launch was stopped"
        )
    return problem


def run_launch(launch: SweepLaunch, ctx: _Context) -> LaunchOutcome:
    """Start one launch, wait for it, check its settings, warm it, measure it with ``bench``
    (its label and k set from the launch), stop it (see the module's text)."""
    url = ctx.url
    logs = os.path.join(ctx.directory, "logs")
    os.makedirs(logs, exist_ok=True)
    log = os.path.join(logs, f"{launch.index:03d}-{launch.label}.log")
    fail = {"index": launch.index, "label": launch.label, "num_spec_tokens": launch.num_spec_tokens}
    start = time.monotonic()

    def failed(error: str, **more: Any) -> LaunchOutcome:
        return LaunchOutcome(**fail, ok=False, error=error, log=log, **more)

    ctx.tell(launch, "starting")
    if _ready(url):
        return failed(
            f"{url} answered before the launch started: another server is there (stop it, or "
            "the sweep would measure it)"
        )
    with open(log, "ab") as out:
        try:
            process = subprocess.Popen(
                list(launch.argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as e:
            return failed(f"cannot start it: {e}")
    try:
        not_ready = _why_not_ready(process, start, log, ctx)
        if not_ready:
            return failed(not_ready)
        ready_s = time.monotonic() - start
        settings, why = _settings(url, ctx.bench)
        if settings and ctx.reference is not None and settings != ctx.reference[1]:
            first, theirs = ctx.reference
            return failed(
                f"its server's settings differ from launch {first}'s, so it is not measured: "
                f"{_difference(settings, theirs)}",
                start_s=ready_s,
                fingerprint=settings,
            )
        failures = _bench_failures(launch, ctx)
        if settings and ctx.reference is None:
            ctx.reference = (launch.index, settings)
        error = f"{len(failures)} request(s) failed: {failures[0]}" if failures else ""
        return LaunchOutcome(
            **fail,
            ok=not failures,
            error=error,
            start_s=ready_s,
            log=log,
            fingerprint=settings,
            note=f"its settings were not read, so not checked against the others: {why}"
            if why
            else "",
        )
    finally:
        ctx.tell(launch, "stopping")
        problem = _stop_problem(process, log, ctx)
        if problem:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"breakeven sweep: {problem}\n")


@contextmanager
def _locked(directory: str) -> Iterator[None]:
    """The sweep's directory to this sweep alone (``DIR/.lock``, flock): a second sweep on it
    is refused at once."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise BreakevenError(
                "{0}: " + f"{directory} is being written by another sweep", "out"
            ) from None
        yield
    finally:
        os.close(fd)


def run_sweep(
    plan: SweepPlan,
    directory: str,
    bench: Config,
    *,
    url: str | None = None,
    stop_command: str | None = None,
    resume: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> SweepRun:
    """Every launch of ``plan`` not yet done, in order; outcomes in ``DIR/manifest.json``.

    ``url`` is where each launch serves (default: ``http://127.0.0.1:PORT``, the plan's
    port).  ``stop_command`` stops a launch that the serve command handed on (see the
    module's text).  A directory that exists is refused unless ``resume`` (which then needs
    its manifest)."""
    if os.path.exists(directory) and not resume:
        raise BreakevenError(
            "{0}: " + f"{directory} exists: a sweep writes a directory of its own "
            "(continue one with --resume)",
            "out",
        )
    if bench.server_env_from:
        read_server_env(bench.server_env_from)  # refused now, before any server starts
    done = _done(directory) if resume else {}
    if resume:
        _refuse_another_plan(directory, plan)
    url = server_root(url or f"http://127.0.0.1:{plan.port}")  # refused now if malformed
    ctx = _Context(plan, directory, url, bench, stop_command, on_progress or (lambda p: None))
    measured = [o for _, o in sorted(done.items()) if o.ok and o.fingerprint]
    if measured:
        ctx.reference = (measured[0].index, measured[0].fingerprint)
    with _locked(directory), _sigterm_as_interrupt():
        todo = [
            launch
            for launch in plan.launches
            if not (launch.index in done and done[launch.index].ok)
        ]
        for n, launch in enumerate(todo):
            ctx.left = len(todo) - n
            began = time.monotonic()
            outcome = run_launch(launch, ctx)
            outcome = replace(outcome, wall_s=time.monotonic() - began)
            ctx.walls.append(outcome.wall_s)
            done[launch.index] = outcome
            _manifest(directory, plan, done)
            ctx.left -= 1
            ctx.tell(launch, "done" if outcome.ok else "failed")
    return SweepRun(directory, tuple(o for _, o in sorted(done.items())))


__all__: Sequence[str] = (
    "PHASES",
    "LaunchOutcome",
    "Progress",
    "SweepRun",
    "run_launch",
    "run_sweep",
    "stop",
)
