"""Read whatever engines and benchmark tools printed, into records of the measurement schema.

One driver for every input (:func:`iter_frames`): it opens the file (or
standard input, ``-``), decompresses by magic bytes, tells what it holds from
the content (:func:`breakeven.iotools.sources.detect`) and reads it (UTF-8 text; UTF-16 where
a byte-order mark says so, transcoded as it streams: :func:`breakeven.iotools.sources.open_input`):

- JSON or JSON Lines (only if the whole file parses so): benchmark results,
  told apart by their keys (:mod:`breakeven.iotools.bench_results`, AIPerf's exports
  :mod:`breakeven.iotools.aiperf`); JSON Lines read a line at a time, with no size limit
  (:mod:`breakeven.iotools.jsonlines`);
- Prometheus text of an engine's ``/metrics`` (:mod:`breakeven.iotools.prometheus`);
- anything else is text, scanned at once for every line kind of every engine
  (:mod:`breakeven.iotools.engines`) and for printed benchmark result tables (AIPerf's
  console summary and CSV exports among them).

Records come out as polars frames of the record schema
(:mod:`breakeven.iotools.records`); ``--json``, the Python API and ``--out``
are views of the same frames.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import polars as pl

from breakeven.core.choices import BENCH_TABLE, INGEST_FORMATS, TEXT_LOG
from breakeven.core.errors import UnreadableInput, invalid_value
from breakeven.iotools import aiperf, batch, bench_results, jsonlines, prometheus, sources
from breakeven.iotools.engines import engines
from breakeven.iotools.lines import TextScanner
from breakeven.iotools.records import RECORD_KEYS, Tally, frame_of, stamped
from breakeven.iotools.sources import Problem

__all__ = [
    "FORMATS",
    "RECORD_KEYS",
    "IngestResult",
    "Input",
    "Problem",
    "Tally",
    "ingest",
    "iter_frames",
    "tok_s_meanings",
]

TEXT = TEXT_LOG
# Blocks of a text input marked at once, in threads: splitting a block into lines and
# filtering them uses about one CPU, so two keep two CPUs busy; each more costs about
# 30 MiB of memory.
MARK_WORKERS = min(2, os.cpu_count() or 1)
FORMATS = INGEST_FORMATS
"""``--format``: 'auto' or a format's name (:data:`breakeven.core.choices.INGEST_FORMATS`)."""


@dataclass
class Input:
    """One file to read (``-`` for standard input) and what the user says about it."""

    path: str
    stamp: dict[str, Any] = field(default_factory=dict)
    """Metadata for every record of the file (``label``, ``run_id``, ``model``,
    ``hardware``, ``env``, ``spec_method``): it replaces what the file says."""
    num_spec_tokens: int | None = None
    """k, for lines that do not print it (and it is stamped on records that have none)."""
    year: int | None = None
    """The year of dates printed without one (vLLM's ``MM-DD HH:MM:SS``): with it they
    become ISO 8601 in ``timestamp`` and ``launched_at``; without, they stay as printed."""


YEARS = (1970, 2100)
"""The years ``year`` may be."""


def check_year(year: int | None, name: str = "year") -> int | None:
    """``year`` if it is None or a whole number in :data:`YEARS`, else a
    :class:`~breakeven.core.errors.BreakevenError` naming ``name``."""
    if year is None:
        return None
    if isinstance(year, bool) or not isinstance(year, int) or not YEARS[0] <= year <= YEARS[1]:
        raise invalid_value(name, year, f"a whole number from {YEARS[0]} to {YEARS[1]}")
    return year


@dataclass
class IngestResult:
    """Records read from one or more files, and the problems met on the way."""

    frame: Any = None
    """The records, a polars DataFrame of the record schema."""
    problems: list[Problem] = field(default_factory=list)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records as dicts (None for a missing value)."""
        return self.frame.to_dicts() if self.frame is not None else []

    def to_frame(self) -> Any:
        """The records as a pandas DataFrame (missing values NaN or None)."""

        if self.frame is None:
            return pd.DataFrame(columns=list(RECORD_KEYS))
        # Column by column through numpy: no dict per record, no pyarrow needed.
        return pd.DataFrame({c: self.frame[c].to_numpy() for c in RECORD_KEYS})


def _inputs(
    paths: Sequence[str | os.PathLike[str] | Input],
    stamp: dict[str, Any] | None,
    num_spec_tokens: int | None,
    year: int | None = None,
) -> list[Input]:
    check_year(year)
    out = []
    for p in paths:
        item = p if isinstance(p, Input) else Input(os.fspath(p))
        merged = {**(stamp or {}), **{k: v for k, v in item.stamp.items() if v is not None}}
        k = item.num_spec_tokens if item.num_spec_tokens is not None else num_spec_tokens
        out.append(Input(item.path, merged, k, check_year(item.year) or year))
    return out


def iter_frames(
    paths: Sequence[str | os.PathLike[str] | Input],
    problems: list[Problem],
    *,
    format: str = "auto",
    before: str | os.PathLike[str] | None = None,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
    block_bytes: int | None = None,
    year: int | None = None,
) -> Iterator[Any]:
    """Stream record frames from engine logs, benchmark results and metrics scrapes.

    Text is read in bounded memory; problems (naming file and line) are
    appended to ``problems``.  See :func:`ingest` for the parameters.
    """
    items = _inputs(paths, stamp, num_spec_tokens, year)
    joined = _Joined()
    for item, frames, read in _read_inputs(items, format, before, problems, block_bytes):
        known, found = len(problems), 0
        if read is None:  # streamed: its problems come as its frames are taken
            yield from joined.flush()
            for frame in frames:
                found += frame.height
                yield _stamp(frame, item)
        else:
            problems += read
            found = sum(frame.height for frame in frames)
            yield from joined.add(item, frames)
        # A file's problems in line order (each line kind is parsed in batches of its own).
        problems[known:] = sorted(problems[known:], key=lambda p: (p.line is not None, p.line or 0))
        if not found and len(problems) == known:
            problems.append(
                Problem(
                    item.path,
                    None,
                    "holds nothing breakeven reads: no engine "
                    "log lines, benchmark results or engine metrics",
                )
            )
    yield from joined.flush()


JOIN_ROWS = 1 << 16
"""The most records :class:`_Joined` joins into one frame."""


class _Joined:
    """Record frames of inputs read together, joined: whoever takes the frames pays a few
    queries a frame (the CSV rows, the tally).  Frames join while they follow each other,
    come from different files (each file's frames stay apart: a file's tally sums are
    those of its frames, one by one) and take the same stamp, stamped once."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self.paths: set[str] = set()
        self.item: Input | None = None
        self.rows = 0

    def add(self, item: Input, frames: list[Any]) -> Iterator[Any]:
        """The joined frames that ``frames`` (of ``item``) complete."""
        for frame in frames:
            if self.item is not None and (
                item.path in self.paths
                or (item.stamp, item.num_spec_tokens)
                != (self.item.stamp, self.item.num_spec_tokens)
                or self.rows >= JOIN_ROWS
            ):
                yield from self.flush()
            self.frames.append(frame)
            self.paths.add(item.path)
            self.item = item
            self.rows += frame.height

    def flush(self) -> Iterator[Any]:
        """The frames held, joined and stamped."""
        if self.item is not None:
            frame = pl.concat(self.frames) if len(self.frames) > 1 else self.frames[0]
            yield _stamp(frame, self.item)
        self.frames, self.paths, self.item, self.rows = [], set(), None, 0


def _stamp(frame: Any, item: Input) -> Any:

    frame = stamped(frame, item.stamp)
    if item.num_spec_tokens is not None:  # k where the file does not tell it
        frame = frame.with_columns(
            num_spec_tokens=pl.coalesce(
                pl.col("num_spec_tokens"),
                pl.when(pl.col("accept_len").is_not_null()).then(
                    pl.lit(item.num_spec_tokens, pl.Int64)
                ),
            )
        )
    return frame


def _read_inputs(
    items: list[Input], format: str, before: Any, problems: list[Problem], block_bytes: int | None
) -> Iterator[tuple[Input, Iterable[Any], list[Problem] | None]]:
    """Each input, its record frames and problems, in order: small text inputs are read
    together (:mod:`breakeven.iotools.batch`): a list of their frames and their problems;
    any other streams as it is read (its problems None: they go to ``problems`` as its
    frames are taken)."""
    waiting: list[tuple[Input, batch.Parts | None, list[Problem]]] = []
    size = 0
    for item in items:
        try:
            source = sources.open_input(item.path)
        except UnreadableInput as e:
            waiting.append((item, None, [Problem(item.path, None, str(e))]))
            continue
        kind, parts, rest = _kind(format, source), [], None
        if kind == sources.TEXT and batch.SMALL_BYTES > 0:
            parts, rest = _prefetch(source, block_bytes)
            if rest is None:  # small: read with others
                waiting.append((item, parts, []))
                size += batch.size_of(parts)
                if size >= batch.BATCH_BYTES or len(waiting) >= batch.BATCH_INPUTS:
                    yield from _read_batch(waiting)
                    waiting, size = [], 0
                continue
        yield from _read_batch(waiting)
        waiting, size = [], 0
        blocks = itertools.chain(parts, rest) if rest is not None else None
        yield item, _read_input(item, source, kind, before, problems, block_bytes, blocks), None
    yield from _read_batch(waiting)


def _prefetch(
    source: sources.Input, block_bytes: int | None
) -> tuple[batch.Parts, Iterator[Any] | None]:
    """A text input's first blocks (:func:`batch.prefetch`); the source is closed where the
    input ended within them."""
    try:
        parts, rest = batch.prefetch(sources.iter_blocks(source, block_bytes))
    except BaseException:
        source.close()
        raise
    if rest is None:
        source.close()
    return parts, rest


def _read_batch(
    waiting: list[tuple[Input, batch.Parts | None, list[Problem]]],
) -> Iterator[tuple[Input, list[Any], list[Problem]]]:
    """Small inputs read together (those that could not be opened have their problem)."""
    texts = [(item, parts) for item, parts, _ in waiting if parts is not None]
    found_engines = engines()
    scanners = [_scanner(item, found_engines) for item, _ in texts]
    read = iter(batch.scan(scanners, [parts for _, parts in texts]))
    for item, parts, found in waiting:
        frames, more = next(read) if parts is not None else ([], [])
        yield item, frames, found + more


def _read_input(
    item: Input,
    source: sources.Input,
    kind: str,
    before: Any,
    problems: list[Problem],
    block_bytes: int | None,
    blocks: Iterator[Any] | None = None,
) -> Iterator[Any]:
    """An opened input's record frames (``kind``: what it holds; ``blocks``: a text input's
    blocks, where they were begun already); the source is closed at the end."""
    try:
        error = None
        if kind in (sources.JSON_DOCUMENT, *bench_results.BENCH_FORMATS):
            forced = None if kind == "json" else kind
            frames, error, start, lines = _json_frames(item.path, source, forced, problems)
            if error is None:
                yield from frames
                return
            # Not JSON after all: text that starts like it (an SGLang log, say).
            again = lines.again(item.path)
            if again is None:
                problems.append(Problem(item.path, None, _NOT_KEPT.format(error)))
                return
            source.close()
            source, kind = again, sources.TEXT
            nested = error.startswith("JSON nested")
            if not nested and not start.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
                error = None  # "[53409] ..." (a process manager's prefix): a log
        if kind == sources.PROMETHEUS:
            records = _prometheus_records(item, source, before, problems)
            if records:
                yield frame_of(records)
            return
        frames = _text_frames(item, source, problems, block_bytes, blocks)
        if error is None:
            yield from frames
            return
        found, known = 0, len(problems)
        for frame in frames:
            found += frame.height
            yield frame
        if not found and len(problems) == known:  # a cut-off JSON export, most likely
            message = (
                f"is {error}: not a benchmark result"
                if error.startswith("JSON nested")
                else f"starts as a JSON object but does not parse ({error}); cut off?"
            )
            problems.append(Problem(item.path, None, message))
    except UnreadableInput as e:
        problems.append(Problem(item.path, None, str(e)))
    finally:
        source.close()


def _kind(format: str, source: sources.Input) -> str:
    if format == "auto":
        return sources.detect(source.head)
    if format in (TEXT, BENCH_TABLE):
        return sources.TEXT
    if format == prometheus.PROMETHEUS:
        return sources.PROMETHEUS
    return format


_NOT_KEPT = (
    "is not JSON Lines ({}), and as more than "
    + f"{sources.MAX_DOCUMENT_BYTES >> 20} MiB came from a pipe, it is not read again as "
    "text; save it to a file"
)


def _json_frames(
    path: str, source: sources.Input, forced: str | None, problems: list[Problem]
) -> tuple[list[Any], str | None, bytes, jsonlines.Lines]:
    """A JSON input's record frames, why it is not JSON after all (None: it is), how it
    starts, and its lines (to read it again as text): JSON Lines a line at a time, anything
    else whole (:mod:`breakeven.iotools.jsonlines`)."""
    lines = jsonlines.Lines(source)
    each = iter(lines)
    try:
        first = jsonlines.first_value(each)
    except jsonlines.LineTooLong:
        first = None  # past the limit: the whole read below says so
    if first is not None:
        lines.forget(path)
        try:
            streamed = jsonlines.stream_records(path, each, first, forced)
        except jsonlines.LineTooLong as e:
            limit = f"{jsonlines.MAX_LINE_BYTES / (1 << 20):g} MiB"
            problems.append(Problem(path, e.line, _TOO_LONG.format(limit)))
            return [], None, first[1], lines
        problems += streamed.problems
        return streamed.frames, streamed.error, streamed.start, lines
    data = lines.whole()
    read, error = jsonlines.json_records(path, data, forced, problems)
    return ([frame_of(read)] if read else []), error, data, lines


_TOO_LONG = "a line over {0}; a line of JSON Lines may hold at most {0}: nothing of it is read"


def _prometheus_records(
    item: Input, source: sources.Input, before: Any, problems: list[Problem]
) -> list[dict[str, Any]]:
    text = jsonlines.decode(item.path, source.read_all(), problems)
    previous = None
    if before is not None:
        try:
            earlier = sources.open_input(os.fspath(before))
        except UnreadableInput as e:
            problems.append(Problem(os.fspath(before), None, str(e)))
            return []
        try:
            previous = jsonlines.decode(os.fspath(before), earlier.read_all(), problems)
        finally:
            earlier.close()
        if previous is None:
            return []
    if text is None:
        return []
    try:
        return prometheus.parse_metrics(
            text, previous, source=item.path, num_spec_tokens=item.num_spec_tokens
        )
    except ImportError as e:
        problems.append(Problem(item.path, None, str(e)))
    except ValueError as e:
        problems.append(Problem(item.path, None, f"not Prometheus text: {e}"))
    return []


def _scanner(item: Input, found_engines: list[Any] | None = None) -> TextScanner:
    """A text input's scanner: every engine's line kinds (``found_engines``, where
    :func:`engines` was asked already), and printed result tables."""
    return TextScanner(
        item.path,
        engines() if found_engines is None else found_engines,
        item.num_spec_tokens,
        _tables,
        (bench_results.TABLE_MARKER, bench_results.SPEC_SECTION, *aiperf.MARKERS),
        year=item.year,
    )


def _text_frames(
    item: Input,
    source: sources.Input,
    problems: list[Problem],
    block_bytes: int | None,
    blocks: Iterator[Any] | None = None,
) -> Iterator[Any]:

    scanner = _scanner(item)

    def mark(block: Any) -> Any:
        return None if isinstance(block, Problem) else scanner.mark(block)

    # Blocks are marked (split into lines, filtered) in threads, two at once; each
    # block's lines are then parsed here, in order.
    if blocks is None:
        blocks = sources.iter_blocks(source, block_bytes)
    for block, lines in sources.mapped(mark, blocks, MARK_WORKERS):
        frames, found = scanner.feed(block, lines)
        problems += found
        yield from frames
    frames, found = scanner.finish()
    problems += found
    yield from frames


def _tables(
    text: str, first_line: int, final: bool
) -> tuple[list[dict[str, Any]], list[tuple[int, str]], int | None]:
    """Printed benchmark result tables in ``text``: records (``_line`` their title line),
    problems, and the title line of a table ``text`` ends inside."""
    tables, bench_open = bench_results.parse_result_tables(text, first_line)
    records, problems, aiperf_open = aiperf.table_records(text, first_line, final)
    opened = [at for at in (bench_open, aiperf_open) if at is not None and not final]
    open_at = min(opened, default=None)
    for line, obj in tables:
        fmt = bench_results.bench_format(obj)
        if fmt is None:
            problems.append(
                (line, "a benchmark result table without output throughput and TPOT rows")
            )
            continue
        try:
            record = bench_results.result_record(obj, fmt, "")
        except bench_results.FormatError as e:
            problems.append((line, f"result table does not parse: {e}"))
            continue
        record.pop("source")
        record["format"] = fmt + "_table"
        record["_line"] = line
        records.append(record)
    if open_at is not None:  # from there, read again with the next block
        records = [r for r in records if r["_line"] < open_at]
        problems = [p for p in problems if p[0] < open_at]
    return records, problems, open_at


def tok_s_meanings() -> dict[str, str]:
    """What ``tok_s`` (per sequence) is, by record format."""

    meanings = bench_results.bench_tok_s_meanings()
    meanings[aiperf.PROFILE_CSV] = aiperf.TOK_S
    meanings[prometheus.PROMETHEUS] = (
        "tokens predicted / seconds predicting (llama.cpp counters); "
        "generation throughput / running requests (SGLang gauges)"
    )
    for engine in engines():
        meanings.update(engine.tok_s)
    return meanings


def ingest(
    paths: Sequence[str | os.PathLike[str] | Input],
    *,
    format: str = "auto",
    before: str | os.PathLike[str] | None = None,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
    year: int | None = None,
) -> IngestResult:
    """Records from engine logs, benchmark results and metrics scrapes.

    Parameters
    ----------
    paths : list of path or Input
        Files to read (``-``: standard input), plain or compressed (gzip,
        bzip2, xz), UTF-8 or, with its byte-order mark, UTF-16; each one's
        format is told from its content unless ``format`` says.  An :class:`Input` carries metadata for one file.
    format : str
        'auto' or one of :data:`FORMATS`.
    before : path, optional
        A Prometheus scrape taken before the run: records are the difference.
    num_spec_tokens : int, optional
        k, for formats that do not print it.
    stamp : dict, optional
        Values for every record (``label``, ``run_id``, ``model``,
        ``hardware``, ``env``, ``spec_method``); they replace what a file says.
    year : int, optional
        The year of dates logged without one (vLLM's ``MM-DD HH:MM:SS``), 1970 to 2100:
        ``timestamp`` and ``launched_at`` then read ``YYYY-MM-DDTHH:MM:SS``.

    Returns
    -------
    IngestResult
        Problems name the file and line; unrelated lines are ignored.
    """

    result = IngestResult()
    frames = list(
        iter_frames(
            paths,
            result.problems,
            format=format,
            before=before,
            num_spec_tokens=num_spec_tokens,
            stamp=stamp,
            year=year,
        )
    )
    result.frame = pl.concat(frames) if frames else frame_of([])
    return result
