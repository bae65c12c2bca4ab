"""The ``breakeven`` command line: thin click commands that parse, call one function and print.

Start-up matters (``breakeven predict`` runs in shell loops), so this module
imports only click and breakeven's light modules; numpy, pandas, scipy and
matplotlib are imported inside the commands that need them.

Bad input never shows a traceback: it is one line, ``Error: ...``, naming the
flag, the value and what was expected, with exit code 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from breakeven import __version__
from breakeven.errors import BreakevenError
from breakeven.quantities import QUANTITIES

USAGE_ERROR = 2


class InputError(click.ClickException):
    """A user error, shown as one line with exit code 2."""

    exit_code = USAGE_ERROR


def _flag(command: click.Command, name: str) -> str:
    """The command-line spelling of a Python argument name, e.g. ``-k/--draft-tokens``."""
    for param in command.params:
        if param.name == name and isinstance(param, click.Option):
            return "/".join(param.opts)
    return name


class _Command(click.Command):
    """A command whose BreakevenErrors come out as one line naming the flags."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BreakevenError as e:
            raise InputError(e.render(lambda name: _flag(self, name))) from None


class _Group(click.Group):
    command_class = _Command

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Like click's, but every usage error is one line: ``Error: ...``, exit code 2."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as e:
            message = e.format_message()
            if isinstance(e, click.UsageError) and e.ctx is not None:
                message += f" (see '{e.ctx.command_path} --help')"
            click.echo(f"Error: {message}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="breakeven")
def cli() -> None:
    """Does speculative decoding pay off here, by how much, and up to what load?

    Rates are per sequence (tok/s of one request's decode), times are in ms,
    and accept_len counts the bonus token: a cycle of k drafted tokens emits
    1 to k + 1 tokens.
    """


def _definitions(keys: list[str]) -> str:
    lines = ["Output, as JSON key [unit]: definition.", ""]
    for key in keys:
        q = QUANTITIES[key]
        lines.append("\b")
        lines.append(f"  {key} [{q.unit}]:")
        lines.append(f"      {q.definition}")
    return "\n".join(lines)


def _per_position(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return [float(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"got {value!r}, expected comma-separated rates such as 0.9,0.8,0.6"
        ) from None


_MS = "[ms]"


@cli.command(
    epilog=_definitions(
        [
            "step_ms",
            "baseline_tok_s",
            "cycle_ms",
            "accept_len",
            "alpha",
            "speedup",
            "spec_tok_s",
            "breakeven_accept_len",
            "breakeven_alpha",
            "max_cycle_ms",
            "max_verify_ms",
            "max_draft_ms",
            "max_baseline_tok_s",
            "breakeven_alpha_by_k",
        ]
    )
)
@click.option(
    "--baseline",
    "baseline_tok_s",
    type=float,
    metavar="TOK_S",
    help="Per-sequence decode rate without speculation [tok/s].",
)
@click.option(
    "--step-ms",
    "step_ms",
    type=float,
    metavar="MS",
    help=f"Baseline decode step, instead of --baseline {_MS}.",
)
@click.option(
    "--verify-ms",
    "verify_ms",
    type=float,
    metavar="MS",
    help=f"One target forward over k + 1 tokens {_MS}.",
)
@click.option(
    "--draft-ms",
    "draft_ms",
    type=float,
    metavar="MS",
    help=f"All drafting in one cycle, not per token (default 0) {_MS}.",
)
@click.option(
    "--overhead-ms",
    "overhead_ms",
    type=float,
    metavar="MS",
    help=f"Other per-cycle cost: sampling, scheduling (default 0) {_MS}.",
)
@click.option(
    "--cycle-ms",
    "cycle_ms",
    type=float,
    metavar="MS",
    help=f"Measured cycle time, instead of the three costs above {_MS}.",
)
@click.option(
    "--accept-len",
    "accept_len",
    type=float,
    metavar="TAU",
    help="Mean tokens emitted per cycle, bonus token included [tokens/cycle].",
)
@click.option(
    "--alpha",
    "alpha",
    type=float,
    metavar="A",
    help="Per-token acceptance probability (i.i.d.); needs -k.",
)
@click.option("-k", "--draft-tokens", "k", type=int, metavar="K", help="Draft tokens per cycle.")
@click.option(
    "--per-position",
    "per_position",
    callback=_per_position,
    metavar="A1,A2,...",
    help="Per-position acceptance rates (as vLLM prints them); sets k and accept_len.",
)
@click.option(
    "--cost-ratio",
    "cost_ratio",
    type=float,
    metavar="C",
    help="Leviathan's c: draft step / target step, verify = one target step; needs -k.",
)
@click.option(
    "--target",
    "target_speedup",
    type=float,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Speedup the break-even solves aim for [x].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def predict(as_json: bool, **inputs: Any) -> None:
    """Speedup and break-even thresholds from measured costs and acceptance.

    Prints every quantity its inputs determine. Example (the case study):

    \b
      breakeven predict --baseline 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1
    """
    from breakeven.predict import predict as run_predict

    result = run_predict(**inputs)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        from breakeven.formatting import prediction_text

        click.echo(prediction_text(result), nl=False)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="breakeven")
