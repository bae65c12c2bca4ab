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
from breakeven.core.quantities import MAX_BATCH, MAX_K, plain_json
from breakeven.fitting.saved import Evidence, within_evidence
from breakeven.fitting.tree import TreeAcceptance, check_acceptance, search_trees
from breakeven.measurements.plausibility import (
    TypedFlag,
    falling_curve,
    impossible_speedup,
    typed_times,
)
from breakeven.model import _xp
from breakeven.model.acceptance import _tau, accept_len_from_alpha, accept_len_from_per_position
from breakeven.model.costs import ConstantCost, DraftCost, expected_distinct_experts
from breakeven.model.cycle import indistinct_k
from breakeven.model.formulas import _speedup
from breakeven.model.formulas import step_ms_from_baseline as model_step_ms

DEFAULT_K_MAX = 16
BEYOND_THE_CURVE = "beyond the curve"
DEFAULT_MAX_BATCH = 256  # batches swept when the cost model has no token limit


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


def _tree_costs(
    surface: Any,
    verify_curve: Any,
    batch: int,
    draft_step_ms: float | None,
    draft_ms: float | None,
    overhead_ms: float,
) -> tuple[Any, float | None]:
    """The cycle of a tree, ``cycle(steps, topk, verify_tokens)`` [ms], and the step the
    cost model gives at ``batch`` (None: it gives none)."""
    if surface is not None:
        if draft_step_ms is not None or draft_ms is not None:
            raise BreakevenError(
                "{0} holds the draft's cost: {1} cannot be given with it",
                "fit_file",
                "draft_step_ms" if draft_step_ms is not None else "draft_ms",
            )
        return (
            lambda s, t, n: surface.cycle_ms(batch, s, t, n) + overhead_ms,
            float(surface.forward_ms(batch, 1)),
        )
    if verify_curve is None:
        raise BreakevenError(
            "{0} needs the verify's cost at each number of verify tokens: "
            "{1} with a forward surface (fit runs at two or more batch "
            "sizes), or {2}",
            "tree",
            "fit_file",
            "verify_curve",
        )
    step, fixed = draft_step_ms or 0.0, draft_ms or 0.0
    for name, value in (("draft_ms", draft_ms), ("draft_step_ms", draft_step_ms)):
        if value is not None:
            _xp.nonnegative(_xp.SCALAR, name, value, "ms")
    if batch < verify_curve.min_tokens or batch * 2 > verify_curve.max_tokens:
        raise BreakevenError(
            "{0}: got " + str(batch) + f"; the curve covers "
            f"{verify_curve.min_tokens:g} to {verify_curve.max_tokens:g} "
            "tokens, not a decode of that batch and a verify of 2 tokens for "
            "each sequence",
            "batch",
        )

    def cycle(s: int, t: int, n: int) -> float | None:
        if batch * n > verify_curve.max_tokens:
            return None
        return float(verify_curve(batch * n)) + s * step + fixed + overhead_ms

    return cycle, float(verify_curve(batch))


def _tree_acceptance(
    acceptance: Any, alpha: float | None, rank_decay: float | None
) -> tuple[Any, list[str]]:
    """The tree acceptance given (a fit's), or made of ``alpha`` and ``rank_decay``; and the
    notes it needs."""

    if acceptance is not None:
        if alpha is not None or rank_decay is not None:
            raise BreakevenError(
                "{0} holds the tree acceptance: {1} cannot be given with it",
                "fit_file",
                "alpha" if alpha is not None else "rank_decay",
            )
        return acceptance, []
    if alpha is None:
        raise BreakevenError(
            "{0} needs the acceptance of trees: {1} (with {2}), or a fit file of runs with a tree",
            "tree",
            "alpha",
            "rank_decay",
        )
    a = float(_xp.probability(_xp.SCALAR, "alpha", alpha))
    if rank_decay is None:
        note = (
            "rank_decay = 1 - alpha (independent candidates), assumed: measured trees "
            "accept less than that; fit runs of a tree for a measured one"
        )
        return TreeAcceptance(a, 1.0 - a, "alpha given; rank_decay = 1 - alpha, assumed"), [note]
    check_acceptance(a, rank_decay)
    return TreeAcceptance(a, float(rank_decay), "alpha and rank_decay given"), []


def optimize_tree(
    *,
    acceptance: Any = None,
    alpha: float | None = None,
    rank_decay: float | None = None,
    surface: Any = None,
    verify_curve: Any = None,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    batch: int = 1,
    max_steps: int = 8,
    max_topk: int = 8,
    max_verify_tokens: int = 64,
) -> Any:
    """The best tree draft (steps, topk, verify_tokens) within the bounds, and the best chain.

    Acceptance is a fitted :class:`breakeven.fitting.tree.TreeAcceptance` (``breakeven fit`` of
    runs with a tree) or ``alpha`` with ``rank_decay`` (default ``1 - alpha``: independent
    candidates, said in the result).  The cycle is a forward surface's (``surface``, from
    a fit across batch sizes, with its draft's cost) at ``batch``, or ``verify_curve`` at
    ``batch * verify_tokens`` tokens plus ``steps * draft_step_ms + draft_ms``; drafting a
    tree's branches is then priced as drafting one (say so).  The step is the baseline's,
    else the cost model's at ``batch``.  See :func:`breakeven.fitting.tree.search_trees`.
    """

    acceptance, notes = _tree_acceptance(acceptance, alpha, rank_decay)
    if baseline_tok_s is not None and step_ms is not None:
        raise BreakevenError(
            "{0} and {1} cannot be given together: give one", "baseline_tok_s", "step_ms"
        )
    batch = _xp.count("batch", batch, MAX_BATCH)
    overhead = float(_xp.nonnegative(_xp.SCALAR, "overhead_ms", overhead_ms or 0.0, "ms"))
    cycle, model_step = _tree_costs(surface, verify_curve, batch, draft_step_ms, draft_ms, overhead)
    if surface is None:
        notes.append(
            "drafting is priced per step, the same for every topk: a fit file's "
            "surface prices the branches"
        )
    if baseline_tok_s is not None:
        step_ms = model_step_ms(baseline_tok_s)
    elif step_ms is not None:
        step_ms = float(_xp.positive(_xp.SCALAR, "step_ms", step_ms, "ms"))
    else:
        step_ms = model_step
    result = search_trees(
        step_ms,
        cycle,
        acceptance,
        max_steps=max_steps,
        max_topk=max_topk,
        max_verify_tokens=max_verify_tokens,
    )

    return replace(result, notes=(*result.notes, *notes), batch=batch)


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


@dataclass(frozen=True)
class BatchPoint:
    """The speedup at one batch size."""

    batch: int
    """Sequences decoded together."""
    k: int
    """Draft tokens per cycle used at this batch."""
    speedup: float
    """Speculative over plain per-sequence decode rate at this batch [x]."""
    step_ms: float
    """Plain decode step of the batch, t(batch) [ms]."""
    cycle_ms: float
    """t(batch * (k + 1)) + drafting + overhead [ms]."""


@dataclass(frozen=True)
class BatchResult:
    """How speculation's gain changes with load."""

    speedup_by_batch: tuple[BatchPoint, ...]
    """Every batch size whose forwards the cost curve covers (best k at each, if several)."""
    breakeven_batch: int | str | None
    """Largest batch with speedup >= 1; None if speculation never pays; "beyond the curve"
    if it still pays at the largest batch the curve covers."""
    max_batch: int
    """Largest batch size swept: the largest the curve covers, or the limit asked for."""
    best_k_by_batch: tuple[tuple[int, int, int], ...] | None = None
    """[first batch, last batch, best k] ranges, k = 0 for "do not speculate"; only when
    acceptance is known for several k."""
    acceptance: str = ""
    """Where the acceptance came from when none was given (a fit file's alpha), else ""."""
    measured_steps: tuple[int, ...] = ()
    """The batches whose step is the measured baseline's (a fit file's), not the cost
    model's t(batch) [sequences]."""
    intervals: tuple[tuple[float, float], ...] = ()
    """Each point's speedup interval, low and high [x], where a fit file's surface sizes them
    (:meth:`breakeven.model.surface.BatchSurface.speedup_range`); none otherwise."""
    notes: tuple[str, ...] = ()
    """What the costs were moved by before the sweep (a fit file's surface moved to another
    context), in sentences."""
    evidence: Evidence | None = None
    """What the fit file's runs measured, where its surface gives the costs (None otherwise)."""
    refused: tuple[str, ...] = ()
    """Why the best k by batch goes beyond that evidence
    (:func:`breakeven.fitting.saved.within_evidence`), one sentence per k; empty: it does not."""

    def with_evidence(self, evidence: Evidence, context: float | None = None) -> BatchResult:
        """This sweep checked against a fit file's ``evidence``: each batch's k and speedup,
        at ``context`` [tokens] (None: the runs'), refused where the runs do not support it
        (:func:`breakeven.fitting.saved.within_evidence`)."""
        claims = [(p.k, p.batch, p.speedup) for p in self.speedup_by_batch]
        return replace(
            self, evidence=evidence, refused=tuple(within_evidence(evidence, claims, context))
        )

    def to_dict(self) -> dict[str, Any]:
        """``speedup_by_batch`` (each ``{batch, k, speedup, step_ms, cycle_ms}``),
        ``breakeven_batch``, ``max_batch``, ``best_k_by_batch``, ``acceptance``,
        ``measured_steps`` and ``notes``; from a fit file, ``pasted``, ``refused`` and
        ``evidence`` (:meth:`with_evidence`)."""
        several = self.best_k_by_batch is not None
        points = [asdict(p) for p in self.speedup_by_batch]
        for p, (low, high) in zip(points, self.intervals, strict=False):
            if math.isfinite(low) and high >= low:
                p["speedup_low"], p["speedup_high"] = low, high
        out: dict[str, Any] = {
            "speedup_by_batch": points,
            "breakeven_batch": self.breakeven_batch,
            "max_batch": self.max_batch,
            "acceptance": self.acceptance,
            "measured_steps": list(self.measured_steps),
            "notes": list(self.notes),
        }
        if several:
            out["best_k_by_batch"] = [list(r) for r in self.best_k_by_batch]
        return out | _evidence_fields(self.evidence, self.refused)

    def to_frame(self) -> Any:
        """``speedup_by_batch`` as a pandas DataFrame indexed by batch."""

        return pd.DataFrame([asdict(p) for p in self.speedup_by_batch]).set_index("batch")

    def report(self) -> str:
        """What ``breakeven batch`` prints: the break-even batch, the best k by batch and the
        sweep."""
        return render.batch_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (every batch size swept), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.batch_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.batch_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Speedup against batch size, the break-even batch marked; returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.speedup_vs_batch(self, ax)


def _evidence_fields(evidence: Evidence | None, refused: Sequence[str]) -> dict[str, Any]:
    """A plan's check against a fit file's evidence, as ``to_dict`` gives it: ``pasted``
    (false: refused), ``refused`` (why) and the ``evidence``; none without a fit file."""
    if evidence is None:
        return {}
    return {"pasted": not refused, "refused": list(refused), "evidence": evidence.to_dict()}


def _tree(k: int, topk: Any, verify_tokens: Any) -> tuple[int, int | None]:
    """A tree's branches and verify tokens, checked: at least k + 1 verify tokens."""
    topk = int(_xp.draft_tokens(_xp.SCALAR, "topk", topk))
    if verify_tokens is None:
        return topk, None
    verify_tokens = int(_xp.draft_tokens(_xp.SCALAR, "verify_tokens", verify_tokens))
    if verify_tokens < k + 1:
        raise BreakevenError(
            "{0}: got " + str(verify_tokens) + f", expected at least "
            f"k + 1 = {k + 1} (the tree's path and the bonus token)",
            "verify_tokens",
        )
    return topk, verify_tokens


def _tree_draft(draft: Any, topk: int, draft_step_ms: float | None) -> Any:
    """Drafting as the sweep calls it for a tree of ``topk`` branches: a model that takes
    the branches (a fitted surface's), or drafting per cycle, which they do not change."""
    if topk == 1 or getattr(draft, "takes_topk", False):
        return draft
    if draft_step_ms is not None or not isinstance(draft, DraftCost):
        raise BreakevenError(
            "{0}: a tree's drafting grows with its branches; give its "
            "drafting per cycle ({1}), or a surface fitted with trees "
            "(breakeven fit)",
            "topk",
            "draft_ms",
        )
    return _PerCycle(draft)


@dataclass(frozen=True)
class _PerCycle:
    """Drafting given per cycle, the same whatever a tree's branches."""

    draft: Any
    takes_topk = True

    def __call__(self, k: Any, batch: Any = 1, topk: Any = 1) -> Any:
        return self.draft(k, batch)


def _verify_ms(curve: Any, batch: int, q: int) -> Any:
    """The verify forward of ``batch`` sequences with ``q`` tokens each: from a surface
    t(B, q) where the cost model is one (:mod:`breakeven.model.surface`), else priced as a forward
    over ``batch * q`` tokens, the curve's stated assumption."""
    forward = getattr(curve, "forward_ms", None)
    return forward(batch, q) if forward is not None else curve(batch * q)


@dataclass(frozen=True)
class SpeedupGrid:
    """The speedup at every batch size swept and every k whose acceptance is known."""

    batches: tuple[int, ...]
    """[sequences]"""
    ks: tuple[int, ...]
    """Draft tokens per cycle [tokens], ascending."""
    step_ms: tuple[float, ...]
    """Plain decode step at each batch, t(batch) [ms]."""
    cycle_ms: tuple[tuple[float, ...], ...]
    """``cycle_ms[i][j]``: the cycle at ``batches[i]`` and ``ks[j]`` [ms] (NaN: the verify is
    beyond the cost model)."""
    speedup: tuple[tuple[float, ...], ...]
    """``speedup[i][j]`` [x] (NaN where the cycle is)."""
    several: bool
    """Acceptance at several k (else the one measured operating point)."""
    max_batch: int
    measured_steps: tuple[int, ...] = ()
    """The batches whose step is a measured baseline's (a fit file's surface), not the cost
    model's t(batch) [sequences]."""

    def best(self, i: int) -> BatchPoint:
        """The best k at ``batches[i]`` (the first k of the highest speedup)."""
        j = max(
            (j for j in range(len(self.ks)) if not math.isnan(self.speedup[i][j])),
            key=lambda j: self.speedup[i][j],
        )
        return BatchPoint(
            self.batches[i], self.ks[j], self.speedup[i][j], self.step_ms[i], self.cycle_ms[i][j]
        )


def _acceptances(
    accept_len: Any,
    k: Any,
    alpha: Any,
    per_position: Any,
    accept_len_by_k: Any,
    k_max: int,
    topk: int,
    verify_tokens: Any,
) -> tuple[dict[int, float], bool, int, int | None]:
    """accept_len by k (one measured point, or several), whether several, and the tree."""
    if accept_len is not None or k is not None:
        if accept_len is None or k is None:
            raise BreakevenError("{0} and {1} go together: tau measured at k", "accept_len", "k")
        if alpha is not None or per_position is not None or accept_len_by_k is not None:
            raise BreakevenError(
                "give {0} with {1}, or acceptance at several k, not both", "accept_len", "k"
            )
        k = int(_xp.draft_tokens(_xp.SCALAR, "k", k))
        taus = {k: float(_xp.accept_len(_xp.SCALAR, "accept_len", accept_len, float(k)))}
        topk, verify_tokens = _tree(k, topk, verify_tokens)
        return taus, False, topk, verify_tokens
    if topk != 1 or verify_tokens is not None:
        raise BreakevenError(
            "{0} and {1} describe one tree: give them with {2} and {3}",
            "topk",
            "verify_tokens",
            "accept_len",
            "k",
        )
    by_k = acceptance_by_k(
        k_max, alpha=alpha, per_position=per_position, accept_len_by_k=accept_len_by_k
    )
    return {k: t for k, t in enumerate(by_k, start=1) if not math.isnan(t)}, True, 1, None


def _batches(curve: Any, max_batch: int | None, q_min: int) -> range:
    """The batch sizes a sweep covers: from the curve's first to ``max_batch`` (by default,
    the largest whose verify of ``q_min`` tokens per sequence the curve covers, at most
    :data:`~breakeven.core.quantities.MAX_BATCH`: a curve to 2^64 tokens is swept to 4,096)."""
    first_batch = max(1, math.ceil(curve.min_tokens))
    limit = curve.max_tokens
    if max_batch is not None:
        max_batch = _xp.count("max_batch", max_batch, MAX_BATCH)
    if math.isinf(limit):
        max_batch = max_batch or DEFAULT_MAX_BATCH
    else:
        covered = min(int(limit // q_min), MAX_BATCH)
        max_batch = covered if max_batch is None else min(max_batch, covered)
    if max_batch < first_batch:
        raise BreakevenError(
            "{0}: covers " + f"{curve.min_tokens:g} to {curve.max_tokens:g} tokens per forward, "
            f"too few for one batch at k = {q_min - 1}",
            "curve",
        )
    return range(first_batch, max_batch + 1)


def speedup_grid(
    curve: Any,
    *,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
    k_max: int = DEFAULT_K_MAX,
    draft: DraftCost | None = None,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    max_batch: int | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
) -> SpeedupGrid:
    """The speedup at every batch and k of a sweep (see :func:`batch_sweep`, which takes the
    same parameters and keeps the best k at each batch)."""
    taus, several, topk, verify_tokens = _acceptances(
        accept_len, k, alpha, per_position, accept_len_by_k, k_max, topk, verify_tokens
    )
    if draft is not None and (draft_ms is not None or draft_step_ms is not None):
        raise BreakevenError(
            "give {0} or {1} and {2}, not both", "draft", "draft_ms", "draft_step_ms"
        )
    draft = _tree_draft(draft or draft_cost(draft_ms, draft_step_ms), topk, draft_step_ms)
    overhead = float(_xp.nonnegative(_xp.SCALAR, "overhead_ms", overhead_ms or 0.0, "ms"))
    batches = _batches(curve, max_batch, verify_tokens or min(taus) + 1)
    ks = tuple(sorted(taus))
    steps, cycles, speedups, measured_at = [], [], [], []
    plain_step = getattr(curve, "plain_step", None)
    for b in batches:
        step, measured = plain_step(b) if plain_step is not None else (float(curve(b)), False)
        if measured:
            measured_at.append(b)
        row_cycle, row_speedup = [], []
        for kk in ks:
            q = verify_tokens or kk + 1
            if b * q > curve.max_tokens:
                row_cycle.append(math.nan)
                row_speedup.append(math.nan)
                continue
            drafting = draft(kk, b, topk) if topk != 1 else draft(kk, b)
            cycle = float(_verify_ms(curve, b, q)) + float(drafting) + overhead
            row_cycle.append(cycle)
            row_speedup.append(float(_speedup(taus[kk], step, cycle)))
        steps.append(step)
        cycles.append(tuple(row_cycle))
        speedups.append(tuple(row_speedup))
    return SpeedupGrid(
        tuple(batches),
        ks,
        tuple(steps),
        tuple(cycles),
        tuple(speedups),
        several,
        batches[-1],
        tuple(measured_at),
    )


def batch_sweep(curve: Any, **inputs: Any) -> BatchResult:
    """Speedup against batch size, the break-even batch, and the best k at each batch.

    Parameters
    ----------
    curve : cost model
        Forward time against total tokens per forward, e.g. a
        :class:`~breakeven.model.costs.TableCost` from a ``bench_one_batch`` run.
    accept_len, k
        One measured operating point (tau at k), or
    alpha, per_position, accept_len_by_k
        acceptance at several k (then the best k is chosen at every batch).
    k_max : int
        Largest k considered with several k, 1 to :data:`~breakeven.core.quantities.MAX_K`.
    draft : DraftCost, optional
        Drafting per cycle as a model of k and batch; or
    draft_ms, draft_step_ms : float, optional  [ms]
        drafting per cycle as ``draft_ms + k * draft_step_ms`` at every batch.
    overhead_ms : float  [ms]
        Other per-cycle cost.
    topk, verify_tokens : int, optional
        A tree draft at the one operating point (``k`` its steps): branches per draft step,
        and tokens per sequence in the verify forward (default ``k + 1``).  Its drafting
        needs a fitted surface (:mod:`breakeven.model.surface`), or ``draft_ms`` per cycle.
    max_batch : int, optional
        Largest batch to sweep, 1 to :data:`~breakeven.core.quantities.MAX_BATCH`; by default
        the largest the curve covers (at most :data:`~breakeven.core.quantities.MAX_BATCH`), or :data:`DEFAULT_MAX_BATCH` for a model without a
        token limit (a fit).
    """
    grid = speedup_grid(curve, **inputs)
    typed = [(name, inputs.get(name)) for name in ("draft_ms", "draft_step_ms", "overhead_ms")]
    flags = curve_flags(curve, "cost_curve")
    flags += typed_times(grid.step_ms[0], "cost_curve", typed) if grid.step_ms else []
    points = [grid.best(i) for i in range(len(grid.batches))]
    paying = [p.batch for p in points if p.speedup >= 1.0]
    breakeven: int | str | None = None
    if paying:
        breakeven = BEYOND_THE_CURVE if paying[-1] == grid.max_batch else paying[-1]
    schedule = _schedule(points) if grid.several else None
    ranged = getattr(curve, "speedup_range", None)
    return BatchResult(
        tuple(points),
        breakeven,
        grid.max_batch,
        schedule,
        measured_steps=grid.measured_steps,
        intervals=tuple(
            ranged(
                p.batch,
                p.speedup,
                p.cycle_ms,
                p.k,
                inputs.get("topk", 1),
                inputs.get("verify_tokens"),
            )
            for p in points
        )
        if ranged
        else (),
        notes=tuple(f.note() for f in flags),
    )


def _schedule(points: Sequence[BatchPoint]) -> tuple[tuple[int, int, int], ...]:
    """[[first batch, last batch, k], ...], with k = 0 where no k beats plain decoding."""
    ranges: list[list[int]] = []
    for p in points:
        k = p.k if p.speedup > 1.0 else 0
        if ranges and ranges[-1][2] == k and ranges[-1][1] == p.batch - 1:
            ranges[-1][1] = p.batch
        else:
            ranges.append([p.batch, p.batch, k])
    return tuple(tuple(r) for r in ranges)


class MoESummary(dict[str, float]):
    """What a Mixture-of-Experts forward loads, and its cost against a one-token step: a dict
    of :data:`~breakeven.core.quantities.QUANTITIES` keys (see :func:`moe_summary`) that reports
    itself."""

    def to_dict(self) -> dict[str, Any]:
        """The quantities as a plain dict, for ``--json``."""
        return plain_json(dict(self), keep_infinite=True)

    def report(self) -> str:
        """What ``breakeven moe`` prints: label, value, unit and JSON key per line."""
        return render.moe_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.moe_html(self.to_dict())


def moe_summary(
    experts: int,
    top_k: int,
    tokens: float,
    shared: int = 0,
    overlap: float = 1.0,
    dense_bytes: float | None = None,
    expert_bytes: float | None = None,
) -> MoESummary:
    """What a forward over ``tokens`` tokens loads on a MoE target, and what it costs against a step.

    Returns ``active_experts`` (expected distinct routed experts plus shared
    ones), ``routed_experts``, ``step_active_experts`` (a one-token forward's),
    and, with ``dense_bytes`` and ``expert_bytes``, ``forward_bytes``,
    ``step_bytes`` and ``verify_step_ratio = forward_bytes / step_bytes`` (a
    memory-bound forward's time follows the bytes it reads).
    """

    if (dense_bytes is None) != (expert_bytes is None):
        raise BreakevenError("{0} and {1} go together", "dense_bytes", "expert_bytes")
    routed = expected_distinct_experts(experts, top_k, tokens, 0, overlap)
    step_routed = expected_distinct_experts(experts, top_k, 1, 0, overlap)
    shared = float(_xp.nonnegative(_xp.SCALAR, "shared", shared, "experts"))
    out = {
        "active_experts": routed + shared,
        "routed_experts": routed,
        "step_active_experts": step_routed + shared,
    }
    if dense_bytes is not None:
        d = float(_xp.nonnegative(_xp.SCALAR, "dense_bytes", dense_bytes, "bytes"))
        x = float(_xp.positive(_xp.SCALAR, "expert_bytes", expert_bytes, "bytes"))
        out["forward_bytes"] = d + x * (routed + shared)
        out["step_bytes"] = d + x * (step_routed + shared)
        out["verify_step_ratio"] = out["forward_bytes"] / out["step_bytes"]
    return MoESummary(out)


__all__ = [
    "BEYOND_THE_CURVE",
    "BatchPoint",
    "BatchResult",
    "KOption",
    "MoESummary",
    "OptimizeResult",
    "acceptance_by_k",
    "batch_sweep",
    "draft_cost",
    "moe_summary",
    "optimal_k",
    "optimize",
    "optimize_k",
    "optimize_leviathan",
]
