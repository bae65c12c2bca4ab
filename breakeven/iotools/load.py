"""Load profiles: the share of time a server spends at each batch size, for ``schedule --load``.

Two shapes are read:

- a CSV with a ``batch`` column (sequences decoded together, a whole number >= 1) and a
  ``share`` column (time at that batch, any non-negative unit: they are normalised), lines
  starting with ``#`` being comments;
- anything ``ingest`` reads (a server log, a measurements CSV): every record with a
  ``concurrency`` (running requests in a logging interval, or a bench level) is one equal
  slice of time at that batch, rounded to a whole number.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections import Counter
from typing import Any

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.ingest import ingest
from breakeven.iotools.sources import read_whole


def _error(path: str, line: int | None, message: str) -> BreakevenError:
    where = f"{path}, line {line}" if line is not None else path
    return BreakevenError("{0}: " + escape_braces(f"{where}: {message}"), "load")


def _table(path: str, text: str) -> dict[int, float] | None:
    """A ``batch,share`` CSV, or None when the text is not one."""
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        return None
    try:
        head = [c.strip().lower() for c in next(csv.reader([lines[0][1]]))]
    except csv.Error:
        return None
    if "batch" not in head or "share" not in head:
        return None
    b, s = head.index("batch"), head.index("share")
    out: dict[int, float] = {}
    for n, line in lines[1:]:
        try:
            cells = next(csv.reader(io.StringIO(line)))
            batch, share = float(cells[b]), float(cells[s])
        except (csv.Error, IndexError, ValueError):
            raise _error(
                path, n, f"expected a whole batch >= 1 and a share >= 0, got {line.strip()[:60]!r}"
            ) from None
        if not (math.isfinite(batch) and batch >= 1 and batch == int(batch)):
            raise _error(path, n, f"batch {cells[b].strip()!r} is not a whole number >= 1")
        if not (math.isfinite(share) and share >= 0):
            raise _error(path, n, f"share {cells[s].strip()!r} is not a number >= 0")
        out[int(batch)] = out.get(int(batch), 0.0) + share
    return out


def _is_table(head: bytes) -> bool:
    """Whether a file's first bytes start a ``batch,share`` CSV (after ``#`` comments)."""
    for line in head.decode("utf-8", "replace").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            cells = {c.strip().lower() for c in line.split(",")}
            return {"batch", "share"} <= cells
    return False


def _records(path: str, head: bytes) -> dict[int, float]:
    """The batch of every record with a concurrency: a measurements CSV's rows (``bench``,
    ``fleet``, ``ingest --out``), else what ``ingest`` reads of the file."""
    if _is_measurements(head):
        try:
            data, _ = read_measurements(path, columns=("concurrency",))
        except BreakevenError as e:
            raise BreakevenError("{0}: " + escape_braces(str(e)), "load") from None
        values = [float(v) for v in data["concurrency"].dropna().tolist()]
    else:
        result = ingest([path])
        if result.problems:
            raise BreakevenError("{0}: " + escape_braces(str(result.problems[0])), "load")
        frame = result.frame
        values = (
            frame["concurrency"].drop_nulls().to_list()
            if frame is not None and "concurrency" in frame.columns
            else []
        )
    counts: Counter[int] = Counter(round(v) for v in values if math.isfinite(v) and v >= 0.5)
    return {b: float(c) for b, c in counts.items()}


def _is_measurements(head: bytes) -> bool:
    """Whether a file's first line that is not a comment is a measurements CSV's header."""
    for line in head.decode("utf-8", "replace").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            cells = {c.strip().lower() for c in line.split(",")}
            return {"concurrency", "tok_s"} <= cells or {"concurrency", "run_id"} <= cells
    return False


def read_load(path: str | os.PathLike[str]) -> tuple[dict[int, float], dict[str, Any]]:
    """A load profile (see the module): ``{batch: share}``, shares summing to 1, and
    metadata (``path``, ``shape``: 'table' or 'records', ``samples``)."""

    path = os.fspath(path)
    try:
        regular = os.path.isfile(path)
        if regular:  # a log may be large: only its head tells a table, which is small
            with open(path, "rb") as f:
                head = f.read(1 << 16)
            data = read_whole(path) if _is_table(head) else b""
        else:
            data = read_whole(path)
    except (UnreadableInput, OSError, ValueError) as e:
        raise _error(path, None, str(e)) from None
    profile = _table(path, data.decode("utf-8", "replace")) if data else None
    shape = "table"
    if profile is None:
        if not regular:
            raise _error(
                path,
                None,
                "is not a batch,share table; a log or measurements CSV "
                "is read from a file, not a pipe",
            )
        profile, shape = _records(path, head), "records"
    # Scaled by the largest first: shares of 1e308 each sum past a double (fsum overflows).
    largest = max(profile.values(), default=0.0)
    total = math.fsum(v / largest for v in profile.values()) if largest > 0 else 0.0
    if not total > 0:
        raise _error(
            path,
            None,
            "holds no time at any batch size: expected batch,share rows, "
            "or records with a concurrency (a server log's running requests)",
        )
    return (
        {b: v / largest / total for b, v in sorted(profile.items()) if v > 0},
        {"path": path, "shape": shape, "samples": len(profile)},
    )


__all__ = ["read_load"]
