"""The measured runs as ``fit`` takes them: the columns it reads, its groups (model, hardware,
concurrency, method and context), and each group's runs prepared per k, with accept_len pooled
from the engine's counts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from breakeven.measurements.normalise import level_key
from breakeven.measurements.plausibility import (
    out_of_range,
)
from breakeven.model.pooling import (
    adopt_server_rates,
    decoded_tokens,
    group_pooled_accept_len,
    group_pooled_rates,
    server_echoes,
    take_server_view,
)

_GROUP = ["model", "hardware", "concurrency", "context", "spec_method"]


_CONFIG = _GROUP[:4]  # what a baseline must share with the runs it is the step of


CONTEXT_STEP = 1.5
"""Context lengths a factor of this or more apart are two lengths [-]; closer ones are one
(a bench level's requests differ by some tokens; a context sweep doubles)."""


def context_lengths(context_tokens: Any, config: Any, run: Any) -> Any:
    """Each row's context length as a whole number per ``config`` (the rows' model,
    hardware and concurrency, one label a row), from the mean context of each ``run`` (a
    bench level's requests, whose completions differ, are one run): run means within
    :data:`CONTEXT_STEP` of the shortest of their length are one.  Where a config's runs are
    all at one length (or give none), every row of it is 0, whether it gives a context or
    not: grouping by context only splits runs that differ in it.  In a config at several
    lengths a row without one is -1."""
    frame = pd.DataFrame(
        {
            "c": pd.to_numeric(pd.Series(context_tokens), errors="coerce").to_numpy(dtype=float),
            "config": pd.Series(config).to_numpy(),
            "run": pd.Series(run).to_numpy(),
        }
    )
    frame["mean"] = frame.groupby(["config", "run"], dropna=False)["c"].transform("mean")
    out = np.zeros(len(frame))
    for _, rows in frame.groupby("config", sort=False):
        known = rows["mean"].to_numpy()
        values = np.unique(known[known > 0])
        if len(values) < 2 or values[-1] < values[0] * CONTEXT_STEP:
            continue  # one length: nothing to split
        length, start, of = 0, values[0], {}
        for v in values:
            if v >= start * CONTEXT_STEP:
                length, start = length + 1, v
            of[v] = length
        out[rows.index.to_numpy()] = [of.get(v, -1.0) if v > 0 else -1.0 for v in known]
    return out


COLUMNS_USED = (
    "model",
    "hardware",
    "concurrency",
    "spec_method",
    "num_spec_tokens",
    "accept_len",
    "acceptance_rate",
    "tok_s",
    "tpot_ms",
    "step_ms",
    "verify_ms",
    "draft_ms",
    "cycle_ms",
    "label",
    "spec_topk",
    "verify_tokens",
    "num_drafts",
    # bench's rows: the server's view of a level (origin=server, its run_id) and each
    # request's tokens, which weigh its rate in a ratio of sums (pooling.decoded_tokens).
    "origin",
    "run_id",
    "completion_tokens",
    "launch_id",
    "context_tokens",
    "category",
    "request_rate",
)


def _prepared(data: Any) -> tuple[Any, list[str]]:
    """The rows with numbers as floats, k, and ``rate``: tok_s, else 1000 / tpot_ms; the
    server's view of a run measured by a client too (``bench``'s ``origin=server`` row) given
    to the client's rows and not counted as a row of its own (:mod:`breakeven.model.pooling`), and
    each row's ``decoded`` tokens, which weigh its rate where rates are pooled; and the notes
    of the numbers left out as impossible (:func:`~breakeven.measurements.plausibility.out_of_range`)."""

    df = data.copy(deep=False)
    for column in ("model", "hardware", "spec_method", "label", "category"):
        df[column] = (
            df[column].astype(object).where(df[column].notna(), "") if column in df.columns else ""
        )
    for column in (
        "concurrency",
        "num_spec_tokens",
        "accept_len",
        "acceptance_rate",
        "tok_s",
        "tpot_ms",
        "step_ms",
        "verify_ms",
        "draft_ms",
        "cycle_ms",
        "spec_topk",
        "verify_tokens",
        "num_drafts",
        "line",
        "context_tokens",
    ):
        df[column] = (
            pd.to_numeric(df[column], errors="coerce") if column in df.columns else math.nan
        )
    notes = out_of_range(df)  # a file's are refused as it is read; a DataFrame's left out
    if "launch_id" not in df.columns:
        df["launch_id"] = math.nan
    if "tok_s" in data.columns and "run_id" in data.columns:
        echo = server_echoes(df)
        take_server_view(df, echo)
        adopt_server_rates(df, echo)  # the server's own rate first, as check's
        df = df[~echo.to_numpy()].copy()
    df["decoded"] = (
        decoded_tokens(df["completion_tokens"]) if "completion_tokens" in df.columns else math.nan
    )
    k = df["num_spec_tokens"]
    rated = df["accept_len"].isna() & (k > 0) & df["acceptance_rate"].notna()
    df["from_rate"] = rated
    df.loc[rated, "accept_len"] = 1 + k[rated] * df.loc[rated, "acceptance_rate"]
    rate = df["tok_s"].where(df["tok_s"] > 0)
    df["rate"] = rate.fillna(1000.0 / df["tpot_ms"].where(df["tpot_ms"] > 0))
    # An open-loop level's rows are keyed by their rate (below -1: never a batch size, never
    # another level's), as check pairs them (measurements.normalise.level_key).
    rates = df["request_rate"] if "request_rate" in df.columns else math.nan
    df["concurrency"] = level_key(df["concurrency"], pd.to_numeric(rates, errors="coerce"))
    config = df["model"].astype(str) + "\x00" + df["hardware"].astype(str) + "\x00"
    run = df["run_id"] if "run_id" in df.columns else pd.Series(np.arange(len(df)), index=df.index)
    run = run.astype(object).where(run.notna(), pd.Series(np.arange(len(df)), index=df.index))
    df["context"] = context_lengths(
        df["context_tokens"], config + df["concurrency"].astype(str), run.astype(str)
    )
    return df, notes


def _per_k(spec: Any) -> Any:
    """One row per group and k: the runs' accept_len (pooled from counts, ``1 + sum(accepted)
    / sum(drafts)``, where every row with one gives its drafts; else their mean) and rate (a
    ratio of sums, the decoded tokens over their time, where every row with a rate gives its
    tokens; else their mean), how many rows have a rate, and the profiled costs' means."""
    groups = spec.groupby([*_GROUP, "num_spec_tokens"], sort=False, dropna=False)
    table = groups.agg(
        runs=("rate", "count"),
        cycle=("cycle_ms", "mean"),
        verify=("verify_ms", "mean"),
        draft=("draft_ms", "mean"),
        line=("line", "min"),  # the k's first row in the file (NaN: rows given without one)
        context_tokens=("context_tokens", "mean"),
    ).reset_index()
    number, n = groups.ngroup().to_numpy(), len(table)  # the table's rows, in its order
    table["accept_len"] = _pooled_tau_of(spec, number, n)
    table["rate"] = group_pooled_rates(number, spec["rate"], spec["decoded"], n)[0]
    tau, rate = table["accept_len"], table["rate"]
    table["implied"] = (1000.0 * tau / rate).where((rate > 0) & (tau >= 1))
    return table.rename(columns={"num_spec_tokens": "k"}).sort_values("k", kind="stable")


def _pooled_tau_of(rows: Any, number: Any, groups: int) -> Any:
    """Each group's accept_len (``number``: each row's group), pooled from counts
    (:func:`~breakeven.model.pooling.group_pooled_accept_len`)."""
    return group_pooled_accept_len(number, rows["accept_len"], rows["num_drafts"], groups)[0]


def _pooled_tau(rows: Any) -> float:
    """The rows' accept_len, pooled as :func:`_per_k` pools it."""
    return float(_pooled_tau_of(rows, np.zeros(len(rows), dtype=np.int64), 1)[0])


def _entries(rows: Any) -> list[dict[str, Any]]:
    keys = ("k", "accept_len", "rate", "runs", "implied", "cycle", "verify", "draft", "line")
    return [
        {**dict(zip(keys, values, strict=True)), "k": int(values[0]), "runs": int(values[3])}
        for values in rows[list(keys)].itertuples(index=False, name=None)
    ]


__all__ = ["COLUMNS_USED", "CONTEXT_STEP", "context_lengths"]
