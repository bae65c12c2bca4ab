"""How well ``fit``'s surface predicts the batch sizes it was not given (issue 41's protocols).

Each surface of a batch sweep (a model, hardware and drafting method with baselines and
speculative runs at three batch sizes or more) is fitted on part of its batch sizes and asked
for the rest:

- ``transfer``: speculative runs at the smallest batch only, baselines there and at the batch
  asked for (a plain sweep is cheap; speculation is run once), asked for each larger batch;
- ``extrapolated``: every run at the two smallest batch sizes, asked for the larger ones;
- ``between``: every run at the smallest and largest batch, asked for those between.

A prediction uses the measured accept_len at the batch asked for (the costs are what is being
tested, not the acceptance) and the plain step the fit gives there (measured where it was
given), and its error is ``predicted / measured - 1`` of the speedup [fraction].  ``covered``
says whether the measured speedup lies in the surface's interval
(:meth:`breakeven.model.surface.BatchSurface.speedup_range`), and ``half_width`` is that
interval's half-width over the prediction [fraction].
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from breakeven.fitting.fit import fit
from breakeven.fitting.holdout import _rows_of

BATCH_PROTOCOLS = ("transfer", "extrapolated", "between")
"""The held-out protocols across batch sizes (see the module's description)."""


@dataclass(frozen=True)
class BatchHeldOut:
    """One speculative configuration at one batch size, predicted by a fit that did not see it."""

    protocol: str
    """One of :data:`BATCH_PROTOCOLS`."""
    surface: str
    """The model, hardware and method, in words."""
    batch: int
    """The batch asked for [sequences]."""
    fitted_on: tuple[int, ...]
    """The batch sizes of the runs fitted [sequences]."""
    measured: float
    """The measured speedup [x]."""
    predicted: float
    """The predicted speedup [x]."""
    low: float
    """The interval's lower end [x] (NaN: none)."""
    high: float
    """Its upper end [x]."""

    @property
    def error(self) -> float:
        """``predicted / measured - 1`` [fraction]."""
        return self.predicted / self.measured - 1

    @property
    def covered(self) -> bool | None:
        """Whether the measured speedup is in the interval (None: the fit gave none)."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return None
        return self.low * (1 - 1e-12) <= self.measured <= self.high * (1 + 1e-12)

    @property
    def half_width(self) -> float:
        """The interval's half-width over the prediction [fraction] (NaN: none)."""
        return (self.high - self.low) / 2 / self.predicted


def _rows_at(data: Any, surface: Any, batches: set[int], spec_batches: set[int]) -> Any:
    """The rows of ``surface``'s model and hardware: its baselines at ``batches`` and its
    method's runs at ``spec_batches``."""
    d = data
    for column, value in (("model", surface.model), ("hardware", surface.hardware)):
        if column in d.columns:
            d = d[d[column].astype(object).where(d[column].notna(), "") == value]
    k = d["num_spec_tokens"]
    method = d["spec_method"].astype(object).where(d["spec_method"].notna(), "")
    base = (k == 0) & d["concurrency"].isin(batches)
    spec = (k > 0) & (method == surface.spec_method) & d["concurrency"].isin(spec_batches)
    return d[base | spec]


def _given(protocol: str, baselines: list[int], spec: list[int], asked: int) -> Any:
    """The batch sizes of the baselines and the speculative runs fitted to predict ``asked``,
    or None where the protocol does not ask for it."""
    if protocol == "transfer":
        b0 = spec[0]
        return ({b0, asked}, {b0}) if asked > b0 and asked in baselines else None
    if protocol == "extrapolated":
        two = spec[:2]
        return (set(two), set(two)) if asked > two[-1] and set(two) <= set(baselines) else None
    ends = {spec[0], spec[-1]}
    return (ends, ends) if spec[0] < asked < spec[-1] and ends <= set(baselines) else None


def held_out_batches(data: Any, **fit_options: Any) -> list[BatchHeldOut]:
    """Every speculative batch of every surface of ``data`` (rows in the measurement schema)
    predicted under each of :data:`BATCH_PROTOCOLS`; ``fit_options`` go to
    :func:`breakeven.fitting.fit.fit`.  Surfaces with fewer than three speculative batch
    sizes give none."""
    whole = fit(data, **fit_options)
    out: list[BatchHeldOut] = []
    for s in whole.surfaces:
        truth = {(p.batch, p.steps, p.topk, p.verify_tokens): p for p in s.points}
        spec = sorted({p.batch for p in s.points})
        if len(spec) < 3:
            continue
        name = ", ".join(x for x in (s.model, s.hardware, s.spec_method) if x)
        baselines = [b for b, _ in s.baseline_steps]
        for protocol in BATCH_PROTOCOLS:
            for asked in spec:
                given = _given(protocol, baselines, spec, asked)
                if given is None:
                    continue
                part = fit(_rows_at(data, s, *given), **fit_options)
                fitted = [
                    x
                    for x in part.surfaces
                    if (x.model, x.hardware, x.spec_method) == (s.model, s.hardware, s.spec_method)
                ]
                if not fitted:
                    continue
                out += _predicted(protocol, name, fitted[0], truth, asked, given)
    return out


def _predicted(
    protocol: str,
    name: str,
    surface: Any,
    truth: dict[tuple[int, int, int, int], Any],
    asked: int,
    given: tuple[set[int], set[int]],
) -> list[BatchHeldOut]:
    """Each configuration measured at batch ``asked``, as ``surface`` predicts it."""
    out = []
    for (batch, steps, topk, verify), p in truth.items():
        if batch != asked:
            continue
        cycle = float(surface.cycle_ms(batch, steps, topk, verify))
        step = surface.step_ms(batch)[0]
        predicted = p.accept_len * step / cycle if cycle > 0 else math.inf
        low, high = surface.speedup_range(batch, predicted, cycle, steps, topk, verify)
        out.append(
            BatchHeldOut(
                protocol,
                name,
                batch,
                tuple(sorted(given[0] | given[1])),
                p.measured_speedup,
                predicted,
                low,
                high,
            )
        )
    return out


def batch_summary(results: Sequence[BatchHeldOut]) -> dict[str, dict[str, float]]:
    """Per protocol: how many were predicted, the median and largest absolute error, the
    share covered and the median half-width [fraction]."""
    out = {}
    for protocol in BATCH_PROTOCOLS:
        mine = [x for x in results if x.protocol == protocol]
        if not mine:
            continue
        errors = sorted(abs(x.error) for x in mine)
        judged = [x.covered for x in mine if x.covered is not None]
        widths = sorted(x.half_width for x in mine if math.isfinite(x.half_width))
        out[protocol] = {
            "predicted": float(len(errors)),
            "median_error": statistics.median(errors),
            "worst_error": errors[-1],
            "covered": sum(judged) / len(judged) if judged else math.nan,
            "median_half_width": statistics.median(widths) if widths else math.nan,
        }
    return out


@dataclass(frozen=True)
class ContextHeldOut:
    """One k at one context length, predicted by the context fit of the two shortest."""

    surface: str
    """The model, hardware, concurrency and method, in words."""
    k: int
    """[tokens]"""
    context_tokens: float
    """The context asked for [tokens]."""
    fitted_on: tuple[float, float]
    """The two context lengths fitted [tokens]."""
    measured: float
    """[x]"""
    predicted: float
    """[x]"""

    @property
    def error(self) -> float:
        """``predicted / measured - 1`` [fraction]."""
        return self.predicted / self.measured - 1

    @property
    def doublings(self) -> float:
        """Doublings of context beyond the longest fitted [doublings]."""
        return max(math.log2(self.context_tokens / self.fitted_on[1]), 0.0)


def held_out_contexts(data: Any, **fit_options: Any) -> list[ContextHeldOut]:
    """Every k at every context length of each context fit of ``data`` (three lengths or
    more), predicted by the context fit of its two shortest lengths (``fit_options`` go to
    :func:`breakeven.fitting.fit.fit`), at the measured accept_len."""
    whole = fit(data, **fit_options)
    out: list[ContextHeldOut] = []
    for c in whole.contexts:
        if len(c.contexts) < 3:
            continue
        two = c.contexts[:2]
        groups = [g for g in whole.groups if _same(g, c) and g.context_tokens in two]
        rows = [_rows_of(data, g) for g in groups]
        part = fit(pd.concat(rows).drop_duplicates(), **fit_options)
        mine = [x for x in part.contexts if _same(x, c)]
        if not mine:
            continue
        name = ", ".join(
            str(x) for x in (c.model, c.hardware, f"concurrency {c.concurrency:g}", c.spec_method)
        )
        for p in c.points:
            if p.context_tokens in two or not p.measured_speedup > 0:
                continue
            predicted = mine[0].speedup(p.k, p.accept_len, p.context_tokens)
            if math.isfinite(predicted):
                out.append(
                    ContextHeldOut(name, p.k, p.context_tokens, two, p.measured_speedup, predicted)
                )
    return out


def _same(g: Any, c: Any) -> bool:
    """Whether ``g`` (a group or context fit) has the model, hardware, concurrency and method
    of context fit ``c``."""
    return (g.model, g.hardware, g.spec_method) == (c.model, c.hardware, c.spec_method) and (
        g.concurrency == c.concurrency
    )


__all__: Sequence[str] = (
    "BATCH_PROTOCOLS",
    "BatchHeldOut",
    "ContextHeldOut",
    "batch_summary",
    "held_out_batches",
    "held_out_contexts",
)
