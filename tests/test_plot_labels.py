"""What a figure's words say, and that they can be read (issue 43): a crowded speedup surface
labels only the points whose labels fit, names the rest in its legend, and tells a sweep's
loads apart; ``plot schedule``'s legend says which k the schedule chose where, and what its
grey band is, so a chosen k drawn below another k's line is explained."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.path import Path

from breakeven.jobs.drawing import schedule_figure
from breakeven.render import labels, plot

CURVE = "data/llama3_8b_decode_curve.csv"
ACCEPT = {2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54}
"""The docs' schedule example (docs/how-to/plan.md): vLLM issue 20780's EAGLE-3 acceptance."""


def crowded(seed: int, ks=range(1, 9), loads=(1, 4, 16)) -> dict:
    """check's rows of a sweep of many k at several loads: each run measured and predicted,
    and every third k's baselines drifted (so it is placed against the other baseline too)."""
    rng = np.random.default_rng(seed)
    comparisons, baselines = [], []
    for c in loads:
        step = 10.0 + c
        for tok_s in (1000 / step, 1200 / step):
            baselines.append({"model": "m", "hardware": "h", "concurrency": c, "tok_s": tok_s})
        for k in ks:
            tau = 1 + k * 0.85**k * 1.3 + rng.normal(0, 0.05)
            implied = step * (1 + 0.12 * k) * (1 + 0.02 * c) * rng.uniform(0.95, 1.05)
            comparisons.append(
                {
                    "label": f"eagle3-llama3.1-8b-instruct-k{k}",
                    "model": "m",
                    "hardware": "h",
                    "concurrency": c,
                    "accept_len": tau,
                    "implied_cycle_ms": implied,
                    "baseline_tok_s": 1000 / step,
                    "cycle_ms": implied * 0.95,
                    "flags": ["baseline_drift"] if k % 3 == 0 else [],
                }
            )
    return {"comparisons": comparisons, "baselines": baselines, "tolerance": 0.05}


def _drawn_texts(ax):
    """Each text drawn in the axes and its words' box from the renderer (a label's leader
    line, which may cross a contour, left out)."""
    renderer = ax.figure.canvas.get_renderer()
    texts = [t for t in ax.texts if t.get_visible()]
    return [(t, labels.text_box(t, renderer)) for t in texts], renderer


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_crowded_surface_labels_only_what_can_be_read(seed):
    data = crowded(seed)
    points = plot.run_points(data["comparisons"], data["baselines"])
    ax = plot.runs_surface(data)
    ax.figure.canvas.draw()  # boxes where they are drawn
    texts, renderer = _drawn_texts(ax)
    boxes = [box for _, box in texts]
    # No two texts overlap: the points' labels, and the contours' own labels.
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    placed = [(t, box) for t, box in texts if t.get_text().endswith("x") and "\n" in t.get_text()]
    legend = ax.get_legend().get_window_extent(renderer)
    frame = ax.get_window_extent(renderer)
    for t, box in placed:
        assert not box.overlaps(legend)
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        if t.arrow_patch is not None:  # a label away from its point: its line crosses no text
            line = Path([ax.transData.transform(t.xy), box.get_points().mean(axis=0)])
            assert not any(line.intersects_bbox(b) for b in boxes if b is not box)
    # The rest are counted in the legend, which names what every label shares once.
    entries = [t.get_text() for t in ax.get_legend().get_texts()]
    left = len(points) - len(placed)
    assert left > 0 and f"{left} points unlabelled: no room to read the labels" in entries
    assert "names: eagle3-llama3.1-8b-instruct- + the label" in entries
    # The fastest measured run is labelled first, whatever is left out.
    fastest = max((p for p in points if p[3] == "measured"), key=lambda p: p[0] / p[1])
    name = fastest[2].removeprefix("eagle3-llama3.1-8b-instruct-")
    assert any(t.get_text() == f"{name}\n{fastest[0] / fastest[1]:.2f}x" for t, _ in placed)


def test_a_few_runs_are_each_labelled_with_their_load():
    data = crowded(0, ks=(2, 4), loads=(1, 8))
    ax = plot.runs_surface(data)
    shown = [t.get_text() for t in ax.texts if "\n" in t.get_text()]
    # Every measured run is labelled, its k and its load told apart (a sweep's k = 4 at
    # concurrency 1 and at 8 are two points), with the speedup it reads off the surface.
    for x, y, name, kind in plot.run_points(data["comparisons"], data["baselines"]):
        if kind == "measured":
            short = name.removeprefix("eagle3-llama3.1-8b-instruct-")
            assert f"{short}\n{x / y:.2f}x" in shown, (short, shown)
    assert {"k2, concurrency 1", "k4, concurrency 8"} <= {s.split("\n")[0] for s in shown}


def test_one_load_names_no_load_and_a_short_label_keeps_its_start():
    rows = crowded(0, ks=(2, 4), loads=(1,))["comparisons"]
    assert plot.run_names(rows) == [r["label"] for r in rows]
    assert labels.common_start(["k2", "k4"]) == ""  # nothing worth a legend entry
    assert labels.common_start(["eagle3-k2", "eagle3-k4", "eagle3-"]) == ""  # one would be empty


def _legend_entries(ax):
    (legend,) = ax.figure.legends  # under the axes, where it covers no line
    return {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)}


def test_the_schedule_legend_says_which_k_was_chosen_where_and_what_the_band_is():
    """The docs' example: k = 3 is chosen at 1-32 although k = 4's line runs above it at the
    smallest batches, as --min-gain 0.5% merged k = 4's own range into k = 3's; the legend
    says so, and names the chosen k's lines."""
    ax = schedule_figure(
        cost_curve=CURVE, accept_len_by_k=ACCEPT, draft_step_ms=0.98, min_gain=0.005
    )
    entries = _legend_entries(ax)
    assert "k = 3, chosen at batch 1-32" in entries and "k = 2, chosen at batch 33-42" in entries
    assert {"k = 4", "k = 5", "k = 6", "k = 7"} <= set(entries)
    (band,) = [e for e in entries if e.startswith("schedule: the chosen k's speedup")]
    assert "(2 ranges, merged from 3 of the best k)" in band
    assert "--min-gain 0.5%" in band and "less than 0.01%" in band
    (drawn,) = [line for line in ax.get_lines() if line.get_gid() == "schedule"]
    assert entries[band].get_linewidth() == drawn.get_linewidth()  # the band's own handle
    # What the legend explains is there: k = 4's line above the band at batch 1.
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert lines["k = 4"].get_ydata()[0] > drawn.get_ydata()[0]
    assert any("cannot price its k" in e for e in entries)  # k = 7's line stops at 16


def test_an_unmerged_schedule_is_the_upper_envelope_and_says_nothing_of_merging():
    ax = schedule_figure(cost_curve=CURVE, accept_len_by_k=ACCEPT, draft_step_ms=0.98, min_gain=0)
    entries = _legend_entries(ax)
    (band,) = [e for e in entries if e.startswith("schedule: the chosen k's speedup")]
    assert "merged" not in band
    (drawn,) = [line for line in ax.get_lines() if line.get_gid() == "schedule"]
    ks = np.array([line.get_ydata() for line in ax.get_lines() if line.get_label()[:4] == "k = "])
    top = np.nanmax(np.where(np.isnan(ks), -np.inf, ks), axis=0)
    assert np.allclose(drawn.get_ydata(), np.maximum(top, 1.0))
    chosen = [e for e in entries if ", chosen at batch " in e]
    assert len(chosen) >= 2  # each k of the envelope is named with its batches
