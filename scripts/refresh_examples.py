"""Rewrite the output under every ``$ breakeven ...`` command in the console blocks of the
given Markdown files with what the command prints now, at 100 columns (as the docs tests run
them: ``tests/test_docs.py`` checks every shown line).

    python scripts/refresh_examples.py README.md docs/*.md docs/*/*.md

An example shows the whole output (text fits 100 columns, so it reads as the terminal shows
it); one that ends in a line ``...`` keeps as many first lines as it showed before it, then the
``...``.  A ``| jq`` example is left as it is (its test reads the JSON).  Review the diff: the figures in the
prose around an example are not rewritten.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(command: str) -> list[str]:
    from click.testing import CliRunner

    from breakeven.cli import cli

    args = shlex.split(command)
    result = CliRunner().invoke(cli, args[1:], env={"COLUMNS": "100"})
    return result.output.rstrip("\n").split("\n")


def refreshed(shown: list[str], printed: list[str]) -> list[str]:
    if not shown or shown[-1].strip() != "..." or len(printed) <= len(shown) - 1:
        return printed
    return [*printed[: len(shown) - 1], "..."]


def refresh(text: str) -> str:
    def block(match: re.Match[str]) -> str:
        body = match.group(1)
        out = []
        for chunk in re.split(r"^(?=\$ )", body, flags=re.M):
            if not chunk.startswith("$ breakeven") or " | jq " in chunk.split("\n")[0]:
                out.append(chunk)
                continue
            command, *shown = chunk.rstrip("\n").split("\n")
            lines = refreshed(shown, run(command[2:]))
            out.append("\n".join([command, *lines]) + "\n")
        return "```console\n" + "".join(out) + "```"

    return re.sub(r"```console\n(.*?)```", block, text, flags=re.S)


def main(paths: list[str]) -> None:
    os.chdir(ROOT)
    for path in paths:
        p = Path(path)
        before = p.read_text(encoding="utf-8")
        after = refresh(before)
        if after != before:
            p.write_text(after, encoding="utf-8")
            print(f"refreshed {path}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # this checkout's breakeven, whatever else is installed
    main(sys.argv[1:])
