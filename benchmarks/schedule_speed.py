"""Speed of ``breakeven schedule`` at the largest sweep it takes, and of its range sums.

A schedule is chosen from the speedup at every batch and k (4096 batches x 64 k at most).
Its searches (merging neighbours, older vLLM's one-k-then-off threshold) sum weighted tokens
over ranges of batches; breakeven takes those sums from prefix sums.  Reported side by side
in one run: the threshold search with prefix sums against the same search summing each range
batch by batch (on a smaller sweep, where that finishes), and the whole schedule at 4096 x 64.

    python benchmarks/schedule_speed.py [--batches 512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from breakeven.model.costs import TableCost
from breakeven.planning.batch import speedup_grid
from breakeven.planning.schedule import _threshold, _Tokens, batch_weights, schedule_from_grid

CURVE = TableCost((1, 64, 1 << 20), (10.0, 10.0, 10 + 0.01 * ((1 << 20) - 64)))


def threshold_by_batch(grid, weights):
    """The threshold search with each range summed batch by batch (the reference)."""

    def tokens(lo, hi, k):
        total = 0.0
        for i in range(lo, hi + 1):
            s = 1.0 if k == 0 else grid.speedup[i][grid.ks.index(k)]
            if math.isnan(s):
                return -math.inf
            total += weights[i] * s
        return total

    n = len(grid.batches) - 1
    best, value = [[0, n, 0]], tokens(0, n, 0)
    for k in grid.ks:
        for cut in range(1, n + 2):
            v = tokens(0, cut - 1, k) + (tokens(cut, n, 0) if cut <= n else 0.0)
            if v > value * (1 + 1e-9):
                best, value = [[0, cut - 1, k]] + ([[cut, n, 0]] if cut <= n else []), v
    return best


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    grid = speedup_grid(CURVE, alpha=0.9, draft_step_ms=0.2, k_max=16, max_batch=args.batches)
    weights = batch_weights(grid, None)
    fast, a = timed(lambda: _threshold(_Tokens(grid, weights), len(grid.batches) - 1), args.repeat)
    slow, b = timed(lambda: threshold_by_batch(grid, weights), 1)
    assert a == b, (a, b)
    print(
        f"threshold search, {args.batches} batches x 16 k: prefix sums {fast * 1e3:.1f} ms, "
        f"batch by batch {slow * 1e3:.0f} ms: {slow / fast:.0f}x"
    )
    big = speedup_grid(CURVE, alpha=0.9, draft_step_ms=0.2, k_max=64, max_batch=4096)
    for kw in ({"min_gain": 0.02}, {"min_gain": 0.0}, {"shape": "threshold"}):
        t, _ = timed(lambda kw=kw: schedule_from_grid(big, **kw), args.repeat)
        print(f"schedule of 4096 batches x 64 k, {kw}: {t * 1e3:.0f} ms")
    t, _ = timed(
        lambda: speedup_grid(CURVE, alpha=0.9, draft_step_ms=0.2, k_max=64, max_batch=4096),
        args.repeat,
    )
    print(f"its speedup grid: {t * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
