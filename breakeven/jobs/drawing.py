"""The pictures of ``breakeven plot``, each made from the inputs its command takes.

Each function resolves its inputs as the command does (a prediction's operating point,
runs given as text, a measurements CSV's runs, cost curves and fit files through
:mod:`breakeven.jobs.inputs`) and returns the matplotlib Axes of :mod:`breakeven.render.plot`, which
:func:`breakeven.render.plot.save` writes.  Every problem is a :class:`BreakevenError` naming the
Python arguments; the command line spells them as its flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces, shorten
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.fitting.saved import fitted_cycle
from breakeven.iotools.csvfile import read_measurements
from breakeven.jobs.inputs import batch_from_files, optimize_from_files
from breakeven.jobs.schedules import plan_from_files
from breakeven.measurements.check import check, check_file, cycle_given, with_cycle
from breakeven.measurements.normalise import COLUMNS_USED, TIME_COLUMNS
from breakeven.model import step_ms_from_baseline
from breakeven.prediction.predict import predict
from breakeven.prediction.sensitivity import sensitivity
from breakeven.render import plot as pictures

LARGEST_POINT = pictures.LARGEST_AXIS / 1.2
"""The largest accept_len [tokens/cycle] or cycle/step a surface is drawn around (its axes
reach 1.2 times the point)."""


def surface_point(text: str, step_ms: float | None) -> tuple[float, float, str]:
    """``LABEL:ACCEPT_LEN:CYCLE_MS`` as a point (accept_len, cycle / step, label).

    Parameters
    ----------
    text : str
        The run: its label, accept_len [tokens/cycle] and cycle [ms].
    step_ms : float, optional
        The baseline's step [ms], which the cycle is divided by; required.
    """
    parts = text.rsplit(":", 2)
    shown = escape_braces(shorten(repr(text)))
    if len(parts) != 3:
        raise BreakevenError("{0}: got " + shown + ", expected LABEL:ACCEPT_LEN:CYCLE_MS", "points")
    name, tau_text, cycle_text = parts
    try:
        tau, cycle = float(tau_text), float(cycle_text)
    except ValueError:
        raise BreakevenError(
            "{0}: got " + shown + ", expected LABEL:ACCEPT_LEN:CYCLE_MS with numbers "
            "for ACCEPT_LEN [tokens/cycle] and CYCLE_MS [ms]",
            "points",
        ) from None
    if not (1 <= tau <= LARGEST_POINT and 0 < cycle < math.inf):
        raise BreakevenError(
            "{0}: got " + shown + f", expected ACCEPT_LEN in [1, {LARGEST_POINT:g}] "
            "tokens/cycle and CYCLE_MS a finite number > 0 ms",
            "points",
        )
    if step_ms is None:
        raise BreakevenError(
            "{0}: needs the baseline's step: give {1} or {2}", "points", "baseline_tok_s", "step_ms"
        )
    if not cycle / step_ms <= LARGEST_POINT:
        raise BreakevenError(
            "{0}: got " + shown + f", a cycle of {cycle / step_ms:g} baseline steps, "
            f"too many to draw (at most {LARGEST_POINT:g})",
            "points",
        )
    return tau, cycle / step_ms, name


def _placed(from_csv: str) -> list[tuple[Any, ...]]:
    """Every speculative run of a measurements CSV, placed as check pairs them."""
    data = check_file(from_csv).to_dict()
    placed = pictures.run_points(data["comparisons"], data["baselines"])
    if not placed:
        raise BreakevenError(
            "{0}: " + escape_braces(from_csv) + " has no speculative run with an accept_len "
            "and a measured rate or a cycle cost to place",
            "from_csv",
        )
    return placed


def surface_figure(
    *,
    alpha_k: bool = False,
    k_max: int = 16,
    label: str = "prediction",
    points: Sequence[str] = (),
    from_csv: str | None = None,
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
) -> Any:
    """The speedup surface with its break-even line, the inputs' operating point marked.

    Parameters
    ----------
    alpha_k : bool
        Draw over (alpha, k) for the cost ratio or cycle/step of the inputs, instead of
        over (accept_len, cycle/step).
    k_max : int
        Largest k of the (alpha, k) surface [draft tokens].
    label : str
        Label of the point the inputs place.
    points : sequence of str
        More runs to place, ``LABEL:ACCEPT_LEN:CYCLE_MS`` (see :func:`surface_point`).
    from_csv : str, optional
        Place every speculative run of this measurements CSV.
    baseline_tok_s, step_ms, verify_ms, draft_ms, overhead_ms, cycle_ms
        The prediction's baseline, as a rate [tok/s] or a step [ms], and its cycle, as its
        costs or measured [ms] (see :func:`breakeven.prediction.predict.predict`).
    accept_len, alpha, k, per_position, cost_ratio
        Its acceptance [tokens/cycle], or a per-token probability at ``k`` or per-position
        rates [fraction]; Leviathan's cost ratio [x].  None of these: an empty surface.
    """
    inputs = {
        "baseline_tok_s": baseline_tok_s,
        "step_ms": step_ms,
        "verify_ms": verify_ms,
        "draft_ms": draft_ms,
        "overhead_ms": overhead_ms,
        "cycle_ms": cycle_ms,
        "accept_len": accept_len,
        "alpha": alpha,
        "k": k,
        "per_position": per_position,
        "cost_ratio": cost_ratio,
    }
    p = predict(**inputs) if any(v is not None for v in inputs.values()) else None
    ratio = p.breakeven_accept_len / p.target_speedup if p and p.breakeven_accept_len else None
    if alpha_k:
        return _alpha_k_surface(p, ratio, k_max, label)
    placed = _prediction_point(p, ratio, label)
    step = p.step_ms if p is not None else None
    placed += [surface_point(text, step) for text in points]
    if from_csv is not None:
        placed += _placed(from_csv)
    title = pictures.prediction_title(p.to_dict()) if p is not None else None
    return pictures.surface_around(placed, title=title)


def _alpha_k_surface(p: Any, ratio: float | None, k_max: int, label: str) -> Any:
    """``surface_figure(alpha_k=True)``: the surface over (alpha, k) for the prediction ``p``'s
    cost ratio, or its cycle/step ``ratio``, with its (alpha, k) marked where it has one."""
    if p is None or (p.cost_ratio is None and ratio is None):
        raise BreakevenError(
            # "-k" as the command line says it, not all of its spellings.
            "{0} needs the cycle cost: {1} with -k, or a baseline and {2} or {3}",
            "alpha_k",
            "cost_ratio",
            "verify_ms",
            "cycle_ms",
        )
    return pictures.surface_alpha_k(
        cost_ratio=p.cost_ratio,
        cycle_over_step=None if p.cost_ratio is not None else ratio,
        k_max=k_max,
        points=[(p.alpha, p.k, label)] if p.alpha is not None and p.k else [],
    )


def _prediction_point(p: Any, ratio: float | None, label: str) -> list[tuple[Any, ...]]:
    """The point the prediction ``p`` places on the (accept_len, cycle/step) surface, if it
    gives both; refused where it lies beyond what the surface is drawn to."""
    placed: list[tuple[Any, ...]] = (
        [(p.accept_len, ratio, label, "given")] if p and p.accept_len and ratio else []
    )
    for x, y, *_ in placed:
        if x > LARGEST_POINT:
            raise BreakevenError(
                "{0}: got " + f"{x!r}, too large to draw the surface to; "
                f"expected at most {LARGEST_POINT:g} tokens/cycle",
                "accept_len",
            )
        if y > LARGEST_POINT:
            raise BreakevenError(
                f"the cycle is {y:g} baseline steps, too many to draw the "
                f"surface to (at most {LARGEST_POINT:g}): check the cycle's and the "
                "baseline's flags"
            )
    return placed


def k_figure(
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
) -> Any:
    """Speedup against k, the best k marked, from
    :func:`breakeven.jobs.inputs.optimize_from_files`'s inputs (without its tree search).

    Parameters
    ----------
    alpha, per_position, accept_len_by_k, cost_ratio
        Acceptance: a per-token probability, per-position rates [fraction] or accept_len by
        k [tokens/cycle]; Leviathan's cost ratio [x].
    baseline_tok_s, step_ms, verify_ms, verify_curve, fit
        The baseline [tok/s] or its step [ms]; the verify forward [ms], or a ``tokens,ms``
        CSV of it, interpolated or fitted with ``fit``.
    draft_step_ms, draft_ms, overhead_ms : float, optional
        One draft step, drafting per cycle, other per-cycle cost [ms].
    batch, k_max : int
        Sequences decoded together (with ``verify_curve``); the largest k considered.
    fit_file, fit_group, context
        A fit file, its group and the context [tokens] its costs are priced at.
    """
    result = optimize_from_files(
        alpha=alpha,
        per_position=per_position,
        accept_len_by_k=accept_len_by_k,
        cost_ratio=cost_ratio,
        baseline_tok_s=baseline_tok_s,
        step_ms=step_ms,
        verify_ms=verify_ms,
        verify_curve=verify_curve,
        fit=fit,
        draft_step_ms=draft_step_ms,
        draft_ms=draft_ms,
        overhead_ms=overhead_ms,
        batch=batch,
        k_max=k_max,
        fit_file=fit_file,
        fit_group=fit_group,
        context=context,
    )
    return pictures.speedup_vs_k(result)


def batch_figure(
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
) -> Any:
    """Speedup against batch size, the break-even batch marked, from
    :func:`breakeven.jobs.inputs.batch_from_files`'s inputs.

    Parameters
    ----------
    cost_curve, fit, fit_file, fit_surface, context
        The cost model: a ``tokens,ms`` CSV [ms against tokens per forward], fitted with
        ``fit`` or interpolated, or a fit file's forward surface (which one, and moved to
        ``context`` [tokens]).
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as
        :class:`~breakeven.jobs.inputs.SweepInputs` says.)
    """
    result = batch_from_files(
        cost_curve=cost_curve,
        fit=fit,
        fit_file=fit_file,
        fit_surface=fit_surface,
        context=context,
        accept_len=accept_len,
        k=k,
        alpha=alpha,
        per_position=per_position,
        accept_len_by_k=accept_len_by_k,
        k_max=k_max,
        draft_ms=draft_ms,
        draft_step_ms=draft_step_ms,
        overhead_ms=overhead_ms,
        topk=topk,
        verify_tokens=verify_tokens,
        max_batch=max_batch,
    )
    return pictures.speedup_vs_batch(result)


def schedule_figure(
    *,
    engine: str = "vllm",
    load: str | None = None,
    min_gain: float = 0.02,
    graph_sizes: Sequence[int] | None = None,
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
) -> Any:
    """Speedup against batch for each k, the schedule over them and the break-even batch,
    from :func:`breakeven.jobs.schedules.plan_from_files`'s inputs.

    Parameters
    ----------
    engine, load, min_gain, graph_sizes
        Whose schedule, the load profile file, the least share of throughput a change of k
        keeps [fraction] and the CUDA-graph batch sizes [sequences]; see
        :func:`breakeven.jobs.schedules.plan_from_files`.
    cost_curve, fit, fit_file, fit_surface, context
        The cost model: a ``tokens,ms`` CSV [ms against tokens per forward], fitted with
        ``fit`` or interpolated, or a fit file's forward surface (which one, and moved to
        ``context`` [tokens]).
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as
        :class:`~breakeven.jobs.inputs.SweepInputs` says.)
    """
    grid, schedule = plan_from_files(
        engine=engine,
        load=load,
        min_gain=min_gain,
        graph_sizes=graph_sizes,
        cost_curve=cost_curve,
        fit=fit,
        fit_file=fit_file,
        fit_surface=fit_surface,
        context=context,
        accept_len=accept_len,
        k=k,
        alpha=alpha,
        per_position=per_position,
        accept_len_by_k=accept_len_by_k,
        k_max=k_max,
        draft_ms=draft_ms,
        draft_step_ms=draft_step_ms,
        overhead_ms=overhead_ms,
        topk=topk,
        verify_tokens=verify_tokens,
        max_batch=max_batch,
    )
    return pictures.schedule(grid, schedule)


def check_figure(
    measurements: str,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    cycle_ms: float | None = None,
    fit_file: str | None = None,
) -> Any:
    """Measured against predicted speedup, with y = x and the tolerance band [fraction].

    A prediction needs the cycle's cost: the rows' own ``cycle_ms`` (or ``verify_ms`` and
    ``draft_ms``), else the cost given here: ``cycle_ms`` or ``verify_ms`` plus ``draft_ms``
    [ms] for every speculative run, or a fit file's cycle at each run's k (its group of the
    same model, hardware and method)."""
    cycle = cycle_given(verify_ms, draft_ms, cycle_ms)
    if cycle is not None and fit_file is not None:
        raise BreakevenError("{0} and {1}: give one (the cycle, or a fit)", "fit_file", "cycle_ms")
    data, _ = read_measurements(measurements, columns=COLUMNS_USED, times=TIME_COLUMNS)
    if cycle is not None:
        data = with_cycle(data, cycle)
    elif fit_file is not None:
        data = with_cycle(data, fitted_cycle(data, fit_file), override=False)
    try:
        return pictures.measured_vs_predicted(check(data, tolerance))
    except pictures.NothingToDraw as e:
        raise BreakevenError(escape_braces(f"{measurements}: nothing to draw: {e}")) from None


def sensitivity_figure(
    *,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    accept_len: float,
    verify_ms: float,
    draft_ms: float = 0.0,
    overhead_ms: float = 0.0,
    delta: float = 0.10,
) -> Any:
    """Which input, moved by ``delta`` down and up, moves the speedup most (a tornado chart).

    Parameters
    ----------
    baseline_tok_s, step_ms : float
        The baseline, as a rate [tok/s] or a step [ms]: one of them.
    accept_len : float
        Mean tokens emitted per cycle, bonus token included [tokens/cycle].
    verify_ms, draft_ms, overhead_ms : float
        The cycle's costs [ms]: a target forward over k + 1 tokens, all drafting in a cycle,
        and other per-cycle cost.
    delta : float
        How far each input is moved, down and up [fraction].
    """
    if (baseline_tok_s is None) == (step_ms is None):
        raise BreakevenError("give one of {0} or {1}", "baseline_tok_s", "step_ms")
    step = step_ms if step_ms is not None else step_ms_from_baseline(baseline_tok_s)
    return pictures.tornado(
        sensitivity(
            accept_len=accept_len,
            step_ms=step,
            verify_ms=verify_ms,
            draft_ms=draft_ms,
            overhead_ms=overhead_ms,
            delta=delta,
        )
    )


__all__ = [
    "LARGEST_POINT",
    "batch_figure",
    "check_figure",
    "k_figure",
    "schedule_figure",
    "sensitivity_figure",
    "surface_figure",
    "surface_point",
]
