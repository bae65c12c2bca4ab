"""``check`` on the same rows with 4 workload categories and with 1,000, side by side.

Issue 40: per-category analysis cost time per category times rows (each category's rows
filtered out of the whole frame, and each estimate made on its own), so 1,000 categories took
many times as long as 4 for the same rows.  It is one grouped pass now.  Target: 1,000
categories within 1.5x the time of 4.  The rows are the same in both files (rates, k,
concurrency, launches, each request's counts); only the category names differ.  Reported:
the analysis (``check`` on the rows read), the best of ``--repeat`` runs of each taken in
turns, so that a busy machine's noise hits both alike, and the whole ``breakeven check
--json`` command, the median of ``--repeat`` runs.

    python benchmarks/categories.py [--rows 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from breakeven.iotools.csvfile import read_measurements
from breakeven.measurements.check import check
from breakeven.measurements.normalise import COLUMNS_USED, TIME_COLUMNS

TARGET = 1.5
CATEGORIES = (4, 1000)


def generate(path: Path, rows: int, categories: int, seed: int = 3) -> None:
    """Requests of a baseline and two speculative runs at two concurrencies, 500 to a launch,
    each in one of ``categories`` categories; the same rows whatever ``categories``."""
    rng = np.random.default_rng(seed)
    k = rng.choice([0, 0, 2, 4], rows)
    drafts = rng.integers(5, 40, rows)
    accepted = np.floor(drafts * k * rng.random(rows) * 0.6)
    tau = 1 + accepted / drafts
    base_rate = 60 + 10 * rng.random(rows)
    which = np.random.default_rng(seed + 1).integers(0, 1_000_000, rows) % categories
    frame = pd.DataFrame(
        {
            "label": np.where(k > 0, [f"eagle3-k{x}" for x in k], "baseline"),
            "model": "model-0",
            "hardware": "8x H100",
            "concurrency": rng.choice([1, 8], rows),
            "num_spec_tokens": k,
            "tok_s": np.where(k > 0, base_rate * tau / 1.6, base_rate),
            "completion_tokens": rng.integers(64, 512, rows),
            "accept_len": np.where(k > 0, tau, np.nan),
            "num_drafts": np.where(k > 0, drafts, np.nan),
            "draft_tokens": np.where(k > 0, drafts * k, np.nan),
            "accepted_tokens": np.where(k > 0, accepted, np.nan),
            "category": np.char.add("category-", which.astype(str)),
            "launch_id": [f"h:8000@{i // 500}" for i in range(rows)],
            "source": "generated",
        }
    )
    frame.to_csv(path, index=False)


def _analysis(paths: dict[int, Path], repeat: int) -> dict[int, float]:
    """The best time of ``check`` on each file's rows, runs taken in turns."""
    data = {c: read_measurements(p, COLUMNS_USED, TIME_COLUMNS)[0] for c, p in paths.items()}
    best = dict.fromkeys(paths, float("inf"))
    for c in paths:  # warm: imports, first allocations
        check(data[c])
    for _ in range(repeat):
        for c in paths:
            start = time.perf_counter()
            result = check(data[c])
            best[c] = min(best[c], time.perf_counter() - start)
            assert len({r.category for r in result.categories}) == c  # every category measured
    return best


def _command(paths: dict[int, Path], repeat: int) -> dict[int, float]:
    """The median wall time of ``breakeven check --json`` on each file, runs taken in turns."""
    breakeven = Path(sys.executable).with_name("breakeven")
    walls: dict[int, list[float]] = {c: [] for c in paths}
    for _ in range(repeat):
        for c, path in paths.items():
            start = time.perf_counter()
            subprocess.run(
                [str(breakeven), "check", str(path), "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            walls[c].append(time.perf_counter() - start)
    return {c: statistics.median(w) for c, w in walls.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="breakeven-categories-"))
    try:
        paths = {c: work / f"categories-{c}.csv" for c in CATEGORIES}
        for c, path in paths.items():
            generate(path, args.rows, c)
        few, many = CATEGORIES
        for name, times in (
            (f"check (analysis, best of {args.repeat})", _analysis(paths, args.repeat)),
            (f"breakeven check --json (median of {args.repeat})", _command(paths, args.repeat)),
        ):
            ratio = times[many] / times[few]
            verdict = "meets" if ratio <= TARGET else "MISSES"
            print(
                f"{name}, {args.rows:,} rows: {few} categories {times[few]:.3f} s, "
                f"{many:,} categories {times[many]:.3f} s, ratio {ratio:.2f}x "
                f"({verdict} the target of at most {TARGET}x)"
            )
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
