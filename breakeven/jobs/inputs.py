"""Cost models and acceptance resolved from arguments and files, as the commands resolve them.

``breakeven predict --fit-file fit.json`` and a notebook's
``predict_from_files(fit_file="fit.json", k=3)`` make the same decisions here: which
costs a fit file supplies and which the caller gave, which cost curve a sweep prices
(a ``tokens,ms`` CSV, fitted or interpolated, or a fitted forward surface), and where
acceptance comes from when none is given.

Every problem is a :class:`breakeven.core.errors.BreakevenError` naming the Python arguments
(``fit_group needs fit_file``); the command line spells them as its flags.

Fit files are read through :mod:`breakeven.fitting.fit` (``load_fit``, ``load_surface``, ``load_tree``,
``load_fitted_alpha``).
``breakeven predict`` imports it on its start-up path, so the analysis modules that
``predict`` does not use are imported inside the functions that need them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.prediction.predict import Prediction, predict

ACCEPTANCE_INPUTS = ("accept_len", "alpha", "per_position", "accept_len_by_k")
"""The arguments that give acceptance; a fit file's alpha is used only when none is given."""

FIT_COST_INPUTS = (
    "verify_ms",
    "verify_curve",
    "draft_ms",
    "draft_step_ms",
    "overhead_ms",
    "cycle_ms",
    "cost_ratio",
)
"""The cycle's cost arguments, which a fit file replaces (none may be given with it)."""

_TREE_CLASHES = ("per_position", "accept_len_by_k", "cost_ratio", "verify_ms")


# Cost curves and fit files as the inputs of predict and optimize.


def read_curve(path: str | None, fit: str | None = None, *, name: str = "verify_curve") -> Any:
    """The cost model a ``tokens,ms`` CSV describes: interpolated, or fitted with ``fit``.

    Parameters
    ----------
    path : str, optional
        A CSV of forward time [ms] against tokens per forward.  None gives None.
    fit : {'linear', 'knee'}, optional
        Fit the curve (:data:`breakeven.model.costs.FORMS`) and extrapolate beyond it.
    name : str
        The argument ``path`` came from (``verify_curve``, ``cost_curve``), named in errors.

    Returns
    -------
    TableCost or FittedCost or None
    """
    if path is None:
        if fit is not None:
            raise BreakevenError("{0} needs {1}: there is no curve to fit", "fit", name)
        return None
    from breakeven.iotools.curves import read_cost_curve  # lazy: start-up
    from breakeven.model.costs import TableCost  # lazy: start-up

    data, meta = read_cost_curve(path)
    table = TableCost(tuple(data["tokens"]), tuple(data["ms"]), source=meta["path"])
    return table if fit is None else table.fit(fit)


def with_fit_file(
    inputs: Mapping[str, Any],
    fit_file: str | None = None,
    fit_group: int | None = None,
    *,
    form: str,
    context: float | None = None,
) -> dict[str, Any]:
    """``inputs`` with a fit file's cycle costs, and its step and alpha where none is given.

    Parameters
    ----------
    inputs : mapping
        Keyword arguments of :func:`breakeven.prediction.predict.predict` (``form='predict'``) or
        :func:`breakeven.prediction.optimize.optimize` (``form='optimize'``).  None of
        :data:`FIT_COST_INPUTS` may be given with ``fit_file``.
    fit_file : str, optional
        A fit file (``breakeven fit --out``); without it ``inputs`` come back as given.
    fit_group : int, optional
        Which group of ``fit_file`` (from 1).
    form : {'predict', 'optimize'}
        The costs at one ``k`` (verify, draft, overhead [ms]), or per draft token.
    context : float, optional
        Price the fit's step and cycle at this many tokens of context [tokens], from the fit
        file's context fit (runs at two or more context lengths; see
        :func:`breakeven.fitting.saved.context_growth`).
    """
    if fit_file is None:
        given = next(
            (n for n, v in (("fit_group", fit_group), ("context", context)) if v is not None), None
        )
        if given is not None:
            raise BreakevenError("{0} needs {1}", given, "fit_file")
        return dict(inputs)
    from breakeven.fitting.saved import fitted_costs, load_fit  # lazy: start-up

    clash = [n for n in FIT_COST_INPUTS if inputs.get(n) is not None]
    if clash:
        raise BreakevenError(
            "{0} and {1} cannot be given together: the fit holds the cycle's costs",
            "fit_file",
            clash[0],
        )
    group = load_fit(fit_file, fit_group)
    out = dict(inputs)
    out.update(fitted_costs(group, form, inputs.get("k"), inputs.get("batch") or 1))
    fits_step = inputs.get("baseline_tok_s") is None and inputs.get("step_ms") is None
    if fits_step:
        out["step_ms"] = group.get("step_ms")
    if context is not None:
        _at_context(out, fit_file, group, context, form, fits_step)
    if all(inputs.get(n) is None for n in ACCEPTANCE_INPUTS) and group.get("alpha") is not None:
        out["alpha"] = group["alpha"]
    return out


def _at_context(
    out: dict[str, Any],
    fit_file: str,
    group: dict[str, Any],
    context: float,
    form: str,
    fits_step: bool,
) -> None:
    """``out``'s fitted costs (and the fit's step, where it is the step used) moved from the
    fit's context to ``context`` [tokens] (:func:`breakeven.fitting.saved.context_growth`)."""
    from breakeven.fitting.saved import context_growth  # lazy: start-up

    step_more, per_k_more = context_growth(fit_file, group, float(context))
    if fits_step and out.get("step_ms") is not None:
        out["step_ms"] = out["step_ms"] + step_more
    curve = out.get("verify_curve")
    if curve is not None and not isinstance(curve, str):  # a curved fit's whole cycle
        out["verify_curve"] = dataclasses.replace(
            curve, context_ms=step_more, context_per_k_ms=per_k_more
        )
    elif form == "predict":
        out["verify_ms"] = out["verify_ms"] + step_more + per_k_more * (out.get("k") or 0)
    else:
        out["verify_ms"] = out["verify_ms"] + step_more
        out["draft_step_ms"] = out["draft_step_ms"] + per_k_more


def predict_from_files(
    *,
    fit_file: str | None = None,
    fit_group: int | None = None,
    context: float | None = None,
    **inputs: Any,
) -> Prediction:
    """:func:`breakeven.prediction.predict.predict`, with the cycle's costs from a fit file if one is given.

    Parameters
    ----------
    fit_file, fit_group, context
        As :func:`with_fit_file`.
    **inputs
        The keyword arguments of :func:`breakeven.prediction.predict.predict`.
    """
    result = predict(**with_fit_file(inputs, fit_file, fit_group, form="predict", context=context))
    if fit_file is None or result.speedup is None or result.k is None:
        return result
    from breakeven.fitting.saved import fit_interval, load_fit  # lazy: start-up

    h = fit_interval(load_fit(fit_file, fit_group), result.k)
    if not (0 <= h < 1 and 0 < result.speedup < math.inf):
        return result
    s = result.speedup
    return dataclasses.replace(result, speedup_low=s * (1 - h), speedup_high=s * (1 + h))


def optimize_from_files(
    *,
    verify_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_group: int | None = None,
    context: float | None = None,
    tree: bool = False,
    rank_decay: float | None = None,
    max_steps: int = 8,
    max_topk: int = 8,
    max_verify_tokens: int = 64,
    **inputs: Any,
) -> Any:
    """The best k (:func:`breakeven.prediction.optimize.optimize`) or, with ``tree``, the best tree draft
    (:func:`breakeven.prediction.optimize.optimize_tree`), with costs from a curve or a fit file.

    Parameters
    ----------
    verify_curve : str, optional
        A ``tokens,ms`` CSV of the verify forward (see :func:`read_curve`).
    fit : {'linear', 'knee'}, optional
        Fit ``verify_curve`` instead of interpolating it.
    fit_file, fit_group
        A fit file and its group (or, with ``tree``, its tree acceptance); see
        :func:`with_fit_file`.
    tree : bool
        Search tree drafts over (steps, topk, verify tokens) instead of k.
    rank_decay : float, optional
        With ``tree`` and ``alpha``: each further candidate's chance over the one before.
    max_steps, max_topk, max_verify_tokens : int
        With ``tree``: the search's bounds.
    **inputs
        The other keyword arguments of :func:`breakeven.prediction.optimize.optimize`.

    Returns
    -------
    OptimizeResult or TreeSearch
    """
    if tree:
        if context is not None:
            raise BreakevenError(
                "{0} cannot be given with {1}: a tree is priced on a surface", "context", "tree"
            )
        return _optimize_tree(
            inputs,
            verify_curve,
            fit,
            fit_file,
            fit_group,
            rank_decay=rank_decay,
            max_steps=max_steps,
            max_topk=max_topk,
            max_verify_tokens=max_verify_tokens,
        )
    from breakeven.prediction.optimize import optimize  # lazy: start-up

    if rank_decay is not None:
        raise BreakevenError(
            "{0} needs {1}: it is the acceptance of a tree's branches", "rank_decay", "tree"
        )
    inputs = with_fit_file(
        {**inputs, "verify_curve": verify_curve},
        fit_file,
        fit_group,
        form="optimize",
        context=context,
    )
    curve = inputs.pop("verify_curve")
    if curve is None or isinstance(curve, str):  # a fit file's curved cycle comes priced
        curve = read_curve(curve, fit, name="verify_curve")
    result = optimize(verify_curve=curve, **inputs)
    if fit_file is None:
        return result
    from breakeven.fitting.saved import fit_interval, group_evidence, load_fit  # lazy: start-up

    group = load_fit(fit_file, fit_group)
    result = result.with_intervals({o.k: fit_interval(group, o.k) for o in result.by_k})
    return result.with_evidence(group_evidence(fit_file, fit_group, context), context)


def _optimize_tree(
    inputs: dict[str, Any],
    verify_curve: str | None,
    fit: str | None,
    fit_file: str | None,
    fit_group: int | None,
    **bounds: Any,
) -> Any:
    """``optimize_from_files(tree=True)``: the search over (steps, topk, verify tokens)."""
    from breakeven.fitting.saved import load_surface, load_tree  # lazy: start-up
    from breakeven.prediction.optimize import optimize_tree  # lazy: start-up

    clash = [n for n in _TREE_CLASHES if inputs.get(n) is not None]
    if clash:
        raise BreakevenError(
            "{0} cannot be given with {1}: a tree's acceptance is alpha and "
            "rank_decay, its verify grows with the tokens verified",
            clash[0],
            "tree",
        )
    acceptance = surface = None
    if fit_file is not None:
        if verify_curve is not None:
            raise BreakevenError(
                "{0} and {1} cannot be given together: the fit holds the cycle's costs",
                "fit_file",
                "verify_curve",
            )
        if inputs.get("alpha") is None and bounds["rank_decay"] is None:
            acceptance = load_tree(fit_file, fit_group)
        surface = load_surface(
            fit_file, fit_group if acceptance is None else None, like=acceptance, flag="fit_group"
        )
    elif fit_group is not None:
        raise BreakevenError("{0} needs {1}", "fit_group", "fit_file")
    curve = read_curve(verify_curve, fit, name="verify_curve")
    result = optimize_tree(
        acceptance=acceptance,
        alpha=inputs.get("alpha"),
        surface=surface,
        verify_curve=curve,
        baseline_tok_s=inputs.get("baseline_tok_s"),
        step_ms=inputs.get("step_ms"),
        draft_ms=inputs.get("draft_ms"),
        draft_step_ms=inputs.get("draft_step_ms"),
        overhead_ms=inputs.get("overhead_ms"),
        batch=inputs.get("batch", 1),
        **bounds,
    )
    if fit_file is None:
        return result
    from breakeven.fitting.saved import surface_evidence, within_evidence  # lazy: start-up

    evidence = surface_evidence(
        fit_file, fit_group if acceptance is None else None, like=acceptance
    )
    best = result.best
    claim = [(best.steps, result.batch, best.speedup)]
    refused = tuple(within_evidence(evidence, claim))
    return dataclasses.replace(result, evidence=evidence, refused=refused)


# Batch sweeps and schedules: a cost curve of total tokens, or a fitted surface.


def batch_cost(
    *,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    **inputs: Any,
) -> tuple[Any, dict[str, Any]]:
    """The cost model a batch sweep prices, and the sweep's other inputs.

    Parameters
    ----------
    cost_curve : str, optional
        A ``tokens,ms`` CSV: forward time [ms] against total tokens per forward.
    fit : {'linear', 'knee'}, optional
        Fit ``cost_curve`` instead of interpolating it.
    fit_file : str, optional
        Instead of ``cost_curve``: a fit file's forward surface t(B, q), whose draft cost is
        used unless ``draft_ms`` or ``draft_step_ms`` is given.
    fit_surface : int, optional
        Which surface of ``fit_file`` (from 1).
    context : int, optional
        Move the surface to this context [tokens], by the fit file's context growth
        (:func:`breakeven.fitting.saved.surface_at_context`).
    **inputs
        The other keyword arguments of :func:`breakeven.prediction.optimize.batch_sweep`.

    Returns
    -------
    curve : cost model
        A :class:`breakeven.model.costs.TableCost`, a fitted cost or a
        :class:`breakeven.model.surface.SurfaceCost`.
    inputs : dict
        ``inputs``, with the surface's ``draft`` cost added where it applies.
    """
    from breakeven.fitting.saved import load_surface, surface_at_context  # lazy: start-up

    inputs = dict(inputs)
    if fit_file is None:
        for name, value in (("fit_surface", fit_surface), ("context", context)):
            if value is not None:
                raise BreakevenError("{0} needs {1}", name, "fit_file")
        if cost_curve is None:
            raise BreakevenError(
                "give {0} CSV, or {1} FIT.json (breakeven fit --out)", "cost_curve", "fit_file"
            )
        return read_curve(cost_curve, fit, name="cost_curve"), inputs
    if cost_curve is not None or fit is not None:
        raise BreakevenError(
            "{0} and {1} (or {2}) cannot be given together", "fit_file", "cost_curve", "fit"
        )
    from breakeven.model.surface import SurfaceCost  # lazy: start-up

    surface = load_surface(fit_file, fit_surface)
    if context is not None:
        surface = surface_at_context(fit_file, surface, float(context))
    curve = SurfaceCost(surface)
    if inputs.get("draft_ms") is None and inputs.get("draft_step_ms") is None:
        inputs["draft"] = curve.draft
    return curve, inputs


def batch_from_files(**inputs: Any) -> Any:
    """:func:`breakeven.prediction.optimize.batch_sweep` over the cost model of :func:`schedule_cost`,
    with the fit file's alpha where no acceptance is given.

    Parameters
    ----------
    **inputs
        :func:`batch_cost`'s arguments and :func:`breakeven.prediction.optimize.batch_sweep`'s.

    Returns
    -------
    BatchResult
    """
    from breakeven.prediction.optimize import batch_sweep  # lazy: start-up

    evidence, context = _surface_evidence(inputs)
    curve, inputs, note = schedule_cost(**inputs)
    result = batch_sweep(curve, **inputs)
    moved = getattr(getattr(curve, "surface", None), "context_note", "")
    notes = ((moved,) if moved else ()) + result.notes  # and the sweep's flags
    result = dataclasses.replace(result, acceptance=note, notes=notes)
    return result if evidence is None else result.with_evidence(evidence, context)


def _surface_evidence(inputs: Mapping[str, Any]) -> tuple[Any, float | None]:
    """What the runs of the fit file's surface that :func:`batch_cost` prices measured
    (:func:`breakeven.fitting.saved.surface_evidence`), and the context the plan is priced at
    [tokens]: a plan from a fit is checked against them.  None, None without a fit file."""
    fit_file = inputs.get("fit_file")
    if fit_file is None:
        return None, None
    from breakeven.fitting.saved import surface_evidence  # lazy: start-up

    context = inputs.get("context")
    context = None if context is None else float(context)
    return surface_evidence(fit_file, inputs.get("fit_surface"), context=context), context


def schedule_cost(**inputs: Any) -> tuple[Any, dict[str, Any], str]:
    """:func:`batch_cost`, and acceptance from the fit file where none is given (``batch``
    and ``schedule`` alike: ``--fit-file`` gives alpha wherever no acceptance is typed).

    Returns
    -------
    curve : cost model
    inputs : dict
        The sweep's other inputs, with ``alpha`` from the fit file where no acceptance
        (:data:`ACCEPTANCE_INPUTS`) is given.
    note : str
        Where that alpha came from, or "".
    """
    from breakeven.fitting.saved import load_fitted_alpha  # lazy: start-up

    fit_file = inputs.get("fit_file")
    curve, inputs = batch_cost(**inputs)
    note = ""
    if fit_file is not None and all(inputs.get(n) is None for n in ACCEPTANCE_INPUTS):
        inputs["alpha"], where = load_fitted_alpha(fit_file, curve.surface)
        note = f"acceptance: alpha {inputs['alpha']:.4f} ({where}), positions i.i.d."
    return curve, inputs, note


# Fits.


def moe_routing(experts: int | None, top_k: int | None, shared: int = 0) -> Any:
    """A Mixture-of-Experts model's routing (:class:`breakeven.model.surface.MoE`), or None.

    Parameters
    ----------
    experts : int, optional
        Routed experts per layer; given with ``top_k`` or not at all.
    top_k : int, optional
        Routed experts per token, at most ``experts``.
    shared : int
        Shared experts, always active.
    """
    if (experts is None) != (top_k is None):
        raise BreakevenError(
            "{0} and {1} go together: the model's expert routing", "experts", "top_k"
        )
    if experts is None:
        return None
    if top_k > experts:
        raise BreakevenError(
            "{0}: got " + str(top_k) + ", expected at most {1} (" + str(experts) + ")",
            "top_k",
            "experts",
        )
    from breakeven.model.surface import MoE  # lazy: start-up

    return MoE(experts, top_k, shared)


def fit_from_file(
    runs: str,
    *,
    draft_cost: str = "per-token",
    predict_k: Sequence[int] = (),
    experts: int | None = None,
    top_k: int | None = None,
    shared: int = 0,
    out: str | None = None,
    force: bool = False,
    cycle_form: str = "auto",
    mix: Any = None,
) -> Any:
    """:func:`breakeven.fitting.fit.fit_file`, written to ``out`` as JSON (what its ``to_dict()`` is).

    Parameters
    ----------
    runs : str
        A measurements CSV.
    draft_cost : str
        One of :data:`breakeven.fitting.fit.DRAFT_COSTS`.
    predict_k : sequence of int
        Also predict these k.
    cycle_form : str
        'auto' or one of :data:`breakeven.fitting.fit.CYCLE_FORMS`.
    experts, top_k, shared
        A Mixture-of-Experts model's routing (see :func:`moe_routing`).
    mix : str or mapping, optional
        A traffic mix (``code=0.6,chat=0.3``): its speedup at each k, and its best k.
    out : str, optional
        Also write the fit here (refused before any work if it exists, unless ``force``,
        or is ``runs``, even with ``force``).
    force : bool
        Replace ``out``.

    Returns
    -------
    FitResult
    """
    from breakeven.fitting.fit import fit_file  # lazy: start-up
    from breakeven.iotools.atomic import refuse_overwrite  # lazy: start-up
    from breakeven.iotools.outputs import write_json  # lazy: start-up
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    moe = moe_routing(experts, top_k, shared)
    if out is not None:
        refuse_input_as_output(out, "out", [("RUNS.csv", runs)])
        refuse_overwrite(out, force)
    result = fit_file(
        runs, draft_cost=draft_cost, predict_k=predict_k, moe=moe, cycle_form=cycle_form, mix=mix
    )
    if out is not None:
        write_json(out, result.to_dict(), force=force)
    return result


__all__: Sequence[str] = (
    "ACCEPTANCE_INPUTS",
    "FIT_COST_INPUTS",
    "batch_cost",
    "batch_from_files",
    "fit_from_file",
    "moe_routing",
    "optimize_from_files",
    "predict_from_files",
    "read_curve",
    "schedule_cost",
    "with_fit_file",
)
