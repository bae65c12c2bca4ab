"""The docs stay true: the README (a landing page) and the docs site in docs/ (mkdocs): their
example output, their definitions, the generated CLI reference, the site's strict build, their
links, and the README's Quick start commands that CI runs."""

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cli_checks import run_cli

import breakeven
from breakeven.core.quantities import QUANTITIES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
DEFINITIONS = (DOCS / "concepts" / "definitions.md").read_text(encoding="utf-8")


def _section(text, title):
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


@pytest.mark.parametrize("key", sorted(QUANTITIES))
def test_every_quantity_is_defined_in_the_docs_with_its_unit(key):
    rows = [
        line
        for line in _section(DEFINITIONS, "Quantities").splitlines()
        if line.startswith(f"| `{key}` |")
    ]
    assert len(rows) == 1, f"docs/concepts/definitions.md, Quantities, has no row for {key}"
    assert f"| {QUANTITIES[key].unit} |" in rows[0]


def _console_examples():
    """Every ``$ breakeven ...`` command in the console blocks of the README and the docs, with
    the lines shown under it, and an id naming its page."""
    examples = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```console\n(.*?)```", text, re.S):
            for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
                command, *shown = chunk.rstrip("\n").split("\n")
                shown = [ln for ln in shown if ln.strip() != "..."]
                examples.append((f"{page.relative_to(ROOT)}: {command}", command, shown))
    return examples


EXAMPLES = _console_examples()


def test_the_docs_have_console_examples():
    assert len(EXAMPLES) >= 30
    pages = {example_id.split(":")[0] for example_id, _, _ in EXAMPLES}
    assert "README.md" in pages and "docs/tutorial.md" in pages


@pytest.mark.parametrize(
    ("command", "shown"), [e[1:] for e in EXAMPLES], ids=[e[0] for e in EXAMPLES]
)
def test_console_examples_print_what_the_docs_show(command, shown, monkeypatch):
    monkeypatch.chdir(ROOT)
    command, _, jq = command.partition(" | jq ")
    args = shlex.split(command)
    assert args[0] == "breakeven"
    result = run_cli(args[1:])
    assert result.exit_code == (2 if shown and shown[0].startswith("Error:") else 0), result.output
    if jq:
        data = json.loads(result.output)
        keys = [k.strip().lstrip(".") for k in shlex.split(jq)[0].split(",")]
        printed = [json.dumps(data[k]) for k in keys]
        assert printed == shown
        return
    printed = result.output.splitlines()
    for line in shown:
        assert line in printed, f"the docs show a line the command does not print: {line!r}"


def test_ci_runs_the_readme_quick_start_commands():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_command main-command" in script and "readme_command test-command" in script
    extract = script[script.index("readme_command() {") : script.index("main_cmd=")]
    for marker, expected in (
        ("main-command", "pip install . && breakeven predict"),
        ("test-command", 'pip install ".[test]" && python -m pytest'),
    ):
        shell = f"cd {shlex.quote(str(ROOT))}\n{extract}\nreadme_command {marker}"
        got = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True)
        assert got.stdout.startswith(expected), got.stdout


def test_the_docs_document_the_measurement_schema():
    from breakeven.core.schema import MEASUREMENT_COLUMNS, OPTIONAL_COLUMNS

    section = _section(DEFINITIONS, "Measurement schema")
    for column in MEASUREMENT_COLUMNS + OPTIONAL_COLUMNS:
        assert f"| `{column.name}` | {column.unit} |" in section, column.name


def test_the_docs_define_every_number_check_prints():
    from dataclasses import fields

    from breakeven.measurements.check import FLAGS, Comparison

    for f in fields(Comparison):  # check's own outputs, or the schema's columns it repeats
        assert f"`{f.name}`" in DEFINITIONS, f.name
    flags = _section(DEFINITIONS, "Flags")
    for code in FLAGS:
        assert f"| `{code}` |" in flags, code


def test_the_docs_site_builds_strict(tmp_path):
    got = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert got.returncode == 0, f"mkdocs build --strict failed:\n{got.stdout}\n{got.stderr}"
    assert (tmp_path / "reference" / "api" / "index.html").exists()


def _cli_reference():
    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_current():
    module = _cli_reference()
    committed = module.PAGE.read_text(encoding="utf-8")
    assert committed == module.render(), (
        "docs/reference/cli.md is stale: run python scripts/cli_reference.py"
    )


def test_the_api_reference_lists_every_public_name():
    page = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    directives = set(re.findall(r"^::: (\S+)$", page, re.M))
    for name in breakeven.__all__:
        if name == "__version__":
            continue
        where = f"{getattr(breakeven, name).__module__}.{name}"
        assert where in directives, f"docs/reference/api.md lacks '::: {where}'"


def _relative_links(text):
    """Markdown link and image targets that are paths in this repository (no scheme, no
    anchor-only link), without their anchors."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # not in code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # nor in code spans
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if not re.match(r"^[a-z]+:|^#", t)]


def test_the_readme_is_a_landing_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for marker in ("<!-- main-command -->", "<!-- test-command -->"):
        assert text.count(marker) == 1, marker
        assert _section(text, "Quick start").count(marker) == 1, marker
    assert any(t.startswith("docs/") for t in _relative_links(text))
    for page in PAGES:
        for target in _relative_links(page.read_text(encoding="utf-8")):
            assert (page.parent / target).resolve().is_file(), (
                f"{page.relative_to(ROOT)} links to {target}, which is not a file"
            )
