"""Pooling measurements as an engine's counters pool them: ratios of sums, never means of
ratios.

- A per-sequence rate over several requests or rows is the tokens they decoded over the time
  they took (:func:`pooled_rate`), never the mean of their rates.
- An accept_len over several rows is ``1 + sum(accepted) / sum(drafts)``
  (:func:`group_pooled_accept_len`), never the mean of their ratios.
- A run measured by a client (``bench``'s request rows) and by the server's own counters (the
  level's row of ``origin=server``, same ``run_id``) is one measurement: the server's view
  gives the run its step, cycle and acceptance over the whole level
  (:func:`take_server_view`), and its row is not counted as another repeat.

``check``, ``compare`` (through check), ``fit`` and the intervals use these, and nothing else,
to pool.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "decoded_tokens",
    "group_pooled_accept_len",
    "group_pooled_rates",
    "pooled_rate",
    "server_echoes",
    "take_server_view",
]


def pooled_rate(rates: Any, tokens: Any = None) -> float:
    """The rate of values that each took their own time [tok/s]: a ratio of sums.

    With ``tokens``, the tokens each value decoded, it is ``sum(tokens) / sum(tokens /
    rates)``, the tokens over the time they took, as an engine's counters pool them: one
    request that came in a burst (a decode time near 0, a rate of 100,000 tok/s) weighs
    what its tokens weigh, and does not carry the result.  Where some value has a rate and
    no tokens (a log's window, a source that gives only the rate), it is the mean of the
    rates, as nothing else can be done.  NaN rates are left out; none at all: NaN.
    """
    (rate,), _ = group_pooled_rates(np.zeros(np.size(rates), dtype=np.int64), rates, tokens, 1)
    return float(rate)


def group_pooled_rates(number: Any, rates: Any, tokens: Any, groups: int) -> tuple[Any, Any]:
    """:func:`pooled_rate` of each group (``number``: each value's group, 0 to ``groups`` - 1),
    and each group's count of rates, vectorised."""
    number = np.asarray(number, dtype=np.int64)
    rates = np.asarray(rates, dtype=float)
    ok = ~np.isnan(rates)
    count = np.bincount(number[ok], minlength=groups)
    total = np.bincount(number[ok], weights=rates[ok], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        if tokens is None:
            return mean, count
        tokens = np.broadcast_to(np.asarray(tokens, dtype=float), rates.shape)
        weighted = ok & (tokens > 0) & (rates > 0)  # NaN compares False
        unweighted = np.bincount(number[ok & ~weighted], minlength=groups)
        w = np.bincount(number[weighted], weights=tokens[weighted], minlength=groups)
        seconds = np.bincount(
            number[weighted], weights=tokens[weighted] / rates[weighted], minlength=groups
        )
        pooled = w / seconds
    return np.where((unweighted == 0) & (seconds > 0), pooled, mean), count


def group_pooled_accept_len(number: Any, tau: Any, drafts: Any, groups: int) -> tuple[Any, Any]:
    """Each group's accept_len pooled from counts, ``1 + sum(accepted) / sum(drafts)``, and
    its count of values.

    A row's accepted tokens are ``(accept_len - 1) * num_drafts``, so the pool is the
    rows' accept_len weighted by their drafts: an interval of 1 draft weighs 1/23 of one of
    23, as the engine's own counters weigh them.  A group in which some row with an
    accept_len has no draft count (a source that prints only the ratio) is averaged, as
    nothing else can be done with it.
    """
    number = np.asarray(number, dtype=np.int64)
    tau, drafts = np.asarray(tau, dtype=float), np.asarray(drafts, dtype=float)
    mean, count = group_pooled_rates(number, tau, None, groups)  # without tokens: the mean
    has_tau = ~np.isnan(tau)
    weighted = has_tau & (drafts > 0)  # NaN compares False
    unweighted = np.bincount(number[has_tau & ~weighted], minlength=groups)
    w = np.bincount(number[weighted], weights=drafts[weighted], minlength=groups)
    accepted = np.bincount(
        number[weighted], weights=(tau[weighted] - 1) * drafts[weighted], minlength=groups
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = 1 + accepted / w
    return np.where((unweighted == 0) & (w > 0), pooled, mean), count


def decoded_tokens(completion_tokens: Any) -> Any:
    """The tokens a request decoded [tokens]: its ``completion_tokens`` less the first, which
    came with the prefill (``tok_s`` is the rest over the time after it); NaN where not
    known.  They weigh a request's rate where rates are pooled (:func:`pooled_rate`)."""
    decoded = pd.to_numeric(pd.Series(completion_tokens), errors="coerce") - 1
    return decoded.where(decoded > 0)


def server_echoes(df: Any) -> Any:
    """The rows of ``origin=server`` whose ``run_id`` a client row with a rate measured too
    (a boolean Series): the server's view of a run, not another repeat of it."""
    origin = df["origin"].astype(object) if "origin" in df.columns else pd.Series("", df.index)
    run_id = df["run_id"].astype(object) if "run_id" in df.columns else pd.Series("", df.index)
    server = origin == "server"
    named = run_id.notna() & (run_id != "")
    measured = run_id[~server & named & pd.to_numeric(df["tok_s"], errors="coerce").notna()]
    return server & named & run_id.isin(set(measured))


def take_server_view(df: Any, echo: Any) -> None:
    """The server's view of a run (``echo``: :func:`server_echoes`) given to the client rows
    of the same run (in place).

    Its decode step and cycle, and its k, go to the rows that have none: a prediction of the
    run then uses what the server measured (``bench`` without ``-k`` leaves k to it).  Its accept_len, pooled over the whole level, replaces a client
    row's that the server did not give per request (no ``num_drafts``): such a row holds the
    level's acceptance up to that request, a running value, and a mean of running values is
    no one's acceptance.
    """
    origin = df["origin"].astype(object) if "origin" in df.columns else pd.Series("", df.index)
    server = origin == "server"
    run_id = df["run_id"].astype(object)
    drafts = (
        pd.to_numeric(df["num_drafts"], errors="coerce")
        if "num_drafts" in df.columns
        else pd.Series(np.nan, df.index)
    )
    for column in ("cycle_ms", "step_ms", "num_spec_tokens", "accept_len"):
        if column not in df.columns:
            continue
        values = pd.to_numeric(df[column], errors="coerce")
        source = echo & values.notna()
        if not source.any():
            continue
        per_run = values[source].groupby(run_id[source]).mean().to_dict()
        fill = run_id.map(per_run).astype(float)
        if column == "accept_len":
            running = ~server & fill.notna() & drafts.isna()
            df[column] = values.where(~running, fill)
        else:
            df[column] = values.fillna(fill.where(~server))
