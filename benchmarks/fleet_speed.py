"""Speed and memory of ``breakeven fleet``: 100 servers x 24 h at a 60 s step from a real
Prometheus.

Target (issue 16): read in at most 10 s, with a peak RSS of at most 256 MiB.  The history
(100 vLLM servers, their spec-decode counters, generated tokens and running requests, one
sample a minute) is generated, backfilled with ``promtool tsdb create-blocks-from
openmetrics`` into a temporary TSDB, and served by Prometheus on 127.0.0.1 (Debian's
``prometheus`` package).  Reported: the whole ``breakeven fleet --json`` command (median of
``--repeat`` runs) and its peak RSS, and the same command with ``--out`` (every step written).

    python benchmarks/fleet_speed.py [--servers 100] [--hours 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from prometheus_server import prometheus


def history(path: Path, servers: int, hours: int, end: int) -> None:
    """The servers' OpenMetrics history, written line by line (the benchmark's own process
    stays small: a child inherits its parent's peak RSS on Linux)."""
    start = end - hours * 3600
    with open(path, "w") as out:
        for name, kind, per_s in (
            ("vllm:spec_decode_num_drafts", "counter", 10.0),
            ("vllm:spec_decode_num_accepted_tokens", "counter", 20.0),
            ("vllm:spec_decode_num_draft_tokens", "counter", 40.0),
            ("vllm:generation_tokens", "counter", 300.0),
            ("vllm:num_requests_running", "gauge", None),
        ):
            out.write(f"# TYPE {name} {kind}\n")
            suffix = "_total" if kind == "counter" else ""
            for s in range(servers):
                labels = f'instance="srv{s:03d}:8000",job="vllm",model_name="m{s % 4}"'
                scale = 1 + (s % 7) / 10
                for t in range(start, end + 1, 60):
                    value = per_s * scale * (t - start) if per_s else float(4 + s % 29)
                    out.write(f"{name}{suffix}{{{labels}}} {value:.1f} {t}\n")
        out.write("# EOF\n")


_MEASURED = """
import resource, sys
from breakeven.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def run(url: str, hours: int, extra: list[str]) -> tuple[float, float]:
    """Wall seconds and the peak RSS [MiB] of one fleet command, a process of its own that
    reports its own peak (not promtool's or Prometheus')."""
    t = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEASURED,
            "fleet",
            "--prometheus",
            url,
            "--since",
            f"{hours}h",
            "--step",
            "60s",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # The history and Prometheus' TSDB (about 100 MB at the defaults) go with the directory.
    with tempfile.TemporaryDirectory(prefix="breakeven-fleet-") as work:
        measure(Path(work), args)


def measure(work: Path, args: argparse.Namespace) -> None:
    end = int(time.time()) // 60 * 60 - 300
    t = time.perf_counter()
    history(work / "history.om", args.servers, args.hours, end)
    tsdb = work / "tsdb"
    tsdb.mkdir()
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(work / "history.om"),
            str(tsdb),
        ],
        check=True,
        capture_output=True,
    )
    print(f"backfilled {args.servers} servers x {args.hours} h in {time.perf_counter() - t:.1f} s")
    with prometheus(work / "tsdb") as url:
        run(url, args.hours, [])  # Prometheus loads the blocks' index on the first query
        walls, peaks = [], []
        for _ in range(args.repeat):
            wall, peak = run(url, args.hours, [])
            walls.append(wall)
            peaks.append(peak)
        print(
            f"fleet --json: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, "
            f"max {max(walls):.2f}); peak RSS {max(peaks):.0f} MiB (target 10 s, 256 MiB)"
        )
        wall, peak = run(url, args.hours, ["--out", str(work / "fleet.csv"), "--force"])
        rows = sum(1 for _ in open(work / "fleet.csv")) - 1
        print(f"fleet --json --out ({rows:,} rows): {wall:.2f} s")


if __name__ == "__main__":
    main()
