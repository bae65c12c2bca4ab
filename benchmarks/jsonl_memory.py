"""Peak memory of ``breakeven ingest`` on an AIPerf JSON Lines export of 6 MiB and of 60 MiB,
side by side.

Issue 40: ``profile_export.jsonl`` was read whole, so memory grew with the file (614 MiB
peak for 67 MiB; files over 256 MiB were refused).  It is read a line at a time now, so the
peak stays near that of a small file.  Target: the 60 MiB export's peak RSS at most 1.5x the
6 MiB one's.  The exports are the real records of
``tests/data/engines/aiperf_anud18_qwen3vl_30b_c1_records_excerpt.jsonl`` (about 5.5 KB a
request, most of it each request's chunk latencies), repeated with a request id of their
own.  Each ``breakeven ingest FILE --out runs.csv`` is a process of its own that reports its
peak RSS (``ru_maxrss``); the benchmark's own process stays small (a child inherits its
parent's peak on Linux).

    python benchmarks/jsonl_memory.py [--small 6] [--large 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "data"
    / "engines"
    / "aiperf_anud18_qwen3vl_30b_c1_records_excerpt.jsonl"
)
TARGET = 1.5

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


def export(path: Path, mib: int) -> int:
    """An AIPerf records export of about ``mib`` MiB, written a line at a time; its requests."""
    lines = FIXTURE.read_text().splitlines()
    written = requests = 0
    with open(path, "w") as out:
        while written < mib << 20:
            line = lines[requests % len(lines)].replace("381e305b", f"{requests:08x}")
            out.write(line + "\n")
            written += len(line) + 1
            requests += 1
    return requests


def ingest(path: Path, out: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS [MiB] of ``breakeven ingest path --out out``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, "ingest", str(path), "--out", str(out), "--force"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=6, help="MiB")
    parser.add_argument("--large", type=int, default=60, help="MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="breakeven-jsonl-") as work:
        peaks = {}
        for mib in (args.small, args.large):
            path = Path(work) / f"profile_export_{mib}.jsonl"
            requests = export(path, mib)
            wall, peaks[mib] = ingest(path, Path(work) / "runs.csv")
            print(
                f"{mib:4d} MiB export ({requests:,} requests): peak RSS {peaks[mib]:6.1f} MiB, "
                f"{wall:.1f} s"
            )
        ratio = peaks[args.large] / peaks[args.small]
        verdict = "meets" if ratio <= TARGET else "MISSES"
        print(
            f"peak RSS, {args.large} MiB over {args.small} MiB: {ratio:.2f}x "
            f"({verdict} the target of at most {TARGET}x)"
        )


if __name__ == "__main__":
    main()
