"""Load as operators plan it: service-level objectives (SLOs), goodput, latency percentiles and
the break-even request rate, per level (a concurrency, or an offered request rate) and side.

The SLO's grammar (:func:`parse_slo`), as ``vllm bench serve --goodput`` names the metrics:
bounds separated by commas, each ``METRIC[:pP]OP VALUE``, where METRIC is one of
:data:`SLO_METRICS`, OP is ``<=`` or ``<``, VALUE a positive number of milliseconds (an ``ms``
after it is allowed), and ``:pP`` (P in (0, 100), e.g. ``p90``, ``p99.9``) makes the bound a
level-wide target.  ``tpot_ms<=50,ttft_ms:p90<2000``:

- without a percentile, a bound is per request: a request is *good* where it meets every such
  bound (a request without a value of that metric, such as a one-token completion's TPOT, is
  judged on the others, as vLLM counts its TPOT as 0);
- with one, it is the level's: the P-th percentile of the metric over the level's requests must
  meet it (:attr:`LevelRow.slo_met`).

Per level and side (each speculative run, and the baseline it is compared with), from the rows
of its requests (bench's rows: one per request, with ``ttft_ms``, ``tpot_ms``, ``e2e_ms`` and
``start_s``), within each launch (the unit of repetition):

- ``goodput_rps`` = good requests / the level's duration, the duration from the first request's
  ``start_s`` to the last completion's ``start_s + e2e_ms / 1000`` (vLLM's goodput: good
  completed requests over the benchmark's duration);
- ``slo_attainment`` = good requests / completed requests (rows with a latency);
- with two or more launches, each is the mean of the launches' values with a 95% t interval
  across them (:func:`breakeven.measurements.intervals.launch_mean_interval`); one launch has
  no interval (its requests are not independent repeats).

Percentiles pool the level's requests (every launch's) and use numpy's ``linear`` method, as
``vllm bench serve`` does.  The break-even request rate (:func:`breakeven_rates`) is the highest
measured rate at which speculation beats the baseline: by goodput under the SLO when one is
given (a level that misses a level-wide target counts as a goodput of 0), else by mean TPOT.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.errors import invalid_value
from breakeven.measurements.flags import DOUBT
from breakeven.measurements.intervals import launch_mean_interval

SLO_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
"""The latencies an SLO may bound [ms], as ``vllm bench serve --goodput`` names them."""

SLO_OPERATORS = ("<=", "<")
"""A latency's bound is an upper bound."""

PERCENTILES = (50, 90, 99)
"""The percentiles each level reports of TPOT and TTFT (``tpot_ms_p50``, ...)."""

PERCENTILE_METHOD = "linear"
"""numpy's method for a percentile (its default, as vLLM's ``np.percentile``)."""

_METRIC_WORDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "E2E latency"}

_SLO_EXAMPLE = "bounds such as 'tpot_ms<=50,ttft_ms:p90<=2000' (ms)"

_TERM = re.compile(
    r"^\s*(?P<metric>[A-Za-z_0-9]*)\s*(?::\s*(?P<pct>[^<>=!\s]*))?\s*"
    r"(?P<op>[<>=!]+)\s*(?P<value>.*?)\s*$"
)


@dataclass(frozen=True)
class SloBound:
    """One bound of an SLO."""

    metric: str
    """One of :data:`SLO_METRICS`."""
    operator: str
    """``<=`` or ``<``."""
    value_ms: float
    """The bound [ms]."""
    percentile: float | None = None
    """The level-wide percentile bounded [%]; None: every request must meet the bound."""

    def met(self, values: Any) -> Any:
        """Whether ``values`` [ms] meet the bound (an array of bools)."""
        values = np.asarray(values, dtype=float)
        return values <= self.value_ms if self.operator == "<=" else values < self.value_ms

    @property
    def text(self) -> str:
        """The bound as written: ``tpot_ms:p90<=50``."""
        at = f":p{self.percentile:g}" if self.percentile is not None else ""
        return f"{self.metric}{at}{self.operator}{self.value_ms:g}"

    @property
    def words(self) -> str:
        """The bound in words: ``p90 TPOT <= 50 ms``, ``TPOT <= 50 ms``."""
        at = f"p{self.percentile:g} " if self.percentile is not None else ""
        return f"{at}{_METRIC_WORDS[self.metric]} {self.operator} {self.value_ms:g} ms"


@dataclass(frozen=True)
class Slo:
    """A service-level objective: its bounds (:func:`parse_slo`)."""

    bounds: tuple[SloBound, ...]

    @property
    def per_request(self) -> tuple[SloBound, ...]:
        """The bounds every request must meet (goodput's and attainment's)."""
        return tuple(b for b in self.bounds if b.percentile is None)

    @property
    def level_wide(self) -> tuple[SloBound, ...]:
        """The bounds on a level's percentiles."""
        return tuple(b for b in self.bounds if b.percentile is not None)

    @property
    def text(self) -> str:
        """The SLO as written, normalised: ``tpot_ms<=50,ttft_ms:p90<=2000``."""
        return ",".join(b.text for b in self.bounds)

    @property
    def words(self) -> str:
        """The SLO in words: ``TPOT <= 50 ms, p90 TTFT <= 2000 ms``."""
        return ", ".join(b.words for b in self.bounds)


def parse_slo(text: str, name: str = "slo") -> Slo:
    """An SLO from its text (the module's grammar); a BreakevenError naming ``name`` (a
    ValueError) for an empty SLO, an unknown metric, operator or percentile, a value that is
    not a positive finite number of ms, or a metric bounded twice at the same percentile."""
    if not isinstance(text, str) or not text.strip(" ,\t"):
        raise invalid_value(name, text, _SLO_EXAMPLE)
    bounds: list[SloBound] = []
    for term in text.split(","):
        if not term.strip():
            raise invalid_value(name, text, f"{_SLO_EXAMPLE}, with no empty bound between commas")
        bound = _bound(term, name)
        if any((b.metric, b.percentile) == (bound.metric, bound.percentile) for b in bounds):
            at = f" at p{bound.percentile:g}" if bound.percentile is not None else " per request"
            raise invalid_value(name, text, f"each metric bounded once{at} ({bound.metric} twice)")
        bounds.append(bound)
    return Slo(tuple(bounds))


def _bound(term: str, name: str) -> SloBound:
    """One bound of an SLO's text."""
    m = _TERM.match(term)
    if m is None:
        raise invalid_value(name, term.strip(), f"METRIC[:pP]<=VALUE, {_SLO_EXAMPLE}")
    metric, op = m["metric"], m["op"]
    if metric not in SLO_METRICS:
        raise invalid_value(name, term.strip(), f"a metric of {', '.join(SLO_METRICS)}")
    if op not in SLO_OPERATORS:
        why = " (a latency's bound is an upper bound)" if op in (">=", ">", "=", "==") else ""
        raise invalid_value(name, term.strip(), f"the operator <= or <{why}")
    percentile = None
    if m["pct"] is not None:
        percentile = _number(m["pct"][1:]) if m["pct"][:1] in ("p", "P") else math.nan
        if not 0 < percentile < 100:
            raise invalid_value(name, term.strip(), "a percentile p1 to p99.9 (such as p90)")
    value = m["value"]
    value = _number(value[:-2] if value.lower().endswith("ms") else value)
    if not (math.isfinite(value) and value > 0):
        raise invalid_value(name, term.strip(), "a positive finite value in ms")
    return SloBound(metric, op, value, percentile)


def _number(text: str) -> float:
    """``text`` as a float; NaN where it is not one."""
    try:
        return float(text.strip())
    except ValueError:
        return math.nan


@dataclass(frozen=True)
class LevelRow:
    """One side (a speculative run, or the baseline it is compared with) at one level."""

    label: str
    """The speculative run's label, or the baseline's."""
    side: str
    """'speculative' or 'baseline'."""
    num_spec_tokens: float
    """k [tokens]; 0 for the baseline."""
    concurrency: float
    """The closed-loop level's concurrency, or an open-loop level's cap [sequences]."""
    request_rate: float
    """The open-loop level's offered rate [req/s]; NaN for a closed-loop level."""
    requests: int
    """Completed requests: rows with a latency [requests]."""
    launches: int
    """Launches the requests came from."""
    good_requests: int = 0
    """Requests meeting every per-request bound [requests]."""
    duration_s: float = math.nan
    """The launches' durations summed, each from its first start to its last completion [s]."""
    goodput_rps: float = math.nan
    """good_requests / duration [req/s], the mean of the launches' (NaN without an SLO)."""
    goodput_low: float = math.nan
    """Lower end of goodput's 95% interval across launches [req/s]."""
    goodput_high: float = math.nan
    """Upper end [req/s]."""
    slo_attainment: float = math.nan
    """good_requests / requests [fraction], the mean of the launches' (NaN without an SLO)."""
    slo_attainment_low: float = math.nan
    """Lower end of its 95% interval across launches [fraction]."""
    slo_attainment_high: float = math.nan
    """Upper end [fraction]."""
    slo_met: bool | None = None
    """The level's percentiles meet every level-wide bound; None without one."""
    slo_missed: tuple[str, ...] = ()
    """The level-wide bounds missed, with the value: ``tpot_ms:p90 62.1 > 50``."""
    mean_tpot_ms: float = math.nan
    """Mean TPOT over the requests [ms]."""
    percentiles: dict[str, float] = field(default_factory=dict)
    """``tpot_ms_p50`` ... ``ttft_ms_p99`` [ms], where the rows give the metric."""

    def to_dict(self) -> dict[str, Any]:
        """The fields, the percentiles flattened beside them."""
        data = {k: v for k, v in self.__dict__.items() if k != "percentiles"}
        data["slo_missed"] = list(self.slo_missed)
        return {**data, **self.percentiles}


def percentile_columns(rows: dict[str, Any]) -> dict[str, float]:
    """``tpot_ms_p50`` ... ``ttft_ms_p99`` [ms] of the requests' ``rows`` (metric -> values),
    numpy's linear method, NaN values left out; a metric without a value gives none."""
    out = {}
    for metric in ("tpot_ms", "ttft_ms"):
        values = np.asarray(rows.get(metric, ()), dtype=float)
        values = values[np.isfinite(values)]
        if len(values):
            got = np.percentile(values, PERCENTILES, method=PERCENTILE_METHOD)
            out.update({f"{metric}_p{p}": float(v) for p, v in zip(PERCENTILES, got, strict=True)})
    return out


def good(columns: dict[str, Any], slo: Slo) -> Any:
    """Which requests meet every per-request bound of ``slo`` (``columns``: metric -> each
    request's values [ms]); a request without a value of a metric is judged on the others."""
    n = len(next(iter(columns.values()))) if columns else 0
    ok = np.ones(n, dtype=bool)
    for bound in slo.per_request:
        values = np.asarray(columns.get(bound.metric, np.full(n, np.nan)), dtype=float)
        ok &= bound.met(values) | np.isnan(values)
    return ok


def level_duration_s(start_s: Any, e2e_ms: Any) -> float:
    """One launch's level duration [s]: its first request's start to its last completion
    (``start_s + e2e_ms / 1000``); NaN without both."""
    start, e2e = np.asarray(start_s, dtype=float), np.asarray(e2e_ms, dtype=float)
    both = np.isfinite(start) & np.isfinite(e2e)
    if not both.any():
        return math.nan
    return float(np.max(start[both] + e2e[both] / 1000.0) - np.min(start[both]))


def level_row(
    who: dict[str, Any], columns: dict[str, Any], launch: Any, slo: Slo | None
) -> LevelRow:
    """One side at one level from its requests' ``columns`` (:data:`SLO_METRICS`,
    ``start_s``; NaN where missing) and each request's ``launch``; ``who`` gives its
    ``label``, ``side``, ``num_spec_tokens``, ``concurrency`` and ``request_rate``."""
    codes, _ = pd.factorize(np.asarray(launch))  # each launch 0, 1, ... as they come
    n_launches = int(codes.max()) + 1 if len(codes) else 0
    tpot = np.asarray(columns["tpot_ms"], dtype=float)
    row = LevelRow(
        **who,
        requests=len(codes),
        launches=n_launches,
        mean_tpot_ms=float(np.nanmean(tpot)) if np.isfinite(tpot).any() else math.nan,
        percentiles=percentile_columns(columns),
    )
    if slo is None:
        return row
    ok = good(columns, slo)
    durations = [
        level_duration_s(columns["start_s"][codes == i], columns["e2e_ms"][codes == i])
        for i in range(n_launches)
    ]
    goods = np.bincount(codes, weights=ok.astype(float), minlength=n_launches)
    counts = np.bincount(codes, minlength=n_launches)
    with np.errstate(invalid="ignore", divide="ignore"):
        goodput = launch_mean_interval(goods / np.asarray(durations, dtype=float))
        attainment = launch_mean_interval(goods / counts)
    missed = _missed(columns, slo)
    return _with_slo(row, ok, durations, goodput, attainment, slo, missed)


def _with_slo(
    row: LevelRow,
    ok: Any,
    durations: list[float],
    goodput: tuple[float, float, float],
    attainment: tuple[float, float, float],
    slo: Slo,
    missed: tuple[str, ...],
) -> LevelRow:
    """``row`` with its SLO's figures."""
    low, high = attainment[1], attainment[2]
    return replace(
        row,
        good_requests=int(ok.sum()),
        duration_s=float(np.sum(durations)) if durations else math.nan,
        goodput_rps=goodput[0],
        goodput_low=goodput[1],
        goodput_high=goodput[2],
        slo_attainment=attainment[0],
        slo_attainment_low=max(low, 0.0) if not math.isnan(low) else math.nan,
        slo_attainment_high=min(high, 1.0) if not math.isnan(high) else math.nan,
        slo_met=(not missed) if slo.level_wide else None,
        slo_missed=missed,
    )


def _missed(columns: dict[str, Any], slo: Slo) -> tuple[str, ...]:
    """The level-wide bounds the requests' percentiles miss, each with its value."""
    missed = []
    for bound in slo.level_wide:
        values = np.asarray(columns[bound.metric], dtype=float)
        values = values[np.isfinite(values)]
        if not len(values):
            missed.append(f"{bound.text}: no request gives {bound.metric}")
            continue
        value = float(np.percentile(values, bound.percentile, method=PERCENTILE_METHOD))
        if not bool(bound.met(value)):
            above = ">" if bound.operator == "<=" else ">="
            missed.append(
                f"{bound.metric}:p{bound.percentile:g} {value:.4g} {above} {bound.value_ms:g}"
            )
    return tuple(missed)


@dataclass(frozen=True)
class BreakevenRate:
    """One speculative run's break-even request rate across its open-loop levels."""

    label: str
    """The speculative run."""
    num_spec_tokens: float
    """k [tokens]."""
    by: str
    """What decides: 'goodput' (under the SLO) or 'mean TPOT'."""
    breakeven_request_rate: float
    """The highest rate at which speculation beats the baseline [req/s]: interpolated where two
    measured levels bracket the crossing, the highest measured rate where it wins at every one
    (a lower bound), NaN where it loses at every one."""
    how: str
    """'interpolated', 'at least', 'never', or 'undecided' (a level's runs cannot decide:
    check's ``too noisy``, ``looks swapped`` or ``implausible``)."""
    rates: tuple[float, ...]
    """The measured rates with both sides [req/s], ascending."""
    margins: tuple[float, ...]
    """At each rate, speculation's lead (:func:`_margin`): under an SLO, its attainment minus
    the baseline's [fraction] (0 for a side missing a level-wide bound), or where they are
    equal the baseline's mean TPOT minus its own over the baseline's [fraction]; without one,
    the baseline's mean TPOT minus its own [ms]."""
    sentence: str
    """The answer in words."""

    def to_dict(self) -> dict[str, Any]:
        """The fields, as lists."""
        return {**self.__dict__, "rates": list(self.rates), "margins": list(self.margins)}


def slo_levels(
    df: Any, comparisons: Any, members: Any, slo: Slo | None
) -> tuple[tuple[LevelRow, ...], tuple[BreakevenRate, ...], str]:
    """Each comparison's sides at its level (:class:`LevelRow`: the speculative run's, then
    its baseline's, once per set of baseline rows), each run's break-even request rate
    (:func:`breakeven_rates`) and a note where ``slo`` was given and no row gives a
    per-request latency.  ``df`` is check's normalised frame, ``members`` each comparison's
    rows in it (:func:`breakeven.measurements.pairing.pair`)."""
    n = len(df)
    cols = {
        m: df[m].to_numpy(dtype=float) if m in df.columns else np.full(n, np.nan)
        for m in (*SLO_METRICS, "start_s")
    }
    has = np.isfinite(np.column_stack([cols[m] for m in SLO_METRICS])).any(axis=1)
    launch, label = df["launch"].to_numpy(), df["label"].astype(str).to_numpy()
    rows, pairs, seen = [], [], {}
    for c, (spec_at, base_at) in zip(comparisons, members, strict=True):
        spec_at, base_at = spec_at[has[spec_at]], base_at[has[base_at]]
        if not (len(spec_at) or len(base_at)):
            continue
        level = {"concurrency": c.concurrency, "request_rate": c.request_rate}
        spec = _side(c.label, "speculative", c.num_spec_tokens, level, spec_at, cols, launch, slo)
        if spec is not None:
            rows.append(spec)
        base_key = base_at.tobytes()
        if base_key not in seen and len(base_at):
            who = str(label[base_at[0]])
            seen[base_key] = _side(who, "baseline", 0.0, level, base_at, cols, launch, slo)
            rows.append(seen[base_key])
        pairs.append((c, spec, seen.get(base_key)))
    note = ""
    if slo is not None and not rows:
        note = (
            f"--slo {slo.text}: no row gives a request's latency ({', '.join(SLO_METRICS)}); "
            "goodput and SLO attainment need one row per request (bench's rows), which logs "
            "and published tables do not give"
        )
    return tuple(rows), breakeven_rates(pairs, slo), note


def _side(
    label: str,
    side: str,
    k: float,
    level: dict[str, float],
    at: Any,
    cols: dict[str, Any],
    launch: Any,
    slo: Slo | None,
) -> LevelRow | None:
    """One side's :class:`LevelRow` from its request rows ``at``; None without one."""
    if not len(at):
        return None
    who = {"label": label, "side": side, "num_spec_tokens": float(k), **level}
    return level_row(who, {m: v[at] for m, v in cols.items()}, launch[at], slo)


def breakeven_rates(pairs: Any, slo: Slo | None) -> tuple[BreakevenRate, ...]:
    """Each speculative run's break-even request rate over its open-loop levels (``pairs``:
    a comparison with its speculative and baseline :class:`LevelRow`): by goodput under ``slo``
    where given, else by mean TPOT (see :func:`crossing`), and never more sure than the
    comparisons: where one of its levels cannot decide (check's :data:`DOUBT` verdicts), there
    is no break-even rate ('undecided'); where the speedup at the deciding level is within
    noise, the sentence says so."""
    runs: dict[tuple[Any, ...], dict[float, tuple[float, str]]] = {}
    for c, spec, base in pairs:
        if spec is None or base is None or not c.request_rate > 0:
            continue
        key = (c.label, c.model, c.hardware, c.num_spec_tokens, c.spec_method, c.fingerprint)
        margin = _margin(spec, base, slo)
        if math.isfinite(margin):
            runs.setdefault(key, {}).setdefault(float(c.request_rate), (margin, c.verdict))
    by = "goodput" if slo is not None else "mean TPOT"
    criterion = slo.words if slo is not None else "by mean TPOT"
    out = []
    for key, levels in runs.items():
        rates = tuple(sorted(levels))
        margins = tuple(levels[r][0] for r in rates)
        verdicts = [levels[r][1] for r in rates]
        who = f"{key[0]}: " if len(runs) > 1 else ""
        doubted = [f"{r:g}" for r, v in zip(rates, verdicts, strict=True) if v in DOUBT_VERDICTS]
        if doubted:
            said = (
                f"{who}the data cannot decide where speculation stops paying: at "
                f"{', '.join(doubted)} req/s the runs are {verdicts[rates.index(float(doubted[0]))]}"
                " (see check's flags); measure on a quiet host, and add --repeats"
            )
            value, how = math.nan, "undecided"
        else:
            value, how, bracket = crossing(rates, margins)
            said = _sentence(who, value, how, bracket, rates, margins, criterion)
            said += _noise(rates, margins, verdicts)
        out.append(BreakevenRate(str(key[0]), float(key[3]), by, value, how, rates, margins, said))
    return tuple(out)


DOUBT_VERDICTS = frozenset(DOUBT.values())
"""The verdicts of comparisons whose runs cannot decide: no break-even rate through them."""


def _noise(rates: tuple[float, ...], margins: tuple[float, ...], verdicts: list[str]) -> str:
    """What the sentence adds where a winning level's speedup is not measured beyond noise:
    within noise (its interval reaches 1), or without an interval."""
    said = []
    for verdict, why in (
        ("within noise", "within noise (its speedup's interval reaches 1)"),
        ("no interval", "without an interval (too few launches or requests)"),
    ):
        at = [
            f"{r:g}"
            for r, m, v in zip(rates, margins, verdicts, strict=True)
            if m > 0 and v == verdict
        ]
        if at:
            said.append(f"at {', '.join(at)} req/s its lead is {why}")
    return f"; {'; '.join(said)}: more --repeats would confirm it" if said else ""


def _margin(spec: LevelRow, base: LevelRow, slo: Slo | None) -> float:
    """Speculation's lead at a level.  Without an SLO, the baseline's mean TPOT minus its own
    [ms].  Under one, its SLO attainment minus the baseline's [fraction] (a side missing a
    level-wide bound attains 0): both sides get the same requests on the same schedule, so
    attainment is goodput's share of the offered load, without the noise of when each level's
    last request happened to end.  Where the two attain alike (both meet the SLO on every
    request), the faster decodes more: the baseline's mean TPOT minus its own, over the
    baseline's [fraction]."""
    tpot = base.mean_tpot_ms - spec.mean_tpot_ms
    if slo is None:
        return tpot
    s = 0.0 if spec.slo_met is False else spec.slo_attainment
    b = 0.0 if base.slo_met is False else base.slo_attainment
    if s != b:
        return s - b
    return tpot / base.mean_tpot_ms if base.mean_tpot_ms > 0 else math.nan


def crossing(
    rates: tuple[float, ...], margins: tuple[float, ...]
) -> tuple[float, str, tuple[float, ...]]:
    """The highest rate [req/s] at which speculation wins (its ``margins`` > 0, at ascending
    ``rates``), how it was found, and the bracketing rates: where the highest winning level has
    a losing one above it, the linear interpolation of the margin between them
    ('interpolated'); where the highest level wins, that rate ('at least': not extrapolated);
    NaN where it wins at none ('never')."""
    wins = [m > 0 for m in margins]
    if not any(wins):
        return math.nan, "never", ()
    i = max(j for j, w in enumerate(wins) if w)
    if i == len(rates) - 1:
        return float(rates[-1]), "at least", ()
    r0, r1, d0, d1 = rates[i], rates[i + 1], margins[i], margins[i + 1]
    return float(r0 + (r1 - r0) * d0 / (d0 - d1)), "interpolated", (r0, r1)


def _sentence(
    who: str,
    value: float,
    how: str,
    bracket: tuple[float, ...],
    rates: tuple[float, ...],
    margins: tuple[float, ...],
    criterion: str,
) -> str:
    """The break-even rate in words."""
    if how == "never":
        span = f"{rates[0]:g} to {rates[-1]:g} req/s" if len(rates) > 1 else f"{rates[0]:g} req/s"
        return (
            f"{who}speculation does not pay at any measured rate ({span}, {criterion}); turn it off"
        )
    if how == "interpolated":
        return (
            f"{who}speculation pays up to {value:.3g} req/s ({criterion}); above it, turn it "
            f"off (interpolated between {bracket[0]:g} and {bracket[1]:g} req/s)"
        )
    losing = [f"{r:g}" for r, m in zip(rates, margins, strict=True) if not m > 0]
    though = f"; it loses at {', '.join(losing)} req/s" if losing else ""
    return (
        f"{who}speculation pays at every measured rate up to at least {value:g} req/s "
        f"({criterion}), the highest measured; not extrapolated beyond it{though}"
    )
