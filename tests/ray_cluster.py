"""A local Ray cluster of two nodes on this one machine, for ``breakeven sweep --ray``
(issue 45): each node a raylet of its own, bound to a loopback address of its own
(127.0.0.2, the head, and 127.0.0.3), so that no test traffic leaves the loopback range (Ray
takes the host's outward address unless told).  Each node's environment is its own: a
node's launches inherit it (``FAKE_SERVER_SPEC_SPEEDUP`` makes one node's speculation
faster).  Every process of the cluster is ended afterwards, and a test checks that none is
left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from local_process import free_port

RAY = Path(sys.executable).with_name("ray")
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
"""Every process of the test clusters, nodes and drivers alike: no usage report, and no token
authentication (Ray 2.60 turns it on wherever a local ``ray.init()`` once left
``~/.ray/auth_token``, and the nodes and drivers must agree)."""
START_TIMEOUT_S = 120.0
HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"


def have_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return RAY.exists()


def driver_env() -> dict[str, str]:
    """The environment of a driver (a sweep) of the test clusters."""
    return {**os.environ, **RAY_ENV}


@dataclass
class Cluster:
    address: str
    """The head's GCS address, as ``sweep --ray`` takes it."""
    temp_dir: str
    processes: list[subprocess.Popen]

    def pids(self) -> set[int]:
        """The processes of this cluster still running: every process whose command line
        names its temporary directory (raylets, GCS, workers, agents)."""
        found = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if self.temp_dir.encode() in cmdline:
                found.add(int(entry))
        return found


def _node(args: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--disable-usage-stats", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **RAY_ENV, **env},
            start_new_session=True,
        )


def _alive_nodes(address: str) -> int:
    script = (
        f"import ray, logging; ray.init(address={address!r}, logging_level=logging.ERROR, "
        "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=driver_env(),
    )
    return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else 0


def _end(cluster: Cluster) -> None:
    for process in cluster.processes[::-1]:  # the worker node first, the head last
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in cluster.processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while (left := cluster.pids()) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:  # a worker Ray did not end: killed, and the test that checks says so
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def ray_cluster(
    tmp: Path,
    worker_env: Mapping[str, str] | None = None,
    cpus: int = 2,
    env: Mapping[str, str] | None = None,
) -> Iterator[Cluster]:
    """Two nodes (the head and one worker node), each with ``cpus`` CPUs and a small object
    store; ``worker_env`` is the worker node's own environment, ``env`` both nodes' (Ray's
    own settings: ``RAY_health_check_period_ms``, say)."""
    port = free_port()
    # Ray's socket paths are long: a short temporary directory of the cluster's own.
    temp_dir = tempfile.mkdtemp(prefix="bkray-", dir="/tmp")
    common = [f"--num-cpus={cpus}", "--object-store-memory=100000000"]
    head = _node(
        [
            "--head",
            f"--node-ip-address={HEAD_IP}",
            f"--port={port}",
            "--include-dashboard=false",
            f"--temp-dir={temp_dir}",
            *common,
        ],
        dict(env or {}),
        tmp / "ray-head.log",
    )
    cluster = Cluster(f"{HEAD_IP}:{port}", temp_dir, [head])
    try:
        worker = _node(
            [f"--address={cluster.address}", f"--node-ip-address={WORKER_IP}", *common],
            {**(env or {}), **(worker_env or {})},
            tmp / "ray-worker.log",
        )
        cluster.processes.append(worker)
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive_nodes(cluster.address) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in cluster.processes):
                logs = "".join(
                    (tmp / name).read_text(errors="replace")[-1500:]
                    for name in ("ray-head.log", "ray-worker.log")
                )
                raise RuntimeError(f"the Ray cluster did not start: {logs}")
            time.sleep(1)
        yield cluster
    finally:
        _end(cluster)
        shutil.rmtree(temp_dir, ignore_errors=True)
