"""Best k and break-even concurrency: the cost models of :mod:`breakeven.model.costs` meet acceptance.

At batch size B, with k draft tokens per sequence and a forward-time model
``t(tokens)``::

    speedup(B, k) = accept_len(k) * t(B) / (t(B * (k + 1)) + draft(k, B) + overhead_ms)

``t(B)`` is the plain decode step of the batch and ``t(B * (k + 1))`` the
verify forward.  At B = 1 with a constant verify cost this is the cycle model
of :mod:`breakeven.model`.  The best k is the one with the highest speedup;
when none beats 1, the answer is k = 0: do not speculate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import MAX_K
from breakeven.fitting.saved import Evidence, within_evidence
from breakeven.measurements.plausibility import (
    TypedFlag,
    falling_curve,
    impossible_speedup,
    typed_times,
)
from breakeven.model import _speedup, _xp
from breakeven.model import step_ms_from_baseline as model_step_ms
from breakeven.model.acceptance import _tau, accept_len_from_alpha, accept_len_from_per_position
from breakeven.model.costs import ConstantCost, DraftCost
from breakeven.model.cycle import indistinct_k

DEFAULT_K_MAX = 16


def acceptance_by_k(
    k_max: int = DEFAULT_K_MAX,
    *,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
) -> tuple[float, ...]:
    """Mean acceptance length for k = 1, 2, ... from one description of acceptance.

    Exactly one of:

    - ``alpha``: i.i.d. per-token acceptance, ``tau(alpha, k)`` for k up to ``k_max``;
    - ``per_position``: rates ``a_1 >= a_2 >= ...``, ``tau(k) = 1 + a_1 + ... + a_k``
      for k up to their number (and ``k_max``);
    - ``accept_len_by_k``: measured tau for k = 1, 2, 3, ... (up to ``k_max``), or a mapping
      ``{k: tau}`` of the k measured (the others are NaN, and not considered).

    Returns
    -------
    tuple of float  [tokens/cycle]
        Element ``k - 1`` is the accept_len at k.
    """
    given = [
        n
        for n, v in (
            ("alpha", alpha),
            ("per_position", per_position),
            ("accept_len_by_k", accept_len_by_k),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise BreakevenError(
            "give exactly one of {0}, {1} or {2}" + (f" (got {len(given)})" if given else ""),
            "alpha",
            "per_position",
            "accept_len_by_k",
        )
    k_max = _xp.count("k_max", k_max, MAX_K)
    if alpha is not None:
        return tuple(accept_len_from_alpha(alpha, k) for k in range(1, k_max + 1))
    if per_position is not None:
        rates = list(per_position)[:k_max]
        accept_len_from_per_position(rates)  # checks the whole sequence once
        return tuple(1.0 + math.fsum(rates[:k]) for k in range(1, len(rates) + 1))
    if isinstance(accept_len_by_k, Mapping):  # explicit k: {2: 1.64, 3: 1.72, 5: 1.80}
        given = {}
        for k, tau in accept_len_by_k.items():
            k = int(_xp.draft_tokens(_xp.SCALAR, "accept_len_by_k", k))
            if k <= k_max:
                given[k] = tau
        taus = [given.get(k, math.nan) for k in range(1, max(given, default=0) + 1)]
    else:
        taus = list(accept_len_by_k)[:k_max]
    if not taus:
        raise BreakevenError(
            "{0}: got no values, expected tau for k = 1, 2, ... (or K:TAU pairs)", "accept_len_by_k"
        )
    for k, tau in enumerate(taus, start=1):
        if not (
            isinstance(tau, float) and math.isnan(tau) and isinstance(accept_len_by_k, Mapping)
        ):
            _xp.accept_len(_xp.SCALAR, "accept_len_by_k", tau, float(k))
    return tuple(float(t) for t in taus)


@dataclass(frozen=True)
class KOption:
    """One candidate k."""

    k: int
    """Draft tokens per cycle."""
    accept_len: float
    """Mean tokens per cycle, bonus included [tokens/cycle]."""
    verify_ms: float
    """Verify forward over batch * (k + 1) tokens [ms]."""
    draft_ms: float
    """Drafting per cycle [ms]."""
    cycle_ms: float
    """verify_ms + draft_ms + overhead_ms [ms]."""
    speedup: float
    """accept_len * step_ms / cycle_ms [x]."""


@dataclass(frozen=True)
class OptimizeResult:
    """The best number of draft tokens, and the speedup at every k considered."""

    best_k: int
    """The k with the highest speedup; 0 when no k beats plain decoding (do not speculate)."""
    speedup: float
    """Speedup at best_k [x]; 1 when best_k is 0."""
    by_k: tuple[KOption, ...]
    """Every k considered, in order."""
    step_ms: float
    """Plain decode step at this batch [ms] (1 in Leviathan's normalised form)."""
    batch: int
    """Sequences decoded together."""
    normalised: bool = False
    """True in Leviathan's form: times are in target steps, not ms."""
    note: str = ""
    """Why fewer k were considered than asked, if they were."""
    half_widths: tuple[tuple[int, float], ...] = ()
    """Each k's relative interval half-width [fraction] where a fit file gives the costs
    (:func:`breakeven.fitting.saved.fit_interval`); none otherwise."""
    evidence: Evidence | None = None
    """What the fit file's runs measured, where a fit file gives the costs (None otherwise)."""
    refused: tuple[str, ...] = ()
    """Why the best k goes beyond that evidence (:func:`breakeven.fitting.saved.within_evidence`),
    one sentence per k; empty: it does not (or no fit file gave the costs)."""

    def with_intervals(self, widths: Mapping[int, float]) -> OptimizeResult:
        """This result with each k's speedup interval, +- ``widths[k]`` of it [fraction]."""
        kept = tuple((k, float(h)) for k, h in widths.items() if 0 <= h < 1)
        return replace(self, half_widths=kept)

    def with_evidence(self, evidence: Evidence, context: float | None = None) -> OptimizeResult:
        """This result checked against a fit file's ``evidence``: the best k's speedup, at the
        fit's own load and at ``context`` [tokens] (None: the runs'), refused where the runs do
        not support it (:func:`breakeven.fitting.saved.within_evidence`)."""
        claims = [(self.best_k, None, self.speedup)]
        return replace(
            self, evidence=evidence, refused=tuple(within_evidence(evidence, claims, context))
        )

    @property
    def close_k(self) -> tuple[int, ...]:
        """The other k whose interval reaches the best k's: the costs' uncertainty cannot
        tell them from it (none without intervals)."""
        h = dict(self.half_widths)
        best = next((o for o in self.by_k if o.k == self.best_k and o.k in h), None)
        if best is None:
            return ()
        highs = {o.k: o.speedup * (1 + h[o.k]) for o in self.by_k if o.k in h}
        return indistinct_k(best.k, best.speedup * (1 - h[best.k]), highs)

    def to_dict(self) -> dict[str, Any]:
        """``best_k``, ``speedup`` and ``by_k`` (a list of ``{k, accept_len, speedup, regret,
        ...}``, with ``speedup_low`` and ``speedup_high`` where a fit file sized them), and
        ``close_k``; from a fit file, ``pasted``, ``refused`` and ``evidence``
        (:meth:`with_evidence`)."""
        keep = ("k", "accept_len", "speedup") if self.normalised else None
        top = max((o.speedup for o in self.by_k), default=math.nan)
        h = dict(self.half_widths)
        rows = []
        for o in self.by_k:
            row = {n: v for n, v in asdict(o).items() if keep is None or n in keep}
            row["regret"] = 1 - o.speedup / top if top > 0 else math.nan
            if o.k in h:
                row["speedup_low"] = o.speedup * (1 - h[o.k])
                row["speedup_high"] = o.speedup * (1 + h[o.k])
            rows.append(row)
        out: dict[str, Any] = {"best_k": self.best_k, "speedup": self.speedup, "by_k": rows}
        if self.half_widths:
            out["close_k"] = list(self.close_k)
        if not self.normalised:
            out["step_ms"] = self.step_ms
        out["batch"] = self.batch
        if self.note:
            out["note"] = self.note
        return out | _evidence_fields(self.evidence, self.refused)

    def to_frame(self) -> Any:
        """``by_k`` as a pandas DataFrame indexed by k."""

        return pd.DataFrame([asdict(o) for o in self.by_k]).set_index("k")

    def report(self) -> str:
        """What ``breakeven optimize`` prints: the verdict, then every k considered."""
        return render.optimize_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (every k considered), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.optimize_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.optimize_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Speedup against k, the best k marked; returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.speedup_vs_k(self, ax)


def optimize_k(
    *,
    verify: Any,
    step_ms: float | None = None,
    draft: DraftCost | None = None,
    overhead_ms: float = 0.0,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
    k_max: int = DEFAULT_K_MAX,
    batch: int = 1,
) -> OptimizeResult:
    """The k in 1..k_max with the highest speedup, from measured or modelled costs.

    Parameters
    ----------
    verify : float or cost model
        The verify forward: a constant [ms] (the same at every k), or a model
        ``t(tokens)`` from :mod:`breakeven.model.costs` priced at ``batch * (k + 1)``
        tokens.  Only the k whose forwards the model covers are considered.
    step_ms : float, optional  [ms]
        Plain decode step at this batch; by default ``verify(batch)`` (needs a
        cost model, not a constant).
    draft : DraftCost, optional
        Drafting per cycle; none by default.
    overhead_ms : float  [ms]
        Other per-cycle cost.
    alpha, per_position, accept_len_by_k
        Acceptance, exactly one (see :func:`acceptance_by_k`).
    k_max : int
        Largest k considered, 1 to :data:`~breakeven.core.quantities.MAX_K`.
    batch : int
        Sequences decoded together.
    """
    batch = int(_xp.draft_tokens(_xp.SCALAR, "batch", batch))
    taus = acceptance_by_k(
        k_max, alpha=alpha, per_position=per_position, accept_len_by_k=accept_len_by_k
    )
    model = ConstantCost(float(verify)) if isinstance(verify, (int, float)) else verify
    if step_ms is None:
        if isinstance(model, ConstantCost):
            raise BreakevenError("{0} is needed with a constant verify cost", "step_ms")
        step_ms = model(batch)
    step = float(_xp.positive(_xp.SCALAR, "step_ms", step_ms, "ms"))
    overhead = float(_xp.nonnegative(_xp.SCALAR, "overhead_ms", overhead_ms, "ms"))
    draft = draft or DraftCost("ngram")

    options, note = _k_options(taus, model, batch, step, draft, overhead)
    if not options:
        raise BreakevenError("{0}: " + note + "; no k is left to consider", "verify")
    best = max(options, key=lambda o: o.speedup)  # the smallest k among equals
    if not note and best.speedup > 1.0 and best.k == options[-1].k:
        note = _largest_k_note(best.k, alpha is not None)
    if best.speedup <= 1.0:
        return OptimizeResult(0, 1.0, tuple(options), step, batch, note=note)
    return OptimizeResult(best.k, best.speedup, tuple(options), step, batch, note=note)


def _k_options(
    taus: Sequence[float], model: Any, batch: int, step: float, draft: DraftCost, overhead: float
) -> tuple[list[KOption], str]:
    """Every k with an accept_len whose verify forward the cost model covers, and a note on
    the k left out (below the model's first point, or past its last)."""
    options, note, below = [], "", []
    for k, tau in enumerate(taus, start=1):
        if math.isnan(tau):
            continue  # a k without a measured accept_len
        tokens = batch * (k + 1)
        if tokens < getattr(model, "min_tokens", 0):
            below.append(k)  # the curve starts above this forward: skipped, with a note
            continue
        if tokens > model.max_tokens:
            note = (
                f"k stops at {k - 1}: at k = {k} the verify forward ({batch} x {k + 1} = "
                f"{tokens} tokens) is beyond the cost model's {model.max_tokens:g} tokens; "
                "a fitted model extrapolates"
            )
            break
        verify_ms = float(model(tokens))
        draft_ms = float(draft(k, batch))
        cycle = verify_ms + draft_ms + overhead
        options.append(KOption(k, tau, verify_ms, draft_ms, cycle, _speedup(tau, step, cycle)))
    if below:
        shown = f"{below[0]}" if len(below) == 1 else f"{below[0]} to {below[-1]}"
        skipped = (
            f"k = {shown} skipped: their verify forwards ({batch} x (k + 1) tokens) are "
            f"below the cost model's first point, {model.min_tokens:g} tokens"
        )
        note = f"{skipped}; {note}" if note else skipped
    return options, note


def _largest_k_note(k: int, from_alpha: bool) -> str:
    """Why a best k at the largest k tried may not be the best."""
    if from_alpha:
        if k >= MAX_K:
            return ""
        return (
            f"best k is the largest considered (k_max = {k}): the optimum may lie beyond "
            "it; raise --max-k (k_max)"
        )
    return (
        f"best k is the largest with an accept_len (k = {k}): a larger k may be faster; measure one"
    )


def draft_cost(draft_ms: float | None = None, draft_step_ms: float | None = None) -> DraftCost:
    """Drafting per cycle from the command line's numbers: ``draft_ms + k * draft_step_ms``."""
    fixed = 0.0 if draft_ms is None else draft_ms
    if draft_step_ms is None:
        return DraftCost("ngram", fixed_ms=fixed)
    return DraftCost("autoregressive", step_ms=draft_step_ms, fixed_ms=fixed)


def _optimize_normalised(
    cost_ratio: float, measured: dict[str, Any], k_max: int, acceptance: dict[str, Any]
) -> OptimizeResult:
    """Best k in Leviathan's normalised form: verify = one target step, a draft step of
    ``cost_ratio`` target steps [-]; raises if a measured cost is also given."""
    clash = next((name for name, value in measured.items() if value is not None), None)
    if clash is not None:
        raise BreakevenError(
            "{0} (Leviathan's normalised form) and {1} (a measured cost) cannot be given together",
            "cost_ratio",
            clash,
        )
    c = float(_xp.nonnegative(_xp.SCALAR, "cost_ratio", cost_ratio, "target steps"))
    result = optimize_k(
        verify=1.0, step_ms=1.0, draft=DraftCost("autoregressive", c), k_max=k_max, **acceptance
    )
    return OptimizeResult(
        result.best_k, result.speedup, result.by_k, 1.0, 1, normalised=True, note=result.note
    )


def _verify_cost(verify_ms: float | None, verify_curve: Any, step_ms: float | None) -> Any:
    """The verify cost: ``verify_curve`` (a cost model of tokens per forward) or ``verify_ms``
    [ms], which needs the baseline step ``step_ms`` [ms]; raises if neither is given."""
    verify = verify_curve if verify_curve is not None else verify_ms
    if verify is None:
        raise BreakevenError(
            "give the verify cost: {0}, {1}, or {2} for Leviathan's form",
            "verify_ms",
            "verify_curve",
            "cost_ratio",
        )
    if verify_ms is not None:
        _xp.positive(_xp.SCALAR, "verify_ms", verify_ms, "ms")
        if step_ms is None:
            raise BreakevenError(
                "{0} needs a baseline: {1} or {2}", "verify_ms", "baseline_tok_s", "step_ms"
            )
    return verify


def optimize(
    *,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
    cost_ratio: float | None = None,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    verify_ms: float | None = None,
    verify_curve: Any = None,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    batch: int = 1,
    k_max: int = DEFAULT_K_MAX,
) -> OptimizeResult:
    """Best k from the inputs ``breakeven optimize`` takes (one acceptance, one cost form).

    Either Leviathan's normalised form, ``cost_ratio`` (draft step / target
    step, verify = one target step), or measured costs: a baseline
    (``baseline_tok_s`` or ``step_ms``, optional with ``verify_curve``), the
    verify forward (``verify_ms``, the same at every k, or ``verify_curve``, a
    cost model of tokens per forward), drafting (``draft_ms`` per cycle and/or
    ``draft_step_ms`` per draft token) and ``overhead_ms``.  See
    :func:`optimize_k`.
    """
    measured = dict(
        baseline_tok_s=baseline_tok_s,
        step_ms=step_ms,
        verify_ms=verify_ms,
        verify_curve=verify_curve,
        draft_ms=draft_ms,
        draft_step_ms=draft_step_ms,
        overhead_ms=overhead_ms,
    )
    for first, second in (("baseline_tok_s", "step_ms"), ("verify_ms", "verify_curve")):
        if measured[first] is not None and measured[second] is not None:
            raise BreakevenError("{0} and {1} cannot be given together: give one", first, second)
    acceptance = dict(alpha=alpha, per_position=per_position, accept_len_by_k=accept_len_by_k)
    if cost_ratio is not None:
        return _optimize_normalised(cost_ratio, measured, k_max, acceptance)
    if baseline_tok_s is not None:
        step_ms = model_step_ms(baseline_tok_s)
    verify = _verify_cost(verify_ms, verify_curve, step_ms)
    for name, value in (("draft_ms", draft_ms), ("draft_step_ms", draft_step_ms)):
        if value is not None:
            _xp.nonnegative(_xp.SCALAR, name, value, "ms")
    step_name = "baseline_tok_s" if baseline_tok_s is not None else "step_ms"
    flags = curve_flags(verify_curve, "verify_curve")
    if step_ms is not None:
        typed = [
            ("verify_ms", verify_ms),
            ("draft_ms", draft_ms),
            ("draft_step_ms", draft_step_ms),
            ("overhead_ms", overhead_ms),
        ]
        flags += typed_times(step_ms, step_name, typed, baseline_tok_s)
    result = optimize_k(
        verify=verify,
        step_ms=step_ms,
        draft=draft_cost(draft_ms, draft_step_ms),
        overhead_ms=overhead_ms or 0.0,
        k_max=k_max,
        batch=batch,
        **acceptance,
    )
    verify_name = "verify_ms" if verify_ms is not None else "verify_curve"
    for o in result.by_k:
        names = (verify_name, step_name if step_ms is not None else verify_name)
        refusal = impossible_speedup(
            o.speedup, o.k, o.accept_len, o.cycle_ms, result.step_ms, names
        )
        if refusal is not None:
            raise refusal
    notes = [result.note] if result.note else []
    return replace(result, note="; ".join(notes + [f.note() for f in flags]))


def curve_flags(curve: Any, name: str) -> list[TypedFlag]:
    """The flags of a measured cost curve (a :class:`~breakeven.model.costs.TableCost`, named
    ``name``) whose forward time falls as its tokens grow
    (:func:`breakeven.measurements.plausibility.falling_curve`); none for a fitted or modelled cost."""
    tokens, ms = getattr(curve, "tokens", None), getattr(curve, "ms", None)
    if not isinstance(tokens, tuple) or not isinstance(ms, tuple):
        return []
    source = getattr(curve, "source", "")
    return falling_curve(tokens, ms, f"{name} {source}".strip())


def optimize_leviathan(
    alpha: float, cost_ratio: float, k_max: int = DEFAULT_K_MAX
) -> OptimizeResult:
    """Best k under Leviathan et al.'s assumptions (Theorem 3.8, Section 3.5).

    Verify costs one target step; each draft step costs ``cost_ratio`` of one.
    Times in the result are in target steps (``normalised``).
    """
    return optimize(alpha=alpha, cost_ratio=cost_ratio, k_max=k_max)


def optimal_k(alpha: Any, cost_ratio: Any, k_max: int = DEFAULT_K_MAX) -> tuple[Any, Any]:
    """Vectorised best k under Leviathan's assumptions, for sweeps and surfaces.

    Parameters
    ----------
    alpha : numeric
        Per-token acceptance, in [0, 1].
    cost_ratio : numeric
        Draft step over target step (>= 0).
    k_max : int
        Largest k considered, 1 to :data:`~breakeven.core.quantities.MAX_K`.

    Returns
    -------
    best_k : ndarray of int
        0 where no k beats plain decoding.
    speedup : ndarray  [x]
        At best_k (1 where best_k is 0).
    """

    xp = _xp.namespace(np.asarray(alpha))
    a = _xp.probability(xp, "alpha", alpha)[..., None]
    c = _xp.nonnegative(xp, "cost_ratio", cost_ratio, "target steps")[..., None]
    k = np.arange(1, _xp.count("k_max", k_max, MAX_K) + 1)
    s = _speedup(_tau(xp, a, k), 1.0, k * c + 1)
    i = np.argmax(s, axis=-1)
    best = np.take_along_axis(s, i[..., None], axis=-1)[..., 0]
    pays = best > 1
    return np.where(pays, i + 1, 0)[()], np.where(pays, best, 1.0)[()]


def _evidence_fields(evidence: Evidence | None, refused: Sequence[str]) -> dict[str, Any]:
    """A plan's check against a fit file's evidence, as ``to_dict`` gives it: ``pasted``
    (false: refused), ``refused`` (why) and the ``evidence``; none without a fit file."""
    if evidence is None:
        return {}
    return {"pasted": not refused, "refused": list(refused), "evidence": evidence.to_dict()}


__all__ = [
    "KOption",
    "OptimizeResult",
    "acceptance_by_k",
    "draft_cost",
    "optimal_k",
    "optimize",
    "optimize_k",
    "optimize_leviathan",
]
