"""Speed of breakeven's vectorised math, measured side by side with bare numpy.

Targets (issue 3):

1. A sweep over 10^6 (alpha, c, k) combinations runs in under 1 s.
2. A 10^7-point speedup grid takes at most 1.5x the time of the same formula
   written as one bare numpy expression.

Each timing is the best of several repeats, bare and breakeven alternating, so
machine noise hits both alike.

    python benchmarks/grid_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import breakeven as be


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def side_by_side(repeats: int, bare, ours) -> tuple[float, float]:
    t_bare, t_ours = [], []
    for _ in range(repeats):
        t_bare.append(best_of(1, bare))
        t_ours.append(best_of(1, ours))
    return min(t_bare), min(t_ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.repeats

    # 1. 10^6 (alpha, c, k) combinations: 250 alphas x 250 cost ratios x 16 k.
    alpha = np.linspace(0.0, 1.0, 250)[:, None, None]
    c = np.linspace(0.0, 1.0, 250)[None, :, None]
    k = np.arange(1, 17)[None, None, :]
    sweep = best_of(n, lambda: be.leviathan_speedup(alpha, k, c))
    best_k = best_of(n, lambda: be.optimal_k(alpha[..., 0], c[..., 0], k_max=16))
    flat = [np.ascontiguousarray(np.broadcast_to(x, (250, 250, 16))).ravel() for x in (alpha, c, k)]
    flat_sweep = best_of(n, lambda: be.leviathan_speedup(flat[0], flat[2], flat[1]))
    print(
        f"1. leviathan_speedup over {alpha.size * c.size * k.size:.0e} (alpha, c, k):"
        f" {sweep * 1000:7.1f} ms  ({'meets' if sweep < 1 else 'MISSES'} < 1 s)"
    )
    print(
        f"   the same over three flat 10^6-element arrays:        {flat_sweep * 1000:7.1f} ms"
        f"  ({'meets' if flat_sweep < 1 else 'MISSES'} < 1 s)"
    )
    print(
        f"   optimal_k, best of k = 1..16 for {alpha.size * c.size} (alpha, c):"
        f"   {best_k * 1000:7.1f} ms  ({'meets' if best_k < 1 else 'MISSES'} < 1 s)"
    )

    # 2. 10^7-point grids, bare expression against breakeven's checked function.
    tau = np.linspace(1.0, 8.0, 3163)[:, None]
    cycle = np.linspace(5.0, 60.0, 3163)[None, :]
    step = 15.898
    rows = []
    bare, ours = side_by_side(n, lambda: tau * step / cycle, lambda: be.speedup(tau, step, cycle))
    rows.append(("speedup(tau, step, cycle), broadcast axes", bare, ours))

    tau_full, cycle_full = np.broadcast_arrays(tau, cycle)
    tau_full, cycle_full = tau_full.copy(), cycle_full.copy()
    bare, ours = side_by_side(
        n, lambda: tau_full * step / cycle_full, lambda: be.speedup(tau_full, step, cycle_full)
    )
    rows.append(("speedup(tau, step, cycle), full 10^7 arrays", bare, ours))

    a = np.linspace(0.0, 0.999, 3163)[:, None, None]
    kk = np.arange(1, 17)[None, :, None]
    cr = np.linspace(0.0, 0.5, 198)[None, None, :]
    bare, ours = side_by_side(
        n,
        lambda: (1 - a ** (kk + 1)) / (1 - a) / (kk * cr + 1),
        lambda: be.leviathan_speedup(a, kk, cr),
    )
    rows.append(("leviathan_speedup(alpha, k, c)", bare, ours))

    points = tau.size * cycle.size
    print(f"2. {points:.1e}-point grids, best of {n}:")
    for name, bare, ours in rows:
        ratio = ours / bare
        verdict = "meets" if ratio <= 1.5 else "MISSES"
        print(
            f"   {name:<45} bare {bare * 1000:7.1f} ms  breakeven {ours * 1000:7.1f} ms"
            f"  ratio {ratio:.2f}x ({verdict} <= 1.5x)"
        )


if __name__ == "__main__":
    main()
