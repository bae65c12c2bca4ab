"""Forward-time curves: total tokens per forward against milliseconds, from CSV."""

from __future__ import annotations

import csv
import math
import os
from typing import Any

import pandas as pd

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces, shorten
from breakeven.iotools.sources import allow_long_cells, read_whole

# Canonical column -> the headers accepted for it (lower case).
CURVE_COLUMNS = {
    "tokens": ("tokens", "num_tokens", "tokens_per_forward", "batch_tokens"),
    "ms": ("ms", "forward_ms", "latency_ms", "time_ms"),
}


def _error(path: str, line: int | None, message: str) -> BreakevenError:
    where = f"{path}, line {line}" if line is not None else path
    return BreakevenError(escape_braces(f"{where}: {message}"))


def _cells(path: str, line: int, text: str) -> list[str]:
    try:
        return next(csv.reader([text]))
    except csv.Error as e:
        raise _error(path, line, f"does not parse as CSV ({e})") from None


def _read_lines(path: str) -> list[str]:
    """The file's lines as text; raises for a file that cannot be read, is not UTF-8 or is
    binary."""
    try:
        data = read_whole(path)  # a named pipe too, as a stream
    except UnreadableInput as e:
        raise _error(path, None, str(e)) from None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise _error(path, None, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
    if b"\0" in data:
        raise _error(path, None, "is binary, not a CSV text file")
    return lines


def _column_index(path: str, header_line: int, header_text: str) -> dict[str, int]:
    """Where (from 0) each column of :data:`CURVE_COLUMNS` is in the header, by its aliases;
    raises for a column missing or named twice."""
    header = [h.strip().lower() for h in _cells(path, header_line, header_text)]
    index = {}
    for canonical, aliases in CURVE_COLUMNS.items():
        found = [i for i, h in enumerate(header) if h in aliases]
        if not found:
            raise _error(
                path,
                header_line,
                f"no {canonical!r} column (found: {shorten(', '.join(header)) or 'none'}); "
                "expected columns tokens,ms",
            )
        if len(found) > 1:
            first, second = (header[i] for i in found[:2])
            raise _error(
                path,
                header_line,
                f"columns {found[0] + 1} ({first!r}) and "
                f"{found[1] + 1} ({second!r}) both name the {canonical!r} column; "
                "expected one each of tokens,ms",
            )
        index[canonical] = found[0]
    return index


def _cell_value(path: str, line_no: int, canonical: str, cell: str) -> float:
    """A cell of column ``canonical`` as a number: tokens >= 1 [tokens], ms >= 0 [ms]."""
    try:
        value = float(cell)
    except ValueError:
        shown = shorten(repr(cell))
        raise _error(path, line_no, f"{canonical} is {shown}, expected a number") from None
    if not math.isfinite(value) or value < (1 if canonical == "tokens" else 0):
        expected = "a token count >= 1" if canonical == "tokens" else "a time >= 0 ms"
        raise _error(path, line_no, f"{canonical} is {cell}, expected {expected}")
    return value


def _read_points(
    path: str, numbered: list[tuple[int, str]], index: dict[str, int]
) -> tuple[list[float], list[float], list[int]]:
    """The data rows (file line, text) as tokens [tokens], ms [ms] and file lines; raises for
    token counts that do not increase, or fewer than two points."""
    tokens: list[float] = []
    ms: list[float] = []
    rows: list[int] = []
    for line_no, text in numbered:
        cells = _cells(path, line_no, text)
        values = {
            canonical: _cell_value(
                path, line_no, canonical, cells[i].strip() if i < len(cells) else ""
            )
            for canonical, i in index.items()
        }
        if tokens and values["tokens"] <= tokens[-1]:
            raise _error(
                path,
                line_no,
                f"tokens {values['tokens']:g} after {tokens[-1]:g}; expected strictly "
                "increasing token counts, one row per forward size",
            )
        tokens.append(values["tokens"])
        ms.append(values["ms"])
        rows.append(line_no)
    if len(tokens) < 2:
        raise _error(path, None, f"has {len(tokens)} data row(s); expected at least two points")
    return tokens, ms, rows


def read_cost_curve(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """Read a forward-time curve: one row per forward size.

    The file is CSV with a header naming a ``tokens`` column (total tokens in
    the forward: batch size x tokens per sequence) and an ``ms`` column (the
    forward's time).  Other columns are ignored; lines starting with ``#`` are
    comments (say where the numbers come from).

    Returns
    -------
    data : pandas.DataFrame
        Columns ``tokens`` [tokens] and ``ms`` [ms], tokens strictly increasing.
    metadata : dict
        ``path``, ``comments`` (the comment lines) and ``lines`` (the file
        line of each row).

    Raises
    ------
    BreakevenError
        Naming the file and line: unreadable file, missing column,
        non-numeric or negative value, token counts that do not increase,
        fewer than two points.
    """
    path = os.fspath(path)
    lines = _read_lines(path)
    allow_long_cells()
    comments = [ln.lstrip("#").strip() for ln in lines if ln.lstrip().startswith("#")]
    numbered = [
        (i, ln)
        for i, ln in enumerate(lines, start=1)
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not numbered:
        raise _error(path, None, "is empty; expected a header with columns tokens,ms")
    index = _column_index(path, *numbered[0])
    tokens, ms, rows = _read_points(path, numbered[1:], index)
    data = pd.DataFrame({"tokens": tokens, "ms": ms})
    return data, {"path": path, "comments": comments, "lines": rows}
