"""``breakeven compare``: from a baseline run and speculative runs to a verdict, in one step.

Each run is anything ``ingest`` reads (logs, plain or compressed; bench JSON
or printed tables; ``/metrics`` scrapes) or a measurements CSV, or several
files of one run joined with ``+``.  The runs are read, labelled, put side by
side and checked (:func:`breakeven.measurements.check.check`: pairing, flags, prediction
from the costs given); each speedup then gets an interval whose unit of
repetition is the run (:mod:`breakeven.measurements.intervals`), and a headline in words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from breakeven import render
from breakeven.core.choices import FAIL_IF
from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.quantities import DEFAULT_TOLERANCE, plain_json
from breakeven.iotools.runs import RunInput, concat_frames, constant_column, parse_run, read_run
from breakeven.measurements.check import check, cycle_given, slo_dict, with_cycle
from breakeven.measurements.intervals import ADVICE_ONE_LAUNCH, MIN_VALUES
from breakeven.measurements.normalise import COLUMNS_USED
from breakeven.measurements.slo import Slo, parse_slo
from breakeven.measurements.workload import as_dicts
from breakeven.model import _step_ms, breakeven_accept_len

__all__ = [
    "FAIL_IF",
    "CompareResult",
    "RunComparison",
    "RunInput",
    "compare",
    "parse_run",
]


@dataclass(frozen=True)
class RunComparison:
    """One speculative run against the baseline (at one concurrency)."""

    label: str
    """The speculative run."""
    baseline: str
    """The baseline run."""
    model: str
    """Target model ("" where the sources do not say)."""
    hardware: str
    """GPUs and interconnect ("" where the sources do not say)."""
    fingerprint: str
    """The run's environment (:func:`breakeven.measurements.check.fingerprint`)."""
    concurrency: float
    """Requests decoded together [sequences] (NaN where the sources do not say)."""
    num_spec_tokens: float
    """k [tokens]."""
    tok_s: float
    """Mean per-sequence decode rate with speculation [tok/s]."""
    baseline_tok_s: float
    """Mean per-sequence decode rate of the baseline [tok/s]."""
    measured_speedup: float
    """tok_s / baseline_tok_s [x]."""
    ci_low: float
    """Lower end of the 95% interval of measured_speedup [x]."""
    ci_high: float
    """Upper end [x]."""
    interval_covers: str
    """What the interval covers: within one run, or across N runs."""
    interval_method: str
    """How each side's error was estimated (batch means, runs)."""
    verdict: str
    """'faster', 'slower', 'within noise' (the interval holds 1) or 'no interval'."""
    accept_len: float
    """Mean accept_len of the speculative rows [tokens/cycle]."""
    breakeven_accept_len: float
    """accept_len at which this cycle breaks even: cycle_ms / step_ms [tokens/cycle]."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s: the cycle the measurement implies [ms]."""
    cycle_ms: float
    """The cycle cost given (verify + draft, or the cycle) [ms]."""
    predicted_speedup: float
    """accept_len * step_ms / cycle_ms, from the costs given [x]."""
    residual: float
    """measured_speedup - predicted_speedup [x]."""
    flags: tuple[str, ...]
    """Codes of check's flags about this run."""
    headline: str
    """The answer in one short sentence, and the codes of the flags on the run."""
    launch_note: str = ""
    """Why the baseline's launch is stale or unverified, in a clause (empty when it is fair):
    what differs between the launches, or how long before the run the baseline ran."""
    launch_spread: float = math.nan
    """The fastest launch's rate over the slowest's, on the side that disagrees more [x]
    (check's :attr:`~breakeven.measurements.pairing.Comparison.launch_spread`)."""
    request_rate: float = math.nan
    """An open-loop level's offered rate [req/s] (``concurrency`` is then the client's cap);
    NaN for a closed-loop level."""


@dataclass(frozen=True)
class CompareResult:
    """Every speculative run against the baseline, check's flags, and advice."""

    baseline: str
    runs: tuple[RunComparison, ...]
    flags: tuple[Any, ...]
    """check's flags (code, message, lines of the combined rows)."""
    advice: tuple[str, ...] = ()
    tolerance: float = DEFAULT_TOLERANCE
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each run's files."""
    baselines: tuple[Any, ...] = ()
    """check's baselines (:class:`breakeven.measurements.baselines.Baseline`): each configuration
    and environment's baseline runs, which a report places every run against."""
    schedule_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a schedule's k and predicted speedup at its batch
    (:func:`breakeven.jobs.checking.with_schedule`); None when no schedule was given."""
    fit_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a fit file's predicted speedup at its k, with the prediction's
    interval (:func:`breakeven.jobs.checking.with_fit`); None when no fit file was given."""
    categories: tuple[Any, ...] = ()
    """Each run's rows of each workload category against the baseline's of that category
    (:class:`breakeven.measurements.workload.CategoryRow`); none where no row has a category."""
    mix: tuple[Any, ...] = ()
    """Each run's speedup over a traffic mix (:class:`breakeven.measurements.workload.MixAnswer`)."""
    positions: tuple[Any, ...] = ()
    """Each run's acceptance by draft position and accept_len at every smaller k
    (:class:`breakeven.measurements.positions.PositionRow`); none where no row gives them."""
    levels: tuple[Any, ...] = ()
    """Each run and the baseline at each level (:class:`breakeven.measurements.slo.LevelRow`):
    latency percentiles, and with an SLO goodput and attainment."""
    breakeven_rates: tuple[Any, ...] = ()
    """Each run's break-even request rate (:class:`breakeven.measurements.slo.BreakevenRate`)."""
    slo: str | None = None
    """The SLO applied, normalised; None: none."""
    slo_note: str = ""
    """Why the SLO could not be applied; empty otherwise."""

    @property
    def headlines(self) -> tuple[str, ...]:
        return tuple(r.headline for r in self.runs)

    def failed(self, condition: str | None) -> bool:
        """Whether ``condition`` (one of :data:`FAIL_IF`) holds."""
        if condition is None:
            return False
        if condition == "slower":
            return any(r.verdict == "slower" for r in self.runs)
        if condition == "not-faster":
            return not self.runs or any(r.verdict != "faster" for r in self.runs)
        if condition == "flagged":
            return bool(self.flags)
        raise BreakevenError(
            "{0}: got " + repr(condition) + f", expected one of {FAIL_IF}", "fail_if"
        )

    def to_dict(self) -> dict[str, Any]:
        """``baseline``, ``runs`` (one row per speculative run), check's ``flags``, ``advice``,
        ``tolerance``, ``sources`` and ``baselines``, ``categories`` and ``mix`` where rows
        have a category and a mix was given, ``positions`` where rows give acceptance by
        draft position, and ``schedule_check`` and ``fit_check`` when
        a schedule or fit file was given; a number that is not finite is None."""
        data = {
            "baseline": self.baseline,
            "runs": [plain_json(asdict(r)) for r in self.runs],
            "flags": [{"code": f.code, "message": f.message} for f in self.flags],
            "advice": list(self.advice),
            "tolerance": self.tolerance,
            "sources": {k: list(v) for k, v in self.sources.items()},
            "baselines": [plain_json(asdict(b)) for b in self.baselines],
        }
        if self.categories:
            data["categories"] = as_dicts(self.categories)
        if self.mix:
            data["mix"] = as_dicts(self.mix)
        if self.positions:
            data["positions"] = as_dicts(self.positions)
        data.update(slo_dict(self))
        if self.schedule_check is not None:
            data["schedule_check"] = [dict(row) for row in self.schedule_check]
        if self.fit_check is not None:
            data["fit_check"] = [plain_json(dict(row)) for row in self.fit_check]
        return data

    def report(self) -> str:
        """What ``breakeven compare`` prints: the headlines, a row per speculative run,
        check's flags and advice, and each run against a schedule when one was given."""
        return render.compare_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (a row per speculative run, every column), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.compare_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.compare_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Every run placed on the speedup surface (the first figure of ``compare --report``);
        returns the axes.  Raises :class:`breakeven.render.plot.NothingToDraw` when no run has an
        accept_len and a rate."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.runs_surface(self.to_dict(), ax)


def _headline(
    label: str,
    baseline: str,
    speedup: float,
    low: float,
    high: float,
    verdict: str,
    covers: str,
    where: str,
    flags: Sequence[str],
    spread: float = math.nan,
) -> str:
    """The answer in one short sentence, then the codes of the flags check raised on the run
    (the flags' messages, and what the interval covers, follow the headline in full)."""
    said = _said(label, baseline, speedup, low, high, verdict, covers, where, spread)
    return said + (f"; flagged: {', '.join(flags)}" if flags else "")


def _said(
    label: str,
    baseline: str,
    speedup: float,
    low: float,
    high: float,
    verdict: str,
    covers: str,
    where: str,
    spread: float = math.nan,
) -> str:
    interval = f"95% interval {low:.2f}-{high:.2f}, {covers}"
    if verdict == "too noisy":
        return (
            f"{label}{where}: too noisy to decide, launches of one configuration disagree "
            f"up to {spread:.2f}x; no speedup is measured (launches_disagree: a quiet host, "
            "more --repeats)"
        )
    if verdict == "looks swapped":
        return (
            f"{label} and {baseline} look swapped{where}: the baseline shows speculation and "
            f"{label} none; as given, {speedup:.2f}x (swapped_pair)"
        )
    if verdict == "implausible":
        return (
            f"{label}{where}: {speedup:.2f}x is above k + 1, which no cycle can give; a rate "
            "is not per sequence or not of this load (speedup_above_bound)"
        )
    if math.isnan(speedup):
        return f"{label}{where}: no speedup could be measured against {baseline}"
    if verdict == "faster":
        return f"{label} is {speedup:.2f}x faster than {baseline}{where} ({interval})"
    if verdict == "slower":
        return f"{label} is slower than {baseline}{where}: {speedup:.2f}x ({interval})"
    if verdict == "within noise":
        return f"{label} is within noise of {baseline}{where}: {speedup:.2f}x ({interval})"
    return f"{label}: {speedup:.2f}x the {baseline}'s rate{where}, no interval"


def compare(
    baseline: RunInput,
    specs: Sequence[RunInput],
    *,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    cycle_ms: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    slo: str | Slo | None = None,
) -> CompareResult:
    """Each speculative run in ``specs`` against ``baseline``.

    Parameters
    ----------
    verify_ms, draft_ms, cycle_ms : float, optional
        The speculative cycle's costs [ms], for a predicted speedup and the
        break-even accept_len: ``verify_ms`` (and ``draft_ms``), or ``cycle_ms``.
    tolerance : float
        As :func:`breakeven.measurements.check.check`'s.
    slo : str or Slo, optional
        As :func:`breakeven.measurements.check.check`'s: goodput, attainment and the
        break-even request rate under it.
    """
    if isinstance(slo, str):
        slo = parse_slo(slo)  # before the runs are read
    cycle = cycle_given(verify_ms, draft_ms, cycle_ms)
    labels = [baseline.label, *(s.label for s in specs)]
    if len(set(labels)) != len(labels):
        raise BreakevenError(
            "{0}: two runs are named alike ("
            + escape_braces(", ".join(labels))
            + "); name them with LABEL=PATH",
            "runs",
        )
    # The user named the pairs (BASELINE, SPEC): no unnamed_pairing flag.
    result = check(_rows(baseline, specs, cycle), tolerance, named_pairs=True, slo=slo)
    runs = [
        _run(c, interval, baseline.label, cycle, _several(result, c.label))
        for c, interval in zip(result.comparisons, result.intervals, strict=True)
        if c.label in labels[1:]
    ]
    return CompareResult(
        baseline.label,
        tuple(runs),
        result.flags,
        _advice(runs, specs),
        tolerance,
        {r.label: r.paths for r in (baseline, *specs)},
        result.baselines,
        categories=tuple(c for c in result.categories if c.label in labels[1:]),
        positions=tuple(p for p in result.positions if p.label in labels[1:]),
        levels=result.levels,
        breakeven_rates=tuple(r for r in result.breakeven_rates if r.label in labels[1:]),
        slo=result.slo,
        slo_note=result.slo_note,
    )


def _rows(baseline: RunInput, specs: Sequence[RunInput], cycle: float | None) -> Any:
    """Every run's rows, one below the other, for check: the cycle given on each speculative
    row with a rate, and a line number on every row."""
    base_rows = read_run(baseline, baseline=True, columns=COLUMNS_USED)
    spec_rows = []
    for spec in specs:
        rows = read_run(spec, columns=COLUMNS_USED)
        if cycle is not None:  # on the rows with a rate: a row without one is not a run
            rows = with_cycle(rows, cycle)
        spec_rows.append(rows)
    _share_identity(base_rows, spec_rows)
    data = concat_frames([base_rows, *spec_rows])
    numbered = pd.to_numeric(data["line"], errors="coerce")
    data["line"] = numbered.fillna(pd.Series(range(2, len(data) + 2))).astype(int)
    return data


def _run(c: Any, interval: Any, baseline: str, cycle: float | None, several: bool) -> RunComparison:
    """One of check's comparisons as compare's row, with its headline."""
    step = float(_step_ms(c.baseline_tok_s)) if c.baseline_tok_s > 0 else math.nan
    breakeven = (
        float(breakeven_accept_len(cycle, step)) if cycle is not None and step > 0 else math.nan
    )
    where = (
        f" at concurrency {c.concurrency:g}" if several and not math.isnan(c.concurrency) else ""
    )
    if several and c.request_rate > 0:
        where = f" at {c.request_rate:g} req/s"
    speedup, said = c.measured_speedup, c.verdict  # check's: one speedup, one verdict
    return RunComparison(
        label=c.label,
        baseline=baseline,
        model=c.model,
        hardware=c.hardware,
        fingerprint=c.fingerprint,
        concurrency=c.concurrency,
        num_spec_tokens=c.num_spec_tokens,
        tok_s=c.tok_s,
        baseline_tok_s=c.baseline_tok_s,
        measured_speedup=speedup,
        ci_low=interval.low,
        ci_high=interval.high,
        interval_covers=interval.covers,
        interval_method=interval.method,
        verdict=said,
        accept_len=c.accept_len,
        breakeven_accept_len=breakeven,
        implied_cycle_ms=c.implied_cycle_ms,
        cycle_ms=c.cycle_ms,
        predicted_speedup=c.predicted_speedup,
        residual=c.residual,
        flags=c.flags,
        headline=_headline(
            c.label,
            baseline,
            speedup,
            interval.low,
            interval.high,
            said,
            interval.covers_brief,
            where,
            c.flags,
            c.launch_spread,
        ),
        launch_note=c.launch_note,
        launch_spread=c.launch_spread,
        request_rate=c.request_rate,
    )


def _advice(runs: list[RunComparison], specs: Sequence[RunInput]) -> tuple[str, ...]:
    advice = []
    if any("within one run" in r.interval_covers for r in runs):
        advice.append(ADVICE_ONE_LAUNCH.capitalize() + ".")
    if any(r.verdict == "no interval" for r in runs):
        advice.append(
            f"Record more decode windows or requests: an interval needs at least "
            f"{MIN_VALUES} per run."
        )
    missing = [s.label for s in specs if s.label not in {r.label for r in runs}]
    if missing:
        advice.append(
            f"No comparison for {', '.join(missing)}: see the flags (a baseline at "
            "the same model, hardware and concurrency is needed)."
        )
    return tuple(advice)


def _share_identity(base: Any, specs: list[Any]) -> None:
    """The runs given together are of one deployment: where a side does not say its model or
    hardware and the other says one, it is taken as that (check pairs by them)."""
    for column in ("model", "hardware"):
        sides = [base, *specs]
        said = [
            {str(v) for v in frame[column].dropna().unique()} - {""}
            if column in frame.columns
            else set()
            for frame in sides
        ]
        known = set().union(*said)
        if len(known) != 1:
            continue
        (value,) = known
        for frame, values in zip(sides, said, strict=True):
            if not values:
                frame[column] = constant_column(value, len(frame))


def _several(result: Any, label: str) -> bool:
    return sum(1 for c in result.comparisons if c.label == label) > 1
