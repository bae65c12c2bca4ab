"""The ``breakeven`` command line: thin click commands that parse, call one function and print.

One module per family of commands registers them on :data:`cli`: ``predict`` (predict,
optimize, batch, moe), ``measurements`` (ingest, check, compare), ``fitting`` (fit,
schedule), ``bench``, ``fleet`` and ``plots`` (plot ..., report).  ``params`` holds the
parameter types, the error and :func:`~breakeven.cli.params.emit`; ``options`` the option
bundles several commands share.

Start-up matters (``breakeven predict`` runs in shell loops): these modules import only
click and breakeven's light modules; the analysis is imported inside the commands.
"""

from __future__ import annotations

from breakeven.cli import bench, fitting, fleet, measurements, plots, predict, sweep
from breakeven.cli.group import cli

COMMAND_MODULES = (predict, measurements, fitting, bench, fleet, plots, sweep)
"""The modules whose import registers the commands on :data:`cli`."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="breakeven")


__all__ = ["cli", "main"]
