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
