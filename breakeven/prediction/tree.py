"""The best tree draft from the inputs ``breakeven optimize --tree`` takes: its acceptance
(a fit's, or ``alpha`` and ``rank_decay``) and its cycle's costs (a forward surface, or a verify
curve), searched by :func:`breakeven.fitting.tree.search_trees`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import MAX_BATCH
from breakeven.fitting.tree import TreeAcceptance, check_acceptance, search_trees
from breakeven.model import _xp
from breakeven.model import step_ms_from_baseline as model_step_ms


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
