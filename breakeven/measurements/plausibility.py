"""Runs no engine could have produced, flagged with their lines: ``fit``'s notes that start
"implausible".  Each names what it saw, the rows' lines in the file where the rows have them,
and the likelier cause; none changes the fit.

And typed costs no engine could have measured (:func:`typed_times`, :func:`speedup_bound`),
which ``predict``, ``optimize`` and ``batch`` check before their arithmetic: an impossible one is
refused (a :class:`~breakeven.core.errors.BreakevenError`), a suspicious one flagged
(:data:`TYPED_FLAGS`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import DEFAULT_TOLERANCE


def falling_cycles(entries: list[dict[str, Any]]) -> list[str]:
    """A note per k whose implied cycle is shorter than a smaller k's by more than
    :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`: verifying and drafting more tokens
    cannot take less time, so one of the two was measured wrong (acceptance pooled over
    runs of several k, a baseline from another launch, a rate that is not per sequence)."""
    out = []
    measured = [e for e in entries if math.isfinite(e["implied"])]  # in k order
    for before, after in itertools.pairwise(measured):
        if after["implied"] < before["implied"] * (1 - DEFAULT_TOLERANCE):
            where = _where(before, after)
            out.append(
                f"implausible: the cycle falls as k grows, k = {after['k']}'s implied cycle "
                f"{after['implied']:.3f} ms against k = {before['k']}'s {before['implied']:.3f} "
                f"ms{where}; verifying and drafting more tokens cannot take less time (an "
                "accept_len pooled over runs of several k, or a rate not per sequence)"
            )
    return out


def _where(*entries: dict[str, Any]) -> str:
    """`` (line N)`` or `` (lines N and M)`` of the entries' first rows, where known."""
    lines = [int(e["line"]) for e in entries if math.isfinite(e["line"])]
    if len(lines) != len(entries):
        return ""
    return f" (line {lines[0]})" if len(lines) == 1 else f" (lines {lines[0]} and {lines[1]})"


def impossible_acceptance(entries: list[dict[str, Any]]) -> list[str]:
    """A note per k whose accept_len is above k + 1 (a cycle emits at most its k drafted
    tokens and the bonus), and per pair of measured k whose accept_len rises by more than the
    draft tokens added (each added token adds at most one), beyond
    :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`."""
    out = []
    known = [e for e in entries if e["accept_len"] >= 1]
    for e in known:
        if e["accept_len"] > (e["k"] + 1) * (1 + DEFAULT_TOLERANCE):
            out.append(
                f"implausible: accept_len {e['accept_len']:.3f} at k = {e['k']} is above "
                f"k + 1 = {e['k'] + 1}{_where(e)}; a cycle emits at most its k drafted tokens "
                "and the bonus (accepted tokens counted with the bonus twice, or a k that is "
                "not the run's)"
            )
    for before, after in itertools.pairwise(known):
        rise, added = after["accept_len"] - before["accept_len"], after["k"] - before["k"]
        if rise > added * (1 + DEFAULT_TOLERANCE) and after["accept_len"] <= after["k"] + 1:
            out.append(
                f"implausible: accept_len rises by {rise:.3f} from k = {before['k']} to "
                f"k = {after['k']}{_where(before, after)}, more than the {added} draft "
                "tokens added (runs of another prompt set or launch)"
            )
    return out


def out_of_range(df: Any) -> list[str]:
    """A note per column of :data:`~breakeven.core.schema.RANGED_COLUMNS` holding numbers outside
    its range (an acceptance_rate above 1, an accept_len below 1), naming the rows' lines and
    the likely cause; those cells of ``df`` (numbers already, with a ``line`` column) are
    replaced by NaN, so no impossible number is used, and none is left out unsaid.  A file's
    are refused as it is read (:func:`~breakeven.iotools.csvfile.read_measurements`): this
    is for rows given as a DataFrame."""
    # lazy: start-up (the schema imports numpy, which predict's path never needs)
    from breakeven.core.schema import ALL_COLUMNS, RANGED_COLUMNS, bad_number_message

    out = []
    for column in RANGED_COLUMNS:
        if column not in df.columns:
            continue
        spec = ALL_COLUMNS[column]
        values = df[column]
        outside = (values < spec.lowest) | (values > spec.highest)
        if not outside.any():
            continue
        count = int(outside.sum())
        lines = df.loc[outside, "line"].to_numpy(dtype=float)
        word = "line" if all(v == v for v in lines) else "row"  # rows given without lines
        if word == "row":
            lines = outside.to_numpy().nonzero()[0] + 1.0
        shown = ", ".join(str(int(v)) for v in lines[:5]) + (" and more" if count > 5 else "")
        out.append(
            f"implausible: {count} row(s) ({word}{'s' if count > 1 else ''} {shown}): "
            f"{bad_number_message(column, float(values[outside].iloc[0]))}; left out"
        )
        df[column] = values.where(~outside)
    return out


def pooled_over_k(df: Any) -> list[str]:
    """A note per launch (``launch_id``) whose speculative rows are at several k: a server
    start runs one k, so its accept_len and rate may be pooled over several (a dynamic-k
    engine, or a log of several launches under one id)."""
    spec = df[(df["num_spec_tokens"] > 0) & df["launch_id"].notna()]
    out = []
    for launch, rows in spec.groupby("launch_id", sort=False):
        ks = sorted({int(k) for k in rows["num_spec_tokens"] if k == round(k)})
        if len(ks) > 1:
            lines = rows["line"].dropna()
            at = f" (lines {int(lines.min())} to {int(lines.max())})" if len(lines) else ""
            shown = render.printable(str(launch))
            out.append(
                f"implausible: launch {shown} has runs at k = {', '.join(map(str, ks))}{at}; "
                "a server start runs one k, so its acceptance may be pooled over several "
                "(a dynamic-k engine, or several launches under one id)"
            )
    return out


def slow_batch_growth(per_k: Any, steps: dict[tuple[Any, ...], float]) -> list[str]:
    """A note per method and k whose implied cycle grows from one batch size to the next by
    less than the plain step does, beyond :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`:
    a verify of B x (k + 1) tokens and B drafts cannot grow slower than a decode of B."""
    out = []
    keys = ["model", "hardware", "spec_method", "context", "k"]
    known = per_k[(per_k["concurrency"] > 0) & (per_k["implied"] > 0)]
    if known.empty:
        return out
    # Only a method and k at two batch sizes or more can grow slower than the step.
    known = known[known.groupby(keys, sort=False)["concurrency"].transform("nunique") > 1]
    for (model, hardware, method, context, k), rows in known.groupby(keys, sort=False):
        at = []
        for e in rows.sort_values("concurrency").itertuples():
            step = steps.get((model, hardware, e.concurrency, context), math.nan)
            if step > 0:
                at.append((e.concurrency, e.implied, step, e.line))
        for (b1, c1, s1, l1), (b2, c2, s2, l2) in itertools.pairwise(at):
            if c2 / c1 < (s2 / s1) * (1 - DEFAULT_TOLERANCE):
                lines = f" (lines {int(l1)} and {int(l2)})" if l1 == l1 and l2 == l2 else ""
                out.append(
                    f"implausible: {render.printable(method) or 'runs'} at k = {int(k)}: the cycle "
                    f"grows {c2 / c1:.2f}x from batch {b1:g} to {b2:g}, the plain step "
                    f"{s2 / s1:.2f}x{lines}; a dense model's verify of B x (k + 1) tokens "
                    "cannot grow slower than its decode of B (a baseline from another launch "
                    "or load); a Mixture of Experts' can: give --experts and --top-k"
                )
    return out


UNIT_SLIP = 100.0
"""Two times of one decode this many times apart or more [x] were typed in two units (seconds
for milliseconds): no cost of a cycle is a hundred plain steps shorter or longer than a step."""

AT_LEAST_A_STEP = ("cycle_ms", "verify_ms")
"""The typed times that cost at least one plain step: a verify forward of k + 1 tokens, and the
cycle around it."""

TYPED_FLAGS = {
    "cycle_below_step": "a typed cycle or verify forward shorter than one plain step by more "
    "than the tolerance: the speedup then exceeds accept_len",
    "times_far_apart": "a typed cost a hundred plain steps or more: one of the two times in "
    "another unit",
    "curve_falls": "a cost curve whose forward time falls as its tokens grow, by more than "
    "the tolerance",
    "context_extrapolated": "a cost the tool derived for --context, beyond what the fit's runs "
    "support, that came out below what a decode can cost: clamped, and the prediction is an "
    "extrapolation",
}
"""The codes of the flags on typed inputs, and what each means."""


class TypedFlag(NamedTuple):
    """A suspicious typed input: a code of :data:`TYPED_FLAGS` and a sentence naming the value,
    its unit and the likely cause."""

    code: str
    message: str

    def note(self) -> str:
        """The flag as one of a result's notes: ``flagged (code): message``."""
        return f"flagged ({self.code}): {self.message}"


def _step_of(step_ms: float, step_name: str, baseline_tok_s: float | None) -> str:
    """The plain step as a template names it: ``the 15.898 ms plain step of {1} = 62.9 tok/s``
    (a baseline rate given), ``the plain step {1} = 15.898 ms`` (a step given), or ``the 7.37
    ms plain step of {1}`` (a cost curve's)."""
    if step_name == "baseline_tok_s" and baseline_tok_s is not None:
        return f"the {step_ms:.5g} ms plain step of {{1}} = {baseline_tok_s:g} tok/s"
    if step_name == "step_ms":
        return f"the plain step {{1}} = {step_ms:g} ms"
    return f"the {step_ms:.5g} ms plain step of {{1}}"  # a curve's, at its first batch


def typed_times(
    step_ms: float,
    step_name: str,
    times: Iterable[tuple[str, float | None]],
    baseline_tok_s: float | None = None,
) -> list[TypedFlag]:
    """Check each typed time [ms] against the plain step [ms]: raise for a cycle or verify
    forward :data:`UNIT_SLIP` times shorter than the step or more (one was typed in seconds),
    flag one shorter by more than :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`
    (``cycle_below_step``), and any time :data:`UNIT_SLIP` times longer or more
    (``times_far_apart``).

    Parameters
    ----------
    step_ms : float  [ms]
        The plain decode step.
    step_name : str
        How the step was given: ``step_ms``, or ``baseline_tok_s`` (then ``baseline_tok_s``
        is the rate typed [tok/s]).
    times : iterable of (str, float or None)
        Each time's argument name and value [ms]; None: not given.  Those of
        :data:`AT_LEAST_A_STEP` may not be shorter than the step; the others (drafting,
        overhead) may.

    Raises
    ------
    BreakevenError
        Naming the time and the step's argument: a time typed in seconds.
    """
    flags = []
    if not (step_ms > 0 and math.isfinite(step_ms)):
        return flags
    step_of = _step_of(step_ms, step_name, baseline_tok_s)
    for name, value in times:
        if value is None or not (value > 0 and math.isfinite(value)):
            continue
        shorter = step_ms / value
        if name in AT_LEAST_A_STEP and shorter >= UNIT_SLIP:
            raise _typed_in_seconds(name, value, shorter, step_ms, step_name, step_of)
        if name in AT_LEAST_A_STEP and value * (1 + DEFAULT_TOLERANCE) < step_ms:
            what, so = (
                ("cycle", "the speedup exceeds accept_len")
                if name == "cycle_ms"
                else ("verify forward", "the cycle priced on it is too short")
            )
            flags.append(
                TypedFlag(
                    "cycle_below_step",
                    f"{name} {value:g} ms is {shorter:.2f}x shorter than "
                    + step_of.replace("{1}", step_name)
                    + f"; a {what} costs at least one plain step (a verify forward of k + 1 "
                    f"tokens), so {so} (a step and a cycle from different launches or loads, "
                    "or a cycle from a rate over the batch)",
                )
            )
        elif value / step_ms >= UNIT_SLIP:
            flags.append(
                TypedFlag(
                    "times_far_apart",
                    f"{name} {value:g} ms is {value / step_ms:.0f}x "
                    + step_of.replace("{1}", step_name)
                    + ": "
                    + _far_apart_cause(name, value, step_ms, step_name),
                )
            )
    return flags


def _far_apart_cause(name: str, value: float, step_ms: float, step_name: str) -> str:
    """The likely causes of a time a hundred steps long: the time in microseconds (where that
    is at least a step, for a time that must be), or a step too short."""
    causes = []
    if name not in AT_LEAST_A_STEP or value / 1000 >= step_ms * (1 - DEFAULT_TOLERANCE):
        causes.append(f"{name} in microseconds is {value / 1000:g} ms")
    if step_name == "baseline_tok_s":
        causes.append("a baseline rate of all sequences together is not per sequence")
    else:
        causes.append(f"the step in seconds is {step_ms * 1000:g} ms")
    return "typed in another unit? " + "; ".join(causes)


def _typed_in_seconds(
    name: str, value: float, shorter: float, step_ms: float, step_name: str, step_of: str
) -> BreakevenError:
    """A cycle or verify forward far shorter than the step: typed in seconds, or so wrong that
    no unit explains it."""
    what = "cycle" if name == "cycle_ms" else "verify forward"
    if value * 1000 >= step_ms * (1 - DEFAULT_TOLERANCE):
        cause = f"typed in seconds? did you mean {value * 1000:g} ms?"
    else:
        cause = "typed in another unit? give it in ms"
    return BreakevenError(
        "{0} is "
        + f"{value:g} ms, {shorter:.0f}x shorter than "
        + step_of
        + f": a {what} costs at least one plain step (a verify forward of k + 1 tokens); "
        + cause,
        name,
        step_name,
    )


def speedup_bound(k: float) -> float:
    """The largest speedup [x] at k draft tokens that is not refused: k + 1 (a cycle emits at
    most its k drafted tokens and the bonus, in at least one plain step's time), within
    :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`."""
    return (k + 1) * (1 + DEFAULT_TOLERANCE)


def impossible_speedup(
    speedup: float,
    k: int,
    accept_len: float,
    cycle_ms: float,
    step_ms: float,
    names: tuple[str, str],
) -> BreakevenError | None:
    """The refusal of a speedup [x] above :func:`speedup_bound` (``names``: the cycle's and the
    step's arguments), or None."""
    if not speedup > speedup_bound(k):
        return None
    return BreakevenError(
        ("{0} and {1}: " if names[0] != names[1] else "{0}: ")
        + f"the speedup {speedup:.4g}x at k = {k} is above k + 1 = {k + 1}, which no cycle "
        "reaches: a cycle emits at most its k drafted tokens and the bonus, and its verify "
        f"forward costs at least one plain step, but the cycle {cycle_ms:g} ms is "
        f"{step_ms / cycle_ms:.2f}x shorter than the step {step_ms:.5g} ms (accept_len "
        f"{accept_len:g}): a step and a cycle from different launches or loads, a cycle from "
        "a rate over the batch, or a time in another unit",
        *names,
    )


def falling_curve(tokens: Iterable[float], ms: Iterable[float], what: str) -> list[TypedFlag]:
    """A flag where a cost curve's forward time [ms] falls as its tokens grow, by more than
    :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE` (``curve_falls``): a forward over more
    tokens reads the same weights and more, so a step or cycle cannot shrink as the batch
    grows (rows of two runs or launches, or a column in another unit).  ``what`` names the
    curve."""
    points = list(zip(tokens, ms, strict=True))
    flags = []
    for (t1, m1), (t2, m2) in itertools.pairwise(points):
        if m2 < m1 * (1 - DEFAULT_TOLERANCE):
            flags.append(
                TypedFlag(
                    "curve_falls",
                    f"{what}: the forward time falls from {m1:g} ms at {t1:g} tokens to "
                    f"{m2:g} ms at {t2:g}; a forward over more tokens cannot take less time, "
                    "so the step or the cycle shrinks as the batch grows (rows of two runs "
                    "or launches, or times in another unit)",
                )
            )
    return flags


__all__ = (
    "AT_LEAST_A_STEP",
    "TYPED_FLAGS",
    "UNIT_SLIP",
    "TypedFlag",
    "falling_curve",
    "falling_cycles",
    "impossible_acceptance",
    "impossible_speedup",
    "out_of_range",
    "pooled_over_k",
    "slow_batch_growth",
    "speedup_bound",
    "typed_times",
)
