"""The ``breakeven`` group: commands whose BreakevenErrors come out as one line naming flags."""

from __future__ import annotations

# signal's C module: the signal module's enums cost a millisecond of every command's start-up.
import _signal
import contextlib
import itertools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import click

from breakeven import __version__
from breakeven.cli.params import CommandLineError, flag
from breakeven.core.display import display
from breakeven.core.errors import BreakevenError, Terminated


def spelled(command: click.Command, name: str) -> str:
    """The command-line spelling of a Python argument name, e.g. ``-k/--num-spec-tokens``."""
    for param in command.params:
        if param.name == name and isinstance(param, click.Option):
            return flag(param)
    return name


def _display_options() -> list[click.Option]:
    return [
        click.Option(
            ["--wide"],
            is_flag=True,
            help="Show every column of every table and wrap no line (text otherwise fits the "
            "terminal: COLUMNS, else its width, else 100 columns).",
        ),
        click.Option(
            ["--color/--no-color"],
            default=None,
            help="Colour the verdicts: a win green, a loss red, noise grey (default: on a "
            "terminal, unless NO_COLOR is set).",
        ),
    ]


def use_color(asked: bool | None, stream: Any = None) -> bool:
    """Whether to colour: as asked (``--color``/``--no-color``), else on a terminal unless
    ``NO_COLOR`` is set to anything (https://no-color.org)."""
    if asked is not None:
        return asked
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def split_examples(text: str) -> tuple[str, list[str]]:
    """A command's help text without its examples, and the examples: each ``\\b`` paragraph
    whose lines are ``breakeven ...`` commands (a line ending in ``\\`` continues on the
    next)."""
    kept, examples = [], []
    for paragraph in text.split("\n\n"):
        lines = [line for line in paragraph.split("\n") if line.strip() not in ("", "\b")]
        commands, going_on = [], False
        for line in lines:
            if line.strip().startswith("breakeven ") or "| breakeven " in line or going_on:
                commands.append(line.strip() if not going_on else "      " + line.strip())
                going_on = line.rstrip().endswith("\\")
            else:
                commands = []
                break
        if commands and paragraph.lstrip().startswith("\b"):
            examples += commands
        else:
            kept.append(paragraph)
    return "\n\n".join(kept).rstrip(), examples


class Command(click.Command):
    """A command whose BreakevenErrors come out as one line naming the flags.  A command that
    prints text (``display=True``, the default) takes ``--wide`` and ``--color/--no-color``,
    and renders its text fitted to the terminal (:func:`breakeven.core.display.display`)."""

    def __init__(self, *args: Any, display: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if display:
            self.params += _display_options()
        self.help, self.examples = split_examples(self.help or "")

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The epilog (the output's definitions, where a command has one), then the
        examples, last, as ``gh`` and ``git`` end their help."""
        super().format_epilog(ctx, formatter)
        if self.examples:
            with formatter.section("Examples"):
                for line in self.examples:  # whole: a command is copied, not read as prose
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """As click parses, but a mistyped flag is offered only names --help shows, never an
        old name kept for one release (:class:`breakeven.cli.params.Renamed`)."""
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            if not e.possibilities:
                raise
            shown = [
                name
                for param in self.get_params(ctx)
                if isinstance(param, click.Option) and not param.hidden
                for name in (*param.opts, *param.secondary_opts)
            ]
            raise click.NoSuchOption(e.option_name, e.message, shown, e.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        wide = ctx.params.pop("wide", False)
        color = use_color(ctx.params.pop("color", None))
        if color:
            ctx.color = True
        try:
            with display(None if wide else 0, color):
                return super().invoke(ctx)
        except BreakevenError as e:
            raise CommandLineError(e.render(lambda name: spelled(self, name))) from None


SECTIONS = (
    ("Start here", ("demo",)),
    ("Answer (does speculation pay here?)", ("compare", "predict", "check")),
    ("Measure", ("sweep", "bench", "ingest", "fleet")),
    ("Analyse costs", ("fit", "optimize", "batch", "moe")),
    ("Plan a deployment", ("schedule",)),
    ("Draw and report", ("plot", "report")),
)
"""The top level's commands, grouped by the job they do, in the order a user meets them."""

EXAMPLES = (
    "breakeven demo --plan",
    "breakeven predict --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1 -k 6",
    "breakeven compare baseline.log eagle3.log -k 3",
    "breakeven sweep --serve 'vllm serve M --port {port}' --engine vllm \\\n"
    "      --spec-method eagle3 --draft D -k 0,2,4 --concurrency 1,8 --repeats 3 --plan",
    "breakeven bench --url http://localhost:8000/v1 --label baseline --out runs.csv",
    "breakeven fit runs.csv --out fit.json",
    "breakeven schedule --fit-file fit.json --engine vllm",
    "breakeven plot surface --baseline-tok-s 62.9 --verify-ms 28.7 --out surface.png",
)
"""One example for each job, shown after the commands."""


INTERNAL_ERROR = 3
"""The exit code of an internal error (a bug): never 1, which ``compare --fail-if`` reserves
for its condition, nor 2, bad input."""
DEBUG_VARIABLE = "BREAKEVEN_DEBUG"
"""Set (to anything), an internal error raises with its traceback."""


SECRET_FLAGS = ("--api-key-env", "--token-env")
"""Flags that name an environment variable holding a secret: an internal error's message is
masked of their values too."""


def internal_error_line(e: BaseException, args: Sequence[str] = ()) -> str:
    """One line for an internal error: its kind, its message (printable, at most 200
    characters) and what to do.  The message is masked before it is cut: URL passwords, and
    the secrets of the variables ``args`` name with :data:`SECRET_FLAGS`."""
    from breakeven.core.credentials import Redactor  # lazy: start-up
    from breakeven.render import printable  # lazy: start-up

    named = [b for a, b in itertools.pairwise(args) if a in SECRET_FLAGS]
    named += [
        value
        for name, eq, value in map(lambda a: a.partition("="), args)
        if eq and name in SECRET_FLAGS
    ]
    redact = Redactor(*(os.environ.get(v, "").strip() for v in named))
    message = printable(redact(str(e)))  # masked, then cut
    message = message[:200] + ("..." if len(message) > 200 else "")
    return (
        f"Error: internal error ({type(e).__name__}: {message}); this is a bug in breakeven "
        f"{__version__}, not in your input: please report it to the project's issue tracker "
        f"with the command line (run it again with {DEBUG_VARIABLE}=1 for the traceback)"
    )


INTERRUPTED = 130
"""The exit code of Ctrl-C (128 + SIGINT, as a shell gives a process that SIGINT ends)."""
TERMINATED = 143
"""The exit code of SIGTERM (128 + SIGTERM)."""


class Stopped(Exception):
    """Ctrl-C or SIGTERM (``interrupt``: the KeyboardInterrupt, or a
    :class:`~breakeven.core.errors.Terminated`), carried out of a command past click's main,
    which would print a blank line and "Aborted!" and exit 1."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(type(interrupt).__name__)
        self.interrupt = interrupt


def settle_signals() -> None:
    """Ctrl-C and SIGTERM ignored from now on: the command has decided to exit 130 or 143,
    and a second one (pressed twice, or sent again by a supervisor) must not turn that exit
    into a death by the signal or a traceback."""
    if threading.current_thread() is threading.main_thread():
        for signum in (_signal.SIGINT, _signal.SIGTERM):
            _signal.signal(signum, _signal.SIG_IGN)


def stopped(interrupt: BaseException) -> NoReturn:
    """Exit as Ctrl-C (130) or SIGTERM (143) asks, saying which in one line on stderr."""
    settle_signals()
    if isinstance(interrupt, Terminated):
        click.echo("Terminated (SIGTERM)", err=True)
        sys.exit(TERMINATED)
    click.echo("Interrupted", err=True)
    sys.exit(INTERRUPTED)


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """While a command runs: SIGTERM raises :class:`~breakeven.core.errors.Terminated` (a
    KeyboardInterrupt, so that what cleans up after Ctrl-C cleans up after it), and Ctrl-C
    interrupts a blocking read.  The handlers that were there are put back afterwards.  The
    main thread only: elsewhere signals are not Python's to handle.

    polars installs its own SIGINT handler when it is imported, with ``SA_RESTART``
    (pola-rs/polars issue 21739): a read, or a wait on a lock, then resumes after Ctrl-C and
    never returns.  Python's handler is put back over it, when polars is imported during the
    command (:class:`_AfterImport`) or was before it; a polars computation then stops at
    Ctrl-C when it returns to Python, instead of inside it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = _signal.signal(_signal.SIGTERM, _terminate)
    finder = _PythonSigint()
    sys.meta_path.insert(0, finder)
    finder.restore()
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        _signal.signal(_signal.SIGTERM, previous)


class _PythonSigint:
    """A meta path finder that finds no module of its own: polars, when it is imported, is
    loaded by its own loader, then Python's SIGINT handler is put back over the one polars
    installed (:func:`interrupts`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "polars":
            return None
        for finder in sys.meta_path:  # the finders after this one find polars as ever
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if finder is not self and find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _AfterImport(spec.loader, self.restore)
                return spec
        return None

    @staticmethod
    def restore() -> None:
        """Python's SIGINT handler, put back where polars has replaced it."""
        if "polars" in sys.modules:
            _signal.signal(_signal.SIGINT, _signal.getsignal(_signal.SIGINT))


class _AfterImport:
    """A module's loader, that calls ``then`` once the module is executed."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # resources, source: the loader's own
        return getattr(self.loader, name)


class Group(click.Group):
    """A group of :class:`Command`; its usage errors are one line, ``Error: ...``, exit 2.
    Called with no arguments, it prints its help and exits 0."""

    command_class = Command

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", True)
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:  # past click's main, which makes it "Aborted!", exit 1
            raise Stopped(e) from None

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Like click's, but every usage error is one line: ``Error: ...``, exit code 2;
        Ctrl-C is one line, ``Interrupted``, exit 130, and SIGTERM ``Terminated (SIGTERM)``,
        exit 143 (never click's "Aborted!" and exit 1, which ``compare --fail-if`` gives its
        condition)."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        with interrupts():
            self._main(*args, **kwargs)

    def _main(self, *args: Any, **kwargs: Any) -> None:
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except Stopped as e:
            stopped(e.interrupt)
        except click.ClickException as e:
            from breakeven.render import printable  # lazy: start-up

            # One line whatever a message quotes (a name with a line break, an escape).
            message = printable(e.format_message())
            if isinstance(e, click.UsageError) and e.ctx is not None:
                message += f" (see '{e.ctx.command_path} --help')"
            click.echo(f"Error: {message}", err=True)
            sys.exit(e.exit_code)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):  # Ctrl-C while click parsed
                stopped(e.__cause__)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except Exception as e:  # a bug: one line, exit 3, never a traceback ending in 1
            if os.environ.get(DEBUG_VARIABLE):
                raise
            given = kwargs.get("args", args[0] if args else None)
            given = sys.argv[1:] if given is None else [str(a) for a in given]
            try:
                line = internal_error_line(e, given)
            except Exception:  # the line itself must never fail: its kind alone, then
                line = f"Error: internal error ({type(e).__name__}); this is a bug in breakeven"
            click.echo(line, err=True)
            sys.exit(INTERNAL_ERROR)
        sys.exit(rv if isinstance(rv, int) else 0)


class TopGroup(Group):
    """The ``breakeven`` group: its commands listed by job (:data:`SECTIONS`), each with its
    whole first sentence, then :data:`EXAMPLES`."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed: set[str] = set()
        pad = max(len(name) for name in self.list_commands(ctx))
        for title, names in SECTIONS:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                listed.add(name)
                rows.append((name.ljust(pad), command.get_short_help_str(limit=300)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        others = [
            (name.ljust(pad), command.get_short_help_str(limit=300))
            for name in self.list_commands(ctx)
            if name not in listed
            and (command := self.get_command(ctx, name)) is not None
            and not command.hidden
        ]
        if others:
            with formatter.section("Other commands"):
                formatter.write_dl(others)
        with formatter.section("Examples"):
            for example in EXAMPLES:  # whole: a command is copied, not read as prose
                for line in example.splitlines():
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")


@click.group(
    cls=TopGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="breakeven")
def cli() -> None:
    """Does speculative decoding pay off here, by how much, and up to what load?

    Rates are per sequence (tok/s of one request's decode), times are in ms,
    and accept_len counts the bonus token: a cycle of k drafted tokens emits
    1 to k + 1 tokens.
    """


def command_paths(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command's path below ``group``, depth first in the listed order, a group's own
    before its subcommands': ``("fit",)``, ``("plot",)``, ``("plot", "k")``, ...  Hidden
    commands are left out."""
    for name, command in group.commands.items():
        if command.hidden:
            continue
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from command_paths(command, (*path, name))
