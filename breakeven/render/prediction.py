"""Renderers of ``predict``, ``moe`` and sensitivity: quantities as label, value, unit and JSON
key, and which input moves the speedup most."""

from __future__ import annotations

import html

from breakeven.core.quantities import number_text
from breakeven.render.text import (
    Row,
    fitted,
    format_value,
    grid,
    html_table,
    kv_html,
    kv_lines,
    kv_row,
    paint,
)

# Sections of the predict table, in order, and why a field can be null.
_SECTIONS = (
    (
        "Inputs",
        (
            "baseline_tok_s",
            "step_ms",
            "verify_ms",
            "draft_ms",
            "overhead_ms",
            "cycle_ms",
            "cost_ratio",
            "k",
            "accept_len",
            "alpha",
        ),
    ),
    ("With speculation", ("speedup", "speedup_low", "speedup_high", "spec_tok_s")),
    (
        "Break-even",
        (
            "breakeven_accept_len",
            "breakeven_alpha",
            "max_cycle_ms",
            "max_verify_ms",
            "max_draft_ms",
            "max_baseline_tok_s",
        ),
    ),
)


def _rows(p: Row) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """Sections of a prediction's rows: the keys ``to_dict`` has (None: no value satisfies)."""
    sections = []
    target = p.get("target_speedup", 1.0)
    for title, keys in _SECTIONS:
        rows = [kv_row(key, p[key]) for key in keys if key in p]
        if rows:
            if title == "Break-even" and target != 1.0:
                title = f"Target speedup {target:g}x"
            sections.append((title, rows))
    return sections


def verdict(p: Row) -> str | None:
    """One sentence: does speculation pay at these measurements (a prediction's dict)?"""
    speedup, tau, needed = (p.get(k) for k in ("speedup", "accept_len", "breakeven_accept_len"))
    if speedup is None or tau is None or needed is None:
        return None
    s = p.get("target_speedup", 1.0)
    goal = "break even" if s == 1.0 else f"reach {s:g}x"
    if speedup > s:
        word = "pays" if s == 1.0 else "reaches the target"
        how = f"accept_len {number_text(tau, 3)} > {number_text(needed, 3)} needed to {goal}"
        return f"Speculation {word}: {number_text(speedup, 3)}x the baseline rate ({how})."
    if speedup == s:
        return f"Speculation breaks exactly even at {number_text(speedup, 3)}x."
    word = "loses" if s == 1.0 else "misses the target"
    how = f"accept_len {number_text(tau, 3)} <= {number_text(needed, 3)} needed to {goal}"
    return f"Speculation {word}: {number_text(speedup, 3)}x the baseline rate ({how})."


def flagged(v: str | None, p: Row) -> str | None:
    """The verdict ``v`` saying, before its first colon, that an input is flagged: ``Speculation
    pays (flagged): 2.782x ...``."""
    if not v or not p.get("flags"):
        return v
    head, colon, rest = v.partition(":")
    return f"{head} (flagged):{rest}" if colon else f"{v.removesuffix('.')} (flagged)."


@fitted
def prediction_text(p: Row) -> str:
    """What ``breakeven predict`` prints (from ``Prediction.to_dict()``): the verdict first,
    then the table (label, value, unit and JSON key per line)."""
    v = flagged(verdict(p), p)
    role = None if not v else "win" if " pays" in v or "reaches" in v else "loss"
    head = [paint(v, role)] if v and "exactly" not in v else [v] if v else []
    if p.get("flags"):  # the headline says so, and the flags follow it
        head.append(paint("Flagged:", "warn"))
        head += [f"- {f['code']}: {f['message']}." for f in p["flags"]]
    lines = [*head, ""] if head else []
    lines += kv_lines(_rows(p))
    if p.get("breakeven_alpha_by_k"):
        lines.append(_alpha_table_title(p))
        lines.append("   k  breakeven_alpha")
        for row in p["breakeven_alpha_by_k"]:
            lines.append(
                f"  {row['k']:>2}  {format_value('breakeven_alpha', row['breakeven_alpha'])}"
            )
    return "\n".join(lines).rstrip() + "\n"


def _alpha_table_title(p: Row) -> str:
    target = p.get("target_speedup", 1.0)
    goal = "to break even" if target == 1.0 else f"for {target:g}x"
    if p.get("cost_ratio") is not None:
        held = f"cycle = k * {p['cost_ratio']:g} + 1 target steps"
    else:
        held = f"cycle/step = {number_text(p['breakeven_accept_len'] / target, 3)} at every k"
    return f"Smallest per-token acceptance alpha {goal}, by k ({held}):"


def prediction_html(p: Row) -> str:
    """The same table as HTML, for notebooks."""
    out = kv_html(_rows(p))
    if p.get("flags"):
        items = "".join(
            f"<li>{html.escape(f['code'])}: {html.escape(f['message'])}.</li>" for f in p["flags"]
        )
        out = f"<p>Flagged:</p>\n<ul>{items}</ul>\n{out}"
    v = flagged(verdict(p), p)
    return f"<p>{html.escape(v)}</p>\n{out}" if v else out


_MOE_TITLE = "Mixture-of-Experts forward"


@fitted
def moe_text(summary: dict[str, float]) -> str:
    """What ``breakeven moe`` prints (from ``MoESummary.to_dict()``)."""
    rows = [kv_row(key, value) for key, value in summary.items()]
    return "\n".join(kv_lines([(_MOE_TITLE, rows)])).rstrip() + "\n"


def moe_html(summary: dict[str, float]) -> str:
    """The same table as HTML, for notebooks."""
    return kv_html([(_MOE_TITLE, [kv_row(key, value) for key, value in summary.items()])])


_SENSITIVITY_COLUMNS = [
    "input",
    "value",
    "speedup, input lower [x]",
    "speedup, input higher [x]",
    "swing [x]",
]


def _sensitivity_head(r: Row) -> str:
    return (
        f"Speedup {number_text(r['speedup'], 3)}x at the measured inputs; each input moved "
        f"down and up by {r['delta']:.0%}, the others held, largest swing first:"
    )


def _sensitivity_rows(r: Row) -> list[list[str]]:
    return [
        [
            x["name"],
            f"{x['value']:g}",
            number_text(x["low_speedup"], 3),
            number_text(x["high_speedup"], 3),
            number_text(abs(x["high_speedup"] - x["low_speedup"]), 3),
        ]
        for x in r["rows"]
    ]


@fitted
def sensitivity_text(r: Row) -> str:
    """Which input moves the speedup most (from ``Sensitivity.to_dict()``): the speedup with
    each input moved down and up [x]."""
    lines = [_sensitivity_head(r), *grid(_SENSITIVITY_COLUMNS, _sensitivity_rows(r), right=True)]
    return "\n".join(lines) + "\n"


def sensitivity_html(r: Row) -> str:
    """The same as HTML, for notebooks."""
    return f"<p>{html.escape(_sensitivity_head(r))}</p>" + html_table(
        _SENSITIVITY_COLUMNS, _sensitivity_rows(r)
    )
