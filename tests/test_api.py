"""The package's top level: functions named like their modules stay functions."""

import subprocess
import sys


def test_top_level_names_are_the_functions_even_after_their_modules_load():
    code = (
        "import breakeven.measurements.check, breakeven.prediction.optimize, breakeven.prediction.sensitivity, breakeven.prediction.predict\n"
        "import breakeven as be\n"
        "print(all(callable(f) and not hasattr(f, '__path__') and type(f).__name__ == 'function'\n"
        "          for f in (be.check, be.optimize, be.sensitivity, be.predict)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_every_exported_name_exists():
    import breakeven

    missing = [name for name in breakeven.__all__ if not hasattr(breakeven, name)]
    assert missing == []


def test_lazy_names_stay_functions_after_their_modules_load():
    # compare and fit are imported when first used: a module loaded first must not take the name.
    code = (
        "import breakeven as be\n"
        "import breakeven.measurements.compare, breakeven.fitting.fit\n"
        "print(type(be.compare).__name__, type(be.fit).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["function", "function"]


def test_importing_the_package_imports_no_submodule():
    code = (
        "import sys, breakeven\n"
        "print(sorted(m for m in sys.modules if m.startswith('breakeven.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# The documented paths before issue 39 put the layers in folders (docs/reference/api.md then).
OLD_DOCUMENTED_PATHS = """
breakeven.acceptance.accept_len_from_alpha breakeven.acceptance.alpha_from_accept_len
breakeven.acceptance.accept_len_from_per_position breakeven.predict.predict
breakeven.predict.Prediction breakeven.sensitivity.sensitivity breakeven.sensitivity.Sensitivity
breakeven.optimize.optimize breakeven.optimize.OptimizeResult breakeven.optimize.optimize_k
breakeven.optimize.optimal_k breakeven.optimize.acceptance_by_k breakeven.optimize.batch_sweep
breakeven.optimize.BatchResult breakeven.optimize.moe_summary breakeven.costs.ConstantCost
breakeven.costs.TableCost breakeven.costs.fit_cost_curve breakeven.costs.FittedCost
breakeven.costs.MoECost breakeven.costs.RooflineCost breakeven.costs.DraftCost
breakeven.costs.expected_distinct_experts breakeven.costs.overlap_from_measurement
breakeven.surface.fit_surface breakeven.surface.BatchSurface breakeven.surface.MoE
breakeven.check.check breakeven.check.check_file breakeven.check.CheckResult
breakeven.compare.compare breakeven.compare.CompareResult breakeven.fit.fit
breakeven.fit.fit_file breakeven.fit.FitResult breakeven.sweep.plan_sweep breakeven.sweep.SweepPlan
breakeven.sweep_run.run_sweep breakeven.sweep_answer.answer_sweep
breakeven.sweep_answer.SweepAnswer breakeven.bench_client.Config breakeven.model.speedup
breakeven.model.step_ms_from_baseline breakeven.model.leviathan_speedup
""".split()


def test_the_paths_documented_before_the_move_still_import():
    # A notebook written against the old layout keeps working: each old module path imports
    # (``from breakeven.costs import TableCost``) and gives the object the package exports.
    code = (
        "import importlib, breakeven as be\n"
        f"paths = {OLD_DOCUMENTED_PATHS!r}\n"
        "for path in paths:\n"
        "    module, _, name = path.rpartition('.')\n"
        "    got = getattr(importlib.import_module(module), name)\n"
        "    assert not hasattr(be, name) or got is getattr(be, name), path\n"
        "from breakeven.plot import prediction_surface\n"
        "from breakeven.formatting import check_text\n"
        "import breakeven.check, breakeven.optimize, breakeven.predict, breakeven.fit\n"
        "print(all(type(f).__name__ == 'function' for f in (be.check, be.optimize, be.predict, be.fit)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
