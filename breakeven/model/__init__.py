"""The cycle model: speedup and break-even of speculative decoding.  Pure math, no I/O.

Conventions (stated once, here and in docs/concepts/definitions.md)
---------------------------------------------------------------
- ``baseline_tok_s`` is the decode rate of **one sequence** without
  speculation, and ``step_ms = 1000 / baseline_tok_s`` its decode step.
  Aggregate (all-sequence) rates are never mixed in.
- A speculative cycle drafts ``k`` tokens and verifies them with one target
  forward: ``cycle_ms = draft_ms + verify_ms + overhead_ms``, or a measured
  cycle time.  ``draft_ms`` is all drafting in the cycle, not per token.
- ``accept_len`` (tau) is the mean number of tokens a cycle emits, bonus token
  included (see :mod:`breakeven.model.acceptance`).
- ``speedup = accept_len * step_ms / cycle_ms``: speculative over plain
  per-sequence decode rate.  Acceptance and cost stay separate factors:
  ``speedup = accept_len x (step_ms / cycle_ms)``.

Every function takes Python numbers or numpy arrays, which broadcast, through
one formula.  ``target_speedup`` (default 1) turns each break-even solve into
"the value at which the speedup equals the target".  A solve that no value can
satisfy (the other costs alone exceed the budget; tau would have to exceed
k + 1) returns NaN.

The math layer's other modules: pure functions of numbers or arrays, one formula each, no I/O,
importing only :mod:`breakeven.core`:

- :mod:`~breakeven.model.acceptance`: alpha and accept_len, per-position acceptance;
- :mod:`~breakeven.model.costs`: verify and draft cost models against k, batch and MoE experts;
- :mod:`~breakeven.model.surface`: the cost surface over batch and k;
- :mod:`~breakeven.model.cycle`: the cycle's forms against k and their held-out choice;
- :mod:`~breakeven.model.context`: growth with the context;
- :mod:`~breakeven.model.memory`: the KV cache the draft takes, and the largest batch that fits;
- :mod:`~breakeven.model.pooling`: rates and acceptance pooled from counts, as engines pool them;
- ``_xp`` (one formula for numbers and arrays) and ``_lsq`` (small least squares).
"""

from __future__ import annotations

from typing import Any

from breakeven.model import _xp
from breakeven.model.acceptance import _alpha_from_tau, _tau


def step_ms_from_baseline(baseline_tok_s: Any) -> Any:
    """Baseline decode step of one sequence, ``1000 / baseline_tok_s``.

    Parameters
    ----------
    baseline_tok_s : numeric  [tok/s]
        Per-sequence decode rate without speculation.

    Returns
    -------
    step_ms : numeric  [ms]
    """
    xp = _xp.namespace(baseline_tok_s)
    return _step_ms(_xp.positive(xp, "baseline_tok_s", baseline_tok_s, "tok/s"))


def baseline_tok_s_from_step(step_ms: Any) -> Any:
    """Per-sequence decode rate ``1000 / step_ms`` [tok/s] of a decode step [ms]."""
    xp = _xp.namespace(step_ms)
    return 1000.0 / _xp.positive(xp, "step_ms", step_ms, "ms")


def cycle_ms(verify_ms: Any, draft_ms: Any = 0.0, overhead_ms: Any = 0.0) -> Any:
    """Speculative cycle time ``draft_ms + verify_ms + overhead_ms`` [ms].

    Parameters
    ----------
    verify_ms : numeric  [ms]
        One target forward over the k drafted tokens plus one (> 0).
    draft_ms : numeric  [ms]
        All drafting in one cycle (>= 0).
    overhead_ms : numeric  [ms]
        Everything else per cycle: rejection sampling, scheduling (>= 0).
    """
    xp = _xp.namespace(verify_ms, draft_ms, overhead_ms)
    return (
        _xp.positive(xp, "verify_ms", verify_ms, "ms")
        + _xp.nonnegative(xp, "draft_ms", draft_ms, "ms")
        + _xp.nonnegative(xp, "overhead_ms", overhead_ms, "ms")
    )


def speedup(accept_len: Any, step_ms: Any, cycle_ms: Any) -> Any:
    """Speculative over plain per-sequence decode rate: ``accept_len * step_ms / cycle_ms``.

    Parameters
    ----------
    accept_len : numeric  [tokens/cycle]
        Mean tokens emitted per cycle, bonus included (>= 1).
    step_ms : numeric  [ms]
        Baseline decode step.
    cycle_ms : numeric  [ms]
        Speculative cycle time.

    Returns
    -------
    speedup : numeric  [x]
        Above 1, speculation pays.
    """
    xp = _xp.namespace(accept_len, step_ms, cycle_ms)
    tau = _xp.accept_len(xp, "accept_len", accept_len)
    step = _xp.positive(xp, "step_ms", step_ms, "ms")
    return _speedup(tau, step, _xp.positive(xp, "cycle_ms", cycle_ms, "ms"))


def _speedup(accept_len: Any, step_ms: Any, cycle_ms: Any) -> Any:
    """The speedup formula on checked inputs."""
    return accept_len * step_ms / cycle_ms


def _step_ms(baseline_tok_s: Any) -> Any:
    """The step formula, ``1000 / baseline_tok_s``, on checked inputs."""
    return 1000.0 / baseline_tok_s


def implied_cycle_ms(accept_len: Any, tok_s: Any) -> Any:
    """The cycle a measured speculative rate implies, ``1000 * accept_len / tok_s`` [ms].

    ``tok_s`` is the measured per-sequence decode rate with speculation [tok/s]; the inverse
    of :func:`spec_tok_s`.
    """
    xp = _xp.namespace(accept_len, tok_s)
    tau = _xp.accept_len(xp, "accept_len", accept_len)
    return _implied_cycle_ms(tau, _xp.positive(xp, "tok_s", tok_s, "tok/s"))


def _implied_cycle_ms(accept_len: Any, tok_s: Any) -> Any:
    """The implied-cycle formula on checked inputs."""
    return 1000.0 * accept_len / tok_s


def spec_tok_s(accept_len: Any, cycle_ms: Any) -> Any:
    """Per-sequence decode rate with speculation, ``1000 * accept_len / cycle_ms`` [tok/s]."""
    xp = _xp.namespace(accept_len, cycle_ms)
    tau = _xp.accept_len(xp, "accept_len", accept_len)
    return 1000.0 * tau / _xp.positive(xp, "cycle_ms", cycle_ms, "ms")


def breakeven_accept_len(cycle_ms: Any, step_ms: Any, target_speedup: Any = 1.0) -> Any:
    """Mean acceptance length at which the speedup equals the target: ``S * cycle_ms / step_ms``.

    Speculation pays (at ``S = 1``) when the measured ``accept_len`` exceeds it.

    Returns
    -------
    accept_len : numeric  [tokens/cycle]
    """
    xp = _xp.namespace(cycle_ms, step_ms, target_speedup)
    cycle = _xp.positive(xp, "cycle_ms", cycle_ms, "ms")
    step = _xp.positive(xp, "step_ms", step_ms, "ms")
    return _xp.positive(xp, "target_speedup", target_speedup, "x") * cycle / step


def max_cycle_ms(accept_len: Any, step_ms: Any, target_speedup: Any = 1.0) -> Any:
    """Largest cycle time that still reaches the target: ``accept_len * step_ms / S`` [ms]."""
    xp = _xp.namespace(accept_len, step_ms, target_speedup)
    tau = _xp.accept_len(xp, "accept_len", accept_len)
    step = _xp.positive(xp, "step_ms", step_ms, "ms")
    return tau * step / _xp.positive(xp, "target_speedup", target_speedup, "x")


def max_verify_ms(
    accept_len: Any,
    step_ms: Any,
    draft_ms: Any = 0.0,
    overhead_ms: Any = 0.0,
    target_speedup: Any = 1.0,
) -> Any:
    """Largest verify time that still reaches the target [ms].

    ``max_cycle_ms - draft_ms - overhead_ms``; NaN where drafting and overhead
    alone already use the whole budget.
    """
    xp = _xp.namespace(accept_len, step_ms, draft_ms, overhead_ms, target_speedup)
    rest = _xp.nonnegative(xp, "draft_ms", draft_ms, "ms") + _xp.nonnegative(
        xp, "overhead_ms", overhead_ms, "ms"
    )
    budget = max_cycle_ms(accept_len, step_ms, target_speedup) - rest
    return xp.where(budget > 0, budget, xp.nan)


def max_draft_ms(
    accept_len: Any,
    step_ms: Any,
    verify_ms: Any,
    overhead_ms: Any = 0.0,
    target_speedup: Any = 1.0,
) -> Any:
    """Largest total drafting time per cycle that still reaches the target [ms].

    ``max_cycle_ms - verify_ms - overhead_ms``; NaN where verification and
    overhead alone exceed the budget.
    """
    xp = _xp.namespace(accept_len, step_ms, verify_ms, overhead_ms, target_speedup)
    rest = _xp.positive(xp, "verify_ms", verify_ms, "ms") + _xp.nonnegative(
        xp, "overhead_ms", overhead_ms, "ms"
    )
    budget = max_cycle_ms(accept_len, step_ms, target_speedup) - rest
    return xp.where(budget >= 0, budget, xp.nan)


def max_baseline_tok_s(accept_len: Any, cycle_ms: Any, target_speedup: Any = 1.0) -> Any:
    """Fastest baseline that speculation still beats by the target: ``spec_tok_s / S`` [tok/s].

    A plain decoder faster than this (per sequence) makes speculation lose.
    """
    xp = _xp.namespace(accept_len, cycle_ms, target_speedup)
    s = _xp.positive(xp, "target_speedup", target_speedup, "x")
    return spec_tok_s(accept_len, cycle_ms) / s


def breakeven_alpha(breakeven_accept_len: Any, k: Any) -> Any:
    """Smallest per-token acceptance ``alpha`` whose ``tau(alpha, k)`` reaches a break-even tau.

    Parameters
    ----------
    breakeven_accept_len : numeric  [tokens/cycle]
        From :func:`breakeven_accept_len` (> 0).
    k : numeric
        Draft tokens per cycle.

    Returns
    -------
    alpha : numeric
        0 where the break-even tau is at most 1 (speculation pays whatever is
        accepted); NaN where it exceeds ``k + 1`` (no alpha is enough at this k).
    """
    xp = _xp.namespace(breakeven_accept_len, k)
    k = _xp.draft_tokens(xp, "k", k)
    needed = _xp.positive(xp, "breakeven_accept_len", breakeven_accept_len, "tokens/cycle")
    reachable = needed <= k + 1
    tau = xp.where(needed < 1, 1.0, xp.where(reachable, needed, k + 1))
    return xp.where(reachable, _alpha_from_tau(xp, tau, k), xp.nan)


def leviathan_speedup(alpha: Any, k: Any, cost_ratio: Any) -> Any:
    """Leviathan et al. (2023), Theorem 3.8: expected walltime improvement factor.

    ``tau(alpha, k) / (k * c + 1)``: the cycle model with the verify forward
    costing one target step and each draft step ``c`` target steps.

    Parameters
    ----------
    alpha : numeric
        Per-token acceptance probability, in [0, 1].
    k : numeric
        Draft tokens per cycle (the paper's gamma).
    cost_ratio : numeric
        ``c``, one draft step over one target step (>= 0).

    Returns
    -------
    speedup : numeric  [x]
    """
    xp = _xp.namespace(alpha, k, cost_ratio)
    alpha = _xp.probability(xp, "alpha", alpha)
    k = _xp.draft_tokens(xp, "k", k)
    c = _xp.nonnegative(xp, "cost_ratio", cost_ratio, "target steps")
    return _speedup(_tau(xp, alpha, k), 1.0, k * c + 1)
