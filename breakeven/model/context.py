"""How the plain step and the speculative cycle grow with the context, fitted across runs at
two or more context lengths (issue 27, item 4).

Every forward reads the KV cache of each sequence: a step of a sequence with ``C`` tokens in
its cache costs more than one with few, and so does a cycle.  A verify of ``k + 1`` tokens
attends over the cache ``k + 1`` times, and a drafter may read it too, so a cycle can grow with
the context faster than the step: speculation's gain falls with the context.  Where the
drafter's and the verify's fixed costs dominate, the gain can also rise.  With the context
``C`` [tokens]::

    step(C)     = step_0 + a * C
    cycle(k, C) = cycle_k + (a + b * k) * C

``a`` [ms per token] is what a forward's reading of one more cached token costs, the same in a
step and a verify; ``b`` [ms per token per draft token] is what each draft token adds to that.
``step_0`` and each k's ``cycle_k`` are fitted with them, by least squares on relative
residuals over every baseline's step and every run's implied cycle.  Each context length is
held out in turn (three or more lengths): its speedups predicted from the others.  Pure math,
no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

CONTEXT_RATE = 0.04
"""What a predicted speedup's half-width grows per doubling of context beyond the longest (or
below the shortest) context the context fit's runs measured [fraction]: calibrated on the
published context sweeps (``benchmarks/batch_heldout.py``: each fitted on its two shortest
lengths, 92% of the longer ones' measured speedups inside +- 2% plus this per doubling)."""


def context_doublings(context_tokens: float, runs: tuple[float, float] | None) -> float:
    """Doublings of ``context_tokens`` [tokens] beyond the ``runs``' lowest and highest
    context [tokens]: 0 within them, or where they are unknown."""
    if runs is None or not all(math.isfinite(x) and x > 0 for x in runs) or not context_tokens > 0:
        return 0.0
    low, high = runs
    return max(math.log2(context_tokens / high), math.log2(low / context_tokens), 0.0)


@dataclass(frozen=True)
class ContextPoint:
    """One k at one context length, measured and predicted."""

    context_tokens: float
    """[tokens]"""
    k: int
    """[tokens]"""
    accept_len: float
    """[tokens/cycle]"""
    measured_speedup: float
    """[x]"""
    predicted_speedup: float
    """accept_len x step(C) / cycle(k, C), the fit on every context [x]."""
    held_out_speedup: float
    """The same from the fit without this context length [x] (NaN: fewer than three)."""


@dataclass(frozen=True)
class ContextFit:
    """The step's and the cycle's growth with the context of one model, hardware,
    concurrency and drafting method."""

    model: str
    hardware: str
    concurrency: float
    spec_method: str
    contexts: tuple[float, ...]
    """The context lengths of the runs [tokens]."""
    step_0_ms: float
    """The step at no context [ms]."""
    step_ms_per_ktok: float
    """a: what 1000 more cached tokens add to a step, and to a cycle's verify [ms]."""
    cycle_ms_per_ktok_per_k: float
    """b: what 1000 more cached tokens add to a cycle per draft token, beyond a [ms]."""
    cycles_0_ms: tuple[tuple[int, float], ...]
    """Each k's cycle at no context, ``(k, cycle_k [ms])``."""
    points: tuple[ContextPoint, ...]
    held_out_max_rel_error: float
    """Largest |held_out / measured - 1| over the points [fraction] (NaN: none held out)."""

    def speedup(self, k: int, accept_len: float, context_tokens: float) -> float:
        """The predicted speedup of ``k`` at ``accept_len`` [tokens/cycle] and
        ``context_tokens`` [tokens] (NaN for a k no run measured)."""
        cycle_k = dict(self.cycles_0_ms).get(k, math.nan)
        a, b = self.step_ms_per_ktok / 1000.0, self.cycle_ms_per_ktok_per_k / 1000.0
        step = self.step_0_ms + a * context_tokens
        cycle = cycle_k + (a + b * k) * context_tokens
        return accept_len * step / cycle if cycle > 0 else math.nan


def _solve(
    steps: Sequence[tuple[float, float]], cycles: Sequence[tuple[int, float, float]]
) -> tuple[float, float, float, dict[int, float]] | None:
    """step_0, a, b and each k's cycle_k from ``steps`` (context, step [ms]) and ``cycles``
    (k, context, implied cycle [ms]), relative least squares; None where the runs do not
    determine them (a single context length, or no step)."""
    ks = sorted({k for k, _, _ in cycles})
    if len({c for c, _ in steps} | {c for _, c, _ in cycles}) < 2 or not steps:
        return None
    column = {k: 3 + i for i, k in enumerate(ks)}
    rows, targets = [], []
    for c, step in steps:
        rows.append([1.0, c, 0.0] + [0.0] * len(ks))
        targets.append(step)
    for k, c, cycle in cycles:
        row = [0.0, c, k * c] + [0.0] * len(ks)
        row[column[k]] = 1.0
        rows.append(row)
        targets.append(cycle)
    a = np.array(rows) / np.array(targets)[:, None]
    solution, _, rank, _ = np.linalg.lstsq(a, np.ones(len(targets)), rcond=None)
    if rank < a.shape[1]:
        return None
    return (
        float(solution[0]),
        float(solution[1]),
        float(solution[2]),
        {k: float(solution[column[k]]) for k in ks},
    )


def fit_contexts(
    key: tuple[str, str, float, str],
    steps: Sequence[tuple[float, float]],
    runs: Sequence[tuple[int, float, float, float]],
) -> ContextFit | None:
    """The context fit of one model, hardware, concurrency and method from its baselines'
    ``steps`` (context [tokens], step [ms]) and its ``runs`` (k, context [tokens],
    accept_len [tokens/cycle], implied cycle [ms]); None with fewer than two context
    lengths, or where they do not determine the growth."""
    cycles = [(k, c, cycle) for k, c, _, cycle in runs]
    whole = _solve(steps, cycles)
    if whole is None:
        return None
    contexts = sorted({c for c, _ in steps} | {c for _, c, _, _ in runs})
    step_at = dict(steps)

    def speedup(fitted: Any, k: int, tau: float, c: float) -> float:
        if fitted is None or k not in fitted[3]:
            return math.nan
        s0, a, b, cycle_k = fitted
        cycle = cycle_k[k] + (a + b * k) * c
        return tau * (s0 + a * c) / cycle if cycle > 0 else math.nan

    points = []
    for c in contexts:
        held = None
        if len(contexts) >= 3:
            held = _solve([x for x in steps if x[0] != c], [x for x in cycles if x[1] != c])
        for k, rc, tau, cycle in runs:
            if rc != c or c not in step_at:
                continue
            points.append(
                ContextPoint(
                    c,
                    k,
                    tau,
                    step_at[c] / cycle * tau,
                    speedup(whole, k, tau, c),
                    speedup(held, k, tau, c),
                )
            )
    errors = [
        abs(p.held_out_speedup / p.measured_speedup - 1)
        for p in points
        if math.isfinite(p.held_out_speedup) and p.measured_speedup > 0
    ]
    s0, a, b, cycle_k = whole
    return ContextFit(
        key[0],
        key[1],
        key[2],
        key[3],
        tuple(contexts),
        s0,
        1000.0 * a,
        1000.0 * b,
        tuple(sorted(cycle_k.items())),
        tuple(points),
        max(errors) if errors else math.nan,
    )


def _same_config(g: Any) -> tuple[str, str, float, str]:
    return (g.model, g.hardware, g.concurrency, g.spec_method)


def contexts_of(groups: Sequence[Any]) -> tuple[ContextFit, ...]:
    """A context fit per model, hardware, concurrency and method whose groups (``fit``'s
    :class:`~breakeven.fitting.fit.GroupFit`, one per context length) ran at two or more context
    lengths (:func:`fit_contexts`)."""
    by_config: dict[tuple[str, str, float, str], list[Any]] = {}
    for g in groups:
        if g.context_tokens > 0 and g.step_ms > 0:
            by_config.setdefault(_same_config(g), []).append(g)
    out = []
    for key, same in by_config.items():
        if len(same) < 2:
            continue
        steps = [(g.context_tokens, g.step_ms) for g in same]
        runs = [
            (r.k, g.context_tokens, r.accept_len, r.implied_cycle_ms)
            for g in same
            for r in g.by_k
            if r.runs and r.implied_cycle_ms > 0
        ]
        fitted = fit_contexts(key, steps, runs)
        if fitted is not None:
            out.append(fitted)
    return tuple(out)


def context_notes(groups: Sequence[Any], contexts: Sequence[ContextFit]) -> list[Any]:
    """Each group at a context length no context fit covers, noted: its predictions hold at
    that context only."""
    covered = {(c.model, c.hardware, c.concurrency, c.spec_method) for c in contexts}
    out = []
    for g in groups:
        key = _same_config(g)
        if g.context_tokens > 0 and not any(
            key[:2] == c[:2] and key[3] == c[3] and _same_load(key[2], c[2]) for c in covered
        ):
            g = replace(
                g,
                notes=(
                    *g.notes,
                    f"runs at about {g.context_tokens:.0f} tokens of context: the predictions "
                    "hold at that context only; runs at two or more context lengths fit how "
                    "they change with it",
                ),
            )
        out.append(g)
    return out


def clamped_note(
    what: str,
    value: float,
    floor: float,
    floor_is: str,
    context: float,
    meaning: str = "",
    runs: tuple[float, float] | None = None,
) -> str:
    """The sentence that says a cost derived by the context growth came out impossible and
    was clamped: ``what`` (in words) ``value`` [ms] derived at ``context`` [tokens], clamped
    to ``floor`` [ms], which is ``floor_is``; ``meaning`` what the clamp does to the answer,
    and ``runs`` the lowest and highest context the fit's runs measured [tokens].  One
    wording for ``predict``/``optimize``'s fitted cycle and the forward surface of ``batch``
    and ``schedule``: a derived value is an extrapolation noted, not a flag refused."""
    measured = "" if runs is None else f" (runs at {runs[0]:.0f} to {runs[1]:.0f} tokens)"
    return (
        f"{what} derived at {context:.0f} tokens of context comes out {value:.3f} ms, "
        f"clamped to {floor:.3f} ms ({floor_is}): the context is beyond what the fit's runs "
        f"support{measured}, and the prediction there is an extrapolation"
        + (f"; {meaning}" if meaning else "")
    )


def _same_load(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


__all__: Sequence[str] = (
    "ContextFit",
    "ContextPoint",
    "clamped_note",
    "context_notes",
    "contexts_of",
    "fit_contexts",
)
