"""Line kinds, each defined once, and the one driver that reads every text input with them.

A :class:`LineKind` is what a kind of engine log line means: the literal
marker every such line holds, its fields (a pattern whose one group is the
value as printed) and which fields it cannot do without.  What depends on
more than one line (vLLM's throughput line merged into the spec-decode line
beside it, SGLang's idle time, vLLM V0's cumulative counters, llama.cpp's
per-request pair of lines) is each engine's ``sequence`` function, in its own
module of :mod:`breakeven.iotools.engines`.

The driver (:class:`TextScanner`) reads blocks of complete lines into a
polars frame (one row per line, numbered), keeps the lines holding a marker,
extracts every kind's fields column-wise and hands each engine its rows in
order.  The records it returns are polars frames in the record schema
(:mod:`breakeven.iotools.records`): ``--json``, the Python API and ``--out``
are views of the same rows.  polars' regular expressions (Rust's ``regex``)
match in time linear in the line, so no input can make a pattern slow.

White space: a tab reads as a space (:meth:`TextScanner.mark`), so a pattern's space or
`` *`` between a label and its value also takes the tabs of a report copied from a web page.

Values as engines print them: a placeholder where a number goes (``not
set``, ``N/A``, ``-``, ``inf``, ``nan``, empty) makes that field missing; any
other text that is not a number is a problem naming the field, and the line's
record is left out.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from breakeven.core.credentials import MASK, hide_url_passwords
from breakeven.core.provenance import is_secret_key
from breakeven.iotools import commented
from breakeven.iotools.records import PLACEHOLDERS, frame_of
from breakeven.iotools.sources import AT_NEXT_LINE, Block, Problem

PARSE_ROWS = 20_000  # marked lines parsed together (at most a block's more)
COPY_BELOW = 10_000  # a block's marked lines are copied out of it when fewer than this
TABLE = "_result_table"  # the kind of a result table's title line


@dataclass(frozen=True)
class Field:
    """One value of a line kind."""

    name: str
    """Its column (a record key, or a name the engine's ``sequence`` reads)."""
    pattern: str
    """A regular expression whose one group is the value as printed."""
    label: str
    """How the engine names it, for messages."""
    kind: str = "number"
    """'number', 'text' or 'numbers' (a comma-separated list)."""
    transform: Callable[[pl.Expr], pl.Expr] | None = None
    """Applied to a text value (e.g. a timestamp made ISO 8601)."""


@dataclass(frozen=True)
class LineKind:
    """A kind of log line: how to find it and what it holds."""

    name: str
    """Its name, e.g. ``sglang_decode``."""
    engine: str
    """The engine that prints it (the module of :mod:`breakeven.iotools.engines`)."""
    marker: str
    """A literal every line of this kind holds."""
    fields: tuple[Field, ...] = ()
    required: tuple[str, ...] = ()
    """Fields a line must have; without them it is a problem."""
    also: str | None = None
    """A literal the line must hold as well (kinds that share a marker)."""
    unless: str | None = None
    """A literal the line must not hold."""
    match: str | None = None
    """A pattern the line must match, else it is not of this kind (no problem)."""


@dataclass
class Engine:
    """What a module of :mod:`breakeven.iotools.engines` provides for text inputs."""

    name: str
    kinds: tuple[LineKind, ...]
    sequence: Callable[..., tuple[pl.DataFrame | None, dict[str, Any]]]
    """``sequence(rows, state, k, final)``: records of the block's rows (in line order,
    with ``line``, ``kind`` and the fields), and the new state.  A record whose k
    only the rest of the file can tell has ``undecided`` True.  The new state's
    ``problems``, if any, are (line, message) pairs of what the rows could not give (a
    summary that cannot be read unambiguously, say): each is reported as a problem."""
    speculative_kinds: frozenset[str] = frozenset()
    """Kinds whose lines show the server speculated: a file without any makes its
    ``undecided`` records baselines (k = 0)."""
    baseline_note: str = ""
    tok_s: dict[str, str] = field(default_factory=dict)
    """What ``tok_s`` means, by record format (for the ingest summary)."""
    line_start: str | None = None
    """A pattern of where the engine's lines start: a marked line holding one after a space (a
    paste that lost its newlines) is split there, each part on the same line number."""


def with_pending(
    rows: pl.DataFrame, state: dict[str, Any], columns: dict[str, Any]
) -> pl.DataFrame:
    """An engine's rows with the ``columns`` they lack (name: type), after the lines the
    previous block held back (``state['pending']``)."""
    if rows.height:
        rows = rows.with_columns(
            pl.lit(None, t).alias(c) for c, t in columns.items() if c not in rows.columns
        )
    pending = state.get("pending")
    if pending is not None:
        rows = pl.concat([pending, rows], how="diagonal_relaxed") if rows.height else pending
    return rows


# Launch lines: every engine's launch kinds give ``launch_time`` (the line's timestamp, as the
# engine prints it) and ``launch_env`` (its settings as ``key=value`` pairs, see
# :func:`env_text`); :func:`carry_launch` puts them on the rows after them as ``launched_at``,
# ``env`` and ``launch_line`` (the line that started the launch: the scanner cites it as
# ``launch_id``).
LAUNCH_COLUMNS = {"launch_line": pl.Int64, "launched_at": pl.String, "env": pl.String}


def env_text(pairs: Any) -> str | None:
    """Launch settings (``(key, value)`` pairs; a nested dict's keys as ``parent.child``) as
    ``env`` text: ``key=value`` separated by spaces, whitespace in a value as ``_``, lists as
    JSON without spaces, a secret's value (:func:`is_secret_key`) as ``***`` and a URL's
    password hidden.  None when there are no pairs."""
    out: list[str] = []

    def add(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                add(f"{key}.{k}", v)
            return
        if is_secret_key(key):
            shown = MASK
        elif isinstance(value, (list, tuple, set)):
            shown = json.dumps(list(value), separators=(",", ":"), default=str)
        else:
            shown = str(value)
        shown = hide_url_passwords(re.sub(r"\s+", "_", shown.strip()))
        name = re.sub(r"\s+", "_", key.strip())
        out.append(f"{name}={shown}")

    for key, value in pairs:
        add(str(key), value)
    return " ".join(out) or None


def _top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside brackets and quotes (a Python repr's items)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _literal(text: str) -> Any:
    """A Python literal as printed (``'a'``, ``3``, ``['x']``, ``None``), else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def dict_env(text: str | None) -> str | None:
    """``env`` text of a printed Python dict (vLLM's ``non-default args: {...}``)."""
    if not text:
        return None
    value = _literal(text)
    if isinstance(value, dict):
        return env_text(value.items())
    pairs = []  # a repr literal_eval refuses (an enum's <...>): item by item
    for item in _top_level(text.strip()[1:-1]):
        key, sep, rest = item.partition(":")
        if sep:
            pairs.append((_literal(key.strip()), _literal(rest.strip())))
    return env_text(pairs)


def call_env(text: str | None, keep_none: bool = False) -> str | None:
    """``env`` text of a dataclass's printed arguments, ``a=1, b='x', ...`` (SGLang's
    ``ServerArgs(...)``); fields that are None are left out unless ``keep_none``."""
    if not text:
        return None
    pairs = []
    for item in _top_level(text):
        key, sep, rest = item.partition("=")
        if sep and key.strip().isidentifier():
            value = _literal(rest.strip())
            if value is not None or keep_none:
                pairs.append((key.strip(), value))
    return env_text(pairs)


def env_from(expr: pl.Expr, function: Callable[[str], str | None]) -> pl.Expr:
    """A launch field's printed settings made ``env`` text by ``function`` (launch lines are
    few: a Python function a line costs nothing)."""
    return expr.map_elements(function, return_dtype=pl.String, skip_nulls=True)


def carry_launch(
    rows: pl.DataFrame, state: dict[str, Any], kind: str | tuple[str, ...], columns: dict[str, Any]
) -> pl.DataFrame:
    """An engine's rows without its launch lines (``kind``: their kinds, e.g. SGLang's
    ``server_args=`` line), each row with the ``columns`` (name: type) of the launch before
    it, in this block or an earlier one (``state['launch']``, updated here), and
    :data:`LAUNCH_COLUMNS`: ``launch_line``, ``launched_at`` (the lines' ``launch_time``) and
    ``env`` (their ``launch_env``).

    A launch line starts a launch, unless it folds into the one before: no other row came
    between them and its kind has not been seen in that launch, or says nothing new (vLLM's
    ``non-default args`` then its engine config; llama.cpp's build, system_info and
    listening lines).  A folded launch keeps its first line and takes the values it lacked;
    a launch line after rows (a restart) starts a new configuration."""
    if not rows.height:
        return rows  # no lines (a final call with nothing held): nothing to carry
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    columns = {**columns, **LAUNCH_COLUMNS}
    last = state.get("launch") or {}
    is_launch = pl.col("kind").is_in(kinds)
    if not last and not rows["kind"].is_in(list(kinds)).any():  # a Series: no query
        return rows
    fields = {**columns, "launch_time": pl.String, "launch_env": pl.String}
    rows = rows.with_columns(
        pl.lit(None, t).alias(c) for c, t in fields.items() if c not in rows.columns
    ).with_columns(
        launch_line=pl.col("line").cast(pl.Int64),
        launched_at=pl.col("launch_time"),
        env=pl.col("launch_env"),
        _measured=(~is_launch).cum_sum(),
    )
    launches = rows.filter(is_launch)
    current = {c: last.get(c) for c in columns}
    seen = set(last.get("_kinds", ()))
    fresh = bool(last.get("_fresh")) and bool(last)
    configs, starts, measured = [current], [], 0
    for row in launches.iter_rows(named=True):
        if row["_measured"] != measured:
            fresh, measured = False, row["_measured"]
        values = {c: row[c] for c in columns}
        new_pairs = set((values["env"] or "").split()) - set((current["env"] or "").split())
        if fresh and (row["kind"] not in seen or not new_pairs):
            merged = {c: values[c] if current[c] is None else current[c] for c in columns}
            merged["env"] = _merged_env(current["env"], values["env"])
            current = configs[-1] = merged
            seen.add(row["kind"])
        else:
            current = values
            configs.append(current)
            starts.append(row["line"])
            seen = {row["kind"]}
        fresh = True
    total = rows["_measured"][-1] if rows.height else 0
    if launches.height or any(v is not None for v in current.values()):
        state["launch"] = {
            **current,
            "_kinds": sorted(seen),
            "_fresh": fresh and total == measured,
        }
    frame = pl.DataFrame([{c: cfg.get(c) for c in columns} for cfg in configs], schema=columns)
    frame = frame.with_row_index("_launch", 0).with_columns(pl.col("_launch").cast(pl.UInt32))
    started = (is_launch & pl.col("line").is_in(starts)).cum_sum().cast(pl.UInt32)
    rows = (
        rows.drop([*fields, "_measured"])
        .with_columns(started.alias("_launch"))
        .join(frame, on="_launch", how="left", maintain_order="left")
    )
    return rows.filter(~is_launch).drop("_launch")


def _merged_env(first: str | None, then: str | None) -> str | None:
    """Two launch lines' ``env`` as one: the pairs of ``then`` whose key ``first`` lacks
    follow those of ``first``."""
    if not then:
        return first
    if not first:
        return then
    keys = {pair.split("=", 1)[0] for pair in first.split()}
    more = [pair for pair in then.split() if pair.split("=", 1)[0] not in keys]
    return " ".join([first, *more])


def merge_into_previous(
    rows: pl.DataFrame,
    state: dict[str, Any],
    columns: dict[str, Any],
    first: str,
    second: Any,
    belongs: pl.Expr,
    carried: tuple[str, ...],
    final: bool,
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Lines of kind ``second`` made one record with the line of kind ``first`` just before
    them, where ``belongs`` holds (e.g. the same timestamp), for an engine's ``sequence``.

    ``rows`` gets the ``columns`` it lacks (name: type), and the ``first`` line that the
    previous block could not yet settle (``state['pending']``) in front.  A merged row
    (``merge``) takes the ``carried`` fields of the line before it, which is left out; a
    ``first`` line at the end of a block is held back for the next (the second return
    value: the new ``pending``) unless ``final``.
    """
    rows = with_pending(rows, state, columns)
    if not rows.height:
        return rows, None
    kind = pl.col("kind")
    seconds = kind.is_in(second) if isinstance(second, (tuple, list)) else kind == second
    rows = (
        rows.with_columns(merge=seconds & (kind.shift(1) == first) & belongs)
        .with_columns(absorbed=pl.col("merge").shift(-1, fill_value=False))
        .with_columns(
            pl.when(pl.col("merge")).then(pl.col(c).shift(1)).otherwise(pl.col(c)).alias(c)
            for c in carried
        )
    )
    held = None
    if not final and rows["kind"][-1] == first:  # the next block may merge into it
        held = rows.tail(1).drop("merge", "absorbed")
        rows = rows.head(-1)
    return rows.filter(~pl.col("absorbed")).drop("absorbed"), held


def with_year(expr: pl.Expr, year: int) -> pl.Expr:
    """Dates printed without a year (``MM-DD HH:MM:SS``, vLLM's) as ISO 8601 in ``year``;
    other values as they are."""
    return expr.str.replace(r"^(\d\d-\d\d) (\d\d:\d\d:\d\d)$", f"{year:04d}" + "-${1}T${2}")


def number(expr: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A printed value as a number [unit of the field], and whether it is wrong.

    Surrounding space, a trailing ``%`` or ``.`` are dropped; placeholders
    (:data:`PLACEHOLDERS`) and non-finite values are missing, not wrong.
    """
    text = expr.str.strip_chars(" \t\r").str.strip_chars_end(".%")
    value = text.cast(pl.Float64, strict=False)
    value = pl.when(value.is_finite()).then(value)
    wrong = text.is_not_null() & value.is_null() & ~text.str.to_lowercase().is_in(PLACEHOLDERS)
    return value, wrong


def _numbers(expr: pl.Expr) -> pl.Expr:
    return expr.str.split(",").list.eval(
        pl.element().str.strip_chars(" \t\r").cast(pl.Float64, strict=False)
    )


def parse_kind(
    lines: pl.DataFrame, kind: LineKind, keep: tuple[str, ...] = ()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The fields of ``lines`` (all of this kind): the rows that parse, and the problems
    (``line``, ``message``) of those that do not; both keep the columns ``keep`` (last).

    Most values are plain numbers: they are cast at once, and only the rows with some
    other text (a unit, a placeholder, garbage) take the slower reading of :func:`number`.
    """
    numbers = [f for f in kind.fields if f.kind == "number"]
    raw = lines.with_columns(
        pl.col("text").str.extract(f.pattern, 1).alias(f"_raw_{f.name}") for f in kind.fields
    )
    raw = raw.with_columns(
        pl.col(f"_raw_{f.name}").cast(pl.Float64, strict=False).alias(f"_num_{f.name}")
        for f in numbers
    )
    raw = raw.with_columns(
        pl.any_horizontal(
            pl.lit(False),
            *(
                pl.col(f"_raw_{f.name}").is_not_null()
                & (pl.col(f"_num_{f.name}").is_null() | ~pl.col(f"_num_{f.name}").is_finite())
                for f in numbers
            ),
        ).alias("_slow")
    )
    plain = raw.filter(~pl.col("_slow"))
    odd = raw.filter(pl.col("_slow"))
    parsed = [_parse(plain, kind, careful=False, keep=keep)]
    if odd.height:
        parsed.append(_parse(odd, kind, careful=True, keep=keep))
    rows = pl.concat(parsed, how="vertical_relaxed") if len(parsed) > 1 else parsed[0]
    if len(parsed) > 1:
        rows = rows.sort("line")
    bad_rows = rows.filter(pl.col("problem").is_not_null()).select(
        "line",
        (pl.lit(f"{kind.name} line does not parse: ") + pl.col("problem")).alias("message"),
        *keep,
    )
    good = rows.filter(pl.col("problem").is_null()).drop("text", "problem")
    return good, bad_rows


def _parse(raw: pl.DataFrame, kind: LineKind, careful: bool, keep: tuple[str, ...]) -> pl.DataFrame:
    """Values and problems of rows whose raw field texts are extracted (``_raw_*``)."""
    columns = []
    problem: Any = pl.when(pl.col("text").str.contains("\ufffd", literal=True)).then(
        pl.lit("not UTF-8 text")
    )
    for f in kind.fields:
        text = pl.col(f"_raw_{f.name}")
        if f.kind == "number" and careful:
            value, bad = number(text)
            problem = problem.when(bad).then(
                pl.format(
                    "{} is '{}', expected a number", pl.lit(f.label), text.str.strip_chars(" \t\r")
                )
            )
        elif f.kind == "number":
            value = pl.col(f"_num_{f.name}")
        elif f.kind == "numbers":
            value = _numbers(text)
        else:
            value = f.transform(text) if f.transform is not None else text
        columns.append(value.alias(f.name))
    if kind.required:
        labels = {f.name: f.label for f in kind.fields}
        missing = pl.any_horizontal(pl.col(f"_raw_{name}").is_null() for name in kind.required)
        needed = " and ".join(f"'{labels[name]}'" for name in kind.required)
        problem = problem.when(missing).then(pl.lit(f"expected {needed} fields"))
    problem = problem.otherwise(None).alias("problem")
    return raw.select("line", "kind", "text", *columns, problem, *keep)


Parsed = tuple[dict[str, list[pl.DataFrame]], list[tuple[int, str]]]
"""Marked lines parsed (:meth:`TextScanner.parse_waiting`): each engine's rows (a frame a
line kind), and the (line, message) of the lines that do not parse."""


def split_lines(data: bytes) -> pl.DataFrame:
    """Complete lines (each ends with a newline) as a frame: one ``text`` row a line, a tab
    read as a space."""
    # One column a line, split at a control character; where a line holds that
    # character (no log line should), it becomes a space.
    if b"\x1f" in data:
        data = data.replace(b"\x1f", b" ")
    # Tabs become spaces, once a block (a memchr where there are none): a report copied
    # from a web page has a tab where the engine printed spaces (``label:\tvalue``), and
    # every marker and field pattern then reads it as printed with spaces.
    if b"\t" in data:
        data = data.replace(b"\t", b" ")
    return pl.read_csv(
        data,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        new_columns=["text"],
        infer_schema=False,
        encoding="utf8-lossy",
        comment_prefix=None,
        raise_if_empty=False,
    )


@functools.lru_cache(maxsize=16)
def _marking(kinds: tuple[LineKind, ...], table_markers: tuple[str, ...]) -> tuple[str, pl.Expr]:
    """The pattern of every marker, and the kind of a marked line (an expression of its
    ``marker`` and ``text``), for these kinds and table markers: built once, not per input."""
    markers = sorted({kind.marker for kind in kinds} | set(table_markers))
    # One pattern of literals: the regex engine's SIMD search is about five times faster
    # than polars' contains_any here.
    pattern = "|".join(map(re.escape, markers))
    # The kind of a marked line: told by the first marker in it (one search), then the
    # first kind of that marker whose other conditions hold; a table's title, last; null
    # for a line of no kind (a prefill line that reports no empty batch, say).
    plain: dict[str, str] = {}
    checked: list[tuple[LineKind, pl.Expr]] = []
    for kind in kinds:
        conditions = []
        if kind.also is not None:
            conditions.append(pl.col("text").str.contains(kind.also, literal=True))
        if kind.unless is not None:
            conditions.append(~pl.col("text").str.contains(kind.unless, literal=True))
        if kind.match is not None:
            conditions.append(pl.col("text").str.contains(kind.match))
        if kind.marker in plain:
            continue  # an earlier kind of this marker takes every line
        if conditions:  # before the marker's plain kind, if any: checked first
            checked.append((kind, pl.all_horizontal(conditions)))
        else:
            plain[kind.marker] = kind.name
    for marker in table_markers:
        plain.setdefault(marker, TABLE)
    column = pl.col("marker")
    kind_of = column.replace_strict(plain, default=None, return_dtype=pl.String)
    for kind, condition in reversed(checked):
        kind_of = (
            pl.when((column == kind.marker) & condition).then(pl.lit(kind.name)).otherwise(kind_of)
        )
    return pattern, kind_of


_ENDS_EMPTY: dict[tuple[str, Any, int | None], bool] = {}


def _ends_empty(engine: Engine, k: int | None) -> bool:
    """Whether ``engine.sequence``, given no rows and no state at the end of an input, gives
    no records and no problems: then an input without its lines need not call it (a few
    polars queries an input).  Asked once per engine and k."""
    key = (engine.name, engine.sequence, k)
    if key not in _ENDS_EMPTY:
        records, state = engine.sequence(pl.DataFrame(), {}, k, True)
        _ENDS_EMPTY[key] = (records is None or not records.height) and not state.get("problems")
    return _ENDS_EMPTY[key]


class TextScanner:
    """Reads one text input, block by block, into record frames and problems.

    Parameters
    ----------
    name : str
        The input as shown in ``source`` and in problems.
    engines : list of Engine
    num_spec_tokens : int, optional
        k, for lines that do not print it.
    table_reader : callable, optional
        ``table_reader(text, first_line, final)``: records (dicts) and problems
        of benchmark result tables in ``text``, and the line from which an
        unfinished table must be read again with the next block (or None).
    table_markers : tuple of str
        Literals that start a result table.
    year : int, optional
        The year of dates printed without one: they become ISO 8601.
    """

    def __init__(
        self,
        name: str,
        engines: list[Engine],
        num_spec_tokens: int | None = None,
        table_reader: Callable[..., Any] | None = None,
        table_markers: tuple[str, ...] = (),
        year: int | None = None,
    ) -> None:
        self.name = name
        self.year = year
        """The year of dates printed without one (vLLM's ``MM-DD HH:MM:SS``), or None."""
        self.engines = engines
        self.k = num_spec_tokens
        self.kinds = [kind for e in engines for kind in e.kinds]
        self.marker_pattern, self.kind_of = _marking(tuple(self.kinds), tuple(table_markers))
        self.marker_group = f"({self.marker_pattern})"
        self.starts = "|".join(f"(?:{e.line_start})" for e in engines if e.line_start)
        self.table_markers = table_markers
        self.table_reader = table_reader
        self.table_carry: tuple[int, str] | None = None
        self.state: dict[str, dict[str, Any]] = {e.name: {} for e in engines}
        self.speculated = {e.name: False for e in engines}
        self.held: dict[str, list[pl.DataFrame]] = {e.name: [] for e in engines}
        self.kind_by_name = {kind.name: kind for kind in self.kinds}
        self.waiting: list[pl.DataFrame] = []
        self.waiting_rows = 0
        self.next_line = 1
        """The number of the line after the blocks fed so far."""
        self.typed = True
        """Whether engine records come typed, in the record schema (:func:`frame_of`); else
        the caller types them (a batch types many inputs' records at once)."""

    def mark(self, block: Block) -> pl.DataFrame:
        """The marked lines of a block (``line``, ``text``, ``kind``), less comments.

        It uses no state of the scanner: blocks may be marked in other threads, ahead
        of :meth:`feed`, which numbers them in order.
        """
        lines = split_lines(block.data)
        block.lines = lines.height  # one row a line: the lines are counted here
        # One query: marked lines (numbered from 0 in the block), less comments, with their kind.
        lines = self.marked(lines.lazy().with_row_index("line")).collect()
        # Filtered strings still point into their block's buffers: a block's few lines are
        # copied out, so that many sparse blocks can wait to be parsed without keeping
        # their buffers; dense blocks reach PARSE_ROWS soon, so at most
        # PARSE_ROWS / COPY_BELOW of them wait.
        if lines.height < COPY_BELOW:
            lines = lines.with_columns(pl.col("text") + pl.lit(""))
        return lines

    def marked(self, lines: pl.LazyFrame) -> pl.LazyFrame:
        """The rows of ``lines`` (a ``text`` column, and any others) that hold a marker and
        are no comment, with their ``kind`` (last); lines of no kind are left out."""
        marked = lines.filter(pl.col("text").str.contains(self.marker_pattern))
        if self.starts:  # a line start after a space, not after a prefix's ")" or "]"
            at = pl.col("text").str.replace_all(rf"([^\])\s])\s+({self.starts})", "$1\x1f$2")
            at = pl.when(pl.col("text").str.contains("\ufffd")).then(pl.col("text")).otherwise(at)
            marked = marked.with_columns(at.str.split("\x1f")).explode("text")
        return (
            marked.filter(pl.col("text").str.contains(self.marker_pattern))
            .filter(commented.kept(pl.col("text")))  # no comment (a commented table's title is)
            .with_columns(marker=pl.col("text").str.extract(self.marker_group, 1))
            .with_columns(self.kind_of.alias("kind"))
            .filter(pl.col("kind").is_not_null())
            .drop("marker")
        )

    def feed(
        self, block: Block | Problem, lines: pl.DataFrame | None = None
    ) -> tuple[list[pl.DataFrame], list[Problem]]:
        """Records and problems of the next block (records may come from earlier blocks),
        given its marked ``lines`` where :meth:`mark` has found them; or a problem of
        :func:`~breakeven.iotools.sources.iter_blocks`, numbered here."""
        if isinstance(block, Problem):
            line = self.next_line if block.line == AT_NEXT_LINE else block.line
            return [], [Problem(block.path, line, block.message)]
        if lines is None:
            lines = self.mark(block)
        titled = self.table_reader is not None and (lines["kind"] == TABLE).any()
        frames, problems = self.pass_block(block, titled)
        if lines.height:
            lines = lines.with_columns(pl.col("line") + block.first_line)
        # Marked lines wait until there are enough of them to parse at once: each polars
        # operation has a fixed cost, which a sparse log would pay per block.
        self.waiting.append(lines.filter(pl.col("kind") != TABLE))
        self.waiting_rows += self.waiting[-1].height
        if self.waiting_rows >= PARSE_ROWS:
            more, found = self._read(final=False)
            frames += more
            problems += found
        return frames, problems

    def pass_block(self, block: Block, titled: bool) -> tuple[list[pl.DataFrame], list[Problem]]:
        """Number the next block (its lines counted) and read its result tables, where it
        holds a table's title line (``titled``) or the block before left a table open.

        :meth:`feed` does this for every block; a caller that parses the marked lines itself
        (:mod:`breakeven.iotools.batch`) calls it instead, then :meth:`finish` with them."""
        assert block.lines is not None  # counted by mark
        block.first_line = self.next_line
        self.next_line += block.lines
        if self.table_reader is not None and (self.table_carry or titled):
            return self._tables(block, final=False)
        return [], []

    def finish(self, parsed: Parsed | None = None) -> tuple[list[pl.DataFrame], list[Problem]]:
        """What the end of the input completes; ``parsed``: the waiting lines as
        :meth:`parse_waiting` gives them, where the caller parsed them."""
        frames, problems = self._read(final=True, parsed=parsed)
        if self.table_carry:
            more, found = self._tables(None, final=True)
            frames += more
            problems += found
        for engine in self.engines:
            held = self.held[engine.name]
            if held and not self.speculated[engine.name]:
                baseline = pl.concat(held, how="diagonal_relaxed").with_columns(
                    num_spec_tokens=pl.lit(0, pl.Int64), note=pl.lit(engine.baseline_note)
                )
                frames.append(self._complete(baseline, engine.name))
            elif held:
                frames += [self._complete(h, engine.name) for h in held]
            self.held[engine.name] = []
        return frames, problems

    def parse_waiting(self) -> Parsed:
        """The waiting marked lines parsed: each engine's rows (a frame a line kind, kinds
        in the order they first appear), and the (line, message) of those that do not parse."""
        lines = pl.concat(self.waiting) if self.waiting else None
        self.waiting, self.waiting_rows = [], 0
        by_engine: dict[str, list[pl.DataFrame]] = {}
        bad: list[tuple[int, str]] = []
        if lines is not None and lines.height:
            for name, group in lines.group_by("kind", maintain_order=True):
                kind = self.kind_by_name[name[0]]
                good, wrong = parse_kind(group, kind)
                bad += wrong.iter_rows()
                by_engine.setdefault(kind.engine, []).append(good)
        return by_engine, bad

    def _read(
        self, final: bool, parsed: Parsed | None = None
    ) -> tuple[list[pl.DataFrame], list[Problem]]:
        """Hand each engine its rows of the waiting marked lines (``parsed``, else parsed
        here)."""
        by_engine, bad = self.parse_waiting() if parsed is None else parsed
        problems = [Problem(self.name, line, message) for line, message in bad]
        frames: list[pl.DataFrame] = []
        for engine in self.engines:
            parts = by_engine.get(engine.name)
            if parts is None and (not final or self._idle(engine)):
                continue
            rows = (
                pl.concat(parts, how="diagonal_relaxed").sort("line") if parts else pl.DataFrame()
            )
            if parts and not self.speculated[engine.name]:
                seen = rows["kind"].is_in(list(engine.speculative_kinds)).any()
                if seen:
                    self.speculated[engine.name] = True
                    frames += [self._complete(h, engine.name) for h in self.held[engine.name]]
                    self.held[engine.name] = []
            records, self.state[engine.name] = engine.sequence(
                rows, self.state[engine.name], self.k, final
            )
            problems += [
                Problem(self.name, line, message)
                for line, message in self.state[engine.name].pop("problems", None) or ()
            ]
            if records is None or not records.height:
                continue
            if "undecided" in records.columns and self.speculated[engine.name]:
                records = records.drop("undecided")
            elif "undecided" in records.columns:
                undecided = records.filter(pl.col("undecided")).drop("undecided")
                records = records.filter(~pl.col("undecided")).drop("undecided")
                if undecided.height and not self.speculated[engine.name]:
                    self.held[engine.name].append(undecided)
                elif undecided.height:
                    frames.append(self._complete(undecided, engine.name))
            if records.height:
                frames.append(self._complete(records, engine.name))
        return frames, problems

    def _idle(self, engine: Engine) -> bool:
        """Whether an engine that had no rows may be left out of the end of the input: its
        ``sequence`` has no state from earlier rows, and given no rows and no state it ends
        with nothing (asked once per engine and k: :func:`_ends_empty`)."""
        return not self.state[engine.name] and _ends_empty(engine, self.k)

    def _tables(self, block: Block | None, final: bool) -> tuple[list[pl.DataFrame], list[Problem]]:
        """Result tables: from the first table marker of the block (and what an unfinished
        table of the previous block left)."""
        assert self.table_reader is not None
        first_line, text = self.table_carry or (None, "")
        self.table_carry = None
        if block is not None:
            data = block.data
            if first_line is None:
                at = min(
                    (p for m in self.table_markers if (p := data.find(m.encode())) >= 0), default=-1
                )
                if at < 0:
                    return [], []
                start = data.rfind(b"\n", 0, at) + 1
                first_line = block.first_line + data.count(b"\n", 0, start)
                text = data[start:].decode("utf-8", errors="replace")
            else:
                text += data.decode("utf-8", errors="replace")
        if first_line is None:
            return [], []
        # Comments are blank to the table readers as they are to the marking, but for commented
        # tables (:mod:`breakeven.iotools.commented`): the same records whichever block.
        raw, text = text, commented.tables_uncommented(text)
        records, problems, open_at = self.table_reader(text, first_line, final)
        if open_at is not None and not final:
            offset = open_at - first_line
            kept = raw.split("\n")[offset:]  # as read: a commented table is one again
            self.table_carry = (open_at, "\n".join(kept)[: 1 << 20])
        frame = [frame_of([dict(r, source=f"{self.name}:{r.pop('_line')}") for r in records])]
        return (frame if records else []), [Problem(self.name, ln, m) for ln, m in problems]

    def _complete(self, records: pl.DataFrame, engine: str) -> pl.DataFrame:
        """Engine records as frames of the record schema, with engine, origin and source; a
        launch line's as ``launch_id`` (cited like ``source``) and ``env_from`` ``log``; dates
        without a year given :attr:`year`."""
        records = records.with_columns(
            engine=pl.lit(engine),
            origin=pl.col("origin") if "origin" in records.columns else pl.lit("server"),
            source=pl.lit(self.name + ":") + pl.col("line").cast(pl.String),
        )
        if "launch_line" in records.columns:
            launched = pl.col("launch_line").is_not_null()
            records = records.with_columns(
                launch_id=pl.when(launched).then(
                    pl.lit(self.name + ":") + pl.col("launch_line").cast(pl.String)
                ),
                env_from=pl.when(launched & pl.col("env").is_not_null()).then(pl.lit("log")),
            )
        if self.year is not None:
            records = records.with_columns(
                with_year(pl.col(c), self.year).alias(c)
                for c in ("timestamp", "launched_at")
                if c in records.columns
            )
        return frame_of(records) if self.typed else records
