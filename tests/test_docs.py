"""The README stays true: its definitions, its example output and its Quick start commands."""

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from breakeven.cli import cli
from breakeven.quantities import QUANTITIES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title):
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


@pytest.mark.parametrize("key", sorted(QUANTITIES))
def test_every_quantity_is_defined_in_the_readme_with_its_unit(key):
    rows = [
        line for line in _section("Definitions").splitlines() if line.startswith(f"| `{key}` |")
    ]
    assert len(rows) == 1, f"README Definitions has no row for {key}"
    assert f"| {QUANTITIES[key].unit} |" in rows[0]


def _console_examples():
    """Every ``$ breakeven ...`` command in the README's console blocks, with the lines shown."""
    examples = []
    for block in re.findall(r"```console\n(.*?)```", README, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *shown = chunk.rstrip("\n").split("\n")
            examples.append((command, [ln for ln in shown if ln.strip() != "..."]))
    return examples


EXAMPLES = _console_examples()


def test_readme_has_console_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_console_examples_print_what_the_readme_shows(command, shown, monkeypatch):
    monkeypatch.chdir(ROOT)
    command, _, jq = command.partition(" | jq ")
    args = shlex.split(command)
    assert args[0] == "breakeven"
    result = CliRunner().invoke(cli, args[1:])
    assert result.exit_code == (2 if shown and shown[0].startswith("Error:") else 0), result.output
    if jq:
        data = json.loads(result.output)
        keys = [k.strip().lstrip(".") for k in shlex.split(jq)[0].split(",")]
        printed = [json.dumps(data[k]) for k in keys]
        assert printed == shown
        return
    printed = result.output.splitlines()
    for line in shown:
        assert line in printed, f"README shows a line the command does not print: {line!r}"


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


def test_readme_documents_the_measurement_schema():
    from breakeven.schema import MEASUREMENT_COLUMNS, OPTIONAL_COLUMNS

    section = _section("Measurements in: `breakeven ingest` and `breakeven check`")
    for column in MEASUREMENT_COLUMNS + OPTIONAL_COLUMNS:
        assert f"| `{column.name}` | {column.unit} |" in section, column.name


def test_readme_defines_every_number_check_prints():
    from dataclasses import fields

    from breakeven.check import FLAGS, Comparison

    section = _section("Measurements in: `breakeven ingest` and `breakeven check`")
    for f in fields(Comparison):
        assert f"`{f.name}`" in README, f.name
    for code in FLAGS:
        assert f"| `{code}` |" in section, code
