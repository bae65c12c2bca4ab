"""Measurements CSVs in breakeven's schema (:mod:`breakeven.core.schema`): read, and write atomically."""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import pandas as pd

from breakeven.core.display import spreadsheet_value
from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces, shorten
from breakeven.core.schema import (
    ALL_COLUMNS,
    COLUMN_NAMES,
    RANGED_COLUMNS,
    bad_number_message,
    csv_row,
    first_bad_number,
    text_column,
)
from breakeven.iotools.atomic import refuse_overwrite, write_text
from breakeven.iotools.paths import check_output_path, output_error
from breakeven.iotools.sources import allow_long_cells, rereadable

# Columns check cannot do without.
REQUIRED_COLUMNS = ("model", "hardware", "concurrency", "num_spec_tokens", "tok_s")


def _error(path: str, line: int | None, message: str) -> BreakevenError:
    where = f"{path}, line {line}" if line is not None else path
    return BreakevenError(escape_braces(f"{where}: {message}"))


def _reason(e: BaseException) -> str:
    """Why a file cannot be read, as its message says it."""
    if isinstance(e, UnreadableInput):
        return str(e)
    return f"cannot read it ({getattr(e, 'strerror', None) or e})"


def _head(source: Any) -> bytes:
    """The first 64 KiB of a path or an in-memory stream."""
    if isinstance(source, str):
        with open(source, "rb") as f:
            return f.read(1 << 16)
    return source.getvalue()[: 1 << 16]


def _text(source: Any) -> Any:
    """A path or an in-memory stream as UTF-8 text, CSV newlines kept."""

    if isinstance(source, str):
        return open(source, encoding="utf-8", newline="")
    return io.TextIOWrapper(io.BytesIO(source.getvalue()), encoding="utf-8", newline="")


def _repeated(header: list[str]) -> tuple[str, int, int] | None:
    """The first header name given twice, with both column numbers (from 1)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name and name in seen:
            return name, seen[name], i
        seen.setdefault(name, i)
    return None


def measurement_columns(records: Iterable[dict[str, Any]]) -> list[str]:
    """The schema's columns, then every other key some record holds, in first-seen order."""
    extra: dict[str, None] = {}
    for r in records:
        for key in r:
            if key not in COLUMN_NAMES:
                extra.setdefault(key, None)
    return list(COLUMN_NAMES) + list(extra)


def write_measurements(
    records: Iterable[dict[str, Any]],
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    columns: list[str] | None = None,
) -> int:
    """Write records as a measurements CSV, streaming; returns the number of rows.

    Rows go to a temporary file beside ``path`` that is renamed into place at
    the end, so a crash never leaves half a file.  An existing file is
    replaced only with ``force``.  ``columns`` defaults to the schema's, then
    every other key of the records (which must then be a list, not a stream).
    """
    path = check_output_path(path, "path")
    refuse_overwrite(path, force, "path")
    if columns is None:
        records = list(records)
        columns = measurement_columns(records)
    rows = 0

    def write(f: Any) -> None:
        nonlocal rows
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        every = itemgetter(*columns) if len(columns) > 1 else (lambda r: (r[columns[0]],))
        texts = [text_column(c) for c in columns]
        for r in records:
            # csv writes None as an empty cell, floats exactly, lists as JSON-style arrays
            # and bools as True/False; records from ingest hold no NaN.  Keys outside the
            # columns are not written, so callers pass complete column lists (ingest:
            # RECORD_KEYS, whose records hold every key).
            try:
                values = every(r)
            except KeyError:
                values = [r.get(c) for c in columns]
            writer.writerow(csv_row(texts, values))
            rows += 1

    try:
        write_text(path, write, force=force)
    except OSError as e:  # after the checks: a full disk, a directory removed meanwhile
        raise output_error("path", path, e) from None
    return rows


def _open(path: str) -> Any:
    """The file as a rereadable source (a path, or a pipe's bytes in memory); raises for a file
    that cannot be read, is empty or is binary (judged by its first 64 KiB)."""
    try:
        source = rereadable(path)  # a named pipe or device is read once, into memory
        head = _head(source)
    except (UnreadableInput, OSError) as e:
        raise _error(path, None, _reason(e)) from None
    if not head.strip():
        raise _error(path, None, "is empty; expected a header line naming the schema's columns")
    if b"\0" in head:
        raise _error(path, None, "is binary, not a CSV text file")
    return source


def _read_header(path: str, source: Any) -> tuple[list[str], int, list[str]]:
    """The header's column names (stripped), its line number (from 1) and the comment lines
    before it (``#`` and blank lines, ``#`` removed)."""
    try:
        with _text(source) as f:
            comments = []
            header_line = 0
            for header_line, text in enumerate(f, start=1):  # noqa: B007
                if text.startswith("#") or not text.strip():
                    comments.append(text.lstrip("#").strip())
                    continue
                header = next(csv.reader([text]))
                break
            else:
                raise _error(path, None, "holds only comments; expected a header line")
    except UnicodeDecodeError as e:
        raise _error(path, None, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except csv.Error as e:
        raise _error(path, header_line, f"the header does not parse as CSV ({e})") from None
    return [h.strip() for h in header], header_line, comments


def _check_header(path: str, header: list[str], header_line: int) -> None:
    """Raise for a column named twice, or a required column missing."""
    twice = _repeated(header)
    if twice:
        name, first, second = twice
        raise _error(
            path,
            header_line,
            f"column {name!r} appears twice in the header (columns "
            f"{first} and {second}); expected each column once",
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise _error(
            path,
            header_line,
            f"no {', '.join(missing)} column(s); expected the "
            "measurement schema's columns (docs/concepts/definitions.md, 'Measurement schema')",
        )


def _read_rows(
    path: str,
    source: Any,
    header: list[str],
    header_line: int,
    columns: Iterable[str] | None,
    times: tuple[str, ...] = (),
) -> Any:
    """The rows after the header as a DataFrame, text columns as categories (``times``:
    datetimes where they all parse as one ISO 8601 form) and the rest as pandas reads them,
    with a ``line`` column (the file line); all-empty rows dropped."""
    wanted = None if columns is None else set(columns)
    usecols = None if wanted is None else (lambda c: c.strip() in wanted)
    text_columns = [
        c
        for c in header
        if (c not in ALL_COLUMNS or ALL_COLUMNS[c].kind == "text")
        and (wanted is None or c in wanted)
    ]
    dates = [c for c in text_columns if c in times]
    text_columns = [c for c in text_columns if c not in dates]
    if not isinstance(source, str):
        source.seek(0)
    try:
        data = pd.read_csv(
            source,
            skiprows=header_line - 1,
            dtype={c: "category" for c in text_columns},
            parse_dates=dates or False,
            date_format="ISO8601" if dates else None,
            usecols=usecols,
            skip_blank_lines=False,
            keep_default_na=False,
            na_values=[""],
            encoding="utf-8",
        )
    except (pd.errors.ParserError, ValueError) as e:
        raise _error(path, None, f"does not parse as CSV ({e})") from None
    data.columns = [str(c).strip() for c in data.columns]
    for column in dates:  # not one ISO 8601 form throughout: text, as the others
        if column in data.columns and data[column].dtype.kind != "M":
            data[column] = data[column].astype("category")
    for column in data.columns:
        if isinstance(data[column].dtype, pd.CategoricalDtype):
            data[column] = _unescaped(data[column])
    data["line"] = range(header_line + 1, header_line + 1 + len(data))
    return data.dropna(how="all", subset=[c for c in data.columns if c != "line"])


def _unescaped(column: Any) -> Any:
    """A text column (categories) as written: the ``'`` that a writer put before a text a
    spreadsheet would read as a formula taken off (:func:`~breakeven.core.display.spreadsheet_value`)."""
    categories = column.cat.categories
    if not any(str(c).startswith("'") for c in categories):
        return column
    values = [spreadsheet_value(str(c)) for c in categories]
    if len(set(values)) == len(values):
        return column.cat.rename_categories(values)
    return (
        column.astype(object)
        .map(lambda v: v if pd.isna(v) else spreadsheet_value(v))
        .astype("category")
    )


def _to_numbers(path: str, data: Any) -> None:
    """Convert, in place, the schema's numeric columns to numbers; raise, naming the line, for
    a cell that is not a number, or one that is infinite or negative."""
    for column in data.columns:
        spec = ALL_COLUMNS.get(column)
        if spec is None or spec.kind == "text" or data[column].dtype.kind in "fiu":
            continue
        try:
            numbers = pd.to_numeric(data[column], errors="coerce")
        except OverflowError:  # a whole number of hundreds of digits: as text, it is inf
            as_text = data[column].astype(object).map(lambda v: v if v is None else str(v))
            numbers = pd.to_numeric(as_text, errors="coerce")
            huge = numbers.abs() == math.inf
            if huge.any():
                row = data[huge].iloc[0]
                raise _error(
                    path,
                    int(row["line"]),
                    f"{column} is {shorten(str(row[column]))}, expected a number a double "
                    f"holds [{spec.unit}] or empty",
                ) from None
        bad = numbers.isna() & data[column].notna()
        if bad.any():
            row = data[bad].iloc[0]
            raise _error(
                path,
                int(row["line"]),
                f"{column} is {shorten(repr(row[column]))}, expected a number [{spec.unit}] "
                "or empty",
            )
        data[column] = numbers
    found = first_bad_number(data)
    if found is not None:
        column, at, value = found
        raise _error(path, int(data["line"].iloc[at]), bad_number_message(column, value))


def _add_missing_columns(data: Any) -> None:
    """Add, in place, the schema's columns the file lacks: empty (NaN, or None for text)."""
    for column in COLUMN_NAMES:
        if column not in data.columns:
            data[column] = math.nan if ALL_COLUMNS[column].kind != "text" else None


def read_measurements(
    path: str | os.PathLike[str],
    columns: Iterable[str] | None = None,
    times: Iterable[str] = (),
) -> tuple[Any, dict[str, Any]]:
    """Read a measurements CSV.

    Lines starting with ``#`` before the header are comments.  Columns the
    schema names as numbers must hold numbers or be empty.  ``columns``, if
    given, are the only ones read (the file may lack some; the schema's are
    then added empty): reading fewer is faster.  ``times`` are text columns read as
    datetimes where every cell is one ISO 8601 form (a bench CSV's ``timestamp``: parsed in
    C, where a million distinct texts as categories took 7 times longer), else as text.

    Returns
    -------
    data : pandas.DataFrame
        One row per measurement, with a ``line`` column (the file line).
    metadata : dict
        ``path`` and ``comments``.

    Raises
    ------
    BreakevenError
        Naming the file and line: unreadable, empty or binary file, missing
        required column, a column named twice in the header, a value in a
        numeric column that is not a number, infinite or negative, or outside its
        column's range (:data:`~breakeven.core.schema.RANGED_COLUMNS`: an accept_len below 1,
        an acceptance_rate above 1, checked even where ``columns`` leaves them out).

    A named pipe or device is read once, as a stream (a pipe no process writes
    is refused after :data:`~breakeven.iotools.sources.FIFO_WRITER_WAIT_S`);
    cells may hold up to :data:`~breakeven.iotools.sources.MAX_CELL_BYTES`.
    """
    path = os.fspath(path)
    source = _open(path)
    allow_long_cells()
    header, header_line, comments = _read_header(path, source)
    _check_header(path, header, header_line)
    wanted = None if columns is None else list(columns)
    # A column with a range narrower than >= 0 is checked whichever columns are asked for:
    # an acceptance_rate of 86.4 (a percent) is refused by every command that reads the file.
    checked = None if wanted is None else [*wanted, *(c for c in RANGED_COLUMNS if c not in wanted)]
    data = _read_rows(path, source, header, header_line, checked, tuple(times))
    _to_numbers(path, data)
    if wanted is not None:
        data = data.drop(
            columns=[c for c in RANGED_COLUMNS if c not in wanted and c in data.columns]
        )
    _add_missing_columns(data)
    return data, {"path": path, "comments": comments}
