"""The rows ``breakeven check`` reads, as one frame (:func:`normalise`): the columns it uses,
texts as categories and numbers as floats, each row's launch, environment and time; and the rows
numbered by their groups of equal keys (a run's repeats, a configuration's baselines)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.provenance import ENVIRONMENT_KNOWN, fingerprint
from breakeven.core.schema import (
    ALL_COLUMNS,
    SAMPLING_COLUMNS,
    SPECULATIVE_SERVER,
    bad_number_message,
    first_bad_number,
)
from breakeven.measurements.sampling import row_sampling
from breakeven.model.pooling import (
    adopt_server_rates,
    decoded_tokens,
    server_echoes,
    take_server_view,
)


def _launches(df: Any) -> Any:
    """Each row's launch (an integer), the unit of repetition of an interval: its
    ``launch_id`` (runs repeated within one server launch are not launches); else its
    ``run_id``; else the file of its ``source`` (a log's windows are one launch); else the
    row itself (a row typed into a CSV is a run of its own)."""

    codes = np.full(len(df), -1, dtype=np.int64)
    offset = 0
    for column in ("launch_id", "run_id"):  # a launch_id first; else a run_id
        values = df[column].astype("category")  # categories already: a view of the codes
        categories = values.cat.categories
        these = values.cat.codes.to_numpy().astype(np.int64)
        if "" in categories:
            these[these == categories.get_loc("")] = -1
        fill = (codes < 0) & (these >= 0)
        codes[fill] = offset + these[fill]
        offset += len(categories)
    launch = codes.copy()
    missing = np.flatnonzero(launch < 0)
    if len(missing):
        if "source" in df.columns:
            sources = df["source"].to_numpy(dtype=object)[missing]
            files = pd.Series(sources, dtype=object).str.replace(r":\d+$", "", regex=True)
            file_codes, _ = pd.factorize(files.where(files.fillna("") != "", None))
        else:
            file_codes = np.full(len(missing), -1)
        rows = offset + len(missing) + np.arange(len(missing))
        launch[missing] = np.where(file_codes >= 0, offset + file_codes, rows)
    return _first_appearance(launch)[0]  # numbered in file order: a launch's rows run together


# The measurement columns check reads (others, such as source, are not needed).
COLUMNS_USED = (
    "model",
    "hardware",
    "spec_method",
    "label",
    "env",
    "env_from",
    "launch_id",
    "launched_at",
    "timestamp",
    "run_id",
    "origin",
    "concurrency",
    "num_spec_tokens",
    "tok_s",
    "aggregate_tok_s",
    "accept_len",
    "cycle_ms",
    "verify_ms",
    "draft_ms",
    "step_ms",
    "tpot_ms",
    "itl_ms",
    "ttft_ms",
    "e2e_ms",
    "start_s",
    "request_rate",
    "speedup",
    "num_drafts",
    "draft_tokens",
    "accepted_tokens",
    "completion_tokens",
    "category",
    "per_position",
    "acceptance_histogram",
    "source",
    *SAMPLING_COLUMNS,
    "node",
)


# Their types are the schema's; source stays as written (a row's citation, never grouped on), and
# so do the positions' (text in a CSV, lists in ingest's records: breakeven.measurements.positions reads both).
AS_WRITTEN = ("source", "per_position", "acceptance_histogram")


TIME_COLUMNS = ("launched_at", "timestamp")
"""Read as datetimes where a file writes them in one ISO 8601 form (bench's), else as text."""


_TEXT_COLUMNS = tuple(
    c
    for c in COLUMNS_USED
    if ALL_COLUMNS[c].kind == "text" and c not in AS_WRITTEN and c not in TIME_COLUMNS
)


_NUMBER_COLUMNS = tuple(c for c in COLUMNS_USED if ALL_COLUMNS[c].kind != "text")


def _categorical(column: Any) -> Any:
    """A text column as categories, a missing value as "" (one more category, made from the
    codes: each distinct text is hashed once, and groupby works on integer codes)."""

    values = column.astype("category")
    codes = values.cat.codes.to_numpy()
    if not (codes < 0).any():
        return values
    categories = list(values.cat.categories)
    empty = categories.index("") if "" in categories else len(categories)
    if empty == len(categories):
        categories.append("")
    codes = np.where(codes < 0, empty, codes)
    return pd.Series(pd.Categorical.from_codes(codes, categories), index=column.index)


NODE_MARK = " @ node "
"""Between a row's hardware and its cluster node's id (its first 12 characters) in check's
hardware: rows of two nodes are never paired (:func:`on_node`, :func:`node_of`)."""


def on_node(hardware: Any, node: Any) -> Any:
    """Each row's hardware with its node (``sweep --ray``'s ``node`` column) where it has
    one: ``8x H100 @ node d4e78599ef01`` (``@ node d4e78599ef01`` where none is named), so that a run is paired only with baselines of its
    own node, as two machines' runs are."""
    hw = hardware.astype(str).to_numpy(dtype=object)
    where = node.astype(str).to_numpy(dtype=object)
    marked = [
        (h + NODE_MARK if h else NODE_MARK.lstrip()) + n[:12] if n else h
        for h, n in zip(hw, where, strict=True)
    ]
    return pd.Series(marked, index=hardware.index, dtype=object)


def node_of(hardware: str) -> tuple[str, str]:
    """A comparison's hardware and its node's id ("" off a cluster), as :func:`on_node` joined
    them."""
    head, mark, node = hardware.rpartition(NODE_MARK)
    if mark:
        return head, node
    if hardware.startswith(NODE_MARK.lstrip()):  # no hardware named: ``@ node ID``
        return "", hardware[len(NODE_MARK.lstrip()) :]
    return hardware, ""


def normalise(data: Any) -> Any:
    """The rows with every column check reads: texts as categories ("" when missing), numbers
    as floats (a bad one refused with its line), and ``line``, ``is_spec``, ``fingerprint``,
    ``concurrency_key`` (the level, :func:`level_key`), ``launch`` and ``echo`` (a server row whose run a client measured)."""

    df = data.copy(deep=False)  # columns are replaced below, never changed in place
    if "line" not in df.columns:
        df["line"] = np.arange(2, len(df) + 2)
    for column in _TEXT_COLUMNS:
        if column not in df.columns:  # all empty: one category, no strings to hash
            df[column] = pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), [""])
        df[column] = _categorical(df[column])
    for column in _NUMBER_COLUMNS:
        df[column] = pd.to_numeric(df[column], errors="coerce") if column in df.columns else np.nan
    found = first_bad_number(df)  # read_measurements says which file; a DataFrame has none
    if found is not None:
        column, at, value = found
        message = f"line {int(df['line'].iloc[at])}: {bad_number_message(column, value)}"
        raise BreakevenError(escape_braces(message))
    if (df["node"] != "").any():  # sweep --ray: each node is hardware of its own
        df["hardware"] = _categorical(on_node(df["hardware"], df["node"]))
    # A client row and the server's log of the same run are one measurement: keep the client's,
    # with what the server measured of it.
    df["echo"] = server_echoes(df)
    take_server_view(df, df["echo"])
    # The engine's own count first: a run's rate is its server's where the server's counters
    # cover its requests; the client's stays as the cross-check (``server_client_mismatch``).
    df["client_tok_s"] = adopt_server_rates(df, df["echo"])
    k = df["num_spec_tokens"]
    df["speculating_server"] = (
        _per_category(df["source"], lambda text: SPECULATIVE_SERVER in text, bool)
        if "source" in df.columns
        else np.zeros(len(df), dtype=bool)
    )
    df["shows_speculation"] = _shows_speculation(df)
    df["is_spec"] = (k > 0) | (k.isna() & _speculated(df))
    envs = df["env"].cat.categories
    df["fingerprint"] = df["env"].map(dict(zip(envs, map(fingerprint, envs), strict=True)))
    df["fingerprint"] = df["fingerprint"].astype("category")
    for column in TIME_COLUMNS:
        df[column] = _time_column(df[column]) if column in df.columns else _empty_text(len(df))
    df["launch_code"] = _codes(df["launch_id"])
    df["env_known"], df["recorded"] = _knowledge(df)
    df["when"] = _when(df)
    df["concurrency_key"] = level_key(df["concurrency"], df["request_rate"])
    df["launch"] = _launches(df)
    df["decoded"] = decoded_tokens(df["completion_tokens"])
    df["sampling"] = row_sampling(df)
    return df


def level_key(concurrency: Any, request_rate: Any) -> Any:
    """Each row's level, what a speculative run and its baseline share beside model and hardware
    (``concurrency_key``): its ``concurrency`` for a closed-loop level, -1 where the row gives
    none, and ``-(1 + request_rate)`` for an open-loop level (a row with a positive
    ``request_rate``, whose ``concurrency`` is at most the client's cap): below -1, so a rate
    level never pairs with a concurrency level, and two rate levels pair where their rates are
    equal (:func:`key_request_rate` reads the rate back)."""
    rate = np.asarray(request_rate, dtype=float)
    closed = np.nan_to_num(np.asarray(concurrency, dtype=float), nan=-1.0)
    with np.errstate(invalid="ignore"):
        return np.where(rate > 0, -1.0 - rate, closed)


def key_request_rate(key: float) -> float:
    """The request rate [req/s] of a level's key (:func:`level_key`); NaN for a closed-loop
    level or one of no known concurrency."""
    return -1.0 - float(key) if key < -1 else math.nan


def _speculated(df: Any) -> Any:
    """Rows that show speculation whatever their k (for rows without one): an accept_len, a
    method, drafts (``num_drafts``; bench's ``draft_tokens``, llama.cpp's
    ``timings.draft_n``), or bench's note that the server showed spec-decode counters when
    the level began (:data:`~breakeven.core.schema.SPECULATIVE_SERVER`: a level stopped before the
    scrape that closes it has no server row to give its k)."""
    signs = df["accept_len"].notna() | (df["spec_method"] != "") | (df["num_drafts"] > 0)
    if "draft_tokens" in df.columns:
        signs |= pd.to_numeric(df["draft_tokens"], errors="coerce") > 0
    return signs | df["speculating_server"]


def _shows_speculation(df: Any) -> Any:
    """Rows whose own data show that their server speculated, whatever k they are said to
    have: an accept_len above 1, drafts, or bench's note that the server showed spec-decode
    counters.  A baseline's rows that do, beside speculative rows that do not, are a swapped
    pair (``swapped_pair``)."""
    signs = (df["accept_len"] > 1) | (df["num_drafts"] > 0) | df["speculating_server"]
    if "draft_tokens" in df.columns:
        signs |= pd.to_numeric(df["draft_tokens"], errors="coerce") > 0
    return signs.to_numpy()


def _empty_text(rows: int) -> Any:
    return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), [""])


def _time_column(column: Any) -> Any:
    """A time column as read: datetimes (one ISO 8601 form throughout), else text as
    categories ("" when missing)."""
    if column.dtype.kind == "M":
        return column
    if isinstance(column.dtype, pd.CategoricalDtype):
        return _categorical(column)
    return _categorical(column.astype(str).where(column.notna(), ""))


def _codes(column: Any) -> Any:
    """A categorical text column's codes, -1 where it is empty."""
    codes = column.cat.codes.to_numpy().astype(np.int64)
    categories = column.cat.categories
    if "" in categories:
        codes[codes == categories.get_loc("")] = -1
    return codes


def _per_category(column: Any, func: Any, dtype: Any = object) -> Any:
    """``func`` of each row's text (``str`` of the value: "nan" where missing), computed once
    per distinct text: a categorical column's categories, else its distinct values (hashed)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes, distinct = column.cat.codes.to_numpy(), column.cat.categories
    else:
        codes, distinct = pd.factorize(column.to_numpy())
    # One value more, at -1: a missing value's.
    values = np.array([*(func(str(c)) for c in distinct), func(str(math.nan))], dtype=dtype)
    return values[codes]


def _has(column: Any) -> Any:
    """Whether each row holds a value (a time, or a text that is not empty)."""
    if column.dtype.kind == "M":
        return column.notna().to_numpy()
    return _codes(column) >= 0


def _knowledge(df: Any) -> tuple[Any, Any]:
    """Each row's ``env_known`` (its env holds its server's environment: read from the
    server's process or a file, or typed; :data:`breakeven.core.provenance.ENVIRONMENT_KNOWN`)
    and ``recorded`` (anything of its launch is recorded: an id, a time, settings)."""
    typed = _per_category(df["env_from"], lambda source: source == "", bool)
    read = _per_category(df["env_from"], lambda source: source in ENVIRONMENT_KNOWN - {""}, bool)
    has_fp = _per_category(df["fingerprint"], bool, bool)
    # bench wrote the client's variables and no env_from before it read the server's.
    client_only = _per_category(df["env"], lambda e: "client_host=" in e or " host=" in e, bool)
    known = np.where(typed, has_fp & ~client_only, read)
    recorded = has_fp | ~typed | (df["launch_code"].to_numpy() >= 0)
    for column in TIME_COLUMNS:
        recorded = recorded | _has(df[column])
    return known, recorded


def _seconds(column: Any) -> Any:
    """Each row's time [s since the epoch; NaN where no full ISO 8601 date is written; a time
    without a zone is taken as UTC]."""
    if column.dtype.kind == "M":
        times = column if column.dt.tz is not None else column.dt.tz_localize("UTC")
        return (times - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    categories = pd.Index(column.cat.categories.astype(str))
    parsed = pd.to_datetime(categories, format="ISO8601", utc=True, errors="coerce")
    values = np.asarray((parsed - pd.Timestamp(0, tz="UTC")).total_seconds(), dtype=float)
    return values[column.cat.codes.to_numpy()] if len(values) else np.full(len(column), np.nan)


def _when(df: Any) -> Any:
    """Each row's time [s since the epoch; NaN where no full date is written]: its launch's
    start, else its measurement's."""
    launched, measured = _seconds(df["launched_at"]), _seconds(df["timestamp"])
    return np.where(np.isnan(launched), measured, launched)


def _time_text(df: Any, positions: Any) -> str:
    """The first time written at these rows (their launch's start, else their
    measurement's), as written: a text without its year stays as printed."""
    for column in TIME_COLUMNS:
        values = df[column].iloc[positions]
        present = values[values.notna() & (values.astype(str) != "")]
        if len(present):
            first = present.iloc[0]
            if not isinstance(first, pd.Timestamp):
                return str(first)
            midnight = first == first.normalize()  # a date written without its time
            return first.strftime("%Y-%m-%d" if midnight else "%Y-%m-%dT%H:%M:%S")
    return ""


def _values_at(column: Any, positions: Any) -> Any:
    """A column's values at some positions, as a numpy array; a categorical column's texts
    are looked up from its codes (its ``to_numpy()`` would build a string per row)."""

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray(column.cat.categories, dtype=object)
        codes = column.cat.codes.to_numpy()[positions]
        values = categories[codes]
        if (codes < 0).any():  # a missing value (NaN k): NaN, as the column held it
            values[codes < 0] = math.nan
        return values
    return column.to_numpy()[positions]


def _stable_order(number: Any, groups: int) -> Any:
    """Positions sorted by group number, in file order within a group (a radix sort, when the
    numbers fit 16 bits)."""

    small = number.astype(np.int16) if groups < (1 << 15) else number
    return np.argsort(small, kind="stable")


def _positions(number: Any, keys: Sequence[Any]) -> dict[Any, Any]:
    """The positions (in file order) of each group's rows, by the group's key."""

    order = _stable_order(number, len(keys))
    starts = np.searchsorted(number[order], np.arange(len(keys) + 1))
    return {key: order[starts[g] : starts[g + 1]] for g, key in enumerate(keys)}


def _group_numbers(df: Any, rows: Any, keys: Sequence[str]) -> tuple[Any, Any]:
    """Each of ``rows`` (positions in ``df``) numbered by its group of equal ``keys``, groups
    in order of first appearance; and each group's first row.  One integer per row from the
    columns' codes, then one sort: a groupby of seven columns costs several times more."""

    combined = np.zeros(len(rows), dtype=np.int64)
    span = 1
    for key in keys:
        column = df[key]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy()[rows].astype(np.int64) + 1  # NaN: -1 -> 0
            size = len(column.cat.categories) + 1
        else:  # a number: NaN is a value of its own here, as in groupby(dropna=False)
            codes, uniques = pd.factorize(column.to_numpy()[rows], use_na_sentinel=False)
            size = len(uniques)
        if size <= 1:  # one value: it separates nothing
            continue
        if span > (1 << 62) // size:  # too many combinations for one integer: pandas groups
            frame = df.iloc[rows][list(keys)]
            number = frame.groupby(list(keys), sort=False, dropna=False, observed=True).ngroup()
            return _first_appearance(number.to_numpy())
        combined = combined * size + codes
        span *= size
    if span <= (1 << 20):  # few combinations: first appearances without hashing
        return _first_appearance_small(combined, span)
    return _first_appearance(combined)


def _first_appearance_small(values: Any, span: int) -> tuple[Any, Any]:
    """:func:`_first_appearance` of integers in ``[0, span)``: each value's first position by
    one scatter (the reversed positions written last win), then ranks."""

    first = np.full(span, -1, dtype=np.int64)
    first[values[::-1]] = np.arange(len(values) - 1, -1, -1)
    present = np.flatnonzero(first >= 0)
    present = present[np.argsort(first[present], kind="stable")]
    rank = np.empty(span, dtype=np.int64)
    rank[present] = np.arange(len(present))
    return rank[values], first[present]


def _first_appearance(values: Any) -> tuple[Any, Any]:
    """``values`` numbered 0, 1, ... in order of first appearance (a hash, no sort), and the
    position of each number's first appearance."""

    number, _ = pd.factorize(values)
    if not len(number):
        return number, number
    seen = np.maximum.accumulate(number)
    return number, np.flatnonzero(np.concatenate(([True], number[1:] > seen[:-1])))


def _group_means(number: Any, values: Any, groups: int) -> tuple[Any, Any]:
    """Each group's mean of ``values`` over its values that are not NaN, and their count."""

    ok = ~np.isnan(values)
    count = np.bincount(number[ok], minlength=groups)
    total = np.bincount(number[ok], weights=values[ok], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan), count
