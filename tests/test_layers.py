"""The package's layers, kept by import-linter's contracts in pyproject.toml.

core < math < iotools < presentation < analysis < cli: a module imports only from its own
layer or below, directly or through others, and no two modules import each other.  Every
module of the package is in a layer, so a new one cannot slip past the contract, and an import
made inside a function says why it is not at the top of its module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "breakeven"


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def _layered_modules() -> set[str]:
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    return {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}


def test_import_linter_contracts_are_kept():
    code = (
        "import sys\n"
        "from importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 2 kept, 0 broken." in out.stdout


def test_every_module_is_in_a_layer():
    layered = _layered_modules()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names = {".".join(parts[: i + 1]) for i in range(1, len(parts))}
        if parts[-1] != "__init__" and not names & layered:
            missing.append(".".join(parts))
    assert missing == []


def _imports_in_functions(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text().splitlines()
    found = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, (ast.Import, ast.ImportFrom)):
                said = "".join(lines[inner.lineno - 2 : inner.end_lineno])
                if "# lazy:" not in said:
                    found.append((inner.lineno, lines[inner.lineno - 1].strip()))
    return found


def test_imports_inside_functions_say_why():
    # An import belongs at the top of its module, where it shows the dependency graph; one made
    # inside a function is there for start-up time or an optional dependency, and says so with
    # a "# lazy: ..." comment on its lines or the line above.
    unsaid = {
        str(path.relative_to(ROOT)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _imports_in_functions(path))
    }
    assert unsaid == {}
