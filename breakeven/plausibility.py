"""Runs no engine could have produced, flagged with their lines: ``fit``'s notes that start
"implausible".  Each names what it saw, the rows' lines in the file where the rows have them,
and the likelier cause; none changes the fit."""

from __future__ import annotations

import itertools
import math
from typing import Any

from breakeven import formatting
from breakeven.quantities import DEFAULT_TOLERANCE


def falling_cycles(entries: list[dict[str, Any]]) -> list[str]:
    """A note per k whose implied cycle is shorter than a smaller k's by more than
    :data:`~breakeven.quantities.DEFAULT_TOLERANCE`: verifying and drafting more tokens
    cannot take less time, so one of the two was measured wrong (acceptance pooled over
    runs of several k, a baseline from another launch, a rate that is not per sequence)."""
    out = []
    measured = [e for e in entries if math.isfinite(e["implied"])]  # in k order
    for before, after in itertools.pairwise(measured):
        if after["implied"] < before["implied"] * (1 - DEFAULT_TOLERANCE):
            where = _where(before, after)
            out.append(
                f"implausible: the cycle falls as k grows, k = {after['k']}'s implied cycle "
                f"{after['implied']:.3f} ms against k = {before['k']}'s {before['implied']:.3f} "
                f"ms{where}; verifying and drafting more tokens cannot take less time (an "
                "accept_len pooled over runs of several k, or a rate not per sequence)"
            )
    return out


def _where(*entries: dict[str, Any]) -> str:
    """`` (line N)`` or `` (lines N and M)`` of the entries' first rows, where known."""
    lines = [int(e["line"]) for e in entries if math.isfinite(e["line"])]
    if len(lines) != len(entries):
        return ""
    return f" (line {lines[0]})" if len(lines) == 1 else f" (lines {lines[0]} and {lines[1]})"


def impossible_acceptance(entries: list[dict[str, Any]]) -> list[str]:
    """A note per k whose accept_len is above k + 1 (a cycle emits at most its k drafted
    tokens and the bonus), and per pair of measured k whose accept_len rises by more than the
    draft tokens added (each added token adds at most one), beyond
    :data:`~breakeven.quantities.DEFAULT_TOLERANCE`."""
    out = []
    known = [e for e in entries if e["accept_len"] >= 1]
    for e in known:
        if e["accept_len"] > (e["k"] + 1) * (1 + DEFAULT_TOLERANCE):
            out.append(
                f"implausible: accept_len {e['accept_len']:.3f} at k = {e['k']} is above "
                f"k + 1 = {e['k'] + 1}{_where(e)}; a cycle emits at most its k drafted tokens "
                "and the bonus (accepted tokens counted with the bonus twice, or a k that is "
                "not the run's)"
            )
    for before, after in itertools.pairwise(known):
        rise, added = after["accept_len"] - before["accept_len"], after["k"] - before["k"]
        if rise > added * (1 + DEFAULT_TOLERANCE) and after["accept_len"] <= after["k"] + 1:
            out.append(
                f"implausible: accept_len rises by {rise:.3f} from k = {before['k']} to "
                f"k = {after['k']}{_where(before, after)}, more than the {added} draft "
                "tokens added (runs of another prompt set or launch)"
            )
    return out


def pooled_over_k(df: Any) -> list[str]:
    """A note per launch (``launch_id``) whose speculative rows are at several k: a server
    start runs one k, so its accept_len and rate may be pooled over several (a dynamic-k
    engine, or a log of several launches under one id)."""
    spec = df[(df["num_spec_tokens"] > 0) & df["launch_id"].notna()]
    out = []
    for launch, rows in spec.groupby("launch_id", sort=False):
        ks = sorted({int(k) for k in rows["num_spec_tokens"] if k == round(k)})
        if len(ks) > 1:
            lines = rows["line"].dropna()
            at = f" (lines {int(lines.min())} to {int(lines.max())})" if len(lines) else ""
            shown = formatting.printable(str(launch))
            out.append(
                f"implausible: launch {shown} has runs at k = {', '.join(map(str, ks))}{at}; "
                "a server start runs one k, so its acceptance may be pooled over several "
                "(a dynamic-k engine, or several launches under one id)"
            )
    return out


def slow_batch_growth(per_k: Any, steps: dict[tuple[Any, ...], float]) -> list[str]:
    """A note per method and k whose implied cycle grows from one batch size to the next by
    less than the plain step does, beyond :data:`~breakeven.quantities.DEFAULT_TOLERANCE`:
    a verify of B x (k + 1) tokens and B drafts cannot grow slower than a decode of B."""
    out = []
    keys = ["model", "hardware", "spec_method", "context", "k"]
    known = per_k[(per_k["concurrency"] > 0) & (per_k["implied"] > 0)]
    if known.empty:
        return out
    # Only a method and k at two batch sizes or more can grow slower than the step.
    known = known[known.groupby(keys, sort=False)["concurrency"].transform("nunique") > 1]
    for (model, hardware, method, context, k), rows in known.groupby(keys, sort=False):
        at = []
        for e in rows.sort_values("concurrency").itertuples():
            step = steps.get((model, hardware, e.concurrency, context), math.nan)
            if step > 0:
                at.append((e.concurrency, e.implied, step, e.line))
        for (b1, c1, s1, l1), (b2, c2, s2, l2) in itertools.pairwise(at):
            if c2 / c1 < (s2 / s1) * (1 - DEFAULT_TOLERANCE):
                lines = f" (lines {int(l1)} and {int(l2)})" if l1 == l1 and l2 == l2 else ""
                out.append(
                    f"implausible: {formatting.printable(method) or 'runs'} at k = {int(k)}: the cycle "
                    f"grows {c2 / c1:.2f}x from batch {b1:g} to {b2:g}, the plain step "
                    f"{s2 / s1:.2f}x{lines}; a dense model's verify of B x (k + 1) tokens "
                    "cannot grow slower than its decode of B (a baseline from another launch "
                    "or load); a Mixture of Experts' can: give --experts and --top-k"
                )
    return out


__all__ = ("falling_cycles", "impossible_acceptance", "pooled_over_k", "slow_batch_growth")
