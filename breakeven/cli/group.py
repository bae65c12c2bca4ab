"""The ``breakeven`` group: commands whose BreakevenErrors come out as one line naming flags."""

from __future__ import annotations

import sys
from typing import Any

import click

from breakeven import __version__
from breakeven.cli.params import CommandLineError, flag
from breakeven.errors import BreakevenError


def spelled(command: click.Command, name: str) -> str:
    """The command-line spelling of a Python argument name, e.g. ``-k/--draft-tokens``."""
    for param in command.params:
        if param.name == name and isinstance(param, click.Option):
            return flag(param)
    return name


class Command(click.Command):
    """A command whose BreakevenErrors come out as one line naming the flags."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BreakevenError as e:
            raise CommandLineError(e.render(lambda name: spelled(self, name))) from None


class Group(click.Group):
    """A group of :class:`Command`; its usage errors are one line, ``Error: ...``, exit 2."""

    command_class = Command

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Like click's, but every usage error is one line: ``Error: ...``, exit code 2."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as e:
            from breakeven.formatting import printable  # lazy: start-up

            # One line whatever a message quotes (a name with a line break, an escape).
            message = printable(e.format_message())
            if isinstance(e, click.UsageError) and e.ctx is not None:
                message += f" (see '{e.ctx.command_path} --help')"
            click.echo(f"Error: {message}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="breakeven")
def cli() -> None:
    """Does speculative decoding pay off here, by how much, and up to what load?

    Rates are per sequence (tok/s of one request's decode), times are in ms,
    and accept_len counts the bonus token: a cycle of k drafted tokens emits
    1 to k + 1 tokens.
    """
