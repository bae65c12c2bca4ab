"""Per-category analysis is one grouped pass (issue 40, item 4): ``check``'s category rows and
``fit``'s category fits are computed for every group at once, and give what the per-category
computation they replace gave, group by group.

The reference below is that old computation, kept here as it was written: each speculative
run's category filtered out of the frame, its baseline filtered by comparison, and each
estimate made on its own (batch means, the spread across launches, the log-scale interval,
accept_len pooled from counts).  It cost time per category times rows; its answers are the
oracle.  How the time scales is a speed figure: ``benchmarks/categories.py``."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import stdtrit

from breakeven.measurements.intervals import CONFIDENCE, MIN_BATCHES, MIN_VALUES, verdict
from breakeven.measurements.normalise import normalise
from breakeven.measurements.workload import by_category, fit_by_category
from breakeven.model.pooling import group_pooled_rates, pooled_rate

# The old per-category computation (breakeven before issue 40), one group at a time.


def _old_numbers(rows, column):
    if column not in rows.columns:
        return pd.Series(np.nan, rows.index)
    return pd.to_numeric(rows[column].astype(object), errors="coerce").astype(float)


def _old_request_acceptance(rows):
    tau, cycles = _old_numbers(rows, "accept_len"), _old_numbers(rows, "num_drafts")
    drafts = _old_numbers(rows, "request_drafts") if "request_drafts" in rows.columns else cycles
    accepted = _old_numbers(rows, "accepted_tokens")
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


def _old_accept_len_interval(tau, drafts):
    tau, drafts = np.asarray(tau, dtype=float), np.asarray(drafts, dtype=float)
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


def _old_acceptance_rate(rows):
    drafted, accepted = _old_numbers(rows, "draft_tokens"), _old_numbers(rows, "accepted_tokens")
    both = (drafted > 0) & (accepted >= 0)
    total = float(drafted[both].sum())
    return float(accepted[both].sum()) / total if total > 0 else math.nan


def _old_side(values, launches, tokens):
    """(mean, se, df) of one side: batch means within one launch, else across launches."""
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values)
    x, w = values[keep], np.asarray(tokens, dtype=float)[keep]
    codes = np.unique(np.asarray(launches)[keep], return_inverse=True)[1].reshape(-1)
    if not len(codes):
        return math.nan, math.nan, math.nan
    groups = int(codes.max()) + 1
    rates, counts = group_pooled_rates(codes, x, w, groups)
    if groups > 1:
        r = rates[counts > 0]
        r = r[np.isfinite(r)]
        return float(r.mean()), float(r.std(ddof=1) / math.sqrt(len(r))), len(r) - 1.0
    n = len(x)
    if n < MIN_VALUES:
        return pooled_rate(x, w), math.nan, math.nan
    b = max(MIN_BATCHES, round(n ** (1 / 3)))
    size = n // b
    skip = n - b * size
    batches, _ = group_pooled_rates(np.repeat(np.arange(b), size), x[skip:], w[skip:], b)
    return pooled_rate(x, w), float(batches.std(ddof=1) / math.sqrt(b)), b - 1.0


def _old_interval(s, b):
    ratio = s[0] / b[0] if b[0] > 0 and s[0] >= 0 else math.nan
    if not (ratio > 0) or not (s[1] >= 0 and b[1] >= 0):
        return math.nan, math.nan
    rel_s, rel_b = s[1] / s[0], b[1] / b[0]
    se_log = math.hypot(rel_s, rel_b)
    if se_log == 0:
        return ratio, ratio
    df = se_log**4 / (rel_s**4 / s[2] + rel_b**4 / b[2])
    half = float(stdtrit(df, (1 + CONFIDENCE) / 2)) * se_log
    if not half < 700.0:
        return 0.0, math.inf
    return ratio * math.exp(-half), ratio * math.exp(half)


def _old_row(label, conc, cat, spec, base):
    rate, base_rate = spec["tok_s"], base["tok_s"]
    values, drafts, source = _old_request_acceptance(spec)
    tau, tau_low, tau_high = _old_accept_len_interval(values, drafts)
    if source == "level":
        tau_low = tau_high = math.nan
    s_mean = pooled_rate(rate, spec["decoded"])
    b_mean = pooled_rate(base_rate, base["decoded"])
    speedup = s_mean / b_mean if b_mean > 0 and s_mean >= 0 else math.nan
    low = high = math.nan
    if rate.notna().any() and base_rate.notna().any():
        low, high = _old_interval(
            _old_side(rate, spec["launch"], spec["decoded"]),
            _old_side(base_rate, base["launch"], base["decoded"]),
        )
    return {
        "label": label,
        "concurrency": conc if conc >= 0 else math.nan,
        "category": cat,
        "requests": int(rate.notna().sum()),
        "baseline_requests": int(base_rate.notna().sum()),
        "accept_len": tau,
        "accept_len_low": tau_low,
        "accept_len_high": tau_high,
        "tok_s": s_mean,
        "baseline_tok_s": b_mean,
        "speedup": speedup,
        "ci_low": low,
        "ci_high": high,
        "verdict": verdict(speedup, low, high),
        "acceptance_rate": _old_acceptance_rate(spec),
        "acceptance_from": source if math.isfinite(tau) else "",
    }


def _old_by_category(df):
    category = df["category"].astype(object).where(df["category"].notna(), "").astype(str)
    rows = df.assign(_category=category)
    rows = rows[rows["_category"] != ""]
    k = rows["num_spec_tokens"]
    base = rows[k == 0]
    out = []
    keys = ["label", "model", "hardware", "concurrency_key", "_category"]
    for (label, model, hardware, conc, cat), spec in rows[k > 0].groupby(
        keys, sort=False, observed=True
    ):
        same = base[
            (base["model"] == model)
            & (base["hardware"] == hardware)
            & (base["concurrency_key"] == conc)
            & (base["_category"] == cat)
        ]
        out.append(_old_row(str(label), float(conc), str(cat), spec, same))
    return out


# Small frames of requests: a baseline and two speculative runs over a few categories,
# models, concurrencies and launches, with every source of acceptance (num_drafts, drafted
# and accepted tokens, the level's value) present or missing.

maybe = st.none() | st.floats(1.0, 200.0)
request = st.fixed_dictionaries(
    {
        "label": st.sampled_from(["base", "eagle3", "ngram"]),
        "model": st.sampled_from(["m1", "m2"]),
        "concurrency": st.sampled_from([1.0, 4.0, None]),
        "category": st.sampled_from(["code", "chat", "math", "", None]),
        "tok_s": maybe,
        "completion_tokens": st.none() | st.integers(0, 300),
        "accept_len": st.none() | st.floats(1.0, 5.0),
        "num_drafts": st.none() | st.integers(0, 40),
        "draft_tokens": st.none() | st.integers(0, 120),
        "accepted_tokens": st.none() | st.integers(0, 100),
        "level_accept_len": st.booleans(),
        "launch_id": st.sampled_from(["a", "b", "c"]),
    }
)


def _frame(requests, with_counts):
    df = pd.DataFrame(requests)
    df["num_spec_tokens"] = df["label"].map({"base": 0, "eagle3": 3, "ngram": 4})
    df["hardware"] = "h"
    if not with_counts:
        df = df.drop(
            columns=["draft_tokens", "accepted_tokens", "level_accept_len"], errors="ignore"
        )
    return normalise(df)


def _same(got, want):
    for name, value in want.items():
        mine = getattr(got, name)
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(mine), (name, mine, value)
        elif isinstance(value, float):
            assert mine == pytest.approx(value, rel=1e-9, abs=1e-12), (name, mine, value)
        else:
            assert mine == value, (name, mine, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(request, min_size=1, max_size=60),
    repeat=st.integers(1, 3),
    with_counts=st.booleans(),
)
def test_category_rows_are_the_per_category_computations(requests, repeat, with_counts):
    """Every field of every category row (accept_len and its interval, rates, speedup and
    its interval, verdict, acceptance rate and source) and their order are the old
    per-category computation's; ``repeat`` makes groups of 16 values and more, where
    batch means give an interval."""
    df = _frame(requests * repeat, with_counts)
    got, want = by_category(df), _old_by_category(df)
    assert len(got) == len(want)
    for row, old in zip(got, want, strict=True):
        _same(row, old)


def test_one_launch_of_many_requests_gives_batch_means_as_before():
    """A category of 40 requests in one launch against 30 in another: a batch-means interval
    on each side, as the old computation gave it."""
    rng = np.random.default_rng(7)
    spec = [
        {"label": "eagle3", "launch_id": "s", "tok_s": 70 + 5 * rng.random()} for _ in range(40)
    ]
    base = [{"label": "base", "launch_id": "b", "tok_s": 50 + 5 * rng.random()} for _ in range(30)]
    for r in spec + base:
        r |= {"model": "m", "concurrency": 1.0, "category": "code", "completion_tokens": 101}
        r |= {"accept_len": 2.5 if r["label"] != "base" else None, "num_drafts": 30}
    df = _frame(spec + base, with_counts=False)
    (row,) = by_category(df)
    (old,) = _old_by_category(df)
    assert math.isfinite(row.ci_low) and row.ci_low < row.speedup < row.ci_high
    _same(row, old)


def _old_fit_rows(rows, g):
    out = []
    category = rows["category"].astype(object).where(rows["category"].notna(), "")
    rows = rows[category.astype(str) != ""]
    for (cat, k), part in rows.groupby(["category", "num_spec_tokens"], sort=False):
        values, drafts, _ = _old_request_acceptance(part)
        tau, low, high = _old_accept_len_interval(values, drafts)
        if tau >= 1 and g.cycle_ms(k) > 0:
            out.append((str(cat), int(k), int(values.notna().sum()), tau, low, high))
    return out


@settings(max_examples=80, deadline=None)
@given(requests=st.lists(request, min_size=1, max_size=40), with_counts=st.booleans())
def test_category_fits_are_the_per_category_computations(requests, with_counts):
    """fit's categories at each k: the same requests, accept_len and interval as each
    category's own computation gave."""
    df = pd.DataFrame(requests)
    df["num_spec_tokens"] = df["label"].map({"base": 0, "eagle3": 3, "ngram": 4})
    if not with_counts:
        df = df.drop(columns=["draft_tokens", "accepted_tokens", "level_accept_len"])
    spec = df[df["num_spec_tokens"] > 0].reset_index(drop=True)
    group = SimpleNamespace(
        model="m",
        hardware="h",
        concurrency=1.0,
        spec_method="eagle3",
        step_ms=10.0,
        cycle_ms=lambda k: 12.0 + k,
        interval_width=math.nan,
        measured_k=(3, 4),
    )
    fits, _ = fit_by_category([(spec, group)])
    got = [
        (f.category, f.k, f.requests, f.accept_len, f.accept_len_low, f.accept_len_high)
        for f in fits
    ]
    want = _old_fit_rows(spec, group)
    assert [g[:3] for g in got] == [w[:3] for w in want]
    for mine, old in zip(got, want, strict=True):
        for a, b in zip(mine[3:], old[3:], strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9)
