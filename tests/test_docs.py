"""The README stays true: its definitions, its example output and its Quick start commands."""

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


def test_readme_case_study_output_is_what_predict_prints():
    block = re.search(
        r"```console\n\$ (breakeven predict --baseline 62\.9 --verify-ms 28\.7 --draft-ms 1\.2 .*?)\n"
        r"(.*?)```",
        README,
        re.S,
    )
    assert block, "README lost the worked example"
    args = shlex.split(block.group(1))[1:]
    shown = block.group(2).replace("   ...\n", "")
    output = CliRunner().invoke(cli, args).output
    for line in shown.splitlines():
        assert line in output.splitlines(), f"README shows a line predict does not print: {line!r}"


def test_readme_error_example_is_what_predict_prints():
    block = re.search(r"\$ (breakeven predict --accept-len 4\.5 -k 3)\n(Error: .*)\n", README)
    assert block
    result = CliRunner().invoke(cli, shlex.split(block.group(1))[1:])
    assert result.exit_code == 2
    assert result.output.strip() == block.group(2)


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
