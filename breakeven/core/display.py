"""How text output is laid out: its width, whether it has colour, and what may be printed.

The CLI sets them for the command it runs (``--wide``, ``--color/--no-color``); renderers read
them (:mod:`breakeven.render.text`).  A notebook or script may set them as pandas'
``option_context`` does its display options::

    with breakeven.core.display.display(width=None):  # every column, no line wrapped
        print(result.report())

This module imports nothing of the package and little of the standard library: the CLI sets
the display before it knows whether anything is printed as text (``--json`` is not).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Display:
    """How text output is laid out: ``width`` in columns (None: as wide as the content, what
    ``--wide`` asks for; the default reads ``COLUMNS`` or the terminal's width, else 100) and
    ``color`` (ANSI colours on the verdicts; off unless the CLI turns it on for a terminal)."""

    width: int | None = 0
    color: bool = False


OUTPUT_FORMATS = ("text", "json", "markdown", "csv")
"""What a command that prints a result can print it as (``--format``): text fitted to the
display, one JSON object (``--json``), or its main table whole as Markdown or CSV."""

DEFAULT_WIDTH = 100
"""The width text is fitted to where neither ``COLUMNS`` nor a terminal says [columns]."""

MIN_WIDTH = 40
"""The narrowest width text is fitted to; a narrower terminal gets lines this long [columns]."""

_DISPLAY: contextvars.ContextVar[Display | None] = contextvars.ContextVar("display", default=None)


def _display() -> Display:
    return _DISPLAY.get() or Display()


@contextlib.contextmanager
def display(width: int | None = 0, color: bool = False) -> Iterator[None]:
    """Render the text inside this block at ``width`` columns (None: unlimited; 0: the
    terminal's) with or without colour, as pandas' ``option_context`` does for its tables."""
    token = _DISPLAY.set(Display(width, color))
    try:
        yield
    finally:
        _DISPLAY.reset(token)


def display_width() -> int | None:
    """The width text is fitted to [columns]: the display's (:func:`display`), else
    ``COLUMNS``, else the terminal's, else :data:`DEFAULT_WIDTH`; None: unlimited."""
    width = _display().width
    if width is None:
        return None
    if not width:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            width = int(columns)
        else:
            import shutil  # lazy: only where text is fitted to a terminal

            width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns or DEFAULT_WIDTH
    return max(width, MIN_WIDTH)


def color_on() -> bool:
    """Whether the display has colour on (off unless the CLI turns it on for a terminal)."""
    return _display().color


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


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads a text cell starting with as a formula (OWASP's CSV injection
rule): such a cell is written with a ``'`` in front (:func:`spreadsheet_text`)."""

ESCAPED_STARTS = (*FORMULA_STARTS, "'")
"""What a text cell that :func:`spreadsheet_text` escapes starts with: a formula's start, or the
escape ``'`` itself (so that every text reads back as written)."""

# A number as breakeven writes one (and a spreadsheet reads one): a sign, digits with a point,
# an exponent, a percent sign.  Such a cell is a value, never a formula: -3.5 stays -3.5.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?")


def spreadsheet_text(text: str) -> str:
    """A text cell as a CSV file holds it, safe from a spreadsheet: one that starts with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return (a formula, to a spreadsheet: OWASP's CSV
    injection rule) or with ``'`` gets a ``'`` in front, which a spreadsheet shows as text and
    :func:`spreadsheet_value` takes off again (the ``'`` start is escaped too, so that every
    text reads back as written)."""
    return "'" + text if text.startswith(ESCAPED_STARTS) else text


def spreadsheet_value(cell: str) -> str:
    """The text a CSV cell written by :func:`spreadsheet_text` holds: one leading ``'`` taken
    off (a cell never escaped starts with none of those characters)."""
    return cell[1:] if cell.startswith("'") else cell


def spreadsheet_cell(cell: str) -> str:
    """A shown cell (``--format csv``) as a CSV file holds it: a number (``-3.5``,
    ``1.2e+300``, ``-12%``) and the missing mark ``-`` as they are, since no spreadsheet reads
    them as formulas; any other text as :func:`spreadsheet_text` writes it."""
    if cell == "-" or _NUMBER.fullmatch(cell):
        return cell
    return spreadsheet_text(cell)


__all__ = [
    "DEFAULT_WIDTH",
    "ESCAPED_STARTS",
    "FORMULA_STARTS",
    "MIN_WIDTH",
    "OUTPUT_FORMATS",
    "Display",
    "color_on",
    "display",
    "display_width",
    "printable",
    "spreadsheet_cell",
    "spreadsheet_text",
    "spreadsheet_value",
]
