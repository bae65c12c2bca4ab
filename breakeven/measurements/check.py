"""Check measured speedups against the model, and catch stale or drifting baselines.

Each speculative run (``num_spec_tokens > 0``) is paired with the baseline runs
(``num_spec_tokens == 0``) of the same model, hardware and concurrency.  Rows
that share a label, k, method and environment fingerprint are repeats of one
run.  For each pairing: the measured speedup (speculative over baseline
``tok_s``, each a ratio of sums) with a bootstrap confidence interval whose unit
is the launch, the speedup the cycle model predicts from the run's ``accept_len``
and cycle cost, their residual, and the cycle cost the measurement implies,
``1000 * accept_len / tok_s``.

A baseline is judged by its *launch* (one server start: ``launch_id``,
``launched_at``; :mod:`breakeven.core.provenance`), never by its URL.  It is fair when
it comes from the run's own launch, or from a launch whose settings (the
fingerprint: ``env`` less speculation and less what the client chose) equal the
run's launch's where both know their server's environment.  Otherwise it is
``baseline_unverified`` (another launch, how long before, nothing recorded of
its environment) or ``stale_baseline`` (what differs, named, with both
launches' times): the case study's NCCL variables, lost on a restart.

This module holds the entry points (:func:`check`, :func:`check_file`) and their result; the
steps are in :mod:`~breakeven.measurements.normalise` (the rows as one frame),
:mod:`~breakeven.measurements.baselines` (the baselines, and the one a run is compared with),
:mod:`~breakeven.measurements.pairing` (each run against its baseline) and
:mod:`~breakeven.measurements.flags` (the data-quality flags).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.provenance import fingerprint
from breakeven.core.quantities import DEFAULT_TOLERANCE, plain_json
from breakeven.iotools.csvfile import read_measurements
from breakeven.measurements.baselines import Baseline, baselines
from breakeven.measurements.flags import (
    FLAGS,
    LINES_SHOWN,
    Flag,
    ServerCheck,
    _Findings,
    cross_check,
    flag_rows,
)
from breakeven.measurements.intervals import SpeedupInterval
from breakeven.measurements.nodes import across_nodes
from breakeven.measurements.normalise import COLUMNS_USED, TIME_COLUMNS, normalise
from breakeven.measurements.pairing import Comparison, pair
from breakeven.measurements.positions import PositionRow, by_run
from breakeven.measurements.slo import BreakevenRate, LevelRow, Slo, parse_slo, slo_levels
from breakeven.measurements.workload import CategoryRow, MixAnswer, as_dicts, by_category
from breakeven.model import cycle_ms as cycle_of


@dataclass(frozen=True)
class CheckResult:
    """Every comparison, and every flag with its sentence."""

    comparisons: tuple[Comparison, ...]
    """One per speculative run."""
    flags: tuple[Flag, ...]
    """Findings, most serious first."""
    tolerance: float
    """Relative tolerance used for drift, mismatch and noise [fraction]."""
    server_checks: tuple[ServerCheck, ...] = ()
    """Runs whose server log and client benchmark were compared."""
    intervals: tuple[SpeedupInterval, ...] = ()
    """Each comparison's interval, with what it covers and how it was estimated (``compare``
    prints those)."""
    baselines: tuple[Baseline, ...] = ()
    """The baseline runs of each configuration and environment (``compare``'s report places a
    run against each)."""
    schedule_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a schedule's k and predicted speedup at its batch
    (:func:`breakeven.jobs.checking.with_schedule`); None when no schedule was given."""
    fit_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a fit file's predicted speedup at its k, with the prediction's
    interval (:func:`breakeven.jobs.checking.with_fit`); None when no fit file was given."""
    categories: tuple[CategoryRow, ...] = ()
    """Each speculative run's rows of each workload category against the baseline's of that
    category (:func:`breakeven.measurements.workload.by_category`); none where no row has a category."""
    mix: tuple[MixAnswer, ...] = ()
    """Each run's speedup over a traffic mix (:func:`breakeven.jobs.checking.with_mix`)."""
    positions: tuple[PositionRow, ...] = ()
    """Each speculative run's acceptance at each draft position and its accept_len at every
    smaller k (:func:`breakeven.measurements.positions.by_run`); none where no row gives them."""
    levels: tuple[LevelRow, ...] = ()
    """Each run and its baseline at each level, from the rows of its requests: latency
    percentiles, and with an SLO goodput and attainment (:mod:`breakeven.measurements.slo`);
    none where no row gives a request's latency."""
    breakeven_rates: tuple[BreakevenRate, ...] = ()
    """Each run's break-even request rate over its open-loop levels
    (:func:`breakeven.measurements.slo.breakeven_rates`)."""
    slo: str | None = None
    """The SLO applied (:func:`breakeven.measurements.slo.parse_slo`, normalised); None: none."""
    slo_note: str = ""
    """Why the SLO could not be applied (no row gives a request's latency); empty otherwise."""
    across_nodes: tuple[dict[str, Any], ...] = ()
    """A cluster's rows (``sweep --ray``'s ``node``): each k at each load pooled over the nodes,
    the node as a block (:func:`breakeven.measurements.nodes.across_nodes`); none off a
    cluster."""

    def to_dict(self) -> dict[str, Any]:
        """``comparisons``, ``flags`` (each ``{code, message, lines}``) and ``tolerance``;
        ``categories`` and ``mix`` where rows have a category and a mix was given; and
        ``schedule_check`` and ``fit_check`` when a schedule or fit file was given; NaN (not
        measured) is None, an infinity (an overflow) is kept for the caller to refuse."""
        data = {
            "comparisons": [plain_json(c, keep_infinite=True) for c in self.comparisons],
            "flags": [
                {
                    "code": f.code,
                    "message": f.message,
                    "lines": list(f.lines),
                    "line_count": max(f.line_count, len(f.lines)),
                }
                for f in self.flags
            ],
            "server_checks": [asdict(c) for c in self.server_checks],
            "baselines": [plain_json(b, keep_infinite=True) for b in self.baselines],
            "tolerance": self.tolerance,
        }
        if self.categories:
            data["categories"] = as_dicts(self.categories)
        if self.mix:
            data["mix"] = as_dicts(self.mix)
        if self.positions:
            data["positions"] = as_dicts(self.positions)
        if self.across_nodes:
            data["across_nodes"] = [plain_json(row) for row in self.across_nodes]
        data.update(slo_dict(self))
        if self.schedule_check is not None:
            data["schedule_check"] = [dict(row) for row in self.schedule_check]
        if self.fit_check is not None:
            data["fit_check"] = [plain_json(dict(row)) for row in self.fit_check]
        return data

    def to_frame(self) -> Any:
        """The comparisons as a pandas DataFrame."""

        return pd.DataFrame([asdict(c) for c in self.comparisons])

    def report(self) -> str:
        """What ``breakeven check`` prints: the comparisons, the server cross-checks, the
        flags, and each run against a schedule when one was given."""
        return render.check_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (the comparisons, every column), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.check_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.check_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Measured against predicted speedup with y = x and the tolerance band (``breakeven
        plot check``); returns the axes.  Raises :class:`breakeven.render.plot.NothingToDraw` when
        no run has both speedups."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.measured_vs_predicted(self.to_dict(), ax)


def check(
    data: Any,
    tolerance: float = DEFAULT_TOLERANCE,
    *,
    named_pairs: bool = False,
    slo: str | Slo | None = None,
) -> CheckResult:
    """Pair speculative runs with baselines; compare measured and predicted speedups; flag.

    The steps, each a function that ``compare`` reuses:
    :func:`~breakeven.measurements.normalise.normalise` the columns,
    :func:`~breakeven.measurements.flags.flag_rows` (acceptance out of range, ITL for TPOT),
    :func:`~breakeven.measurements.flags.cross_check` server log against client benchmark,
    :func:`~breakeven.measurements.baselines.baselines` (and their drift), then
    :func:`~breakeven.measurements.pairing.pair` each speculative run with its baseline and the
    model's prediction.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows in the measurement schema, as :func:`breakeven.iotools.read_measurements`
        returns them (a ``line`` column, when present, names rows in flags).
    tolerance : float
        Relative tolerance for baseline drift, prediction mismatch and
        server/client agreement (default :data:`breakeven.core.quantities.DEFAULT_TOLERANCE`).
    named_pairs : bool
        The caller named which rows are the baseline of which (``compare``'s BASELINE and
        SPEC): no ``unnamed_pairing`` flag, which warns where the rows alone pair files that
        name neither model nor hardware.
    slo : str or Slo, optional
        A service-level objective, such as ``'tpot_ms<=50,ttft_ms:p90<=2000'``
        (:func:`breakeven.measurements.slo.parse_slo`): each level's goodput and attainment,
        and the break-even request rate by goodput.
    """
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise BreakevenError(
            "{0}: got " + f"{tolerance!r}, expected a fraction in (0, 1)", "tolerance"
        )
    if isinstance(slo, str):
        slo = parse_slo(slo)
    df = normalise(data)
    findings = _Findings()
    flag_rows(df, findings)
    server_checks = cross_check(df, tolerance, findings)
    base = baselines(df, tolerance, findings)
    comparisons, intervals, members = pair(df, base, tolerance, findings, named_pairs=named_pairs)
    levels, rates, note = slo_levels(df, comparisons, members, slo)
    nodes = _across_nodes(comparisons, findings)
    order = list(FLAGS)
    flags = sorted(findings.flags, key=lambda f: order.index(f.code))
    return CheckResult(
        tuple(comparisons),
        tuple(flags),
        float(tolerance),
        tuple(server_checks),
        tuple(intervals),
        tuple(base.summary),
        categories=by_category(df[~df["echo"]]),
        positions=by_run(df[~df["echo"]]),
        levels=levels,
        breakeven_rates=rates,
        slo=slo.text if slo is not None else None,
        slo_note=note,
        across_nodes=nodes,
    )


def _across_nodes(comparisons: Sequence[Any], findings: _Findings) -> tuple[dict[str, Any], ...]:
    """A cluster's comparisons pooled over its nodes; ``node_drift`` flagged where they
    disagree, on the lines of every node's run."""
    pooled = across_nodes(comparisons)
    for row, group in pooled:
        if row["drift"]:
            at = f"{row['label']} at concurrency {row['concurrency']:g}"
            lines = sorted({line for c in group for line in c.lines})
            findings.add(
                Flag(
                    "node_drift",
                    f"{at}: {row['why']}; the pooled interval covers them",
                    tuple(lines[:LINES_SHOWN]),
                ),
                lines,
            )
    return tuple(row for row, _ in pooled)


def cycle_given(
    verify_ms: float | None = None, draft_ms: float | None = None, cycle_ms: float | None = None
) -> float | None:
    """The cycle the costs given make [ms]: ``cycle_ms``, or ``verify_ms`` plus ``draft_ms``
    (None: no costs given); a BreakevenError naming the flags where they conflict."""
    if cycle_ms is not None and verify_ms is not None:
        raise BreakevenError(
            "{0} and {1}: give one (the cycle, or its parts)", "cycle_ms", "verify_ms"
        )
    if draft_ms is not None and verify_ms is None:
        raise BreakevenError(
            "{0}: needs {1} (the cycle is verify + draft)", "draft_ms", "verify_ms"
        )
    if cycle_ms is not None:
        return cycle_ms
    return float(cycle_of(verify_ms, draft_ms or 0.0)) if verify_ms is not None else None


def with_cycle(rows: Any, cycle: float | Any, *, override: bool = True) -> Any:
    """``rows`` with ``cycle`` [ms] (a number, or a Series by row; NaN: none) as the
    ``cycle_ms`` of each speculative row with a rate or a speedup: a prediction for it.  A
    cycle typed on the command line overrides the rows' own (``override``); a fitted one
    fills only the rows that record none.  A row without a rate is not a run."""
    rows = rows.copy()
    given = rows["cycle_ms"] if "cycle_ms" in rows.columns else math.nan
    given = pd.to_numeric(pd.Series(given, index=rows.index), errors="coerce")
    k = pd.to_numeric(rows.get("num_spec_tokens", pd.Series(0, index=rows.index)), errors="coerce")
    rate = pd.to_numeric(rows.get("tok_s", pd.Series(math.nan, index=rows.index)), errors="coerce")
    speedup = pd.to_numeric(
        rows.get("speedup", pd.Series(math.nan, index=rows.index)), errors="coerce"
    )
    cycle = pd.Series(cycle, index=rows.index, dtype=float)
    takes = (k.isna() | (k > 0)) & (rate.notna() | speedup.notna()) & cycle.notna()
    if not override:
        takes &= given.isna()
    rows["cycle_ms"] = given.where(~takes, cycle)
    return rows


def check_file(
    path: str, tolerance: float = DEFAULT_TOLERANCE, *, slo: str | Slo | None = None
) -> CheckResult:
    """:func:`check` on a measurements CSV."""
    if isinstance(slo, str):
        slo = parse_slo(slo)  # before the file is read
    data, _ = read_measurements(path, columns=COLUMNS_USED, times=TIME_COLUMNS)
    return check(data, tolerance, slo=slo)


def slo_dict(result: Any) -> dict[str, Any]:
    """A result's SLO part for ``to_dict()``: ``levels`` and ``breakeven_rates`` where rows give
    a request's latency, ``slo`` where one was given and ``slo_note`` where it could not be
    applied."""
    data: dict[str, Any] = {}
    if result.slo is not None:
        data["slo"] = result.slo
    if result.slo_note:
        data["slo_note"] = result.slo_note
    if result.levels:
        data["levels"] = [plain_json(r.to_dict()) for r in result.levels]
    if result.breakeven_rates:
        data["breakeven_rates"] = [plain_json(r.to_dict()) for r in result.breakeven_rates]
    return data


__all__: Sequence[str] = (
    "FLAGS",
    "CheckResult",
    "Comparison",
    "Flag",
    "ServerCheck",
    "check",
    "check_file",
    "cycle_given",
    "fingerprint",
    "with_cycle",
)
