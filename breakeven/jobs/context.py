"""A fit file's cycle costs moved to another context (``--context N`` of ``predict`` and
``optimize``), and the costs that move makes impossible: clamped and noted, never refused.

A cost the tool derives from the fit's context growth is not a flag the user typed (issue 41,
item 4): where the growth, followed beyond the contexts the fit's runs measured, takes a cost
below what any decode can cost, the cost is held at that floor and a
:class:`breakeven.measurements.plausibility.TypedFlag` (``context_extrapolated``) says what
was derived, its value, the floor, and that the prediction there is an extrapolation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any


def at_context(
    out: dict[str, Any],
    fit_file: str,
    group: dict[str, Any],
    context: float,
    form: str,
    fits_step: bool,
) -> list[Any]:
    """``out``'s fitted costs (and the fit's step, where it is the step used) moved from the
    fit's context to ``context`` [tokens] (:func:`breakeven.fitting.saved.context_growth`).

    A moved cost no decode can have is clamped to the least it can be, with a flag
    (``context_extrapolated``) for each: the fit's step at most down to its step at no context,
    a verify forward (a curved fit's cycle) down to that step, a draft step down to 0.  These
    are values the tool derived, not flags the user typed: returned as the flags to note."""
    from breakeven.fitting.saved import context_growth, context_support  # lazy: start-up

    step_more, per_k_more = context_growth(fit_file, group, float(context))
    low, high, step_0 = context_support(fit_file, group)
    clamp = _Clamps(float(context), (low, high))
    step_here = float(group.get("step_ms") or 0.0)
    floor = step_0 if step_0 > 0 else step_here
    step = step_here + step_more
    if fits_step and out.get("step_ms") is not None:
        what = "the fit's baseline decode step"
        out["step_ms"] = step = clamp.at_least(what, step, floor, "its step at no context")
    step = max(step, floor)  # a typed step is the user's; the fit's is still the verify's floor
    # A verify (a curved fit's cycle) is floored at the step, less what the fit's own falls
    # short of its step at the runs' context: the clamp never moves a context the runs measured.
    curve = out.get("verify_curve")
    if curve is not None and not isinstance(curve, str):  # a curved fit's whole cycle
        moved = dataclasses.replace(curve, context_ms=step_more, context_per_k_ms=per_k_more)
        ks = range(1, int(out.get("k_max") or 16) + 1)
        least = step + min(0.0, min(float(curve(curve.batch * (k + 1))) for k in ks) - step_here)
        lowest = min((float(moved(curve.batch * (k + 1))), k) for k in ks)
        what, floor_is = f"the fitted cycle at k = {lowest[1]}", "a cycle costs one plain step"
        clamp.at_least(what, lowest[0], least, floor_is + " at least", _A_STEP[1])
        out["verify_curve"] = dataclasses.replace(moved, floor_ms=least)
    elif form == "predict":
        least = step + min(0.0, out["verify_ms"] - step_here)
        verify = out["verify_ms"] + step_more + per_k_more * (out.get("k") or 0)
        out["verify_ms"] = clamp.at_least("the fitted verify forward", verify, least, *_A_STEP)
    else:
        least = step + min(0.0, out["verify_ms"] - step_here)
        verify = out["verify_ms"] + step_more
        out["verify_ms"] = clamp.at_least("the fitted verify forward", verify, least, *_A_STEP)
        draft = out["draft_step_ms"] + per_k_more
        out["draft_step_ms"] = clamp.at_least("the fitted draft step", draft, 0.0, *_NO_DRAFT)
    return clamp.flags


_A_STEP = (
    "a verify forward costs one plain step at least",
    "the cycle then costs one plain step plus drafting, so the speedup is at most accept_len: "
    "an upper bound, not a prediction",
)
_NO_DRAFT = (
    "no cost",
    "the cycle then has no drafting cost beyond its per-cycle part, so the speedup is an upper "
    "bound, not a prediction",
)


@dataclasses.dataclass
class _Clamps:
    """The costs :func:`at_context` derived and found impossible: each clamped to its floor,
    with a flag (:func:`breakeven.model.context.clamped_note`'s sentence)."""

    context: float
    runs: tuple[float, float]
    flags: list[Any] = dataclasses.field(default_factory=list)

    def at_least(
        self, what: str, value: float, floor: float, floor_is: str, meaning: str = ""
    ) -> float:
        """``value`` [ms], or ``floor`` [ms] where it is below, with a flag saying so."""
        if value >= floor:
            return value
        from breakeven.measurements.plausibility import TypedFlag  # lazy: start-up
        from breakeven.model.context import clamped_note  # lazy: start-up

        runs = self.runs if all(math.isfinite(x) for x in self.runs) else None
        message = clamped_note(what, value, floor, floor_is, self.context, meaning, runs)
        self.flags.append(TypedFlag("context_extrapolated", message))
        return floor


__all__: Sequence[str] = ("at_context",)
