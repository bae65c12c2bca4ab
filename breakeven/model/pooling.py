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
- A request's own acceptance is pooled from its own counts (:func:`request_drafts`): its
  verify cycles where the server counts them per request, else its drafted tokens over the
  level's drafted tokens per cycle.

``check``, ``compare`` (through check), ``fit`` and the intervals use these, and nothing else,
to pool.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.schema import COUNTERS_OVER_LEVEL

__all__ = [
    "adopt_server_rates",
    "decoded_tokens",
    "group_pooled_accept_len",
    "group_pooled_rates",
    "pooled_rate",
    "request_drafts",
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
        if not weighted.any():  # no value gives its tokens: every group's mean
            return mean, count
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
    server = _from_server(df)
    if not server.any() or "run_id" not in df.columns:  # no server rows: no echoes
        return pd.Series(False, index=df.index)
    run_id = df["run_id"].astype(object)
    named = run_id.notna() & (run_id != "")
    measured = run_id[~server & named & pd.to_numeric(df["tok_s"], errors="coerce").notna()]
    return server & named & run_id.isin(set(measured))


def _from_server(df: Any) -> Any:
    """Whether each row is a server's (``origin=server``), as a boolean Series; compared on a
    categorical column's categories, never row by row as text."""
    if "origin" not in df.columns:
        return pd.Series(False, index=df.index)
    return (df["origin"] == "server").fillna(False).astype(bool)


def take_server_view(df: Any, echo: Any) -> None:
    """The server's view of a run (``echo``: :func:`server_echoes`) given to the client rows
    of the same run (in place).

    Its decode step and cycle, and its k, go to the rows that have none: a prediction of the
    run then uses what the server measured (``bench`` without ``-k`` leaves k to it).  Its accept_len, pooled over the whole level, replaces a client
    row's that the server did not give per request (no ``num_drafts``): such a row holds the
    level's acceptance up to that request, a running value, and a mean of running values is
    no one's acceptance.

    Two columns are added, for what is pooled over a run's requests by their workload
    (:mod:`breakeven.measurements.workload`): ``level_accept_len``, whether a row's accept_len is the level's
    (where the server gave one), and ``request_drafts``, each request's own verify cycles
    (:func:`request_drafts`).
    """
    if not np.asarray(echo, dtype=bool).any():  # no server views to give
        df["request_drafts"] = request_drafts(df, echo)
        return
    server = _from_server(df)
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
            df["level_accept_len"] = running
        else:
            df[column] = values.fillna(fill.where(~server))
    df["request_drafts"] = request_drafts(df, echo)


def request_drafts(df: Any, echo: Any) -> Any:
    """Each row's verify cycles for its own request [cycles] (a float Series, NaN where the row
    does not give its request's counts): pooled over requests, ``1 + sum(accepted) /
    sum(cycles)`` is their accept_len from their own counts, never the level's.

    - ``num_drafts`` where the server counts a request's cycles (vLLM's per-request metrics,
      SGLang's ``spec_verify_ct``, AIPerf's records).
    - Else, where the row gives the request's drafted tokens (``draft_tokens``, with
      ``accepted_tokens``: llama.cpp's ``timings.draft_n`` and ``draft_n_accepted``, which
      count no cycles; llama-server keeps a request's verify steps only in its ``/metrics``),
      those over its run's drafted tokens per cycle: the server's view of the run (``echo``,
      its level's ``draft_tokens / num_drafts``), else the row's k (every cycle drafting k
      tokens).  Exact where every cycle of the level drafts as many tokens (a fixed k; a
      llama.cpp draft model at ``--draft-p-min 0``); otherwise each request's cycles at the
      level's mean draft length, which over all the level's requests give its cycles and its
      accept_len.
    """

    def numbers(column: str) -> Any:
        if column not in df.columns:
            return pd.Series(np.nan, df.index)
        values = df[column]
        if values.dtype.kind in "fiub":  # numbers already: no round trip through objects
            return values.astype(float)
        return pd.to_numeric(values.astype(object), errors="coerce").astype(float)

    cycles, drafted, accepted = (
        numbers("num_drafts"),
        numbers("draft_tokens"),
        numbers("accepted_tokens"),
    )
    k = numbers("num_spec_tokens")
    server = _from_server(df)
    per_cycle = k.where(k > 0)
    if "run_id" in df.columns:
        level = np.asarray(echo, dtype=bool) & (cycles > 0) & (drafted > 0)
        if level.any():
            run_id = df["run_id"].astype(object)
            tokens = drafted[level].groupby(run_id[level]).sum()
            steps = cycles[level].groupby(run_id[level]).sum()
            per_cycle = run_id.map((tokens / steps).to_dict()).astype(float).fillna(per_cycle)
    counted = ~server & cycles.isna() & (drafted >= 0) & (accepted >= 0) & (accepted <= drafted)
    estimated = (drafted / per_cycle).where(counted & (per_cycle > 0))
    return cycles.fillna(estimated)


def adopt_server_rates(df: Any, echo: Any) -> Any:
    """The server's own rate made the run's (in place), where the server's counters cover
    the same window as a client's requests (``echo``: :func:`server_echoes`, the level's row
    of ``origin=server`` with a ``tok_s``, from counters read around the level:
    :data:`COUNTERS_OVER_LEVEL`): each client row's ``tok_s`` is scaled by the
    run's ``server / client`` ratio, so that the run's rate, a ratio of sums over its
    requests, is the server's, and its requests keep their spread (the interval within one
    run).  The engine timed its own decode; the client timed the chunks it could read, and
    a client that shares a core with the server falls behind its streams.

    Returns each row's rate as the client measured it (a float Series; NaN on the server's
    rows): the cross-check that ``check``'s ``server_client_mismatch`` compares."""
    client_rates = pd.to_numeric(df["tok_s"], errors="coerce").astype(float)
    not_server = ~_from_server(df)
    echo = pd.Series(np.asarray(echo, dtype=bool), df.index)
    if "source" in df.columns and echo.any():  # a few level rows: their sources only
        counted = df.loc[echo, "source"].astype(str).str.endswith(COUNTERS_OVER_LEVEL)
        echo = pd.Series(False, df.index)
        echo[counted.index[counted.to_numpy()]] = True
    else:
        echo = pd.Series(False, df.index)
    server_rate = client_rates.where(echo)
    if not server_rate.notna().any():
        return client_rates.where(not_server)
    run_id = df["run_id"].astype(object)
    per_run = server_rate.groupby(run_id).mean().dropna()
    client = not_server & run_id.isin(set(per_run.index)) & client_rates.notna()
    if not client.any():
        return client_rates.where(not_server)
    number, runs = pd.factorize(run_id[client])
    tokens = (
        decoded_tokens(df.loc[client, "completion_tokens"])
        if "completion_tokens" in df.columns
        else None
    )
    rates, _ = group_pooled_rates(
        number,
        client_rates[client].to_numpy(),
        None if tokens is None else tokens.to_numpy(dtype=float),
        len(runs),
    )
    factor = pd.Series(per_run.reindex(runs).to_numpy() / rates, index=runs)
    scale = run_id[client].map(factor.to_dict()).astype(float)
    scale = scale.where(np.isfinite(scale) & (scale > 0), 1.0)
    df["tok_s"] = client_rates.where(~client, client_rates * scale)
    return client_rates.where(not_server)
