"""``breakeven fit``: the cycle's costs calibrated from measured runs, and what they predict.

Users rarely know ``verify_ms`` and ``draft_ms``; they have runs.  Each speculative run
with an ``accept_len`` and a decode rate implies its cycle, ``1000 * accept_len / tok_s``
(:func:`breakeven.model.implied_cycle_ms`), and the cycle model says what it is made of::

    cycle(k) = verify(k) + draft(k) + overhead
    verify(k) = verify_base_ms + verify_per_token_ms * k
    draft(k)  = draft_per_token_ms * k        (a drafter that runs once per draft token)
              = draft_per_cycle_ms            (a single-pass drafter: --draft-cost per-cycle)

The coefficients are fitted by non-negative least squares (``scipy.optimize.nnls``) over
every run's implied cycle, and over measured ``verify_ms``, ``draft_ms`` and ``cycle_ms``
where rows have them (profiles).  That line is one of four forms of the cycle against k
(:mod:`breakeven.model.cycle`: Leviathan's, the line anchored at the plain step, the free line, a
curve); each group uses the one of least leave-one-out error, and its held-out errors size
every prediction's interval.  Runs no engine could produce are flagged
(:mod:`breakeven.measurements.plausibility`).  Terms the data cannot tell apart are merged, and the fit
says which: from implied cycles alone, the base of the verify and the overhead are one
constant, and the verify's and the draft's per-token costs are one slope.  With runs at one
k only, the fit is that k's cycle and cannot extrapolate in k.

Rows are grouped by model, hardware, concurrency and drafting method (two drafters have two
cost curves).  Each group needs a baseline (``num_spec_tokens = 0``) for its step; runs at
the same k are averaged.  Each k's ``held_out_speedup`` is the fit without that k's runs:
how well the fit predicts a k it has not seen.  Acceptance for a k not run comes from the
per-token acceptance alpha fitted to the runs' accept_len (i.i.d. positions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from breakeven import render
from breakeven.core.choices import CYCLE_FORMS, DRAFT_COSTS, FORM_CHOICES
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import (
    CYCLE_COEFFICIENT_UNITS,
    MAX_SPEC_TOKENS,
    plain_json,
)
from breakeven.fitting.roofs import roof_source, roofs_by_model
from breakeven.fitting.runs import _CONFIG, _GROUP, COLUMNS_USED, _entries, _per_k, _prepared
from breakeven.fitting.surfaces import surfaces as batch_surfaces
from breakeven.fitting.surfaces import trees as tree_acceptances
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.modelconfig import MODEL_CONFIG_COLUMN, model_configs_of
from breakeven.measurements.normalise import key_request_rate
from breakeven.measurements.plausibility import (
    falling_cycles,
    impossible_acceptance,
    pooled_over_k,
    slow_batch_growth,
)
from breakeven.measurements.workload import (
    CategoryFit,
    FitMix,
    as_dicts,
    fit_by_category,
    parse_mix,
)
from breakeven.model import _speedup as formula
from breakeven.model.acceptance import _tau
from breakeven.model.context import ContextFit, context_notes, contexts_of
from breakeven.model.cycle import (
    FormScore,
    choose_form,
    cycle_at,
    fit_form,
    half_width,
    indistinct_k,
    interval_width,
    predicted_cycle,
    score_form,
)
from breakeven.model.pooling import (
    pooled_rate,
)
from breakeven.model.surface import MoE

COEFFICIENTS = CYCLE_COEFFICIENT_UNITS
"""Each coefficient of the cycle model and its unit
(:data:`breakeven.core.quantities.CYCLE_COEFFICIENT_UNITS`)."""


@dataclass(frozen=True)
class KRow:
    """One k of a group: its runs (averaged), or a k to predict."""

    k: int
    """Draft tokens per cycle [tokens]."""
    accept_len: float
    """accept_len of the runs [tokens/cycle]: pooled from counts (``num_drafts``) where the rows
    give them, else their mean; predicted from alpha where ``accept_len_predicted``."""
    accept_len_predicted: bool
    """Whether accept_len is the fitted alpha's (no run at this k had one)."""
    runs: int
    """Rows with a rate averaged at this k (0: a configuration to predict)."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s of the runs [ms] (NaN without a rate)."""
    predicted_cycle_ms: float
    """The fitted cycle at this k [ms]."""
    measured_speedup: float
    """tok_s / baseline tok_s [x] (NaN without a rate)."""
    predicted_speedup: float
    """accept_len * step_ms / predicted_cycle_ms, from the fit on every k [x]."""
    held_out_speedup: float
    """The same from the fit without this k's runs [x] (NaN where it has no rate, or too few
    other k remain)."""
    predicted_low: float = math.nan
    """The low end of the predicted speedup's interval [x] (:func:`breakeven.model.cycle.half_width`; NaN: the
    fit has no held-out error to size it)."""
    predicted_high: float = math.nan
    """Its high end [x]."""
    regret: float = math.nan
    """The speedup given up by this k against the best k, ``1 - predicted / best`` [fraction]."""


@dataclass(frozen=True)
class GroupFit:
    """The fitted cycle of one model, hardware, concurrency and drafting method."""

    model: str
    hardware: str
    concurrency: float
    """[sequences] (NaN where the rows do not say, and for an open-loop level)."""
    spec_method: str
    step_ms: float
    """The baseline's decode step, 1000 / mean baseline tok_s (or its step_ms) [ms]."""
    coefficients: dict[str, float]
    """Each fitted coefficient [ms, see :data:`COEFFICIENTS`]; a merged one holds the sum."""
    merged: tuple[str, ...]
    """Terms the data could not tell apart, as ``a + b`` (their sum is in the first)."""
    residual_rms_ms: float
    """Root mean square of the fit's residuals over every equation [ms]."""
    by_k: tuple[KRow, ...]
    held_out_max_rel_error: float
    """Largest |held_out_speedup / measured_speedup - 1| [fraction] (NaN: none held out)."""
    best_k: int | None
    """The k of the highest predicted speedup among ``by_k`` (None: no speedup known)."""
    best_speedup: float
    """Its predicted speedup [x]."""
    alpha: float
    """Per-token acceptance fitted to the runs' accept_len (i.i.d.) [probability]."""
    notes: tuple[str, ...] = ()
    cycle_form: str = "linear"
    """The form of the cycle against k the coefficients are in (:data:`CYCLE_FORMS`)."""
    form_reason: str = ""
    """Why that form, in words."""
    forms: tuple[FormScore, ...] = ()
    """Each form's held-out error, simplest first."""
    close_k: tuple[int, ...] = ()
    """The other k whose predicted interval overlaps the best k's: the runs cannot tell
    them from it."""
    interval_width: float = math.nan
    """A prediction's relative half-width within the measured k [fraction]
    (:func:`breakeven.model.cycle.interval_width`; NaN: no held-out error to size it)."""
    measured_k: tuple[int, ...] = ()
    """The k with a measured cycle [tokens]: beyond them the interval widens."""
    context_tokens: float = math.nan
    """The runs' mean tokens in the KV cache [tokens] (NaN: the rows do not say): the fit
    holds at that context length."""
    request_rate: float = math.nan
    """An open-loop level's offered rate [req/s] (``bench --request-rate``); NaN for a
    closed-loop level, whose load is ``concurrency``."""

    def cycle_ms(self, k: Any) -> Any:
        """The fitted cycle at ``k`` draft tokens [ms]."""
        return cycle_at(self.coefficients, k)


@dataclass(frozen=True)
class FitResult:
    """A fit per group, and how drafting was assumed to grow with k."""

    groups: tuple[GroupFit, ...]
    draft_cost: str
    """'per-token' or 'per-cycle' (:data:`DRAFT_COSTS`)."""
    acceptance: str = "alpha (i.i.d.)"
    """How accept_len is predicted for a k not run."""
    source: str = ""
    notes: tuple[str, ...] = field(default=())
    surfaces: tuple[Any, ...] = ()
    """Across batch sizes, per model, hardware and method: the forward surface t(B, q) and
    the draft's cost (:class:`breakeven.model.surface.BatchSurface`), where the baselines ran at
    two or more batch sizes."""
    trees: tuple[Any, ...] = ()
    """Per model, hardware and method with a tree draft among its runs (spec_topk > 1): the
    tree acceptance fitted to every configuration's accept_len
    (:class:`breakeven.fitting.tree.TreeAcceptance`), for ``optimize --tree``."""
    contexts: tuple[ContextFit, ...] = ()
    """Per model, hardware, concurrency and method with runs at two or more context lengths:
    how the step and the cycle grow with the context (:class:`breakeven.model.context.ContextFit`)."""
    categories: tuple[CategoryFit, ...] = ()
    """Per group, workload category and measured k: the category's accept_len and the speedup
    the group's cycle gives it (:func:`breakeven.measurements.workload.fit_by_category`); none where no row
    has a category."""
    mix: tuple[FitMix, ...] = ()
    """With a mix: per group and k, the mix's speedup, and its best k."""

    def to_dict(self) -> dict[str, Any]:
        """Every group's fit, surface and tree acceptance as plain data (what ``breakeven fit
        --json`` prints and ``--fit-file`` reads); a number that is not finite is None."""
        return plain_json(
            {
                "draft_cost": self.draft_cost,
                "acceptance": self.acceptance,
                "source": self.source,
                "notes": list(self.notes),
                "groups": [asdict(g) for g in self.groups],
                "surfaces": [asdict(x) for x in self.surfaces],
                "trees": [asdict(x) for x in self.trees],
                "contexts": [asdict(x) for x in self.contexts],
            }
        ) | {
            key: as_dicts(rows)
            for key, rows in (("categories", self.categories), ("mix", self.mix))
            if rows
        }

    def to_frame(self) -> Any:
        """Every group's by-k rows as one pandas DataFrame."""

        rows = [
            {
                "model": g.model,
                "hardware": g.hardware,
                "concurrency": g.concurrency,
                "spec_method": g.spec_method,
                **asdict(r),
            }
            for g in self.groups
            for r in g.by_k
        ]
        return pd.DataFrame(rows)

    def report(self) -> str:
        """What ``breakeven fit`` prints: per group the fitted coefficients with their units,
        what was merged and the by-k table; then the surfaces and tree acceptances."""
        return render.fit_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (every group's by-k rows, each with its group), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.fit_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.fit_html(self.to_dict())


def _fit_alpha(ks: Sequence[int], taus: Sequence[float]) -> float:
    """The i.i.d. per-token acceptance that best gives the runs' accept_len (least squares)."""

    k = np.asarray(ks, dtype=float)
    tau = np.asarray(taus, dtype=float)
    if not len(k):
        return math.nan
    result = minimize_scalar(
        lambda x: float(np.sum((_tau(np, x, k) - tau) ** 2)),
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(result.x)


def _speedup(tau: float, step: float, cycle: float) -> float:

    if not (tau >= 1 and step > 0 and cycle > 0):
        return math.nan
    return float(formula(tau, step, cycle))


def fit_group(
    key: tuple[Any, ...],
    entries: list[dict[str, Any]],
    step: float,
    draft_cost: str,
    predict_k: Sequence[int] = (),
    form: str = "auto",
) -> GroupFit:
    """One group's fit from its per-k entries: each form's held-out error, the chosen form's
    coefficients, by-k rows with held-out predictions and intervals, best k."""
    model, hardware, concurrency, _, method = key
    notes = []
    measured_k = sorted({e["k"] for e in entries if math.isfinite(e["implied"])})
    scored = [score_form(entries, draft_cost, step, f) for f in CYCLE_FORMS]
    scores = [x for x, _ in scored]
    held_cycles = {x.form: cycles for x, cycles in scored}
    if form in ("leviathan", "anchored") and not step > 0:
        notes.append(f"the {form} form needs a baseline's step: the linear form is fitted")
        form = "linear"
    chosen, reason = choose_form(scores, form, step, len(measured_k))
    coefficients, merged, rms, only = fit_form(entries, draft_cost, None, chosen, step)
    notes += _form_notes(chosen, only, measured_k, step, entries)
    notes += falling_cycles(entries)
    notes += impossible_acceptance(entries)
    with_tau = [e for e in entries if e["accept_len"] >= 1]
    alpha = _fit_alpha([e["k"] for e in with_tau], [e["accept_len"] for e in with_tau])
    cycles = held_cycles.get(chosen, {})
    sizing = cycles
    if not sizing:  # a form no k checked: sized by the best form a held-out k did check
        checked = [x for x in scores if math.isfinite(x.held_out_rms)]
        sizing = held_cycles[min(checked, key=lambda x: x.held_out_rms).form] if checked else {}
    width = interval_width([entries[i]["implied"] / c - 1 for i, c in sizing.items()])
    rows = []
    for i, e in enumerate(entries):
        held_out = math.nan
        if math.isfinite(e["implied"]):
            if i not in cycles:
                others = fit_form(entries, draft_cost, i, chosen, step)
                cycles[i] = predicted_cycle(others[0], others[3], e["k"])
            held_out = _speedup(e["accept_len"], step, cycles[i])
        rows.append(_k_row(e, coefficients, only, step, held_out))
    known = {e["k"] for e in entries}
    for k in sorted(set(predict_k) - known):
        rows.append(_predicted_row(k, alpha, coefficients, only, step))
    rows = [_with_interval(r, half_width(width, r.k, measured_k)) for r in rows]
    rows.sort(key=lambda r: r.k)
    held = [
        abs(r.held_out_speedup / r.measured_speedup - 1)
        for r in rows
        if math.isfinite(r.held_out_speedup) and 0 < r.measured_speedup < math.inf
    ]
    rows, best, close = _ranked(rows)
    return GroupFit(
        model=model,
        hardware=hardware,
        concurrency=concurrency if concurrency >= 0 else math.nan,
        request_rate=key_request_rate(concurrency),
        spec_method=method,
        step_ms=step,
        coefficients=coefficients,
        merged=merged,
        residual_rms_ms=rms,
        by_k=tuple(rows),
        held_out_max_rel_error=max(held) if held else math.nan,
        best_k=best.k if best else None,
        best_speedup=best.predicted_speedup if best else math.nan,
        alpha=alpha,
        notes=tuple(notes),
        cycle_form=chosen,
        form_reason=reason,
        forms=tuple(scores),
        close_k=close,
        interval_width=width,
        measured_k=tuple(measured_k),
    )


def _form_notes(
    chosen: str, only: set[int] | None, measured_k: list[int], step: float, entries: Any
) -> list[str]:
    """What a group's fit says of its form and data: too few k for the form, one k only, no
    coefficients, no baseline, rates without an accept_len."""
    notes = []
    if chosen == "curved" and only is not None:
        notes.append(f"the curved form needs 3 k with a cycle, has {len(measured_k)}")
    if chosen == "linear" and only is not None:
        if only:
            shown = ", ".join(map(str, sorted(only)))
            notes.append(
                f"runs at one k only ({shown}), no baseline's step: the fit is that k's cycle "
                "and cannot extrapolate in k"
            )
        else:
            notes.append(
                "no run gives a cycle (an accept_len with a rate, or a cycle's time): the "
                "coefficients are undetermined"
            )
    elif chosen == "leviathan" and len(measured_k) == 1:
        notes.append(
            f"runs at one k only ({measured_k[0]}): other k are predicted by Leviathan's form "
            "through the plain step, which no held-out k checked"
        )
    if not step > 0:
        notes.append("no baseline of this model, hardware and concurrency: no speedups")
    unrated = [e["k"] for e in entries if e["runs"] and not math.isfinite(e["implied"])]
    if unrated:
        notes.append(
            f"runs at k = {', '.join(map(str, unrated))} have a rate but no "
            "accept_len: no implied cycle"
        )
    return notes


def _ranked(rows: list[KRow]) -> tuple[list[KRow], KRow | None, tuple[int, ...]]:
    """The rows with their regret against the best predicted k, the best row, and the k its
    interval cannot tell from it (:func:`breakeven.model.cycle.indistinct_k`)."""
    # A speedup that underflows to 0 (a rate of 1e-300 tok/s) ranks nothing.
    ranked = [r for r in rows if 0 < r.predicted_speedup < math.inf]
    best = max(ranked, key=lambda r: r.predicted_speedup) if ranked else None
    if best is None:
        return rows, None, ()
    rows = [replace(r, regret=1 - r.predicted_speedup / best.predicted_speedup) for r in rows]
    close = indistinct_k(best.k, best.predicted_low, {r.k: r.predicted_high for r in ranked})
    return rows, best, close


def _with_interval(row: KRow, half_width: float) -> KRow:
    """``row`` with its predicted speedup's interval, +- ``half_width`` of it."""
    p = row.predicted_speedup
    if not (math.isfinite(half_width) and 0 < p < math.inf):
        return row
    return replace(row, predicted_low=p * (1 - half_width), predicted_high=p * (1 + half_width))


def _k_row(
    e: dict[str, Any],
    coefficients: dict[str, float],
    only: set[int] | None,
    step: float,
    held_out: float,
) -> KRow:
    cycle = predicted_cycle(coefficients, only, e["k"])
    measured = e["rate"] * step / 1000.0 if e["rate"] > 0 and step > 0 else math.nan
    return KRow(
        k=e["k"],
        accept_len=e["accept_len"],
        accept_len_predicted=False,
        runs=e["runs"],
        implied_cycle_ms=e["implied"],
        predicted_cycle_ms=cycle,
        measured_speedup=measured,
        predicted_speedup=_speedup(e["accept_len"], step, cycle),
        held_out_speedup=held_out,
    )


def _predicted_row(
    k: int, alpha: float, coefficients: dict[str, float], only: set[int] | None, step: float
) -> KRow:

    tau = float(_tau(np, alpha, k)) if math.isfinite(alpha) else math.nan
    cycle = predicted_cycle(coefficients, only, k)
    return KRow(
        k=k,
        accept_len=tau,
        accept_len_predicted=True,
        runs=0,
        implied_cycle_ms=math.nan,
        predicted_cycle_ms=cycle,
        measured_speedup=math.nan,
        predicted_speedup=_speedup(tau, step, cycle),
        held_out_speedup=math.nan,
    )


def _check_options(draft_cost: str, cycle_form: str, predict_k: Sequence[int]) -> None:
    """Raise for a ``draft_cost`` or ``cycle_form`` not known, or a k to predict out of range."""
    if draft_cost not in DRAFT_COSTS:
        raise BreakevenError(
            "{0}: got " + repr(draft_cost) + f", expected one of {DRAFT_COSTS}", "draft_cost"
        )
    if cycle_form not in FORM_CHOICES:
        raise BreakevenError(
            "{0}: got " + repr(cycle_form) + f", expected one of {FORM_CHOICES}", "cycle_form"
        )
    bad = [k for k in predict_k if not (isinstance(k, int) and 1 <= k <= MAX_SPEC_TOKENS)]
    if bad:
        raise BreakevenError(
            "{0}: got " + repr(bad[0]) + f", expected whole numbers of draft "
            f"tokens from 1 to {MAX_SPEC_TOKENS}",
            "predict_k",
        )


def _baseline_steps(base: Any) -> dict[tuple[Any, ...], float]:
    """Each configuration's plain step [ms]: its baselines' mean ``step_ms``, else 1000 / rate."""
    steps = base[base["step_ms"] > 0].groupby(_CONFIG)["step_ms"].mean().to_dict()
    rates = {
        key: pooled_rate(g["rate"], g["decoded"])
        for key, g in base[base["rate"] > 0].groupby(_CONFIG)
    }
    return {config: 1000.0 / rate for config, rate in rates.items()} | steps


def _row_notes(df: Any, k: Any, chain: Any) -> list[str]:
    """The notes of rows left out or fitted apart: no k, trees (not ``chain``), k not whole."""
    notes = []
    unknown = int((k.isna() & df["accept_len"].notna()).sum())
    if unknown:
        notes.append(
            f"{unknown} rows with an accept_len but no num_spec_tokens are left out: "
            "give k (ingest -k K)"
        )
    tree_rows = int(((k > 0) & ~chain).sum())
    if tree_rows:
        notes.append(
            f"{tree_rows} rows of tree drafts (spec_topk > 1): their costs are fitted "
            "across batch sizes only, where baselines ran at two or more; their "
            "acceptance in the tree section"
        )
    from_rate = int(df["from_rate"].sum())
    if from_rate:
        notes.append(
            f"{from_rate} rows give an acceptance_rate and no accept_len: accept_len = 1 + k x "
            "acceptance_rate, as if every cycle drafted k tokens (a drafter that stops early "
            "drafts fewer: then it is an overestimate)"
        )
    odd = int(((k > 0) & (k != k.round())).sum())
    if odd:
        notes.append(f"{odd} rows with a num_spec_tokens that is not a whole number are left out")
    return notes


def _categorised(spec: Any, groups: list[Any]) -> list[tuple[Any, Any]]:
    """Each fitted group's speculative rows, paired with its fit, for
    :func:`~breakeven.measurements.workload.fit_by_category`; none where no row has a
    workload category (the frame is not split for nothing)."""
    category = spec["category"].astype(object).where(spec["category"].notna(), "")
    if not (category.astype(str) != "").any():
        return []
    runs_of = dict(iter(spec.groupby(_GROUP, sort=False, dropna=False)))
    return [(runs_of[key], g) for key, g in zip(runs_of, groups, strict=True)]


def _grouped_entries(per_k: Any) -> list[tuple[tuple[Any, ...], list[Any], float]]:
    """Each group of the per-k table (``_GROUP``, in order of appearance): its key, its per-k
    entries and its mean context [tokens], read in one pass rather than a frame a group."""
    grouped = per_k.groupby(_GROUP, sort=False, dropna=False)
    number = grouped.ngroup().to_numpy()
    entries = _entries(per_k)
    context = per_k["context_tokens"].groupby(number).mean()
    keys = per_k[list(_GROUP)].to_numpy(dtype=object)
    members: dict[int, list[int]] = {}
    for row, n in enumerate(number):
        members.setdefault(int(n), []).append(row)
    return [
        (tuple(keys[rows[0]]), [entries[r] for r in rows], float(context[n]))
        for n, rows in sorted(members.items())
    ]


def _roofline(model_config: Any, accelerator: Any, roof_for: Any, moe: Any) -> tuple[Any, Any]:
    """:func:`fit`'s ``roof_for`` and ``moe`` given its ``model_config`` (one shape, or a
    mapping of model to shape) and ``accelerator``: the configs' roof source and routing (per
    model, for a mapping) where neither is given."""
    if roof_for is None and isinstance(model_config, Mapping) and model_config:
        if moe is None:
            moe = {
                model: MoE(shape.experts, shape.top_k)
                for model, shape in model_config.items()
                if shape.experts
            } or None
        return roofs_by_model(model_config, accelerator), moe
    if not model_config or roof_for is not None:
        if accelerator is not None and roof_for is None:
            raise BreakevenError(
                "{0} needs {1} or a model_config column: the datasheet floor needs the "
                "model's shape as well",
                "accelerator",
                "model_config",
            )
        return roof_for, moe
    if moe is None and model_config.experts:
        moe = MoE(model_config.experts, model_config.top_k)
    return roof_source(model_config, accelerator), moe


def fit(
    data: Any,
    *,
    draft_cost: str = "per-token",
    predict_k: Sequence[int] = (),
    source: str = "",
    moe: Any = None,
    cycle_form: str = "auto",
    mix: Any = None,
    model_config: Any = None,
    accelerator: str | None = None,
    roof_for: Any = None,
) -> FitResult:
    """Fit the cycle's costs of each group of runs (see the module's description).

    Parameters
    ----------
    data : pandas.DataFrame
        Rows in the measurement schema (``read_measurements``, ``ingest``, ``bench``).
    draft_cost : str
        'per-token' (a drafter run once per draft token) or 'per-cycle' (one pass).
    predict_k : sequence of int
        k values to add to each group's table, with accept_len from the fitted alpha.
    moe : breakeven.model.surface.MoE, optional
        The model's expert routing, for the forward surface across batch sizes.
    cycle_form : str
        'auto' (each group's form of least held-out error, :func:`_choose_form`) or one of
        :data:`CYCLE_FORMS`.
    mix : str or mapping, optional
        Each workload category's share of the decoded tokens
        (:func:`breakeven.measurements.workload.parse_mix`): the mix's speedup at each k, and its best k.
    model_config, accelerator, roof_for
        The model's shape (:func:`breakeven.iotools.modelconfig.read_model_config`), or a
        mapping of each model to its shape, and the runs' accelerator (else their
        ``hardware``), or ``roof_for(model, hardware, context)``
        (:func:`breakeven.fitting.roofs.roof_source`): the surface's roofline form.
    """

    _check_options(draft_cost, cycle_form, predict_k)
    roof_for, moe = _roofline(model_config, accelerator, roof_for, moe)
    df, range_notes = _prepared(data)
    k = df["num_spec_tokens"]
    chain = df["spec_topk"].isna() | (df["spec_topk"] <= 1)  # a tree is fitted across batches
    spec = df[(k > 0) & (k == k.round()) & chain]
    per_k = _per_k(spec)
    step_of = _baseline_steps(df[k == 0])
    groups = []
    for key, entries, context in _grouped_entries(per_k):
        step = step_of.get(tuple(key[:4]), math.nan)
        g = fit_group(key, entries, float(step), draft_cost, predict_k, cycle_form)
        groups.append(replace(g, context_tokens=context))
    categories, mixes = fit_by_category(
        _categorised(spec, groups), parse_mix(mix) if mix is not None else None
    )
    contexts = contexts_of(groups)
    groups = context_notes(groups, contexts)
    surfaces = batch_surfaces(df, moe, roof_for)
    trees = tree_acceptances(df)
    notes = (
        [] if groups or surfaces else ["no speculative rows (num_spec_tokens > 0): nothing to fit"]
    )
    notes += range_notes
    if not moe:  # a MoE's verify already loads experts a decode of B does not
        notes += slow_batch_growth(per_k, step_of)
    notes += pooled_over_k(df)
    notes += _row_notes(df, k, chain)
    return FitResult(
        tuple(groups),
        draft_cost,
        source=source,
        notes=tuple(notes),
        surfaces=surfaces,
        trees=trees,
        contexts=contexts,
        categories=categories,
        mix=mixes,
    )


def fit_file(
    path: str,
    *,
    draft_cost: str = "per-token",
    predict_k: Sequence[int] = (),
    moe: Any = None,
    cycle_form: str = "auto",
    mix: Any = None,
    model_config: Any = None,
    accelerator: str | None = None,
) -> FitResult:
    """:func:`fit` on a measurements CSV.

    Parameters
    ----------
    path : str
        A measurements CSV (the schema of ``breakeven ingest --out``); the fit's source.
    draft_cost : str
        One of :data:`DRAFT_COSTS`: a drafter run once per draft token, or one pass a cycle.
    predict_k : sequence of int
        k values [draft tokens/cycle] to add to each group's table.
    moe : breakeven.model.surface.MoE, optional
        The model's expert routing, for the forward surface across batch sizes.
    cycle_form : str
        'auto' or one of :data:`CYCLE_FORMS`.
    mix : str or mapping, optional
        Each workload category's share of the decoded tokens [fraction]: the mix's speedup
        at each k, and its best k.
    model_config, accelerator
        The model's shape and the runs' accelerator, for the roofline form (see :func:`fit`);
        without ``model_config``, the file's ``model_config`` column, where it has one, names
        each model's ``config.json`` (relative to the file's folder, or absolute).
    """

    data, _ = read_measurements(path, columns=(*COLUMNS_USED, MODEL_CONFIG_COLUMN))
    if model_config is None:
        model_config = model_configs_of(data, path) or None
    return fit(
        data,
        source=str(path),
        draft_cost=draft_cost,
        predict_k=predict_k,
        moe=moe,
        cycle_form=cycle_form,
        mix=mix,
        model_config=model_config,
        accelerator=accelerator,
    )


__all__: Sequence[str] = (
    "COEFFICIENTS",
    "CYCLE_FORMS",
    "DRAFT_COSTS",
    "FORM_CHOICES",
    "ContextFit",
    "FitResult",
    "FormScore",
    "GroupFit",
    "KRow",
    "fit",
    "fit_file",
    "fit_group",
)
