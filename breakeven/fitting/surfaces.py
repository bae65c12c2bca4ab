"""What ``breakeven fit`` fits across batch sizes, from the runs :mod:`breakeven.fitting.fit` prepared:
a forward surface per model, hardware and method (:mod:`breakeven.model.surface`), at one context
length each, and the acceptance of tree drafts (:mod:`breakeven.fitting.tree`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.errors import BreakevenError
from breakeven.fitting.tree import check_tree, fit_tree_acceptance
from breakeven.model.pooling import group_pooled_accept_len, group_pooled_rates
from breakeven.model.surface import fit_surface


def one_context(df: Any) -> Any:
    """Which rows a surface across batch sizes takes: at a concurrency whose runs sat at
    several context lengths (``df["context"]``), those of the length nearest (in ratio) the
    median context of the model and hardware's rows; every row elsewhere.  The surface is
    fitted at one context; the context fit (:mod:`breakeven.model.context`) moves it."""
    keep = pd.Series(True, index=df.index)
    c = pd.to_numeric(df["context_tokens"], errors="coerce")
    if not (df["context"] != 0).any():
        return keep
    for _, rows in df.groupby(["model", "hardware"], sort=False):
        middle = c[rows.index].median()
        for _, at in rows.groupby("concurrency", sort=False):
            if not (at["context"] != 0).any() or not middle > 0:
                continue
            means = c[at.index].groupby(at["context"]).mean()
            means = means[means > 0]
            nearest = (np.log(means) - math.log(middle)).abs().idxmin()
            keep[at.index] = at["context"] == nearest
    return keep


def surfaces(df: Any, moe: Any, roof_for: Any = None) -> tuple[Any, ...]:
    """A forward surface per model, hardware and method whose baselines ran at two or more
    batch sizes (:mod:`breakeven.model.surface`), at one context length each
    (:func:`one_context`); ``roof_for(model, hardware, context_tokens)`` gives the datasheet
    floor of a model on its hardware (:class:`breakeven.model.roof.Roof`, or None where
    either is unknown), for the roofline form."""

    df = df[one_context(df)]
    k = df["num_spec_tokens"]
    known = (df["rate"] > 0) & (df["concurrency"] > 0)
    base = df[known & (k == 0)]
    spec = df[known & (k > 0) & (k == k.round()) & (df["accept_len"] >= 1)].copy()
    spec["spec_topk"] = spec["spec_topk"].fillna(1.0)
    spec["verify_tokens"] = spec["verify_tokens"].fillna(spec["num_spec_tokens"] + 1)
    # Every configuration's accept_len and rate pooled at once (vectorised), then split.
    keys = ["model", "hardware", "spec_method", "concurrency", "num_spec_tokens", "spec_topk"]
    keys.append("verify_tokens")
    grouped = spec.groupby(keys, sort=False)
    number, n = grouped.ngroup().to_numpy(), grouped.ngroups
    tau = group_pooled_accept_len(number, spec["accept_len"], spec["num_drafts"], n)[0]
    rate = group_pooled_rates(number, spec["rate"], spec["decoded"], n)[0]
    # One row per configuration, row i being group number i.
    table = spec[keys].assign(number=number).drop_duplicates("number").set_index("number")
    table = table.sort_index()
    # Each model and hardware's pooled step per batch size, and the context sums of its
    # baselines and of each method's runs, at once.
    at = ["model", "hardware", "concurrency"]
    by_batch = base.groupby(at, sort=True)
    ordinal = by_batch.ngroup().to_numpy()
    pooled = group_pooled_rates(ordinal, base["rate"], base["decoded"], by_batch.ngroups)[0]
    keys_of = base[at].assign(n=ordinal).drop_duplicates("n").sort_values("n")
    steps_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for model, hardware, c, r in zip(*(keys_of[x] for x in at), pooled, strict=True):
        steps_of.setdefault((model, hardware), []).append(
            {"batch": int(c), "step": 1000.0 / float(r)}
        )
    context = pd.to_numeric(df["context_tokens"], errors="coerce").where(known)
    sums = context.groupby([df["model"], df["hardware"], df["spec_method"].where(k > 0, "")])
    sums = sums.agg(["sum", "count"])
    context_of = dict(zip(sums.index, zip(sums["sum"], sums["count"], strict=True), strict=True))
    out = []
    for (model, hardware, method), rows in table.groupby(
        ["model", "hardware", "spec_method"], sort=False
    ):
        steps = steps_of.get((model, hardware), [])
        if len(steps) < 2:
            continue  # one batch size: the per-k fit above says all the runs can
        configs = [
            {
                "batch": int(c),
                "steps": int(st),
                "topk": int(t),
                "verify_tokens": int(v),
                "accept_len": float(tau[i]),
                "cycle": 1000.0 * float(tau[i]) / float(rate[i]),
            }
            for i, c, st, t, v in zip(
                rows.index,
                rows["concurrency"],
                rows["num_spec_tokens"],
                rows["spec_topk"],
                rows["verify_tokens"],
                strict=True,
            )
        ]
        mine = [context_of.get((model, hardware, x), (0.0, 0)) for x in ("", method)]
        total, count = sum(x[0] for x in mine), sum(x[1] for x in mine)
        mean = total / count if count else math.nan  # the baselines' and the method's runs'
        roof = roof_for(model, hardware, mean) if roof_for is not None else None
        routing = moe.get(model) if isinstance(moe, dict) else moe
        out.append(fit_surface((model, hardware, method), steps, configs, routing, mean, roof))
    return tuple(out)


def trees(df: Any) -> tuple[Any, ...]:
    """Tree acceptance per model, hardware and method that ran a tree (spec_topk > 1), fitted
    to the mean accept_len of each configuration over every batch size
    (:func:`breakeven.fitting.tree.fit_tree_acceptance`)."""

    k = df["num_spec_tokens"]
    spec = df[(k > 0) & (k == k.round()) & (df["accept_len"] >= 1)].copy()
    spec["spec_topk"] = spec["spec_topk"].fillna(1.0)
    spec["verify_tokens"] = spec["verify_tokens"].fillna(spec["num_spec_tokens"] + 1)
    out = []
    for (model, hardware, method), runs in spec.groupby(
        ["model", "hardware", "spec_method"], sort=False
    ):
        if not (runs["spec_topk"] > 1).any():
            continue
        configs, odd = [], 0
        for (s, t, n), g in runs.groupby(["num_spec_tokens", "spec_topk", "verify_tokens"]):
            tau = float(g["accept_len"].mean())
            try:
                check_tree(s, t, n)
            except BreakevenError:
                odd += len(g)
                continue
            if tau > s + 1:
                odd += len(g)
                continue
            configs.append((int(s), int(t), int(n), tau, len(g)))
        if not configs:
            continue
        tree = fit_tree_acceptance(configs, model=model, hardware=hardware, spec_method=method)
        if odd:
            tree = replace(
                tree,
                notes=(
                    f"{odd} rows are left out: a tree the engine cannot run "
                    "(verify tokens beyond the nodes drafted), or an "
                    "accept_len above steps + 1",
                ),
            )
        out.append(tree)
    return tuple(out)


__all__: Sequence[str] = ("one_context", "surfaces", "trees")
