"""A measurements CSV checked, as ``breakeven check`` does it: :func:`check_from_file`, and each
run set against a schedule (``--schedule``), a fit file (``--fit-file``) and a traffic mix
(``--mix``), which ``compare`` sets its runs against too.

Kept apart from :mod:`breakeven.jobs.measure` so that checking a file imports only what the check
needs (no polars, no scipy.optimize: ``benchmarks/check_speed.py`` times the whole command); the
schedule and fit readers are imported where a flag asks for them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.iotools.schedulefile import read_schedule
from breakeven.measurements.check import CheckResult, check_file
from breakeven.measurements.workload import mix_answers, parse_mix


def with_schedule(result: Any, schedule_file: str | None) -> Any:
    """``result`` with each of its runs against a schedule's prediction at its batch.

    Parameters
    ----------
    result : CheckResult or CompareResult
        A check (its comparisons are the runs) or a comparison (its runs); returned as it is
        without ``schedule_file``.
    schedule_file : str, optional
        What ``breakeven schedule --json`` printed.

    Returns
    -------
    CheckResult or CompareResult
        ``result`` with ``schedule_check`` (:func:`breakeven.planning.schedule.against`, at the
        result's tolerance).
    """
    if schedule_file is None:
        return result
    from breakeven.planning.schedule import against  # lazy: scipy.optimize, for --schedule only

    checked = against(_runs_of(result), read_schedule(schedule_file), result.tolerance)
    return replace(result, schedule_check=tuple(checked))


def with_fit(result: Any, fit_file: str | None) -> Any:
    """``result`` with each of its runs against the speedup a fit file predicts at its k,
    with the prediction's interval.

    Parameters
    ----------
    result : CheckResult or CompareResult
        A check (its comparisons are the runs) or a comparison (its runs); returned as it is
        without ``fit_file``.
    fit_file : str, optional
        What ``breakeven fit --out`` wrote.

    Returns
    -------
    CheckResult or CompareResult
        ``result`` with ``fit_check`` (:func:`breakeven.fitting.saved.against_fit`, at the
        result's tolerance).
    """
    if fit_file is None:
        return result
    from breakeven.fitting.saved import against_fit  # lazy: scipy.optimize, for --fit-file only

    checked = against_fit(_runs_of(result), fit_file, result.tolerance)
    return replace(result, fit_check=tuple(checked))


def _runs_of(result: Any) -> list[dict[str, Any]]:
    """A check's comparisons, or a comparison's runs, as plain data: what is set against a
    schedule or a fit."""
    data = result.to_dict()
    return data["comparisons"] if isinstance(result, CheckResult) else data["runs"]


def with_mix(result: Any, mix: str | dict[str, float] | None) -> Any:
    """``result`` with each run's speedup over a traffic ``mix`` (``code=0.6,chat=0.3``: each
    category's share of the decoded tokens; :func:`breakeven.measurements.workload.mix_answers`), the
    categories that lose and the break-even mix.  Returned as it is without ``mix``; refused
    in one line naming ``mix`` where no row has a category."""
    if mix is None:
        return result
    shares = parse_mix(mix)
    if not result.categories:
        raise BreakevenError(
            "{0} needs rows with a category (bench --prompts FILE with a category field): "
            "none has one",
            "mix",
        )
    return replace(result, mix=mix_answers(result.categories, shares))


def check_from_file(
    measurements: str,
    tolerance: float = DEFAULT_TOLERANCE,
    schedule_file: str | None = None,
    fit_file: str | None = None,
    mix: str | dict[str, float] | None = None,
    slo: str | None = None,
) -> CheckResult:
    """:func:`breakeven.measurements.check.check_file`, each run against a schedule and a fit, and over a
    traffic mix, if given.

    Parameters
    ----------
    measurements : str
        A measurements CSV.
    tolerance : float
        Relative tolerance [fraction].
    schedule_file : str, optional
        See :func:`with_schedule`.
    fit_file : str, optional
        See :func:`with_fit`.
    mix : str or dict, optional
        See :func:`with_mix`.
    slo : str, optional
        A service-level objective (:func:`breakeven.measurements.slo.parse_slo`).
    """
    result = with_schedule(check_file(measurements, tolerance, slo=slo), schedule_file)
    return with_mix(with_fit(result, fit_file), mix)
