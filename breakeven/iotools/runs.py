"""Runs read for ``breakeven compare``: one run's files, as rows in the measurement schema.

A run is anything ``ingest`` reads (logs, plain or compressed; bench JSON or
printed tables; ``/metrics`` scrapes) or a measurements CSV, or several files
of one launch joined with ``+``, launches with ``,`` (:func:`parse_run`).
:func:`read_run` reads them into one pandas DataFrame, texts as categoricals;
the comparison itself is :mod:`breakeven.measurements.compare`'s.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.ingest import Input, iter_frames
from breakeven.iotools.records import frame_of, list_text

__all__ = [
    "RunInput",
    "concat_frames",
    "constant_column",
    "is_measurements_csv",
    "parse_run",
    "read_run",
    "sweep_runs",
]


@dataclass(frozen=True)
class RunInput:
    """One run given to compare: its name, its files, and what they may not say."""

    label: str
    paths: tuple[str, ...]
    """Its files; the files of one launch are joined with ``+``, launches with ``,``."""
    num_spec_tokens: int | None = None
    spec_method: str | None = None
    env: str | None = None
    launches: tuple[tuple[str, ...], ...] = ()
    """The files of each launch (default: all of ``paths``, one launch)."""
    spec_topk: int | None = None
    """A tree draft's branches per step (None: what the files say)."""
    verify_tokens: int | None = None
    """A tree's tokens per sequence in the verify forward (None: what the files say)."""
    typed: tuple[tuple[str, Any], ...] = ()
    """A run typed in instead of read from files: its one row's columns and values (its
    ``tok_s``, ``timestamp``, ``accept_len``, ...)."""
    year: int | None = None
    """The year of dates its logs print without one (None: kept as printed)."""


def parse_run(text: str, name: str = "runs") -> RunInput:
    """``[LABEL=]LAUNCH[,LAUNCH...]`` where a launch is ``PATH[+PATH...]``, its files (the
    label is by default the first file's stem)."""
    label, sep, rest = text.partition("=")
    if not sep or os.path.exists(text):
        label, rest = "", text
    launches = tuple(
        files for part in rest.split(",") if (files := tuple(p for p in part.split("+") if p))
    )
    paths = tuple(p for files in launches for p in files)
    if not paths:
        shown = escape_braces(repr(text))
        raise BreakevenError("{0}: got " + shown + ", expected PATH, PATH+PATH or LABEL=PATH", name)
    if not label:
        base = os.path.basename(paths[0])
        for suffix in (".gz", ".bz2", ".xz"):
            base = base.removesuffix(suffix)
        label = os.path.splitext(base)[0] or base
    return RunInput(label, paths, launches=launches)


def is_measurements_csv(path: str) -> bool:
    """Whether ``path`` is a measurements CSV (its first line that is not a comment names the
    schema's columns), rather than something ``ingest`` reads."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a pipe is read once, by ingest
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    for line in head.splitlines():
        if line.startswith(b"#") or not line.strip():
            continue
        names = line.decode("utf-8", errors="replace").split(",")
        return "tok_s" in names and "num_spec_tokens" in names
    return False


def read_run(run: RunInput, baseline: bool = False, columns: Sequence[str] | None = None) -> Any:
    """The rows of one run, as a pandas DataFrame in the measurement schema, labelled.

    Rows without a ``run_id`` are one launch, named by the label; a baseline's rows
    of unknown k have k = 0.

    Parameters
    ----------
    run : RunInput
        The run's label, files and what the user says about them.
    baseline : bool
        Whether it is the baseline: a measurements CSV then gives its rows of k = 0
        (else its speculative rows), and rows of unknown k get k = 0.
    columns : sequence of str, optional
        Of the records ``ingest`` reads, the columns to keep (default: every column
        a record fills); ``line``, each record's line in its file, is always kept.
    """
    frames = []
    if run.typed:
        row = {"run_id": run.label, "num_spec_tokens": math.nan, **dict(run.typed)}
        row["line"] = math.nan
        frames.append(pd.DataFrame([row]))
    for path, launch in _launches(run):
        if is_measurements_csv(path):
            frame = _csv_rows(path, baseline, run.label, columns)
        else:
            frame = _ingested_rows(run, path, columns)
            frame["run_id"] = (
                _filled(frame["run_id"], launch)
                if "run_id" in frame.columns
                else constant_column(launch, len(frame))
            )
        frames.append(frame)
    data = concat_frames(frames)
    _stamp(data, run, baseline)
    measured = pd.to_numeric(data["tok_s"], errors="coerce").notna()
    if "speedup" in data.columns:  # a published speedup
        measured |= pd.to_numeric(data["speedup"], errors="coerce").notna()
    if not measured.any():
        shown = escape_braces(" + ".join(run.paths) or run.label)
        raise BreakevenError(
            shown + " holds no decode rate (tok_s) to compare (a vLLM log has one only in "
            "windows where no request started: measure with breakeven bench, or ingest two "
            "/metrics scrapes with --before)"
        )
    return data


def _csv_rows(
    path: str, baseline: bool, label: str = "", columns: Sequence[str] | None = None
) -> Any:
    """A measurements CSV's rows of the run: it may hold several runs, so the baseline takes
    its baseline rows, a speculative run its speculative rows (k unknown: both), and of
    those, where some are labelled ``label`` (``k4=runs.csv``), those.  Only ``columns``
    are read, where given (with ``label`` and ``num_spec_tokens``): a CSV of 100,000 empty
    columns is read as fast as ``check`` reads it."""
    if columns is not None:
        columns = list(dict.fromkeys([*columns, "label", "num_spec_tokens"]))
    frame, _ = read_measurements(path, columns=columns)  # its line column: the file's lines
    k = pd.to_numeric(frame["num_spec_tokens"], errors="coerce")
    frame = frame[~(k > 0)] if baseline else frame[~(k == 0)]
    if label and not baseline:
        own = frame["label"].astype(object) == label
        if own.any():
            return frame[own.to_numpy()]
    return frame


def sweep_runs(directory: str) -> list[str]:
    """A sweep's directory (``breakeven sweep --out DIR``) as compare's runs: the baseline,
    then each speculative label of ``DIR/runs.csv`` in the order it ran
    (``LABEL=DIR/runs.csv``)."""
    path = os.path.join(directory, "runs.csv")
    if not os.path.isfile(path):
        shown = escape_braces(repr(directory))
        raise BreakevenError(
            "BASELINE: got " + shown + ", a directory without runs.csv: expected a file, or a "
            "sweep's directory (breakeven sweep --out)"
        )
    frame, _ = read_measurements(path, columns=("label", "num_spec_tokens"))
    k = pd.to_numeric(frame["num_spec_tokens"], errors="coerce")
    labels = frame.loc[(k > 0).to_numpy(), "label"].dropna().astype(str)
    return [f"baseline={path}", *(f"{label}={path}" for label in dict.fromkeys(labels))]


def _ingested_rows(run: RunInput, path: str, columns: Sequence[str] | None) -> Any:
    """The records ``ingest`` reads from ``path``, stamped with what the user says."""
    stamp = {
        "label": run.label,
        "spec_method": run.spec_method,
        "env": run.env,
        "spec_topk": run.spec_topk,
        "verify_tokens": run.verify_tokens,
    }
    problems: list[Any] = []
    read = Input(
        path, {k: v for k, v in stamp.items() if v is not None}, run.num_spec_tokens, run.year
    )
    # Each frame narrowed to the columns wanted as it comes: a 1 GiB log's records are
    # never held whole.
    narrow = [_narrow(f, columns) for f in iter_frames([read], problems)]
    if problems:
        first = escape_braces(str(problems[0]))
        more = len(problems) - 1
        raise BreakevenError(first + (f" (and {more} more problems)" if more else ""))
    return _columns(pl.concat(narrow) if narrow else _narrow(frame_of([]), columns))


def _stamp(data: Any, run: RunInput, baseline: bool) -> None:
    """What the user says about the run, on every row (in place)."""
    data["label"] = constant_column(run.label, len(data))
    for column, value in (("spec_method", run.spec_method), ("env", run.env)):
        if value is not None:
            data[column] = constant_column(value, len(data))
    for column, value in (("spec_topk", run.spec_topk), ("verify_tokens", run.verify_tokens)):
        if value is not None:
            data[column] = float(value)
    if run.num_spec_tokens is not None:
        data["num_spec_tokens"] = float(run.num_spec_tokens)
    elif baseline:
        data["num_spec_tokens"] = pd.to_numeric(data["num_spec_tokens"]).fillna(0)
    data["run_id"] = (
        _filled(data["run_id"], run.label)
        if "run_id" in data.columns
        else constant_column(run.label, len(data))
    )


def _launches(run: RunInput) -> list[tuple[str, str]]:
    """Each file of ``run`` with the name of its launch (``LABEL``, or ``LABEL#2``...)."""
    groups = run.launches or (run.paths,)
    out = []
    for i, files in enumerate(groups, start=1):
        launch = run.label if len(groups) == 1 else f"{run.label}#{i}"
        out += [(path, launch) for path in files]
    return out


def _narrow(records: Any, columns: Sequence[str] | None) -> Any:
    """Of ingest's records (a polars frame), ``columns`` (default: all), and ``line``: each
    record's line in its file, so that flags name lines a user can find.  Not ``source``: a
    text per record, and every row of a run here has the run_id launches come from."""
    line = pl.col("source").str.extract(r":(\d+)$", 1).cast(pl.Int64, strict=False)
    # Columns no record fills are left out (a missing column reads as empty): a log
    # fills a handful, and each column kept is converted and copied on the way.
    empty = {
        c
        for c, n in zip(records.columns, records.null_count().row(0), strict=True)
        if n == records.height
    } - {"tok_s", "num_spec_tokens"}
    names = records.columns if columns is None else columns
    wanted = [c for c in names if c in records.columns and c not in empty | {"source"}]
    return records.select(*wanted, line.alias("line"))


def _columns(picked: Any) -> Any:
    """Narrowed records (:func:`_narrow`) as a pandas DataFrame, texts as categoricals."""
    columns = {}
    for name in picked.columns:
        column = picked[name]
        if isinstance(column.dtype, pl.List):  # rates per position: as a CSV holds them
            column = picked.select(list_text(name)).to_series()
        if column.dtype == pl.String:  # texts repeat: codes and categories, no str per row
            categories = column.drop_nulls().unique().sort().to_list()
            codes = column.cast(pl.Enum(categories)).to_physical()
            physical = codes.cast(pl.Int64).fill_null(-1).to_numpy()
            columns[name] = pd.Categorical.from_codes(physical, categories)
        else:
            columns[name] = column.to_numpy()
    return pd.DataFrame(columns, copy=False)  # no consolidation: one block per column


def constant_column(value: str, rows: int) -> Any:
    """A categorical column holding ``value`` on every one of ``rows`` rows, from codes (no
    list of texts)."""
    return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), [value])


def _filled(column: Any, value: str) -> Any:
    """A text column with ``value`` where it is missing or empty (categories kept)."""
    values = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
    if value not in values.cat.categories:
        values = values.cat.add_categories([value])
    values = values.fillna(value)
    if "" in values.cat.categories:
        values = values.where(values != "", value)
    return values


def concat_frames(frames: list[Any]) -> Any:
    """pandas frames one below the other, text columns staying categorical.  Each column is
    joined once, from its parts' arrays (a column a frame lacks is empty there): no frame is
    copied whole first."""
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = list(dict.fromkeys(c for f in frames for c in f.columns))
    out = {}
    for c in columns:
        parts = [f[c] if c in f.columns else None for f in frames]
        if all(p is None or _is_text(p) for p in parts) and any(p is not None for p in parts):
            out[c] = _join_text(parts, [len(f) for f in frames])
            continue
        arrays = []
        for p, f in zip(parts, frames, strict=True):
            if p is None:
                arrays.append(np.full(len(f), np.nan))
            elif _is_text(p):  # text where the other parts hold numbers: as a column of objects
                arrays.append(p.astype(object).to_numpy())
            else:
                arrays.append(p.to_numpy())
        kinds = {a.dtype.kind for a in arrays}
        joined = np.concatenate(
            arrays if kinds <= set("iuf") or len(kinds) == 1 else [a.astype(object) for a in arrays]
        )
        out[c] = joined
    return pd.DataFrame(out, copy=False)  # no consolidation: one block per column


def _is_text(column: Any) -> bool:
    return (
        isinstance(column.dtype, pd.CategoricalDtype)
        or column.dtype == object
        or pd.api.types.is_string_dtype(column.dtype)
    )


def _join_text(parts: list[Any], rows: list[int]) -> Any:
    """Text parts as one categorical: every part's categories, as str, each part's codes
    remapped onto them (a missing part: missing values)."""
    categories: list[str] = []
    for p in parts:
        if p is None:
            continue
        values = (
            p.cat.categories if isinstance(p.dtype, pd.CategoricalDtype) else p.dropna().unique()
        )
        categories += [str(v) for v in values]
    dtype = pd.CategoricalDtype(list(dict.fromkeys(categories)))
    codes = []
    for p, n in zip(parts, rows, strict=True):
        if p is None:
            codes.append(np.full(n, -1, dtype=np.int64))
        elif isinstance(p.dtype, pd.CategoricalDtype):
            if not all(isinstance(v, str) for v in p.cat.categories):
                p = p.cat.rename_categories([str(v) for v in p.cat.categories])
            recoded = pd.Categorical(p).set_categories(dtype.categories)
            codes.append(np.asarray(recoded.codes, dtype=np.int64))
        else:
            codes.append(np.asarray(p.astype(object).astype(dtype).cat.codes, dtype=np.int64))
    return pd.Categorical.from_codes(np.concatenate(codes), dtype=dtype)
