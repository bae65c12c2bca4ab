"""breakeven: does speculative decoding pay off here, by how much, and up to what load?

The math takes Python numbers or numpy arrays (which broadcast) and never does
I/O.  Conventions, stated once:

- ``baseline_tok_s`` is a per-sequence decode rate; ``step_ms = 1000 / baseline_tok_s``.
- ``cycle_ms = draft_ms + verify_ms + overhead_ms`` (or measured directly).
- ``accept_len`` (tau) is the mean tokens emitted per cycle, bonus token
  included, so ``1 <= accept_len <= k + 1``.
- ``speedup = accept_len * step_ms / cycle_ms``.

Importing this package is cheap: it pulls in neither numpy nor pandas.
"""

from breakeven.acceptance import (
    accept_len_from_alpha,
    accept_len_from_per_position,
    alpha_from_accept_len,
)
from breakeven.check import CheckResult, check, check_file
from breakeven.costs import (
    ConstantCost,
    DraftCost,
    FittedCost,
    MoECost,
    RooflineCost,
    TableCost,
    expected_distinct_experts,
    fit_cost_curve,
    overlap_from_measurement,
)
from breakeven.errors import BreakevenError
from breakeven.model import (
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
from breakeven.optimize import (
    BatchResult,
    OptimizeResult,
    acceptance_by_k,
    batch_sweep,
    moe_summary,
    optimal_k,
    optimize,
    optimize_k,
)
from breakeven.predict import Prediction, predict
from breakeven.sensitivity import Sensitivity, sensitivity

__version__ = "0.1.0"

# Imported when first used, so that the command line starts fast (benchmarks/cli_startup.py).
_LAZY = {
    "CompareResult": "breakeven.compare",
    "compare": "breakeven.compare",
    "parse_run": "breakeven.iotools.runs",
    "FitResult": "breakeven.fit",
    "fit": "breakeven.fit",
    "fit_file": "breakeven.fit",
    "BatchSurface": "breakeven.surface",
    "MoE": "breakeven.surface",
    "fit_surface": "breakeven.surface",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'breakeven' has no attribute {name!r}")


__all__ = [
    "BatchResult",
    "BatchSurface",
    "BreakevenError",
    "CheckResult",
    "CompareResult",
    "ConstantCost",
    "DraftCost",
    "FitResult",
    "FittedCost",
    "MoE",
    "MoECost",
    "OptimizeResult",
    "Prediction",
    "RooflineCost",
    "Sensitivity",
    "TableCost",
    "__version__",
    "accept_len_from_alpha",
    "accept_len_from_per_position",
    "acceptance_by_k",
    "alpha_from_accept_len",
    "baseline_tok_s_from_step",
    "batch_sweep",
    "breakeven_accept_len",
    "breakeven_alpha",
    "check",
    "check_file",
    "compare",
    "cycle_ms",
    "expected_distinct_experts",
    "fit",
    "fit_cost_curve",
    "fit_file",
    "fit_surface",
    "implied_cycle_ms",
    "leviathan_speedup",
    "max_baseline_tok_s",
    "max_cycle_ms",
    "max_draft_ms",
    "max_verify_ms",
    "moe_summary",
    "optimal_k",
    "optimize",
    "optimize_k",
    "overlap_from_measurement",
    "parse_run",
    "predict",
    "sensitivity",
    "spec_tok_s",
    "speedup",
    "step_ms_from_baseline",
]
