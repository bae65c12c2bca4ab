"""Ingest records: the keys every record carries, their types, and how records become CSV rows.

Records travel as polars frames of :func:`record_schema` (one column per
key of :data:`RECORD_KEYS`, missing values null, never NaN); ``--json`` and
the Python API take them as dicts (``DataFrame.to_dicts``), ``--out`` as CSV rows
(:func:`csv_bytes`): two views of the same rows.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import polars as pl

from breakeven.core.display import ESCAPED_STARTS
from breakeven.core.schema import ALL_COLUMNS

# Keys every ingest record carries (the schema's, then the engine's own figures); the
# columns of ingest --out, in this order.
RECORD_KEYS = (
    "run_id",
    "label",
    "timestamp",
    "engine",
    "model",
    "hardware",
    "concurrency",
    "num_spec_tokens",
    "spec_method",
    "spec_topk",
    "verify_tokens",
    "tok_s",
    "aggregate_tok_s",
    "accept_len",
    "acceptance_rate",
    "step_ms",
    "verify_ms",
    "draft_ms",
    "cycle_ms",
    "env",
    "env_from",
    "launch_id",
    "launched_at",
    "source",
    "origin",
    "tpot_ms",
    "itl_ms",
    "ttft_ms",
    "completion_tokens",
    "context_tokens",
    "format",
    "gen_tok_s",
    "prompt_tok_s",
    "running_reqs",
    "queue_reqs",
    "tokens_in_use",
    "accepted_tokens",
    "draft_tokens",
    "emitted_tokens",
    "num_drafts",
    "category",
    "per_position",
    "first_after_idle",
    "note",
)

# Values that stand where a number would: the field is missing, nothing is wrong.
PLACEHOLDERS = (
    "",
    "-",
    "--",
    "n/a",
    "na",
    "none",
    "null",
    "not set",
    "unknown",
    "nan",
    "inf",
    "+inf",
    "-inf",
    "infinity",
    "-infinity",
)

# Each key's type: the schema's for its columns; of the engine's own figures, two are text.
_TEXT = tuple(
    k
    for k in RECORD_KEYS
    if k in ("format", "note") or (k in ALL_COLUMNS and ALL_COLUMNS[k].kind == "text")
)
_INTEGER = tuple(k for k in RECORD_KEYS if k in ALL_COLUMNS and ALL_COLUMNS[k].kind == "integer")


def record_schema() -> dict[str, Any]:
    """The polars type of each record key."""

    types: dict[str, Any] = {}
    for key in RECORD_KEYS:
        if key == "per_position":  # a list in records, text in a CSV
            types[key] = pl.List(pl.Float64)
        elif key in _TEXT:
            types[key] = pl.String
        elif key in _INTEGER:
            types[key] = pl.Int64
        elif key == "first_after_idle":
            types[key] = pl.Boolean
        else:
            types[key] = pl.Float64
    return types


def frame_of(records: Any) -> Any:
    """Records (a polars frame, or a list of dicts) as a frame of exactly the record schema:
    every key, in order, with its type; NaN and infinities become null (the one place they
    do): a rate of 1000 / 1e-320 ms is no measurement, and the CSV never holds ``inf``."""

    schema = record_schema()
    if not isinstance(records, pl.DataFrame):
        rows = [_plain(r) for r in records]
        unknown = {key for r in rows for key in r} - _RECORD_KEY_SET
        if unknown:  # a reader's key --out has no column for
            raise AssertionError(f"record keys without a column: {sorted(unknown)}")
        full = [{key: r.get(key) for key in RECORD_KEYS} for r in rows]
        records = pl.DataFrame(full, schema=schema) if rows else pl.DataFrame(schema=schema)
    columns = []
    for key, dtype in schema.items():
        if key in records.columns:
            column = pl.col(key).cast(dtype, strict=False)
            if dtype == pl.Float64:
                column = pl.when(column.is_finite()).then(column)
            columns.append(column)
        else:
            columns.append(pl.lit(None, dtype).alias(key))
    return records.select(columns)


_RECORD_KEY_SET = frozenset(RECORD_KEYS)


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in record.items():
        if isinstance(value, float) and value != value:
            value = None
        elif key == "num_spec_tokens" and value is not None:
            value = int(value)
        out[key] = value
    return out


def stamped(frame: Any, stamp: dict[str, Any]) -> Any:
    """``frame`` with the user's metadata: a given value replaces what the file said."""

    types = record_schema()
    given = {key: pl.lit(value, types[key]) for key, value in stamp.items() if value is not None}
    if "env" in given:  # typed by hand: not the log's
        given["env_from"] = pl.lit(None, pl.String)
    return frame.with_columns(**given) if given else frame


def list_text(name: str) -> Any:
    """A list column as a CSV writes it, ``[a, b]`` (null stays null): one text for a record's
    rates wherever they go, a CSV or the frames check reads."""
    return pl.lit("[") + pl.col(name).list.eval(pl.element().cast(pl.String)).list.join(", ") + "]"


# A text cell a spreadsheet reads as a formula, or one that starts with the escape itself.
_ESCAPED = "^[" + "".join(c for c in ESCAPED_STARTS if c != "-") + "-]"


def spreadsheet_columns(frame: Any) -> list[Any]:
    """The text columns of ``frame`` that hold a cell a spreadsheet would read as a formula,
    or one that starts with ``'``, as a CSV holds them: those cells with a ``'`` in front
    (:func:`breakeven.core.display.spreadsheet_text`, column-wise; ``read_measurements`` takes
    it off again).  Columns with no such cell (nearly every column of every frame) are found
    in one pass and left as they are."""
    texts = [k for k in _TEXT if k != "per_position" and frame[k].null_count() < frame.height]
    if not texts:
        return []
    hits = frame.select(pl.col(k).str.contains(_ESCAPED).any() for k in texts).row(0)
    escaped = []
    for key, hit in zip(texts, hits, strict=True):
        if hit:
            column = pl.col(key)
            flagged = column.str.contains(_ESCAPED)
            escaped.append(pl.when(flagged).then(pl.lit("'") + column).otherwise(column).alias(key))
    return escaped


def csv_bytes(frame: Any, header: bool = False) -> bytes:
    """A record frame as measurement CSV rows, UTF-8: missing values empty, floats
    exactly (the shortest text that reads back as the same float), lists as
    ``[a, b]``, booleans True/False, text safe from a spreadsheet (:func:`spreadsheet_columns`)."""

    shown = frame.with_columns(
        *spreadsheet_columns(frame),
        per_position=list_text("per_position"),
        first_after_idle=pl.when(pl.col("first_after_idle"))
        .then(pl.lit("True"))
        .when(pl.col("first_after_idle").is_not_null())
        .then(pl.lit("False")),
    )
    return shown.write_csv(include_header=header, line_terminator="\n").encode("utf-8")


def csv_header() -> bytes:
    """The header line of ingest --out, UTF-8."""
    return (",".join(RECORD_KEYS) + "\n").encode("utf-8")


class Tally:
    """Per file and format: how many records, which k, acceptance (pooled from counts where
    the records give them) and mean rates.

    Memory grows with the number of (file, format) pairs, not with the records.
    """

    MEANS = ("accept_len", "tok_s", "aggregate_tok_s")

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}
        self.records = 0

    def count(self, frame: Any) -> None:
        """Count the records of a frame."""

        if not frame.height:
            return
        path = pl.col("source").str.replace(r":\d+$", "")
        sums = frame.group_by(path.alias("path"), "format", maintain_order=True).agg(
            pl.len().alias("records"),
            pl.col("num_spec_tokens").drop_nulls().unique().alias("k"),
            pl.col("note").drop_nulls().value_counts().alias("notes"),
            *(pl.col(m).sum().alias(f"sum_{m}") for m in self.MEANS),
            *(pl.col(m).count().alias(f"n_{m}") for m in self.MEANS),
            *self._pool(frame),
            *self._launches(frame),
        )
        for row in sums.iter_rows(named=True):
            g = self._group(row["path"], row["format"] or "-")
            self.records += row["records"]
            g["records"] += row["records"]
            g["k"] |= set(row["k"])
            # value_counts gives its notes in no set order: the most first, then by text.
            for said in sorted(row["notes"], key=lambda s: (-s["count"], s["note"])):
                note, n = said["note"].strip().rstrip("."), said["count"]
                if note:
                    g["notes"][note] = g["notes"].get(note, 0) + n
            for i, m in enumerate(self.MEANS):
                g["sum"][i] += row[f"sum_{m}"] or 0.0
                g["n"][i] += row[f"n_{m}"]
            g["drafts"] += row["drafts"] or 0.0
            g["accepted"] += row["accepted"] or 0.0
            g["unweighted"] += row["unweighted"]
            g["decoded"] += row["decoded"] or 0.0
            g["seconds"] += row["seconds"] or 0.0
            g["unweighted_rates"] += row["unweighted_rates"]
            g["launches"] |= set(row["launches"])
            g["yearless"] = g["yearless"] or bool(row["yearless"])

    @staticmethod
    def _launches(frame: Any) -> list[Any]:
        """The launches seen (``launch_id``s), and whether any launch's date lacks its year
        (a vLLM log read without ``--year``)."""
        if "launch_id" not in frame.columns:
            return [
                pl.lit([], pl.List(pl.String)).first().alias("launches"),
                pl.lit(False).alias("yearless"),
            ]
        at = (
            pl.col("launched_at").cast(pl.String)
            if "launched_at" in frame.columns
            else pl.lit(None, pl.String)
        )
        return [
            pl.col("launch_id")
            .cast(pl.String)
            .filter(pl.col("launch_id").is_not_null() & (pl.col("launch_id").cast(pl.String) != ""))
            .unique()
            .alias("launches"),
            (at.is_not_null() & (at != "") & ~at.str.contains(r"^\d{4}-")).any().alias("yearless"),
        ]

    @staticmethod
    def _pool(frame: Any) -> list[Any]:
        """The sums that pool accept_len from counts: drafts, accepted tokens
        (``(accept_len - 1) * num_drafts``) and the records with an accept_len but no drafts;
        and those that pool tok_s as a ratio of sums: the decoded tokens (``completion_tokens``
        less the prefill's first), their time, and the records with a rate but no tokens."""
        tau = pl.col("accept_len")
        drafts = pl.col("num_drafts") if "num_drafts" in frame.columns else pl.lit(None)
        weighted = tau.is_not_null() & tau.is_not_nan() & (drafts.cast(pl.Float64) > 0)
        rate = pl.col("tok_s")
        completion = (
            pl.col("completion_tokens") if "completion_tokens" in frame.columns else pl.lit(None)
        )
        decoded = completion.cast(pl.Float64) - 1
        timed = rate.is_not_null() & (rate > 0) & (decoded > 0)
        return [
            decoded.filter(timed).sum().alias("decoded"),
            (decoded / rate).filter(timed).sum().alias("seconds"),
            (rate.is_not_null() & ~timed.fill_null(False)).sum().alias("unweighted_rates"),
            drafts.cast(pl.Float64).filter(weighted).sum().alias("drafts"),
            ((tau - 1) * drafts.cast(pl.Float64)).filter(weighted).sum().alias("accepted"),
            (tau.is_not_null() & tau.is_not_nan() & ~weighted.fill_null(False))
            .sum()
            .alias("unweighted"),
        ]

    def _group(self, path: str, fmt: str) -> dict[str, Any]:
        g = self.groups.get((path, fmt))
        if g is None:
            g = self.groups[(path, fmt)] = {
                "records": 0,
                "k": set(),
                "sum": [0.0] * 3,
                "n": [0] * 3,
                "drafts": 0.0,
                "accepted": 0.0,
                "unweighted": 0,
                "decoded": 0.0,
                "seconds": 0.0,
                "unweighted_rates": 0,
                "launches": set(),
                "yearless": False,
                "notes": {},  # each note the records carry: how many carry it
            }
        return g

    def notes(self) -> dict[str, int]:
        """Each note the records carry (how a value was read or derived), and how many
        records carry it: the most first, then in first-seen order."""
        out: dict[str, int] = {}
        for g in self.groups.values():
            for note, n in g["notes"].items():
                out[note] = out.get(note, 0) + n
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def formats(self) -> list[str]:
        """The record formats seen, in first-seen order."""
        return list(dict.fromkeys(fmt for _, fmt in self.groups))

    def mean(self, group: dict[str, Any], key: str) -> float | None:
        """accept_len, tok_s or aggregate_tok_s over a group's records that have it.

        accept_len is pooled from counts, ``1 + sum(accepted) / sum(drafts)``, where every
        record with one gives its drafts (``num_drafts``); tok_s is a ratio of sums, the
        decoded tokens over their time, where every record with one gives its tokens
        (``completion_tokens``); else each is the records' mean."""
        if key == "accept_len" and group["drafts"] > 0 and not group["unweighted"]:
            return 1 + group["accepted"] / group["drafts"]
        if key == "tok_s" and group["seconds"] > 0 and not group["unweighted_rates"]:
            return group["decoded"] / group["seconds"]
        i = self.MEANS.index(key)
        return group["sum"][i] / group["n"][i] if group["n"][i] else None


def iso_timestamp(t: float) -> str:
    """A record's ``timestamp``: the time ``t`` [s since the Unix epoch] in ISO 8601, UTC, to
    the second (``2026-02-26T10:00:00+00:00``)."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
