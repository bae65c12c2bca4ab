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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.jobs.memory import KV_INPUTS, kv_room_of
from breakeven.prediction.predict import ALPHA_TABLE_KS, Prediction, predict

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

PREDICT_INPUTS = (
    "baseline_tok_s",
    "step_ms",
    "verify_ms",
    "draft_ms",
    "overhead_ms",
    "cycle_ms",
    "accept_len",
    "alpha",
    "k",
    "per_position",
    "cost_ratio",
    "target_speedup",
    "alpha_table_ks",
)
"""The arguments of :func:`predict_from_files` that :func:`breakeven.prediction.predict.predict`
takes."""

OPTIMIZE_INPUTS = (
    "alpha",
    "per_position",
    "accept_len_by_k",
    "cost_ratio",
    "baseline_tok_s",
    "step_ms",
    "verify_ms",
    "draft_step_ms",
    "draft_ms",
    "overhead_ms",
    "batch",
    "k_max",
)
"""The arguments of :func:`optimize_from_files` that :func:`breakeven.prediction.optimize.optimize`
takes as they are (its ``verify_curve`` is read, or a fit file's)."""

_TREE_CLASHES = ("per_position", "accept_len_by_k", "cost_ratio", "verify_ms")


def _arguments(given: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The arguments ``names`` and their values, among a function's ``given`` ones (its
    ``locals()``, taken as its first statement): what it passes on to the analysis."""
    return {name: given[name] for name in names}


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
    """``inputs`` with a fit file's cycle costs, and its step and alpha where none is given:
    :func:`fit_file_inputs` without its flags.
    """
    return fit_file_inputs(inputs, fit_file, fit_group, form=form, context=context)[0]


def fit_file_inputs(
    inputs: Mapping[str, Any],
    fit_file: str | None = None,
    fit_group: int | None = None,
    *,
    form: str,
    context: float | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """``inputs`` with a fit file's cycle costs, and its step and alpha where none is given;
    and the flags (:class:`breakeven.measurements.plausibility.TypedFlag`, code
    ``context_extrapolated``) of the costs that ``context`` moved beyond what a decode can
    have, each clamped (see :func:`breakeven.jobs.context.at_context`): derived values, noted, never refused as if
    typed.

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
        return dict(inputs), []
    from breakeven.fitting.saved import fitted_costs, load_fit  # lazy: start-up
    from breakeven.jobs.context import at_context  # lazy: start-up

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
    flags = [] if context is None else at_context(out, fit_file, group, context, form, fits_step)
    if all(inputs.get(n) is None for n in ACCEPTANCE_INPUTS) and group.get("alpha") is not None:
        out["alpha"] = group["alpha"]
    return out, flags


def predict_from_files(
    *,
    fit_file: str | None = None,
    fit_group: int | None = None,
    context: float | None = None,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    overhead_ms: float | None = None,
    cycle_ms: float | None = None,
    accept_len: float | None = None,
    alpha: float | None = None,
    k: int | None = None,
    per_position: Sequence[float] | None = None,
    cost_ratio: float | None = None,
    target_speedup: float = 1.0,
    alpha_table_ks: Iterable[int] = ALPHA_TABLE_KS,
) -> Prediction:
    """:func:`breakeven.prediction.predict.predict`, with the cycle's costs from a fit file if one is given.

    Parameters
    ----------
    fit_file, fit_group, context
        A fit file, its group (from 1) and the context [tokens] its costs are priced at, as
        :func:`with_fit_file` takes them; the speedup then has the fit's interval.
    baseline_tok_s, step_ms : float, optional
        The baseline: its per-sequence decode rate [tok/s], or its step [ms].
    verify_ms, draft_ms, overhead_ms : float, optional
        The cycle's costs [ms]: a target forward over k + 1 tokens, all drafting in a cycle,
        and other per-cycle cost.
    cycle_ms : float, optional
        A measured cycle [ms], instead of the three costs.
    accept_len : float, optional
        Mean tokens emitted per cycle, bonus token included [tokens/cycle].
    alpha, k, per_position
        Acceptance: a per-token probability (i.i.d.) at ``k`` draft tokens, or per-position
        rates [fraction].
    cost_ratio : float, optional
        Leviathan's c: draft step / target step [x] (verify = one target step), with ``k``.
    target_speedup : float
        The speedup the break-even solves aim for [x].
    alpha_table_ks : iterable of int
        The k of the break-even alpha table [draft tokens].
    """
    inputs = _arguments(locals(), PREDICT_INPUTS)
    priced, flags = fit_file_inputs(inputs, fit_file, fit_group, form="predict", context=context)
    result = predict(**priced)
    if flags:  # a derived cost clamped: the prediction is an extrapolation, and says so
        result = dataclasses.replace(result, flags=(*result.flags, *flags))
    if fit_file is None or result.speedup is None or result.k is None:
        return result
    from breakeven.fitting.saved import context_widening, fit_interval, load_fit  # lazy: start-up

    group = load_fit(fit_file, fit_group)
    h = fit_interval(group, result.k) + context_widening(fit_file, group, context)
    if not (0 <= h < 1 and 0 < result.speedup < math.inf):
        return result
    s = result.speedup
    return dataclasses.replace(result, speedup_low=s * (1 - h), speedup_high=s * (1 + h))


def optimize_from_files(
    *,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    cost_ratio: float | None = None,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    verify_ms: float | None = None,
    verify_curve: str | None = None,
    fit: str | None = None,
    draft_step_ms: float | None = None,
    draft_ms: float | None = None,
    overhead_ms: float | None = None,
    batch: int = 1,
    k_max: int = 16,
    fit_file: str | None = None,
    fit_group: int | None = None,
    context: float | None = None,
    tree: bool = False,
    rank_decay: float | None = None,
    max_steps: int = 8,
    max_topk: int = 8,
    max_verify_tokens: int = 64,
) -> Any:
    """The best k (:func:`breakeven.prediction.optimize.optimize`) or, with ``tree``, the best tree draft
    (:func:`breakeven.prediction.tree.optimize_tree`), with costs from a curve or a fit file.

    Parameters
    ----------
    alpha, per_position, accept_len_by_k
        Acceptance: a per-token probability (i.i.d.), per-position rates [fraction], or
        accept_len [tokens/cycle] for k = 1, 2, ... (or by k, ``{k: accept_len}``).
    cost_ratio : float, optional
        Leviathan's c: draft step / target step [x] (verify = one target step).
    baseline_tok_s, step_ms : float, optional
        The baseline: its per-sequence decode rate [tok/s], or its step [ms].
    verify_ms : float, optional
        The verify forward, the same at every k [ms].
    verify_curve : str, optional
        Instead: a ``tokens,ms`` CSV of the verify forward [ms] (see :func:`read_curve`).
    fit : {'linear', 'knee'}, optional
        Fit ``verify_curve`` instead of interpolating it.
    draft_step_ms, draft_ms, overhead_ms : float, optional
        One draft step (k of them a cycle), drafting per cycle, other per-cycle cost [ms].
    batch, k_max : int
        Sequences decoded together (with ``verify_curve``); the largest k considered.
    fit_file, fit_group, context
        A fit file, its group (or, with ``tree``, its tree acceptance) and the context
        [tokens] its costs are priced at; see :func:`with_fit_file`.
    tree : bool
        Search tree drafts over (steps, topk, verify tokens) instead of k.
    rank_decay : float, optional
        With ``tree`` and ``alpha``: each further candidate's chance over the one before.
    max_steps, max_topk, max_verify_tokens : int
        With ``tree``: the search's bounds [steps, branches per step, tokens per sequence].

    Returns
    -------
    OptimizeResult or TreeSearch
    """
    inputs = _arguments(locals(), OPTIMIZE_INPUTS)
    if tree:
        if context is not None:
            raise BreakevenError(
                "{0} cannot be given with {1}: a tree is priced on a surface", "context", "tree"
            )
        search = (rank_decay, max_steps, max_topk, max_verify_tokens)  # its acceptance, bounds
        return _optimize_tree(inputs, verify_curve, fit, fit_file, fit_group, *search)
    if rank_decay is not None:
        raise BreakevenError(
            "{0} needs {1}: it is the acceptance of a tree's branches", "rank_decay", "tree"
        )
    return _optimize_k(inputs, verify_curve, fit, fit_file, fit_group, context)


def _optimize_k(
    inputs: dict[str, Any],
    verify_curve: str | None,
    fit: str | None,
    fit_file: str | None,
    fit_group: int | None,
    context: float | None,
) -> Any:
    """``optimize_from_files()`` without ``tree``: the best k, with the fit's intervals and
    the evidence of its runs where a fit file gives the costs."""
    from breakeven.prediction.optimize import optimize  # lazy: start-up

    inputs, flags = fit_file_inputs(
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
    if flags:  # a derived cost clamped: said in the note, as optimize says its own flags
        notes = [result.note] if result.note else []
        result = dataclasses.replace(result, note="; ".join(notes + [f.note() for f in flags]))
    if fit_file is None:
        return result
    from breakeven.fitting.saved import (  # lazy: start-up
        context_widening,
        fit_interval,
        group_evidence,
        load_fit,
    )

    group = load_fit(fit_file, fit_group)
    wider = context_widening(fit_file, group, context)
    result = result.with_intervals({o.k: fit_interval(group, o.k) + wider for o in result.by_k})
    return result.with_evidence(group_evidence(fit_file, fit_group, context), context)


def _optimize_tree(
    inputs: dict[str, Any],
    verify_curve: str | None,
    fit: str | None,
    fit_file: str | None,
    fit_group: int | None,
    rank_decay: float | None,
    max_steps: int,
    max_topk: int,
    max_verify_tokens: int,
) -> Any:
    """``optimize_from_files(tree=True)``: the search over (steps, topk, verify tokens)."""
    from breakeven.fitting.saved import load_surface, load_tree  # lazy: start-up
    from breakeven.prediction.tree import optimize_tree  # lazy: start-up

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
        if inputs.get("alpha") is None and rank_decay is None:
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
        rank_decay=rank_decay,
        max_steps=max_steps,
        max_topk=max_topk,
        max_verify_tokens=max_verify_tokens,
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


# Batch sweeps: a cost curve of total tokens, or a fitted surface.

_COST_MODEL = ("cost_curve", "fit", "fit_file", "fit_surface", "context")


@dataclasses.dataclass(frozen=True)
class SweepInputs:
    """What a batch sweep prices and sweeps (``breakeven batch`` and ``schedule``): a cost
    model (``cost_curve``, or ``fit_file``), acceptance at one k (``accept_len`` at ``k``)
    or at several (``alpha``, ``per_position`` or ``accept_len_by_k``), drafting, and the
    sweep's bounds.

    The keyword arguments that :func:`batch_cost`, :func:`schedule_cost`,
    :func:`batch_from_files` and :mod:`breakeven.jobs.schedules` share, as one value.
    """

    cost_curve: str | None = None
    """A ``tokens,ms`` CSV: forward time [ms] against total tokens per forward."""
    fit: str | None = None
    """Fit ``cost_curve`` ('linear' or 'knee') instead of interpolating it."""
    fit_file: str | None = None
    """Instead of ``cost_curve``: a fit file's forward surface t(B, q) [ms], whose draft cost
    is used unless ``draft_ms`` or ``draft_step_ms`` is given, and whose alpha where no
    acceptance is."""
    fit_surface: int | None = None
    """Which surface of ``fit_file`` (from 1)."""
    context: int | None = None
    """Move the surface to this context [tokens], by the fit file's context growth
    (:func:`breakeven.fitting.saved.surface_at_context`)."""
    accept_len: float | None = None
    """Mean tokens emitted per cycle at ``k``, bonus token included [tokens/cycle]."""
    k: int | None = None
    """Draft tokens per cycle (a tree's steps) of ``accept_len``."""
    alpha: float | None = None
    """Per-token acceptance probability (i.i.d.), at every k."""
    per_position: Sequence[float] | None = None
    """Per-position acceptance rates [fraction]."""
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None
    """Measured accept_len [tokens/cycle] for k = 1, 2, ..., or by k (``{k: accept_len}``)."""
    k_max: int = 16
    """Largest k considered, with acceptance at several k."""
    draft_ms: float | None = None
    """Drafting per cycle, the same at every batch [ms]."""
    draft_step_ms: float | None = None
    """One draft step [ms]; drafting costs k of them per cycle."""
    overhead_ms: float | None = None
    """Other per-cycle cost [ms]."""
    topk: int = 1
    """A tree draft at the one operating point: branches per draft step."""
    verify_tokens: int | None = None
    """Tokens per sequence in the verify forward [tokens] (a tree's; default k + 1)."""
    max_batch: int | None = None
    """Largest batch to sweep [sequences] (default: the largest the cost model covers)."""
    kv_tokens: int | str | None = None
    """The KV cache capacity without speculation [tokens], or a server log that prints it."""
    spec_kv_tokens: int | str | None = None
    """The capacity with speculation [tokens], or the log of a server launched with it."""
    draft_memory_gib: float | None = None
    """Instead of ``spec_kv_tokens``: what the draft takes [GiB] (with ``kv_bytes_per_token``)."""
    kv_bytes_per_token: float | str | None = None
    """The target's KV cache per token [bytes]."""
    tokens_per_sequence: int | None = None
    """Each sequence's cached tokens, prompt and output [tokens] (default: ``context``)."""

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> SweepInputs:
        """These inputs among a function's ``given`` arguments (its ``locals()``, taken as its
        first statement); the KV cache's (``kv_tokens`` and the rest) only where it takes
        them (``batch`` and ``schedule``'s functions)."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**_arguments(given, (n for n in names if n in given or n not in KV_INPUTS)))

    def sweep_args(self) -> dict[str, Any]:
        """The sweep's inputs beside its cost model (acceptance, drafting and bounds), as
        keyword arguments of :func:`breakeven.planning.batch.batch_sweep`."""
        skip = (*_COST_MODEL, *KV_INPUTS)
        names = (f.name for f in dataclasses.fields(self) if f.name not in skip)
        kv = kv_room_of(**{n: getattr(self, n) for n in KV_INPUTS}, context=self.context)
        return {name: getattr(self, name) for name in names} | {"kv": kv}

    def cost_model(self) -> tuple[Any, dict[str, Any]]:
        """:func:`batch_cost`: the cost model, and :meth:`sweep_args` with the surface's
        ``draft`` cost where it applies."""
        from breakeven.fitting.saved import load_surface, surface_at_context  # lazy: start-up

        inputs = self.sweep_args()
        fit_file, fit_surface, context = self.fit_file, self.fit_surface, self.context
        if fit_file is None:
            for name, value in (("fit_surface", fit_surface), ("context", context)):
                if value is not None:
                    raise BreakevenError("{0} needs {1}", name, "fit_file")
            if self.cost_curve is None:
                raise BreakevenError(
                    "give {0} CSV, or {1} FIT.json (breakeven fit --out)", "cost_curve", "fit_file"
                )
            return read_curve(self.cost_curve, self.fit, name="cost_curve"), inputs
        if self.cost_curve is not None or self.fit is not None:
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

    def priced(self) -> tuple[Any, dict[str, Any], str]:
        """:func:`schedule_cost`: :meth:`cost_model`, with the fit file's alpha where no
        acceptance is given, and a note of where that alpha came from (or "")."""
        from breakeven.fitting.saved import load_fitted_alpha  # lazy: start-up

        curve, inputs = self.cost_model()
        note = ""
        if self.fit_file is not None and all(inputs.get(n) is None for n in ACCEPTANCE_INPUTS):
            inputs["alpha"], where = load_fitted_alpha(self.fit_file, curve.surface)
            note = f"acceptance: alpha {inputs['alpha']:.4f} ({where}), positions i.i.d."
        return curve, inputs, note

    def evidence(self) -> tuple[Any, float | None]:
        """What the runs of the fit file's surface that :meth:`cost_model` prices measured
        (:func:`breakeven.fitting.saved.surface_evidence`), and the context the plan is priced
        at [tokens]: a plan from a fit is checked against them.  None, None without a fit
        file."""
        if self.fit_file is None:
            return None, None
        from breakeven.fitting.saved import surface_evidence  # lazy: start-up

        context = None if self.context is None else float(self.context)
        return surface_evidence(self.fit_file, self.fit_surface, context=context), context


def batch_cost(
    *,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    k_max: int = 16,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    max_batch: int | None = None,
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
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as :class:`SweepInputs` says.)

    Returns
    -------
    curve : cost model
        A :class:`breakeven.model.costs.TableCost`, a fitted cost or a
        :class:`breakeven.model.surface.SurfaceCost`.
    inputs : dict
        The other keyword arguments of :func:`breakeven.planning.batch.batch_sweep`
        (:meth:`SweepInputs.sweep_args`), with the surface's ``draft`` cost where it applies.
    """
    return SweepInputs.of(locals()).cost_model()


def batch_from_files(
    *,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    k_max: int = 16,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    max_batch: int | None = None,
    kv_tokens: int | str | None = None,
    spec_kv_tokens: int | str | None = None,
    draft_memory_gib: float | None = None,
    kv_bytes_per_token: float | str | None = None,
    tokens_per_sequence: int | None = None,
    output_tokens: float | None = None,
) -> Any:
    """:func:`breakeven.planning.batch.batch_sweep` over the cost model of :func:`schedule_cost`,
    with the fit file's alpha where no acceptance is given.

    Parameters
    ----------
    cost_curve, fit, fit_file, fit_surface, context
        The cost model: a ``tokens,ms`` CSV [ms against tokens per forward], fitted with
        ``fit`` or interpolated, or a fit file's forward surface (which one, and moved to
        ``context`` [tokens]); see :func:`batch_cost`.
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as :class:`SweepInputs` says.)
    kv_tokens, spec_kv_tokens, draft_memory_gib, kv_bytes_per_token, tokens_per_sequence
        The KV cache without and with speculation [tokens] (a number or a server log), or
        what the draft takes [GiB] at the target's bytes per token; each sequence's tokens
        (default ``context``): see :func:`breakeven.jobs.memory.kv_room_of`.
    output_tokens : float, optional
        Tokens each request decodes, on average [tokens]: the sweep's thresholds in
        requests per second too (:func:`breakeven.planning.rates.request_rates`).

    Returns
    -------
    BatchResult
    """
    from breakeven.planning.batch import batch_sweep  # lazy: start-up

    inputs = SweepInputs.of(locals())
    evidence, at = inputs.evidence()
    curve, sweep, note = inputs.priced()
    result = batch_sweep(curve, **sweep)
    moved = getattr(getattr(curve, "surface", None), "context_note", "")
    notes = ((moved,) if moved else ()) + result.notes  # and the sweep's flags
    result = dataclasses.replace(result, acceptance=note, notes=notes)
    if output_tokens is not None:
        result = result.in_request_rates(output_tokens)
    return result if evidence is None else result.with_evidence(evidence, at)


def schedule_cost(
    *,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    k_max: int = 16,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    max_batch: int | None = None,
) -> tuple[Any, dict[str, Any], str]:
    """:func:`batch_cost`, and acceptance from the fit file where none is given (``batch``
    and ``schedule`` alike: ``--fit-file`` gives alpha wherever no acceptance is typed).

    Parameters
    ----------
    cost_curve, fit, fit_file, fit_surface, context
        The cost model: a ``tokens,ms`` CSV [ms against tokens per forward], fitted with
        ``fit`` or interpolated, or a fit file's forward surface (which one, and moved to
        ``context`` [tokens]); see :func:`batch_cost`.
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as :class:`SweepInputs` says.)

    Returns
    -------
    curve : cost model
    inputs : dict
        The sweep's other inputs, with ``alpha`` from the fit file where no acceptance
        (:data:`ACCEPTANCE_INPUTS`) is given.
    note : str
        Where that alpha came from, or "".
    """
    return SweepInputs.of(locals()).priced()


__all__: Sequence[str] = (
    "ACCEPTANCE_INPUTS",
    "FIT_COST_INPUTS",
    "OPTIMIZE_INPUTS",
    "PREDICT_INPUTS",
    "SweepInputs",
    "batch_cost",
    "batch_from_files",
    "fit_file_inputs",
    "optimize_from_files",
    "predict_from_files",
    "read_curve",
    "schedule_cost",
    "with_fit_file",
)
