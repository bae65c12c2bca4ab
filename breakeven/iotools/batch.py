"""Many small text inputs read at once: what each costs is about what its lines cost.

A text input's scanner (:class:`~breakeven.iotools.lines.TextScanner`) runs a few polars
queries per block and per line kind; for a log of three lines their fixed cost is all the
time.  Inputs of at most :data:`SMALL_BYTES` are read whole (:func:`prefetch`) and wait,
up to :data:`BATCH_BYTES` of them, to be read together (:func:`scan`): their lines are
split and marked in one query (a column tells each line's input, and lines are numbered
per input), and each line kind is parsed in one query over all of them.  What depends on
more than one line (each engine's ``sequence``, its state, result tables, the end of the
input) is then each input's own scanner's, on its own rows: nothing passes from one input
to the next, and each input's records and problems are those it gives read alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import polars as pl

from breakeven.iotools import lines
from breakeven.iotools.lines import TABLE, Parsed, TextScanner, parse_kind, split_lines
from breakeven.iotools.records import frame_of
from breakeven.iotools.sources import UTF8_BOM, Block, Problem, mapped

SMALL_BYTES = 1 << 20
"""A text input of at most this many bytes (decompressed) is read with others (0: none is)."""
BATCH_BYTES = 8 << 20
"""Small inputs wait to be read together until they hold this many bytes ..."""
BATCH_INPUTS = 4096
"""... or until this many wait."""
SEQUENCE_WORKERS = min(4, os.cpu_count() or 1)
"""Inputs whose engines run at once, in threads."""

Parts = list[Block | Problem]
"""An input's blocks and the problems met reading it, in order (as
:func:`~breakeven.iotools.sources.iter_blocks` gives them)."""
Read = tuple[list[pl.DataFrame], list[Problem]]
"""An input's record frames and problems."""


def prefetch(blocks: Iterator[Block | Problem]) -> tuple[Parts, Iterator[Block | Problem] | None]:
    """The first blocks (and problems) of an input, up to just over :data:`SMALL_BYTES`, and
    the iterator of the rest; None for the rest where the input ended within them."""
    parts: Parts = []
    size = 0
    for part in blocks:
        parts.append(part)
        if isinstance(part, Block):
            size += len(part.data)
            if size > SMALL_BYTES:
                return parts, blocks
    return parts, None


def size_of(parts: Parts) -> int:
    """The bytes of an input's blocks."""
    return sum(len(part.data) for part in parts if isinstance(part, Block))


def scan(scanners: list[TextScanner], inputs: list[Parts]) -> list[Read]:
    """Each input's records and problems, as its scanner alone gives them, read together.

    ``scanners``: one new scanner an input, all of the same engines and table markers.
    """
    if not scanners:
        return []
    for scanner in scanners:
        scanner.typed = False  # typed at once below
    return _typed(_scan(scanners, inputs))


def _scan(scanners: list[TextScanner], inputs: list[Parts]) -> list[Read]:
    """:func:`scan`, its records not yet typed."""
    blocks = [
        (i, part) for i, parts in enumerate(inputs) for part in parts if isinstance(part, Block)
    ]
    marked = _mark(scanners[0], blocks) if blocks else _EMPTY
    if marked is None:  # lines polars counts otherwise than their newlines: read alone
        return [alone(scanner, parts) for scanner, parts in zip(scanners, inputs, strict=True)]
    titled = set(marked.filter(pl.col("kind") == TABLE).select("_block").to_series().to_list())
    waiting = marked.filter(pl.col("kind") != TABLE)
    crowded = _crowded(waiting)
    if crowded:
        waiting = waiting.filter(~pl.col("_file").is_in(list(crowded)))
    parsed = _parse(scanners[0], waiting.drop("_block"))
    firsts = [0]  # the index (over all inputs) of each input's first block
    for parts in inputs:
        firsts.append(firsts[-1] + sum(isinstance(part, Block) for part in parts))

    def read(i: int) -> Read:
        if i in crowded:
            return alone(scanners[i], inputs[i])
        return _sequenced(scanners[i], inputs[i], firsts[i], titled, parsed.get(i, ({}, [])))

    # Each input's engines then run on its own rows, some inputs at once (their polars
    # queries release the GIL).
    workers = min(SEQUENCE_WORKERS, len(inputs))
    return [out for _, out in mapped(read, range(len(inputs)), workers)]


def _sequenced(
    scanner: TextScanner, parts: Parts, first: int, titled: set[int], parsed: Parsed
) -> Read:
    """An input's records and problems, its marked lines ``parsed`` already: its blocks
    numbered (``first``: the index of its first, ``titled``: those that hold a table's title)
    and its tables read, then its engines run on its rows."""
    frames: list[pl.DataFrame] = []
    problems: list[Problem] = []
    at = first
    for part in parts:
        if isinstance(part, Problem):
            problems += scanner.feed(part)[1]
            continue
        more, found = scanner.pass_block(part, at in titled)
        frames += more
        problems += found
        at += 1
    more, found = scanner.finish(parsed)
    return frames + more, problems + found


def _typed(read: list[Read]) -> list[Read]:
    """Every input's record frames in the record schema: the frames of one schema (their
    columns and types) typed in one query, then each given its rows back."""
    places: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
    for i, (frames, _) in enumerate(read):
        for j, frame in enumerate(frames):
            places.setdefault(tuple(frame.schema.items()), []).append((i, j))
    for group in places.values():
        frames = [read[i][0][j] for i, j in group]
        typed = frame_of(pl.concat(frames) if len(frames) > 1 else frames[0])
        at = 0
        for (i, j), frame in zip(group, frames, strict=True):
            read[i][0][j] = typed.slice(at, frame.height)
            at += frame.height
    return read


def alone(scanner: TextScanner, parts: Parts) -> Read:
    """An input's records and problems, read by its scanner block by block."""
    frames: list[pl.DataFrame] = []
    problems: list[Problem] = []
    for part in parts:
        more, found = scanner.feed(part)
        frames += more
        problems += found
    more, found = scanner.finish()
    return frames + more, problems + found


_COLUMNS = {"line": pl.UInt32, "text": pl.String, "kind": pl.String, "_file": pl.Int64}
_EMPTY = pl.DataFrame(schema={**_COLUMNS, "_block": pl.Int64})


def _mark(scanner: TextScanner, blocks: list[tuple[int, Block]]) -> pl.DataFrame | None:
    """The marked lines of every block, less comments (``line``, ``text``, ``kind``, and
    ``_file`` and ``_block``: the indexes of their input and block), each block's lines
    counted; lines are numbered from 1 in each input.  None where polars reads other
    lines than the newlines tell (then each input is read alone)."""
    counts = [block.data.count(b"\n") for _, block in blocks]
    # polars drops a byte-order mark at the start of what it reads: of every block read
    # alone, of the first one here; the others' are dropped here.
    data = [block.data for _, block in blocks]
    data[1:] = [d[len(UTF8_BOM) :] if d.startswith(UTF8_BOM) else d for d in data[1:]]
    every = split_lines(b"".join(data))
    if every.height != sum(counts):
        return None
    starts, firsts, files, row, last = [], [], [], 0, None
    for (i, block), count in zip(blocks, counts, strict=True):
        block.lines = count
        if i != last:
            first, last = row, i
        starts.append(row)
        firsts.append(first)
        files.append(i)
        row += count
    marked = scanner.marked(every.lazy().with_row_index("_row")).collect()
    at = pl.Series(starts, dtype=pl.UInt32).search_sorted(marked["_row"], side="right") - 1
    first = pl.Series(firsts, dtype=pl.UInt32).gather(at)
    return marked.select(
        line=(marked["_row"] - first + 1).cast(pl.UInt32),
        text=pl.col("text"),
        kind=pl.col("kind"),
        _file=pl.Series(files, dtype=pl.Int64).gather(at),
        _block=at.cast(pl.Int64),
    )


def _crowded(waiting: pl.DataFrame) -> set[int]:
    """The inputs with at least :data:`~breakeven.iotools.lines.PARSE_ROWS` lines to parse:
    alone, their scanner parses them before the input ends, so they are read alone."""
    if waiting.height < lines.PARSE_ROWS:
        return set()
    counts = waiting.group_by("_file").len().filter(pl.col("len") >= lines.PARSE_ROWS)
    return set(counts["_file"].to_list())


def _parse(scanner: TextScanner, waiting: pl.DataFrame) -> dict[int, Parsed]:
    """The marked lines of every input parsed, a query a line kind, then given to each
    input as its scanner would parse them (:meth:`TextScanner.parse_waiting`)."""
    good: dict[str, dict[Any, pl.DataFrame]] = {}
    empty: dict[str, pl.DataFrame] = {}
    bad: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for (name,), group in waiting.group_by("kind", maintain_order=True):
        kind = scanner.kind_by_name[name]
        rows, wrong = parse_kind(group, kind, keep=("_file",))
        good[name] = rows.partition_by("_file", as_dict=True, include_key=False)
        empty[name] = rows.clear().drop("_file")
        for line, message, file in wrong.iter_rows():
            bad.setdefault((file, name), []).append((line, message))
    parsed: dict[int, Parsed] = {}
    # Each input's kinds in the order they first appear in it, as its own group_by has them.
    for file, name in waiting.select("_file", "kind").unique(maintain_order=True).iter_rows():
        by_engine, wrong = parsed.setdefault(file, ({}, []))
        rows = good[name].get((file,), empty[name])
        by_engine.setdefault(scanner.kind_by_name[name].engine, []).append(rows)
        wrong += bad.get((file, name), [])
    return parsed
