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

import importlib
import sys
import types
from collections.abc import Mapping

__version__ = "0.1.0"


# The mechanism, shared with breakeven.iotools (one definition): the standard library only, so
# that importing the package imports none of its modules.
class LazyPackage(types.ModuleType):
    """A package's module type: each name of ``lazy`` (name -> the module that defines it) is
    imported where first used, then kept.

    Importing a module binds it to its name on its package.  Where a lazy name is also a
    module's name (``breakeven.check``, ``breakeven.iotools.ingest``), the name stays what the
    table says (the function), however the modules were imported."""

    lazy: Mapping[str, str] = {}

    def __getattr__(self, name: str) -> object:
        module = self.lazy.get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.lazy))

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and name in self.lazy:
            return
        super().__setattr__(name, value)


def lazy_names(package: str, names: Mapping[str, str]) -> None:
    """Make ``package`` (imported, by its name) a :class:`LazyPackage` of ``names``."""
    sys.modules[package].__class__ = type(
        "LazyPackage", (LazyPackage,), {"lazy": dict(names), "__doc__": LazyPackage.__doc__}
    )


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
    "baseline_tok_s_from_step": "breakeven.model",
    "breakeven_accept_len": "breakeven.model",
    "breakeven_alpha": "breakeven.model",
    "cycle_ms": "breakeven.model",
    "implied_cycle_ms": "breakeven.model",
    "leviathan_speedup": "breakeven.model",
    "max_baseline_tok_s": "breakeven.model",
    "max_cycle_ms": "breakeven.model",
    "max_draft_ms": "breakeven.model",
    "max_verify_ms": "breakeven.model",
    "spec_tok_s": "breakeven.model",
    "speedup": "breakeven.model",
    "step_ms_from_baseline": "breakeven.model",
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


# Modules moved into the layers' folders (issue 39): each old path still imports, as the module
# that now holds its names, or a view of the modules it was split into (searched in order).
_MOVED = {
    "breakeven._lsq": ("breakeven.model._lsq",),
    "breakeven._xp": ("breakeven.model._xp",),
    "breakeven.acceptance": ("breakeven.model.acceptance",),
    "breakeven.bench_client": (
        "breakeven.bench.session",
        "breakeven.bench.config",
        "breakeven.bench.prompts",
        "breakeven.bench.stream",
        "breakeven.bench.levels",
        "breakeven.bench.rows",
    ),
    "breakeven.check": (
        "breakeven.measurements.check",
        "breakeven.measurements.normalise",
        "breakeven.measurements.flags",
        "breakeven.measurements.baselines",
        "breakeven.measurements.pairing",
    ),
    "breakeven.compare": ("breakeven.measurements.compare",),
    "breakeven.context": ("breakeven.model.context",),
    "breakeven.costs": ("breakeven.model.costs",),
    "breakeven.cycle": ("breakeven.model.cycle",),
    "breakeven.deploy": ("breakeven.render.engine_configs",),
    "breakeven.drawing": ("breakeven.jobs.drawing",),
    "breakeven.fit": ("breakeven.fitting.fit",),
    "breakeven.fit_batches": ("breakeven.fitting.surfaces",),
    "breakeven.fit_files": ("breakeven.fitting.saved",),
    "breakeven.fleet_client": ("breakeven.fleet.reads", "breakeven.iotools.query_range"),
    "breakeven.formatting": ("breakeven.render",),
    "breakeven.holdout": ("breakeven.fitting.holdout",),
    "breakeven.inputs": ("breakeven.jobs.inputs",),
    "breakeven.intervals": ("breakeven.measurements.intervals",),
    "breakeven.iotools.measurements": ("breakeven.iotools.csvfile",),
    "breakeven.measure": ("breakeven.jobs.measure",),
    "breakeven.optimize": (
        "breakeven.prediction.optimize",
        "breakeven.planning.batch",
        "breakeven.prediction.moe",
        "breakeven.prediction.tree",
    ),
    "breakeven.plausibility": ("breakeven.measurements.plausibility",),
    "breakeven.plot": ("breakeven.render.plot",),
    "breakeven.pooling": ("breakeven.model.pooling",),
    "breakeven.positions": ("breakeven.measurements.positions",),
    "breakeven.predict": ("breakeven.prediction.predict",),
    "breakeven.report": ("breakeven.render.report",),
    "breakeven.schedule": ("breakeven.planning.schedule",),
    "breakeven.sensitivity": ("breakeven.prediction.sensitivity",),
    "breakeven.surface": ("breakeven.model.surface",),
    "breakeven.sweep_answer": ("breakeven.sweep.answer",),
    "breakeven.sweep_run": ("breakeven.sweep.run",),
    "breakeven.tree": ("breakeven.fitting.tree",),
    "breakeven.workload": ("breakeven.measurements.workload",),
}


def _moved_view(old: str) -> types.ModuleType:
    """The module an old path names now: its one home, or a view of the modules it was split
    into, each name looked up in them in order."""
    import importlib  # lazy: start-up (only an old path needs it)

    homes = _MOVED[old]
    if len(homes) == 1:
        return importlib.import_module(homes[0])
    view = types.ModuleType(old, f"Moved: {old}'s names are in {', '.join(homes)}.")

    def __getattr__(name: str) -> object:
        for home in homes:
            module = importlib.import_module(home)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    view.__getattr__ = __getattr__  # type: ignore[method-assign]
    return view


class _MovedFinder:
    """Finds a moved module's old path (``import breakeven.costs``) and loads it as its view."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> object:
        if name not in _MOVED:
            return None
        import importlib.machinery  # lazy: start-up (only an old path needs it)

        return importlib.machinery.ModuleSpec(name, _MovedFinder)

    @staticmethod
    def create_module(spec: object) -> types.ModuleType:
        module = _moved_view(spec.name)  # type: ignore[attr-defined]
        spec.loader_state = getattr(module, "__spec__", None)  # type: ignore[attr-defined]
        return module

    @staticmethod
    def exec_module(module: types.ModuleType) -> None:
        # The import system gave the module the old path's spec: a moved module keeps its own.
        own = module.__spec__.loader_state  # type: ignore[union-attr]
        if own is not None:
            module.__spec__ = own


if not any(f is _MovedFinder for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder)
lazy_names(__name__, _LAZY)  # six functions keep their names when a namesake module loads

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
