"""Labels on pictures that can be read: each beside its point, or further out with a line
to it, never over another label, a contour's label, a marker or the legend, and left out (the
legend says how many) where there is no room.  With :mod:`breakeven.render.plot`, the only
modules that import matplotlib."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Text
from matplotlib.transforms import Bbox

_PLACES = (
    ((6, 6), "left", "bottom"),
    ((6, -6), "left", "top"),
    ((-6, 6), "right", "bottom"),
    ((-6, -6), "right", "top"),
    ((0, 10), "center", "bottom"),
    ((0, -10), "center", "top"),
    ((12, 0), "left", "center"),
    ((-12, 0), "right", "center"),
)
"""The places a label may take beside its point, in order: its offset [points] and its
alignment.  Past them, the same directions 3 and 5 times as far, with a leader line to the
point (:data:`_LEADER`)."""

_LEADER = {"arrowstyle": "->", "color": "black", "linewidth": 0.7, "shrinkA": 1, "shrinkB": 4}
"""The line from a label placed away from its point to the point."""


def _renderer(ax: Any) -> Any:
    """The renderer of ``ax``'s figure, its layout done, so boxes are where they end."""
    figure = ax.figure
    if hasattr(figure, "draw_without_rendering"):
        figure.draw_without_rendering()
    renderer = figure.canvas.get_renderer() if hasattr(figure.canvas, "get_renderer") else None
    return renderer if renderer is not None else FigureCanvasAgg(figure).get_renderer()


def text_box(text: Any, renderer: Any) -> Any:
    """The box of a text's own words [display pixels] (an annotation's leader line left out)."""
    if hasattr(text, "update_positions"):  # an annotation: its words placed from its point
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def _markers(ax: Any, points: Sequence[tuple[float, float]]) -> list[Any]:
    """The boxes of the points' markers [display pixels]."""
    radius = 4 * ax.figure.dpi / 72  # a marker's 6 points across, and a margin
    return [
        Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)
        for x, y in ax.transData.transform(np.asarray(points, dtype=float).reshape(-1, 2))
    ]


def _gaps(box: Any, points: Any) -> Any:
    """How far each point (display pixels, an array of rows) lies from ``box``."""
    dx = np.maximum.reduce([box.x0 - points[:, 0], np.zeros(len(points)), points[:, 0] - box.x1])
    dy = np.maximum.reduce([box.y0 - points[:, 1], np.zeros(len(points)), points[:, 1] - box.y1])
    return np.hypot(dx, dy)


def place_labels(
    ax: Any, labels: Sequence[tuple[float, float, str]], fontsize: int = 8
) -> list[Any]:
    """Label each point ``(x, y, text)`` where it can be read: each label takes the first place
    around its point (:data:`_PLACES`, then further out with a leader line) whose box stays
    inside the axes and covers no text drawn (a contour's label, an earlier label), the legend
    or a point's marker, and whose leader line crosses no text.  A label with no such place is
    left out: give the most informative first.  Returns each label's annotation, or None where
    it was left out."""
    renderer = _renderer(ax)
    frame = ax.get_window_extent(renderer)
    words = [text_box(t, renderer) for t in ax.texts if t.get_visible()]
    legend = ax.get_legend()
    if legend is not None:
        words.append(legend.get_window_extent(renderer))
    centres = ax.transData.transform(
        np.asarray([(x, y) for x, y, _ in labels], float).reshape(-1, 2)
    )
    markers = _markers(ax, [(x, y) for x, y, _ in labels])
    places = [(offset, ha, va, 1) for offset, ha, va in _PLACES]
    places += [((dx * n, dy * n), ha, va, n) for n in (3, 5) for (dx, dy), ha, va in _PLACES]
    drawn: list[Any] = []
    leaders: list[Any] = []
    for i, (x, y, text) in enumerate(labels):
        chosen = None
        at = centres[i]
        for offset, ha, va, far in places:
            note = ax.annotate(
                text,
                (x, y),
                xytext=offset,
                textcoords="offset points",
                ha=ha,
                va=va,
                fontsize=fontsize,
                zorder=6,
                arrowprops=_LEADER if far > 1 else None,
            )
            box = text_box(note, renderer).expanded(1.05, 1.1)
            inside = frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
            clear = inside and not any(box.overlaps(t) for t in [*words, *markers])
            clear &= not any(line.intersects_bbox(box) for line in leaders)
            leader = Path([at, [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]])
            if clear and far > 1:
                clear = not any(leader.intersects_bbox(t) for t in words)
            elif clear:  # no leader line: the label must be nearer its point than any other
                gaps = _gaps(box, centres)
                clear = bool((np.delete(gaps, i) > gaps[i] + 2).all())
            if clear:
                chosen = note
                words.append(box)
                leaders += [leader] if far > 1 else []
                break
            note.remove()
        drawn.append(chosen)
    return drawn


def _unlabelled(n: int) -> Line2D:
    """The legend's entry for the ``n`` points left unlabelled (:func:`place_labels`)."""
    s = "" if n == 1 else "s"
    return Line2D(
        [], [], linestyle="none", label=f"{n} point{s} unlabelled: no room to read the label{s}"
    )


def label_points(
    ax: Any,
    labels: Sequence[tuple[float, float, str]],
    legend: Callable[[list[Any]], Any],
    fontsize: int = 8,
) -> list[Any]:
    """:func:`place_labels` under a legend that names how many points were left unlabelled:
    ``legend(extra)`` draws the axes' legend with the ``extra`` handles added.  A label that
    the grown legend would cover, or that the final layout puts outside the axes, is left out
    too.  Call it once the axes have their title and axis labels.  Returns each label's
    annotation, or None where it was left out."""
    legend([])
    drawn = place_labels(ax, labels, fontsize)
    while True:
        left = drawn.count(None)
        if left:
            legend([_unlabelled(left)])
        renderer = _renderer(ax)
        frame = ax.get_window_extent(renderer)
        covered = ax.get_legend().get_window_extent(renderer)
        for i, note in enumerate(drawn):
            box = None if note is None else text_box(note, renderer)
            if box is not None and (
                box.overlaps(covered)
                or not (frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1))
            ):
                note.remove()
                drawn[i] = None
        if drawn.count(None) == left:
            return drawn


def common_start(labels: Sequence[str], least: int = 12) -> str:
    """The start two or more ``labels`` share up to a separator (``-``, ``_``, ``/``, ``.``, a
    space), where it is ``least`` characters or more and every label goes on past it: a
    figure says it once (``eagle3-llama3.1-70b-instruct-``) and labels its points with the
    rest (``k4``); else ""."""
    if len(labels) < 2:
        return ""
    low, high = min(labels), max(labels)  # the sorted ends share what every label shares
    n = next(
        (i for i, (a, b) in enumerate(zip(low, high, strict=False)) if a != b),
        min(len(low), len(high)),
    )
    shared = low[:n]
    cut = max(shared.rfind(c) for c in "-_/. ") + 1
    start = shared[:cut]
    return start if len(start) >= least and all(len(x) > cut for x in labels) else ""
