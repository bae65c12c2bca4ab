"""Text and HTML renderings of results.  Pure string building, no I/O."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from breakeven.quantities import QUANTITIES

if TYPE_CHECKING:
    from breakeven.predict import Prediction

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
    ("With speculation", ("speedup", "spec_tok_s")),
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
_WHY_NONE = {
    "breakeven_alpha": "none: even alpha = 1 is not enough at this k",
    "max_verify_ms": "none: drafting and overhead alone exceed the budget",
    "max_draft_ms": "none: verify and overhead alone exceed the budget",
}


def format_value(key: str, value: Any) -> str:
    """``value`` with the decimals its quantity is shown with (JSON keeps full precision)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _WHY_NONE.get(key, "none")
    if isinstance(value, int):
        return str(value)
    return f"{value:.{QUANTITIES[key].decimals}f}"


def _rows(p: Prediction) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    sections = []
    for title, keys in _SECTIONS:
        rows = []
        for key in keys:
            value = getattr(p, key)
            if value is None:
                continue
            q = QUANTITIES[key]
            rows.append(
                (q.label, format_value(key, value), q.unit if _is_number(value) else "", key)
            )
        if rows:
            if title == "Break-even" and p.target_speedup != 1.0:
                title = f"Target speedup {p.target_speedup:g}x"
            sections.append((title, rows))
    return sections


def _is_number(value: Any) -> bool:
    return not (isinstance(value, float) and math.isnan(value))


def verdict(p: Prediction) -> str | None:
    """One sentence: does speculation pay at these measurements?"""
    if p.speedup is None or p.accept_len is None or p.breakeven_accept_len is None:
        return None
    s = p.target_speedup
    goal = "break even" if s == 1.0 else f"reach {s:g}x"
    if p.speedup > s:
        word = "pays" if s == 1.0 else "reaches the target"
        how = f"accept_len {p.accept_len:.3f} > {p.breakeven_accept_len:.3f} needed to {goal}"
        return f"Speculation {word}: {p.speedup:.3f}x the baseline rate ({how})."
    if p.speedup == s:
        return f"Speculation breaks exactly even at {p.speedup:.3f}x."
    word = "loses" if s == 1.0 else "misses the target"
    how = f"accept_len {p.accept_len:.3f} <= {p.breakeven_accept_len:.3f} needed to {goal}"
    return f"Speculation {word}: {p.speedup:.3f}x the baseline rate ({how})."


def prediction_text(p: Prediction) -> str:
    """The table ``breakeven predict`` prints: label, value, unit and JSON key per line."""
    lines: list[str] = []
    sections = _rows(p)
    width = max((len(r[1]) for _, rows in sections for r in rows), default=0)
    for title, rows in sections:
        lines.append(f"{title}:")
        for label, value, unit, key in rows:
            lines.append(f"  {label:<28}{value:>{width}} {unit:<14}{key}")
        lines.append("")
    v = verdict(p)
    if v:
        lines += [v, ""]
    if p.breakeven_alpha_by_k:
        lines.append(_alpha_table_title(p))
        lines.append("   k  breakeven_alpha")
        for k, a in p.breakeven_alpha_by_k:
            lines.append(f"  {k:>2}  {format_value('breakeven_alpha', a)}")
    return "\n".join(lines).rstrip() + "\n"


def _alpha_table_title(p: Prediction) -> str:
    goal = "to break even" if p.target_speedup == 1.0 else f"for {p.target_speedup:g}x"
    if p.cost_ratio is not None:
        held = f"cycle = k * {p.cost_ratio:g} + 1 target steps"
    else:
        held = f"cycle/step = {p.breakeven_accept_len / p.target_speedup:.3f} at every k"
    return f"Smallest per-token acceptance alpha {goal}, by k ({held}):"


def prediction_html(p: Prediction) -> str:
    """The same table as HTML, for notebooks."""
    out = ["<table>", "<tr><th>quantity</th><th>value</th><th>unit</th><th>key</th></tr>"]
    for title, rows in _rows(p):
        out.append(f'<tr><th colspan="4" style="text-align:left">{html.escape(title)}</th></tr>')
        for label, value, unit, key in rows:
            cells = (label, value, unit, key)
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    v = verdict(p)
    if v:
        out.append(f"<p>{html.escape(v)}</p>")
    return "\n".join(out)
