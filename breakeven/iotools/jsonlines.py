"""Benchmark results in JSON: one document read whole, JSON Lines read a line at a time.

A JSON document (``vllm bench serve``'s result, AIPerf's summary) is read whole, up to
:data:`~breakeven.iotools.sources.MAX_DOCUMENT_BYTES`.  JSON Lines (AIPerf's
``profile_export.jsonl``, a record per request; SGLang's JSONL) have no size limit: each line
is parsed and made records as it comes (:func:`stream_records`), so memory holds one line
(at most :data:`MAX_LINE_BYTES`) and the records, never the file.  A file is JSON Lines when
its first line that is not blank is a JSON value by itself.

Both read the same: a file that is one value is its documents (a list, its items) on line
1; else each line is a document, and a last line that does not parse (a file still being
written: AIPerf's records of an interrupted run) is a problem that keeps the lines before
it, where those are benchmark results.  What makes the file no JSON at all (a NUL byte, text
that is not UTF-8, nesting deeper than :data:`~breakeven.iotools.jsonsafe.MAX_DEPTH`, a bad
line before the last) is found in whatever line it is, and nothing of the file is kept, as
when the file was read whole.  Lines end at ``\\n`` (``\\r\\n`` too).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from breakeven.core.errors import UnreadableInput
from breakeven.iotools import bench_results, jsonsafe, sources
from breakeven.iotools.records import frame_of
from breakeven.iotools.sources import Problem

MAX_LINE_BYTES = sources.MAX_DOCUMENT_BYTES
"""The longest line of JSON Lines read: as long as a whole document may be."""
PIECE_BYTES = 1 << 20
"""What is read from the input at a time."""
FRAME_RECORDS = 1 << 12
"""Records made into a frame at a time (a frame's columns are far smaller than its dicts)."""


def decode(path: str, data: bytes, problems: list[Problem], line: int = 1) -> str | None:
    """``data`` (which starts at ``line``) as text; None, with a problem naming its line,
    where it holds a NUL byte or is not UTF-8."""
    problem = decode_problem(path, data, line)
    if problem is not None:
        problems.append(problem)
        return None
    return data.decode("utf-8-sig")


def decode_problem(path: str, data: bytes, line: int = 1) -> Problem | None:
    """Why ``data`` (which starts at ``line``) is not text: a NUL byte, else not UTF-8."""
    if b"\0" in data:
        at = line + data.count(b"\n", 0, data.index(b"\0"))
        return Problem(path, at, "binary data (a NUL byte); expected text")
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return Problem(path, line + data.count(b"\n", 0, e.start), f"not UTF-8 text ({e.reason})")
    return None


def json_records(
    path: str, data: bytes, forced: str | None, problems: list[Problem]
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The records of a whole JSON document or JSON Lines, and why it does not parse; None if
    it is neither (then it is text, unless the format was forced: ``forced``)."""
    text = decode(path, data, problems)
    if text is None:
        return [], None
    try:
        documents, cut = bench_results.parse_json_lines(text)
    except ValueError as e:
        return _not_json(path, str(e), forced, problems)
    if cut is not None:
        known = any(_known(obj) for _, obj in documents)
        if forced is None and not known:
            return None, f"line {cut[0]}: {cut[1]}"
        problems.append(_cut_problem(path, cut))
    records: list[dict[str, Any]] = []
    for line, obj in documents:
        records += document_records(path, line, obj, forced, problems)
    return records, None


def document_records(
    path: str, line: int, obj: Any, forced: str | None, problems: list[Problem]
) -> list[dict[str, Any]]:
    """One JSON document's records (of format ``forced``, else the one its keys say), or a
    problem naming its line."""
    fmt = forced or (bench_results.bench_format(obj) if isinstance(obj, dict) else None)
    if fmt is None:
        what = (
            f"keys: {', '.join(sorted(obj)[:8])}"
            if isinstance(obj, dict)
            else f"a {type(obj).__name__}, not an object"
        )
        problems.append(Problem(path, line, f"a JSON value of no known benchmark format ({what})"))
        return []
    try:
        return bench_results.result_records(obj, fmt, f"{path}:{line}")
    except bench_results.FormatError as e:
        problems.append(Problem(path, line, f"{fmt} result does not parse: {e}"))
        return []


def _known(obj: Any) -> bool:
    return isinstance(obj, dict) and bench_results.bench_format(obj) is not None


def _cut_problem(path: str, cut: tuple[int, str]) -> Problem:
    return Problem(path, cut[0], f"{cut[1]}: cut off? The lines before it are read")


def _not_json(
    path: str, error: str, forced: str | None, problems: list[Problem]
) -> tuple[None, str] | tuple[list[dict[str, Any]], None]:
    """A file that is not JSON: text to scan (None, why), or with a forced format a problem."""
    if forced is None:
        return None, error
    problems.append(Problem(path, None, f"not JSON or JSON Lines: {error}"))
    return [], None


class Lines:
    """An input's lines (each with its ``\\n``), numbered from 1, read a piece at a time.

    Until :meth:`forget` what was read is kept, up to
    :data:`~breakeven.iotools.sources.MAX_DOCUMENT_BYTES`, to be read again: whole, as a JSON
    document (:meth:`whole`), or as text (:meth:`again`) where the input cannot be reopened."""

    def __init__(self, source: sources.Input) -> None:
        self.source = source
        self.kept: bytearray | None = bytearray()
        self.forgotten = False
        self.ended = False

    def _read(self) -> bytes:
        piece = self.source.stream.read(PIECE_BYTES)
        if self.kept is not None and not self.forgotten:
            self.kept += piece
            if len(self.kept) > sources.MAX_DOCUMENT_BYTES:
                self.kept = None  # past what a file read whole may hold
        self.ended = not piece
        return piece

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        number, parts, size = 0, [], 0
        while not self.ended:
            piece = self._read()
            start = 0
            while (end := piece.find(b"\n", start)) >= 0:
                number += 1
                if size + end + 1 - start > MAX_LINE_BYTES:
                    raise LineTooLong(number)
                yield number, b"".join([*parts, piece[start : end + 1]])
                parts, size, start = [], 0, end + 1
            if start < len(piece):
                parts.append(piece[start:])
                size += len(piece) - start
                if size > MAX_LINE_BYTES:
                    raise LineTooLong(number + 1)
        if size:
            yield number + 1, b"".join(parts)

    def forget(self, path: str) -> None:
        """Keep no more of what is read where ``path`` can be opened again (a regular file)."""
        if sources.is_regular_file(path):
            self.kept, self.forgotten = bytearray(), True

    def whole(self) -> bytes:
        """All of the input: what was read, and the rest
        (:meth:`breakeven.iotools.sources.Input.read_all`, and its limit)."""
        if self.kept is None:
            raise UnreadableInput(sources.too_large(sources.MAX_DOCUMENT_BYTES))
        if not self.ended:
            self.kept = bytearray(self.source.read_all(already=bytes(self.kept)))
            self.ended = True
        return bytes(self.kept)

    def again(self, path: str) -> sources.Input | None:
        """The whole input from its start, to read as text: reopened where it is a regular
        file, else what was read of it; None where more was read than is kept."""
        if self.forgotten:
            return sources.open_input(path)
        if self.kept is None:
            return None
        data = self.whole()
        return sources.Input(path, io.BytesIO(data), data[: sources.HEAD_BYTES], None)


class LineTooLong(Exception):
    """A line longer than :data:`MAX_LINE_BYTES`: ``line``, its number."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


@dataclass
class _Reading:
    """What a JSON Lines file gave so far, and what makes it no JSON at all."""

    path: str
    forced: str | None
    frames: list[Any] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    first: tuple[int, Any] | None = None
    """The first document, held until a second says the file is JSON Lines, not one value."""
    documents: int = 0
    known: bool = False
    bad: tuple[int, str] | None = None
    """A line that does not parse: the file's cut last line, unless another follows."""
    not_text: Problem | None = None
    """A NUL byte (that one wins wherever it is), else the first line that is not UTF-8."""
    depth: jsonsafe.NestingDepth = field(default_factory=jsonsafe.NestingDepth)
    """The whole file's nesting so far, as :func:`~breakeven.iotools.jsonsafe.nesting_depth`
    counts it (a cut line's open brackets and strings carry on to the next)."""
    not_lines: str | None = None
    """Why the file is not JSON Lines: a bad line before the last."""

    def text(self, number: int, raw: bytes) -> str | None:
        """A line as text, without its line end; None (and the file's verdict) where it is
        not text, or the file is not, whatever the line."""
        nul = b"\0" in raw
        if self.not_text is None and not nul:
            try:
                return _without_end(raw.decode(_encoding(number)))
            except UnicodeDecodeError:
                pass
        elif not nul:
            return None
        if self.not_text is None or (nul and not self.not_text.message.startswith("binary")):
            self.not_text = decode_problem(self.path, raw, number)
        return None

    def add(self, number: int, raw: bytes, line: str, value: Any = None) -> None:
        """A line that is not blank (``raw``, as ``line``, its text, without its end; its
        value, a 1-tuple, where it was parsed): parsed, its records made, while the file is
        JSON."""
        self.depth.feed(raw)
        if self.not_text is not None or self.not_lines is not None:
            return
        if self.depth.depth > jsonsafe.MAX_DEPTH:
            return
        if self.bad is not None:
            self.not_lines = f"line {self.bad[0]}: {self.bad[1]}"
            return
        if value is None:
            try:
                value = (jsonsafe.parse_json(line),)
            except json.JSONDecodeError as e:
                self.bad = (number, f"not JSON ({e.msg} at column {e.colno})")
                return
            except ValueError as e:  # an integer of more digits than int() converts
                self.not_lines = str(e)
                return
        (value,) = value
        self.documents += 1
        if self.first is None:
            self.first = (number, value)
            return
        if self.documents == 2:  # JSON Lines: the first is a document of its own
            self._take(*self.first)
        self._take(number, value)

    def _take(self, number: int, value: Any) -> None:
        self.known = self.known or _known(value)
        self.records += document_records(self.path, number, value, self.forced, self.problems)
        if len(self.records) >= FRAME_RECORDS:
            self.frames.append(frame_of(self.records))
            self.records = []

    def verdict(self) -> str | None:
        """At the end: why the file is not JSON (None: it is); its records made, or a
        problem saying why there are none."""
        if self.not_text is not None:
            self.problems, self.frames, self.records = [self.not_text], [], []
            return None
        error = self.not_lines
        depth = self.depth.depth
        if depth > jsonsafe.MAX_DEPTH:
            error = f"JSON nested {depth:,} levels deep, more than the {jsonsafe.MAX_DEPTH} read"
        if error is None and self.documents == 1 and self.bad is None:
            _, value = self.first or (1, None)  # one value: the file's documents, on line 1
            for item in value if isinstance(value, list) else [value]:
                self._take(1, item)
        elif error is None and self.bad is not None:
            if self.documents == 1:
                self._take(*(self.first or (1, None)))
            if self.forced is None and not self.known:
                error = f"line {self.bad[0]}: {self.bad[1]}"
            else:
                self.problems.insert(0, _cut_problem(self.path, self.bad))
        if error is not None:
            self.frames, self.records = [], []
            found: list[Problem] = []
            not_json = _not_json(self.path, error, self.forced, found)
            self.problems = found
            return not_json[1]
        return None


def _encoding(number: int) -> str:
    """A line's encoding: UTF-8, a byte-order mark dropped at the file's start."""
    return "utf-8-sig" if number == 1 else "utf-8"


def _without_end(line: str) -> str:
    """A line without its ``\\n`` or ``\\r\\n``."""
    return line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith("\n") else line


def first_value(lines: Iterator[tuple[int, bytes]]) -> tuple[int, bytes, Any] | None:
    """The first line that is not blank, and its JSON value; None where it is not one by
    itself (the file is then not JSON Lines) or there is none."""
    for number, raw in lines:
        if not raw.strip():
            continue
        if b"\0" in raw or jsonsafe.nesting_depth(raw) > jsonsafe.MAX_DEPTH:
            return None
        try:
            return number, raw, jsonsafe.parse_json(raw.decode(_encoding(number)))
        except (ValueError, RecursionError):  # not UTF-8, not JSON, a number too long
            return None
    return None


@dataclass
class Streamed:
    """What :func:`stream_records` read of JSON Lines."""

    frames: list[Any]
    """Its record frames (none where the file is not JSON)."""
    problems: list[Problem]
    error: str | None
    """Why it is not JSON after all (then it is text, to read again); None: it is."""
    start: bytes
    """Its first line that is not blank."""


def stream_records(
    path: str, lines: Iterator[tuple[int, bytes]], first: tuple[int, bytes, Any], forced: str | None
) -> Streamed:
    """JSON Lines (``first``, its first line that is not blank, with its value, then
    ``lines``, the rest of the same iterator) as record frames, a line at a time; see the
    module.  Raises :class:`LineTooLong`."""
    reading = _Reading(path, forced)
    number, raw, value = first
    reading.add(number, raw, _without_end(raw.decode(_encoding(number))), (value,))
    for number, raw in lines:
        if reading.not_text is not None and reading.not_text.message.startswith("binary"):
            break  # a NUL byte: nothing else matters
        line = reading.text(number, raw)
        if line is not None and line.strip():
            reading.add(number, raw, line)
    error = reading.verdict()
    frames = reading.frames + ([frame_of(reading.records)] if reading.records else [])
    frames = [pl.concat(frames)] if len(frames) > 1 else frames  # a file, a frame
    return Streamed(frames, reading.problems, error, first[1])


__all__ = [
    "LineTooLong",
    "Lines",
    "Streamed",
    "decode",
    "document_records",
    "first_value",
    "json_records",
    "stream_records",
]
