"""``breakeven sweep --ray``: the sweep's whole plan on each node of a Ray cluster.

Spreading one sweep's launches over nodes would mix node-to-node differences (PCIe against
NVLink, a throttled GPU, another driver) into the comparison of k.  So each node runs the
whole interleaved plan on its own, a block: its baseline and every k, each repeat a launch of
its own, in the plan's order.  A node's launches run one at a time, each a Ray task pinned to
the node (node affinity, not soft) that never retries: a lost node never re-runs a launch
elsewhere, and its launches are recorded as failed while the other nodes go on.

A launch runs on its node as it runs on one machine (:func:`breakeven.sweep.run.run_launch`):
started under a keeper, checked against the node's first measured launch, warmed, measured and
stopped, at ``127.0.0.1`` on a port free on the node at that moment (``{port}``; launches of
nodes that share a host never collide).  Its rows, its log and its outcome come back to the
driver, which appends the rows to ``DIR/runs.csv`` with the node's id in ``node`` (its address
and hostname in ``env``), keeps the log in ``DIR/logs/NODE/``, and rewrites
``DIR/manifest.json`` atomically as each launch ends (``ray.wait``).  ``--resume`` continues
each node where it stopped.

Ray is imported only here, and only when a sweep is given ``--ray`` (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from breakeven.bench.config import Config
from breakeven.bench.rows import RowWriter
from breakeven.core.display import printable
from breakeven.core.errors import BreakevenError, Terminated, escape_braces, invalid_value
from breakeven.iotools.manifest import read_manifest, write_manifest
from breakeven.sweep.plan import SweepLaunch, SweepPlan, plan_sweep
from breakeven.sweep.run import (
    STOP_GRACE_S,
    LaunchOutcome,
    SweepRun,
    check_outcome,
    done_outcomes,
    locked,
    refuse_another_plan,
    refuse_used_directory,
    run_launch,
    sigterm_as_interrupt,
    sweep_context,
    unwritable,
)

RAY_EXTRA = "pip install 'breakeven[ray]'"
"""How to install Ray, as the lines that need it say."""
CONNECT_TIMEOUT_S = 10.0
"""How long a cluster's address may take to accept a connection [s]: ``ray.init`` on its own
retries for minutes."""
RAY_PORT = 6379
"""The port of a Ray address given without one (``HOST``)."""


@dataclass(frozen=True)
class Node:
    """One node of the cluster that runs a block of the sweep."""

    id: str
    """Ray's node id (a hostname is not unique: one host may run several nodes)."""
    address: str
    """Its IP address, as Ray knows it."""
    hostname: str

    @property
    def short(self) -> str:
        """The id's first 12 characters: its logs' folder, and how lines name it."""
        return self.id[:12]


def _ray() -> Any:
    """The ray module; one line naming the extra where it is missing."""
    try:
        import ray  # lazy: the ray extra, and seconds to import
    except ImportError:
        raise BreakevenError(
            "{0}: needs Ray, which is not installed: " + RAY_EXTRA, "ray_address"
        ) from None
    return ray


def _endpoint(address: str) -> tuple[str, int] | None:
    """The host and port an address names (``HOST:PORT``, ``ray://HOST:PORT``, ``HOST``);
    None for ``auto`` (Ray finds the cluster this machine runs); one line for another."""
    if address == "auto":
        return None
    text = address if "://" in address else f"ray://{address}"
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme != "ray" or not parts.hostname or port == -1 or parts.path not in ("", "/"):
        raise invalid_value(
            "ray_address",
            address,
            "auto, HOST:PORT (a cluster's GCS) or ray://HOST:10001 (Ray Client)",
        )
    return parts.hostname, port or (10001 if "://" in address else RAY_PORT)


def _reachable(address: str) -> None:
    """Refuse, within :data:`CONNECT_TIMEOUT_S`, an address where nothing listens."""
    endpoint = _endpoint(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise BreakevenError(
            "{0}: "
            + escape_braces(
                f"{address!r} cannot be reached ({printable(why)} within "
                f"{CONNECT_TIMEOUT_S:g} s); expected a running Ray cluster's address (ray start "
                "--head prints it)"
            ),
            "ray_address",
        ) from None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """stdout (file descriptor 1) sent to stderr: Ray's own messages (its banner, a node's
    death) never mix with a result on stdout, --json above all."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def connect(address: str, nodes: int | None = None) -> list[Node]:
    """Join the Ray cluster at ``address`` and name the nodes that run the sweep: every alive
    node, or the first ``nodes`` of them, in the order of their addresses and ids.  One line
    where Ray is missing, the address does not answer, or fewer nodes are alive."""
    if nodes is not None and nodes < 1:
        raise invalid_value("nodes", nodes, "a number of nodes of 1 or more")
    ray = _ray()
    _reachable(address)
    import logging  # lazy: Ray's own logging quietened

    with _quiet():
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                    configure_logging=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise BreakevenError(
                    "{0}: " + escape_braces(f"{address!r}: {printable(str(e))[:300]}"),
                    "ray_address",
                ) from None
        alive = [n for n in ray.nodes() if n.get("Alive")]
    found = sorted(
        (
            Node(n["NodeID"], n.get("NodeManagerAddress", ""), n.get("NodeManagerHostname", ""))
            for n in alive
        ),
        key=lambda n: (n.address, n.id),
    )
    if nodes is not None and nodes > len(found):
        raise invalid_value(
            "nodes", nodes, f"at most the {len(found)} alive node(s) of the cluster at {address}"
        )
    return found[:nodes] if nodes is not None else found


@dataclass(frozen=True)
class ClusterPlan:
    """A sweep's plan on a cluster: the whole plan on each node (``--plan`` with ``--ray``)."""

    plan: SweepPlan
    nodes: tuple[Node, ...]

    def to_dict(self) -> dict[str, Any]:
        return self.plan.to_dict() | {"nodes": [asdict(n) for n in self.nodes]}

    def report(self, tok_s: float = 20.0) -> str:
        """Each node and the launches it runs (the same on each: a block per node), and the
        time: the nodes run at once, so the sweep takes one node's time."""
        n = len(self.nodes)
        head = [
            f"On {n} node(s) of the Ray cluster, each runs the whole plan below on its own (a "
            "block per node: launches are never spread over nodes, so that node-to-node "
            "differences never enter a comparison of k), the nodes at once, each launch on a "
            "port free on its node ({port}):"
        ]
        head += [f"  node {x.short}  {x.address}  {x.hostname}" for x in self.nodes]
        head.append(f"{n * len(self.plan.launches)} launches in all; on each node:")
        from breakeven.render.text import wrap_lines  # lazy: start-up

        return wrap_lines("\n".join(head) + "\n") + self.plan.report(tok_s)


@contextlib.contextmanager
def on_cluster(address: str, nodes: int | None = None) -> Iterator[list[Node]]:
    """Joined to the Ray cluster at ``address`` (:func:`connect`) while inside, its nodes
    given; stdout goes to stderr all that while, since Ray's driver prints what it hears (a
    node's death, a worker's error) from threads of its own, and the driver leaves the cluster
    (``ray.shutdown``) before stdout is back: a result printed after it is alone there."""
    with _quiet():
        try:
            yield connect(address, nodes)
        finally:
            ray = sys.modules.get("ray")
            if ray is not None and ray.is_initialized():
                ray.shutdown()


def _free_port() -> int:
    """A port free on this host now, for one launch."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StopFlag:
    """The sweep's stop, told to its launches (a Ray actor): a launch asked to stop ends as
    Ctrl-C ends it, and sends back what it measured.  Ray's own ``ray.cancel`` of a task that
    then returns trips a check in Ray 2.60's task manager ("Tried to complete task that was
    not pending") and kills the driver, so the launches are told, not cancelled."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def is_stopped(self) -> bool:
        return self.stopped


def _watch(flag: Any, done: threading.Event) -> None:
    """Interrupt this task's launch (as Ctrl-C would) once the sweep's flag says stop."""
    import _thread  # lazy: only on a node

    ray = _ray()
    while not done.wait(0.5):
        try:
            stopped = ray.get(flag.is_stopped.remote(), timeout=10)
        except ray.exceptions.RayError:  # the driver is gone: the sweep ended
            stopped = True
        if stopped:
            _thread.interrupt_main()
            return


def launch_on_node(job: dict[str, Any]) -> dict[str, Any]:
    """Run one launch on the node this task was placed on (a Ray task's body): the plan made
    again with a port free here, the launch run in a directory of its own (its rows, log and
    outcome), then that directory read back for the driver and removed.  A launch the sweep
    stops (``job['stop']``) is ended as Ctrl-C ends it, its rows so far sent back."""
    port = _free_port()
    work = tempfile.mkdtemp(prefix="breakeven-sweep-")
    done = threading.Event()
    threading.Thread(target=_watch, args=(job["stop"], done), daemon=True).start()
    try:
        plan = plan_sweep(**job["plan"], port=port, config_dir=work)
        launch = plan.launches[job["index"] - 1]
        ctx = sweep_context(
            plan,
            work,
            f"http://127.0.0.1:{port}",
            job["bench"],
            job["stop_command"],
            job["sweep_id"],
            job["grace_s"],
        )
        if job["reference"]:
            ctx.reference = tuple(job["reference"])
        try:
            outcome = run_launch(launch, ctx)
        except KeyboardInterrupt:  # the sweep stopped: run_launch ended the server
            outcome = LaunchOutcome(
                launch.index,
                launch.label,
                launch.num_spec_tokens,
                ok=False,
                error="interrupted: the sweep was stopped while this launch ran (its server "
                "was stopped; --resume runs it again)",
                log=os.path.join(work, "logs", f"{launch.index:03d}-{launch.label}.log"),
            )
        done.set()
        return {
            "outcome": asdict(outcome),
            "rows": _read(os.path.join(work, "runs.csv")),
            "log": _read(outcome.log),
            "hostname": socket.gethostname(),
        }
    finally:
        done.set()
        shutil.rmtree(work, ignore_errors=True)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


@dataclass
class _Block:
    """One node's block: the launches it has left, and its first measured launch's
    fingerprint (the node's own reference: another host has other settings)."""

    node: Node
    todo: list[SweepLaunch]
    reference: tuple[int, str] | None = None
    lost: str = ""


def _done_by_node(
    directory: str, plan: SweepPlan, resume: bool
) -> tuple[dict[tuple[str, int], LaunchOutcome], str, list[dict[str, Any]]]:
    """What an earlier run of this sweep did, by (node, index); its id and its nodes."""
    if not resume:
        return {}, "", []
    kept, sweep_id = done_outcomes(directory, plan)  # one line where it is not a sweep's
    refuse_another_plan(directory, plan)
    nodes = read_manifest(directory)["plan"].get("nodes")
    nodes = [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    return {(o.node, o.index): o for o in kept}, sweep_id, nodes


class ClusterSweep:
    """The driver of a sweep over a cluster's nodes (:func:`run_on_nodes`)."""

    def __init__(
        self,
        plan: SweepPlan,
        plan_args: dict[str, Any],
        directory: str,
        bench: Config,
        nodes: Sequence[Node],
        stop_command: str | None,
        grace_s: float,
        on_progress: Callable[[str], None],
    ) -> None:
        self.plan, self.plan_args, self.directory = plan, plan_args, directory
        self.bench, self.nodes, self.stop_command = bench, list(nodes), stop_command
        self.grace_s, self.say = grace_s, on_progress
        self.done: dict[tuple[str, int], LaunchOutcome] = {}
        self.sweep_id = ""
        self.stop_flag: Any = None
        """The sweep's :class:`StopFlag` actor, which its launches watch."""

    def manifest(self) -> None:
        plan = self.plan.to_dict() | {"nodes": [asdict(n) for n in self.nodes]}
        done = [asdict(o) for _, o in sorted(self.done.items())]
        try:
            write_manifest(self.directory, plan, done, self.sweep_id)
        except OSError as e:
            raise unwritable(self.directory, e) from None

    def job(self, block: _Block, launch: SweepLaunch) -> dict[str, Any]:
        return {
            "plan": self.plan_args,
            "index": launch.index,
            "bench": self.bench,
            "stop_command": self.stop_command,
            "sweep_id": f"{self.sweep_id}-{block.node.short}",
            "grace_s": self.grace_s,
            "reference": block.reference,
            "stop": self.stop_flag,
        }

    def keep(self, block: _Block, launch: SweepLaunch, result: dict[str, Any]) -> LaunchOutcome:
        """A launch's result, kept: its rows in runs.csv (the node's id in ``node``, its
        address and hostname in ``env``), its log in DIR/logs/NODE/, its outcome in the
        manifest."""
        node = block.node
        logs = os.path.join(self.directory, "logs", node.short)
        log = os.path.join(logs, f"{launch.index:03d}-{launch.label}.log")
        try:
            os.makedirs(logs, exist_ok=True)
            with open(log, "w", encoding="utf-8") as f:
                f.write(result["log"])
            self._append_rows(node, result["rows"])
        except OSError as e:
            raise unwritable(self.directory, e) from None
        outcome = replace(check_outcome(result["outcome"], len(self.plan.launches)), log=log)
        outcome = replace(outcome, node=node.id)
        if outcome.ok and outcome.fingerprint and block.reference is None:
            block.reference = (launch.index, outcome.fingerprint)
        return self.record(outcome)

    def _append_rows(self, node: Node, text: str) -> None:
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows:
            return
        where = f"node={node.id} node_address={node.address} node_hostname={node.hostname}"
        writer = RowWriter(os.path.join(self.directory, "runs.csv"))
        try:
            for row in rows:
                env = row.get("env") or ""
                writer({**row, "node": node.id, "env": f"{env} {where}".strip()})
        finally:
            writer.close()

    def record(self, outcome: LaunchOutcome) -> LaunchOutcome:
        self.done[(outcome.node, outcome.index)] = outcome
        self.manifest()
        return outcome

    def lose(self, block: _Block, launch: SweepLaunch, why: str) -> None:
        """A node lost: this launch and every one it had left recorded as failed."""
        block.lost = why
        for each in [launch, *block.todo]:
            self.record(
                LaunchOutcome(
                    each.index,
                    each.label,
                    each.num_spec_tokens,
                    ok=False,
                    error=f"node {block.node.short} ({block.node.address}) was lost: {why}",
                    node=block.node.id,
                )
            )
        block.todo = []


def _failure(e: BaseException) -> str:
    """A task's failure in one line (Ray's own text is pages long)."""
    first = printable(str(e).strip().splitlines()[0] if str(e).strip() else "")
    return f"{type(e).__name__}: {first[:300]}".rstrip(": ")


def _blocks(driver: ClusterSweep, resumed: list[dict[str, Any]]) -> list[_Block]:
    """Each node's block: the launches it has not yet done."""
    if resumed:
        alive = {n.id: n for n in driver.nodes}
        driver.nodes = [
            alive.get(
                n.get("id", ""),
                Node(str(n.get("id", "")), str(n.get("address", "")), str(n.get("hostname", ""))),
            )
            for n in resumed
        ]
        gone = [n for n in driver.nodes if n.id not in alive]
    else:
        gone = []
    blocks = []
    for node in driver.nodes:
        done = {i for (n, i), o in driver.done.items() if n == node.id and o.ok}
        measured = sorted(
            (o for (n, _), o in driver.done.items() if n == node.id and o.ok and o.fingerprint),
            key=lambda o: o.index,
        )
        block = _Block(node, [x for x in driver.plan.launches if x.index not in done])
        if measured:
            block.reference = (measured[0].index, measured[0].fingerprint)
        blocks.append(block)
        if node in gone and block.todo:
            driver.lose(block, block.todo.pop(0), "it is not among the cluster's alive nodes")
    return blocks


def run_on_nodes(
    plan: SweepPlan,
    plan_args: dict[str, Any],
    directory: str,
    bench: Config,
    nodes: Sequence[Node],
    *,
    stop_command: str | None = None,
    resume: bool = False,
    stop_grace_s: float = STOP_GRACE_S,
    on_progress: Callable[[str], None] | None = None,
) -> SweepRun:
    """Run ``plan`` on each of ``nodes`` (from :func:`connect`), a block per node; every
    launch's rows, log and outcome kept in ``directory`` as it ends.  ``plan_args`` are
    :func:`breakeven.sweep.plan.plan_sweep`'s arguments (less ``port`` and ``config_dir``):
    each launch is planned again on its node with a port free there."""
    refuse_used_directory(directory, resume)
    ray = _ray()
    driver = ClusterSweep(
        plan,
        plan_args,
        directory,
        bench,
        nodes,
        stop_command,
        stop_grace_s,
        on_progress or (lambda line: None),
    )
    driver.done, sweep_id, resumed = _done_by_node(directory, plan, resume)
    driver.sweep_id = sweep_id or os.urandom(8).hex()
    with locked(directory), sigterm_as_interrupt() as came:
        driver.stop_flag = ray.remote(StopFlag).options(num_cpus=0).remote()
        driver.manifest()
        blocks = _blocks(driver, resumed)
        try:
            _drive(ray, driver, blocks)
        except KeyboardInterrupt as e:
            if came and not isinstance(e, Terminated):  # Ray's wait made SIGTERM a Ctrl-C
                raise Terminated() from e
            raise
    notes = tuple(f"node {b.node.short} ({b.node.address}): {b.lost}" for b in blocks if b.lost)
    return SweepRun(directory, tuple(o for _, o in sorted(driver.done.items())), notes)


def _submit(ray: Any, driver: ClusterSweep, block: _Block) -> tuple[Any, SweepLaunch] | None:
    if not block.todo:
        return None
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # lazy: Ray

    launch = block.todo.pop(0)
    task = ray.remote(launch_on_node).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(block.node.id, soft=False),
        max_retries=0,
        retry_exceptions=False,
        num_cpus=0,
    )
    driver.say(
        f"node {block.node.short}: launch {launch.index}/{len(driver.plan.launches)} "
        f"({launch.label}, repeat {launch.repeat}): starting"
    )
    return task.remote(driver.job(block, launch)), launch


def _drive(ray: Any, driver: ClusterSweep, blocks: list[_Block]) -> None:
    """Each node's launches in turn, the nodes at once; results kept as they arrive.  Ctrl-C
    or SIGTERM cancels the launches under way (each stops its server) and waits for them,
    keeping the rows each measured and its outcome (failed: interrupted)."""
    pending: dict[Any, tuple[_Block, SweepLaunch]] = {}
    for block in blocks:
        if (sent := _submit(ray, driver, block)) is not None:
            pending[sent[0]] = (block, sent[1])
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            block, launch = pending.pop(ready[0])
            try:
                outcome = driver.keep(block, launch, ray.get(ready[0]))
                driver.say(
                    f"node {block.node.short}: launch {launch.index} "
                    + ("done" if outcome.ok else f"failed: {outcome.error[:200]}")
                )
            except (ray.exceptions.RayError, ray.exceptions.RayTaskError) as e:
                driver.lose(block, launch, _failure(e))
                driver.say(f"node {block.node.short}: lost ({_failure(e)})")
            if (sent := _submit(ray, driver, block)) is not None:
                pending[sent[0]] = (block, sent[1])
    except KeyboardInterrupt:
        driver.stop_flag.stop.remote()  # each launch stops its server, and sends its rows
        end = time.monotonic() + driver.grace_s + 30
        for ref, (block, launch) in pending.items():  # each stops its server, rows kept
            try:
                result = ray.get(ref, timeout=max(0.1, end - time.monotonic()))
            except ray.exceptions.RayError as e:  # lost, or not stopped in time: killed
                ray.cancel(ref, force=True)  # its keeper ends its server as the task dies
                driver.say(f"node {block.node.short}: launch {launch.index}: {_failure(e)}")
                continue
            driver.keep(block, launch, result)
        raise


__all__: Sequence[str] = (
    "CONNECT_TIMEOUT_S",
    "RAY_EXTRA",
    "ClusterPlan",
    "ClusterSweep",
    "Node",
    "StopFlag",
    "connect",
    "launch_on_node",
    "on_cluster",
    "run_on_nodes",
)
