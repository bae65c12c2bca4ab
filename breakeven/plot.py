"""Pictures: speedup surfaces with their break-even contour, speedup against k and batch,
measured against predicted, and sensitivity.

Every function draws on ``ax`` (a new figure's axes when None), returns the
axes, and never shows anything: save with ``ax.figure.savefig(...)`` or
:func:`save`.  matplotlib is imported only here, and through its
object-oriented API (no pyplot), so it runs headless.  The break-even line of
each picture carries the gid ``"breakeven"`` and the best-k marker ``"best_k"``,
so tests and notebooks can find them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from breakeven.errors import BreakevenError, escape_braces

SPEEDUP_CMAP = "RdBu"  # red below 1 (speculation loses), blue above
DEFAULT_LEVELS = (0.5, 0.8, 1.25, 1.5, 2.0, 3.0)
FORMATS = (".png", ".svg", ".pdf")
LARGEST_AXIS = 1e6
"""The furthest a surface's axes reach (tokens per cycle, steps per cycle): past it nothing
can be read off the picture, and near a double's limit its cells' edges overflow."""


def _literal(label: Any) -> str:
    """A label drawn as given: control characters removed (as in text output) and ``$``
    escaped, which matplotlib would otherwise parse as mathtext (``$\\frac{$`` fails)."""
    from breakeven.formatting import printable

    return printable(label).replace("$", r"\$")


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    figure = Figure(figsize=(6.4, 4.8), layout="constrained")
    return figure.add_subplot()


def _speedup_map(ax: Any, x: Any, y: Any, speedup: Any, levels: Sequence[float]) -> None:
    """Shade speedup (centred on 1), draw iso-speedup contours and the labelled break-even line."""
    low, high = float(np.nanmin(speedup)), float(np.nanmax(speedup))
    norm = TwoSlopeNorm(vmin=min(low, 0.999), vcenter=1.0, vmax=max(high, 1.001))
    mesh = ax.pcolormesh(
        x, y, speedup, cmap=SPEEDUP_CMAP, norm=norm, shading="auto", rasterized=True
    )  # an image inside SVG and PDF, not 10^5 polygons
    ax.figure.colorbar(mesh, ax=ax, label="speedup [x]")
    inside = [v for v in levels if low < v < high and v != 1.0]
    if inside:
        iso = ax.contour(x, y, speedup, levels=sorted(inside), colors="0.25", linewidths=0.8)
        ax.clabel(iso, fmt=lambda v: f"{v:g}x", fontsize=8)
    if low < 1.0 < high:
        line = ax.contour(x, y, speedup, levels=[1.0], colors="black", linewidths=2.0)
        line.set_gid("breakeven")
        ax.clabel(line, fmt=lambda v: "break-even (speedup = 1)", fontsize=8)


def surface(
    ax: Any = None,
    *,
    accept_len: tuple[float, float] = (1.0, 4.0),
    cycle_over_step: tuple[float, float] = (1.0, 4.0),
    resolution: int = 300,
    levels: Sequence[float] = DEFAULT_LEVELS,
    points: Sequence[tuple[float, float, str]] = (),
) -> Any:
    """Speedup over (accept_len, cycle_ms / step_ms): ``speedup = accept_len / (cycle / step)``.

    The break-even line is ``accept_len = cycle / step``.

    Parameters
    ----------
    ax : matplotlib Axes, optional
    accept_len : (float, float)  [tokens/cycle]
        Range of the x axis (>= 1).
    cycle_over_step : (float, float)  [-]
        Range of the y axis: the cycle's cost in plain decode steps.
    resolution : int
        Grid points per axis.
    levels : sequence of float  [x]
        Iso-speedup contours to draw besides 1.
    points : sequence of (accept_len, cycle_over_step, label)
        Measured operating points to overlay.
    """
    from breakeven.model import speedup

    for name, (low, high) in (("accept_len", accept_len), ("cycle_over_step", cycle_over_step)):
        if not (0 < low < high <= LARGEST_AXIS):
            raise BreakevenError("{0}: got " + f"({low:g}, {high:g}), expected a range from "
                                 f"above 0 to at most {LARGEST_AXIS:g}", name)  # fmt: skip
    ax = _axes(ax)
    tau = np.linspace(max(1.0, accept_len[0]), accept_len[1], resolution)
    ratio = np.linspace(cycle_over_step[0], cycle_over_step[1], resolution)
    grid = speedup(tau[None, :], 1.0, ratio[:, None])
    _speedup_map(ax, tau, ratio, grid, levels)
    for x, y, label in points:
        ax.plot([x], [y], marker="o", color="black", markerfacecolor="yellow", zorder=5)
        s = x / y
        ax.annotate(f"{_literal(label)}\n{s:.2f}x", (x, y), xytext=(6, 6), textcoords="offset points",
                    fontsize=8, zorder=6)  # fmt: skip
    ax.set_xlabel("accept_len, tokens per cycle incl. bonus [tokens/cycle]")
    ax.set_ylabel("cycle_ms / step_ms [steps per cycle]")
    ax.set_title("Speculative decoding speedup")
    return ax


def surface_alpha_k(
    ax: Any = None,
    *,
    cost_ratio: float | None = None,
    cycle_over_step: float | None = None,
    alpha: tuple[float, float] = (0.0, 1.0),
    k_max: int = 16,
    resolution: int = 300,
    levels: Sequence[float] = DEFAULT_LEVELS,
    points: Sequence[tuple[float, int, str]] = (),
) -> Any:
    """Speedup over (alpha, k), with the best k at each alpha.

    Give ``cost_ratio`` (Leviathan's c: cycle = k * c + 1 target steps) or
    ``cycle_over_step`` (a cycle cost that does not change with k).
    """
    from breakeven.acceptance import accept_len_from_alpha
    from breakeven.model import speedup

    if (cost_ratio is None) == (cycle_over_step is None):
        raise BreakevenError("give one of {0} or {1}", "cost_ratio", "cycle_over_step")
    ax = _axes(ax)
    a = np.linspace(alpha[0], alpha[1], resolution)
    from breakeven import _xp
    from breakeven.quantities import MAX_K

    k = np.arange(1, _xp.count("k_max", k_max, MAX_K) + 1)[:, None]
    cycle = (
        k * cost_ratio + 1 if cost_ratio is not None else np.full_like(k, cycle_over_step, float)
    )
    grid = speedup(accept_len_from_alpha(a[None, :], k), 1.0, cycle)
    _speedup_map(ax, a, k[:, 0], grid, levels)
    best = np.argmax(grid, axis=0) + 1
    pays = grid.max(axis=0) > 1
    ax.plot(a[pays], best[pays], color="gold", linewidth=2, label="best k", gid="best_k")
    for x, y, label in points:
        ax.plot([x], [y], marker="o", color="black", markerfacecolor="yellow", zorder=5)
        ax.annotate(_literal(label), (x, y), xytext=(6, 6), textcoords="offset points", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_xlabel("alpha, per-token acceptance [probability]")
    ax.set_ylabel("k, draft tokens per cycle [tokens]")
    form = f"c = {cost_ratio:g}" if cost_ratio is not None else f"cycle/step = {cycle_over_step:g}"
    ax.set_title(f"Speedup by acceptance and k ({form})")
    return ax


def speedup_vs_k(result: Any, ax: Any = None) -> Any:
    """Speedup at each k of an :class:`~breakeven.optimize.OptimizeResult`, best k marked."""
    ax = _axes(ax)
    ks = [o.k for o in result.by_k]
    ax.plot(ks, [o.speedup for o in result.by_k], marker="o", color="tab:blue")
    ax.axhline(1.0, color="black", linewidth=1.5, gid="breakeven")
    ax.annotate("break-even", (ks[-1], 1.0), xytext=(0, 3), textcoords="offset points",
                ha="right", fontsize=8)  # fmt: skip
    if result.best_k:
        best = next(o for o in result.by_k if o.k == result.best_k)
        ax.plot([best.k], [best.speedup], marker="*", markersize=16, color="gold",
                markeredgecolor="black", gid="best_k", zorder=5)  # fmt: skip
        ax.annotate(f"best k = {best.k}: {best.speedup:.2f}x", (best.k, best.speedup),
                    xytext=(8, -12), textcoords="offset points", fontsize=9)  # fmt: skip
    else:
        ax.set_title("No k beats plain decoding: do not speculate")
    ax.set_xlabel("k, draft tokens per cycle [tokens]")
    ax.set_ylabel("speedup [x]")
    return ax


def speedup_vs_batch(result: Any, ax: Any = None) -> Any:
    """Speedup against batch size from a :class:`~breakeven.optimize.BatchResult`."""
    ax = _axes(ax)
    batches = [p.batch for p in result.speedup_by_batch]
    ax.plot(batches, [p.speedup for p in result.speedup_by_batch], color="tab:blue",
            label="speedup")  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=1.0)
    b = result.breakeven_batch
    if isinstance(b, int):
        ax.axvline(b, color="black", linewidth=2.0, linestyle="--", gid="breakeven")
        ax.annotate(f"break-even batch {b}", (b, 1.0), xytext=(4, 8), textcoords="offset points",
                    fontsize=9)  # fmt: skip
    elif b is None:
        ax.set_title("Speculation never pays within the curve")
    else:
        ax.set_title(f"Speculation still pays at batch {result.max_batch} (beyond the curve)")
    if result.best_k_by_batch is not None:
        twin = ax.twinx()
        twin.step(batches, [p.k if p.speedup > 1 else 0 for p in result.speedup_by_batch],
                  where="mid", color="tab:orange", alpha=0.7)  # fmt: skip
        twin.set_ylabel("best k (0: off) [tokens]", color="tab:orange")
    ax.set_xlabel("batch, sequences decoded together [sequences]")
    ax.set_ylabel("speedup [x]")
    return ax


def measured_vs_predicted(result: Any, ax: Any = None) -> Any:
    """Measured against predicted speedup from a :class:`~breakeven.check.CheckResult`.

    The line y = x, a band of the check's tolerance around it, and each run's
    95% interval as error bars.
    """
    ax = _axes(ax)
    rows = [c for c in result.comparisons
            if not (math.isnan(c.measured_speedup) or math.isnan(c.predicted_speedup))]  # fmt: skip
    if not rows:
        ax.text(0.5, 0.5, "no run has both a measured and a predicted speedup",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
    else:
        x = np.array([c.predicted_speedup for c in rows])
        y = np.array([c.measured_speedup for c in rows])
        low = np.array([c.ci_low for c in rows])
        high = np.array([c.ci_high for c in rows])
        err = np.where(np.isnan(low), 0.0, [y - low, high - y])
        ax.errorbar(x, y, yerr=err, fmt="o", color="tab:blue", capsize=3, gid="runs")
        for c in rows:
            ax.annotate(_literal(c.label), (c.predicted_speedup, c.measured_speedup), xytext=(5, 3),
                        textcoords="offset points", fontsize=8)  # fmt: skip
    lo = min([0.5, *(c.predicted_speedup for c in rows), *(c.measured_speedup for c in rows)])
    hi = max([1.5, *(c.predicted_speedup for c in rows), *(c.measured_speedup for c in rows)])
    line = np.array([lo * 0.9, hi * 1.1])
    ax.plot(line, line, color="black", linewidth=1, gid="identity", label="measured = predicted")
    tol = result.tolerance
    ax.fill_between(line, line * (1 - tol), line * (1 + tol), color="0.85",
                    label=f"within {tol:.0%}")  # fmt: skip
    ax.set_xlim(line)
    ax.set_ylim(line)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_xlabel("predicted speedup, accept_len x step / cycle [x]")
    ax.set_ylabel("measured speedup, tok_s / baseline tok_s [x]")
    return ax


def tornado(result: Any, ax: Any = None) -> Any:
    """Sensitivity: the speedup with each input moved down and up (a :class:`Sensitivity`)."""
    ax = _axes(ax)
    rows = list(reversed(result.rows))  # largest swing on top
    for i, r in enumerate(rows):
        lo, hi = sorted((r.low_speedup, r.high_speedup))
        ax.barh(i, hi - lo, left=lo, color="tab:blue" if r.high_speedup > r.low_speedup
                else "tab:red", height=0.6)  # fmt: skip
    ax.axvline(result.speedup, color="black", linewidth=1.5)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1.0, gid="breakeven")
    ax.set_yticks(range(len(rows)), [f"{r.name} ±{result.delta:.0%}" for r in rows])
    ax.set_xlabel("speedup [x]")
    ax.set_title(f"Sensitivity around {result.speedup:.3f}x (blue: raising the input helps)")
    return ax


def save(ax_or_figure: Any, path: str | os.PathLike[str], *, force: bool = False) -> str:
    """Save a figure as PNG, SVG or PDF (by suffix), atomically; never over a file without force."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise BreakevenError("{0}: got " + escape_braces(repr(path)) + ", expected a file "
                             "name ending in .png, .svg or .pdf", "out")  # fmt: skip
    from breakeven.iotools.atomic import atomic_path
    from breakeven.iotools.paths import check_output_path, output_error

    check_output_path(path)
    figure = getattr(ax_or_figure, "figure", ax_or_figure)
    try:
        with atomic_path(path, force=force) as tmp:
            figure.savefig(tmp, dpi=150)
    except OSError as e:  # after the checks: a full disk, a directory removed meanwhile
        raise output_error("out", path, e) from None
    return path
