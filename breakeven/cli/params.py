"""The command line's parameter types and callbacks, its error, and its one way of printing.

Bad input never shows a traceback: it is one line, ``Error: ...``, naming the flag, the
value and what was expected, with exit code 2.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
from collections.abc import Sequence
from typing import Any

import click

from breakeven.core.errors import BreakevenError, escape_braces, shorten
from breakeven.core.quantities import MAX_BATCH, MAX_SPEC_TOKENS, QUANTITIES

USAGE_ERROR = 2


class CommandLineError(BreakevenError, click.ClickException):
    """A :class:`~breakeven.core.errors.BreakevenError` as click shows it: one line,
    ``Error: ...``, with exit code 2.  Its message already spells the flags as typed."""

    exit_code = USAGE_ERROR

    def __init__(self, message: str) -> None:
        BreakevenError.__init__(self, escape_braces(message))
        self.message = message


def flag(param: click.Parameter) -> str:
    """How the command line spells ``param``: ``-k/--num-spec-tokens`` (its names in --help;
    never an old name :class:`Renamed` keeps)."""
    return "/".join(param.opts) if param.opts else str(param.name)


def definitions(keys: list[str]) -> str:
    """A --help epilog: each output key with its unit and definition (``QUANTITIES``)."""
    lines = ["Output, as JSON key [unit]: definition.", ""]
    for key in keys:
        q = QUANTITIES[key]
        lines.append("\b")
        lines.append(f"  {key} [{q.unit}]:")
        lines.append(f"      {q.definition}")
    return "\n".join(lines)


_INFINITIES = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def number(text: str, param: click.Parameter) -> float:
    """``text`` as a float (ValueError if it is none).  A number a double cannot hold is
    refused as typed, where float() would quietly make 1e400 inf and 1e-400 zero; typed
    infinities and NaN go on to the checks that say what the flag expects."""
    value = float(text)
    typed = text.strip().lower()
    if math.isinf(value) and typed not in _INFINITIES:
        raise CommandLineError(
            f"{flag(param)}: got {shorten(text.strip())}, expected a number a double "
            "holds (at most about 1.8e308 in size)"
        )
    if value == 0 and any(c in "123456789" for c in typed.partition("e")[0]):
        raise CommandLineError(
            f"{flag(param)}: got {shorten(text.strip())}, expected 0 or a number a "
            "double holds (at least about 1e-308 in size)"
        )
    return value


class Float(click.ParamType):
    """A float, taken as typed (see :func:`number`)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) or param is None:
            return value
        try:
            return number(str(value), param)
        except CommandLineError:  # already one line naming the flag
            raise
        except ValueError:
            self.fail(f"{value!r} is not a valid float.", param, ctx)


FLOAT = Float()


class Bounded(click.IntRange):
    """A whole number in a documented range, refused in one line naming it:
    ``--max-k: got 1000000, expected a whole number from 1 to 64``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.INT.convert(value, param, ctx)
        if param is not None and not self.min <= number <= self.max:
            raise CommandLineError(
                f"{flag(param)}: got {shorten(str(number))}, expected a "
                f"whole number from {self.min} to {self.max}"
            )
        return number


class LibraryChoice(click.Choice):
    """A ``click.Choice`` of a library constant, imported when first needed (start-up).

    Parameters
    ----------
    module : str
        The module that defines the constant: ``breakeven.core.choices``.  A light one:
        ``--help`` imports it to list the choices (none of numpy, pandas, scipy).
    name : str
        The constant, a sequence of strings: ``SCHEDULE_ENGINES``.
    """

    def __init__(self, module: str, name: str) -> None:
        self.source = (module, name)
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        module, name = self.source
        return tuple(getattr(importlib.import_module(module), name))

    @choices.setter
    def choices(self, value: Any) -> None:
        """click's __init__ sets the choices; these come from the library."""


def floats(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A comma-separated list of numbers, e.g. 0.9,0.8,0.6."""
    if value is None:
        return None
    try:
        return [number(part, param) for part in value.split(",") if part.strip()]
    except CommandLineError:  # already one line naming the flag
        raise
    except ValueError:
        raise click.BadParameter(
            f"got {shorten(repr(value))}, expected comma-separated numbers such as {param.metavar}"
        ) from None


def accept_lens(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``2.36,2.79,3.08`` (k = 1, 2, 3, ...) or ``2:1.64,3:1.72,5:1.80`` (the k measured)."""
    if value is None or ":" not in value:
        return floats(ctx, param, value)
    out: dict[int, float] = {}
    for part in (p for p in value.split(",") if p.strip()):
        k_text, sep, tau_text = part.partition(":")
        try:
            k = int(k_text)
            out[k] = number(tau_text, param)
        except CommandLineError:  # already one line naming the flag
            raise
        except ValueError:
            raise click.BadParameter(
                f"got {shorten(repr(value))}, expected K:TAU pairs such "
                "as 2:1.64,3:1.72 or values for k = 1, 2, ..."
            ) from None
        if not sep or k < 1:
            raise click.BadParameter(
                f"got {shorten(repr(value))}, expected K:TAU pairs with "
                "whole k >= 1, such as 2:1.64,3:1.72"
            )
    return out


def sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``1,2,4,8,16``: whole batch sizes >= 1, as a sorted tuple."""
    if value is None:
        return None
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 1 <= int(part) <= MAX_BATCH:
            raise CommandLineError(
                f"{flag(param)}: got {shorten(repr(part))}, expected "
                f"batch sizes from 1 to {MAX_BATCH} such as 1,2,4,8,16"
            )
        out.append(int(part))
    if not out:
        raise CommandLineError(f"{flag(param)}: got no batch size, expected such as 1,2,4,8")
    return tuple(sorted(set(out)))


def k_list(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...]:
    """``1-8``, ``2,3,5`` or a mix (``1-3,6``): whole numbers of draft tokens."""
    if value is None:
        return ()
    out: list[int] = []
    for part in value.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last if sep else first)
        except CommandLineError:  # already one line naming the flag
            raise
        except ValueError:
            raise CommandLineError(
                f"{flag(param)}: got {shorten(repr(value))}, expected k values such as 1-8 or 2,3,5"
            ) from None
        if not (1 <= low <= high <= MAX_SPEC_TOKENS):
            raise CommandLineError(
                f"{flag(param)}: got {shorten(repr(value))}, expected k "
                f"from 1 to {MAX_SPEC_TOKENS}, each range low-high"
            )
        out += range(low, high + 1)
    return tuple(sorted(set(out)))


def json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A JSON object given on the command line."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except CommandLineError:  # already one line naming the flag
        raise
    except (ValueError, RecursionError) as e:
        raise CommandLineError(
            f"{flag(param)}: is not JSON ({shorten(str(e))}); expected "
            'an object such as \'{"method": "eagle3"}\''
        ) from None
    if not isinstance(data, dict):
        raise CommandLineError(f"{flag(param)}: got {shorten(value)}, expected a JSON object")
    return data


def draft_lengths(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """``0 2 4`` or ``0,2,4``: k [tokens], 0 (the baseline) or more."""
    try:
        found = tuple(int(v) for v in value.replace(",", " ").split())
    except ValueError:
        raise click.BadParameter(f"got {value!r}, expected whole numbers such as 0 2 4") from None
    if not found or any(v < 0 for v in found):
        raise click.BadParameter(f"got {value!r}, expected draft tokens >= 0")
    return found


def levels(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    """``1 8 32`` or ``1,8,32``: request counts >= 1."""
    try:
        found = tuple(int(v) for v in value.replace(",", " ").split())
    except CommandLineError:  # already one line naming the flag
        raise
    except ValueError:
        raise click.BadParameter(f"got {value!r}, expected whole numbers such as 1 8 32") from None
    if not found or any(v < 1 for v in found):
        raise click.BadParameter(f"got {value!r}, expected request counts >= 1")
    return found


def renamed_note(old: str, new: str) -> str:
    """The line an old flag name prints on stderr when used: what it is now called."""
    return f"Note: {old} is now {new}; the old name goes in the next release"


class Renamed(click.Option):
    """An option with one name per input (issue 43) whose ``old`` names still parse, for one
    release: not shown in --help or completion, each prints :func:`renamed_note` on stderr
    when used, and sets the same value as the canonical name.

    Parameters
    ----------
    old : sequence of str
        The option's former long names, e.g. ``("--draft-tokens", "--steps")``.
    """

    def __init__(self, *args: Any, old: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.old_names = tuple(old)

    @property
    def canonical(self) -> str:
        """The long name shown in --help: ``--num-spec-tokens``."""
        return next(name for name in self.opts if name.startswith("--"))

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        option = parser._long_opt[self.canonical]
        for old in self.old_names:
            alias = copy.copy(option)

            def process(value: Any, state: Any, old: str = old, go: Any = option.process) -> None:
                click.echo(renamed_note(old, self.canonical), err=True)
                go(value, state)

            alias.process = process
            parser._long_opt[old] = alias


class Values(click.Option):
    """An option that takes every value up to the next flag: ``--concurrency 1 8 32``."""

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        for name in self.opts:
            option = parser._long_opt.get(name) or parser._short_opt.get(name)
            if option is None:
                continue
            process = option.process

            def greedy(value: Any, state: Any, process: Any = process) -> None:
                values = [value]
                while state.rargs and not state.rargs[0].startswith("-"):
                    values.append(state.rargs.pop(0))
                process(" ".join(values), state)

            option.process = greedy


def writable(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """An --out path checked before any work: one line naming the flag if it cannot be
    written (breakeven.iotools.paths)."""
    if value is None:
        return None
    from breakeven.iotools.paths import check_output_path  # lazy: start-up

    directory = isinstance(param.type, click.Path) and not param.type.file_okay
    try:
        return check_output_path(value, directory=directory)
    except BreakevenError as e:
        raise CommandLineError(e.render(lambda name: flag(param))) from None


def _not_finite(data: Any, where: str = "") -> str | None:
    """The key (``by_k[3].speedup``) of the first number in ``data`` that is not finite."""
    if isinstance(data, float):
        return None if math.isfinite(data) else where or "the result"
    items: Any = ()
    if isinstance(data, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in data.items())
    elif isinstance(data, (list, tuple)):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(data))
    return next((bad for key, v in items if (bad := _not_finite(v, key)) is not None), None)


def say(text: str, err: bool = True) -> None:
    """Print a message (to stderr by default), wrapped to the display's width as the text
    output is (:func:`breakeven.render.text.wrap_lines`)."""
    from breakeven.render.text import wrap_lines  # lazy: start-up

    click.echo(wrap_lines(text), err=err)


def _refuse_overflow(data: Any) -> None:
    """Refuse, naming it, the first number in a result's ``data`` that is not finite."""
    bad = _not_finite(data)
    if bad is not None:
        raise CommandLineError(
            f"{bad} overflows: these inputs give a number beyond what a double "
            "holds (about 1.8e308); expected inputs of a realistic size"
        )


def emit(result: Any, as_json: bool) -> None:
    """Print ``result`` as one JSON object (its ``to_dict()``), or its ``report()``.

    Output is strict JSON (and a table never shows inf): a result that overflows a double,
    which only absurd inputs make, is refused in one line naming it (exit 2).  Quantities
    that no value satisfies are null already.
    """
    data = result.to_dict()
    chosen = click.get_current_context().meta.get("breakeven.format", "text")
    if as_json or chosen == "json":
        try:  # strict JSON refuses what is not finite: looked for only then
            text = json.dumps(data, indent=2, allow_nan=False)
        except ValueError:
            _refuse_overflow(data)
            raise
        click.echo(text)
        return
    _refuse_overflow(data)
    if chosen in ("markdown", "csv"):
        from breakeven.render.text import csv_table, markdown_table  # lazy: start-up

        if not hasattr(result, "table"):
            raise CommandLineError(
                f"--format: got {chosen!r}, but this command prints no table; expected text or json"
            )
        render = markdown_table if chosen == "markdown" else csv_table
        click.echo(render(*result.table()), nl=False)
        return
    click.echo(result.report(), nl=False)
