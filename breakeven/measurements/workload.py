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
from breakeven.measurements.intervals import (
    CONFIDENCE,
    group_mean_sd,
    group_sides,
    interval_bounds,
    verdict,
)
from breakeven.model.cycle import half_width
from breakeven.model.pooling import group_pooled_rates


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
    ends = group_accept_len_interval(tau, drafts, np.zeros(len(tau), dtype=np.int64), 1)
    centre, low, high = (float(x[0]) for x in ends)
    return centre, low, high


def group_accept_len_interval(
    tau: Any, drafts: Any, number: Any, groups: int
) -> tuple[Any, Any, Any]:
    """:func:`accept_len_interval` of each group at once (``number``: each request's group, 0
    to ``groups`` - 1): arrays of the centres and their interval's ends [tokens/cycle]."""
    tau, drafts = np.asarray(tau, dtype=float), np.asarray(drafts, dtype=float)
    number = np.asarray(number, dtype=np.int64)
    has = np.isfinite(tau)
    tau, drafts, number = tau[has], drafts[has], number[has]
    n = np.bincount(number, minlength=groups)
    counted = np.bincount(number[~(drafts > 0)], minlength=groups) == 0  # all give drafts
    with np.errstate(invalid="ignore", divide="ignore"):
        accepted = (tau - 1) * drafts
        total = np.bincount(number, weights=np.where(drafts > 0, drafts, 0.0), minlength=groups)
        pooled = np.bincount(number, weights=np.where(drafts > 0, accepted, 0.0), minlength=groups)
        ratio = pooled / total
        e = np.where(drafts > 0, accepted - ratio[number] * drafts, 0.0)
        squares = np.bincount(number, weights=e * e, minlength=groups)
        ratio_se = np.sqrt(squares / (n * (n - 1.0))) / (total / n)
        mean, sd, _ = group_mean_sd(tau, number, groups)
        centre = np.where(counted, 1 + ratio, mean)
        se = np.where(counted, ratio_se, sd / np.sqrt(n))
        t = stdtrit(np.maximum(n - 1, 1), (1 + CONFIDENCE) / 2)
    two = n >= 2
    centre = np.where(n > 0, centre, np.nan)
    return centre, np.where(two, centre - t * se, np.nan), np.where(two, centre + t * se, np.nan)


def _numbers(rows: Any, column: str) -> Any:
    """A column as floats (NaN where missing or not a number; all NaN where absent)."""
    if column not in rows.columns:
        return pd.Series(np.nan, rows.index)
    if rows[column].dtype.kind in "iuf":  # numbers already (normalise's columns)
        return rows[column].astype(float)
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
    number = np.zeros(len(rows), dtype=np.int64)
    values, cycles, taken, sources = group_request_acceptance(rows, number, 1)
    return (
        pd.Series(values, rows.index, dtype=float)[taken],
        pd.Series(cycles, rows.index, dtype=float)[taken],
        str(sources[0]),
    )


def group_request_acceptance(rows: Any, number: Any, groups: int) -> tuple[Any, Any, Any, Any]:
    """:func:`request_acceptance` of each group of ``rows`` at once (``number``: each row's
    group, 0 to ``groups`` - 1): each row's accept_len and cycles to pool [tokens/cycle,
    cycles; NaN where its group does not pool it], whether its group pools it, and each
    group's source (:data:`ACCEPTANCE_FROM`)."""
    number = np.asarray(number, dtype=np.int64)
    tau, cycles = _numbers(rows, "accept_len"), _numbers(rows, "num_drafts")
    drafts = _numbers(rows, "request_drafts") if "request_drafts" in rows.columns else cycles
    accepted = _numbers(rows, "accepted_tokens")
    level = (
        rows["level_accept_len"].astype(object).eq(True).to_numpy()
        if "level_accept_len" in rows.columns
        else np.zeros(len(rows), dtype=bool)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        counted = tau.where(cycles.notna(), 1 + accepted / drafts.where(drafts > 0)).to_numpy()
    counts = drafts.notna().to_numpy()
    tau, cycles, drafts = tau.to_numpy(), cycles.to_numpy(), drafts.to_numpy()
    own = counts | (~np.isnan(tau) & ~level)
    has_own = np.bincount(number[own], minlength=groups) > 0
    has_level = np.bincount(number[level], minlength=groups) > 0
    use_own = own & has_own[number]
    taken = use_own | (level & ~has_own[number] & has_level[number])
    values = np.where(use_own, np.where(counts, counted, tau), tau)
    weights = np.where(use_own, drafts, cycles)
    sources = np.where(has_own, "requests", np.where(has_level, "level", ""))
    return np.where(taken, values, np.nan), np.where(taken, weights, np.nan), taken, sources


def acceptance_rate(rows: Any) -> float:
    """The fraction of the drafted tokens accepted over ``rows`` (requests) that give both
    counts, ``sum(accepted_tokens) / sum(draft_tokens)`` [fraction]; NaN where none does."""
    return float(group_acceptance_rate(rows, np.zeros(len(rows), dtype=np.int64), 1)[0])


def group_acceptance_rate(rows: Any, number: Any, groups: int) -> Any:
    """:func:`acceptance_rate` of each group of ``rows`` at once (``number``: each row's group,
    0 to ``groups`` - 1) [fraction]."""
    drafted = _numbers(rows, "draft_tokens").to_numpy()
    accepted = _numbers(rows, "accepted_tokens").to_numpy()
    both = (drafted > 0) & (accepted >= 0)
    at = np.asarray(number, dtype=np.int64)[both]
    total = np.bincount(at, weights=drafted[both], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.bincount(at, weights=accepted[both], minlength=groups) / total
    return np.where(total > 0, rate, np.nan)


def _no_category(column: Any) -> bool:
    """A categorical column whose only text is empty ("": normalise's missing value): no row
    has a category, seen without a text a row."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return False
    return all(str(c) == "" for c in column.cat.categories)


def by_category(df: Any) -> tuple[CategoryRow, ...]:
    """Each speculative run's rows of each category against the baseline's rows of the same
    category, model, hardware and concurrency (see the module's description).  ``df`` is
    :func:`breakeven.measurements.normalise.normalise`'s frame (its ``label``, ``model``,
    ``hardware``, ``concurrency_key``, ``num_spec_tokens``, ``tok_s``, ``decoded``, ``launch``,
    ``accept_len``, ``num_drafts`` and ``category``; where present, the requests' own counts,
    ``request_drafts``, ``level_accept_len``, ``draft_tokens`` and ``accepted_tokens``,
    :func:`request_acceptance`): the unit of repetition and the decoded tokens are check's.
    Rows without a category are left out; empty where no row has one.

    One grouped pass, whatever the number of categories: every group's sums at once
    (:func:`breakeven.model.pooling.group_pooled_rates`,
    :func:`breakeven.measurements.intervals.group_sides`, :func:`group_accept_len_interval`),
    then a row a group."""
    if "category" not in df.columns or _no_category(df["category"]):
        return ()
    category = df["category"].astype(object).where(df["category"].notna(), "").astype(str)
    used = [c for c in df.columns if c in _USED]  # the rows are cut below: only what is read
    rows = df[used].assign(_category=category)
    rows = rows[rows["_category"] != ""]
    k = rows["num_spec_tokens"]
    spec, number, keys = _grouped(rows[k > 0], ["label", *_BASELINE_KEYS])
    base, base_number, base_keys = _grouped(rows[k == 0], _BASELINE_KEYS)
    groups = len(keys)
    if not groups:
        return ()
    base_of = {key: i for i, key in enumerate(base_keys)}
    at = np.array([base_of.get(key[1:], -1) for key in keys], dtype=np.int64)
    s, b = _rates(spec, number, groups), _rates(base, base_number, len(base_keys))
    b = {name: _at(value, at) for name, value in b.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        speedup = np.where((b["mean"] > 0) & (s["mean"] >= 0), s["mean"] / b["mean"], np.nan)
    _, low, high = interval_bounds(*s["side"], *b["side"])
    measured = (s["requests"] > 0) & (b["requests"] > 0)
    values, drafts, _, sources = group_request_acceptance(spec, number, groups)
    tau, tau_low, tau_high = group_accept_len_interval(values, drafts, number, groups)
    by_level = sources == "level"  # one value of the level's, not a sample of the requests
    tau_low, tau_high = (np.where(by_level, np.nan, x) for x in (tau_low, tau_high))
    label, _, _, conc, cat = (list(x) for x in zip(*keys, strict=True))
    conc = np.asarray(conc, dtype=float)
    low, high = (np.where(measured, x, np.nan) for x in (low, high))
    columns = {
        "label": [str(x) for x in label],
        "concurrency": np.where(conc >= 0, conc, np.nan),
        "category": [str(x) for x in cat],
        "requests": s["requests"],
        "baseline_requests": b["requests"],
        "accept_len": tau,
        "accept_len_low": tau_low,
        "accept_len_high": tau_high,
        "tok_s": s["mean"],
        "baseline_tok_s": b["mean"],
        "speedup": speedup,
        "ci_low": low,
        "ci_high": high,
        "verdict": list(map(verdict, speedup.tolist(), low.tolist(), high.tolist())),
        "acceptance_rate": group_acceptance_rate(spec, number, groups),
        "acceptance_from": np.where(np.isfinite(tau), sources, "").tolist(),
    }
    names = list(columns)
    values = [x.tolist() if isinstance(x, np.ndarray) else x for x in columns.values()]
    return tuple(
        CategoryRow(**dict(zip(names, row, strict=True))) for row in zip(*values, strict=True)
    )


_USED = {
    *("label", "model", "hardware", "concurrency_key", "num_spec_tokens", "tok_s", "decoded"),
    *("launch", "accept_len", "num_drafts", "request_drafts", "level_accept_len"),
    *("draft_tokens", "accepted_tokens"),
}
"""The columns :func:`by_category` reads (:func:`group_request_acceptance`'s among them)."""

_BASELINE_KEYS = ["model", "hardware", "concurrency_key", "_category"]
"""What a speculative run's category shares with the baseline rows it is measured against."""


def _grouped(rows: Any, keys: list[str]) -> tuple[Any, Any, list[tuple[Any, ...]]]:
    """``rows`` with a value in every key, each one's group (0, 1, ... in the order the groups
    first come), and each group's key values."""
    number = rows.groupby(keys, sort=False, observed=True).ngroup().to_numpy()
    if (number < 0).any():  # a key missing: no group
        rows, number = rows[number >= 0], number[number >= 0]
    _, first = np.unique(number, return_index=True)
    columns = [rows[key].to_numpy()[first] for key in keys]
    return rows, number, list(zip(*columns, strict=True))


def _rates(rows: Any, number: Any, groups: int) -> dict[str, Any]:
    """Each group's rows with a rate [requests], its pooled rate [tok/s] and its side (mean,
    standard error and degrees of freedom, :func:`group_sides`: the launch the unit)."""
    rate, decoded = rows["tok_s"].to_numpy(dtype=float), rows["decoded"].to_numpy(dtype=float)
    return {
        "requests": np.bincount(number[~np.isnan(rate)], minlength=groups),
        "mean": group_pooled_rates(number, rate, decoded, groups)[0],
        "side": group_sides(rate, rows["launch"].to_numpy(), decoded, number, groups),
    }


def _at(value: Any, at: Any) -> Any:
    """``value`` (an array over groups, or a tuple of them) at each index of ``at``; a missing
    group (-1) has no rows: 0 requests, NaN elsewhere."""
    if isinstance(value, tuple):
        return tuple(_at(v, at) for v in value)
    if value.dtype.kind in "iu":
        return np.where(at >= 0, value[np.maximum(at, 0)] if len(value) else 0, 0)
    return np.where(at >= 0, value[np.maximum(at, 0)] if len(value) else np.nan, np.nan)


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
        rows, number, keys = _grouped(rows, ["category", "num_spec_tokens"])
        values, drafts, _, _ = group_request_acceptance(rows, number, len(keys))
        requests = np.bincount(number[~np.isnan(values)], minlength=len(keys))
        ends = group_accept_len_interval(values, drafts, number, len(keys))
        mine = [
            _category_fit(g, str(cat), int(k), int(requests[i]), *(float(x[i]) for x in ends))
            for i, (cat, k) in enumerate(keys)
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


def _category_fit(
    g: Any, cat: str, k: int, requests: int, tau: float, low: float, high: float
) -> CategoryFit | None:
    """One category of a fitted group at k, from its requests' pooled accept_len and interval
    [tokens/cycle]; None where it has none, or the fit no cycle at k."""
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
        requests=requests,
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
