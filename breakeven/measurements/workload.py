"""Acceptance, and so speculation's gain, by workload: per-category rows, a traffic mix's
speedup, the categories that lose and the break-even mix (issue 28, item 2).

A row's ``category`` is its request's workload (``bench --prompts`` with a ``category`` field).
Within one speculative run (a ``label`` at one model, hardware and concurrency) and one
category, the speedup is the run's rows of that category against the baseline's rows of the
same category, model, hardware and concurrency: each side's rate a ratio of sums (the tokens
decoded over the time they took, :func:`breakeven.model.pooling.pooled_rate`), the interval as
``check``'s (:func:`breakeven.measurements.intervals.interval_of`: the launch the unit of repetition).  The
category's accept_len is pooled from its own requests' counts, ``1 + sum(accepted) /
sum(drafts)``, with a 95% interval of that ratio over the requests (the ratio estimator's
linearised variance, a t quantile); where rows give no drafts, their mean and its t interval.
A request's counts are the server's for it alone (:func:`request_acceptance`): vLLM's
per-request metrics, SGLang's ``spec_tokens_details``, llama.cpp's ``timings`` (its drafted
and accepted tokens, its cycles at the level's drafted tokens per cycle:
:func:`breakeven.model.pooling.request_drafts`).  Where the requests give none (a server that counts
only on ``/metrics``), the category has its runs' level value, the same for every category,
and says so (``acceptance_from``), with no interval.  Its acceptance_rate is ``sum(accepted) /
sum(drafted)`` over its requests' drafted tokens.

A mix gives each category a share of the **decoded tokens** [fraction].  Its speedup is the
baseline's time for those tokens over speculation's, a ratio of sums::

    speedup(mix) = sum_c w_c / r_base,c  /  sum_c w_c / r_spec,c

It rises with every category's speedup, so the mix's interval puts each category at its own
interval's end at once (conservative: the ends need not coincide).  The break-even mix is the
share ``s`` of the losing categories' tokens (in their own proportions within the mix, equal
without one), the winners' in theirs, at which that speedup is 1: ``s = (B_W - S_W) / ((B_W -
S_W) - (B_L - S_L))``, ``B`` and ``S`` the baseline's and speculation's time per token of each
side.  Pure analysis, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.quantities import plain_json
from breakeven.measurements.intervals import CONFIDENCE, interval_of, side_of_launches, verdict
from breakeven.model.cycle import half_width
from breakeven.model.pooling import pooled_rate


@dataclass(frozen=True)
class CategoryRow:
    """One speculative run's rows of one category against the baseline's of that category."""

    label: str
    """The speculative run."""
    concurrency: float
    """Requests decoded together [sequences] (NaN where the rows do not say)."""
    category: str
    """The workload category."""
    requests: int
    """Speculative rows with a rate [requests]."""
    baseline_requests: int
    """Baseline rows of the category with a rate [requests]."""
    accept_len: float
    """Pooled from counts, ``1 + sum(accepted) / sum(drafts)`` [tokens/cycle, bonus token
    included] (NaN: no row gives one)."""
    accept_len_low: float
    """Lower end of its 95% interval over the requests [tokens/cycle]."""
    accept_len_high: float
    """Upper end [tokens/cycle]."""
    tok_s: float
    """Per-sequence rate with speculation, a ratio of sums [tok/s]."""
    baseline_tok_s: float
    """Per-sequence rate of the baseline's rows of the category [tok/s]."""
    speedup: float
    """tok_s / baseline_tok_s [x] (NaN: no baseline row of the category)."""
    ci_low: float
    """Lower end of the speedup's 95% interval [x]."""
    ci_high: float
    """Upper end [x]."""
    verdict: str
    """'faster', 'slower', 'within noise', 'no interval' or 'not measured'."""
    acceptance_rate: float = math.nan
    """Of the tokens its requests drafted, the fraction accepted, ``sum(accepted) /
    sum(drafted)`` over their own counts [fraction] (NaN: no request gives them)."""
    acceptance_from: str = ""
    """Where accept_len comes from: 'requests' (its own requests' values, pooled from their
    counts where they give them), 'level' (its runs' level value, from the server's counters:
    its requests gave none of their own, so every category of a run has it, and it has no
    interval over the requests), or '' (none)."""


ACCEPTANCE_FROM = ("requests", "level", "")
"""Where a category's accept_len comes from (:attr:`CategoryRow.acceptance_from`)."""


@dataclass(frozen=True)
class MixAnswer:
    """One speculative run's speedup over a traffic mix, and where it stops paying."""

    label: str
    concurrency: float
    mix: tuple[tuple[str, float], ...]
    """Each category and its share of the decoded tokens [fraction], summing to 1."""
    speedup: float
    """Baseline time over speculative time for the mix's tokens [x]."""
    low: float
    """The speedup with every category at its interval's low end [x]."""
    high: float
    """... at its high end [x]."""
    losing: tuple[tuple[str, float], ...]
    """The categories whose speedup is below 1, and their speedup [x]."""
    breakeven_share: float
    """The losing categories' share of the tokens at which the mix's speedup is 1
    [fraction]: below it speculation pays.  NaN where no category loses (it pays at any
    mix) or every one does (at none)."""


def parse_mix(text: str | Mapping[str, float]) -> dict[str, float]:
    """A mix as ``code=0.6,chat=0.3,math=0.1`` (or a mapping): each category's share of the
    decoded tokens, normalised to sum to 1 (shares of any finite size: ``a=1e308,b=1e308`` is
    half and half).  Raises naming ``mix`` on anything else."""
    if isinstance(text, Mapping):
        pairs = [(str(k), v) for k, v in text.items()]
    else:
        pairs = []
        for part in str(text).split(","):
            name, sep, value = part.partition("=")
            try:
                share = float(value)
            except ValueError:
                share = math.nan
            if not sep or not name.strip():
                share = math.nan
            pairs.append((name.strip(), share))
    shares = dict(pairs)
    ok = pairs and len(shares) == len(pairs)
    ok = ok and all(isinstance(v, (int, float)) and 0 <= v < math.inf for v in shares.values())
    if not ok or not sum(shares.values()) > 0:
        shown = text if isinstance(text, str) else repr(dict(text))
        raise BreakevenError(
            "{0}: got "
            + escape_braces(repr(shown)[:80])
            + ", expected CATEGORY=SHARE pairs, each once, shares >= 0 and not all 0 "
            "(code=0.6,chat=0.3,math=0.1)",
            "mix",
        )
    # Scaled by the largest share first: shares of any finite size are a mix (1e308 and 1e308
    # are half and half), where their sum would overflow to inf and make every share 0.
    largest = max(shares.values())
    total = sum(v / largest for v in shares.values())
    return {k: v / largest / total for k, v in shares.items()}


def accept_len_interval(tau: Any, drafts: Any) -> tuple[float, float, float]:
    """accept_len pooled from counts over requests, and its 95% interval [tokens/cycle]: the
    ratio ``sum(accepted) / sum(drafts)`` with the ratio estimator's linearised standard
    error, ``sqrt(sum(e_i**2) / (n (n - 1))) / mean(drafts)``, ``e_i = accepted_i - R
    drafts_i``; where some row with an accept_len gives no drafts, their mean and its standard
    error.  A t quantile with n - 1 degrees of freedom; no interval below two requests."""
    tau = np.asarray(tau, dtype=float)
    drafts = np.asarray(drafts, dtype=float)
    has = np.isfinite(tau)
    tau, drafts = tau[has], drafts[has]
    n = len(tau)
    if not n:
        return math.nan, math.nan, math.nan
    if np.all(drafts > 0):
        accepted = (tau - 1) * drafts
        ratio = float(accepted.sum() / drafts.sum())
        centre = 1 + ratio
        if n < 2:
            return centre, math.nan, math.nan
        e = accepted - ratio * drafts
        se = math.sqrt(float(np.sum(e * e)) / (n * (n - 1))) / float(drafts.mean())
    else:
        centre = float(tau.mean())
        if n < 2:
            return centre, math.nan, math.nan
        se = float(tau.std(ddof=1)) / math.sqrt(n)
    t = float(stdtrit(n - 1, (1 + CONFIDENCE) / 2))
    return centre, centre - t * se, centre + t * se


def _numbers(rows: Any, column: str) -> Any:
    """A column as floats (NaN where missing or not a number; all NaN where absent)."""
    if column not in rows.columns:
        return pd.Series(np.nan, rows.index)
    return pd.to_numeric(rows[column].astype(object), errors="coerce").astype(float)


def request_acceptance(rows: Any) -> tuple[Any, Any, str]:
    """The accept_len and verify cycles [tokens/cycle, cycles] of ``rows`` (one category's
    requests) to pool, and where they come from (:data:`ACCEPTANCE_FROM`).

    Each request's own, where the rows give them: its accept_len and cycles where the server
    counts its cycles (``num_drafts``), else ``1 + accepted_tokens / cycles`` with its cycles
    from its drafted tokens (``request_drafts``, :func:`breakeven.model.pooling.request_drafts`), or
    a row's accept_len as its source gives it without counts ('requests').  Else the rows'
    accept_len where it is their level's (``level_accept_len``, set by
    :func:`breakeven.model.pooling.take_server_view`: the request gave no counts of its own),
    the same for every category of a run ('level').  Rows that give neither are left out."""
    tau, cycles = _numbers(rows, "accept_len"), _numbers(rows, "num_drafts")
    drafts = _numbers(rows, "request_drafts") if "request_drafts" in rows.columns else cycles
    accepted = _numbers(rows, "accepted_tokens")
    level = (
        rows["level_accept_len"].astype(object).eq(True)
        if "level_accept_len" in rows.columns
        else pd.Series(False, rows.index)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        counted = tau.where(cycles.notna(), 1 + accepted / drafts.where(drafts > 0))
    counts = drafts.notna()
    own = counts | (tau.notna() & ~level)
    if own.any():
        return counted.where(counts, tau)[own], drafts[own], "requests"
    if level.any():
        return tau[level], cycles[level], "level"
    return tau.iloc[:0], cycles.iloc[:0], ""


def acceptance_rate(rows: Any) -> float:
    """The fraction of the drafted tokens accepted over ``rows`` (requests) that give both
    counts, ``sum(accepted_tokens) / sum(draft_tokens)`` [fraction]; NaN where none does."""
    drafted, accepted = _numbers(rows, "draft_tokens"), _numbers(rows, "accepted_tokens")
    both = (drafted > 0) & (accepted >= 0)
    total = float(drafted[both].sum())
    return float(accepted[both].sum()) / total if total > 0 else math.nan


def by_category(df: Any) -> tuple[CategoryRow, ...]:
    """Each speculative run's rows of each category against the baseline's rows of the same
    category, model, hardware and concurrency (see the module's description).  ``df`` is
    :func:`breakeven.measurements.normalise.normalise`'s frame (its ``label``, ``model``,
    ``hardware``, ``concurrency_key``, ``num_spec_tokens``, ``tok_s``, ``decoded``, ``launch``,
    ``accept_len``, ``num_drafts`` and ``category``; where present, the requests' own counts,
    ``request_drafts``, ``level_accept_len``, ``draft_tokens`` and ``accepted_tokens``,
    :func:`request_acceptance`): the unit of repetition and the decoded tokens are check's.
    Rows without a category are left out; empty where no row has one."""
    if "category" not in df.columns:
        return ()
    category = df["category"].astype(object).where(df["category"].notna(), "").astype(str)
    rows = df.assign(_category=category)
    rows = rows[rows["_category"] != ""]
    if rows.empty:
        return ()
    k = rows["num_spec_tokens"]
    base = rows[k == 0]
    out = []
    keys = ["label", "model", "hardware", "concurrency_key", "_category"]
    spec_rows = rows[k > 0]
    for (label, model, hardware, conc, cat), spec in spec_rows.groupby(
        keys, sort=False, observed=True
    ):
        same = base[
            (base["model"] == model)
            & (base["hardware"] == hardware)
            & (base["concurrency_key"] == conc)
            & (base["_category"] == cat)
        ]
        out.append(_category_row(str(label), float(conc), str(cat), spec, same))
    return tuple(out)


def _side(rows: Any) -> Any:
    """One side's estimate: its rows' rates by launch (ratio-of-sums where they give tokens)."""
    return side_of_launches(rows["tok_s"], rows["launch"], rows["decoded"])


def _category_row(label: str, conc: float, cat: str, spec: Any, base: Any) -> CategoryRow:
    rate, base_rate = spec["tok_s"], base["tok_s"]
    values, drafts, source = request_acceptance(spec)
    tau, tau_low, tau_high = accept_len_interval(values, drafts)
    if source == "level":  # one value of the level's, not a sample of the requests
        tau_low = tau_high = math.nan
    s_mean = pooled_rate(rate, spec["decoded"])
    b_mean = pooled_rate(base_rate, base["decoded"])
    speedup = s_mean / b_mean if b_mean > 0 and s_mean >= 0 else math.nan
    low = high = math.nan
    if rate.notna().any() and base_rate.notna().any():
        interval = interval_of(_side(spec), _side(base))
        low, high = interval.low, interval.high
    return CategoryRow(
        label=label,
        concurrency=conc if conc >= 0 else math.nan,
        category=cat,
        requests=int(rate.notna().sum()),
        baseline_requests=int(base_rate.notna().sum()),
        accept_len=tau,
        accept_len_low=tau_low,
        accept_len_high=tau_high,
        tok_s=s_mean,
        baseline_tok_s=b_mean,
        speedup=speedup,
        ci_low=low,
        ci_high=high,
        verdict=verdict(speedup, low, high),
        acceptance_rate=acceptance_rate(spec),
        acceptance_from=source if math.isfinite(tau) else "",
    )


def mix_answers(rows: Sequence[CategoryRow], mix: Mapping[str, float]) -> tuple[MixAnswer, ...]:
    """Each speculative run's speedup over ``mix`` (:func:`parse_mix`: each category's share of
    the decoded tokens), its conservative interval, the categories that lose and the
    break-even share of the losing ones (see the module's description).  Raises naming
    ``mix`` where a category of the mix has no row of a run with both rates."""
    runs: dict[tuple[str, float], dict[str, CategoryRow]] = {}
    for r in rows:
        runs.setdefault((r.label, r.concurrency), {})[r.category] = r
    out = []
    for (label, conc), cats in runs.items():
        usable = {c: r for c, r in cats.items() if r.speedup > 0 and r.baseline_tok_s > 0}
        missing = [c for c, w in mix.items() if w > 0 and c not in usable]
        if missing:
            raise BreakevenError(
                "{0}: "
                + ", ".join(missing)
                + f" has no measured speedup in run {label}"
                + " (no speculative or baseline request of that category); it has "
                + (", ".join(sorted(usable)) or "none"),
                "mix",
            )
        weights = {c: w for c, w in mix.items() if w > 0}
        losing = tuple((c, usable[c].speedup) for c in weights if usable[c].speedup < 1)
        out.append(
            MixAnswer(
                label=label,
                concurrency=conc,
                mix=tuple(weights.items()),
                speedup=_mixed(weights, {c: usable[c].speedup for c in weights}, usable),
                low=_mixed(weights, {c: usable[c].ci_low for c in weights}, usable),
                high=_mixed(weights, {c: usable[c].ci_high for c in weights}, usable),
                losing=losing,
                breakeven_share=_breakeven_share(weights, usable, {c for c, _ in losing}),
            )
        )
    return tuple(out)


def _mixed(
    weights: Mapping[str, float], speedups: Mapping[str, float], rows: Mapping[str, CategoryRow]
) -> float:
    """The baseline's time for the mix's tokens over speculation's at these speedups [x]."""
    if not all(s > 0 for s in speedups.values()):
        return math.nan
    base = sum(w / rows[c].baseline_tok_s for c, w in weights.items())
    spec = sum(w / (rows[c].baseline_tok_s * speedups[c]) for c, w in weights.items())
    return base / spec


def _breakeven_share(
    weights: Mapping[str, float], rows: Mapping[str, CategoryRow], losing: set[str]
) -> float:
    """The losing categories' share of the tokens at which the mix's speedup is 1."""
    winning = set(weights) - losing
    if not losing or not winning:
        return math.nan

    def per_token(side: set[str]) -> tuple[float, float]:
        total = sum(weights[c] for c in side)
        base = sum(weights[c] / total / rows[c].baseline_tok_s for c in side)
        spec = sum(weights[c] / total / rows[c].tok_s for c in side)
        return base, spec

    (base_w, spec_w), (base_l, spec_l) = per_token(winning), per_token(losing)
    gain, loss = base_w - spec_w, base_l - spec_l  # time saved per token (> 0 by the winners)
    return gain / (gain - loss)


def as_dicts(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Result rows (category rows, mix answers, position rows) as plain data (a number that
    is not finite: None)."""
    return [plain_json(asdict(x)) for x in items]


@dataclass(frozen=True)
class CategoryFit:
    """One workload category of a fitted group at one k: its acceptance, and the speedup the
    group's fitted cycle gives it there."""

    model: str
    hardware: str
    concurrency: float
    """[sequences] (NaN where the rows do not say)."""
    spec_method: str
    category: str
    k: int
    """Draft tokens per cycle [tokens]."""
    requests: int
    """Rows of the category at this k with an accept_len [requests]."""
    accept_len: float
    """Pooled from counts [tokens/cycle, bonus token included]."""
    accept_len_low: float
    accept_len_high: float
    """Its 95% interval over the requests (:func:`accept_len_interval`) [tokens/cycle]."""
    predicted_speedup: float
    """``accept_len x step_ms / cycle_ms(k)``, the group's step and fitted cycle [x]."""
    predicted_low: float
    """With accept_len at its interval's low end and the cycle at the fit's (the group's
    held-out interval at k, :func:`breakeven.model.cycle.half_width`) [x]."""
    predicted_high: float
    """... at their high ends [x]."""
    verdict: str
    """'faster', 'slower', 'within noise' or 'no interval' (:func:`breakeven.measurements.intervals.verdict`)."""
    best: bool
    """Whether k is the category's best among its measured k (highest predicted speedup)."""


@dataclass(frozen=True)
class FitMix:
    """A traffic mix's predicted speedup at one k of a fitted group."""

    model: str
    hardware: str
    concurrency: float
    spec_method: str
    k: int
    mix: tuple[tuple[str, float], ...]
    """Each category and its share of the decoded tokens [fraction]."""
    accept_len: float
    """The mix's tokens per cycle: the token-weighted harmonic mean of the categories',
    ``1 / sum_c (w_c / accept_len_c)`` [tokens/cycle]."""
    predicted_speedup: float
    """``accept_len x step_ms / cycle_ms(k)`` [x]."""
    predicted_low: float
    predicted_high: float
    """Every category at its interval's end at once [x]."""
    best: bool
    """Whether k is the mix's best among the k every category of it was measured at."""


def fit_by_category(
    groups: Sequence[tuple[Any, Any]], mix: Mapping[str, float] | None = None
) -> tuple[tuple[CategoryFit, ...], tuple[FitMix, ...]]:
    """Each fitted group's categories at each measured k, and a mix's speedup at each k.

    ``groups`` pairs each fitted group's rows (:func:`breakeven.fitting.fit.fit`'s prepared speculative
    rows: ``category``, ``num_spec_tokens``, ``accept_len``, ``num_drafts``, and the
    requests' own counts where present, :func:`request_acceptance`) with its
    :class:`~breakeven.fitting.fit.GroupFit`.  A category's speedup at k is its pooled
    accept_len times the group's step over the group's fitted cycle at k: the cycle does not
    depend on what is decoded, the acceptance does.  Its interval puts accept_len at its
    interval's ends and the cycle at the fit's; where the fit has no held-out error, the
    acceptance's alone.  Empty where no row has a category."""
    rows_out: list[CategoryFit] = []
    mixes: list[FitMix] = []
    for rows, g in groups:
        category = rows["category"].astype(object).where(rows["category"].notna(), "")
        rows = rows[category.astype(str) != ""]
        if rows.empty or not (g.step_ms > 0):
            continue
        mine = [
            _category_fit(g, str(cat), int(k), part)
            for (cat, k), part in rows.groupby(["category", "num_spec_tokens"], sort=False)
        ]
        mine = [r for r in mine if r is not None]
        rows_out += _marked_best(mine, lambda r: r.category)
        if mix:
            mixes += _marked_best(_fit_mixes(g, mine, mix), lambda r: "")
    return tuple(rows_out), tuple(mixes)


def _relative_width(g: Any, k: int) -> float:
    """The group's relative half-width at k (0 where it has no held-out error)."""
    width = half_width(g.interval_width, k, g.measured_k)
    return width if math.isfinite(width) else 0.0


def _category_fit(g: Any, cat: str, k: int, part: Any) -> CategoryFit | None:
    values, drafts, _ = request_acceptance(part)
    tau, low, high = accept_len_interval(values, drafts)
    cycle = float(g.cycle_ms(k))
    if not (tau >= 1 and cycle > 0):
        return None
    scale, h = g.step_ms / cycle, _relative_width(g, k)
    speedup = tau * scale
    s_low, s_high = low * scale * (1 - h), high * scale * (1 + h)
    return CategoryFit(
        model=g.model,
        hardware=g.hardware,
        concurrency=g.concurrency,
        spec_method=g.spec_method,
        category=cat,
        k=k,
        requests=int(values.notna().sum()),
        accept_len=tau,
        accept_len_low=low,
        accept_len_high=high,
        predicted_speedup=speedup,
        predicted_low=s_low,
        predicted_high=s_high,
        verdict=verdict(speedup, s_low, s_high),
        best=False,
    )


def _fit_mixes(g: Any, rows: Sequence[CategoryFit], mix: Mapping[str, float]) -> list[FitMix]:
    """The mix at each k where every category of it has a row."""
    weights = {c: w for c, w in mix.items() if w > 0}
    by_k: dict[int, dict[str, CategoryFit]] = {}
    for r in rows:
        by_k.setdefault(r.k, {})[r.category] = r
    out = []
    for k, cats in sorted(by_k.items()):
        if not set(weights) <= set(cats):
            continue

        def harmonic(end: str, cats: dict[str, CategoryFit] = cats) -> float:
            values = {c: getattr(cats[c], end) for c in weights}
            if not all(v >= 1 for v in values.values()):
                return math.nan
            return 1 / sum(w / values[c] for c, w in weights.items())

        tau = harmonic("accept_len")
        scale, h = g.step_ms / float(g.cycle_ms(k)), _relative_width(g, k)
        out.append(
            FitMix(
                model=g.model,
                hardware=g.hardware,
                concurrency=g.concurrency,
                spec_method=g.spec_method,
                k=k,
                mix=tuple(weights.items()),
                accept_len=tau,
                predicted_speedup=tau * scale,
                predicted_low=harmonic("accept_len_low") * scale * (1 - h),
                predicted_high=harmonic("accept_len_high") * scale * (1 + h),
                best=False,
            )
        )
    return out


def _marked_best(rows: list[Any], key: Any) -> list[Any]:
    """``rows`` with ``best`` set on each key's row of highest predicted speedup."""
    top: dict[Any, Any] = {}
    for r in rows:
        if r.predicted_speedup > getattr(top.get(key(r)), "predicted_speedup", -math.inf):
            top[key(r)] = r
    chosen = {id(r) for r in top.values()}
    return [replace(r, best=id(r) in chosen) for r in rows]


__all__: Sequence[str] = (
    "ACCEPTANCE_FROM",
    "CategoryFit",
    "CategoryRow",
    "FitMix",
    "MixAnswer",
    "accept_len_interval",
    "acceptance_rate",
    "as_dicts",
    "by_category",
    "fit_by_category",
    "mix_answers",
    "parse_mix",
    "request_acceptance",
)
