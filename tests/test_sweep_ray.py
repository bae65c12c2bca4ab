"""breakeven sweep --ray (issue 45): the whole plan on each node of a Ray cluster, a block per
node; rows carrying their node; the answer pooled with the node as a block, and a node whose
speedups disagree flagged (node_drift).  The cluster is real: two raylets on this machine,
bound to 127.0.0.2 and 127.0.0.3 (tests/ray_cluster.py); the servers are tests/fake_server.py,
started by each node's launches."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_checks import run_cli
from hypothesis import given
from hypothesis import strategies as st
from local_process import free_port
from ray_cluster import WORKER_IP, driver_env, have_ray, ray_cluster

from breakeven.measurements.check import check_file
from breakeven.measurements.nodes import NodeSpeedup, pool_nodes
from breakeven.measurements.normalise import node_of

FAKE = Path(__file__).parent / "fake_server.py"
needs_ray = pytest.mark.skipif(
    not have_ray(), reason="Ray is not installed (pip install '.[ray]'; CI installs it)"
)


def _sweep_args(out: Path | None, address: str, *extra: str) -> list[str]:
    serve = f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.002"
    args = ["sweep", "--serve", serve, "--engine", "vllm", "--spec-method", "ngram"]
    args += ["-k", "0", "2", "--repeats", "3", "--requests", "4", "--max-tokens", "16"]
    args += ["--ray", address, *extra]
    return args + (["--out", str(out)] if out is not None else [])


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, as a user runs it (Ray's driver state is per process)."""
    return subprocess.run(
        [sys.executable, "-m", "breakeven", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=driver_env(),
    )


def _start(args: list[str]) -> subprocess.Popen:
    """The CLI started in a process of its own, to be signalled or outlived."""
    return subprocess.Popen(
        [sys.executable, "-m", "breakeven", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=driver_env(),
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- the pooling, without a cluster ------------------------------------------------------------


def _node(name: str, speedup: float, rel: float = 0.05, fp: str = "") -> NodeSpeedup:
    return NodeSpeedup(name, speedup, speedup * math.exp(-rel), speedup * math.exp(rel), fp)


@given(
    st.lists(st.floats(0.3, 5.0), min_size=1, max_size=6),
    st.floats(0.01, 0.5),
)
def test_the_pooled_speedup_lies_among_the_nodes(speedups, rel):
    pooled = pool_nodes([_node(f"n{i}", s, rel) for i, s in enumerate(speedups)])
    assert min(speedups) * (1 - 1e-9) <= pooled.measured_speedup <= max(speedups) * (1 + 1e-9)
    assert pooled.ci_low <= pooled.measured_speedup <= pooled.ci_high


@given(st.floats(0.3, 5.0), st.integers(2, 6), st.floats(0.01, 0.5))
def test_nodes_that_speed_up_alike_never_drift(speedup, n, rel):
    # Alike speedups, whatever each node's own speed (a faster node's baseline is faster too).
    pooled = pool_nodes([_node(f"n{i}", speedup, rel) for i in range(n)])
    assert pooled.drift == () and pooled.why == ""
    assert pooled.measured_speedup == pytest.approx(speedup)


def test_a_node_that_speeds_up_more_is_named_with_what_differs():
    nodes = [
        _node("aaaa", 1.5, fp="NCCL_P2P_LEVEL=SYS x=1"),
        _node("bbbb", 1.52, fp="NCCL_P2P_LEVEL=SYS x=1"),
        _node("cccc", 3.0, fp="x=1"),
    ]
    pooled = pool_nodes(nodes)
    assert pooled.drift == ("cccc",)
    assert "NCCL_P2P_LEVEL" in pooled.why and "node cccc 3.00x" in pooled.why
    # The interval covers the nodes' spread: it is wider than any node's own.
    assert pooled.ci_high / pooled.ci_low > max(n.ci_high / n.ci_low for n in nodes)


def test_two_nodes_that_disagree_are_both_named_and_the_answer_widens():
    pooled = pool_nodes([_node("aaaa", 1.4, 0.03), _node("bbbb", 2.8, 0.03)])
    assert set(pooled.drift) == {"aaaa", "bbbb"}
    assert "do not differ" in pooled.why  # no setting tells them apart: said so
    assert pooled.verdict == "within noise"  # t with 1 degree of freedom: cannot decide


# -- bad input, without a cluster --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--nodes", "2"], ["--nodes", "--ray"]),
        (["--ray", "http://h:1"], ["--ray", "http://h:1"]),
        (["--ray", "127.0.0.1:6379", "--url", "http://127.0.0.1:1"], ["--url", "--ray"]),
        (["--ray", "127.0.0.1:1", "--nodes", "0"], ["--nodes", "0"]),
    ],
)
def test_bad_cluster_options_are_one_line(tmp_path, args, names):
    base = _sweep_args(None, "auto")[:-2]  # without --ray auto
    r = run_cli([*base, *args, "--out", str(tmp_path / "s")])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert "\n" not in line and "Traceback" not in line
    for name in names:
        assert name in line


@needs_ray
def test_an_address_where_nothing_listens_is_refused_at_once(tmp_path):
    port = free_port()
    began = time.monotonic()
    r = run_cli([*_sweep_args(tmp_path / "s", f"127.0.0.1:{port}")])
    assert r.exit_code == 2, r.output
    assert "--ray" in r.output and "cannot be reached" in r.output
    assert time.monotonic() - began < 30  # not ray.init's minutes of retries
    assert not (tmp_path / "s").exists()


def test_without_ray_the_line_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where it is missing
    r = run_cli(_sweep_args(tmp_path / "s", "auto"))
    assert r.exit_code == 2, r.output
    assert "--ray" in r.output and "breakeven[ray]" in r.output
    assert "Traceback" not in r.output


# -- a real two-node cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def alike(tmp_path_factory):
    if not have_ray():
        pytest.skip("Ray is not installed (pip install '.[ray]'; CI installs it)")
    with ray_cluster(tmp_path_factory.mktemp("ray-alike")) as cluster:
        yield cluster
    assert cluster.pids() == set(), "a Ray process of the cluster was left"


@needs_ray
def test_plan_lists_each_nodes_launches(alike):
    r = _run([*_sweep_args(None, alike.address), "--plan"])
    assert r.returncode == 0, r.stderr
    assert "On 2 node(s)" in r.stdout and "12 launches in all" in r.stdout
    assert "127.0.0.2" in r.stdout and WORKER_IP in r.stdout
    r = _run([*_sweep_args(None, alike.address), "--plan", "--json"])
    plan = json.loads(r.stdout)
    assert [n["address"] for n in plan["nodes"]] == ["127.0.0.2", WORKER_IP]
    assert len(plan["launches"]) == 6


@needs_ray
def test_more_nodes_than_alive_is_one_line(alike, tmp_path):
    r = _run([*_sweep_args(tmp_path / "s", alike.address), "--nodes", "3"])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--nodes" in r.stderr
    assert "2 alive node(s)" in r.stderr and not (tmp_path / "s").exists()


@needs_ray
def test_each_node_runs_its_block_and_the_answer_pools_them(alike, tmp_path):
    out = tmp_path / "s"
    r = _run([*_sweep_args(out, alike.address), "--json"])
    assert r.returncode == 0, r.stderr[-3000:]
    answer = json.loads(r.stdout)  # stdout is the answer alone: no Ray message in it
    rows = _rows(out / "runs.csv")
    nodes = {row["node"] for row in rows}
    assert len(nodes) == 2 and all(len(n) == 56 for n in nodes)  # Ray's node ids
    for node in nodes:  # each node ran the whole interleaved plan, each repeat a launch
        launches = dict.fromkeys((r["launch_id"], r["label"]) for r in rows if r["node"] == node)
        assert [label for _, label in launches] == ["baseline", "ngram-k2"] * 3
    assert all("node_address=127.0.0." in row["env"] for row in rows)
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["done"]) == 12 and all(d["ok"] for d in manifest["done"])
    assert {d["node"] for d in manifest["done"]} == nodes
    assert len(list((out / "logs").iterdir())) == 2  # a folder of logs per node
    # check never pairs a node's runs with another node's baselines.
    checked = check_file(str(out / "runs.csv"))
    comparisons = checked.comparisons
    assert len(comparisons) == 2
    (pooled,) = checked.across_nodes
    assert pooled["drift"] == [] and "node_drift" not in [f.code for f in checked.flags]
    assert {node_of(c.hardware)[1] for c in comparisons} == {n[:12] for n in nodes}
    r = run_cli(["compare", str(out), "--json"])  # compare DIR reads the node as check does
    assert r.exit_code == 0, r.output
    compared = json.loads(r.stdout)["runs"]
    assert sorted(node_of(c["hardware"])[1] for c in compared) == sorted(n[:12] for n in nodes)
    (best,) = answer["best"]
    assert best["num_spec_tokens"] == 2 and len(best["nodes"]) == 2
    assert not any(n["drift"] for n in best["nodes"])
    assert "node_drift" not in best["why"] and "Pooled over 2 nodes" in best["why"]
    speedups = [n["measured_speedup"] for n in best["nodes"]]
    assert min(speedups) <= best["measured_speedup"] <= max(speedups)
    # --resume on a finished sweep runs nothing more, and answers the same.
    again = _run([*_sweep_args(out, alike.address), "--json", "--resume"])
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(_rows(out / "runs.csv")) == len(rows)


@needs_ray
def test_a_node_faster_at_speculation_only_is_flagged(tmp_path):
    with ray_cluster(tmp_path, {"FAKE_SERVER_SPEC_SPEEDUP": "2"}) as cluster:
        out = tmp_path / "s"
        r = _run([*_sweep_args(out, cluster.address), "--json"])
        nodes = json.loads((out / "manifest.json").read_text())["plan"]["nodes"]
    assert cluster.pids() == set()
    assert r.returncode == 0, r.stderr[-3000:]
    (best,) = json.loads(r.stdout)["best"]
    worker = next(n["id"][:12] for n in nodes if n["address"] == WORKER_IP)
    assert "node_drift" in best["why"] and worker in best["why"]
    by_node = {n["node"]: n["measured_speedup"] for n in best["nodes"]}
    head = next(n for n in by_node if n != worker)
    assert by_node[worker] > 1.5 * by_node[head]
    # check DIR/runs.csv says the same: the pooled row, and the flag on every node's lines.
    checked = check_file(str(out / "runs.csv"))
    (pooled,) = checked.across_nodes
    assert worker in pooled["drift"] and pooled["ci_low"] <= pooled["measured_speedup"]
    assert "node_drift" in [f.code for f in checked.flags]
    assert "Across the cluster's nodes" in checked.report()


@needs_ray
def test_a_node_lost_mid_sweep_fails_its_launches_and_the_other_goes_on(tmp_path):
    import os
    import signal

    # Ray notices a dead node after its health checks fail: a few seconds here.
    quick = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
    out = tmp_path / "s"
    with ray_cluster(tmp_path, env=quick) as cluster:
        args = _sweep_args(out, cluster.address, "--json")
        pids = tmp_path / "pids"
        serve = (
            f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.03 --pid-file {pids}"
        )
        args[args.index("--serve") + 1] = serve
        sweep = _start(args)
        deadline = time.monotonic() + 120
        worker = None
        while time.monotonic() < deadline:  # until the worker node has done a launch
            try:
                manifest = json.loads((out / "manifest.json").read_text())
            except (OSError, ValueError):
                manifest = {"plan": {"nodes": []}, "done": []}
            ids = [n["id"] for n in manifest["plan"].get("nodes", []) if n["address"] == WORKER_IP]
            worker = ids[0] if ids else None
            if worker and any(d["node"] == worker for d in manifest["done"]):
                break
            time.sleep(0.2)
        assert worker, "the worker node did no launch"
        os.killpg(cluster.processes[1].pid, signal.SIGKILL)  # the node, its raylet and workers
        stdout, stderr = sweep.communicate(timeout=300)
    done = json.loads((out / "manifest.json").read_text())["done"]
    lost = [d for d in done if d["node"] == worker and not d["ok"]]
    kept = [d for d in done if d["node"] != worker]
    assert len(kept) == 6 and all(d["ok"] for d in kept), stderr[-3000:]
    assert lost and all("was lost" in d["error"] for d in lost)
    assert len(lost) + sum(d["ok"] for d in done if d["node"] == worker) == 6
    assert sweep.returncode == 0, stderr[-3000:]  # the head's block answers
    json.loads(stdout)
    # The lost node's worker took its launch's keeper with it (Ray kills a worker's children):
    # the server's parent-death signal ended it all the same.
    started = {int(p) for p in pids.read_text().split()}
    deadline = time.monotonic() + 30
    while (alive := {p for p in started if os.path.exists(f"/proc/{p}")}) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert alive == set(), "the lost node's server outlived its launch"


@needs_ray
def test_sigterm_stops_every_nodes_launch_and_keeps_the_done_ones(alike, tmp_path):
    import os
    import signal

    out, pids = tmp_path / "s", tmp_path / "pids"
    args = _sweep_args(out, alike.address)
    serve = f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.03 --pid-file {pids}"
    args[args.index("--serve") + 1] = serve
    sweep = _start(args)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until a launch is done and others run
        try:
            if json.loads((out / "manifest.json").read_text())["done"]:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=180)
    assert sweep.returncode == 143, stderr[-2000:]
    assert "Terminated (SIGTERM)" in stderr and "--resume" in stderr
    done = json.loads((out / "manifest.json").read_text())["done"]
    assert any(d["ok"] for d in done)
    # The launches under way were stopped and recorded (their rows so far kept), not dropped.
    cut = [d for d in done if not d["ok"]]
    assert cut and all(d["error"].startswith("interrupted") for d in cut), cut
    assert all(Path(d["log"]).exists() for d in done)
    started = {int(p) for p in pids.read_text().split()}
    deadline = time.monotonic() + 30
    while (alive := {p for p in started if os.path.exists(f"/proc/{p}")}) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert alive == set(), "a launch's server outlived the interrupted sweep"
    # --resume continues each node where it stopped: every launch of both blocks done once.
    again = _run([*args, "--resume", "--json"])
    assert again.returncode == 0, again.stderr[-2000:]
    done = json.loads((out / "manifest.json").read_text())["done"]
    assert len(done) == 12 and all(d["ok"] for d in done)
    launches = {(r["node"], r["launch_id"]) for r in _rows(out / "runs.csv")}
    assert len(launches) >= 12


@needs_ray
def test_resume_of_a_directory_without_a_sweep_is_one_line(alike, tmp_path):
    r = _run([*_sweep_args(tmp_path / "none", alike.address), "--resume"])
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "--resume" in r.stderr and "is missing" in r.stderr
