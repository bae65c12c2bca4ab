"""Acceptance by draft position, and from it the accept_len of every smaller k (issue 28,
item 1).

A speculative run drafts k tokens a cycle; the verify accepts a prefix of them.  Where the
rows say how many cycles accepted 0, 1, ..., k drafted tokens (bench's
``acceptance_histogram``: vLLM's per-request ``metrics.speculative_decoding``) or the
fraction of cycles whose i-th drafted token was accepted (``per_position``: vLLM's
"Per-position acceptance rate" log line, with its window's ``num_drafts``), the run's
**per-position acceptance** is pooled from counts::

    a_i = (cycles that accepted i or more drafted tokens) / cycles        i = 1 ... k

A chain drafter's first k' drafts are the same tokens whether it drafts k' or k, and the
verify accepts a prefix, so a cycle that had drafted only k' tokens would have accepted
``min(A, k')`` of them.  The accept_len at k' is therefore::

    accept_len(k') = 1 + a_1 + ... + a_k'        [tokens/cycle, bonus token included]

and at the run's own k it is the run's pooled accept_len.  (A tree's drafts at a smaller
depth are not a cut of the larger tree's, so tree runs are the user's to judge.)  The costs of
a smaller k are not in the rows: ``breakeven optimize --per-position a_1,...,a_k --fit-file
FIT.json`` prices every k with them.  Pure analysis, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from breakeven.iotools.replies import per_position_from_histogram as from_histogram


@dataclass(frozen=True)
class PositionRow:
    """One speculative run's acceptance at each draft position, pooled from counts."""

    label: str
    """The speculative run."""
    concurrency: float
    """Requests decoded together [sequences] (NaN where the rows do not say)."""
    k: int
    """Draft positions the rows give [tokens]."""
    cycles: float
    """Verify cycles pooled [cycles] (NaN where rows with per-position rates give none)."""
    per_position: tuple[float, ...]
    """``a_1 ... a_k``: the fraction of cycles whose i-th drafted token was accepted."""
    accept_len_by_k: tuple[float, ...]
    """accept_len had the run drafted 1, 2, ..., k tokens, ``1 + a_1 + ... + a_k'``
    [tokens/cycle, bonus token included]; the last is the run's own."""
    source: str
    """'histogram' (cycles by tokens accepted, per request) or 'per_position' (rates per
    window, weighted by its drafts; 'per_position, unweighted' where rows give no drafts)."""


def parse_histogram(text: Any) -> tuple[int, ...] | None:
    """``"3;5;10"`` (bench's ``acceptance_histogram``: cycles that accepted 0, 1, 2 drafted
    tokens) as counts; None where empty or not whole numbers >= 0."""
    parts = str(text).strip().split(";") if isinstance(text, str) else []
    try:
        counts = tuple(int(p) for p in parts)
    except ValueError:
        return None
    return counts if len(counts) >= 2 and all(c >= 0 for c in counts) else None


def parse_rates(text: Any) -> tuple[float, ...] | None:
    """``"[0.8, 0.6]"`` (ingest's ``per_position`` in a CSV) or a list of them (in its records)
    as rates in [0, 1]; None otherwise."""
    if isinstance(text, str):
        body = text.strip().removeprefix("[").removesuffix("]")
        parts = body.split(",") if body.strip() else []
    else:
        parts = list(text) if isinstance(text, (list, tuple, np.ndarray)) else []
    try:
        rates = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        return None
    ok = rates and all(0 <= r <= 1 for r in rates)
    return rates if ok else None


def by_run(df: Any) -> tuple[PositionRow, ...]:
    """Each speculative run's per-position acceptance (see the module's description).  ``df``
    is :func:`breakeven.measurements.normalise.normalise`'s frame; its ``acceptance_histogram`` or
    ``per_position`` (either may be absent) are read.  A run is a ``label`` at one model,
    hardware and concurrency; empty where no row gives either."""
    have = [c for c in ("acceptance_histogram", "per_position") if c in df.columns]
    if not have:
        return ()
    spec = df[df["num_spec_tokens"] > 0]
    out = []
    keys = ["label", "model", "hardware", "concurrency_key"]
    for (label, _, _, conc), rows in spec.groupby(keys, sort=False, observed=True):
        row = _run(rows)
        if row is not None:
            concurrency = float(conc) if conc >= 0 else math.nan
            out.append(PositionRow(str(label), concurrency, *row))
    return tuple(out)


def _run(rows: Any) -> tuple[int, float, tuple, tuple, str] | None:
    """A run's k, cycles, rates, accept_len by k and source; None where nothing is given."""
    if "acceptance_histogram" in rows.columns:
        hists = [h for h in map(parse_histogram, rows["acceptance_histogram"]) if h]
        if hists:
            width = max(map(len, hists))
            pooled = np.zeros(width)
            for h in hists:
                pooled[: len(h)] += h
            rates = from_histogram(pooled)
            if rates:
                return _answer(rates, float(pooled.sum()), "histogram")
    if "per_position" not in rows.columns:
        return None
    rates_of = [parse_rates(r) for r in rows["per_position"]]
    drafts = rows["num_drafts"].to_numpy(dtype=float)
    given = [(r, d) for r, d in zip(rates_of, drafts, strict=True) if r]
    if not given:
        return None
    width = max(len(r) for r, _ in given)
    weighted = all(d > 0 for _, d in given)
    weights = np.array([d if weighted else 1.0 for _, d in given])
    table = np.zeros((len(given), width))
    for i, (r, _) in enumerate(given):
        table[i, : len(r)] = r
    pooled = weights @ table / weights.sum()  # accepted at each position over cycles
    cycles = float(weights.sum()) if weighted else math.nan
    source = "per_position" if weighted else "per_position, unweighted"
    return _answer(tuple(float(x) for x in pooled), cycles, source)


def _answer(rates: Sequence[float], cycles: float, source: str) -> tuple:
    by_k = tuple(float(x) for x in 1 + np.cumsum(rates))
    return len(rates), cycles, tuple(rates), by_k, source


__all__: Sequence[str] = (
    "PositionRow",
    "by_run",
    "from_histogram",
    "parse_histogram",
    "parse_rates",
)
