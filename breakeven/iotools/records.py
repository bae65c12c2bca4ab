"""Ingest records: the keys every record carries, and how a record becomes a CSV row."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

# Keys every ingest record carries (the schema's, then the engine's own figures); the
# columns of ingest --out, in this order.
RECORD_KEYS = (
    "run_id", "label", "timestamp", "engine", "model", "hardware", "concurrency",
    "num_spec_tokens", "spec_method", "tok_s", "aggregate_tok_s", "accept_len",
    "acceptance_rate", "step_ms", "verify_ms", "draft_ms", "cycle_ms", "env", "source",
    "origin", "tpot_ms", "itl_ms", "format", "gen_tok_s", "prompt_tok_s", "running_reqs",
    "queue_reqs", "tokens_in_use", "accepted_tokens", "draft_tokens", "emitted_tokens",
    "num_drafts", "per_position", "first_after_idle", "note",
)  # fmt: skip

# Keys the user may fill in for every record (ingest's --label, --model, ...).
STAMP_KEYS = ("run_id", "label", "model", "hardware", "env", "spec_method")

_RECORD_KEY_SET = frozenset(RECORD_KEYS)
_row_of = itemgetter(*RECORD_KEYS)


def complete(record: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    """Every record key present, missing values as None, user-given metadata filled in."""
    if not record.keys() <= _RECORD_KEY_SET:  # a reader's key --out has no column for
        raise AssertionError(
            f"record keys without a column: {sorted(record.keys() - _RECORD_KEY_SET)}"
        )
    out = dict.fromkeys(RECORD_KEYS)
    for key, value in record.items():
        out[key] = None if value != value else value  # NaN, the readers' "absent", is None
    for key, value in stamp.items():
        if value is not None and out[key] in (None, ""):
            out[key] = value
    k = out["num_spec_tokens"]
    if k is not None and type(k) is not int:
        out["num_spec_tokens"] = int(k)
    return out


def csv_header() -> bytes:
    """The header line of ingest --out, UTF-8."""
    return csv_rows([{k: k for k in RECORD_KEYS}])


def csv_rows(records: Iterable[dict[str, Any]]) -> bytes:
    """Complete records (see :func:`complete`) as CSV lines, UTF-8.

    None is an empty cell, a float is written as ``repr`` writes it (exactly),
    a list as ``[a, b]`` and a bool as True/False.
    """
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(map(_row_of, records))
    return buf.getvalue().encode("utf-8")


class Tally:
    """Per file and format: how many records, which k, and mean acceptance and rates.

    Memory grows with the number of (file, format) pairs, not with the records.
    """

    MEANS = ("accept_len", "tok_s", "aggregate_tok_s")

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], dict[str, Any]] = {}
        self.records = 0

    def watch(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Pass complete ``records`` through, counting them."""
        for r in records:
            self.count(r)
            yield r

    def count(self, r: dict[str, Any]) -> None:
        """Count one complete record."""
        g = self._group((r["source"] or "").rpartition(":")[0], r["format"])
        self.records += 1
        g["records"] += 1
        if r["num_spec_tokens"] is not None:
            g["k"].add(r["num_spec_tokens"])
        for i, key in enumerate(self.MEANS):
            value = r[key]
            if value is not None:
                g["sum"][i] += value
                g["n"][i] += 1

    def add(self, path: str, fmt: str, records: int, k: int | None,
            sums: Sequence[float], ns: Sequence[int]) -> None:  # fmt: skip
        """Count ``records`` records at once: sums and counts of :attr:`MEANS`."""
        g = self._group(path, fmt)
        self.records += records
        g["records"] += records
        if k is not None:
            g["k"].add(k)
        for i in range(3):
            g["sum"][i] += sums[i]
            g["n"][i] += ns[i]

    def merge(self, other: Tally) -> None:
        """Add another tally's counts (of later records) to this one."""
        for (path, fmt), o in other.groups.items():
            self.add(path, fmt, o["records"], None, o["sum"], o["n"])
            self.groups[(path, fmt)]["k"] |= o["k"]

    def _group(self, path: str, fmt: str) -> dict[str, Any]:
        g = self.groups.get((path, fmt))
        if g is None:
            g = self.groups[(path, fmt)] = {"records": 0, "k": set(), "sum": [0.0] * 3,
                                            "n": [0] * 3}  # fmt: skip
        return g

    def mean(self, group: dict[str, Any], key: str) -> float | None:
        """Mean of accept_len, tok_s or aggregate_tok_s over a group's records that have it."""
        i = self.MEANS.index(key)
        return group["sum"][i] / group["n"][i] if group["n"][i] else None
