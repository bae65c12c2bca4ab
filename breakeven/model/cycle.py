"""The cycle against k, in the forms ``fit`` chooses among by held-out error.

A speculative cycle drafts k tokens and verifies them; its time grows with k.  ``fit`` has
each run's implied cycle and asks what form that growth takes:

- ``leviathan``: ``step * (1 + c k)``, Leviathan et al.'s assumption, one slope through the
  plain step (a verify of k + 1 tokens costs a step, drafting c steps per token);
- ``anchored``: a line, fitted with the plain step as one more point at k = 0;
- ``linear``: a line, its constant and slope free (non-negative least squares over the
  cycle's terms, :func:`breakeven.model._lsq.solve_groups`, with profiled times where rows have
  them);
- ``curved``: ``a + b k + c k**2``, c of either sign (a power cap makes speculation's cycle
  convex; some engines' is concave), held flat past a concave curve's top.

Each form is fitted once per measured k without that k (leave-one-out), and the simplest
form a form with more parameters does not beat by :data:`PARSIMONY` is used
(:func:`choose_form`); the held-out errors also size each prediction's interval
(:func:`interval_width`, :func:`half_width`).  Pure math, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from breakeven.core.choices import CYCLE_FORMS, FORM_CHOICES
from breakeven.model._lsq import proportional_groups, solve_groups

MIN_K = {"leviathan": 1, "anchored": 1, "linear": 2, "curved": 3}
"""The distinct k with a cycle each form needs [k]; one more gives it a held-out error."""

PARAMETERS = {"leviathan": 1, "anchored": 2, "linear": 2, "curved": 3}
"""The parameters each form fits [-] (Leviathan's constant is the plain step; the anchored
line's constant and slope are fitted with the step as one more point)."""

PARSIMONY = 0.9
"""A form with more parameters is chosen over a simpler one only when its held-out error is
below this fraction of the simpler one's [fraction]."""

OFF_THE_LINE = 0.10
"""With too few k to hold out the free line, the forms through the plain step are kept only
while their held-out error is within this [fraction]; beyond it the step is not on the runs'
line (an overhead the plain step does not have) and the free line is fitted.  Chosen on the
tests' published sweeps: 5% gave their extrapolation a median error of 3.1%, 8% and 10% 2.1%."""

INTERVAL_SCALE = 1.5
"""A predicted speedup's interval is +- this times the chosen form's largest held-out error
[-], widened beyond the measured k (see :func:`_half_width`)."""

INTERVAL_FLOOR = 0.02
"""The narrowest interval, +- this fraction of the prediction [fraction]: two k fitted
exactly hold each other out exactly, yet published sweeps bend between them by up to 3%
(a power cap), and runs of one k differ by 1-2% between launches."""


@dataclass(frozen=True)
class FormScore:
    """How well one form of the cycle predicts the k it was not fitted on."""

    form: str
    """One of :data:`CYCLE_FORMS`."""
    parameters: int
    """Parameters fitted [-] (Leviathan's 1: the constant is the plain step)."""
    held_out_rms: float
    """Root mean square of the leave-one-out errors of the speedup, ``measured cycle /
    predicted cycle - 1`` over each k fitted without its runs [fraction] (NaN: see ``why``)."""
    held_out_max: float
    """The largest of their absolute values [fraction]."""
    held_out_k: int
    """The k held out [k]."""
    why: str = ""
    """Why the form has no held-out error (too few k, no baseline step), if it has none."""


def cycle_at(coefficients: dict[str, float], k: Any) -> Any:
    """The cycle [ms] the coefficients give at ``k``; a concave curve (``curvature_ms`` < 0)
    is held flat past its top, ``k = -slope / (2 curvature)``: a cycle never falls as k
    grows."""
    c = coefficients
    slope = c.get("verify_per_token_ms", 0.0) + c.get("draft_per_token_ms", 0.0)
    curvature = c.get("curvature_ms", 0.0)
    if curvature < 0:
        k = np.minimum(k, slope / (-2.0 * curvature))
    return (
        c.get("verify_base_ms", 0.0)
        + c.get("overhead_ms", 0.0)
        + c.get("draft_per_cycle_ms", 0.0)
        + slope * k
        + curvature * k * k
    )


@dataclass(frozen=True)
class FittedCycle:
    """A fit group's whole cycle as ``optimize``'s verify cost of ``tokens`` per forward (its
    ``verify_curve``): the cycle at ``k = tokens / batch - 1`` [ms], drafting included.  What
    ``optimize --fit-file`` prices a curved fit with (a curve is not a verify plus a draft
    step per token)."""

    coefficients: dict[str, float]
    batch: int = 1
    min_tokens: float = 1.0
    max_tokens: float = math.inf
    context_ms: float = 0.0
    """What another context than the fit's adds to every cycle [ms] (``--context``)."""
    context_per_k_ms: float = 0.0
    """And per draft token [ms]."""
    floor_ms: float = -math.inf
    """The least a cycle can cost [ms]: one plain step, where another context's growth would
    take it below (``--context`` beyond the fit's runs)."""

    def __call__(self, tokens: Any) -> Any:
        k = np.asarray(tokens, dtype=float) / self.batch - 1
        moved = cycle_at(self.coefficients, k) + self.context_ms + self.context_per_k_ms * k
        return np.maximum(moved, self.floor_ms)


def coefficient_names(draft_cost: str) -> list[str]:
    draft = "draft_per_token_ms" if draft_cost == "per-token" else "draft_per_cycle_ms"
    return ["verify_base_ms", "verify_per_token_ms", draft, "overhead_ms"]


def equations(rows: Any, draft_cost: str) -> tuple[Any, Any]:
    """The design matrix over (verify_base, verify_per_token, draft, overhead) and the
    right-hand sides [ms]: per row ``(k, cycle, verify, draft, profiled)``, one equation for
    each cost that is known."""

    per_token = draft_cost == "per-token"
    a, b = [], []
    for k, cycle, verify, draft, _ in rows:
        d = k if per_token else 1.0
        for value, coefficients in (
            (cycle, [1.0, k, d, 1.0]),
            (verify, [1.0, k, 0.0, 0.0]),
            (draft, [0.0, 0.0, d, 0.0]),
        ):
            if math.isfinite(value):
                a.append(coefficients)
                b.append(value)
    return np.array(a, dtype=float).reshape(-1, 4), np.array(b, dtype=float)


def fit_form(
    entries: list[dict[str, Any]],
    draft_cost: str,
    skip: int | None = None,
    form: str = "linear",
    step: float = math.nan,
) -> tuple[dict[str, float], tuple[str, ...], float, set[int] | None]:
    """Coefficients of the cycle in ``form`` (:data:`CYCLE_FORMS`) from the k entries (less
    entry ``skip``'s run), the merged terms, the residual RMS, and the only k the fit can
    speak for (None: any k; empty: none)."""
    names = coefficient_names(draft_cost)
    rows = []
    for i, e in enumerate(entries):
        implied = e["implied"] if i != skip else math.nan
        rows.append((e["k"], implied, math.nan, math.nan, False))
        if math.isfinite(e["cycle"]) or math.isfinite(e["verify"]) or math.isfinite(e["draft"]):
            rows.append((e["k"], e["cycle"], e["verify"], e["draft"], True))
    if form in ("leviathan", "curved"):
        return _fit_through_cycles(rows, names, form, step)
    ks = {int(row[0]) for row in rows if any(math.isfinite(v) for v in row[1:4])}
    if form == "anchored" and ks:
        rows.append((0, step, math.nan, math.nan, False))  # the plain step: a cycle at k = 0
    line = _line_of_cycles(rows, names)
    if line is not None:
        return line
    a, b = equations(rows, draft_cost)

    groups, merged = proportional_groups(a, names)
    x, rms = solve_groups(a, b, groups)
    # No run gave a cycle: nothing determined the coefficients (NaN, never the solver's 0).
    coefficients = {name: float(x[j]) if ks else math.nan for j, name in enumerate(names)}
    constant = {0, 3} | ({2} if draft_cost == "per-cycle" else set())
    mixed = any(set(g) & constant and set(g) - constant for g in groups)
    spoken = ks | ({0} if form == "anchored" and ks else set())
    only = ks if len(spoken) <= 1 or mixed else None  # no slope to extrapolate with
    return coefficients, merged, rms, only


def _line_of_cycles(
    rows: list[tuple[Any, ...]], names: list[str]
) -> tuple[dict[str, float], tuple[str, ...], float, None] | None:
    """The line ``c0 + c1 k`` (c0, c1 >= 0) through rows that are all cycles (no profiled
    verify or draft) at two or more k, in closed form: what the general non-negative least
    squares of :func:`fit_form` gives on them, without its solver (``fit`` holds every k of
    every form out, so this runs thousands of times).  None for any other rows."""
    if any(r[4] for r in rows):
        return None
    points = [(float(r[0]), float(r[1])) for r in rows if math.isfinite(r[1])]
    if len({k for k, _ in points}) < 2:
        return None
    k = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    design = np.column_stack([np.ones_like(k), k])
    candidates = []
    c0, c1 = np.linalg.lstsq(design, y, rcond=None)[0]
    if c0 >= 0 and c1 >= 0:
        candidates.append((float(c0), float(c1)))
    else:  # the optimum is on a bound: one coefficient 0
        candidates.append((max(0.0, float(y.mean())), 0.0))
        candidates.append((0.0, max(0.0, float(k @ y) / float(k @ k))))
    best = min(candidates, key=lambda c: float(np.sum((c[0] + c[1] * k - y) ** 2)))
    per_token = names[2] == "draft_per_token_ms"
    merged = (
        " + ".join([names[0], *([] if per_token else [names[2]]), names[3]]),
        *([" + ".join(names[1:3])] if per_token else []),
    )
    coefficients = dict.fromkeys(names, 0.0)
    coefficients[names[0]], coefficients[names[1]] = best
    return coefficients, merged, _rms(best[0] + best[1] * k - y), None


def _nonnegative_first_two(design: Any, y: Any) -> Any:
    """Least squares of ``design @ x = y`` with ``x[0], x[1] >= 0`` and ``x[2]`` free: the
    unconstrained solution where it is feasible, else the best feasible one with some of the
    first two held at 0 (a convex problem's optimum lies on one of those faces), in closed
    form (``fit`` holds every k of every form out: thousands of small solves)."""
    best, best_sse = None, math.inf
    for zero in ((), (0,), (1,), (0, 1)):
        free = [j for j in range(design.shape[1]) if j not in zero]
        x = np.zeros(design.shape[1])
        x[free] = np.linalg.lstsq(design[:, free], y, rcond=None)[0]
        if x[0] < 0 or x[1] < 0:
            continue
        sse = float(np.sum((design @ x - y) ** 2))
        if not zero and best is None:
            return x  # the unconstrained optimum is feasible
        if sse < best_sse:
            best, best_sse = x, sse
    return best


def _fit_through_cycles(
    rows: list[tuple[Any, ...]], names: list[str], form: str, step: float
) -> tuple[dict[str, float], tuple[str, ...], float, set[int] | None]:
    """Leviathan's form, ``cycle = step * (1 + c k)`` (the constant is the plain step, one
    slope fitted), or the curved form, ``a + b k + c k**2`` (a, b >= 0, c of either sign),
    least squares over the cycles of ``rows`` (implied and measured; profiled verify and
    draft times are not used).  The constant is held in the first name, the slope in the
    second, and the terms they stand for are said merged."""
    k = np.array([r[0] for r in rows if math.isfinite(r[1])], dtype=float)
    y = np.array([r[1] for r in rows if math.isfinite(r[1])], dtype=float)
    ks = {int(v) for v in k}
    coefficients = dict.fromkeys(names, 0.0)
    per_token = names[2] == "draft_per_token_ms"
    merged = (
        " + ".join([names[0], *([] if per_token else [names[2]]), names[3]]),
        " + ".join([names[1], *([names[2]] if per_token else [])]),
    )
    if form == "leviathan":
        if not ks or not step > 0:
            return dict.fromkeys(names, math.nan), merged, math.nan, set()
        slope = max(0.0, float(k @ (y - step)) / float(k @ k)) if k.any() else 0.0
        coefficients[names[0]], coefficients[names[1]] = step, slope
        residual = y - step - slope * k
        return coefficients, merged, _rms(residual), None
    if len(ks) < 3:
        nan = dict.fromkeys([*names, "curvature_ms"], math.nan)
        return nan, merged, math.nan, set()
    design = np.column_stack([np.ones_like(k), k, k * k])
    solution = _nonnegative_first_two(design, y)
    coefficients[names[0]], coefficients[names[1]] = float(solution[0]), float(solution[1])
    coefficients["curvature_ms"] = float(solution[2])
    residual = y - design @ solution
    return coefficients, merged, _rms(residual), None


def _rms(residual: Any) -> float:
    """Root mean square [ms]; an absurd run's overflow is inf, not a warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.mean(np.square(residual))))


def predicted_cycle(coefficients: dict[str, float], only: set[int] | None, k: int) -> float:
    if only is not None and k not in only:
        return math.nan  # runs at one k only: the fit cannot extrapolate in k
    return float(cycle_at(coefficients, k))


def _held_out_cycles(
    entries: list[dict[str, Any]], measured: list[int], form: str, step: float
) -> dict[int, float] | None:
    """Each ``measured`` entry's cycle [ms] predicted by ``form`` fitted without it, all at
    once in closed form, where the entries are implied cycles only (no profiled cycle,
    verify or draft) at distinct k: what :func:`fit_form` and :func:`predicted_cycle` give
    one entry at a time (``fit`` scores every form on every group: thousands of small fits).
    None where that does not apply."""
    profiled = ("cycle", "verify", "draft")
    if any(math.isfinite(e[x]) for e in entries for x in profiled):
        return None
    k = np.array([float(entries[i]["k"]) for i in measured])
    y = np.array([float(entries[i]["implied"]) for i in measured])
    if len(set(k.tolist())) < len(k):
        return None
    if form == "curved":
        return _held_out_curves(entries, measured, k, y)
    # Sums over every point less each one in turn (the anchored line's step a fixed point).
    anchor = 1.0 if form == "anchored" else 0.0
    s0 = len(k) - 1 + anchor
    sk, skk = k.sum() - k, (k * k).sum() - k * k
    sy = y.sum() - y + anchor * step
    sky, syy = (k * y).sum() - k * y, (y * y).sum() - y * y + anchor * step * step
    if form == "leviathan":
        slope = np.maximum(0.0, (sky - step * sk) / skk)
        return dict(zip(measured, (step + slope * k).tolist(), strict=True))
    det = s0 * skk - sk * sk
    c1 = (s0 * sky - sk * sy) / det
    c0 = (sy - c1 * sk) / s0
    inside = (c0 >= 0) & (c1 >= 0)
    # Else the optimum is on a bound (as in _line_of_cycles): the better of c1 = 0, c0 = 0.
    flat, through = np.maximum(0.0, sy / s0), np.maximum(0.0, sky / skk)

    def sse(a: Any, b: Any) -> Any:
        return syy - 2 * a * sy - 2 * b * sky + a * a * s0 + 2 * a * b * sk + b * b * skk

    first = sse(flat, 0.0) <= sse(0.0, through)
    c0 = np.where(inside, c0, np.where(first, flat, 0.0))
    c1 = np.where(inside, c1, np.where(first, 0.0, through))
    return dict(zip(measured, (c0 + c1 * k).tolist(), strict=True))


def _held_out_curves(
    entries: list[dict[str, Any]], measured: list[int], k: Any, y: Any
) -> dict[int, float]:
    """The curved form's held-out cycles (:func:`_held_out_cycles`): each fit by the normal
    equations where its constant and slope come out >= 0, else by
    :func:`_nonnegative_first_two`; the curve as :func:`cycle_at` prices it."""
    design = np.column_stack([np.ones_like(k), k, k * k])
    out = {}
    for j, i in enumerate(measured):
        keep = np.arange(len(k)) != j
        a, b = design[keep], y[keep]
        x = np.linalg.solve(a.T @ a, a.T @ b)
        if x[0] < 0 or x[1] < 0:
            x = _nonnegative_first_two(a, b)
        c = {"verify_base_ms": x[0], "verify_per_token_ms": x[1], "curvature_ms": x[2]}
        out[i] = float(cycle_at(c, entries[i]["k"]))
    return out


def score_form(
    entries: list[dict[str, Any]], draft_cost: str, step: float, form: str
) -> tuple[FormScore, dict[int, float]]:
    """One form's leave-one-out errors: each k with an implied cycle fitted without its runs
    and predicted, ``implied / predicted - 1`` (the speedup's relative error) [fraction]."""
    parameters = PARAMETERS[form]
    measured = [i for i, e in enumerate(entries) if math.isfinite(e["implied"])]
    have = len({entries[i]["k"] for i in measured})

    def unscored(why: str) -> tuple[FormScore, dict[int, float]]:
        return FormScore(form, parameters, math.nan, math.nan, 0, why), {}

    if form in ("leviathan", "anchored") and not step > 0:
        return unscored("needs a baseline's step")
    if have < MIN_K[form] + 1:
        return unscored(f"needs {MIN_K[form] + 1} k with a cycle for a held-out error, has {have}")
    cycles = _held_out_cycles(entries, measured, form, step)
    for i in measured if cycles is None else ():
        coefficients, _, _, only = fit_form(entries, draft_cost, i, form, step)
        cycles = (cycles or {}) | {i: predicted_cycle(coefficients, only, entries[i]["k"])}
    if not all(c > 0 for c in cycles.values()):
        return unscored("a k held out leaves too few to fit")
    e = np.abs([entries[i]["implied"] / c - 1 for i, c in cycles.items()])
    rms, largest = _rms(e), float(e.max())
    return FormScore(form, parameters, rms, largest, len(e)), cycles


def choose_form(scores: list[FormScore], requested: str, step: float, have: int) -> tuple[str, str]:
    """The form to fit and why: the one asked for, else the simplest whose held-out error a
    form with more parameters does not beat by :data:`PARSIMONY`; without held-out errors,
    Leviathan's form where there is a step (one slope: what one k can determine)."""
    if requested != "auto":
        return requested, "asked for (--cycle-form)"
    scored = [x for x in scores if math.isfinite(x.held_out_rms)]
    if not scored:
        if step > 0 and have:
            return "leviathan", (
                "too few k for a held-out error: Leviathan's form, one slope through the plain "
                "step, is what the runs can determine; nothing checked it"
            )
        return "linear", "too few k for a held-out error, and no baseline step to anchor at"

    def error(x: FormScore) -> float:
        return max(x.held_out_rms, 1e-9)  # below a part in 10^9 the runs are exact: a tie

    chosen = scored[0]
    for x in scored[1:]:
        # At two k the anchored line and Leviathan's hold out alike (each k is fitted on the
        # other and the step: one line); the anchored one is kept, fitted on both k.
        tie = x.form == "anchored" and have == 2 and error(x) <= error(chosen) * (1 + 1e-9)
        if tie or error(x) < error(chosen) * PARSIMONY:
            chosen = x
    unchecked = [x for x in scores if x.form == "linear" and not math.isfinite(x.held_out_rms)]
    if chosen.form in ("leviathan", "anchored") and unchecked and have >= 2:
        if chosen.held_out_rms > OFF_THE_LINE:
            return "linear", (
                f"the plain step is off the runs' line (the forms through it hold out at "
                f"{chosen.held_out_rms:.1%} RMS, over {OFF_THE_LINE:.0%}): a line through the "
                f"{have} k, which no held-out k checks"
            )
    why = f"the least held-out error ({chosen.held_out_rms:.1%} RMS over {chosen.held_out_k} k)"
    better = [x for x in scored if error(x) < error(chosen)]
    if better:
        x = min(better, key=lambda x: x.held_out_rms)
        why = (
            f"held-out error {chosen.held_out_rms:.1%} RMS over {chosen.held_out_k} k; the "
            f"{x.form} form's {x.held_out_rms:.1%} is not {1 - PARSIMONY:.0%} less: the simpler "
            "is kept"
        )
    return chosen.form, why


def indistinct_k(best_k: int, best_low: float, highs: dict[int, float]) -> tuple[int, ...]:
    """The k other than ``best_k`` whose interval's high end (``highs``, by k [x]) reaches
    the best k's low end ``best_low`` [x]: what the intervals cannot tell from the best (none
    where the best has no interval)."""
    if not math.isfinite(best_low):
        return ()
    return tuple(k for k, high in highs.items() if k != best_k and high >= best_low)


def interval_width(errors: list[float]) -> float:
    """The relative half-width of a predicted speedup's interval within the measured k
    [fraction]: :data:`INTERVAL_SCALE` times the largest held-out error, at least
    :data:`INTERVAL_FLOOR`; NaN without held-out errors."""
    if not errors:
        return math.nan
    return max(INTERVAL_FLOOR, INTERVAL_SCALE * max(abs(e) for e in errors))


def half_width(width: float, k: int, measured: tuple[int, ...] | list[int]) -> float:
    """The relative half-width at ``k`` [fraction]: ``width`` (:func:`interval_width`) grown by
    the distance beyond the ``measured`` k over their span (extrapolating in k is less sure
    than interpolating); NaN where ``width`` is, or nothing was measured."""
    if not measured or not math.isfinite(width):
        return math.nan
    low, high = min(measured), max(measured)
    beyond = max(low - k, k - high, 0)
    return width * (1 + beyond / max(high - low, 1))


__all__ = (
    "CYCLE_FORMS",
    "FORM_CHOICES",
    "INTERVAL_FLOOR",
    "INTERVAL_SCALE",
    "MIN_K",
    "OFF_THE_LINE",
    "PARAMETERS",
    "PARSIMONY",
    "FittedCycle",
    "FormScore",
    "choose_form",
    "coefficient_names",
    "cycle_at",
    "equations",
    "fit_form",
    "half_width",
    "indistinct_k",
    "interval_width",
    "predicted_cycle",
    "score_form",
)
