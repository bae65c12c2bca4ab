"""``breakeven ingest``'s pipeline: files named on the command line, read into records that
stream to a measurements CSV (written atomically, or appended under a lock) and to JSON.

Reading and parsing run in a thread ahead of the writing (:func:`breakeven.iotools.sources.ahead`),
so each side's polars work overlaps the other's; memory stays bounded by a few frames.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.iotools.atomic import append_bytes, write_bytes
from breakeven.iotools.ingest import Input, iter_frames
from breakeven.iotools.records import Tally, csv_bytes, csv_header
from breakeven.iotools.sources import Problem, ahead

_SEP = "\x1f"  # between the parts of a RunTally key (a unit separator: in no path or label)


class RunTally(Tally):
    """A :class:`~breakeven.iotools.records.Tally` per file, format, run, concurrency and
    workload category: nothing is pooled across runs (``run_id``, ``label``), concurrencies
    or categories, so a sweep's concurrency-1 and concurrency-100 results stay apart, and so
    do a report's code and math.

    Its groups are keyed ``(path, format, run_id, label, concurrency, category)`` (None where
    the records say none); memory grows with the number of keys, not with the records.
    """

    def count(self, frame: Any) -> None:
        """Count the records of a frame."""
        if not frame.height:
            return
        import polars as pl  # lazy: start-up

        # One group_by, the Tally's: its file is the key of the run and concurrency.
        parts = [
            pl.col("source").str.replace(r":\d+$", ""),
            pl.col("run_id"),
            pl.col("label"),
            pl.col("concurrency").cast(pl.String),
            pl.col("category"),
        ]
        key = pl.concat_str([part.fill_null("") for part in parts], separator=_SEP)
        super().count(frame.with_columns(source=key + _SEP))

    def _group(self, path: str, fmt: str) -> dict[str, Any]:
        file, run_id, label, concurrency, category = path.split(_SEP)[:5]
        key = (
            file,
            fmt,
            run_id or None,
            label or None,
            float(concurrency) if concurrency else None,
            category or None,
        )
        g = self.groups.get(key)  # type: ignore[call-overload]
        if g is None:
            g = super()._group(path, fmt)  # a new group, under a key dropped below
            del self.groups[(path, fmt)]
            self.groups[key] = g  # type: ignore[index]
        return g

    def formats(self) -> list[str]:
        """The record formats seen, in first-seen order."""
        return list(dict.fromkeys(key[1] for key in self.groups))

    def rate_basis(self, group: dict[str, Any]) -> str:
        """What a group's ``tok_s`` is: ``tokens/time`` (a ratio of sums), ``mean of N rates``,
        ``1 rate``, or ``-`` (none)."""
        if group["seconds"] > 0 and not group["unweighted_rates"]:
            return "tokens/time"
        n = group["n"][self.MEANS.index("tok_s")]
        return "-" if not n else "1 rate" if n == 1 else f"mean of {n} rates"


STAMPS = (
    "label",
    "run_id",
    "model",
    "hardware",
    "spec_method",
    "env",
    "spec_topk",
    "verify_tokens",
)
"""What a user may say about a file's runs, stamped on each of its records (it replaces what
the file says)."""


def per_file(name: str, values: Sequence[Any], count: int) -> list[Any]:
    """A value given once (for every file) or once per file, as one value per file.

    Parameters
    ----------
    name : str
        The argument the values came from, named in errors.
    values : sequence
        No value (None for every file), one, or ``count``.
    count : int
        The number of files.
    """
    if not values:
        return [None] * count
    if len(values) == 1:
        return list(values) * count
    if len(values) == count:
        return list(values)
    raise BreakevenError(
        "{0}: given "
        + f"{len(values)} times for {count} files; expected once "
        + "(for every file) or once per file, in file order",
        name,
    )


def ingest_inputs(
    files: Sequence[str], num_spec_tokens: Sequence[int] = (), **stamps: Sequence[Any]
) -> list[Input]:
    """The files to read, each with what the user says about it.

    Parameters
    ----------
    files : sequence of str
        Paths (``-``: standard input); ``LABEL=PATH`` names a file's run unless a file
        of that name exists.
    num_spec_tokens : sequence of int
        k [draft tokens per cycle], for formats that do not print it: once for every
        file, or once per file (see :func:`per_file`).
    **stamps : sequence
        Values of :data:`STAMPS`, each given once or once per file.
    """
    unknown = sorted(set(stamps) - set(STAMPS))
    if unknown:
        raise TypeError(f"ingest_inputs() got unexpected keyword arguments {unknown}")
    ks = per_file("num_spec_tokens", num_spec_tokens, len(files))
    columns = {key: per_file(key, values, len(files)) for key, values in stamps.items()}
    inputs = []
    for i, arg in enumerate(files):
        path, label = arg, None
        name, sep, rest = arg.partition("=")
        if sep and rest and name and "/" not in name and not os.path.exists(arg):
            label, path = name, rest
        stamp = {key: column[i] for key, column in columns.items()}
        if label is not None:
            stamp["label"] = label
        inputs.append(Input(path, stamp, ks[i]))
    return inputs


def limit_threads(jobs: int | None = None) -> None:
    """Set polars' threads (``jobs``; default one per CPU) and allocator before polars loads.

    polars' allocator (its own jemalloc) gets one arena: the threads' freed pages are
    reused at once, so a 1 GiB log peaks at about 230 MiB, not 280, at the same speed
    (benchmarks/ingest_speed.py).  Both are read when polars is first imported; a user's
    allocator setting is kept.
    """
    if jobs is not None:
        os.environ["POLARS_MAX_THREADS"] = str(jobs)
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1")


class JsonArray:
    """Record frames written as one JSON array, a frame at a time (bounded memory).

    Parameters
    ----------
    write : callable
        Takes each piece of text, in order (``sys.stdout.write``).
    """

    def __init__(self, write: Callable[[str], Any]) -> None:
        self._write = write
        self.started = False

    def add(self, frame: Any) -> None:
        """Add a frame's records to the array."""
        if not frame.height:
            return
        body = frame.write_json()[1:-1]  # the frame's array, without its brackets
        self._write(("," if self.started else "[") + body)
        self.started = True

    def close(self) -> None:
        """End the array (``[]`` when no record came), and the line."""
        self._write("]\n" if self.started else "[]\n")


def write_ingest(
    inputs: Sequence[Input],
    *,
    out: str | None = None,
    append: bool = False,
    force: bool = False,
    format: str = "auto",
    before: str | None = None,
    jobs: int | None = None,
    json: JsonArray | None = None,
    year: int | None = None,
) -> tuple[RunTally, list[Problem]]:
    """Read ``inputs`` into records, written to ``out`` and/or ``json`` as they stream in.

    Parameters
    ----------
    inputs : sequence of Input
        The files (see :func:`ingest_inputs`).
    out : str, optional
        A measurements CSV, written atomically (replaced only with ``force``).
    append : bool
        Add the records to ``out`` instead (created if missing), under a lock:
        concurrent ingests lose nothing and write one header.
    force : bool
        Replace ``out``.
    format : str
        'auto' or one of :data:`breakeven.iotools.ingest.FORMATS`.
    before : str, optional
        A Prometheus scrape taken before the run: records are the difference.
    jobs : int, optional
        Threads for reading text (see :func:`limit_threads`).
    json : JsonArray, optional
        Also add every frame here (the caller closes it).
    year : int, optional
        The year of dates logged without one (see :func:`breakeven.iotools.ingest.ingest`).

    Returns
    -------
    tally : RunTally
        Records per file, format, run and concurrency, with their k and rates.
    problems : list of Problem
        Each naming its file and line; unrelated lines are ignored.
    """
    if append and (out is None or force):
        raise BreakevenError(
            "{0}: needs {1} CSV, and cannot be given with {2}", "append", "out", "force"
        )
    limit_threads(jobs)
    problems: list[Problem] = []
    tally = RunTally()
    frames = ahead(iter_frames(inputs, problems, format=format, before=before, year=year), depth=1)

    def counted() -> Iterator[Any]:
        for frame in frames:
            tally.count(frame)
            if json is not None:
                json.add(frame)
            yield frame

    if out is None:
        for _ in counted():
            pass
    elif append:
        append_bytes(out, csv_header(), (csv_bytes(frame) for frame in counted()))
    else:
        write_bytes(out, [csv_header()], (csv_bytes(frame) for frame in counted()), force=force)
    return tally, problems


__all__ = [
    "STAMPS",
    "JsonArray",
    "RunTally",
    "ingest_inputs",
    "limit_threads",
    "per_file",
    "write_ingest",
]
