"""How well ``fit`` predicts the k it was not given, on a whole k sweep (issue 27's protocols).

Each group of a sweep (model, hardware, concurrency and method, with a baseline and three k
or more) is fitted on part of its k and asked for the rest:

- ``between``: fitted on the smallest and largest k, asked for the k between;
- ``extrapolated``: fitted on the two smallest k, asked for the larger ones.

A prediction uses the measured accept_len of the k asked for (the cycle is what is being
tested, not the acceptance), and its error is ``predicted / measured - 1`` of the speedup
[fraction].  ``covered`` says whether the measured speedup lies in the predicted interval
(``KRow.predicted_low`` to ``predicted_high``, sized on the fit's own held-out error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from breakeven.fitting.fit import fit
from breakeven.fitting.runs import CONTEXT_STEP

PROTOCOLS = ("between", "extrapolated")
"""The held-out protocols, each a choice of the k fitted on (see the module's description)."""


@dataclass(frozen=True)
class HeldOut:
    """One k predicted by a fit that did not see it."""

    protocol: str
    """One of :data:`PROTOCOLS`."""
    group: str
    """The model, hardware, concurrency and method, in words."""
    k: int
    """The k asked for [tokens]."""
    fitted_on: tuple[int, ...]
    """The k the fit was given [tokens]."""
    cycle_form: str
    """The form the fit chose (:data:`breakeven.fitting.fit.CYCLE_FORMS`)."""
    measured: float
    """The measured speedup [x]."""
    predicted: float
    """accept_len (measured) x step / the fitted cycle at k [x]."""
    covered: bool | None
    """Whether the measured speedup is in the predicted interval (None: the fit gave none)."""

    @property
    def error(self) -> float:
        """``predicted / measured - 1`` [fraction]."""
        return self.predicted / self.measured - 1


def held_out(data: Any, *, cycle_form: str = "auto") -> list[HeldOut]:
    """Every k of every group of ``data`` (rows in the measurement schema) predicted under
    each of :data:`PROTOCOLS`; groups with fewer than three k, or no baseline, give none."""
    whole = fit(data, cycle_form="linear")  # the measured speedups, per group and k
    out: list[HeldOut] = []
    for g in whole.groups:
        truth = {r.k: r for r in g.by_k if r.measured_speedup > 0 and r.accept_len >= 1 and r.runs}
        ks = sorted(truth)
        if len(ks) < 3 or not g.step_ms > 0:
            continue
        rows = _rows_of(data, g)
        name = ", ".join(
            str(x)
            for x in (g.model, g.hardware, f"concurrency {g.concurrency:g}", g.spec_method)
            if x
        )
        for protocol, given in (("between", (ks[0], ks[-1])), ("extrapolated", (ks[0], ks[1]))):
            k_of = rows["num_spec_tokens"]
            part = rows[(k_of == 0) | k_of.isin(given)]
            asked = [k for k in ks if k not in given]
            (f,) = fit(part, predict_k=asked, cycle_form=cycle_form).groups
            by_k = {r.k: r for r in f.by_k}
            for k in asked:
                measured = truth[k].measured_speedup
                predicted = truth[k].accept_len * f.step_ms / f.cycle_ms(k)
                r = by_k[k]
                covered = None
                if math.isfinite(r.predicted_low):
                    h = r.predicted_high / r.predicted_speedup - 1
                    covered = abs(predicted / measured - 1) <= h * (1 + 1e-12)
                out.append(
                    HeldOut(
                        protocol, name, k, given, f.cycle_form, measured, float(predicted), covered
                    )
                )
    return out


def _rows_of(data: Any, g: Any) -> Any:
    """The rows of ``data`` that make group ``g``: its runs and its baseline."""
    d = data
    for column, value in (("model", g.model), ("hardware", g.hardware)):
        if column in d.columns:
            d = d[d[column].astype(object).where(d[column].notna(), "") == value]
    if "concurrency" in d.columns and math.isfinite(g.concurrency):
        d = d[d["concurrency"].isna() | (d["concurrency"] == g.concurrency)]
    if "context_tokens" in d.columns and g.context_tokens > 0:  # one context length's rows
        c = pd.to_numeric(d["context_tokens"], errors="coerce")
        near = (c >= g.context_tokens / CONTEXT_STEP) & (c <= g.context_tokens * CONTEXT_STEP)
        d = d[c.isna() | near]
    if "spec_method" in d.columns:
        method = d["spec_method"].astype(object).where(d["spec_method"].notna(), "")
        d = d[(d["num_spec_tokens"] == 0) | (method == g.spec_method)]
    return d


def summary(results: Sequence[HeldOut]) -> dict[str, dict[str, float]]:
    """Per protocol: how many k were predicted, the median and largest absolute error
    [fraction], and the share of measured speedups inside their intervals [fraction]."""
    out = {}
    for protocol in PROTOCOLS:
        errors = sorted(abs(x.error) for x in results if x.protocol == protocol)
        judged = [x.covered for x in results if x.protocol == protocol and x.covered is not None]
        if not errors:
            continue
        n = len(errors)
        median = (errors[(n - 1) // 2] + errors[n // 2]) / 2
        out[protocol] = {
            "predicted": float(n),
            "median_error": median,
            "worst_error": errors[-1],
            "covered": sum(judged) / len(judged) if judged else math.nan,
        }
    return out


__all__: Sequence[str] = ("PROTOCOLS", "HeldOut", "held_out", "summary")
