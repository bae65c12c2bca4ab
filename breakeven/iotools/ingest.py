"""Read whatever engines and benchmark tools printed, into records of the measurement schema.

The format is detected from a file's content, never its name:

- JSON or JSON Lines: a benchmark result (``vllm bench serve``, SGLang
  ``bench_serving`` or ``bench_one_batch``), told apart by its keys;
- Prometheus text (``# TYPE vllm:...``, ``sglang:...`` samples);
- anything else: an engine log, scanned for vLLM and SGLang metric lines.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from breakeven.iotools import bench, prometheus
from breakeven.iotools.logs import LOG_FORMATS, Problem, iter_log
from breakeven.iotools.records import RECORD_KEYS, Tally, complete, csv_rows  # noqa: F401

LOG = "log"
BENCH_TABLE = "bench_table"
FORMATS = ("auto", LOG, BENCH_TABLE, *bench.BENCH_FORMATS, prometheus.PROMETHEUS)
MAX_DOCUMENT_BYTES = 256 << 20  # JSON and Prometheus files are read whole


@dataclass
class IngestResult:
    """Records read from one or more files, and the problems met on the way."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_frame(self) -> Any:
        """The records as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.records)


def detect_format(path: str) -> str:
    """'log', 'prometheus' or 'json', from the first 64 KiB of the file."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "json"
    if bench.TABLE_MARKER.encode() in head or bench.SPEC_SECTION.encode() in head:
        return BENCH_TABLE
    if prometheus.looks_like_prometheus(head.decode("utf-8", errors="replace")):
        return prometheus.PROMETHEUS
    return LOG


def _read_text(path: str, result: IngestResult) -> str | None:
    size = os.path.getsize(path)
    if size > MAX_DOCUMENT_BYTES:
        result.problems.append(Problem(path, None, f"is {size >> 20} MiB; a JSON or metrics file "
                                       f"may hold at most {MAX_DOCUMENT_BYTES >> 20} MiB"))  # fmt: skip
        return None
    with open(path, "rb") as f:
        raw = f.read()
    if b"\0" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
        result.problems.append(Problem(path, line, "binary data (a NUL byte); expected text"))
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        result.problems.append(Problem(path, line, f"not UTF-8 text ({e.reason})"))
        return None


def _ingest_json(path: str, forced: str | None, result: IngestResult) -> None:
    text = _read_text(path, result)
    if text is None:
        return
    try:
        documents = bench.parse_json_document(text)
    except ValueError as e:
        result.problems.append(Problem(path, None, f"not JSON or JSON Lines: {e}"))
        return
    for line, obj in documents:
        fmt = forced or (bench.bench_format(obj) if isinstance(obj, dict) else None)
        if fmt is None:
            keys = ", ".join(sorted(obj)[:8]) if isinstance(obj, dict) else type(obj).__name__
            result.problems.append(Problem(path, line, f"a JSON value of no known benchmark "
                                           f"format (keys: {keys})"))  # fmt: skip
            continue
        try:
            result.records.append(bench.read_result(obj, fmt, f"{path}:{line}"))
        except bench.FormatError as e:
            result.problems.append(Problem(path, line, f"{fmt} result does not parse: {e}"))


def iter_ingest(
    paths: list[str | os.PathLike[str]],
    problems: list[Problem],
    *,
    format: str = "auto",
    before: str | os.PathLike[str] | None = None,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream records from engine logs, benchmark results and metrics scrapes.

    Logs are read in bounded memory; problems (naming file and line) are
    appended to ``problems``.  See :func:`ingest` for the parameters.
    """
    stamp = stamp or {}
    for path, kind in _files(paths, format, problems):
        found = 0
        known = len(problems)
        try:
            if kind == LOG:
                records: Any = iter_log(path, problems, num_spec_tokens)
            else:
                records = _document_records(path, kind, before, num_spec_tokens, problems)
            for record in records:
                found += 1
                yield complete(record, stamp)
        except OSError as e:
            problems.append(Problem(path, None, f"cannot read it ({e.strerror or e})"))
            continue
        _nothing_read(path, found, known, problems)


def iter_ingest_rows(
    paths: list[str | os.PathLike[str]],
    problems: list[Problem],
    tally: Tally,
    *,
    format: str = "auto",
    before: str | os.PathLike[str] | None = None,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
    workers: int | None = None,
    max_workers: int = 4,
) -> Iterator[bytes]:
    """The records of :func:`iter_ingest` as measurement CSV rows (UTF-8, no header).

    The same rows as writing :func:`iter_ingest`'s records with
    :func:`~breakeven.iotools.records.csv_rows`, faster for large logs
    (:mod:`breakeven.iotools.logrows`); ``tally`` counts the records.
    ``workers``: processes for reading a log (default: one per CPU, at most
    ``max_workers``, for a log over 32 MiB).
    """
    from breakeven.iotools.logrows import iter_log_rows

    stamp = stamp or {}
    for path, kind in _files(paths, format, problems):
        found = tally.records
        known = len(problems)
        try:
            if kind == LOG:
                yield from iter_log_rows(path, problems, tally, num_spec_tokens=num_spec_tokens,
                                         stamp=stamp, workers=workers, max_workers=max_workers)  # fmt: skip
            else:
                records = _document_records(path, kind, before, num_spec_tokens, problems)
                done = [complete(r, stamp) for r in records]
                for r in done:
                    tally.count(r)
                yield csv_rows(done)
        except OSError as e:
            problems.append(Problem(path, None, f"cannot read it ({e.strerror or e})"))
            continue
        _nothing_read(path, tally.records - found, known, problems)


def _files(
    paths: list[str | os.PathLike[str]], format: str, problems: list[Problem]
) -> Iterator[tuple[str, str]]:
    """Each readable, non-empty file and its format."""
    for p in paths:
        path = os.fspath(p)
        try:
            info = os.stat(path)
            if not stat.S_ISREG(info.st_mode):
                what = (
                    "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a pipe?)"
                )
                problems.append(Problem(path, None, f"is {what}; expected a file (save a stream "
                                        "to a file first)"))  # fmt: skip
                continue
            if info.st_size == 0:
                problems.append(Problem(path, None, "is empty"))
                continue
            kind = detect_format(path) if format == "auto" else format
        except OSError as e:
            problems.append(Problem(path, None, f"cannot read it ({e.strerror or e})"))
            continue
        yield path, kind


def _document_records(
    path: str, kind: str, before: Any, k: int | None, problems: list[Problem]
) -> list[dict[str, Any]]:
    """The records of a benchmark result or metrics file (read whole)."""
    result = IngestResult()
    if kind in ("json", *bench.BENCH_FORMATS):
        _ingest_json(path, None if kind == "json" else kind, result)
    elif kind == BENCH_TABLE:
        _ingest_tables(path, result)
    else:
        _ingest_prometheus(path, before, k, result)
    problems += result.problems
    return result.records


def _nothing_read(path: str, found: int, known: int, problems: list[Problem]) -> None:
    if not found and len(problems) == known:
        problems.append(Problem(path, None, "holds nothing breakeven reads: no "
                                f"{', '.join(LOG_FORMATS)} lines, benchmark "
                                "results or engine metrics"))  # fmt: skip


def ingest(
    paths: list[str | os.PathLike[str]],
    *,
    format: str = "auto",
    before: str | os.PathLike[str] | None = None,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
) -> IngestResult:
    """Records from engine logs, benchmark results and metrics scrapes.

    Parameters
    ----------
    paths : list of path
        Files to read; each one's format is detected unless ``format`` says.
    format : str
        'auto' or one of :data:`FORMATS`.
    before : path, optional
        A Prometheus scrape taken before the run: records are the difference.
    num_spec_tokens : int, optional
        k, for formats that do not print it.
    stamp : dict, optional
        Values for every record (``label``, ``run_id``, ``model``,
        ``hardware``, ``env``, ``spec_method``) where the file gives none.

    Returns
    -------
    IngestResult
        Problems name the file and line; unrelated lines are ignored.
    """
    result = IngestResult()
    result.records = list(iter_ingest(paths, result.problems, format=format, before=before,
                                      num_spec_tokens=num_spec_tokens, stamp=stamp))  # fmt: skip
    return result


def _ingest_tables(path: str, result: IngestResult) -> None:
    text = _read_text(path, result)
    if text is None:
        return
    for line, obj in bench.parse_result_tables(text):
        fmt = bench.bench_format(obj)
        if fmt is None:
            result.problems.append(Problem(path, line, "a benchmark result table without "
                                           "output throughput and TPOT rows"))  # fmt: skip
            continue
        try:
            record = bench.read_result(obj, fmt, f"{path}:{line}")
        except bench.FormatError as e:
            result.problems.append(Problem(path, line, f"result table does not parse: {e}"))
            continue
        record["format"] = fmt + "_table"
        result.records.append(record)


def _ingest_prometheus(path: str, before: Any, k: int | None, result: IngestResult) -> None:
    text = _read_text(path, result)
    previous = None
    if before is not None:
        previous = _read_text(os.fspath(before), result)
        if previous is None:
            return
    if text is None:
        return
    try:
        result.records += prometheus.read_metrics(text, previous, source=path, num_spec_tokens=k)
    except ImportError as e:
        result.problems.append(Problem(path, None, str(e)))
    except ValueError as e:
        result.problems.append(Problem(path, None, f"not Prometheus text: {e}"))
