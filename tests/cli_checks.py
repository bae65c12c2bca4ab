"""The command line as the tests call it, and what a refusal must look like: shared by the
tests of bad input, of output files and of the cost commands."""

from __future__ import annotations

from click.testing import CliRunner

from breakeven.cli import cli


def run_cli(args, **options):
    """``breakeven ARGS`` in a CliRunner, every argument as text: the one way the tests run the
    command line in-process.  ``options`` are CliRunner.invoke's (``input``, ``env``,
    ``catch_exceptions``)."""
    return CliRunner().invoke(cli, [str(a) for a in args], **options)


def invoke(*args):
    """``breakeven ARGS`` in a CliRunner, every argument as text."""
    return run_cli(args)


def one_line_exit_2(r, *wanted):
    """Exit 2, no traceback, and the last line of stderr the one error naming ``wanted``."""
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    last = r.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("Error: "), r.output
    for text in wanted:
        assert text in last, last
    return last
