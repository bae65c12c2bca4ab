"""A fit file (``breakeven fit --out``) as the other commands read it: a group's cycle as
``predict``'s and ``optimize``'s cost inputs, its interval and context growth, the cycle it
predicts for rows (``plot check --fit-file``), and its surfaces, tree acceptances and alpha.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.quantities import CYCLE_COEFFICIENT_UNITS as COEFFICIENTS
from breakeven.core.quantities import DEFAULT_TOLERANCE, plain_json
from breakeven.fitting.tree import TreeAcceptance
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
from breakeven.measurements.intervals import agrees
from breakeven.model.context import CONTEXT_RATE, context_doublings
from breakeven.model.cycle import INTERVAL_FLOOR, FittedCycle, cycle_at, half_width
from breakeven.model.surface import BatchSurface
from breakeven.render.text import k_ranges


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
    (:class:`breakeven.model.context.ContextFit`): ``(a * shift, b * shift)``.  Raises where the
    group has no context, or the file no context fit for it."""
    here = group.get("context_tokens")
    fit = _context_fit(path, group, here)
    shift = (context - here) / 1000.0
    return fit["step_ms_per_ktok"] * shift, fit["cycle_ms_per_ktok_per_k"] * shift


def context_support(path: str, group: dict[str, Any]) -> tuple[float, float, float]:
    """What a fit file's context fit for ``group`` rests on: the lowest and highest context
    its runs measured [tokens], and its step at no context, ``step_0`` [ms] (NaN where the file
    does not say).  Raises as :func:`context_growth` does."""
    fit = _context_fit(path, group, group.get("context_tokens"))
    return (*_runs_range(fit), _finite(fit.get("step_0_ms")))


def context_widening(path: str, group: dict[str, Any], context: float | None) -> float:
    """What a prediction's half-width grows by at ``context`` [tokens] beyond the contexts a
    fit file's context fit for ``group`` measured [fraction]
    (:data:`breakeven.model.context.CONTEXT_RATE` per doubling); 0 without a context, or
    within them."""
    if context is None:
        return 0.0
    low, high, _ = context_support(path, group)
    return CONTEXT_RATE * context_doublings(float(context), (low, high))


def _runs_range(fit: dict[str, Any]) -> tuple[float, float]:
    """The lowest and highest context of a context fit's runs [tokens] (NaN, NaN for none)."""
    measured = [float(c) for c in fit.get("contexts") or () if isinstance(c, (int, float))]
    return (min(measured), max(measured)) if measured else (math.nan, math.nan)


def _finite(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def surface_at_context(path: str, surface: BatchSurface, context: float) -> BatchSurface:
    """A fit file's ``surface`` moved to ``context`` [tokens] of context
    (:meth:`breakeven.model.surface.BatchSurface.at_context`), by the file's context fit of its
    model, hardware and method at the lowest concurrency it has, its ``a`` and ``b`` taken
    per sequence (divided by that concurrency: a forward reads each sequence's cache).
    Raises where the surface's runs gave no context, or the file has no context fit for it."""
    fit = _context_fit(path, _identity(surface), surface.context_tokens)
    load = max(float(fit["concurrency"]), 1.0)
    a, b = fit["step_ms_per_ktok"] / load, fit["cycle_ms_per_ktok_per_k"] / load
    return surface.at_context(context, a, b, runs=_runs_range(fit))


def fit_interval(group: dict[str, Any], k: int) -> float:
    """The relative half-width of a prediction at ``k`` from a fit file's group [fraction]
    (:func:`breakeven.model.cycle.half_width` of its ``interval_width`` and ``measured_k``); NaN
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
    listed = data.get("groups") if isinstance(data, dict) else None
    listed = listed if isinstance(listed, list) else []  # another shape: read_fit says so
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
(:func:`breakeven.measurements.intervals.agrees`: the run's interval overlaps the prediction's); they do
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


# Planning within the evidence (issue 38): what a fit's runs measured, and how far a plan
# from it may go beyond them.

EVIDENCE_FLOOR = INTERVAL_FLOOR
"""The least held-out error :func:`within_evidence` counts [fraction]: a few runs left out
one at a time that the fit predicts within 0.5% do not show that it is better than launches of
one configuration agree (1-2%), as the fit's own intervals hold
(:data:`breakeven.model.cycle.INTERVAL_FLOOR`)."""


@dataclass(frozen=True)
class Evidence:
    """What a fit file's runs measured, and how well the fit predicted the runs it was not
    given: what a plan from it (``schedule``, ``optimize``, ``batch`` with ``--fit-file``) is
    checked against (:func:`within_evidence`)."""

    source: str
    """The fit file and its entry, in words."""
    ks: tuple[int, ...]
    """The k (draft steps) of its speculative runs [tokens]; empty: the file does not say."""
    held_out_error: float
    """Its largest held-out error, ``|held-out / measured - 1|`` of a speedup with that run
    left out of the fit [fraction]; NaN: no run was held out, or the file does not say."""
    spec_batches: tuple[int, ...] | None = None
    """The batch sizes of its speculative runs [sequences]; empty: the file does not say;
    None: the plan is priced at the fit's own load (a group's cycle), not across batches."""
    baseline_batches: tuple[int, ...] | None = None
    """The batch sizes of its baselines [sequences] (empty, None: as ``spec_batches``)."""
    contexts: tuple[float, ...] | None = None
    """The context lengths of the context fit the plan is moved along [tokens] (None: the
    plan is at the runs' own context; empty: the file does not say)."""

    def to_dict(self) -> dict[str, Any]:
        """The evidence as strict JSON (NaN is None)."""
        return plain_json(asdict(self))


def _ints(values: Any) -> tuple[int, ...]:
    """The whole numbers > 0 of a fit file's list, sorted (empty: not a list of them)."""
    if not isinstance(values, (list, tuple)):
        return ()
    kept = {
        int(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }
    return tuple(sorted(v for v in kept if v > 0))


def _held_out(value: Any) -> float:
    """A fit file's held-out error [fraction], NaN where it is none (null, missing, < 0)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf
    return float(value) if ok else math.nan


def _contexts(path: str, identity: dict[str, Any], here: Any, context: float | None) -> Any:
    """The context lengths [tokens] of the context fit a plan at ``context`` is moved along
    (None: no ``context`` asked)."""
    if context is None:
        return None
    fit = _context_fit(path, identity, here)
    return tuple(sorted(float(c) for c in fit.get("contexts") or () if isinstance(c, (int, float))))


def surface_evidence(
    path: str, index: int | None = None, like: Any = None, context: float | None = None
) -> Evidence:
    """The evidence of a fit file's forward surface (picked as :func:`load_surface` picks it),
    for ``batch`` and ``schedule``: the k and batch sizes of its runs, its held-out error, and,
    priced at ``context`` [tokens], the contexts of its context fit."""
    identity = {key: getattr(like, key, "") for key in IDENTITY} if like is not None else None
    x = read_surface(path, index, identity, "fit_surface" if like is None else "fit_group")
    return Evidence(
        source=f"{path} (surface {group_name(x)})",
        ks=_ints(x.get("measured_k")),
        held_out_error=_held_out(x.get("held_out_max_rel_error")),
        spec_batches=_ints(x.get("spec_batches")),
        baseline_batches=_ints(x.get("batches")),
        contexts=_contexts(path, x, x.get("context_tokens"), context),
    )


def group_evidence(path: str, group: int | None = None, context: float | None = None) -> Evidence:
    """The evidence of a fit file's group (picked as :func:`load_fit` picks it), for
    ``optimize``: the k of its runs and its held-out error; its cycle is priced at its own
    load, so batch does not move it."""
    g = load_fit(path, group)
    return Evidence(
        source=f"{path} (group {group_name(g)})",
        ks=_ints(g.get("measured_k")),
        held_out_error=_held_out(g.get("held_out_max_rel_error")),
        contexts=_contexts(path, g, g.get("context_tokens"), context),
    )


def _beyond(value: float, measured: Sequence[float]) -> float:
    """How far ``value`` lies outside the span of ``measured``, as a ratio [x]: 1 within it,
    ``value / largest`` above, ``smallest / value`` below."""
    return max(value / max(measured), min(measured) / value, 1.0)


def _span(values: Sequence[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return (f"{low:g}" if low == high else f"{low:g}-{high:g}") + unit


def _measured(evidence: Evidence, context: float | None) -> str:
    """What the runs measured, in words: ``k 2-4, batch 1-2``."""
    parts = [f"k {_span(evidence.ks)}"]
    spec, base = evidence.spec_batches, evidence.baseline_batches
    if spec:
        parts.append(f"batch {_span(spec)}")
        if base and (min(base), max(base)) != (min(spec), max(spec)):
            parts[-1] += f" (baselines {_span(base)})"
    if context is not None and evidence.contexts:
        parts.append(f"context {_span(evidence.contexts, ' tokens')}")
    return ", ".join(parts)


def within_evidence(
    evidence: Evidence,
    plan: Iterable[tuple[int, int | None, float]],
    context: float | None = None,
) -> list[str]:
    """Why a plan from a fit goes beyond what the fit's runs support, one sentence per k;
    empty where it does not (then it may be pasted).

    ``plan`` is each claim the plan makes, ``(k, batch, speedup)``: speculating with ``k``
    draft tokens at ``batch`` sequences (None: at the fit's own load) gives ``speedup`` [x];
    ``context`` [tokens] is where the plan is priced (None: the runs' own context).  Only
    claims that speculation pays (k > 0, speedup > 1) are checked: plain decoding claims no
    gain.

    The rule.  Let ``e`` be the fit's held-out error (``Evidence.held_out_error``: the largest
    relative error of a speedup predicted by the fit without that run), counted as at least
    :data:`EVIDENCE_FLOOR` (2%).  A claim at distance ``f`` from the runs, the product of how
    far its k, its batch and its context lie beyond the span measured, each as a ratio (``16 /
    4 = 4`` for k = 16 when k 2-4 ran; 1 within the span; the batch against both the
    speculative runs' and the baselines' batches), is supported where::

        speedup * (1 - e * f) > 1

    that is, where the prediction less its error, grown in proportion to the distance beyond
    the runs, still beats plain decoding: ``e * f`` below ``1 - 1 / speedup``, the share of
    the speedup that is its gain.  Within the runs (f = 1) this is the held-out error against
    the gain: a fit whose runs disagree by more than the gain it claims supports nothing.
    The error grows with the ratio because a fit's error is known only where runs left out
    checked it, and a straight line's error grows with the lever arm beyond its points; a
    ratio is gentler than the lever arm over the span (batch 256 from runs at 1-2: 128, not
    254) and stricter than the doublings the intervals widen by.

    A fit with no held-out error, or a file that does not record the k (or batch sizes, or
    contexts) its runs measured, supports no claim: nothing says how far off it is."""
    claims = [(int(k), b, float(s)) for k, b, s in plan if k > 0 and s > 1]
    if not claims:
        return []
    e = evidence.held_out_error
    if not e >= 0:
        return [
            f"{evidence.source} has no held-out error (no run could be left out of its fit, "
            "or the file predates it): nothing measured how far its predictions are off, so "
            "no speedup from it is supported; fit runs at 3 or more k (and 2 or more batch "
            "sizes) with breakeven fit --out"
        ]
    across = any(b is not None for _, b, _ in claims) and evidence.spec_batches is not None
    unknown = [
        what
        for what, missing in (
            ("k", not evidence.ks),
            ("batch sizes", across and not (evidence.spec_batches and evidence.baseline_batches)),
            ("context lengths", context is not None and not evidence.contexts),
        )
        if missing
    ]
    if unknown:
        return [
            f"{evidence.source} does not record the {' or '.join(unknown)} its runs measured "
            "(a file older than breakeven's evidence check): no claim from it can be checked "
            "against them; fit the runs again (breakeven fit --out)"
        ]
    used = max(e, EVIDENCE_FLOOR)
    failing: dict[int, list[tuple[float, int | None, float, float, float, float]]] = {}
    for k, b, s in claims:
        in_k = _beyond(k, evidence.ks)
        in_b = 1.0
        if b is not None and across:
            in_b = max(_beyond(b, evidence.spec_batches), _beyond(b, evidence.baseline_batches))
        in_c = _beyond(context, evidence.contexts) if context is not None else 1.0
        margin = 1 - 1 / s
        if used * in_k * in_b * in_c >= margin:
            failing.setdefault(k, []).append(
                (used * in_k * in_b * in_c / margin, b, s, in_k, in_b, in_c)
            )
    return [_reason(evidence, k, rows, e, used, context) for k, rows in failing.items()]


def _reason(
    evidence: Evidence,
    k: int,
    rows: list[tuple[float, int | None, float, float, float, float]],
    e: float,
    used: float,
    context: float | None,
) -> str:
    """One k's failing claims in a sentence: where, the worst claim, what was measured, the
    held-out error against the gain."""
    _, b, s, in_k, in_b, in_c = max(rows, key=lambda r: r[0])
    batches = sorted({r[1] for r in rows if r[1] is not None})
    where = f"k = {k}" + (f" at batch {k_ranges(batches)}" if batches else "")
    claim = f"{s:.3f}x" + (f" at batch {b}" if len(batches) > 1 else "")
    error = f"{e:.1%}" + (f" (counted as {used:.0%})" if used > e else "")
    margin = 1 - 1 / s
    f = in_k * in_b * in_c
    if f > 1:
        ways = [
            f"{x:.3g}x in {what}"
            for x, what in ((in_k, "k"), (in_b, "batch"), (in_c, "context"))
            if x > 1
        ]
        grown = used * f
        return (
            f"{where}: claims {claim}, {f:.3g}x beyond what the runs measured "
            f"({_measured(evidence, context)}: {', '.join(ways)}); the held-out error, {error}, "
            f"grown with that distance to {grown:.{1 if grown < 10 else 0}%}, is not below the "
            f"{margin:.1%} the speedup can lose and still beat plain decoding: measure there, "
            "or plan within the runs"
        )
    return (
        f"{where}: claims {claim} within what the runs measured "
        f"({_measured(evidence, context)}), but the held-out error, {error}, is not below the "
        f"{margin:.1%} the speedup can lose and still beat plain decoding: the runs disagree "
        "by more than the gain (rerun with more launches, on a quiet host)"
    )


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
    "EVIDENCE_FLOOR",
    "FIT_VERDICTS",
    "Evidence",
    "against_fit",
    "context_growth",
    "context_support",
    "context_widening",
    "fit_interval",
    "fitted_costs",
    "fitted_cycle",
    "group_evidence",
    "load_fit",
    "load_fitted_alpha",
    "load_surface",
    "load_tree",
    "surface_at_context",
    "surface_evidence",
    "within_evidence",
)
