"""Each speculative run against its baseline: the measured speedup and its interval, the cycle
model's prediction and residual, and the flags of one pairing (launches that disagree, a pair that
looks swapped, a speedup above k + 1, a baseline from an unnamed file)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.quantities import LAUNCH_SPREAD_LIMIT
from breakeven.core.quantities import number_text as _n
from breakeven.measurements.baselines import CONFIG, _Baselines, _pick_baseline, _Provenance, _Side
from breakeven.measurements.flags import (
    LINES_SHOWN,
    Flag,
    _at_concurrency,
    _cycle_below_step,
    _Findings,
    _lines,
    _mismatch,
    _verdict,
)
from breakeven.measurements.intervals import (
    LaunchSpread,
    SpeedupInterval,
    interval_of,
    sides_and_spreads,
)
from breakeven.measurements.normalise import (
    _group_means,
    _group_numbers,
    _stable_order,
    _values_at,
    key_request_rate,
)
from breakeven.measurements.plausibility import speedup_bound
from breakeven.measurements.sampling import sampling_difference
from breakeven.model import _implied_cycle_ms, _speedup, _step_ms
from breakeven.model.pooling import group_pooled_accept_len


@dataclass(frozen=True)
class Comparison:
    """One speculative run against its baseline."""

    label: str
    """The speculative run's label."""
    model: str
    """Target model."""
    hardware: str
    """GPUs and interconnect."""
    concurrency: float
    """Requests decoded together [sequences]."""
    num_spec_tokens: float
    """k [tokens] (NaN when the source did not say)."""
    spec_method: str
    """Drafting method."""
    runs: int
    """Speculative rows with a tok_s (or a published speedup)."""
    baseline_runs: int
    """Baseline rows compared with."""
    tok_s: float
    """Per-sequence decode rate with speculation [tok/s]: the mean of its launches' rates,
    each a ratio of sums, the tokens its requests decoded over their decode time, where its
    rows give their tokens (completion_tokens), else the mean of its rows' rates (log
    windows); one launch's rate where it has one."""
    baseline_tok_s: float
    """Per-sequence decode rate of the baseline [tok/s], over its launches as ``tok_s`` is."""
    measured_speedup: float
    """tok_s / baseline_tok_s [x]: the speedup of several launches, the same in ``compare``,
    ``check``, ``sweep`` and the report (docs/concepts/intervals.md)."""
    ci_low: float
    """Lower end of the 95% confidence interval of measured_speedup [x]."""
    ci_high: float
    """Upper end of the 95% confidence interval of measured_speedup [x]."""
    verdict: str
    """'faster', 'slower', 'within noise' (the interval holds 1) or 'no interval' (too few
    values or launches: :mod:`breakeven.measurements.intervals`); where the data cannot decide, a verdict
    of :data:`DOUBT`: 'too noisy', 'looks swapped' or 'implausible'."""
    accept_len: float
    """The run's accept_len [tokens/cycle]: pooled from counts, 1 + sum(accepted) /
    sum(drafts), where its rows give their drafts (num_drafts); else their mean."""
    cycle_ms: float
    """Cycle cost from the rows: cycle_ms, or verify_ms + draft_ms [ms]."""
    predicted_speedup: float
    """accept_len * step_ms / cycle_ms, step from the baseline [x]."""
    residual: float
    """measured_speedup - predicted_speedup [x]."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s: the cycle the measurement implies [ms]."""
    flags: tuple[str, ...]
    """Codes of the flags that concern this comparison."""
    lines: tuple[int, ...]
    """Lines of the speculative rows (the first :data:`LINES_SHOWN`)."""
    baseline_lines: tuple[int, ...]
    """Lines of the baseline rows compared with (the first :data:`LINES_SHOWN`)."""
    fingerprint: str = ""
    """The run's environment (:func:`fingerprint`)."""
    launch_note: str = ""
    """Why the baseline's launch is stale or unverified, in a clause (empty when fair)."""
    launch_spread: float = math.nan
    """The fastest launch's rate over the slowest's [x], on whichever side (speculative or
    baseline) disagrees more; NaN where neither side has two launches."""
    request_rate: float = math.nan
    """The level's offered request rate [req/s] (an open-loop level, whose ``concurrency`` is
    the client's cap, NaN where it had none); NaN for a closed-loop level."""


_RUN_KEYS = [*CONFIG, "num_spec_tokens", "spec_method", "label", "fingerprint"]
"""What makes rows repeats of one speculative run."""


@dataclass(frozen=True)
class _RunStats:
    """One speculative run's means over its rows."""

    tau: float
    cycle: float
    verify: float
    draft: float
    published: float
    n_published: int


def pair(
    df: Any, base: _Baselines, tolerance: float, findings: _Findings, *, named_pairs: bool = False
) -> tuple[list[Comparison], list[SpeedupInterval], list[tuple[Any, Any]]]:
    """Each speculative run (rows sharing :data:`_RUN_KEYS`) against its baseline: the same
    configuration (model, hardware and level: a concurrency, or a request rate), in the same
    environment where one ran in it (else ``stale_baseline``); ``unnamed_pairing`` where
    neither model nor hardware is named and the baseline comes from another source file
    (unless ``named_pairs``: the caller named the pairs).  Also each comparison's rows: the
    positions in ``df`` of its speculative rows and of the baseline rows it was compared
    with."""

    # A row with neither a rate, a published speedup nor a cycle cost measures nothing to
    # compare (a decode window after idle time, say): it is not a run of its own.
    measures = np.zeros(len(df), dtype=bool)
    for column in ("tok_s", "speedup", "cycle_ms", "verify_ms"):
        measures |= df[column].notna().to_numpy()
    rows = np.flatnonzero(df["is_spec"].to_numpy() & ~df["echo"].to_numpy() & measures)
    number, first = _group_numbers(df, rows, _RUN_KEYS)
    n = len(first)
    stats = _run_stats(df, rows, number, n)
    order = _stable_order(number, n)  # rows of each group, in file order
    starts = np.searchsorted(number[order], np.arange(n + 1))
    tok = df["tok_s"].to_numpy(dtype=float)[rows]
    decoded = df["decoded"].to_numpy(dtype=float)[rows]
    launch, line = (df[c].to_numpy()[rows] for c in ("launch", "line"))
    shows = df["shows_speculation"].to_numpy()[rows]
    provenance = _Provenance.of(df, rows)
    codes_by_group: dict[int, set[str]] = {}  # the row flags of each group's rows
    if findings.by_line:
        for i in np.flatnonzero(np.isin(line, list(findings.by_line))):
            codes_by_group.setdefault(int(number[i]), set()).update(findings.by_line[int(line[i])])
    key_columns = [_values_at(df[k], rows[first]) for k in _RUN_KEYS]
    caps = df["concurrency"].to_numpy(dtype=float)[rows[first]]
    sampling = df["sampling"].astype(object).to_numpy()
    # Each run's side from its launches, all runs in one pass (rows in file order per run).
    spec_sides = sides_and_spreads(tok[order], launch[order], decoded[order], number[order], n)
    launches = provenance.sides(order, starts, [str(fp) for fp in key_columns[-1]])
    runs = []
    for g in range(n):  # first each run's baseline (and its flags), then their sides at once
        key = tuple(column[g] for column in key_columns)
        at = order[starts[g] : starts[g + 1]]
        unnamed = not named_pairs and key[0] == "" and key[1] == ""
        lines = _lines(line[at])
        measured = int(np.count_nonzero(~np.isnan(tok[at])))  # rows with a rate
        chosen, codes, note = _choose(
            key,
            stats[g].n_published > 0 and measured == 0,
            launches[g],
            lines,
            base,
            findings,
            _source_files(df, rows[at]) if unnamed else None,
        )
        if len(chosen):
            spec_rows, base_rows = rows[at], base.provenance.rows[chosen]
            codes |= _sampling_codes(key, lines, sampling[spec_rows], sampling[base_rows], findings)
        runs.append((key, at, lines, measured, chosen, codes | codes_by_group.get(g, set()), note))
    base.estimate([chosen for _, _, _, _, chosen, _, _ in runs])
    # One speedup (docs/concepts/intervals.md#one-speedup): the means of the launches' rates.
    intervals = [interval_of(spec_sides[g][0], base.side(run[4])) for g, run in enumerate(runs)]
    comparisons, members = [], []
    for g, (key, at, lines, measured, chosen, codes, note) in enumerate(runs):
        spec = (spec_sides[g], measured, bool(shows[at].any()), lines, intervals[g])
        c = _pair_one(key, stats[g], spec, chosen, codes, note, base, tolerance, findings)
        if key[2] < -1:  # an open-loop level: its rate, and the client's cap where given
            c = replace(c, concurrency=float(caps[g]), request_rate=key_request_rate(key[2]))
        comparisons.append(c)
        members.append((rows[at], base.provenance.rows[chosen]))
    return comparisons, intervals, members


def _run_stats(df: Any, rows: Any, number: Any, n: int) -> list[_RunStats]:
    """Each run's means over its rows (``number``: each of ``rows``' run, 0 to ``n`` - 1)."""
    means = {
        name: _group_means(number, df[column].to_numpy(dtype=float)[rows], n)
        for name, column in (
            ("cycle", "cycle_ms"),
            ("verify", "verify_ms"),
            ("draft", "draft_ms"),
            ("published", "speedup"),
        )
    }
    means["tau"] = group_pooled_accept_len(
        number,
        df["accept_len"].to_numpy(dtype=float)[rows],
        df["num_drafts"].to_numpy(dtype=float)[rows],
        n,
    )
    return [
        _RunStats(
            *(float(means[m][0][g]) for m in ("tau", "cycle", "verify", "draft", "published")),
            int(means["published"][1][g]),
        )
        for g in range(n)
    ]


def _cycle_ms(row: Any) -> float:
    """A run's cycle [ms]: profiled, else verify + draft; NaN unless positive."""
    cycle = float(row.cycle)
    if math.isnan(cycle):
        cycle = float(row.verify) + (0.0 if math.isnan(row.draft) else float(row.draft))
    return cycle if cycle > 0 else math.nan


def _baseline_step_ms(steps: Any, b_mean: float) -> float:
    """The baseline's decode step [ms]: the mean of its measured ``steps`` [ms], else
    1000 / its mean rate ``b_mean`` [tok/s]; NaN if neither is known."""
    steps = steps[~np.isnan(steps)]
    return float(steps.mean()) if len(steps) else (_step_ms(b_mean) if b_mean > 0 else math.nan)


@dataclass(frozen=True)
class _Prediction:
    """What the cycle model says of one run."""

    tau: float
    """The run's accept_len [tokens/cycle]."""
    cycle: float
    """Its cycle [ms] (:func:`_cycle_ms`)."""
    step: float
    """The baseline's plain decode step [ms] (:func:`_baseline_step_ms`)."""
    speedup: float
    """The predicted speedup, accept_len * step / cycle [x]."""
    implied: float
    """1000 * accept_len / the run's mean rate: the cycle the measurement implies [ms]; NaN
    without a rate."""


def _prediction(row: Any, steps: Any, b_mean: float, s_mean: float) -> _Prediction:
    """The cycle model's prediction for a run (its means over its rows, ``row``), with the
    baseline's measured ``steps`` [ms] or mean rate ``b_mean`` [tok/s], and the cycle the run's
    mean rate ``s_mean`` [tok/s] implies."""
    tau = float(row.tau)
    cycle = _cycle_ms(row)
    step = _baseline_step_ms(steps, b_mean)
    predicted = float(_speedup(tau, step, cycle))
    implied = float(_implied_cycle_ms(tau, s_mean)) if s_mean > 0 else math.nan
    return _Prediction(tau, cycle, step, predicted, implied)


def _prediction_codes(
    label: str,
    conc: float,
    lines: tuple[int, ...],
    measured: float,
    s_mean: float,
    predicted: _Prediction,
    tolerance: float,
    findings: _Findings,
) -> set[str]:
    """The codes, each with its flag, where the cycle model does not explain a run's
    ``measured`` speedup [x] (its mean rate ``s_mean`` [tok/s]): the cycle the measurement
    implies shorter than the baseline's step (``cycle_below_step``), or a measured speedup off
    the prediction by more than the ``tolerance`` (``prediction_mismatch``)."""
    codes = set()
    tau, cycle, step = predicted.tau, predicted.cycle, predicted.step
    speedup, implied = predicted.speedup, predicted.implied
    residual = measured - speedup
    if implied > 0 and step > 0 and implied < step * (1 - tolerance):
        codes.add("cycle_below_step")
        findings.add(_cycle_below_step(label, conc, lines, implied, tau, s_mean, step), lines)
    if not math.isnan(residual) and speedup > 0 and abs(measured / speedup - 1) > tolerance:
        codes.add("prediction_mismatch")
        findings.add(_mismatch(label, lines, measured, speedup, tau, step, cycle, s_mean, implied))
    return codes


def _choose(
    key: tuple[Any, ...],
    published: bool,
    spec: _Side,
    lines: tuple[int, ...],
    base: _Baselines,
    findings: _Findings,
    spec_files: tuple[str, ...] | None = None,
) -> tuple[Any, set[str], str]:
    """The baseline rows a run is compared with (positions in ``base``,
    :func:`~breakeven.measurements.baselines._pick_baseline`), the codes raised, and why its
    launch is stale or unverified.  ``spec_files``: the run's source files, where a baseline
    from another file is flagged (``unnamed_pairing``; None: not looked at)."""
    chosen, codes, launch_note = _pick_baseline(key, spec, lines, published, base, findings)
    if spec_files is not None and len(chosen):
        label = key[5]
        codes |= _unnamed_pairing(label, lines, spec_files, base, chosen, findings)
    return chosen, codes, launch_note


def _pair_one(
    key: tuple[Any, ...],
    row: Any,
    spec: tuple[tuple[Any, LaunchSpread], int, bool, tuple[int, ...], SpeedupInterval],
    chosen: Any,
    codes: set[str],
    launch_note: str,
    base: _Baselines,
    tolerance: float,
    findings: _Findings,
) -> Comparison:
    """One run against its baseline rows ``chosen`` (positions in ``base``, :func:`_choose`):
    measured speedup and interval, prediction, residual.  ``spec``: the run's side and launch
    spread, its rows with a rate, whether they show speculation, their lines, and the interval
    of its speedup over the baseline's side."""

    model, hardware, conc, k_value, method, label, fp = key
    (spec_side, s_spread), spec_runs, spec_shows, lines, interval = spec
    published = row.n_published > 0 and spec_runs == 0
    base_tok = base.tok_s[chosen]
    base_side = base.side(chosen)
    s_mean, b_mean = spec_side.mean, base_side.mean
    measured = interval.speedup if spec_runs and len(base_tok) else math.nan
    low, high = interval.low, interval.high
    if published:
        measured, low, high = float(row.published), math.nan, math.nan
    doubts, spread = _doubts(
        label, conc, k_value, measured, lines, s_spread, spec_shows, base, chosen, findings
    )
    codes |= doubts
    predicted = _prediction(row, base.step_ms[chosen], b_mean, s_mean)
    codes |= _prediction_codes(label, conc, lines, measured, s_mean, predicted, tolerance, findings)
    comparison = Comparison(
        label=label,
        model=model,
        hardware=hardware,
        concurrency=float(conc) if conc >= 0 else math.nan,
        num_spec_tokens=float(k_value),
        spec_method=method,
        runs=int(row.n_published) if published else spec_runs,
        baseline_runs=len(base_tok),
        tok_s=s_mean,
        baseline_tok_s=b_mean,
        measured_speedup=measured,
        ci_low=low,
        ci_high=high,
        verdict=_verdict(measured, low, high, codes),
        accept_len=predicted.tau,
        cycle_ms=predicted.cycle,
        predicted_speedup=predicted.speedup,
        residual=measured - predicted.speedup,
        implied_cycle_ms=predicted.implied,
        flags=tuple(sorted(codes)),
        lines=lines,
        baseline_lines=_lines(base.line[chosen]),
        fingerprint=str(fp),
        launch_note=launch_note,
        launch_spread=spread,
    )
    return comparison


def _sampling_codes(
    key: tuple[Any, ...],
    lines: tuple[int, ...],
    spec: Any,
    baseline: Any,
    findings: _Findings,
) -> set[str]:
    """``sampling_differs`` where a run's rows (``spec``: their sampling texts,
    :func:`~breakeven.measurements.sampling.row_sampling`) and its baseline's (``baseline``)
    were sent with other sampling settings; nothing where either side's are not known."""
    differs = sampling_difference(spec, baseline)
    if differs is None:
        return set()
    label, conc = key[5], key[2]
    findings.add(
        Flag(
            "sampling_differs",
            f"{label} {_at_concurrency(conc)} was measured with {differs[0]}, its baseline "
            f"with {differs[1]}: their outputs differ in length or text, so their rates and "
            "acceptance are not like for like. Measure both with the same bench "
            "--temperature, --top-p, --max-tokens and --ignore-eos/--no-ignore-eos.",
            lines,
        ),
        lines,
    )
    return {"sampling_differs"}


def _doubts(
    label: str,
    conc: float,
    k: float,
    measured: float,
    lines: tuple[int, ...],
    spec_spread: LaunchSpread,
    spec_shows: bool,
    base: _Baselines,
    chosen: Any,
    findings: _Findings,
) -> tuple[set[str], float]:
    """The flags of :data:`DOUBT` on one run against its baseline: launches that disagree
    (either side), a pair that looks swapped, a speedup above k + 1; and the larger side's
    launch spread [x] (NaN where neither side has two launches)."""
    spreads = {label: spec_spread}
    if len(chosen):
        spreads["the baseline"] = base.spread(chosen)
    codes = set()
    at = _at_concurrency(conc) if conc != -1 else ""
    for who, spread in spreads.items():
        if not spread.disagree(LAUNCH_SPREAD_LIMIT):
            continue
        codes.add("launches_disagree")
        rates = ", ".join(_n(r, 2) for r in spread.rates[:LINES_SHOWN])
        where = base.line[chosen] if who == "the baseline" else lines
        findings.add(
            Flag(
                "launches_disagree",
                f"Launches of {who} {at} disagree {_n(spread.ratio, 2)}x: "
                f"{len(spread.rates)} launches ran at {rates} tok/s, beyond what each "
                "launch's own spread explains and beyond the "
                f"{_n(LAUNCH_SPREAD_LIMIT, 1)}x that launches of one configuration differ "
                "by on a real engine. The host decided these numbers, not the "
                "configuration: measure on a quiet host (nothing else running, pinned CPUs "
                "or GPUs, fixed clocks), and add --repeats.",
                _lines(where),
                len(where),
            ),
            _lines(where),
        )
    base_shows = base.shows[chosen] if len(chosen) else np.zeros(0, dtype=bool)
    if base_shows.any() and not spec_shows:
        codes.add("swapped_pair")
        first = int(base.line[chosen][base_shows][0])
        tau = base.accept_len[chosen][base_shows]
        tau = tau[tau > 1]
        shown = f"an accept_len of {_n(float(tau[0]), 2)}, " if len(tau) else ""
        flipped = (
            f" (then about {_n(1 / measured, 2)}x, not {_n(measured, 2)}x)" if measured > 0 else ""
        )
        findings.add(
            Flag(
                "swapped_pair",
                f"{label} {at}: the baseline shows speculation ({shown}line {first}) and "
                f"{label} none (no acceptance, no drafts): the two runs look swapped"
                f"{flipped}. Give the baseline first, then the speculative run.",
                (first, *lines[:1]),
            ),
            (first,),
        )
    if k > 0 and measured > speedup_bound(k):
        codes.add("speedup_above_bound")
        findings.add(
            Flag(
                "speedup_above_bound",
                f"{label} {at}: measured {_n(measured, 2)}x is above k + 1 = {k + 1:g}, "
                "which no cycle can give (it emits at most its k drafted tokens and the "
                "bonus, in at least one plain step's time). A rate is not per sequence (an "
                "aggregate over all sequences), in other units, or the baseline ran at "
                "another load or on another host.",
                lines,
            ),
            lines,
        )
    widest = max((x.ratio for x in spreads.values() if x.ratio == x.ratio), default=math.nan)
    return codes, widest


def _source_files(df: Any, positions: Any) -> tuple[str, ...]:
    """The files the rows at ``positions`` came from (their ``source`` less its ``:LINE``), in
    first-seen order; rows without a source give none."""
    if "source" not in df.columns:
        return ()
    sources = pd.Series(df["source"].to_numpy()[positions], dtype=object).dropna().astype(str)
    files = sources.str.replace(r":\d+$", "", regex=True)
    return tuple(f for f in dict.fromkeys(files) if f)


def _unnamed_pairing(
    label: str,
    lines: tuple[int, ...],
    spec_files: tuple[str, ...],
    base: _Baselines,
    chosen: Any,
    findings: _Findings,
) -> set[str]:
    """``{"unnamed_pairing"}``, with its flag, where baseline rows ``chosen`` (positions in
    ``base``) come from a file none of the speculative run's rows (from ``spec_files``) came
    from: with no model or hardware named, nothing but k = 0 made them its baseline."""
    base_files = _source_files(base.provenance.df, base.provenance.rows[chosen])
    other = [f for f in base_files if f not in spec_files]
    if not spec_files or not other:
        return set()
    where = f"{label or 'A speculative run'} (line {lines[0]})"
    shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
    findings.add(
        Flag(
            "unnamed_pairing",
            f"{where}, from {', '.join(spec_files[:3])}, is compared with the baseline of "
            f"{shown}, another file, and neither model nor hardware is named for them: "
            "nothing shows the two measured the same deployment. Give --model and "
            "--hardware (ingest them with those set, or fill the CSV's model and hardware) "
            "so that only runs of one model and hardware are paired.",
            lines + _lines(base.line[chosen]),
        )
    )
    return {"unnamed_pairing"}
