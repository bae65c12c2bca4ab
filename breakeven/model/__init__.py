"""The math layer: pure functions of numbers or arrays, one formula each, no I/O.

- :mod:`~breakeven.model.formulas`: speedup and break-even (the cycle, the step, accept_len);
- :mod:`~breakeven.model.acceptance`: alpha and accept_len, per-position acceptance;
- :mod:`~breakeven.model.costs`: verify and draft cost models against k, batch and MoE experts;
- :mod:`~breakeven.model.surface`: the cost surface over batch and k;
- :mod:`~breakeven.model.cycle`: the cycle's forms against k and their held-out choice;
- :mod:`~breakeven.model.context`: growth with the context;
- :mod:`~breakeven.model.pooling`: rates and acceptance pooled from counts, as engines pool them;
- ``_xp`` (one formula for numbers and arrays) and ``_lsq`` (small least squares).

It imports only :mod:`breakeven.core`.  The formulas' documented paths
(``breakeven.model.speedup``) are kept: they are re-exported here.
"""

from breakeven.model.formulas import (
    baseline_tok_s_from_step,
    breakeven_accept_len,
    breakeven_alpha,
    cycle_ms,
    implied_cycle_ms,
    leviathan_speedup,
    max_baseline_tok_s,
    max_cycle_ms,
    max_draft_ms,
    max_verify_ms,
    spec_tok_s,
    speedup,
    step_ms_from_baseline,
)

__all__ = [
    "baseline_tok_s_from_step",
    "breakeven_accept_len",
    "breakeven_alpha",
    "cycle_ms",
    "implied_cycle_ms",
    "leviathan_speedup",
    "max_baseline_tok_s",
    "max_cycle_ms",
    "max_draft_ms",
    "max_verify_ms",
    "spec_tok_s",
    "speedup",
    "step_ms_from_baseline",
]
