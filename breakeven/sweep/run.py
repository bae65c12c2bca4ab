"""``breakeven sweep``'s run: each planned launch started, waited for, measured and stopped.

Each launch (:class:`breakeven.sweep.plan.SweepLaunch`) goes through four phases:

- **starting**: its command runs under a keeper (:mod:`breakeven.sweep.keeper`), which holds
  every process the launch starts and ends them all when the launch ends, or when the sweep
  does, however (SIGKILL included); its output goes to ``DIR/logs/NNN-LABEL.log``, secrets
  masked.  It is ready when its URL lists its models, within the ready timeout.  A URL that
  answers before the command runs is another server's: the launch fails rather than measure
  it.  A command that exits non-zero first fails the launch; so does one that exits 0 leaving
  no process, unless a stop command is given (``--stop``: the serve command may then hand the
  server to someone else, as ``systemctl restart`` or ``docker run -d`` do).  Then the server's settings are
  read (its own process where local, else ``--server-env-from``): a setting other than the
  speculation flags that differs from the sweep's first measured launch (a variable lost on a
  restart) fails the launch before it is measured.
- **warming**: one wave of requests at the highest load, recorded nowhere (first requests pay
  for compilation and caches).
- **measuring**: ``bench`` at every load level; rows appended to ``DIR/runs.csv`` as requests
  complete, with the server's launch.
- **stopping**: the stop command, if any; then SIGTERM to the server's group, to every
  process of the launch left halfway through the grace period, SIGKILL after it; then the
  URL must stop answering.  A launch is recorded ok only once its processes are gone and its
  URL is silent, so that the next launch is not this one.  SIGINT and SIGTERM wait while a
  launch stops, and are acted on once it has.

A failed launch is recorded with the tail of its log, and the sweep goes on.
``DIR/manifest.json`` holds the plan, the sweep's id (its launches' processes carry it) and
each launch's outcome, written before the first launch and rewritten atomically after each
one, so that ``--resume`` skips what is done, ends what an earlier run left (processes
carrying the sweep's id), and refuses, naming it, another server on the launches' URL.
SIGTERM or Ctrl-C stops the launch under way and keeps every row.  Two sweeps never write one
directory (``DIR/.lock``).
"""

from __future__ import annotations

import fcntl
import math
import os
import signal
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any
from urllib.parse import urlsplit

from breakeven.bench.config import Config, server_root
from breakeven.bench.session import run_bench
from breakeven.core.display import printable
from breakeven.core.errors import (
    BreakevenError,
    Terminated,
    UnreadableInput,
    escape_braces,
    invalid_value,
)
from breakeven.core.processes import marked, named
from breakeven.core.provenance import fingerprint
from breakeven.iotools.atomic import write_text
from breakeven.iotools.manifest import manifest_path, read_manifest, write_manifest
from breakeven.iotools.paths import output_error
from breakeven.iotools.server import (
    is_local_host,
    listening_process,
    local_server,
    read_server_env,
)
from breakeven.sweep.keeper import Keeper, end_tree
from breakeven.sweep.plan import SweepLaunch, SweepPlan, serve_argv

STOP_GRACE_S = 15.0
"""How long a stopped server may take to exit before it is killed [s] (``--stop-grace``)."""
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
    node: str = ""
    """The cluster node that ran it (``sweep --ray``: its Ray node id); "" on one machine."""


@dataclass(frozen=True)
class SweepRun:
    """The outcomes of a sweep's launches, and where its files are."""

    directory: str
    outcomes: tuple[LaunchOutcome, ...]
    notes: tuple[str, ...] = ()
    """What the sweep did besides its launches (ended what an earlier run left)."""

    @property
    def runs_csv(self) -> str:
        return os.path.join(self.directory, "runs.csv")

    def report(self) -> str:
        ok = [o for o in self.outcomes if o.ok]
        lines = [f"{len(ok)} of {len(self.outcomes)} launches measured; rows in {self.runs_csv}."]
        for o in self.outcomes:  # printable: a hand-edited manifest's text reaches a terminal
            if not o.ok:
                lines.append(
                    f"  launch {o.index} ({printable(o.label)}) failed: {printable(o.error)}"
                )
        for note in dict.fromkeys([*self.notes, *(o.note for o in self.outcomes if o.note)]):
            lines.append(f"  Note: {printable(note)}")
        return "\n".join(lines) + "\n"


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - LOG_TAIL_CHARS))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    tail = " | ".join(line.strip() for line in text.splitlines()[-5:] if line.strip())
    return printable(tail)  # a server's escape sequences never reach a terminal


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


@contextmanager
def sigterm_as_interrupt() -> Iterator[list[int]]:
    """SIGTERM raised as :class:`Terminated` outside bench's own handling (while a launch
    starts), so that the launch is stopped and the rows kept.  Yields the signals that came,
    for a caller whose library turns every exception of a signal handler into a plain
    KeyboardInterrupt (Ray's ``ray.wait``)."""
    came: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        came.append(signum)
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield came
        return
    try:
        yield came
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _signals_held() -> Iterator[list[int]]:
    """SIGINT and SIGTERM held while a launch stops (a second Ctrl-C must not leave its
    server up): the signals that came, in order, for :func:`_act_on` once it has."""
    came: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        came.append(signum)

    try:
        previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: no signal reaches it
        yield came
        return
    try:
        yield came
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _act_on(came: list[int]) -> None:
    """Act on the first signal held (:func:`_signals_held`): :class:`Terminated` for
    SIGTERM, :class:`KeyboardInterrupt` for SIGINT."""
    if came:
        raise Terminated() if came[0] == signal.SIGTERM else KeyboardInterrupt()


def _manifest(ctx: _Context, outcomes: dict[int, LaunchOutcome]) -> None:
    """Write the manifest: the plan, the sweep's id and each launch's outcome so far."""
    done = [asdict(o) for _, o in sorted(outcomes.items())]
    try:
        write_manifest(ctx.directory, ctx.plan.to_dict(), done, ctx.sweep_id)
    except OSError as e:
        raise unwritable(ctx.directory, e) from None


def unwritable(directory: str, e: OSError) -> BreakevenError:
    """A sweep's directory that cannot be written (a full or read-only disk, no permission):
    :func:`breakeven.iotools.paths.output_error`'s line naming ``--out``, saying that the rows
    are kept."""
    where = e.filename if isinstance(e.filename, str) else directory
    error = output_error("out", where, e)
    return BreakevenError(error.template + " (every completed row is kept)", *error.names)


_OUTCOME_TYPES = {"int": (int,), "str": (str,), "bool": (bool,), "float": (int, float)}


def check_outcome(entry: Any, launches: int) -> LaunchOutcome:
    """One launch's outcome as the manifest holds it, checked: each field of its type, its
    index one of the plan's launches (a ValueError says what is wrong)."""
    if not isinstance(entry, dict):
        raise ValueError(f"a launch's outcome is {type(entry).__name__}, not an object")
    kinds = {f.name: _OUTCOME_TYPES[str(f.type)] for f in fields(LaunchOutcome)}
    for name, value in entry.items():
        if name not in kinds:
            raise ValueError(f"a launch's outcome has {name!r}, which no outcome has")
        if not isinstance(value, kinds[name]) or (
            isinstance(value, bool) and bool not in kinds[name]
        ):
            raise ValueError(f"a launch's {name} is {value!r}")
    outcome = LaunchOutcome(**entry)
    if not 1 <= outcome.index <= launches:
        raise ValueError(f"a launch's index is {outcome.index}, not one of 1 to {launches}")
    return outcome


def done_outcomes(directory: str, plan: SweepPlan) -> tuple[list[LaunchOutcome], str]:
    """What the sweep in ``directory`` has done (each launch's outcome, in the manifest's
    order) and its id; one line naming the manifest where it is missing or is not a sweep's."""
    path = manifest_path(directory)
    try:
        body = read_manifest(directory)
        entries = body.get("done", [])
        return [check_outcome(e, len(plan.launches)) for e in entries], body.get("sweep", "")
    except FileNotFoundError:
        why = f"{path} is missing"
    except UnreadableInput as e:
        why = str(e)
    except OSError as e:
        why = f"{path} cannot be read: {os.strerror(e.errno) if e.errno else e}"
    except (ValueError, TypeError, KeyError) as e:
        why = f"{path} is not a sweep's manifest: {e}"
    raise BreakevenError("{0}: " + escape_braces(f"{printable(why)}: nothing to resume"), "resume")


def refuse_used_directory(directory: str, resume: bool) -> None:
    """A sweep writes a directory of its own: one that exists is refused unless resumed."""
    if os.path.exists(directory) and not resume:
        raise BreakevenError(
            "{0}: " + f"{directory} exists: a sweep writes a directory of its own "
            "(continue one with --resume)",
            "out",
        )


# What makes two plans one sweep: its launches (their order, k, labels and serve commands) and
# what each measures.  The ready timeout is not among them: a resume may give a slow start longer.
_SAME_SWEEP = (
    "engine",
    "concurrency",
    "requests",
    "max_tokens",
    "speculation",
    "request_rate",
    "burstiness",
    "seed",
    "max_concurrency",
    "ignore_eos",
    "temperature",
    "top_p",
)


def _plan_differences(stored: dict[str, Any], plan: SweepPlan) -> list[str]:
    """What differs between the plan a sweep's manifest holds and ``plan``, each as
    ``what: there, here`` (the serve command named, never shown: it may hold a token)."""
    here = plan.to_dict()
    differences = [
        f"{key} {stored.get(key)!r} there, {here.get(key)!r} here"
        for key in _SAME_SWEEP
        if stored.get(key) != here.get(key)  # a closed-loop plan holds no open-loop key
    ]
    launches = stored.get("launches") if isinstance(stored.get("launches"), list) else []
    kept = [(d.get("num_spec_tokens"), d.get("label")) for d in launches if isinstance(d, dict)]
    ks = [(launch.num_spec_tokens, launch.label) for launch in plan.launches]
    if kept != ks:
        there = ",".join(str(k) for k, _ in kept)
        differences.append(
            f"launches' k {there or 'none'} there, {','.join(str(k) for k, _ in ks)} here"
        )
    elif [list(d.get("argv") or ()) for d in launches] != [d["argv"] for d in here["launches"]]:
        differences.append("the serve command (--serve, --port) differs")
    return differences


def refuse_another_plan(directory: str, plan: SweepPlan) -> None:
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
    sweep_id: str = ""
    """The sweep's id: its launches' processes carry ``SWEEP_ID:INDEX``."""
    grace_s: float = STOP_GRACE_S
    """How long a stopped server may take to exit before it is killed [s]."""
    reference: tuple[int, str] | None = None
    """The first measured launch's index and fingerprint: every other launch's must match."""
    walls: list[float] = field(default_factory=list)
    """The seconds each launch of this run took, for the ETA."""
    left: int = 0
    """Launches left to run, this one included."""

    done: dict[int, LaunchOutcome] = field(default_factory=dict)
    """Each launch's outcome so far, by index."""

    def record(self, outcome: LaunchOutcome) -> LaunchOutcome:
        """Keep a launch's outcome, in the manifest too."""
        self.done[outcome.index] = outcome
        _manifest(self, self.done)
        return outcome

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


def _wait_gone(url: str) -> bool:
    """Whether the URL stopped answering within :data:`GONE_TIMEOUT_S`."""
    end = time.monotonic() + GONE_TIMEOUT_S
    while _ready(url):
        if time.monotonic() > end:
            return False
        time.sleep(0.5)
    return True


def _why_not_ready(keeper: Keeper, start: float, log: str, ctx: _Context) -> str:
    """Wait for the launch started at ``start`` (``time.monotonic()``) to list its models; why
    it failed (a 404, an exit, the ready timeout: its log's tail), or "" once it is ready."""
    plan, url = ctx.plan, ctx.url
    while (answer := answer_of(url)) != "ready":
        if answer == "404":
            return (
                f"404 Not Found for {url}/v1/models: a server answers, but the URL's path "
                "is not its root (give the server root, with or without one /v1)"
            )
        code = keeper.exit_code
        handed_on = code == 0 and (ctx.stop_command or not keeper.empty)
        if code is not None and not handed_on:
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
        request_rate=plan.request_rate,
        burstiness=plan.burstiness,
        seed=plan.seed,
        max_concurrency=plan.max_concurrency,
        ignore_eos=plan.ignore_eos,
        temperature=plan.temperature,
        top_p=plan.top_p,
    )
    ctx.tell(launch, "warming")
    top = _warming_wave(plan)
    warm = replace(config, concurrency=(top,), requests=top, request_rate=(), max_concurrency=None)
    run_bench(warm, None)
    total = sum(config.requests_in(load) for load in config.loads())
    done = [0]

    def counted(level: int, result: Any) -> None:
        done[0] += 1
        ctx.tell(launch, "measuring", done[0], total)

    ctx.tell(launch, "measuring", 0, total)
    _, failures, _ = run_bench(config, os.path.join(ctx.directory, "runs.csv"), counted)
    return failures


def _warming_wave(plan: SweepPlan) -> int:
    """The requests of the wave that warms a launch, sent together: the highest concurrency,
    or at an open-loop sweep its cap, else about a second of its highest rate's arrivals."""
    if not plan.request_rate:
        return max(plan.concurrency)
    return plan.max_concurrency or max(1, min(64, math.ceil(max(plan.request_rate))))


def _stop_problem(keeper: Keeper, log: str, ctx: _Context) -> tuple[str, str]:
    """Stop the launch (its keeper ends its every process, the stop command first), then
    wait for its URL to stop answering.  Why it is not verified stopped ("" once no process
    of it is left and its URL is silent), and what else went wrong (a stop command that
    failed though the launch ended); both said in its log too."""
    gone, problem = keeper.stop()
    failure, note = ("", problem) if gone else (problem, "")
    if not _wait_gone(ctx.url):
        failure = (failure + "; " if failure else "") + (
            f"{ctx.url} still answers {GONE_TIMEOUT_S:g} s after the launch was stopped"
            f"{_listener(ctx.url)}"
        )
    for said in (failure, note):
        if said:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"breakeven sweep: {said}\n")
    return failure, note


def _listener(url: str) -> str:
    """Who listens on a local URL's port, as `` (pid 12 (vllm))``; "" where it cannot be
    told (another host, another user)."""
    parts = urlsplit(url)
    if not is_local_host(parts.hostname or ""):
        return ""
    pid = listening_process(parts.port or 80)
    return f" ({named([pid])})" if pid is not None else ""


def _measured(launch: SweepLaunch, keeper: Keeper, log: str, ctx: _Context) -> LaunchOutcome:
    """Wait for the started launch, check its settings, warm it and measure it."""
    fail = {"index": launch.index, "label": launch.label, "num_spec_tokens": launch.num_spec_tokens}
    start = time.monotonic()
    not_ready = keeper.started() or _why_not_ready(keeper, start, log, ctx)
    if not_ready:
        return LaunchOutcome(**fail, ok=False, error=not_ready, log=log)
    ready_s = time.monotonic() - start
    settings, why = _settings(ctx.url, ctx.bench)
    if settings and ctx.reference is not None and settings != ctx.reference[1]:
        first, theirs = ctx.reference
        return LaunchOutcome(
            **fail,
            ok=False,
            error=f"its server's settings differ from launch {first}'s, so it is not measured: "
            f"{_difference(settings, theirs)}",
            start_s=ready_s,
            log=log,
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
        note=f"its settings were not read, so not checked against the others: {why}" if why else "",
    )


def run_launch(launch: SweepLaunch, ctx: _Context) -> LaunchOutcome:
    """Start one launch under a keeper, wait for it, check its settings, warm it, measure it
    with ``bench`` (its label and k set from the launch), stop it (see the module's text).
    It is ok only if it was measured and then stopped: no process of it left, its URL silent.
    Its outcome is recorded in the manifest before a signal held while it stopped is acted on."""
    began = time.monotonic()
    logs = os.path.join(ctx.directory, "logs")
    log = os.path.join(logs, f"{launch.index:03d}-{launch.label}.log")
    ctx.tell(launch, "starting")
    if _ready(ctx.url):
        return ctx.record(
            LaunchOutcome(
                launch.index,
                launch.label,
                launch.num_spec_tokens,
                ok=False,
                error=f"{ctx.url} answered before the launch started: another server is there"
                f"{_listener(ctx.url)} (stop it, or the sweep would measure it)",
                log=log,
            )
        )
    try:
        os.makedirs(logs, exist_ok=True)
        _write_files(launch)
        stop = serve_argv(ctx.stop_command, ctx.plan.port) if ctx.stop_command else None
        keeper = Keeper(
            launch.argv,
            log,
            f"{ctx.sweep_id}:{launch.index}",
            grace_s=ctx.grace_s,
            stop=stop,
            stop_timeout_s=STOP_COMMAND_TIMEOUT_S,
        )
    except OSError as e:
        raise unwritable(ctx.directory, e) from None
    outcome = None
    try:
        outcome = _measured(launch, keeper, log, ctx)
    finally:
        with _signals_held() as came:  # a second Ctrl-C must not leave the server up
            ctx.tell(launch, "stopping")
            problem, note = _stop_problem(keeper, log, ctx)
            if outcome is not None:  # ended before any interruption: recorded whatever comes
                if problem:
                    why = f"{outcome.error}; and" if outcome.error else "measured, but"
                    outcome = replace(outcome, ok=False, error=f"{why} not stopped: {problem}")
                if note:
                    note = f"launch {launch.index}: {note} (it was ended all the same)"
                    outcome = replace(outcome, note="; ".join(filter(None, (outcome.note, note))))
                outcome = ctx.record(replace(outcome, wall_s=time.monotonic() - began))
    _act_on(came)
    assert outcome is not None
    return outcome


def _write_files(launch: SweepLaunch) -> None:
    """Write the files the launch reads (TensorRT-LLM's YAML), each atomically, before it
    starts: an OSError says the sweep's directory cannot be written."""
    for path, text in launch.files:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_text(path, lambda f, text=text: f.write(text), force=True)


@contextmanager
def locked(directory: str) -> Iterator[None]:
    """The sweep's directory to this sweep alone (``DIR/.lock``, flock): a second sweep on it
    is refused at once."""
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise unwritable(directory, e) from None
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


def sweep_context(
    plan: SweepPlan,
    directory: str,
    url: str,
    bench: Config,
    stop_command: str | None,
    sweep_id: str,
    grace_s: float = STOP_GRACE_S,
) -> _Context:
    """What the launches of one sweep share, for :func:`run_launch` (``sweep --ray`` runs
    each launch on its node with one of its own)."""
    return _Context(plan, directory, url, bench, stop_command, sweep_id=sweep_id, grace_s=grace_s)


def run_sweep(
    plan: SweepPlan,
    directory: str,
    bench: Config,
    *,
    url: str | None = None,
    stop_command: str | None = None,
    resume: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> SweepRun:
    """Every launch of ``plan`` not yet done, in order; outcomes in ``DIR/manifest.json``.

    ``url`` is where each launch serves (default: ``http://127.0.0.1:PORT``, the plan's
    port).  ``stop_command`` stops a launch that the serve command handed on (see the
    module's text); ``stop_grace_s`` is how long a server may take to exit after SIGTERM
    before it is killed [s].  A directory that exists is refused unless ``resume`` (which
    then needs its manifest).  A server already answering on the URL is refused before any
    launch, naming its process where it is local, unless it is this sweep's, left by an
    earlier run: that one is ended."""
    refuse_used_directory(directory, resume)
    if not (isinstance(stop_grace_s, (int, float)) and 0 <= stop_grace_s <= 3600):
        raise invalid_value("stop_grace_s", stop_grace_s, "seconds from 0 to 3600")
    if bench.server_env_from:
        read_server_env(bench.server_env_from)  # refused now, before any server starts
    kept, sweep_id = done_outcomes(directory, plan) if resume else ([], "")
    done = {o.index: o for o in kept}
    if resume:
        refuse_another_plan(directory, plan)
    flag = "url" if url else "port"
    url = server_root(url or f"http://127.0.0.1:{plan.port}")  # refused now if malformed
    ctx = _Context(
        plan,
        directory,
        url,
        bench,
        stop_command,
        on_progress or (lambda p: None),
        sweep_id=sweep_id or uuid.uuid4().hex[:16],
        grace_s=stop_grace_s,
        done=done,
    )
    measured = [o for _, o in sorted(done.items()) if o.ok and o.fingerprint]
    if measured:
        ctx.reference = (measured[0].index, measured[0].fingerprint)
    with locked(directory), sigterm_as_interrupt():
        notes = _end_leftovers(ctx) if sweep_id else []
        if _ready(url):
            raise BreakevenError(
                "{0}: "
                + escape_braces(
                    f"{url} answers before the sweep's first launch: another server is there"
                    f"{_listener(url)}; stop it, or give the launches another port"
                ),
                flag,
            )
        _manifest(ctx, done)  # the sweep's id on disk before any process carries it
        todo = [x for x in plan.launches if not (x.index in done and done[x.index].ok)]
        for n, launch in enumerate(todo):
            ctx.left = len(todo) - n
            outcome = run_launch(launch, ctx)
            ctx.walls.append(outcome.wall_s)
            ctx.left -= 1
            ctx.tell(launch, "done" if outcome.ok else "failed")
    return SweepRun(directory, tuple(o for _, o in sorted(done.items())), tuple(notes))


def _end_leftovers(ctx: _Context) -> list[str]:
    """End the processes an earlier run of this sweep left (those carrying its id: its keeper
    was killed too, by the OOM killer say); what was done, in words."""
    left = marked(ctx.sweep_id)
    if not left:
        return []
    shown = named(left)
    still = end_tree(None, ctx.sweep_id, None, ctx.grace_s)
    if still:
        raise BreakevenError(
            "{0}: "
            + escape_braces(
                f"an earlier run of this sweep left {named(still)}, which could not be ended: "
                "end them, then --resume"
            ),
            "resume",
        )
    return [f"ended what an earlier run of this sweep left running: {shown}"]


__all__: Sequence[str] = (
    "PHASES",
    "LaunchOutcome",
    "Progress",
    "SweepRun",
    "check_outcome",
    "done_outcomes",
    "locked",
    "refuse_another_plan",
    "refuse_used_directory",
    "run_launch",
    "run_sweep",
    "sigterm_as_interrupt",
    "sweep_context",
    "unwritable",
)
