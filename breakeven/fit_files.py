"""A fit file (``breakeven fit --out``) as the other commands read it: a group's cycle as
``predict``'s and ``optimize``'s cost inputs, its interval and context growth, the cycle it
predicts for rows (``plot check --fit-file``), and its surfaces, tree acceptances and alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from breakeven.cycle import FittedCycle, cycle_at, half_width
from breakeven.errors import BreakevenError, escape_braces
from breakeven.intervals import agrees
from breakeven.iotools.fitfile import (
    IDENTITY,
    group_name,
    read_fit,
    read_fit_json,
    read_fitted_alpha,
    read_surface,
    read_tree,
    undetermined,
)
from breakeven.quantities import CYCLE_COEFFICIENT_UNITS as COEFFICIENTS
from breakeven.quantities import DEFAULT_TOLERANCE
from breakeven.surface import BatchSurface
from breakeven.tree import TreeAcceptance


def fitted_costs(
    group: dict[str, Any], form: str, k: int | None = None, batch: int = 1
) -> dict[str, Any]:
    """A fit group's cycle as the cost inputs of ``predict`` (``form='predict'``: verify,
    draft and overhead at ``k``) or ``optimize`` (``form='optimize'``: a verify that does not
    grow with k, drafting per draft token and per cycle, overhead; for a curved fit the whole
    cycle as a :class:`FittedCycle` verify curve at ``batch``).  Either gives the fitted cycle
    at every k: the verify's per-token cost is counted with drafting's for optimize, and a
    curve's k**2 term with the verify for predict."""
    c = {name: float(group["coefficients"].get(name, 0.0)) for name in COEFFICIENTS}
    if form == "predict":
        if k is None:
            raise BreakevenError("{0} needs {1}: the fitted cycle depends on k", "fit_file", "k")
        linear = {**c, "curvature_ms": 0.0}
        return {
            "verify_ms": c["verify_base_ms"]
            + c["verify_per_token_ms"] * k
            + float(cycle_at(c, k) - cycle_at(linear, k)),
            "draft_ms": c["draft_per_token_ms"] * k + c["draft_per_cycle_ms"],
            "overhead_ms": c["overhead_ms"],
        }
    if c["curvature_ms"]:
        return {"verify_curve": FittedCycle(c, batch)}
    return {
        "verify_ms": c["verify_base_ms"],
        "draft_step_ms": c["verify_per_token_ms"] + c["draft_per_token_ms"],
        "draft_ms": c["draft_per_cycle_ms"],
        "overhead_ms": c["overhead_ms"],
    }


def _context_fit(path: str, identity: dict[str, Any], here: Any) -> dict[str, Any]:
    """The context fit of a fit file for ``identity`` (model, hardware, method; and
    concurrency where it gives one, else the lowest concurrency's) whose runs sat at ``here``
    [tokens] of context.  Raises where ``here`` is none, or the file has no such fit."""
    name = escape_braces(repr(str(path)))
    if not isinstance(here, (int, float)) or not here > 0:
        raise BreakevenError(
            "{0} needs a fit whose runs give context_tokens: " + name + "'s runs have none",
            "context",
        )
    data = read_fit_json(path)
    found = [
        c
        for c in ((data.get("contexts") or []) if isinstance(data, dict) else [])
        if isinstance(c, dict)
        and all(str(c.get(key, "")) == str(identity.get(key, "")) for key in IDENTITY)
        and all(
            isinstance(c.get(x), (int, float)) and math.isfinite(c[x])
            for x in ("step_ms_per_ktok", "cycle_ms_per_ktok_per_k", "concurrency")
        )
    ]
    load = identity.get("concurrency")
    same = [c for c in found if c["concurrency"] == load]
    if same or found:
        return (same or sorted(found, key=lambda c: c["concurrency"]))[0]
    raise BreakevenError(
        "{0}: "
        + name
        + " fits these runs at about "
        + f"{here:.0f}"
        + " tokens of context only; expected a fit of runs at two or more context lengths",
        "context",
    )


def context_growth(path: str, group: dict[str, Any], context: float) -> tuple[float, float]:
    """What moving a fit file's ``group`` from its runs' context to ``context`` [tokens] adds
    to the step and, per draft token, to the cycle beyond that [ms], from the file's context
    fit of the same model, hardware, concurrency and method
    (:class:`breakeven.context.ContextFit`): ``(a * shift, b * shift)``.  Raises where the
    group has no context, or the file no context fit for it."""
    here = group.get("context_tokens")
    fit = _context_fit(path, group, here)
    shift = (context - here) / 1000.0
    return fit["step_ms_per_ktok"] * shift, fit["cycle_ms_per_ktok_per_k"] * shift


def surface_at_context(path: str, surface: BatchSurface, context: float) -> BatchSurface:
    """A fit file's ``surface`` moved to ``context`` [tokens] of context
    (:meth:`breakeven.surface.BatchSurface.at_context`), by the file's context fit of its
    model, hardware and method at the lowest concurrency it has, its ``a`` and ``b`` taken
    per sequence (divided by that concurrency: a forward reads each sequence's cache).
    Raises where the surface's runs gave no context, or the file has no context fit for it."""
    fit = _context_fit(path, _identity(surface), surface.context_tokens)
    load = max(float(fit["concurrency"]), 1.0)
    a, b = fit["step_ms_per_ktok"] / load, fit["cycle_ms_per_ktok_per_k"] / load
    return surface.at_context(context, a, b)


def fit_interval(group: dict[str, Any], k: int) -> float:
    """The relative half-width of a prediction at ``k`` from a fit file's group [fraction]
    (:func:`breakeven.cycle.half_width` of its ``interval_width`` and ``measured_k``); NaN
    where the group has none (no held-out error, or a fit file older than intervals)."""
    width = group.get("interval_width")
    measured = group.get("measured_k") or ()
    if not isinstance(width, (int, float)) or not all(isinstance(x, int) for x in measured):
        return math.nan
    return half_width(float(width), k, tuple(measured))


def _identity(like: Any) -> dict[str, Any]:
    """The model, hardware and method of ``like`` (a surface or a tree acceptance): what picks
    its entries of a fit file."""
    return {key: getattr(like, key, "") for key in IDENTITY}


def load_fit(path: str, group: int | None = None) -> dict[str, Any]:
    """One group of a fit file (:func:`breakeven.iotools.fitfile.read_fit`), its coefficients
    those of :data:`COEFFICIENTS`: the only one, or number ``group`` (from 1)."""
    return read_fit(path, group, names=COEFFICIENTS)


def _determined_groups(path: str) -> list[dict[str, Any]]:
    """A fit file's groups whose runs determined their coefficients, in the file's order."""
    data = read_fit_json(path)
    listed = (data.get("groups") or []) if isinstance(data, dict) else []
    determined = [i for i, g in enumerate(listed, 1) if not undetermined(g)]
    return [load_fit(path, i) for i in determined] if listed else [load_fit(path)]


def _group_of(rows: Any, groups: Sequence[dict[str, Any]]) -> Any:
    """The index in ``groups`` of each row's group (-1 for none): the first of the same model,
    hardware and method (a row that does not say one matches any), and concurrency where
    both say; a row without a k > 0 has none."""
    chosen = pd.Series(-1, index=rows.index, dtype=int)
    k = pd.to_numeric(rows.get("num_spec_tokens"), errors="coerce")
    load = pd.to_numeric(rows.get("concurrency"), errors="coerce")
    for i, g in enumerate(groups):
        match = (k > 0) & (chosen < 0)
        for key in IDENTITY:
            if g.get(key) and key in rows.columns:
                said = rows[key].astype(object).where(rows[key].notna(), "").astype(str)
                match &= (said == "") | (said == str(g[key]))
        concurrency = g.get("concurrency")
        if isinstance(concurrency, (int, float)) and not math.isnan(concurrency):
            match &= load.isna() | (load == concurrency)
        chosen[match] = i
    return chosen


def fitted_cycle(rows: Any, path: str) -> Any:
    """The cycle [ms] a fit file predicts for each row of ``rows`` at its k: from the group
    of the same model, hardware and method (and concurrency, where both say), NaN where no
    group matches or the row has no k.  What ``plot check --fit-file`` predicts from."""
    groups = _determined_groups(path)
    chosen = _group_of(rows, groups)
    k = pd.to_numeric(rows.get("num_spec_tokens"), errors="coerce")
    cycle = pd.Series(math.nan, index=rows.index, dtype=float)
    for i, g in enumerate(groups):
        match = chosen == i
        cycle[match] = cycle_at(g["coefficients"], k[match])
    return cycle


FIT_VERDICTS = ("holds", "off", "no fit")
"""How a measured run stands against a fit file's prediction at its k: they agree
(:func:`breakeven.intervals.agrees`: the run's interval overlaps the prediction's); they do
not; the file has no group for the run (model, hardware, method, concurrency), or the run
lacks what a prediction needs (k, accept_len, the baseline's rate)."""


def against_fit(
    runs: Sequence[dict[str, Any]], path: str, tolerance: float = DEFAULT_TOLERANCE
) -> list[dict[str, Any]]:
    """Each measured run (``check``'s comparisons, ``compare``'s runs, as their ``to_dict``
    gives them) against the speedup a fit file predicts for it, with its interval.

    The prediction is the run's own accept_len times the baseline's step, 1000 /
    ``baseline_tok_s`` [ms], over the cycle the run's group fits at its k
    (:func:`fitted_cycle`): the fit is tested on the cycle it models, at the acceptance and
    plain step the run measured.  Its interval is ``predicted x (1 +- h)``, ``h`` the
    group's half-width at k (:func:`fit_interval`; none from a fit file older than
    intervals, where ``tolerance`` stands in for it).  Each row has a verdict of
    :data:`FIT_VERDICTS`."""
    groups = _determined_groups(path)
    table = pd.DataFrame(list(runs), columns=[*IDENTITY, "num_spec_tokens", "concurrency"])
    chosen = _group_of(table, groups)
    rows = []
    for i, r in enumerate(runs):
        k, tau = r.get("num_spec_tokens"), r.get("accept_len")
        base, measured = r.get("baseline_tok_s"), r.get("measured_speedup")
        if measured is None:
            continue
        row = {
            "label": r.get("label"),
            "batch": r.get("concurrency"),
            "k": k,
            "group": None,
            "measured_speedup": measured,
            "ci_low": r.get("ci_low"),
            "ci_high": r.get("ci_high"),
            "predicted_speedup": None,
            "predicted_low": None,
            "predicted_high": None,
            "residual": None,
            "verdict": "no fit",
        }
        g = groups[chosen.iloc[i]] if chosen.iloc[i] >= 0 else None
        usable = all(isinstance(x, (int, float)) and x > 0 for x in (tau, base))
        if g is None or not usable:
            rows.append(row)
            continue
        k = round(float(k))
        predicted = float(tau) * 1000.0 / float(base) / float(cycle_at(g["coefficients"], k))
        h = fit_interval(g, k)
        low, high = (None, None) if math.isnan(h) else (predicted * (1 - h), predicted * (1 + h))
        row |= {
            "group": group_name(g),
            "predicted_speedup": predicted,
            "predicted_low": low,
            "predicted_high": high,
            "residual": measured - predicted,
        }
        ok = agrees(measured, row["ci_low"], row["ci_high"], predicted, low, high, tolerance)
        row["verdict"] = "holds" if ok else "off"
        rows.append(row)
    return rows


def load_surface(
    path: str, index: int | None = None, like: Any = None, flag: str = "fit_surface"
) -> BatchSurface:
    """One forward surface of a fit file: the only one, number ``index`` (from 1, picked with
    ``flag``), or the one of the same model, hardware and method as ``like`` (a tree
    acceptance)."""
    identity = _identity(like) if like is not None else None
    return BatchSurface.from_dict(read_surface(path, index, identity, flag))


def load_tree(path: str, index: int | None = None) -> TreeAcceptance:
    """One tree acceptance of a fit file: the only one, or number ``index`` (from 1; the
    ``--fit-group`` of ``optimize --tree``)."""
    return TreeAcceptance.from_dict(read_tree(path, index))


def load_fitted_alpha(path: str, like: Any) -> tuple[float, str]:
    """The per-token acceptance [probability] a fit file holds for the model, hardware and
    method of ``like`` (a surface), and where it comes from, in words."""
    return read_fitted_alpha(path, _identity(like))


__all__: Sequence[str] = (
    "FIT_VERDICTS",
    "against_fit",
    "context_growth",
    "fit_interval",
    "fitted_costs",
    "fitted_cycle",
    "load_fit",
    "load_fitted_alpha",
    "load_surface",
    "load_tree",
    "surface_at_context",
)
