"""``breakeven sweep``'s run: each planned launch started, waited for, measured and stopped.

Each launch (:class:`breakeven.sweep.SweepLaunch`) is started in a process group of its own,
its output in ``DIR/logs/NNN-LABEL.log``; it is ready when its URL lists its models, within the
ready timeout.  A launch that exits first, or is never ready, is recorded as failed with the
tail of its log, and the sweep goes on.  A ready launch is measured by ``bench`` (every load
level; rows appended to ``DIR/runs.csv`` as requests complete, with the server's launch read
from its own process), then stopped: SIGTERM to its group, SIGKILL after a grace period.
``DIR/manifest.json`` holds the plan and each launch's outcome, rewritten atomically after
each one, so that ``--resume`` skips what is done.  SIGTERM or Ctrl-C stops the launch under
way and keeps every row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

from breakeven.bench_client import Config, Terminated, run_bench
from breakeven.errors import BreakevenError
from breakeven.iotools.atomic import write_text
from breakeven.sweep import SweepLaunch, SweepPlan

STOP_GRACE_S = 15.0
"""How long a stopped server may take to exit before it is killed [s]."""
LOG_TAIL_CHARS = 2000


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


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=5) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


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
    body = {
        "plan": plan.to_dict(),
        "done": [asdict(o) for _, o in sorted(outcomes.items())],
    }
    write_text(
        os.path.join(directory, "manifest.json"),
        lambda f: json.dump(body, f, indent=2),
        force=True,
    )


def _done(directory: str) -> dict[int, LaunchOutcome]:
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
        return {d["index"]: LaunchOutcome(**d) for d in body.get("done", [])}
    except (OSError, ValueError, TypeError, KeyError):
        raise BreakevenError(
            "{0}: " + f"{path} is missing or not a sweep's manifest: nothing to resume", "resume"
        ) from None


def run_launch(
    launch: SweepLaunch,
    plan: SweepPlan,
    directory: str,
    url: str,
    bench: Config,
) -> LaunchOutcome:
    """Start one launch, wait for it, measure it with ``bench`` (its label and k set from the
    launch), stop it."""
    logs = os.path.join(directory, "logs")
    os.makedirs(logs, exist_ok=True)
    log = os.path.join(logs, f"{launch.index:03d}-{launch.label}.log")
    fail = {"index": launch.index, "label": launch.label, "num_spec_tokens": launch.num_spec_tokens}
    start = time.monotonic()
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
            return LaunchOutcome(**fail, ok=False, error=f"cannot start it: {e}", log=log)
    try:
        while not _ready(url):
            if process.poll() is not None:
                error = f"exited with {process.returncode} before it was ready: {_log_tail(log)}"
                return LaunchOutcome(**fail, ok=False, error=error, log=log)
            if time.monotonic() - start > plan.ready_timeout_s:
                error = (
                    f"not ready within {plan.ready_timeout_s:g} s (--ready-timeout): "
                    f"{_log_tail(log)}"
                )
                return LaunchOutcome(**fail, ok=False, error=error, log=log)
            time.sleep(0.5)
        ready_s = time.monotonic() - start
        config = replace(
            bench,
            url=url,
            label=launch.label,
            num_spec_tokens=launch.num_spec_tokens,
            concurrency=plan.concurrency,
            max_tokens=plan.max_tokens,
        )
        _, failures, _ = run_bench(config, os.path.join(directory, "runs.csv"))
        error = f"{len(failures)} request(s) failed: {failures[0]}" if failures else ""
        return LaunchOutcome(**fail, ok=not failures, error=error, start_s=ready_s, log=log)
    finally:
        stop(process)


def run_sweep(
    plan: SweepPlan,
    directory: str,
    bench: Config,
    *,
    url: str | None = None,
    resume: bool = False,
    on_launch: Callable[[SweepLaunch, str], None] | None = None,
) -> SweepRun:
    """Every launch of ``plan`` not yet done, in order; outcomes in ``DIR/manifest.json``.

    ``url`` is where each launch serves (default: ``http://127.0.0.1:PORT``, the plan's
    port).  A directory that exists is refused unless ``resume`` (which then needs its
    manifest)."""
    if os.path.exists(directory) and not resume:
        raise BreakevenError(
            "{0}: " + f"{directory} exists: a sweep writes a directory of its own "
            "(continue one with --resume)",
            "out",
        )
    done = _done(directory) if resume else {}
    os.makedirs(directory, exist_ok=True)
    url = url or f"http://127.0.0.1:{plan.port}"
    say = on_launch or (lambda launch, phase: None)
    with _sigterm_as_interrupt():
        for launch in plan.launches:
            if launch.index in done and done[launch.index].ok:
                continue
            say(launch, "starting")
            outcome = run_launch(launch, plan, directory, url, bench)
            done[launch.index] = outcome
            _manifest(directory, plan, done)
            say(launch, "done" if outcome.ok else "failed")
    return SweepRun(directory, tuple(o for _, o in sorted(done.items())))


__all__: Sequence[str] = ("LaunchOutcome", "SweepRun", "run_launch", "run_sweep", "stop")
