"""Speed of ``breakeven check`` on a million-row measurements CSV.

Targets: the analysis of 10^6 rows in at most 2 s (issue 4); the whole ``breakeven check
--json`` command in at most 1.5 s (issue 12).  The file holds
repeated runs of many configurations (models x hardware x concurrency x k),
with baselines in two environments so that the drift and stale-baseline logic
runs, and the columns bench writes of each row's launch (a distinct timestamp per row).  Reported: reading the CSV, the analysis alone, and the whole
``breakeven check --json`` command.

    python benchmarks/check_speed.py [--rows 1000000] [--repeat 5]
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


def generate(path: Path, rows: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    models = [f"model-{i}" for i in range(10)]
    hardware = ["8x H100 NVLink", "8x RTX PRO 6000 PCIe", "1x A100"]
    concurrency = [1, 8, 32, 64]
    k = rng.choice([0, 0, 1, 2, 3, 4, 6], rows)
    envs = np.array(["tp=8 NCCL_PROTO=LL", "tp=8"])
    base_rate = 60 + 10 * rng.random(rows)
    tau = np.where(k > 0, 1 + 0.7 * k * rng.random(rows), np.nan)
    frame = pd.DataFrame(
        {
            "run_id": [f"r{i // 50}" for i in range(rows)],
            "label": np.where(k > 0, [f"eagle3-k{x}" for x in k], "baseline"),
            "model": rng.choice(models, rows),
            "hardware": rng.choice(hardware, rows),
            "concurrency": rng.choice(concurrency, rows),
            "num_spec_tokens": k,
            "spec_method": np.where(k > 0, "eagle3", ""),
            "tok_s": np.where(k > 0, base_rate * np.nan_to_num(tau) / 1.6, base_rate),
            "accept_len": tau,
            "cycle_ms": np.where(k > 0, 25 + 2 * k, np.nan),
            "env": rng.choice(envs, rows),
            "source": "generated",
            # As bench writes them: a timestamp per request (each distinct), and each run's
            # launch, its start and where its settings came from.
            "timestamp": pd.date_range("2026-02-26T16:41", periods=rows, freq="s").strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            "launch_id": [f"h:8000@{i // 500}" for i in range(rows)],
            "launched_at": "2026-02-26T16:40:00Z",
            "env_from": "server",
        }
    )
    frame.to_csv(path, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs of the whole command")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="breakeven-check-"))
    try:
        path = work / "measurements.csv"
        generate(path, args.rows)
        start = time.perf_counter()
        data, _ = read_measurements(path, COLUMNS_USED, TIME_COLUMNS)  # as check_file does
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        result = check(data)
        check_s = time.perf_counter() - start
        breakeven = Path(sys.executable).with_name("breakeven")
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run(
                [str(breakeven), "check", str(path), "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            walls.append(time.perf_counter() - start)
        whole_s = statistics.median(walls)
        print(
            f"{args.rows:,} rows, {len(result.comparisons)} comparisons, {len(result.flags)} flags"
        )
        print(f"read_measurements: {read_s:6.2f} s")
        print(
            f"check (analysis):  {check_s:6.2f} s  ({'meets' if check_s <= 2 else 'MISSES'} <= 2 s)"
        )
        print(
            f"breakeven check --json, whole command: median {whole_s:.2f} s of {args.repeat} "
            f"runs (min {min(walls):.2f}, max {max(walls):.2f}) "
            f"({'meets' if whole_s <= 1.5 else 'MISSES'} <= 1.5 s)"
        )
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
