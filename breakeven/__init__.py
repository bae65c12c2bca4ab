"""breakeven: does speculative decoding pay off here, by how much, and up to what load?

The math takes Python numbers or numpy arrays (which broadcast) and never does
I/O.  Conventions, stated once:

- ``baseline_tok_s`` is a per-sequence decode rate; ``step_ms = 1000 / baseline_tok_s``.
- ``cycle_ms = draft_ms + verify_ms + overhead_ms`` (or measured directly).
- ``accept_len`` (tau) is the mean tokens emitted per cycle, bonus token
  included, so ``1 <= accept_len <= k + 1``.
- ``speedup = accept_len * step_ms / cycle_ms``.

Importing this package is cheap: each public name is imported when first used.
"""

import sys
import types

__version__ = "0.1.0"

# Every public name is imported when first used, so that ``import breakeven`` and the command
# line start fast (benchmarks/cli_startup.py): ``breakeven predict`` needs none of check,
# costs, optimize, intervals, credentials, sensitivity or schema.  Name -> defining module.
_LAZY = {
    "accept_len_from_alpha": "breakeven.model.acceptance",
    "accept_len_from_per_position": "breakeven.model.acceptance",
    "alpha_from_accept_len": "breakeven.model.acceptance",
    "CheckResult": "breakeven.measurements.check",
    "check": "breakeven.measurements.check",
    "check_file": "breakeven.measurements.check",
    "CompareResult": "breakeven.measurements.compare",
    "compare": "breakeven.measurements.compare",
    "parse_run": "breakeven.iotools.runs",
    "ConstantCost": "breakeven.model.costs",
    "DraftCost": "breakeven.model.costs",
    "FittedCost": "breakeven.model.costs",
    "MoECost": "breakeven.model.costs",
    "RooflineCost": "breakeven.model.costs",
    "TableCost": "breakeven.model.costs",
    "expected_distinct_experts": "breakeven.model.costs",
    "fit_cost_curve": "breakeven.model.costs",
    "overlap_from_measurement": "breakeven.model.costs",
    "BreakevenError": "breakeven.core.errors",
    "FitResult": "breakeven.fitting.fit",
    "fit": "breakeven.fitting.fit",
    "fit_file": "breakeven.fitting.fit",
    "baseline_tok_s_from_step": "breakeven.model.formulas",
    "breakeven_accept_len": "breakeven.model.formulas",
    "breakeven_alpha": "breakeven.model.formulas",
    "cycle_ms": "breakeven.model.formulas",
    "implied_cycle_ms": "breakeven.model.formulas",
    "leviathan_speedup": "breakeven.model.formulas",
    "max_baseline_tok_s": "breakeven.model.formulas",
    "max_cycle_ms": "breakeven.model.formulas",
    "max_draft_ms": "breakeven.model.formulas",
    "max_verify_ms": "breakeven.model.formulas",
    "spec_tok_s": "breakeven.model.formulas",
    "speedup": "breakeven.model.formulas",
    "step_ms_from_baseline": "breakeven.model.formulas",
    "OptimizeResult": "breakeven.prediction.optimize",
    "acceptance_by_k": "breakeven.prediction.optimize",
    "optimal_k": "breakeven.prediction.optimize",
    "optimize": "breakeven.prediction.optimize",
    "optimize_k": "breakeven.prediction.optimize",
    "moe_summary": "breakeven.prediction.moe",
    "BatchResult": "breakeven.planning.batch",
    "batch_sweep": "breakeven.planning.batch",
    "Prediction": "breakeven.prediction.predict",
    "predict": "breakeven.prediction.predict",
    "Sensitivity": "breakeven.prediction.sensitivity",
    "sensitivity": "breakeven.prediction.sensitivity",
    "SweepPlan": "breakeven.sweep.plan",
    "plan_sweep": "breakeven.sweep.plan",
    "SweepAnswer": "breakeven.sweep.answer",
    "answer_sweep": "breakeven.sweep.answer",
    "run_sweep": "breakeven.sweep.run",
    "BatchSurface": "breakeven.model.surface",
    "MoE": "breakeven.model.surface",
    "fit_surface": "breakeven.model.surface",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'breakeven' has no attribute {name!r}")
    # lazy: start-up (the table above)
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The package's module type: its functions keep their names when a namesake module loads.

    Importing a submodule binds it to its name on the package (``breakeven.measurements.check`` becomes the
    module ``breakeven/measurements/check.py``).  Six public functions share a name with the module that
    defines them (check, compare, fit, optimize, predict, sensitivity): for those the name
    stays the function, as the documented API says, however the modules were imported.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
    "SweepAnswer",
    "SweepPlan",
    "TableCost",
    "__version__",
    "accept_len_from_alpha",
    "accept_len_from_per_position",
    "acceptance_by_k",
    "alpha_from_accept_len",
    "answer_sweep",
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
    "plan_sweep",
    "predict",
    "run_sweep",
    "sensitivity",
    "spec_tok_s",
    "speedup",
    "step_ms_from_baseline",
]
