"""What every renderer shares: printable text, numbers with their decimals, aligned columns
and HTML tables.  Pure string building from plain rows; imports only the core layer."""

from __future__ import annotations

import functools
import html
import json
import math
import re
import shlex
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from breakeven.core.display import color_on, display_width, printable, spreadsheet_cell
from breakeven.core.quantities import LARGEST_FIXED, QUANTITIES, number_text

# Every renderer takes plain rows, a result's ``to_dict()`` (what ``--json`` prints), never the
# result itself: this module imports no analysis module, and text and JSON cannot disagree.
Row = dict[str, Any]


_WHY_NONE = {
    "breakeven_alpha": "none: even alpha = 1 is not enough at this k",
    "max_verify_ms": "none: drafting and overhead alone exceed the budget",
    "max_draft_ms": "none: verify and overhead alone exceed the budget",
}


def format_value(key: str, value: Any) -> str:
    """``value`` with the decimals its quantity is shown with (JSON keeps full precision); a
    value that is text already (why there is no number: ``no room``) as it stands."""
    if isinstance(value, str):
        return value
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


_ROLE_COLOURS = {"win": "green", "loss": "red", "noise": "bright_black", "warn": "yellow"}

VERDICT_ROLES = {
    "faster": "win",
    "slower": "loss",
    "within noise": "noise",
    "no interval": "warn",
    "not measured": "warn",
    "too noisy": "warn",
    "looks swapped": "warn",
    "implausible": "warn",
    "holds": "win",
    "off": "loss",
}
"""The colour role of each verdict a table shows: a win green, a loss red, noise grey."""


def paint(text: str, role: str | None) -> str:
    """``text`` in its role's colour where the display has colour on, else as it is."""
    if not role or not color_on():
        return text
    bold = role in ("win", "loss")
    return f"\x1b[{'1;' if bold else ''}{_ANSI[_ROLE_COLOURS[role]]}m{text}\x1b[0m"


_ANSI = {"green": "32", "red": "31", "bright_black": "90", "yellow": "33"}

_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def visible_len(text: str) -> int:
    """How many columns ``text`` takes on a terminal (colour codes take none)."""
    return len(_ESCAPE.sub("", text)) if "\x1b" in text else len(text)


_UNIT_HEAD = re.compile(r"^(.*\S) (\[[^\]]+\])$")


def _two_line(head: str) -> tuple[str, str]:
    """A head ``name [unit]`` as its name and its unit, for a head of two lines."""
    m = _UNIT_HEAD.match(head)
    return (m.group(1), m.group(2)) if m else (head, "")


def _short(cell: str, width: int) -> str:
    """``cell`` cut to ``width`` columns, marked ``~`` where it was cut: a path keeps its end
    (the file's name), anything else its start."""
    if len(cell) <= width:
        return cell
    if "/" in cell or cell.startswith("~"):  # a path, or one already cut at its start
        return "~" + cell.lstrip("~")[len(cell.lstrip("~")) - max(width - 1, 1) :]
    return cell[: max(width - 1, 1)] + "~"


def _wrapped(cell: str, width: int) -> list[str]:
    """``cell`` on lines of at most ``width`` columns, broken after commas or at spaces, never
    inside a word (a flag's code, a name): a word wider than ``width`` keeps its line."""
    return textwrap.wrap(cell, width, break_on_hyphens=False, break_long_words=False) or [""]


def _longest_word(cells: Sequence[str]) -> int:
    """The widest word of ``cells`` [characters]: what a wrapped column needs at least."""
    return max((len(word) for cell in cells for word in cell.split()), default=0)


def k_ranges(ks: Sequence[int]) -> str:
    """Whole numbers as runs: ``[2, 3, 5, 6, 7]`` is ``2-3, 5-7``."""
    out: list[list[int]] = []
    for k in sorted(ks):
        if out and k == out[-1][1] + 1:
            out[-1][1] = k
        else:
            out.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def neighbours_regret(rows: dict[int, Row], best_k: int) -> list[str]:
    """``k = 3 0.3%`` for each neighbour of ``best_k`` among ``rows`` (by k) with a
    ``regret`` [fraction]: what choosing it instead would give up."""
    return [
        f"k = {k} {100 * rows[k]['regret']:.1f}%"
        for k in (best_k - 1, best_k + 1)
        if k in rows and rows[k].get("regret") is not None
    ]


def grid(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: bool,
    indent: str = "  ",
    suffixes: Sequence[str] | None = None,
    optional: Sequence[str] = (),
    cut: Sequence[str] = (),
    wrap: Sequence[str] = ("flags",),
) -> list[str]:
    """Text columns as wide as their widest cell, two spaces apart; ``suffixes`` end the rows.

    The table is fitted to :func:`display_width`, in this order until it fits: heads
    ``name [unit]`` go on two lines (the units stay with their columns); the ``cut`` columns
    (names, labels and paths) are shortened to 24 columns, marked ``~`` (a path keeps its
    end); the ``optional`` columns (heads, the first named dropped first) are left out; the
    last column wraps where it is one of ``wrap`` (a list, such as flags' codes); the ``cut``
    columns are shortened to 12; the rightmost columns are left out.  A line under the table
    names what it left out (``--wide`` shows everything)."""
    table = _Table(heads, rows, indent, suffixes)
    limit = display_width()
    if limit is not None and table.over(limit) > 0:
        table.fit(limit, optional, cut, wrap)
    return table.lines(right)


class _Table:
    """A table being fitted: its head lines, its cells, the columns kept and those left out,
    and the last column's lines where it wraps."""

    def __init__(
        self,
        heads: Sequence[str],
        rows: Sequence[Sequence[str]],
        indent: str,
        suffixes: Sequence[str] | None,
    ) -> None:
        self.heads = list(heads)
        self.indent = indent
        self.suffixes = suffixes
        self.tail = max((len(s) for s in suffixes or ()), default=0)
        self.keep = list(range(len(heads)))
        self.head_lines = [list(heads)]
        self.cells = [list(row) for row in rows]
        self.parts: list[list[str]] = [[] for _ in self.cells]  # the last column's lines
        self.dropped: list[str] = []

    def widths(self) -> list[int]:
        """The kept columns' widths [characters]."""
        return [
            max(*(len(h[i]) for h in self.head_lines), *(len(row[i]) for row in self.cells), 1)
            for i in self.keep
        ]

    def over(self, limit: int) -> int:
        """How many characters the widest line runs past ``limit`` (0 or less: it fits)."""
        w = self.widths()
        return len(self.indent) + sum(w) + 2 * (len(w) - 1) + self.tail - limit

    def fit(
        self, limit: int, optional: Sequence[str], cut: Sequence[str], wrap: Sequence[str]
    ) -> None:
        """Fit to ``limit`` columns, in :func:`grid`'s order."""
        split = [_two_line(h) for h in self.heads]
        self.head_lines = [[a for a, _ in split], [b for _, b in split]]
        names = [self.heads.index(name) for name in cut if name in self.heads]
        # A name cut to 24 columns still reads; a column of numbers left out does not.
        self.shorten(limit, names, 24)
        for name in optional:
            if self.over(limit) <= 0:
                break
            if name in self.heads:
                self.drop(self.heads.index(name))
        last = self.keep[-1]
        room = self.widths()[-1] - self.over(limit)
        words = _longest_word([row[last] for row in self.cells])
        if self.over(limit) > 0 and room >= max(12, words) and self.heads[last] in wrap:
            self.parts = [_wrapped(row[last], room) for row in self.cells]
            for row, lines_of in zip(self.cells, self.parts, strict=True):
                row[last] = max(lines_of, key=len)
        self.shorten(limit, names, 12)
        while self.over(limit) > 0 and len(self.keep) > 1:
            self.drop(self.keep[-1])
            self.parts = [[] for _ in self.cells]

    def drop(self, i: int) -> None:
        """Leave column ``i`` out, and say so under the table."""
        self.keep.remove(i)
        self.dropped.append(_two_line(self.heads[i])[0])

    def shorten(self, limit: int, names: Sequence[int], least: int) -> None:
        """Cut the widest of the ``names`` columns, again and again, to no fewer than
        ``least`` characters, until the table fits."""
        while self.over(limit) > 0:
            w = dict(zip(self.keep, self.widths(), strict=True))
            wide = [i for i in names if i in w and w[i] > least]
            if not wide:
                return
            i = max(wide, key=lambda j: w[j])
            size = max(w[i] - self.over(limit), least)
            for h in self.head_lines:
                h[i] = _short(h[i], size)
            for row in self.cells:
                row[i] = _short(row[i], size)

    def lines(self, right: bool) -> list[str]:
        """The table's lines, the verdicts painted, and what was left out named."""
        w = self.widths()
        just = str.rjust if right else str.ljust
        painted = {i for i in self.keep if self.heads[i] == "verdict"}

        def line(values: Sequence[str]) -> str:
            out = []
            for i, width in zip(self.keep, w, strict=True):
                text = just(values[i], width)
                if i in painted and values[i]:
                    role = VERDICT_ROLES.get(values[i])
                    text = text.replace(values[i], paint(values[i], role), 1)
                out.append(text)
            return (self.indent + "  ".join(out)).rstrip()

        lines = [line(h) for h in self.head_lines if any(h[i] for i in self.keep)]
        last = self.keep[-1]
        for n, row in enumerate(self.cells):
            for j, part in enumerate(self.parts[n] or [row[last]]):
                shown = list(row) if j == 0 else [""] * len(row)
                shown[last] = part
                suffix = self.suffixes[n] if self.suffixes and j == 0 else ""
                lines.append(line(shown) + suffix)
        if self.dropped:
            lines.append(f"{self.indent}(not shown: {', '.join(self.dropped)}; --wide shows them)")
        return lines


def markdown_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table as GitHub-flavoured Markdown, every column (``|`` in a cell escaped)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(printable(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(heads), "|" + "---|" * len(heads), *map(line, rows)]) + "\n"


def csv_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table as CSV (RFC 4180, quoted where needed), every column, as shown in text; a
    text cell that a spreadsheet would read as a formula (it starts with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return) or that starts with ``'`` is written with a ``'`` in
    front, and numbers (``-3.5``) are written as they are
    (:func:`breakeven.core.display.spreadsheet_cell`)."""
    import csv  # lazy: only --format csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([spreadsheet_cell(printable(h)) for h in heads])
    writer.writerows([[spreadsheet_cell(printable(c)) for c in row] for row in rows])
    return out.getvalue()


def wrap_lines(text: str) -> str:
    """``text`` with each line longer than :func:`display_width` wrapped at spaces, its
    continuation indented two more than it.  A line set out to be pasted (one that starts,
    after its indent, with ``--``) is left whole."""
    limit = display_width()
    if limit is None:
        return text
    out = []
    for line in text.split("\n"):
        pasted = line.lstrip().startswith("--") and ". " not in line  # a flag, not a sentence
        if visible_len(line) <= limit or pasted:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line.strip(),
            limit,
            initial_indent=lead,
            subsequent_indent=lead + "  ",
            break_on_hyphens=False,
            break_long_words=False,
        ) or [line]
    return "\n".join(out)


def command_lines(words: Sequence[str], indent: str = "  ") -> list[str]:
    """A command to paste, as shell lines within :func:`display_width`: ``\\`` continues a
    line between arguments (a flag stays with its value), and a JSON argument too long for a
    line is broken after its commas inside its quotes, where a line break is JSON whitespace.
    Pasted into a shell, the lines are the same command."""
    limit = display_width()
    groups: list[list[str]] = []
    for word in words:
        if groups and len(groups[-1]) == 1 and groups[-1][0].startswith("-") and word[:1] != "-":
            groups[-1].append(word)
        else:
            groups.append([word])
    texts = [" ".join(shlex.quote(w) for w in g) for g in groups]
    whole = indent + " ".join(texts)
    if limit is None or len(whole) <= limit:
        return [whole]
    more = indent + "  "
    lines: list[str] = []
    current = indent
    for group, text in zip(groups, texts, strict=True):
        parts = [text]
        start = len(current) + (current != indent and current != more)
        if start + len(text) > limit - 2 and len(group) == 2:
            parts = _json_lines(group, more, limit)
        if current.strip() and (len(parts) > 1 or len(current) + 1 + len(parts[0]) > limit - 2):
            lines.append(current + " \\")
            current = more
        current += ("" if not current.strip() else " ") + parts[0]
        if len(parts) > 1:
            lines.append(current)
            lines += parts[1:-1]
            current = parts[-1]
    lines.append(current)
    return lines


def _json_lines(group: list[str], indent: str, limit: int) -> list[str]:
    """A flag and its JSON object value as lines that start at ``indent``, broken after the
    object's commas (the value as it was where it is not a JSON object)."""
    flag, value = group
    try:
        data = json.loads(value)
    except ValueError:
        data = None
    if not isinstance(data, dict) or "'" in value or not data:
        return [" ".join(shlex.quote(w) for w in group)]
    items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()]
    lines = [f"{shlex.quote(flag)} '{{"]
    fresh = True  # the line holds no item yet
    for n, item in enumerate(items):
        end = "}'" if n == len(items) - 1 else ","
        pad = len(indent) + (0 if len(lines) == 1 else 2)
        if fresh or pad + len(lines[-1]) + 1 + len(item) + len(end) <= limit:
            if fresh and len(lines) == 1 and pad + len(lines[0]) + len(item) + len(end) > limit:
                lines.append(f"{indent}  {item}")
            else:
                lines[-1] += ("" if fresh else " ") + item
        else:
            lines.append(f"{indent}  {item}")
        lines[-1] += end
        fresh = False
    return lines


def fitted(render: Callable[..., str]) -> Callable[..., str]:
    """A text renderer whose output is fitted to the display (:func:`wrap_lines`)."""

    @functools.wraps(render)
    def fitted_render(*args: Any, **kwargs: Any) -> str:
        return wrap_lines(render(*args, **kwargs))

    return fitted_render


def table(
    rows: list[dict[str, Any]],
    columns: list[str],
    mark: int | None = None,
    optional: Sequence[str] = (),
) -> list[str]:
    """Columns headed ``key [unit]``, right-aligned; row ``mark`` gets a ``*``; the
    ``optional`` heads as :func:`grid` takes them."""
    heads = [f"{c} [{QUANTITIES[c].unit}]" if QUANTITIES[c].unit else c for c in columns]
    cells = [[format_value(c, r.get(c)) for c in columns] for r in rows]
    return grid(
        heads,
        cells,
        right=True,
        suffixes=[" *" if i == mark else "" for i in range(len(cells))],
        optional=optional,
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


_NUMBER_CELL = re.compile(r"[-+~]?\d[\d.,eE+\-/x% ()]*|-")
"""A cell of numbers (``1.465``, ``1.181-1.817``, ``1.8/1.9/2.0``, ``+0.012``, ``-``)."""


def html_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells (already text) as an HTML table.  A head ``name [unit]`` is two lines, its unit
    under its name; a column of numbers is marked ``class="n"`` (a report page right-aligns it
    and never breaks a number across lines); any other cell (a name, a label, flags' codes)
    wraps at its spaces and hyphens."""
    numbers = [
        bool(rows) and all(_NUMBER_CELL.fullmatch(row[i]) for row in rows)
        for i in range(len(heads))
    ]
    marks = ['<td class="n">' if n else "<td>" for n in numbers]
    head = "".join(
        ('<th class="n">' if n else "<th>")
        + "<br>".join(html.escape(part) for part in _two_line(h) if part)
        + "</th>"
        for h, n in zip(heads, numbers, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(f"{mark}{html.escape(v)}</td>" for mark, v in zip(marks, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def shared_columns(
    heads: Sequence[str], rows: Sequence[Sequence[str]], names: Sequence[str]
) -> tuple[list[str], list[list[str]], list[tuple[str, str]]]:
    """The ``names`` columns that hold one value in every row (two rows or more) taken out of
    a table, to be said once above it: the heads and rows left, and each ``(head, value)``
    taken out.  A sweep's runs are of one model: its name need not fill every row."""
    shared = [
        i
        for i, h in enumerate(heads)
        if h in names and len(rows) > 1 and len({row[i] for row in rows}) == 1
    ]
    kept = [i for i in range(len(heads)) if i not in shared]
    return (
        [heads[i] for i in kept],
        [[row[i] for i in kept] for row in rows],
        [(heads[i], rows[0][i]) for i in shared],
    )


def quantity_html_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Rows of :data:`~breakeven.core.quantities.QUANTITIES` keys as an HTML table, headed
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
