"""Pictures: speedup surfaces with their break-even contour, speedup against k and batch,
measured against predicted, and sensitivity.

Every function draws on ``ax`` (a new figure's axes when None), returns the
axes, and never shows anything: save with ``ax.figure.savefig(...)`` or
:func:`save`.  matplotlib is imported only here and in :mod:`breakeven.render.labels` (the
points' labels), through its object-oriented API (no pyplot), so it runs headless.  The break-even line of
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
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.quantities import MAX_K
from breakeven.iotools.atomic import atomic_path
from breakeven.iotools.paths import check_output_path, output_error
from breakeven.model import _xp, speedup
from breakeven.model.acceptance import accept_len_from_alpha
from breakeven.render import printable
from breakeven.render.deployment import loss_text
from breakeven.render.labels import common_start, label_points

SPEEDUP_CMAP = "RdBu"  # red below 1 (speculation loses), blue above
DEFAULT_LEVELS = (0.5, 0.8, 1.25, 1.5, 2.0, 3.0)
FORMATS = (".png", ".svg", ".pdf")
LARGEST_AXIS = 1e6
"""The furthest a surface's axes reach (tokens per cycle, steps per cycle): past it nothing
can be read off the picture, and near a double's limit its cells' edges overflow."""


def _literal(label: Any) -> str:
    """A label drawn as given: control characters removed (as in text output) and ``$``
    escaped, which matplotlib would otherwise parse as mathtext (``$\\frac{$`` fails)."""
    return printable(label).replace("$", r"\$")


OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
"""Okabe and Ito's palette, told apart under each common colour-vision deficiency
(deuteranopia, protanopia, tritanopia); lines also differ in dash (:data:`DASHES`)."""

DASHES = ("-", "--", "-.", ":")
"""Line styles cycled with the palette, so that neighbouring lines differ in two ways."""

WIN, LOSS = OKABE_ITO[0], OKABE_ITO[3]
"""A win (blue) and a loss (vermillion), as the speedup map colours them."""


def line_style(i: int) -> dict[str, Any]:
    """Colour and dash of line ``i`` of a figure's family of lines (one per k, one per
    server)."""
    return {"color": OKABE_ITO[i % 7], "linestyle": DASHES[i % len(DASHES)]}


_POINT_STYLE = {
    "measured": ("o", "#F0E442", "black", "measured (filled)"),
    "predicted": ("o", "white", "black", "predicted from costs (hollow)"),
    "other": ("o", "0.7", "0.3", "measured against another baseline (grey)"),
    "given": ("D", "white", "black", "prediction (diamond)"),
}
"""Marker, face and edge colour of each kind of point on a surface, and its legend entry."""


def _point_legend(ax: Any, kinds: Sequence[str], extra: Sequence[Any] = (), **kwargs: Any) -> Any:
    """A legend entry for each kind of point drawn, the break-even line, and ``extra``."""

    handles = [Line2D([], [], color="black", linewidth=2.0, label="break-even (speedup = 1)")]
    for kind in dict.fromkeys(kinds):
        marker, face, edge, label = _POINT_STYLE.get(kind, _POINT_STYLE["given"])
        handles.append(
            Line2D(
                [],
                [],
                marker=marker,
                markerfacecolor=face,
                markeredgecolor=edge,
                linestyle="none",
                label=label,
            )
        )
    return ax.legend(handles=[*handles, *extra], fontsize=8, **kwargs)


def run_points(
    runs: Sequence[dict[str, Any]], baselines: Sequence[dict[str, Any]] = ()
) -> list[tuple[float, float, str, str]]:
    """Where each run sits on the (accept_len, cycle/step) surface, from ``check``'s
    comparisons or ``compare``'s runs (their ``to_dict`` rows).

    Each run with an accept_len and a measured rate is placed at its implied cycle over the
    baseline's step, ``(1000 * accept_len / tok_s) / (1000 / baseline_tok_s)``, where the
    surface reads its measured speedup (``"measured"``).  Where costs were given, also at its
    cycle over the step (``"predicted"``).  Where its baseline drifted or was stale, also
    against each other baseline of its model, hardware and concurrency (``"other"``), from
    ``baselines`` (``check``'s).  A run without an accept_len has no place on the surface.
    """
    points = []
    names = run_names(runs)
    for r, label in zip(runs, names, strict=True):
        tau, implied, base = r.get("accept_len"), r.get("implied_cycle_ms"), r.get("baseline_tok_s")
        if not _positive(tau):
            continue
        if _positive(implied) and _positive(base):
            points.append((tau, implied * base / 1000.0, label, "measured"))
        if _positive(r.get("cycle_ms")) and _positive(base):
            points.append((tau, r["cycle_ms"] * base / 1000.0, label, "predicted"))
        # Against another baseline: the measured cycle, else the one given (a prediction).
        cycle, what = (implied, "") if _positive(implied) else (r.get("cycle_ms"), "predicted ")
        if not ({"baseline_drift", "stale_baseline"} & set(r.get("flags") or ())) or not _positive(
            cycle
        ):
            continue
        for b in baselines:
            same = all(b.get(key) == r.get(key) for key in ("model", "hardware"))
            same &= _same_number(b.get("concurrency"), r.get("concurrency"))
            if same and _positive(b.get("tok_s")) and not _same_number(b["tok_s"], base):
                points.append(
                    (
                        tau,
                        cycle * b["tok_s"] / 1000.0,
                        f"{label} {what}vs the {b['tok_s']:.1f} tok/s baseline",
                        "other",
                    )
                )
    return points


def run_names(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Each run's name on a figure: its label, and its load where the runs differ in load
    (a sweep's ``eagle3-k4, concurrency 4`` and ``eagle3-k4, concurrency 1`` are two
    points)."""
    loads = [_load(r) for r in runs]
    differ = len(set(loads)) > 1
    return [
        str(r.get("label") or "run") + (f", {load}" if differ and load else "")
        for r, load in zip(runs, loads, strict=True)
    ]


def _load(r: dict[str, Any]) -> str:
    """A run's load in words: ``2 req/s`` (open loop) or ``concurrency 4``; "" where unknown."""
    rate, conc = r.get("request_rate"), r.get("concurrency")
    if _positive(rate):
        return f"{rate:g} req/s"
    return f"concurrency {conc:g}" if _positive(conc) else ""


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _same_number(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9)


def surface_around(
    points: Sequence[tuple[Any, ...]], ax: Any = None, title: str | None = None
) -> Any:
    """:func:`surface` with axes that reach past every point (at least 1 to 4 each way)."""
    largest = LARGEST_AXIS / 1.2
    for x, y, *_ in points:
        if not (0 < x <= largest and 0 < y <= largest):
            raise BreakevenError(
                "points: got (" + escape_braces(f"{x:g}, {y:g}") + "), "
                f"expected a point within (0, {largest:g}] on each axis"
            )
    x_high = max([4.0] + [1.2 * p[0] for p in points])
    y_low = min([1.0] + [0.8 * p[1] for p in points])
    y_high = max([4.0] + [1.2 * p[1] for p in points])
    return surface(
        ax,
        accept_len=(1.0, x_high),
        cycle_over_step=(y_low, y_high),
        points=points,
        title=title,
    )


def prediction_surface(p: dict[str, Any], ax: Any = None, label: str = "prediction") -> Any:
    """:func:`surface_around` a prediction (``Prediction.to_dict()``), its point (a diamond,
    ``label``) placed at (accept_len [tokens/cycle], cycle/step [steps per cycle]) where it
    has both; cycle/step is its breakeven_accept_len over its target_speedup.  The title
    carries the inputs, rounded."""
    tau, needed = p.get("accept_len"), p.get("breakeven_accept_len")
    ratio = needed / p.get("target_speedup", 1.0) if needed else None
    placed = [(tau, ratio, label, "given")] if tau and ratio else []
    return surface_around(placed, ax, title=prediction_title(p))


def prediction_title(p: dict[str, Any]) -> str:
    """A prediction's inputs in a title, rounded: its baseline, cycle and acceptance."""
    parts = []
    if _positive(p.get("baseline_tok_s")):
        parts.append(f"baseline {p['baseline_tok_s']:.3g} tok/s")
    elif _positive(p.get("step_ms")):
        parts.append(f"step {p['step_ms']:.3g} ms")
    if _positive(p.get("cycle_ms")):
        parts.append(f"cycle {p['cycle_ms']:.3g} ms")
    if _positive(p.get("accept_len")):
        parts.append(f"accept_len {p['accept_len']:.3g}")
    if p.get("k"):
        parts.append(f"k = {p['k']}")
    return "Speedup" + (f" ({', '.join(parts)})" if parts else "")


def _axes(ax: Any, size: tuple[float, float] = (6.4, 4.8)) -> Any:
    """``ax``, else the axes of a new figure of ``size`` [inches], laid out constrained."""
    if ax is not None:
        return ax
    figure = Figure(figsize=size, layout="constrained")
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
    if low < 1.0 < high:  # named in the legend: an inline label would cut the line
        line = ax.contour(x, y, speedup, levels=[1.0], colors="black", linewidths=2.0)
        line.set_gid("breakeven")


def surface(
    ax: Any = None,
    *,
    accept_len: tuple[float, float] = (1.0, 4.0),
    cycle_over_step: tuple[float, float] = (1.0, 4.0),
    resolution: int = 300,
    levels: Sequence[float] = DEFAULT_LEVELS,
    points: Sequence[tuple[float, float, str]] = (),
    title: str | None = None,
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
    points : sequence of (accept_len, cycle_over_step, label[, kind])
        Operating points to overlay; ``kind`` (the point's gid) is ``"measured"`` (a
        measured run, filled), ``"predicted"`` (from costs given, hollow), ``"other"`` (a
        measured run against another baseline, grey) or ``"given"`` (a prediction from the
        inputs typed in, a diamond; the default).  A legend names each kind drawn.
    title : str, optional
        The title; by default "Speculative decoding speedup".
    """

    for name, (low, high) in (("accept_len", accept_len), ("cycle_over_step", cycle_over_step)):
        if not (0 < low < high <= LARGEST_AXIS):
            raise BreakevenError(
                "{0}: got " + f"({low:g}, {high:g}), expected a range from "
                f"above 0 to at most {LARGEST_AXIS:g}",
                name,
            )
    ax = _axes(ax)
    tau = np.linspace(max(1.0, accept_len[0]), accept_len[1], resolution)
    ratio = np.linspace(cycle_over_step[0], cycle_over_step[1], resolution)
    grid = speedup(tau[None, :], 1.0, ratio[:, None])
    _speedup_map(ax, tau, ratio, grid, levels)
    kinds = []
    for point in points:
        x, y = point[:2]
        kind = point[3] if len(point) > 3 else "given"
        marker, face, edge, _ = _POINT_STYLE.get(kind, _POINT_STYLE["given"])
        ax.plot(
            [x],
            [y],
            marker=marker,
            color=edge,
            markerfacecolor=face,
            zorder=5,
            gid=kind,
            linestyle="none",
        )
        kinds.append(kind)
    ax.set_xlabel("accept_len, tokens per cycle incl. bonus [tokens/cycle]")
    ax.set_ylabel("cycle_ms / step_ms [steps per cycle]")
    ax.set_title(title or "Speculative decoding speedup")
    first = sorted(points, key=_label_order)
    start = common_start([str(p[2]) for p in first])
    named = [Line2D([], [], linestyle="none", label=f"names: {_literal(start)} + the label")]
    label_points(
        ax,
        [(p[0], p[1], f"{_literal(p[2][len(start) :])}\n{p[0] / p[1]:.2f}x") for p in first],
        lambda extra: _point_legend(
            ax, kinds, [*(named if start else []), *extra], loc="upper left"
        ),
    )
    return ax


_LABEL_ORDER = ("given", "measured", "predicted", "other")
"""The kinds of point labelled first where not all can be: the one typed in, then measured
runs, then predictions, then runs against another baseline (the legend names their kind)."""


def _label_order(point: Sequence[Any]) -> tuple[int, float]:
    """A point's place in the labelling order: its kind's, then the fastest first."""
    kind = point[3] if len(point) > 3 else "given"
    order = _LABEL_ORDER.index(kind) if kind in _LABEL_ORDER else 0
    return order, -point[0] / point[1]


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

    if (cost_ratio is None) == (cycle_over_step is None):
        raise BreakevenError("give one of {0} or {1}", "cost_ratio", "cycle_over_step")
    ax = _axes(ax)
    a = np.linspace(alpha[0], alpha[1], resolution)

    k = np.arange(1, _xp.count("k_max", k_max, MAX_K) + 1)[:, None]
    cycle = (
        k * cost_ratio + 1 if cost_ratio is not None else np.full_like(k, cycle_over_step, float)
    )
    grid = speedup(accept_len_from_alpha(a[None, :], k), 1.0, cycle)
    _speedup_map(ax, a, k[:, 0], grid, levels)
    best = np.argmax(grid, axis=0) + 1
    pays = grid.max(axis=0) > 1
    ax.plot(a[pays], best[pays], color="gold", linewidth=2, label="best k", gid="best_k")

    handles = [
        Line2D([], [], color="black", linewidth=2.0, label="break-even (speedup = 1)"),
        Line2D([], [], color="gold", linewidth=2, label="best k"),
    ]
    for x, y, _ in points:
        marker, face, edge, _ = _POINT_STYLE["given"]
        ax.plot([x], [y], marker=marker, color=edge, markerfacecolor=face, zorder=5)
    if points:
        handles.append(
            Line2D([], [], marker="D", color="black", markerfacecolor="white", linestyle="none")
        )
        handles[-1].set_label("prediction (diamond)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("alpha, per-token acceptance [probability]")
    ax.set_ylabel("k, draft tokens per cycle [tokens]")
    form = (
        f"cycle = k x {cost_ratio:.3g} + 1 steps"
        if cost_ratio is not None
        else f"cycle {cycle_over_step:.3g} steps at every k"
    )
    ax.set_title(f"Speedup by acceptance and k ({form})")
    label_points(
        ax,
        [(x, y, _literal(label)) for x, y, label in points],
        lambda extra: ax.legend(handles=[*handles, *extra], loc="upper left", fontsize=8),
    )
    return ax


def speedup_vs_k(result: Any, ax: Any = None) -> Any:
    """Speedup at each k of an :class:`~breakeven.prediction.optimize.OptimizeResult`, best k marked."""

    ax = _axes(ax)
    ks = [o.k for o in result.by_k]
    ax.plot(ks, [o.speedup for o in result.by_k], marker="o", color=WIN, label="speedup")
    ax.margins(x=0.08, y=0.1)  # room for the best k's star where it is the last or the highest
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axhline(1.0, color="black", linewidth=1.5, gid="breakeven")
    ax.annotate(
        "break-even",
        (ks[-1], 1.0),
        xytext=(0, 3),
        textcoords="offset points",
        ha="right",
        fontsize=8,
    )
    if result.best_k:
        best = next(o for o in result.by_k if o.k == result.best_k)
        ax.plot(
            [best.k],
            [best.speedup],
            marker="*",
            markersize=16,
            color="gold",
            markeredgecolor="black",
            gid="best_k",
            zorder=5,
        )
        last = best.k == max(ks)
        ax.annotate(
            f"best k = {best.k}: {best.speedup:.2f}x",
            (best.k, best.speedup),
            xytext=(-10, -26) if last else (8, -12),
            textcoords="offset points",
            ha="right" if last else "left",
            fontsize=9,
        )
    else:
        ax.set_title("No k beats plain decoding: do not speculate")
    ax.set_xlabel("k, draft tokens per cycle [tokens]")
    ax.set_ylabel("speedup [x]")
    return ax


def speedup_vs_batch(result: Any, ax: Any = None) -> Any:
    """Speedup against batch size from a :class:`~breakeven.planning.batch.BatchResult`."""
    ax = _axes(ax)
    batches = [p.batch for p in result.speedup_by_batch]
    ax.plot(batches, [p.speedup for p in result.speedup_by_batch], color=WIN, label="speedup")
    ax.axhline(1.0, color="black", linewidth=1.0)
    b = result.breakeven_batch
    if isinstance(b, int):
        ax.axvline(b, color="black", linewidth=2.0, linestyle="--", gid="breakeven")
        # Under the line at 1, where no speedup is drawn, on the side with room.
        left = b > (batches[0] + batches[-1]) / 2
        ax.annotate(
            f"break-even batch {b}",
            (b, 1.0),
            xytext=(-6 if left else 6, -6),
            va="top",
            textcoords="offset points",
            ha="right" if left else "left",
            fontsize=9,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"},
            zorder=6,
        )
    elif b is None:
        ax.set_title("Speculation never pays within the curve")
    else:
        ax.set_title(f"Speculation still pays at batch {result.max_batch} (beyond the curve)")
    if result.best_k_by_batch is not None:
        twin = ax.twinx()
        twin.step(
            batches,
            [p.k if p.speedup > 1 else 0 for p in result.speedup_by_batch],
            where="mid",
            color=OKABE_ITO[1],
            linestyle="--",
        )
        twin.set_ylabel("best k (0: off) [tokens]", color=OKABE_ITO[1])
        twin.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(
            handles=[
                Line2D([], [], color=WIN, label="speedup (left axis)"),
                Line2D([], [], color=OKABE_ITO[1], linestyle="--", label="best k (right axis)"),
            ],
            loc="upper center",
            fontsize=9,
        )
    ax.set_xlabel("batch, sequences decoded together [sequences]")
    ax.set_ylabel("speedup [x]")
    return ax


def schedule(grid: Any, plan: Any, ax: Any = None) -> Any:
    """Speedup against batch for each k of a :class:`~breakeven.planning.batch.SpeedupGrid`, the
    :class:`~breakeven.planning.schedule.Schedule` over them (gid ``"schedule"``: the upper envelope
    where it is unmerged), plain decoding at 1 and the break-even batch (gid
    ``"breakeven"``)."""
    ax = _axes(ax, size=(6.4, 6.4))  # the legend goes under the axes
    batches = np.asarray(grid.batches, dtype=float)
    speedups = np.asarray(grid.speedup, dtype=float)
    chosen_at: dict[int, list[str]] = {}
    for r in plan.ranges:
        chosen_at.setdefault(r.k, []).append(
            f"{r.first}-{r.last}" if r.last > r.first else str(r.first)
        )
    for j, k in enumerate(grid.ks):
        where = chosen_at.get(k)
        ax.plot(
            batches,
            speedups[:, j],
            linewidth=2.0 if where else 1.3,
            label=f"k = {k}" + (f", chosen at batch {', '.join(where)}" if where else ""),
            zorder=3,
            **line_style(j),
        )
    chosen = np.array(
        [
            1.0 if plan.k_at(int(b)) == 0 else speedups[i, grid.ks.index(plan.k_at(int(b)))]
            for i, b in enumerate(grid.batches)
        ]
    )
    # A wide grey band under the lines: the chosen k's own line stays visible on it.
    ax.plot(
        batches,
        chosen,
        color="0.6",
        linewidth=7,
        alpha=0.45,
        solid_capstyle="butt",
        gid="schedule",
        zorder=2,
        label=schedule_band_text(plan),
    )
    ax.axhline(1.0, color="grey", linewidth=1.0, linestyle=":")
    for r in plan.ranges[1:]:
        ax.axvline(r.first - 0.5, color="black", linewidth=0.5, alpha=0.4)
    top = np.nanmax(np.concatenate([speedups.ravel(), chosen]))
    for r in plan.ranges:
        ax.annotate(
            f"k = {r.k}", ((r.first + r.last) / 2, top), ha="center", va="bottom", fontsize=8
        )
    b = plan.breakeven_batch
    if isinstance(b, int):
        ax.axvline(b, color="black", linewidth=2.0, linestyle="--", gid="breakeven")
        ax.annotate(
            f"break-even batch {b}",
            (b, 1.0),
            xytext=(4, -14),
            textcoords="offset points",
            fontsize=9,
        )
    if grid.max_batch >= 64:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("batch, sequences decoded together [sequences]")
    ax.set_ylabel("speedup over plain decoding [x]")
    ax.set_title(
        f"schedule: {plan.gain:+.1%} throughput over the best fixed k ({plan.best_fixed_k})"
    )
    handles, _ = ax.get_legend_handles_labels()
    if np.isnan(speedups).any(axis=0).any():
        handles.append(Line2D([], [], linestyle="none", label=_UNPRICED))
    if ax.figure.get_layout_engine() is not None:  # under the figure, where it hides no line
        ax.figure.legend(handles=handles, fontsize=8, loc="outside lower center", ncols=2)
    else:
        ax.legend(handles=handles, fontsize=8, loc="lower left")
    return ax


_UNPRICED = "a line ends where the cost model\ncannot price its k (verify or cache)"
"""The schedule figure's legend entry where some k's line stops short of the largest batch."""


def schedule_band_text(plan: Any) -> str:
    """The legend entry of a schedule's grey band: the chosen k's speedup at each batch, and
    why it can sit below another k's line there (ranges merged: a k with a range of its own
    would gain less than ``--min-gain``)."""
    count = len(plan.ranges)
    text = f"schedule: the chosen k's speedup\n({count} range{'s' * (count != 1)}"
    if plan.unmerged_ranges <= count:
        return text + ")"
    return text + (
        f", merged from {plan.unmerged_ranges} of the best k):\nwhere a line runs above it, "
        f"that k would\ngain less than --min-gain {plan.min_gain:.1%} in a range\nof its own "
        f"(the merge gives up {loss_text(plan.merge_loss)})"
    )


def fleet_acceptance(
    series: dict[str, tuple[Sequence[float], Sequence[float]]], ax: Any = None
) -> Any:
    """accept_len over time, a line per server (``series``: label -> (Unix seconds, values))."""
    drawn = {k: v for k, v in series.items() if v[0]}
    if not drawn:
        raise NothingToDraw("{0}: no server showed an accept_len (no speculation)", "series")
    ax = _axes(ax)
    start = min(min(t) for t, _ in drawn.values())
    for i, (label, (times, values)) in enumerate(sorted(drawn.items())):
        ax.plot(
            [(t - start) / 3600 for t in times],
            values,
            linewidth=1.0,
            label=_literal(label),
            **line_style(i),
        )
    ax.set_xlabel("hours since the start of the range [h]")
    ax.set_ylabel("accept_len [tokens/cycle]")
    if len(drawn) <= 12:
        ax.legend(fontsize=7, loc="best")
    return ax


def fleet_above(instances: Sequence[dict[str, Any]], ax: Any = None) -> Any:
    """Each server's share of time above its break-even batch (``fleet`` with a cost model)."""
    shown = [i for i in instances if i.get("share_above_breakeven") is not None]
    if not shown:
        raise NothingToDraw(
            "{0}: needs a cost model (--fit-file) for the break-even batch", "instances"
        )
    ax = _axes(ax)
    labels = [_literal(i["instance"]) for i in shown]
    ax.barh(labels, [100 * i["share_above_breakeven"] for i in shown], color=LOSS)
    ax.set_xlabel("time above the break-even batch [%]")
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    return ax


class NothingToDraw(BreakevenError):
    """A figure with nothing to show: its message says what is missing.  ``plot`` commands
    exit 2 with it, reports leave the figure out and print the sentence."""


def _rows_of(result: Any) -> tuple[list[dict[str, Any]], float]:
    """``check``'s comparisons or ``compare``'s runs as plain rows, and the tolerance."""
    data = result if isinstance(result, dict) else result.to_dict()
    return list(data.get("comparisons", data.get("runs", []))), float(data["tolerance"])


def measured_vs_predicted(result: Any, ax: Any = None) -> Any:
    """Measured against predicted speedup from a :class:`~breakeven.measurements.check.CheckResult` or a
    :class:`~breakeven.measurements.compare.CompareResult` (or either's ``to_dict()``).

    The line y = x, a band of the check's tolerance around it, and each run's
    95% interval as error bars.  Raises :class:`NothingToDraw` when no run has both a
    measured and a predicted speedup.
    """
    comparisons, tol = _rows_of(result)
    rows = [
        c
        for c in comparisons
        if _positive(c.get("measured_speedup")) and _positive(c.get("predicted_speedup"))
    ]
    if not rows:
        raise NothingToDraw(
            "no run has both a measured and a predicted speedup: a prediction "
            "needs the run's accept_len and the cycle's cost (cycle_ms, or verify_ms and "
            "draft_ms, in the rows; else --cycle-ms, --verify-ms or --fit-file)"
        )
    ax = _axes(ax)
    names = run_names(rows)
    x = np.array([c["predicted_speedup"] for c in rows])
    y = np.array([c["measured_speedup"] for c in rows])
    low = np.array([np.nan if c["ci_low"] is None else c["ci_low"] for c in rows], dtype=float)
    high = np.array([np.nan if c["ci_high"] is None else c["ci_high"] for c in rows], dtype=float)
    # A run's interval is around its interval's own estimate, which may differ from the
    # pooled speedup drawn by a hair (0.06% seen): the bar then reaches the point, never below.
    err = np.maximum(np.where(np.isnan(low), 0.0, [y - low, high - y]), 0.0)
    ax.errorbar(
        x, y, yerr=err, fmt="o", color=WIN, capsize=3, gid="runs", label="run (95% interval)"
    )
    lo = min(0.5, float(x.min()), float(y.min()))
    hi = max(1.5, float(x.max()), float(y.max()))
    line = np.array([lo * 0.9, hi * 1.1])
    ax.plot(line, line, color="black", linewidth=1, gid="identity", label="measured = predicted")
    ax.fill_between(
        line, line * (1 - tol), line * (1 + tol), color="0.85", label=f"within {tol:.0%}"
    )
    ax.set_xlim(line)
    ax.set_ylim(line)
    handles, _ = ax.get_legend_handles_labels()
    order = np.argsort(-y, kind="stable")  # the fastest labelled first
    ax.set_xlabel("predicted speedup, accept_len x step / cycle [x]")
    ax.set_ylabel("measured speedup, tok_s / baseline tok_s [x]")
    label_points(
        ax,
        [(x[i], y[i], _literal(names[i])) for i in order],
        lambda extra: ax.legend(handles=[*handles, *extra], loc="upper left", fontsize=8),
    )
    return ax


def runs_surface(result: Any, ax: Any = None) -> Any:
    """Every run of a check or compare placed on the speedup surface (:func:`run_points`);
    raises :class:`NothingToDraw` when none has an accept_len and a rate."""
    data = result if isinstance(result, dict) else result.to_dict()
    rows, _ = _rows_of(data)
    points = run_points(rows, data.get("baselines", ()))
    if not points:
        raise NothingToDraw(
            "no run has both an accept_len and a measured rate (or a cycle "
            "cost) to place on the speedup surface"
        )
    return surface_around(points, ax)


def tornado(result: Any, ax: Any = None) -> Any:
    """Sensitivity: the speedup with each input moved down and up (a :class:`Sensitivity`)."""
    ax = _axes(ax)
    rows = list(reversed(result.rows))  # largest swing on top
    for i, r in enumerate(rows):
        lo, hi = sorted((r.low_speedup, r.high_speedup))
        ax.barh(
            i,
            hi - lo,
            left=lo,
            color=WIN if r.high_speedup > r.low_speedup else LOSS,
            hatch="" if r.high_speedup > r.low_speedup else "//",
            edgecolor="white",
            height=0.6,
        )
    ax.axvline(result.speedup, color="black", linewidth=1.5)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1.0, gid="breakeven")
    ax.set_yticks(range(len(rows)), [f"{r.name} ±{result.delta:.0%}" for r in rows])
    ax.set_xlabel("speedup [x]")

    ax.legend(
        handles=[
            Patch(facecolor=WIN, label="raising the input helps"),
            Patch(facecolor=LOSS, hatch="//", edgecolor="white", label="raising it hurts"),
            Line2D(
                [], [], color="black", linewidth=1.5, label=f"at the inputs: {result.speedup:.3f}x"
            ),
            Line2D([], [], color="black", linestyle="--", linewidth=1.0, label="break-even"),
        ],
        fontsize=8,
        loc="best",
    )
    ax.set_title(f"Sensitivity of the speedup, each input moved ±{result.delta:.0%}")
    return ax


def save(ax_or_figure: Any, path: str | os.PathLike[str], *, force: bool = False) -> str:
    """Save a figure as PNG, SVG or PDF (by suffix), atomically; never over a file without force."""
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise BreakevenError(
            "{0}: got " + escape_braces(repr(path)) + ", expected a file "
            "name ending in .png, .svg or .pdf",
            "out",
        )

    check_output_path(path)
    figure = getattr(ax_or_figure, "figure", ax_or_figure)
    try:
        with atomic_path(path, force=force) as tmp:
            figure.savefig(tmp, dpi=150)
    except OSError as e:  # after the checks: a full disk, a directory removed meanwhile
        raise output_error("out", path, e) from None
    return path
