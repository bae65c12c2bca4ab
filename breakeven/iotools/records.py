"""Ingest records: the keys every record carries, and how a record becomes a CSV row."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
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


def csv_cell(value: str) -> str:
    """``value`` as one CSV cell: quoted only when it holds a comma, quote or line break."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["", value])
    return buf.getvalue()[1:-1]
