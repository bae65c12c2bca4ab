"""What every renderer shares: printable text, numbers with their decimals, aligned columns
and HTML tables.  Pure string building from plain rows; imports only the core layer."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import Any

from breakeven.quantities import LARGEST_FIXED, QUANTITIES, number_text

# Every renderer takes plain rows, a result's ``to_dict()`` (what ``--json`` prints), never the
# result itself: this package imports no analysis module, and text and JSON cannot disagree.

# Every renderer takes plain rows, a result's ``to_dict()`` (what ``--json`` prints), never the
# result itself: this module imports no analysis module, and text and JSON cannot disagree.
Row = dict[str, Any]


_WHY_NONE = {
    "breakeven_alpha": "none: even alpha = 1 is not enough at this k",
    "max_verify_ms": "none: drafting and overhead alone exceed the budget",
    "max_draft_ms": "none: verify and overhead alone exceed the budget",
}


# Terminal escape sequences (CSI such as colours and screen clears, OSC such as window titles,
# and two-byte ones), then any control character left: C0, DEL, C1 and the bidirectional
# overrides that reorder what a terminal shows.  Each alternative scans a run once: linear.
_CONTROL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)"
    r"|[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: Any) -> str:
    """``text`` as it may be printed: tabs and line breaks as spaces, terminal escape
    sequences and other control characters removed (a CSV cell could clear the screen)."""
    text = str(text)
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda m: " " if m.group() in "\t\n\r\x0b\x0c" else "", text)


def format_value(key: str, value: Any) -> str:
    """``value`` with the decimals its quantity is shown with (JSON keeps full precision)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _WHY_NONE.get(key, "none")
    if isinstance(value, int):
        return str(value)
    return number_text(value, QUANTITIES[key].decimals)


def is_number(value: Any) -> bool:
    """Whether ``value`` is a number to show (not None, not NaN)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def kv_lines(sections: list[tuple[str, list[tuple[str, str, str, str]]]]) -> list[str]:
    """Sections of ``label  value unit  key`` lines, values aligned."""
    lines: list[str] = []
    width = max((len(r[1]) for _, rows in sections for r in rows), default=0)
    for title, rows in sections:
        lines.append(f"{title}:")
        for label, value, unit, key in rows:
            lines.append(f"  {label:<28}{value:>{width}} {unit:<14}{key}")
        lines.append("")
    return lines


def kv_row(key: str, value: Any) -> tuple[str, str, str, str]:
    """A quantity's line: its label, value, unit (none where there is no value) and key."""
    q = QUANTITIES[key]
    return (q.label, format_value(key, value), q.unit if is_number(value) else "", key)


def grid(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: bool,
    indent: str = "  ",
    suffixes: Sequence[str] | None = None,
) -> list[str]:
    """Text columns as wide as their widest cell, two spaces apart; ``suffixes`` end the rows."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    just = str.rjust if right else str.ljust

    def line(cells: Sequence[str]) -> str:
        return (indent + "  ".join(just(c, w) for c, w in zip(cells, widths, strict=True))).rstrip()

    return [line(heads)] + [
        line(row) + (suffixes[i] if suffixes else "") for i, row in enumerate(rows)
    ]


def table(rows: list[dict[str, Any]], columns: list[str], mark: int | None = None) -> list[str]:
    """Columns headed ``key [unit]``, right-aligned; row ``mark`` gets a ``*``."""
    heads = [f"{c} [{QUANTITIES[c].unit}]" if QUANTITIES[c].unit else c for c in columns]
    cells = [[format_value(c, r[c]) for c in columns] for r in rows]
    return grid(
        heads, cells, right=True, suffixes=[" *" if i == mark else "" for i in range(len(cells))]
    )


def num(value: Any, spec: str) -> str:
    """``value`` formatted by ``spec``; ``-`` when missing, exponent notation when huge."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and not abs(value) < LARGEST_FIXED:
        return number_text(value, 3)
    return format(value, spec)


def k_text(value: Any) -> str:
    """k as the whole number it is ("-" where the source did not say)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return str(int(value)) if float(value).is_integer() else num(value, "g")


def interval_text(low: Any, high: Any) -> str:
    """An interval as ``low-high`` [x], or ``-`` where there is none."""
    return "-" if low is None else f"{num(low, '.3f')}-{num(high, '.3f')}"


def with_hardware(
    heads: list[str], rows: list[list[str]], hardware: list[Any], after: int
) -> tuple[list[str], list[list[str]]]:
    """A hardware column after column ``after`` where the rows differ in hardware."""
    if len({h or "" for h in hardware}) < 2:
        return heads, rows
    names = [printable(h) or "-" for h in hardware]
    heads = [*heads[: after + 1], "hardware", *heads[after + 1 :]]
    return heads, [[*r[: after + 1], n, *r[after + 1 :]] for r, n in zip(rows, names, strict=True)]


def html_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells (already text) as an HTML table; long cells wrap."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def quantity_html_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Rows of :data:`~breakeven.quantities.QUANTITIES` keys as an HTML table, headed
    ``key [unit]``."""
    heads = "".join(
        f"<th>{html.escape(c)} [{html.escape(QUANTITIES[c].unit)}]</th>" for c in columns
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(format_value(c, r[c]))}</td>" for c in columns)
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{heads}</tr>{body}</table>"


def kv_html(sections: list[tuple[str, list[tuple[str, str, str, str]]]]) -> str:
    """Sections of :func:`kv_row` lines as one HTML table, a heading row per section."""
    out = ["<table>", "<tr><th>quantity</th><th>value</th><th>unit</th><th>key</th></tr>"]
    for title, rows in sections:
        out.append(f'<tr><th colspan="4" style="text-align:left">{html.escape(title)}</th></tr>')
        for cells in rows:
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def preformatted_html(text: str) -> str:
    """A text report as HTML, for notebooks: the same lines, escaped, in a ``<pre>`` block,
    so its columns stay aligned."""
    return f"<pre>{html.escape(text)}</pre>"
