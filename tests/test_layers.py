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


# The house in rooms (issue 39): the tree shows the architecture, and nothing grows past what a
# reader takes in at once.  Lengths are counted as ruff lays the code out (`ruff format` owns the
# layout, and CI's `ruff format --check` keeps it so).
MAX_TOP_LEVEL_MODULES = 10
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800


def _packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def test_the_top_level_holds_only_a_few_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_no_module_name_is_a_siblings_with_a_suffix():
    # fit.py beside fit_files.py, or fleet/ beside fleet_client.py, says nothing of where a
    # change belongs: a module is named after the concept it holds.
    found = []
    for folder in _packages():
        names = sorted(
            p.stem if p.suffix == ".py" else p.name
            for p in folder.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
        )
        found += [(str(folder), a, b) for a in names for b in names if b.startswith(a + "_")]
    assert found == []


def test_no_function_or_module_runs_long():
    long_functions, long_modules = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append((where, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long_functions.append((where, node.name, lines))
    assert long_modules == []
    assert long_functions == []


def test_every_folder_is_kept_free_of_import_loops():
    (ancestors,) = [c["ancestors"] for c in _contracts() if c["type"] == "acyclic_siblings"]
    folders = {".".join(p.relative_to(ROOT).parts) for p in _packages()}
    assert set(ancestors) == folders


def test_the_layer_contract_is_one_line_a_layer():
    # A layer is a folder (or a few sibling folders, the analysis families), never a list of
    # modules: a new module joins its folder's layer without touching the contract.
    (layers,) = [c["layers"] for c in _contracts() if c["type"] == "layers"]
    assert len(layers) <= 8
    named = [name.strip() for layer in layers for name in layer.split(":")]
    folders = {".".join(p.relative_to(ROOT).parts) for p in _packages()}
    assert set(named) - {"breakeven.__main__"} <= folders
