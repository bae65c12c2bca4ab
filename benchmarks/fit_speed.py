"""Speed of ``breakeven fit`` on 10^4 runs.

Targets: ``fit`` of 10^4 runs takes under 0.5 s (issue 13), and under 0.3 s with the forward
surface and the choice of the cycle's form by held-out error (issue 27).  The runs are simulated from
known coefficients: 100 groups (models x hardware x concurrency x method) of 100 runs, at
k = 1..10 (ten repeats each) with a baseline each.  Reported: the fit alone (the median of
``--repeat`` calls) and the whole ``breakeven fit --json`` command.

    python benchmarks/fit_speed.py [--runs 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from breakeven.fitting.fit import fit


def runs(total: int, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per_group = 100
    rows = []
    for g in range(max(1, total // per_group)):
        model, hardware, conc = f"model-{g % 10}", f"hw-{g // 10 % 5}", [1, 8][g // 50 % 2]
        method = f"eagle-{g}"
        base, slope, alpha = rng.uniform(6, 30), rng.uniform(0.1, 2), rng.uniform(0.5, 0.9)
        rows.append(
            {
                "model": model,
                "hardware": hardware,
                "concurrency": conc,
                "num_spec_tokens": 0,
                "tok_s": 1000 / base * rng.uniform(0.8, 1.0),
            }
        )
        for i in range(per_group):
            k = 1 + i % 10
            tau = (1 - alpha ** (k + 1)) / (1 - alpha)
            cycle = base + slope * k + rng.normal(0, 0.05)
            rows.append(
                {
                    "model": model,
                    "hardware": hardware,
                    "concurrency": conc,
                    "spec_method": method,
                    "num_spec_tokens": k,
                    "accept_len": tau,
                    "tok_s": 1000 * tau / cycle,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = runs(args.runs)
    walls = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = fit(data)
        walls.append(time.perf_counter() - start)
    fit_s = statistics.median(walls)
    print(f"{len(data):,} rows, {len(result.groups)} groups")
    print(
        f"fit (analysis): median {fit_s:.3f} s of {args.repeat} "
        f"({'meets' if fit_s < 0.5 else 'MISSES'} < 0.5 s, "
        f"{'meets' if fit_s < 0.3 else 'MISSES'} < 0.3 s)"
    )
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "runs.csv"
        data.to_csv(path, index=False)
        breakeven = Path(sys.executable).with_name("breakeven")
        whole = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run(
                [str(breakeven), "fit", str(path), "--json"], check=True, stdout=subprocess.DEVNULL
            )
            whole.append(time.perf_counter() - start)
    print(f"breakeven fit --json, whole command: median {statistics.median(whole):.2f} s")


if __name__ == "__main__":
    main()
