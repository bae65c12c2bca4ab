"""The ``breakeven`` command line: thin click commands that parse, call one function and print.

Start-up matters (``breakeven predict`` runs in shell loops), so this module
imports only click and breakeven's light modules; numpy, pandas, scipy and
matplotlib are imported inside the commands that need them.

Bad input never shows a traceback: it is one line, ``Error: ...``, naming the
flag, the value and what was expected, with exit code 2.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from breakeven import __version__
from breakeven.errors import BreakevenError, shorten
from breakeven.quantities import MAX_BATCH, MAX_K, MAX_SPEC_TOKENS, QUANTITIES

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
            from breakeven.formatting import printable

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


_INFINITIES = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def _number(text: str, param: click.Parameter) -> float:
    """``text`` as a float (ValueError if it is none).  A number a double cannot hold is
    refused as typed, where float() would quietly make 1e400 inf and 1e-400 zero; typed
    infinities and NaN go on to the checks that say what the flag expects."""
    value = float(text)
    typed = text.strip().lower()
    flag = "/".join(param.opts) if param.opts else param.name
    if math.isinf(value) and typed not in _INFINITIES:
        raise InputError(
            f"{flag}: got {shorten(text.strip())}, expected a number a double "
            "holds (at most about 1.8e308 in size)"
        )
    if value == 0 and any(c in "123456789" for c in typed.partition("e")[0]):
        raise InputError(
            f"{flag}: got {shorten(text.strip())}, expected 0 or a number a "
            "double holds (at least about 1e-308 in size)"
        )
    return value


class _Float(click.ParamType):
    """A float, taken as typed (see :func:`_number`)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) or param is None:
            return value
        try:
            return _number(str(value), param)
        except ValueError:
            self.fail(f"{value!r} is not a valid float.", param, ctx)


FLOAT = _Float()


class _Bounded(click.IntRange):
    """A whole number in a documented range, refused in one line naming it:
    ``--max-k: got 1000000, expected a whole number from 1 to 64``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.INT.convert(value, param, ctx)
        if param is not None and not self.min <= number <= self.max:
            raise InputError(
                f"{'/'.join(param.opts)}: got {shorten(str(number))}, expected a "
                f"whole number from {self.min} to {self.max}"
            )
        return number


def _floats(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A comma-separated list of numbers, e.g. 0.9,0.8,0.6."""
    if value is None:
        return None
    try:
        return [_number(part, param) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"got {shorten(repr(value))}, expected comma-separated numbers such as {param.metavar}"
        ) from None


def _writable(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """An --out path checked before any work: one line naming the flag if it cannot be
    written (breakeven.iotools.paths)."""
    if value is None:
        return None
    from breakeven.iotools.paths import check_output_path

    directory = isinstance(param.type, click.Path) and not param.type.file_okay
    try:
        return check_output_path(value, directory=directory)
    except BreakevenError as e:
        raise InputError(e.render(lambda name: "/".join(param.opts))) from None


_MS = "[ms]"


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


def _emit(result: Any, as_json: bool, text: str) -> None:
    """Print ``result`` as one JSON object, or the text of the formatter named ``text``.

    Output is strict JSON (and a table never shows inf): a result that overflows a double,
    which only absurd inputs make, is refused in one line naming it (exit 2).  Quantities
    that no value satisfies are null already.
    """
    data = result if isinstance(result, dict) else result.to_dict()
    bad = _not_finite(data)
    if bad is not None:
        raise InputError(
            f"{bad} overflows: these inputs give a number beyond what a double "
            "holds (about 1.8e308); expected inputs of a realistic size"
        )
    if as_json:
        click.echo(json.dumps(data, indent=2, allow_nan=False))
        return
    from breakeven import formatting

    click.echo(getattr(formatting, text)(data), nl=False)


# Options that several commands share; each command's own options are written out below it.
_json = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of a table."
)
_baseline = click.option(
    "--baseline",
    "baseline_tok_s",
    type=FLOAT,
    metavar="TOK_S",
    help="Per-sequence decode rate without speculation [tok/s].",
)
_step = click.option(
    "--step-ms",
    "step_ms",
    type=FLOAT,
    metavar="MS",
    help=f"Baseline decode step, instead of --baseline {_MS}.",
)
_overhead = click.option(
    "--overhead-ms",
    "overhead_ms",
    type=FLOAT,
    metavar="MS",
    help=f"Other per-cycle cost: sampling, scheduling (default 0) {_MS}.",
)
_draft_step = click.option(
    "--draft-step-ms",
    "draft_step_ms",
    type=FLOAT,
    metavar="MS",
    help=f"One draft step; drafting costs k of them per cycle {_MS}.",
)
_k = click.option(
    "-k",
    "--draft-tokens",
    "--steps",
    "k",
    type=int,
    metavar="K",
    help="Draft tokens per cycle (a tree's steps).",
)
_accept_len = click.option(
    "--accept-len",
    "accept_len",
    type=FLOAT,
    metavar="TAU",
    help="Mean tokens emitted per cycle, bonus token included [tokens/cycle].",
)
_alpha = click.option(
    "--alpha", "alpha", type=FLOAT, metavar="A", help="Per-token acceptance probability (i.i.d.)."
)
_per_position = click.option(
    "--per-position",
    "per_position",
    callback=_floats,
    metavar="0.9,0.8,0.6",
    help="Per-position acceptance rates (vLLM prints them); tau(k) = 1 + a_1 + ... + a_k.",
)


def _accept_lens(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``2.36,2.79,3.08`` (k = 1, 2, 3, ...) or ``2:1.64,3:1.72,5:1.80`` (the k measured)."""
    if value is None or ":" not in value:
        return _floats(ctx, param, value)
    out: dict[int, float] = {}
    for part in (p for p in value.split(",") if p.strip()):
        k_text, sep, tau_text = part.partition(":")
        try:
            k = int(k_text)
            out[k] = _number(tau_text, param)
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


_accept_len_by_k = click.option(
    "--accept-len-by-k",
    "accept_len_by_k",
    callback=_accept_lens,
    metavar="2.36,2.79,3.08",
    help="Measured mean acceptance length [tokens/cycle] for "
    "k = 1, 2, 3, ..., or for the k given as K:TAU "
    "(2:1.64,3:1.72,5:1.80).",
)
_max_k = click.option(
    "--max-k",
    "k_max",
    type=_Bounded(1, MAX_K),
    default=16,
    show_default=True,
    help=f"Largest k considered (1 to {MAX_K}).",
)
_fit = click.option(
    "--fit",
    type=click.Choice(["linear", "knee"]),
    default=None,
    help="Fit the curve (scipy least squares) and extrapolate beyond it: "
    "linear a + b*n, or the roofline knee max(a, b*n) + c. Without it, "
    "the curve's points are interpolated.",
)


def _options(*decorators: Any) -> Any:
    """Several click options as one decorator, in the order given."""

    def apply(f: Any) -> Any:
        for decorator in reversed(decorators):
            f = decorator(f)
        return f

    return apply


# The inputs of predict (and of plot surface, which draws from them).
_predict_inputs = _options(
    _baseline,
    _step,
    click.option(
        "--verify-ms",
        "verify_ms",
        type=FLOAT,
        metavar="MS",
        help=f"One target forward over k + 1 tokens {_MS}.",
    ),
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"All drafting in one cycle, not per token (default 0) {_MS}.",
    ),
    _overhead,
    click.option(
        "--cycle-ms",
        "cycle_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Measured cycle time, instead of the three costs above {_MS}.",
    ),
    _accept_len,
    _alpha,
    _k,
    _per_position,
    click.option(
        "--cost-ratio",
        "cost_ratio",
        type=FLOAT,
        metavar="C",
        help="Leviathan's c: draft step / target step, verify = one target step; needs -k.",
    ),
)

# The inputs of optimize (and of plot k).
_optimize_inputs = _options(
    _alpha,
    _per_position,
    _accept_len_by_k,
    click.option(
        "--cost-ratio",
        "cost_ratio",
        type=FLOAT,
        metavar="C",
        help="Leviathan's c: draft step / target step, verify = one target step.",
    ),
    _baseline,
    _step,
    click.option(
        "--verify-ms",
        "verify_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Verify forward, the same at every k {_MS}.",
    ),
    click.option(
        "--verify-curve",
        "verify_curve",
        type=click.Path(dir_okay=False),
        metavar="CSV",
        help="Forward time against tokens per forward: columns "
        "tokens,ms. Its time at `batch` tokens is the step unless a baseline is given.",
    ),
    _fit,
    _draft_step,
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Drafting per cycle that does not grow with k {_MS}.",
    ),
    _overhead,
    click.option(
        "--batch",
        "batch",
        type=int,
        default=1,
        show_default=True,
        help="Sequences decoded together (with --verify-curve).",
    ),
    _max_k,
)

# The inputs of batch (and of plot batch).
_batch_inputs = _options(
    click.option(
        "--cost-curve",
        "cost_curve",
        type=click.Path(dir_okay=False),
        metavar="CSV",
        help="Forward time against total tokens per forward "
        "(batch x tokens per sequence): columns tokens,ms.",
    ),
    click.option(
        "--fit-file",
        "fit_file",
        type=click.Path(dir_okay=False),
        metavar="FIT.json",
        help="Instead of --cost-curve: the forward surface t(B, q) and the draft's "
        "cost that breakeven fit --out fitted across batch sizes.",
    ),
    click.option(
        "--fit-surface",
        "fit_surface",
        type=_Bounded(1, 10**6),
        metavar="N",
        help="Which surface of --fit-file (1 = the first), when it holds several.",
    ),
    _fit,
    _accept_len,
    _k,
    _alpha,
    _per_position,
    _accept_len_by_k,
    _max_k,
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Drafting per cycle, the same at every batch {_MS}.",
    ),
    _draft_step,
    _overhead,
    click.option(
        "--topk",
        "topk",
        type=_Bounded(1, MAX_SPEC_TOKENS),
        default=1,
        show_default=True,
        metavar="T",
        help="A tree draft at the one operating "
        "point: branches per draft step (-k is then its steps, accept_len <= k + 1).",
    ),
    click.option(
        "--verify-tokens",
        "verify_tokens",
        type=_Bounded(1, MAX_SPEC_TOKENS),
        metavar="N",
        help="Tokens per sequence in the verify forward (a tree's "
        "num_draft_tokens; default k + 1).",
    ),
    click.option(
        "--max-batch",
        "max_batch",
        type=_Bounded(1, MAX_BATCH),
        metavar="N",
        help=f"Largest batch to sweep, 1 to {MAX_BATCH} (default: the largest the "
        "curve covers; 256 with --fit).",
    ),
)


def _read_curve(path: str | None, fit: str | None, flag: str) -> Any:
    """The cost model a --*-curve file describes, fitted with --fit if asked."""
    if path is None:
        if fit is not None:
            raise InputError(f"--fit needs {flag}: there is no curve to fit")
        return None
    from breakeven.costs import TableCost
    from breakeven.iotools import read_cost_curve

    data, meta = read_cost_curve(path)
    table = TableCost(tuple(data["tokens"]), tuple(data["ms"]), source=meta["path"])
    return table if fit is None else table.fit(fit)


_PREDICT_KEYS = [
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


_fit_file = _options(
    click.option(
        "--fit-file",
        "fit_file",
        type=click.Path(dir_okay=False),
        metavar="FIT.json",
        help="The cycle's costs from breakeven fit --out, instead of --verify-ms, "
        "--draft-ms and --overhead-ms; its step and alpha unless given.",
    ),
    click.option(
        "--fit-group",
        "fit_group",
        type=_Bounded(1, 10**6),
        metavar="N",
        help="Which group of --fit-file (1 = the first), when it holds several.",
    ),
)


def _with_fit(
    inputs: dict[str, Any], fit_file: str | None, fit_group: int | None, form: str
) -> dict[str, Any]:
    """``inputs`` with a fit file's costs (and its step and alpha where none is given)."""
    if fit_file is None:
        if fit_group is not None:
            raise InputError("--fit-group needs --fit-file")
        return inputs
    from breakeven.fit import fitted_costs
    from breakeven.iotools.fitfile import read_fit

    clash = [
        n
        for n in (
            "verify_ms",
            "verify_curve",
            "draft_ms",
            "draft_step_ms",
            "overhead_ms",
            "cycle_ms",
            "cost_ratio",
        )
        if inputs.get(n) is not None
    ]
    if clash:
        raise BreakevenError(
            "{0} and {1} cannot be given together: the fit holds the cycle's costs",
            "fit_file",
            clash[0],
        )
    group = read_fit(fit_file, fit_group)
    out = dict(inputs)
    out.update(fitted_costs(group, form, inputs.get("k")))
    if inputs.get("baseline_tok_s") is None and inputs.get("step_ms") is None:
        out["step_ms"] = group.get("step_ms")
    acceptance = ("accept_len", "alpha", "per_position", "accept_len_by_k")
    if all(inputs.get(n) is None for n in acceptance) and group.get("alpha") is not None:
        out["alpha"] = group["alpha"]
    return out


@cli.command(epilog=_definitions(_PREDICT_KEYS))
@_predict_inputs
@_fit_file
@click.option(
    "--target",
    "target_speedup",
    type=FLOAT,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Speedup the break-even solves aim for [x].",
)
@_json
def predict(as_json: bool, fit_file: str | None, fit_group: int | None, **inputs: Any) -> None:
    """Speedup and break-even thresholds from measured costs and acceptance.

    Prints every quantity its inputs determine. Example (the case study):

    \b
      breakeven predict --baseline 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1
    """
    from breakeven.predict import predict as run_predict

    inputs = _with_fit(inputs, fit_file, fit_group, "predict")
    _emit(run_predict(**inputs), as_json, "prediction_text")


_tree_options = _options(
    click.option(
        "--tree",
        "tree",
        is_flag=True,
        help="Search tree drafts (SGLang's "
        "--speculative-num-steps, --speculative-eagle-topk, "
        "--speculative-num-draft-tokens) instead of k: with --fit-file (a forward "
        "surface and a tree acceptance), or --verify-curve and --alpha.",
    ),
    click.option(
        "--rank-decay",
        "rank_decay",
        type=FLOAT,
        metavar="R",
        help="With --tree and --alpha: each further candidate's chance of being the "
        "target's token over the one before (default 1 - alpha, independent).",
    ),
    click.option(
        "--max-steps",
        "max_steps",
        type=_Bounded(1, 64),
        default=8,
        show_default=True,
        metavar="S",
        help="With --tree: the most draft steps searched.",
    ),
    click.option(
        "--max-topk",
        "max_topk",
        type=_Bounded(1, 64),
        default=8,
        show_default=True,
        metavar="T",
        help="With --tree: the most branches per step searched.",
    ),
    click.option(
        "--max-verify-tokens",
        "max_verify_tokens",
        type=_Bounded(2, 4096),
        default=64,
        show_default=True,
        metavar="N",
        help="With --tree: the most tokens per sequence in the verify forward.",
    ),
)


def _optimize_tree(
    inputs: dict[str, Any],
    tree: dict[str, Any],
    verify_curve: str | None,
    fit: str | None,
    fit_file: str | None,
    fit_group: int | None,
) -> Any:
    """``optimize --tree``: the search over (steps, topk, verify tokens)."""
    from breakeven.optimize import optimize_tree

    clash = [
        n
        for n in ("per_position", "accept_len_by_k", "cost_ratio", "verify_ms")
        if inputs.get(n) is not None
    ]
    if clash:
        raise BreakevenError(
            "{0} cannot be given with {1}: a tree's acceptance is alpha and "
            "rank_decay, its verify grows with the tokens verified",
            clash[0],
            "tree",
        )
    acceptance = surface = None
    if fit_file is not None:
        if verify_curve is not None:
            raise BreakevenError(
                "{0} and {1} cannot be given together: the fit holds the cycle's costs",
                "fit_file",
                "verify_curve",
            )
        from breakeven.iotools.fitfile import read_surface, read_tree

        if inputs.get("alpha") is None and tree["rank_decay"] is None:
            acceptance = read_tree(fit_file, fit_group)
        surface = read_surface(
            fit_file, fit_group if acceptance is None else None, like=acceptance, flag="fit_group"
        )
    elif fit_group is not None:
        raise InputError("--fit-group needs --fit-file")
    curve = _read_curve(verify_curve, fit, "--verify-curve")
    return optimize_tree(
        acceptance=acceptance,
        alpha=inputs.get("alpha"),
        rank_decay=tree["rank_decay"],
        surface=surface,
        verify_curve=curve,
        baseline_tok_s=inputs.get("baseline_tok_s"),
        step_ms=inputs.get("step_ms"),
        draft_ms=inputs.get("draft_ms"),
        draft_step_ms=inputs.get("draft_step_ms"),
        overhead_ms=inputs.get("overhead_ms"),
        batch=inputs.get("batch", 1),
        max_steps=tree["max_steps"],
        max_topk=tree["max_topk"],
        max_verify_tokens=tree["max_verify_tokens"],
    )


@cli.command(epilog=_definitions(["best_k", "speedup", "by_k", "step_ms", "batch"]))
@_optimize_inputs
@_fit_file
@_tree_options
@_json
def optimize(
    as_json: bool,
    verify_curve: str | None,
    fit: str | None,
    fit_file: str | None,
    fit_group: int | None,
    tree: bool,
    rank_decay: float | None,
    max_steps: int,
    max_topk: int,
    max_verify_tokens: int,
    **inputs: Any,
) -> None:
    """The number of draft tokens k with the highest speedup.

    Either Leviathan's form (--alpha A --cost-ratio C) or measured costs (a
    baseline, --verify-ms or --verify-curve, drafting, overhead) with acceptance
    as --alpha, --per-position or --accept-len-by-k. best_k = 0 means: do not
    speculate, no k beats plain decoding.

    \b
      breakeven optimize --alpha 0.8 --cost-ratio 0.05
      breakeven optimize --baseline 62.9 --verify-ms 28.7 --draft-step-ms 0.2 \\
          --accept-len-by-k 1.6,1.9,2.05,2.1
    """
    from breakeven.optimize import optimize as run_optimize

    tree_inputs = {
        "rank_decay": rank_decay,
        "max_steps": max_steps,
        "max_topk": max_topk,
        "max_verify_tokens": max_verify_tokens,
    }
    if tree:
        result = _optimize_tree(inputs, tree_inputs, verify_curve, fit, fit_file, fit_group)
        _emit(result.to_dict(), as_json, "tree_search_text")
        return
    if rank_decay is not None:
        raise InputError("--rank-decay needs --tree: it is the acceptance of a tree's branches")
    inputs = _with_fit({**inputs, "verify_curve": verify_curve}, fit_file, fit_group, "optimize")
    curve = _read_curve(inputs.pop("verify_curve"), fit, "--verify-curve")
    _emit(run_optimize(verify_curve=curve, **inputs), as_json, "optimize_text")


_BATCH_KEYS = ["speedup_by_batch", "breakeven_batch", "max_batch", "best_k_by_batch"]


@cli.command(epilog=_definitions(_BATCH_KEYS))
@_batch_inputs
@_json
def batch(as_json: bool, cost_curve: str | None, fit: str | None, **inputs: Any) -> None:
    """Speedup against batch size, and the batch where speculation stops paying.

    At batch B: speedup = accept_len * t(B) / (t(B * (k + 1)) + drafting + overhead),
    with t the --cost-curve; or, with --fit-file, accept_len * t(B, 1) / (t(B, k + 1)
    + draft(B, k) + overhead) on the surface breakeven fit fitted across batch
    sizes. Give -k with --accept-len, or acceptance at several k (--alpha,
    --per-position, --accept-len-by-k) for the best k at every batch.

    \b
      breakeven batch --cost-curve data/llama3_8b_decode_curve.csv --accept-len 2.1 -k 3
    """
    from breakeven.optimize import batch_sweep

    curve, inputs = _batch_curve(cost_curve, fit, inputs)
    _emit(batch_sweep(curve, **inputs), as_json, "batch_text")


def _batch_curve(
    cost_curve: str | None, fit: str | None, inputs: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The cost model batch sweeps: a --cost-curve (t of total tokens), or a fitted surface
    t(B, q) from --fit-file, whose draft cost is used unless drafting is given."""
    inputs = dict(inputs)
    fit_file, index = inputs.pop("fit_file", None), inputs.pop("fit_surface", None)
    if fit_file is None:
        if index is not None:
            raise InputError("--fit-surface needs --fit-file")
        if cost_curve is None:
            raise InputError("give --cost-curve CSV, or --fit-file FIT.json (breakeven fit --out)")
        return _read_curve(cost_curve, fit, "--cost-curve"), inputs
    if cost_curve is not None or fit is not None:
        raise InputError("--fit-file and --cost-curve (or --fit) cannot be given together")
    from breakeven.iotools.fitfile import read_surface
    from breakeven.surface import SurfaceCost

    curve = SurfaceCost(read_surface(fit_file, index))
    if inputs.get("draft_ms") is None and inputs.get("draft_step_ms") is None:
        inputs["draft"] = curve.draft
    return curve, inputs


def _sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``1,2,4,8,16``: whole batch sizes >= 1, as a sorted tuple."""
    if value is None:
        return None
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 1 <= int(part) <= MAX_BATCH:
            raise InputError(
                f"{'/'.join(param.opts)}: got {shorten(repr(part))}, expected "
                f"batch sizes from 1 to {MAX_BATCH} such as 1,2,4,8,16"
            )
        out.append(int(part))
    if not out:
        raise InputError(f"{'/'.join(param.opts)}: got no batch size, expected such as 1,2,4,8")
    return tuple(sorted(set(out)))


def _json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A JSON object given on the command line."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError) as e:
        raise InputError(
            f"{'/'.join(param.opts)}: is not JSON ({shorten(str(e))}); expected "
            'an object such as \'{"method": "eagle3"}\''
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{'/'.join(param.opts)}: got {shorten(value)}, expected a JSON object")
    return data


_SCHEDULE_KEYS = ["schedule", "best_fixed_k", "gain", "merge_loss", "breakeven_batch"]


@cli.command(epilog=_definitions(_SCHEDULE_KEYS))
@_batch_inputs
@click.option(
    "--engine",
    "engine",
    type=click.Choice(["vllm", "sglang", "vllm-legacy"]),
    required=True,
    help="vllm: Dynamic SD's num_speculative_tokens_per_batch_size; "
    "sglang: --speculative-adaptive-config; vllm-legacy: disable_by_batch_size.",
)
@click.option(
    "--min-gain",
    "min_gain",
    type=FLOAT,
    default=0.02,
    show_default=True,
    metavar="F",
    help="Merge neighbouring ranges while a merge gives up less than "
    "this share of their throughput [fraction]; 0 keeps every change of k.",
)
@click.option(
    "--load",
    "load",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Time at each batch size: a batch,share CSV, or a server log or "
    "measurements CSV (its running requests). Default: every batch swept alike.",
)
@click.option(
    "--max-num-seqs",
    "max_num_seqs",
    type=_Bounded(1, MAX_BATCH),
    metavar="N",
    help="The server's max_num_seqs: where vLLM's last range ends (default: the "
    "largest batch swept).",
)
@click.option(
    "--cuda-graph-sizes",
    "graph_sizes",
    callback=_sizes,
    metavar="1,2,4,8",
    help="The server's CUDA-graph batch sizes (SGLang's --cuda-graph-bs): SGLang "
    "rounds a batch up to one of them, so the ranges are made of whole buckets.",
)
@click.option(
    "--method",
    "method",
    metavar="M",
    help="The speculative method for the config (eagle3, mtp, ...; SGLang: EAGLE or EAGLE3).",
)
@click.option(
    "--base-config",
    "base_config",
    callback=_json_object,
    metavar="JSON",
    help="The speculative config the server runs (its method, draft model): the "
    "schedule's keys join it.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    callback=_writable,
    help="Also write the engine's config as JSON (SGLang: the --speculative-adaptive-config file).",
)
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@_json
def schedule(
    as_json: bool,
    cost_curve: str | None,
    fit: str | None,
    engine: str,
    min_gain: float,
    load: str | None,
    max_num_seqs: int | None,
    graph_sizes: tuple[int, ...] | None,
    method: str | None,
    base_config: dict[str, Any] | None,
    out: str | None,
    force: bool,
    **inputs: Any,
) -> None:
    """The engine config that turns speculation up, down and off with load.

    From batch's inputs (a --cost-curve or a --fit-file surface, acceptance at
    several k, drafting), the best k at every batch size; neighbouring ranges
    merged while a merge costs less than --min-gain of their throughput;
    the gain over the best fixed k, weighted by the time at each batch
    (--load); and the configuration to paste, following the engine's rules.

    \b
      breakeven schedule --cost-curve data/llama3_8b_decode_curve.csv \\
          --accept-len-by-k 2:2.36,3:2.79,4:3.08 --draft-step-ms 0.98 --engine vllm
    """
    from breakeven.schedule import schedule_report

    if out is not None:
        from breakeven.iotools.atomic import refuse_overwrite

        refuse_overwrite(out, force)
    curve, inputs, acceptance_note = _schedule_inputs(cost_curve, fit, inputs)
    profile, source = (None, "uniform")
    if load is not None:
        from breakeven.iotools.load import read_load

        profile, meta = read_load(load)
        source = f"{meta['path']} ({meta['shape']})"
    data = schedule_report(
        curve,
        engine=engine,
        min_gain=min_gain,
        load=profile,
        load_source=source,
        graph_sizes=graph_sizes,
        method=method,
        base_config=base_config,
        max_num_seqs=max_num_seqs,
        config_path=out,
        **inputs,
    )
    if acceptance_note:
        data["notes"].insert(0, acceptance_note)
    if out is not None and data["config"] is not None:
        from breakeven.iotools.atomic import write_text
        from breakeven.iotools.paths import output_error

        try:
            write_text(
                out, lambda f: f.write(json.dumps(data["config"], indent=2) + "\n"), force=force
            )
        except OSError as e:
            raise output_error("out", out, e) from None
        click.echo(f"Wrote {out}.", err=True)
    _emit(data, as_json, "schedule_text")


def _schedule_inputs(
    cost_curve: str | None, fit: str | None, inputs: dict[str, Any]
) -> tuple[Any, dict[str, Any], str]:
    """batch's cost model, and acceptance from the fit file where none is given."""
    fit_file = inputs.get("fit_file")
    curve, inputs = _batch_curve(cost_curve, fit, inputs)
    acceptance = ("accept_len", "alpha", "per_position", "accept_len_by_k")
    note = ""
    if fit_file is not None and all(inputs.get(n) is None for n in acceptance):
        from breakeven.iotools.fitfile import fitted_alpha

        inputs["alpha"], where = fitted_alpha(fit_file, curve.surface)
        note = f"acceptance: alpha {inputs['alpha']:.4f} ({where}), positions i.i.d."
    return curve, inputs, note


@cli.command()
@click.option(
    "--prometheus",
    "prometheus",
    required=True,
    metavar="URL",
    help="The Prometheus server that keeps the engines' metrics: http://host:9090.",
)
@click.option("--start", "start", metavar="T", help="Start: Unix seconds or RFC 3339 (with --end).")
@click.option("--end", "end", metavar="T", help="End (default now).")
@click.option(
    "--since",
    "since",
    metavar="DURATION",
    help="Instead of --start: this long before --end, e.g. 6h (default 1h).",
)
@click.option(
    "--step",
    "step",
    default="60s",
    show_default=True,
    metavar="DURATION",
    help="Resolution of the range queries.",
)
@click.option(
    "--window",
    "window",
    metavar="DURATION",
    help="rate() window (default: twice the step, at least 1m).",
)
@click.option(
    "--match",
    "match",
    default="",
    metavar="'{job=\"vllm\"}'",
    help="A label matcher every series is selected with.",
)
@click.option(
    "--fit-file",
    "fit_file",
    type=click.Path(dir_okay=False),
    metavar="FIT.json",
    help="A forward surface from breakeven fit: predicted speedup at the load each "
    "server saw, its break-even batch and the time above it.",
)
@click.option(
    "--fit-surface",
    "fit_surface",
    type=_Bounded(1, 10**6),
    metavar="N",
    help="Which surface of --fit-file (1 = the first), when it holds several.",
)
@click.option(
    "--tolerance",
    type=FLOAT,
    default=0.1,
    show_default=True,
    metavar="F",
    help="acceptance_drop: accept_len fell by more than this fraction.",
)
@click.option(
    "--max-share-above",
    "max_share_above",
    type=FLOAT,
    default=0.1,
    show_default=True,
    metavar="F",
    help="above_breakeven: more than this share of the time above the break-even batch.",
)
@click.option(
    "--token-env",
    "token_env",
    metavar="VAR",
    help="Environment variable holding a bearer token (never printed or written).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    callback=_writable,
    help="Also write every server's steps as a measurements CSV.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    callback=_writable,
    help="Also write DIR/report.html: the servers, their flags, "
    "accept_len over time and the time above break-even.",
)
@click.option("--force", is_flag=True, help="Replace --out and DIR/report.html if they exist.")
@_json
def fleet(
    as_json: bool,
    prometheus: str,
    start: str | None,
    end: str | None,
    since: str | None,
    step: str,
    window: str | None,
    match: str,
    fit_file: str | None,
    fit_surface: int | None,
    tolerance: float,
    max_share_above: float,
    token_env: str | None,
    out: str | None,
    report_dir: str | None,
    force: bool,
) -> None:
    """Is speculation paying across many servers? Read from Prometheus.

    For every vLLM, SGLang and llama.cpp server whose metrics Prometheus keeps:
    accept_len (1 + rate(accepted) / rate(drafts), bonus token included),
    per-sequence and aggregate decode rates and running requests, over time;
    with --fit-file also the predicted speedup at the load it saw and the time
    above its break-even batch. One line per server, worst first; flags
    acceptance_drop and above_breakeven.

    \b
      breakeven fleet --prometheus http://prom:9090 --since 6h --match '{job="vllm"}'
    """
    import os

    from breakeven.fleet import check_match
    from breakeven.fleet_client import PrometheusAPI, parse_duration, read_fleet, time_range

    step_s = parse_duration(step, "step")
    first, last = time_range(start, end, since, step_s)
    rate_window = window or f"{max(60, int(2 * step_s))}s"
    parse_duration(rate_window, "window")
    matcher = check_match(match)
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise InputError(f"--token-env: the variable {shorten(token_env)} is not set")
        token = token.strip()
    surface = None
    if fit_file is not None:
        from breakeven.iotools.fitfile import read_surface

        surface = read_surface(fit_file, fit_surface)
    elif fit_surface is not None:
        raise InputError("--fit-surface needs --fit-file")
    if out is not None:
        from breakeven.iotools.atomic import refuse_overwrite

        refuse_overwrite(out, force)
    if report_dir is not None:
        from breakeven.report import check_report_dir

        check_report_dir(report_dir, force, "report_dir")  # before the work, not after it
    result, series = read_fleet(
        PrometheusAPI(prometheus, token),
        first,
        last,
        step_s,
        matcher,
        rate_window,
        out=out,
        force=force,
        surface=surface,
        tolerance=tolerance,
        max_share_above=max_share_above,
    )
    if out is not None:
        click.echo(f"Wrote {result['rows']} rows to {out}.", err=True)
    _emit(result, as_json, "fleet_text")
    if report_dir is not None:
        from breakeven.report import write_fleet_report

        click.echo(
            f"Wrote {write_fleet_report(result, series, report_dir, force=force)}.", err=True
        )


_MOE_KEYS = [
    "active_experts",
    "routed_experts",
    "step_active_experts",
    "forward_bytes",
    "step_bytes",
    "verify_step_ratio",
]


@cli.command(epilog=_definitions(_MOE_KEYS))
@click.option(
    "--experts",
    "experts",
    type=int,
    required=True,
    metavar="E",
    help="Routed experts per MoE layer.",
)
@click.option(
    "--top-k", "top_k", type=int, required=True, metavar="K", help="Routed experts per token."
)
@click.option(
    "--tokens",
    "tokens",
    type=FLOAT,
    required=True,
    metavar="T",
    help="Tokens in the forward, e.g. k + 1 for a verify of one sequence.",
)
@click.option(
    "--shared",
    "shared",
    type=int,
    default=0,
    show_default=True,
    metavar="S",
    help="Shared experts every token uses.",
)
@click.option(
    "--overlap",
    "overlap",
    type=FLOAT,
    default=1.0,
    show_default=True,
    metavar="F",
    help="Routing overlap correction in [0, 1]: 1 is uniform routing, lower loads "
    "fewer distinct experts.",
)
@click.option(
    "--dense-bytes",
    "dense_bytes",
    type=FLOAT,
    metavar="BYTES",
    help="Weights every forward reads: attention, embeddings (not the experts).",
)
@click.option(
    "--expert-bytes",
    "expert_bytes",
    type=FLOAT,
    metavar="BYTES",
    help="One expert's weights, across all MoE layers.",
)
@_json
def moe(as_json: bool, **inputs: Any) -> None:
    """Experts a Mixture-of-Experts forward loads, and its cost against a one-token step.

    Uniform top-K routing of T tokens over E experts loads
    N(T) = E * (1 - (1 - K/E)^T) distinct experts on average.

    \b
      breakeven moe --experts 384 --top-k 8 --shared 1 --tokens 7
    """
    from breakeven.optimize import moe_summary

    _emit(moe_summary(**inputs), as_json, "moe_text")


def _per_file(flag: str, values: tuple[Any, ...], count: int) -> list[Any]:
    """A flag given once (for every file) or once per file, in file order."""
    if not values:
        return [None] * count
    if len(values) == 1:
        return list(values) * count
    if len(values) == count:
        return list(values)
    raise InputError(
        f"{flag}: given {len(values)} times for {count} files; expected once "
        "(for every file) or once per file, in file order"
    )


def _ingest_inputs(files: tuple[str, ...], per_file: dict[str, tuple[Any, ...]]) -> list[Any]:
    """FILES (``LABEL=PATH`` names a file's run) with the flags given per file."""
    import os

    from breakeven.iotools.ingest import Input

    flags = {
        "label": "--label",
        "run_id": "--run-id",
        "model": "--model",
        "hardware": "--hardware",
        "spec_method": "--spec-method",
        "env": "--env",
        "num_spec_tokens": "-k/--num-spec-tokens/--steps",
        "spec_topk": "--topk",
        "verify_tokens": "--verify-tokens",
    }
    columns = {key: _per_file(flags[key], values, len(files)) for key, values in per_file.items()}
    inputs = []
    for i, arg in enumerate(files):
        path, label = arg, None
        name, sep, rest = arg.partition("=")
        if sep and rest and name and "/" not in name and not os.path.exists(arg):
            label, path = name, rest
        stamp = {key: columns[key][i] for key in columns if key != "num_spec_tokens"}
        if label is not None:
            stamp["label"] = label
        inputs.append(Input(path, stamp, columns["num_spec_tokens"][i]))
    return inputs


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE|LABEL=FILE|-...")
@click.option(
    "--format",
    "format",
    type=click.Choice(
        [
            "auto",
            "log",
            "bench_table",
            "vllm_bench_serve",
            "sglang_bench_serving",
            "sglang_bench_one_batch",
            "trtllm_iteration_stats",
            "prometheus",
        ]
    ),
    default="auto",
    show_default=True,
    help="Read every file as this format instead of telling it from the content.",
)
@click.option(
    "--before",
    "before",
    type=click.Path(dir_okay=False),
    metavar="SCRAPE",
    help="A /metrics scrape taken before the run: report the change since it.",
)
@click.option(
    "-k",
    "--num-spec-tokens",
    "--steps",
    "num_spec_tokens",
    type=_Bounded(0, MAX_SPEC_TOKENS),
    metavar="K",
    multiple=True,
    help="k, for formats that do not print it (SGLang Decode batch, llama.cpp, early "
    f"vLLM V1), 0 to {MAX_SPEC_TOKENS}. Once for every file, or once per file.",
)
@click.option(
    "--topk",
    "spec_topk",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    multiple=True,
    help="A tree draft's branches per step (SGLang's "
    "--speculative-eagle-topk; -k is then its steps): once, or once per file.",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="N",
    multiple=True,
    help="A tree's tokens per sequence in the verify "
    "forward (SGLang's --speculative-num-draft-tokens): once, or once per file.",
)
@click.option(
    "--label",
    multiple=True,
    help="The run's name (e.g. baseline, eagle3-k3): once for every file, or once per "
    "file. Replaces what a file says. FILE may also be given as LABEL=FILE.",
)
@click.option("--run-id", "run_id", multiple=True, help="Run id: once, or once per file.")
@click.option("--model", multiple=True, help="Target model: once, or once per file.")
@click.option(
    "--hardware",
    multiple=True,
    help="GPUs and interconnect, e.g. '8x RTX PRO 6000 PCIe': once, or once per file.",
)
@click.option(
    "--spec-method",
    "spec_method",
    multiple=True,
    help="eagle3, mtp, ngram, draft_model, ...: once, or once per file.",
)
@click.option(
    "--env",
    "env",
    metavar="'K=V K=V'",
    multiple=True,
    help="The run's environment fingerprint (NCCL_*/CUDA_* variables, server flags): "
    "once, or once per file.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    callback=_writable,
    help="Write the records as a measurements CSV (atomically).",
)
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--append",
    is_flag=True,
    help="Add the records to --out (created if missing), under a lock: concurrent "
    "ingests lose nothing and write one header.",
)
@click.option(
    "--jobs",
    "jobs",
    type=click.IntRange(min=1),
    metavar="N",
    help="Threads for reading text (default: one per CPU).",
)
@_json
def ingest(
    files: tuple[str, ...],
    format: str,
    before: str | None,
    out: str | None,
    force: bool,
    append: bool,
    jobs: int | None,
    as_json: bool,
    **per_file: Any,
) -> None:
    """Read engine logs, benchmark results and /metrics scrapes into measurements.

    FILE may be plain or compressed (gzip, bzip2, xz; told by content), or -
    for standard input. What a file holds is told from its content: JSON
    benchmark results (vllm bench serve, SGLang bench_serving and
    bench_one_batch, TensorRT-LLM iteration statistics), Prometheus text, or
    text, scanned at once for vLLM, SGLang and llama.cpp log lines, printed
    benchmark result tables and trtllm-bench reports.
    Every acceptance figure becomes accept_len with the bonus token included.
    A line that looks like a known format but does not parse is reported with
    its line number (exit code 2); unrelated lines are ignored.

    \b
      breakeven ingest baseline=base.log eagle3=spec.log.gz -k 3 --out runs.csv
      ssh host cat server.log | breakeven ingest - --label baseline --json
      breakeven ingest after.prom --before before.prom --json
    """
    if append and (out is None or force):
        raise InputError("--append: needs --out CSV, and cannot be given with --force")
    import os

    if jobs is not None:
        os.environ["POLARS_MAX_THREADS"] = str(jobs)  # read when polars is first imported
    # polars' allocator (its own jemalloc) with one arena: the threads' freed pages are
    # reused at once, so a 1 GiB log peaks at about 230 MiB, not 280, at the same speed
    # (benchmarks/ingest_speed.py).  Read when polars loads; a user's setting is kept.
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1")
    from breakeven.iotools.ingest import Tally, iter_frames, tok_s_meanings
    from breakeven.iotools.records import csv_bytes, csv_header
    from breakeven.iotools.sources import ahead

    problems: list[Any] = []
    tally = Tally()
    inputs = _ingest_inputs(files, per_file)
    # Reading and parsing in a thread, ahead of the CSV or JSON written here: each side's
    # polars work overlaps the other's.
    frames = ahead(iter_frames(inputs, problems, format=format, before=before), depth=1)

    out_json = _JsonArray() if as_json else None

    def rows() -> Any:  # CSV rows of each frame; with --json, the frame's JSON on the way
        for frame in frames:
            tally.count(frame)
            if out_json is not None:
                out_json.write(frame)
            yield csv_bytes(frame)

    if out is not None:
        from breakeven.iotools.atomic import append_bytes, write_bytes

        if append:
            append_bytes(out, csv_header(), rows())
        else:
            write_bytes(out, [csv_header()], rows(), force=force)
        click.echo(f"{'Added' if append else 'Wrote'} {tally.records} records to {out}.", err=True)
    else:
        for frame in frames:
            tally.count(frame)
            if out_json is not None:
                out_json.write(frame)
    if out_json is not None:
        out_json.close()
    else:
        from breakeven.formatting import ingest_text

        click.echo(ingest_text(tally, tok_s_meanings()), nl=False, err=out is not None)
    for problem in problems:
        click.echo(f"Problem: {problem}", err=True)
    if problems:
        raise InputError(
            f"{len(problems)} problem(s) reading the input; each is "
            "named above with its file and line"
        )


class _JsonArray:
    """Record frames printed as one JSON array, a frame at a time (bounded memory)."""

    def __init__(self) -> None:
        self.started = False

    def write(self, frame: Any) -> None:
        if not frame.height:
            return
        body = frame.write_json()[1:-1]  # the frame's array, without its brackets
        click.echo(("," if self.started else "[") + body, nl=False)
        self.started = True

    def close(self) -> None:
        click.echo("]" if self.started else "[]")


_schedule_option = click.option(
    "--schedule",
    "schedule_file",
    type=click.Path(dir_okay=False),
    metavar="SCHEDULE.json",
    help="What breakeven schedule --json printed: each run's measured speedup against the "
    "schedule's k and predicted speedup at its batch.",
)


@cli.command(name="check")
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option(
    "--tolerance",
    type=FLOAT,
    default=0.05,
    show_default=True,
    metavar="F",
    help="Relative tolerance for baseline drift, prediction mismatch and server/client agreement.",
)
@_schedule_option
@_json
def check_command(
    measurements: str, tolerance: float, schedule_file: str | None, as_json: bool
) -> None:
    """Measured against predicted speedups, and stale or drifting baselines.

    Pairs each speculative run (num_spec_tokens > 0) with the baseline runs
    (num_spec_tokens = 0) of the same model, hardware and concurrency, and
    flags, with a stable code and a sentence: baseline_drift, baseline_missing,
    stale_baseline, prediction_mismatch, accept_len_out_of_range,
    itl_per_chunk, server_client_mismatch.

    \b
      breakeven check data/case_study.csv
    """
    from breakeven.check import check_file

    data = check_file(measurements, tolerance).to_dict()
    _emit(
        _with_schedule(data, data["comparisons"], schedule_file, tolerance), as_json, "check_text"
    )


def _with_schedule(
    data: dict[str, Any], runs: list[dict[str, Any]], schedule_file: str | None, tolerance: float
) -> dict[str, Any]:
    """``data`` with each run against a schedule's prediction at its batch (--schedule)."""
    if schedule_file is None:
        return data
    from breakeven.iotools.schedulefile import read_schedule
    from breakeven.schedule import against

    return {**data, "schedule_check": against(runs, read_schedule(schedule_file), tolerance)}


def _k_list(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...]:
    """``1-8``, ``2,3,5`` or a mix (``1-3,6``): whole numbers of draft tokens."""
    if value is None:
        return ()
    out: list[int] = []
    for part in value.split(","):
        first, sep, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last if sep else first)
        except ValueError:
            raise InputError(
                f"{'/'.join(param.opts)}: got {shorten(repr(value))}, expected k "
                "values such as 1-8 or 2,3,5"
            ) from None
        if not (1 <= low <= high <= MAX_SPEC_TOKENS):
            raise InputError(
                f"{'/'.join(param.opts)}: got {shorten(repr(value))}, expected k "
                f"from 1 to {MAX_SPEC_TOKENS}, each range low-high"
            )
        out += range(low, high + 1)
    return tuple(sorted(set(out)))


@cli.command(name="fit")
@click.argument("runs", type=click.Path(dir_okay=False), metavar="RUNS.csv")
@click.option(
    "--draft-cost",
    "draft_cost",
    type=click.Choice(["per-token", "per-cycle"]),
    default="per-token",
    show_default=True,
    help="How drafting grows with k: one draft step per token (EAGLE, draft models) "
    "or one pass per cycle (MTP or Medusa heads).",
)
@click.option(
    "--predict-k",
    "predict_k",
    callback=_k_list,
    metavar="K-K",
    help="Also predict these k (1-8, 2,3,5): accept_len from the alpha fitted to the "
    "runs, marked predicted.",
)
@click.option(
    "--experts",
    "experts",
    type=_Bounded(1, 100_000),
    metavar="E",
    help="A Mixture-of-Experts model's routed experts per layer, for the forward "
    "surface across batch sizes (with --top-k).",
)
@click.option(
    "--top-k",
    "top_k",
    type=_Bounded(1, 100_000),
    metavar="K",
    help="Routed experts per token (with --experts).",
)
@click.option(
    "--shared",
    "shared",
    type=_Bounded(0, 100_000),
    default=0,
    metavar="S",
    help="Shared experts, always active (default 0).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FIT.json",
    callback=_writable,
    help="Also write the fit as JSON (what --json prints).",
)
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@_json
def fit_command(
    runs: str,
    draft_cost: str,
    predict_k: tuple[int, ...],
    experts: int | None,
    top_k: int | None,
    shared: int,
    out: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """The cycle's costs, fitted from measured runs; the speedup of k not run.

    RUNS.csv is a measurements CSV (ingest --out, bench --out). Each speculative
    run's implied cycle, 1000 * accept_len / tok_s (tok_s, else 1000 / tpot_ms),
    is fitted as verify_base_ms + verify_per_token_ms * k + draft(k) +
    overhead_ms, every coefficient >= 0 [ms], per model, hardware, concurrency
    and drafting method; each group's baseline (k = 0) gives the step. Terms
    the runs cannot tell apart are merged, and said. held_out_speedup is each
    k predicted by the fit without its runs. Where baselines ran at two or
    more concurrencies, the forward surface t(B, q) (weights, routed experts
    with --experts/--top-k, KV per sequence, compute per token) and the
    draft's cost are fitted across them too; batch --fit-file sweeps it.

    \b
      breakeven fit runs.csv --predict-k 1-8
      breakeven fit runs.csv --out fit.json --json
    """
    from breakeven.fit import fit_file
    from breakeven.surface import MoE

    if (experts is None) != (top_k is None):
        raise InputError("--experts and --top-k go together: the model's expert routing")
    if experts is not None and top_k > experts:
        raise InputError(f"--top-k: got {top_k}, expected at most --experts ({experts})")
    if out is not None:
        from breakeven.iotools.atomic import refuse_overwrite

        refuse_overwrite(out, force)
    moe = MoE(experts, top_k, shared) if experts is not None else None
    result = fit_file(runs, draft_cost=draft_cost, predict_k=predict_k, moe=moe)
    data = result.to_dict()
    if out is not None:
        from breakeven.iotools.atomic import write_text
        from breakeven.iotools.paths import output_error

        try:
            write_text(
                out,
                lambda f: f.write(json.dumps(data, indent=2, allow_nan=False) + "\n"),
                force=force,
            )
        except OSError as e:
            raise output_error("out", out, e) from None
        click.echo(f"Wrote {out}.", err=True)
    _emit(data, as_json, "fit_text")


@cli.command(name="compare")
@click.argument("baseline", metavar="BASELINE")
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@click.option(
    "--num-spec-tokens",
    "-k",
    "--steps",
    "num_spec_tokens",
    type=_Bounded(0, MAX_SPEC_TOKENS),
    multiple=True,
    metavar="K",
    help=f"k of each SPEC (a tree's steps), 0 to {MAX_SPEC_TOKENS} (once for all, or "
    "once per SPEC in order).",
)
@click.option(
    "--topk",
    "spec_topk",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    multiple=True,
    help="A tree draft's branches per step, of each SPEC (once, or once per SPEC).",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="N",
    multiple=True,
    help="A tree's tokens per sequence in the verify "
    "forward, of each SPEC (once, or once per SPEC).",
)
@click.option(
    "--spec-method",
    "spec_method",
    multiple=True,
    help="Drafting method of each SPEC (once, or once per SPEC).",
)
@click.option(
    "--env",
    "env",
    multiple=True,
    metavar="'K=V ...'",
    help="Environment of each SPEC (once, or once per SPEC).",
)
@click.option(
    "--verify-ms",
    "verify_ms",
    type=FLOAT,
    metavar="MS",
    help="Verify forward of the speculative cycle [ms], for a prediction.",
)
@click.option(
    "--draft-ms",
    "draft_ms",
    type=FLOAT,
    metavar="MS",
    help="All drafting in the cycle [ms] (with --verify-ms).",
)
@click.option(
    "--cycle-ms",
    "cycle_ms",
    type=FLOAT,
    metavar="MS",
    help="The whole speculative cycle [ms], instead of --verify-ms and --draft-ms.",
)
@click.option(
    "--tolerance",
    type=FLOAT,
    default=0.05,
    show_default=True,
    metavar="F",
    help="Relative tolerance, as for check.",
)
@click.option(
    "--fail-if",
    "fail_if",
    type=click.Choice(["slower", "not-faster", "flagged"]),
    help="Exit with code 1 when this holds: a run is slower, a run is not faster "
    "(slower, within noise or without an interval), or check flagged anything.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    callback=_writable,
    help="Also write DIR/report.html: the headline verdicts "
    "first, coloured, then the table, flags and figures (created if missing).",
)
@click.option("--force", is_flag=True, help="Replace DIR/report.html if it exists.")
@_schedule_option
@_json
def compare_command(
    baseline: str,
    specs: tuple[str, ...],
    num_spec_tokens: tuple[int, ...],
    spec_topk: tuple[int, ...],
    verify_tokens: tuple[int, ...],
    spec_method: tuple[str, ...],
    env: tuple[str, ...],
    fail_if: str | None,
    report_dir: str | None,
    force: bool,
    schedule_file: str | None,
    as_json: bool,
    **costs: Any,
) -> None:
    """Is speculation faster here, by how much, and can the answer be trusted?

    BASELINE and each SPEC are anything ingest reads (logs, plain or
    compressed; bench JSON or tables; /metrics scrapes) or a measurements CSV;
    FILE+FILE joins the files of one launch, FILE,FILE gives a run's separate
    launches (server starts), and LABEL=FILE names the run (by default: the
    file's stem). It prints a headline per run first, then the measured
    speedup with a 95% interval whose unit of repetition is the launch (one
    launch a side: batch means over its decode windows or requests, which
    leave launch-to-launch variation out, and it says so), accept_len, the
    break-even accept_len and predicted speedup for the costs given, and
    check's flags.

    Exit codes: 0; 1 when the --fail-if condition holds; 2 for bad input.

    \b
      breakeven compare baseline=base.log eagle3=spec.log -k 3 --verify-ms 28.7 --draft-ms 1.2
      breakeven compare base.json spec.json --fail-if slower --json
      breakeven compare base.log spec.log --report report/
    """
    from dataclasses import replace

    from breakeven.compare import compare, parse_run

    runs = [parse_run(s) for s in specs]
    ks = _per_file("-k/--num-spec-tokens/--steps", num_spec_tokens, len(runs))
    methods = _per_file("--spec-method", spec_method, len(runs))
    envs = _per_file("--env", env, len(runs))
    topks = _per_file("--topk", spec_topk, len(runs))
    verifies = _per_file("--verify-tokens", verify_tokens, len(runs))
    runs = [
        replace(r, num_spec_tokens=k, spec_method=m, env=e, spec_topk=t, verify_tokens=n)
        for r, k, m, e, t, n in zip(runs, ks, methods, envs, topks, verifies, strict=True)
    ]
    if report_dir is not None:
        from breakeven.report import check_report_dir, write_compare_report

        check_report_dir(report_dir, force, "report_dir")  # before the work, not after it
    result = compare(parse_run(baseline), runs, **costs)
    data = result.to_dict()
    _emit(
        _with_schedule(data, data["runs"], schedule_file, result.tolerance), as_json, "compare_text"
    )
    if report_dir is not None:
        click.echo(f"Wrote {write_compare_report(result, report_dir, force=force)}.", err=True)
    if result.failed(fail_if):
        sys.exit(1)


_out = click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    required=True,
    metavar="FILE",
    callback=_writable,
    help="Where to write the picture: .png, .svg or .pdf.",
)
_force = click.option("--force", is_flag=True, help="Replace --out if it exists.")


def _save(ax: Any, out: str, force: bool) -> None:
    from breakeven.plot import save

    save(ax, out, force=force)
    click.echo(f"Wrote {out}.", err=True)


@cli.group(cls=_Group)
def plot() -> None:
    """Draw the pictures people decide from: surfaces with the break-even line, and more.

    Every subcommand writes one PNG, SVG or PDF (by the suffix of --out) and
    never replaces a file without --force.
    """


@plot.command(name="surface")
@_predict_inputs
@click.option(
    "--alpha-k",
    "alpha_k",
    is_flag=True,
    help="Draw speedup over (alpha, k) instead of (accept_len, cycle/step).",
)
@click.option(
    "--max-k",
    "k_max",
    type=_Bounded(1, MAX_K),
    default=16,
    show_default=True,
    help=f"Largest k of the (alpha, k) surface (1 to {MAX_K}).",
)
@click.option(
    "--label",
    default="measured",
    show_default=True,
    help="Label of the point the inputs place on the surface.",
)
@click.option(
    "--point",
    "point_texts",
    multiple=True,
    metavar="LABEL:ACCEPT_LEN:CYCLE_MS",
    help="Another run to place: its accept_len [tokens/cycle] and cycle [ms], over "
    "the step of --baseline or --step-ms (repeat for several).",
)
@click.option(
    "--from",
    "from_csv",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    help="Place every speculative run of a measurements CSV, as check pairs them: "
    "at its measured speedup, at its predicted one where it has a cycle cost, and "
    "against each other baseline where the baselines drifted.",
)
@_out
@_force
def plot_surface(
    out: str,
    force: bool,
    alpha_k: bool,
    k_max: int,
    label: str,
    point_texts: tuple[str, ...],
    from_csv: str | None,
    **inputs: Any,
) -> None:
    """Speedup surface with its break-even line; the inputs' operating point marked.

    By default over (accept_len, cycle_ms / step_ms), where speculation breaks
    even on the line accept_len = cycle / step. With --alpha-k, over (alpha, k)
    for Leviathan's --cost-ratio or the inputs' cycle/step.

    \b
      breakeven plot surface --baseline 62.9 --verify-ms 28.7 --draft-ms 1.2 \\
          --accept-len 2.1 --out surface.png
    """
    from breakeven import plot as pictures

    given = {k: v for k, v in inputs.items() if v is not None}
    p = None
    if given:
        from breakeven.predict import predict as run_predict

        p = run_predict(**inputs)
    ratio = p.breakeven_accept_len / p.target_speedup if p and p.breakeven_accept_len else None
    if alpha_k:
        if p is None or (p.cost_ratio is None and ratio is None):
            raise InputError(
                "--alpha-k needs the cycle cost: --cost-ratio with -k, or a "
                "baseline and --verify-ms or --cycle-ms"
            )
        points = [(p.alpha, p.k, label)] if p.alpha is not None and p.k else []
        ax = pictures.surface_alpha_k(
            cost_ratio=p.cost_ratio,
            cycle_over_step=None if p.cost_ratio is not None else ratio,
            k_max=k_max,
            points=points,
        )
    else:
        points = [(p.accept_len, ratio, label)] if p and p.accept_len and ratio else []
        largest = pictures.LARGEST_AXIS / 1.2  # the axes reach 1.2 times the point
        for x, y, _ in points:
            if x > largest:
                raise InputError(
                    f"--accept-len: got {x!r}, too large to draw the surface to; "
                    f"expected at most {largest:g} tokens/cycle"
                )
            if y > largest:
                raise InputError(
                    f"the cycle is {y:g} baseline steps, too many to draw the "
                    f"surface to (at most {largest:g}): check the cycle's and the "
                    "baseline's flags"
                )
        step = p.step_ms if p is not None else None
        points += [_surface_point(text, step, largest) for text in point_texts]
        if from_csv is not None:
            from breakeven.check import check_file

            placed = pictures.run_points(*_rows_and_baselines(check_file(from_csv)))
            if not placed:
                raise InputError(
                    f"--from: {from_csv} has no speculative run with an accept_len "
                    "and a measured rate or a cycle cost to place"
                )
            points += placed
        ax = pictures.surface_around(points)
    _save(ax, out, force)


def _rows_and_baselines(result: Any) -> tuple[list[Any], list[Any]]:
    data = result.to_dict()
    return data["comparisons"], data["baselines"]


def _surface_point(text: str, step_ms: float | None, largest: float) -> tuple[float, float, str]:
    """``LABEL:ACCEPT_LEN:CYCLE_MS`` as a point (accept_len, cycle / step, label)."""
    parts = text.rsplit(":", 2)
    shown = shorten(repr(text))
    if len(parts) != 3:
        raise InputError(f"--point: got {shown}, expected LABEL:ACCEPT_LEN:CYCLE_MS")
    name, tau_text, cycle_text = parts
    try:
        tau, cycle = float(tau_text), float(cycle_text)
    except ValueError:
        raise InputError(
            f"--point: got {shown}, expected LABEL:ACCEPT_LEN:CYCLE_MS with numbers "
            "for ACCEPT_LEN [tokens/cycle] and CYCLE_MS [ms]"
        ) from None
    if not (1 <= tau <= largest and 0 < cycle < math.inf):
        raise InputError(
            f"--point: got {shown}, expected ACCEPT_LEN in [1, {largest:g}] "
            "tokens/cycle and CYCLE_MS a finite number > 0 ms"
        )
    if step_ms is None:
        raise InputError("--point: needs the baseline's step: give --baseline or --step-ms")
    if not cycle / step_ms <= largest:
        raise InputError(
            f"--point: got {shown}, a cycle of {cycle / step_ms:g} baseline steps, "
            f"too many to draw (at most {largest:g})"
        )
    return tau, cycle / step_ms, name


@plot.command(name="k")
@_optimize_inputs
@_out
@_force
def plot_k(out: str, force: bool, verify_curve: str | None, fit: str | None, **inputs: Any) -> None:
    """Speedup against k, the best k marked (optimize's inputs)."""
    from breakeven import plot as pictures
    from breakeven.optimize import optimize as run_optimize

    curve = _read_curve(verify_curve, fit, "--verify-curve")
    _save(pictures.speedup_vs_k(run_optimize(verify_curve=curve, **inputs)), out, force)


@plot.command(name="batch")
@_batch_inputs
@_out
@_force
def plot_batch(
    out: str, force: bool, cost_curve: str | None, fit: str | None, **inputs: Any
) -> None:
    """Speedup against batch size, the break-even batch marked (batch's inputs)."""
    from breakeven import plot as pictures
    from breakeven.optimize import batch_sweep

    curve, inputs = _batch_curve(cost_curve, fit, inputs)
    _save(pictures.speedup_vs_batch(batch_sweep(curve, **inputs)), out, force)


@plot.command(name="schedule")
@_batch_inputs
@click.option(
    "--engine",
    "engine",
    type=click.Choice(["vllm", "sglang", "vllm-legacy"]),
    default="vllm",
    show_default=True,
    help="Whose schedule to draw (as schedule).",
)
@click.option(
    "--min-gain",
    "min_gain",
    type=FLOAT,
    default=0.02,
    show_default=True,
    metavar="F",
    help="As schedule's --min-gain [fraction].",
)
@click.option(
    "--load", "load", type=click.Path(dir_okay=False), metavar="FILE", help="As schedule's --load."
)
@click.option(
    "--cuda-graph-sizes",
    "graph_sizes",
    callback=_sizes,
    metavar="1,2,4,8",
    help="As schedule's --cuda-graph-sizes.",
)
@_out
@_force
def plot_schedule(
    out: str,
    force: bool,
    cost_curve: str | None,
    fit: str | None,
    engine: str,
    min_gain: float,
    load: str | None,
    graph_sizes: tuple[int, ...] | None,
    **inputs: Any,
) -> None:
    """Speedup against batch for each k, the schedule over them and the break-even batch."""
    from breakeven import plot as pictures
    from breakeven.schedule import plan

    curve, inputs, _ = _schedule_inputs(cost_curve, fit, inputs)
    profile, source = None, "uniform"
    if load is not None:
        from breakeven.iotools.load import read_load

        profile, meta = read_load(load)
        source = meta["path"]
    grid, result = plan(
        curve,
        engine=engine,
        min_gain=min_gain,
        load=profile,
        load_source=source,
        graph_sizes=graph_sizes,
        **inputs,
    )
    _save(pictures.schedule(grid, result), out, force)


@plot.command(name="check")
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option(
    "--tolerance",
    type=FLOAT,
    default=0.05,
    show_default=True,
    metavar="F",
    help="Relative tolerance: the band drawn around measured = predicted.",
)
@_out
@_force
def plot_check(measurements: str, tolerance: float, out: str, force: bool) -> None:
    """Measured against predicted speedup, with y = x and the tolerance band (check's input)."""
    from breakeven import plot as pictures
    from breakeven.check import check_file

    try:
        ax = pictures.measured_vs_predicted(check_file(measurements, tolerance))
    except pictures.NothingToDraw as e:
        raise InputError(f"{measurements}: nothing to draw: {e}") from None
    _save(ax, out, force)


@plot.command(name="sensitivity")
@_baseline
@_step
@click.option(
    "--verify-ms",
    "verify_ms",
    type=FLOAT,
    metavar="MS",
    required=True,
    help=f"One target forward over k + 1 tokens {_MS}.",
)
@click.option(
    "--draft-ms",
    "draft_ms",
    type=FLOAT,
    default=0.0,
    metavar="MS",
    help=f"All drafting in one cycle (default 0) {_MS}.",
)
@click.option(
    "--overhead-ms",
    "overhead_ms",
    type=FLOAT,
    default=0.0,
    metavar="MS",
    help=f"Other per-cycle cost (default 0) {_MS}.",
)
@click.option(
    "--accept-len",
    "accept_len",
    type=FLOAT,
    required=True,
    metavar="TAU",
    help="Mean tokens emitted per cycle, bonus token included [tokens/cycle].",
)
@click.option(
    "--delta",
    type=FLOAT,
    default=0.10,
    show_default=True,
    metavar="F",
    help="How far each input is moved, down and up [fraction].",
)
@_out
@_force
def plot_sensitivity(
    out: str, force: bool, baseline_tok_s: float | None, step_ms: float | None, **inputs: Any
) -> None:
    """Which input, moved by ±10%, moves the speedup most (a tornado chart)."""
    from breakeven import plot as pictures
    from breakeven.model import step_ms_from_baseline
    from breakeven.sensitivity import sensitivity

    if (baseline_tok_s is None) == (step_ms is None):
        raise InputError("give one of --baseline or --step-ms")
    step = step_ms if step_ms is not None else step_ms_from_baseline(baseline_tok_s)
    _save(pictures.tornado(sensitivity(step_ms=step, **inputs)), out, force)


@cli.command()
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    required=True,
    metavar="DIR",
    callback=_writable,
    help="Directory to write report.html into (created if missing).",
)
@click.option(
    "--tolerance",
    type=FLOAT,
    default=0.05,
    show_default=True,
    metavar="F",
    help="Relative tolerance, as for check.",
)
@_force
def report(measurements: str, out: str, tolerance: float, force: bool) -> None:
    """A self-contained HTML report of a check: table, flags and figures.

    \b
      breakeven report data/case_study.csv --out report/
    """
    from breakeven.report import write_report

    path = write_report(measurements, out, tolerance=tolerance, force=force)
    click.echo(f"Wrote {path}.", err=True)


class _Values(click.Option):
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


def _levels(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(v) for v in value.replace(",", " ").split())
    except ValueError:
        raise click.BadParameter(f"got {value!r}, expected whole numbers such as 1 8 32") from None
    bad = [v for v in levels if v < 1]
    if not levels or bad:
        raise click.BadParameter(f"got {value!r}, expected request counts >= 1")
    return levels


@cli.command()
@click.option(
    "--url",
    required=True,
    metavar="URL",
    help="The server: http://host:8000, with or without a trailing /v1.",
)
@click.option("--label", required=True, help="Name of this run, e.g. baseline or eagle3-k3.")
@click.option("--model", help="Model to request (default: the first the server lists).")
@click.option(
    "--concurrency",
    cls=_Values,
    default="1",
    show_default=True,
    callback=_levels,
    metavar="N [N ...]",
    help="Concurrency levels to measure, e.g. --concurrency 1 8 32.",
)
@click.option(
    "--max-tokens",
    "max_tokens",
    type=int,
    default=512,
    show_default=True,
    help="Tokens per request (generated to the end: ignore_eos).",
)
@click.option(
    "--requests",
    type=int,
    metavar="N",
    help="Requests per level (default: 4 x concurrency, at least 8).",
)
@click.option(
    "--prompts",
    "prompts",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help='Prompts, one per line or JSON Lines with a "prompt" key.',
)
@click.option("--chat", is_flag=True, help="Use /v1/chat/completions instead of /v1/completions.")
@click.option(
    "--api-key-env",
    "api_key_env",
    metavar="VAR",
    help="Environment variable holding the API key (never printed or written).",
)
@click.option(
    "--num-spec-tokens",
    "-k",
    "--steps",
    "num_spec_tokens",
    type=int,
    metavar="K",
    help="k the server speculates with (a tree's steps); 0 for a baseline (default: "
    "from /metrics).",
)
@click.option(
    "--topk",
    "spec_topk",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    help="A tree draft's branches per step (SGLang's --speculative-eagle-topk).",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=_Bounded(1, MAX_SPEC_TOKENS),
    metavar="N",
    help="A tree's tokens per sequence in the verify forward (SGLang's "
    "--speculative-num-draft-tokens).",
)
@click.option("--spec-method", "spec_method", help="eagle3, mtp, ngram, draft_model, ...")
@click.option("--hardware", help="GPUs and interconnect, e.g. '8x RTX PRO 6000 PCIe'.")
@click.option(
    "--env",
    "env",
    metavar="'K=V ...'",
    help="More of the server's environment: flags, variables the client cannot see.",
)
@click.option(
    "--ready-timeout",
    "ready_timeout_s",
    type=float,
    default=120.0,
    show_default=True,
    metavar="S",
    help="How long the server may take to list its models: 503 (loading) or a stalled reply [s].",
)
@click.option(
    "--connect-timeout",
    "connect_timeout_s",
    type=float,
    default=5.0,
    show_default=True,
    metavar="S",
    help="How long a connection may take [s].",
)
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    metavar="S",
    help="How long a request may go without a byte from the server [s]; "
    "then it fails, and the level goes on.",
)
@click.option(
    "--request-timeout",
    "request_timeout_s",
    type=float,
    default=600.0,
    show_default=True,
    metavar="S",
    help="How long one request may take in all [s] "
    "(a server that trickles bytes); then it fails, and the level goes on.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    help="Append a row per request to this measurements CSV.",
)
@_json
def bench(
    as_json: bool,
    out: str | None,
    prompts: str | None,
    api_key_env: str | None,
    concurrency: tuple[int, ...],
    **options: Any,
) -> None:
    """Measure decode rates against any OpenAI-compatible server (vLLM, SGLang, ...).

    Run it right before changing the server, and again after: each row carries
    the environment (NCCL_*/CUDA_* variables, URL, model, server version,
    host), so check can tell a stale baseline. Per request: TTFT, decode tok/s
    with prefill excluded, TPOT, chunks and tokens per chunk. Per level:
    per-sequence and aggregate tok/s, and accept_len from /metrics.

    \b
      breakeven bench --url http://localhost:8000/v1 --label baseline \\
          --concurrency 1 8 --max-tokens 512 --out runs.csv
    """
    import os

    from breakeven.bench_client import DEFAULT_PROMPTS, Config, read_prompts, run_bench
    from breakeven.credentials import clean_api_key

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if api_key is None:
            shown = api_key_env if api_key_env.isidentifier() else shorten(repr(api_key_env))
            raise InputError(f"--api-key-env: the variable {shown} is not set")
        api_key, note = clean_api_key(api_key, api_key_env)
        if note:
            click.echo(f"Note: {note}", err=True)
    texts = read_prompts(prompts) if prompts else DEFAULT_PROMPTS
    config = Config(concurrency=concurrency, prompts=texts, api_key=api_key, **options)
    config.check()
    total = sum(config.requests_at(c) for c in concurrency)
    try:
        if sys.stderr.isatty():  # a bar on a terminal; scripts and logs get no control characters
            with click.progressbar(length=total, label="requests", file=sys.stderr) as bar:
                levels, failures, rows = run_bench(config, out, lambda level, r: bar.update(1))
        else:
            levels, failures, rows = run_bench(config, out)
    except KeyboardInterrupt as e:
        from breakeven.bench_client import Terminated

        what = "Terminated (SIGTERM)" if isinstance(e, Terminated) else "Interrupted"
        kept = f"; every completed request's row is in {out}" if out else ""
        click.echo(f"{what}{kept}.", err=True)
        sys.exit(143 if isinstance(e, Terminated) else 130)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {k: (None if isinstance(v, float) and v != v else v) for k, v in level.items()}
                    for level in levels
                ],
                indent=2,
            )
        )
    else:
        from breakeven.formatting import bench_text

        click.echo(bench_text(levels, config.label), nl=False)
    if out:
        click.echo(f"Appended {rows} rows to {out}.", err=True)
    for warning in dict.fromkeys(w for level in levels for w in level.get("warnings", ())):
        click.echo(f"Warning: {warning}.", err=True)
    for failure in failures:
        click.echo(f"Problem: {failure}", err=True)
    if failures:
        raise InputError(f"{len(failures)} request(s) failed; every completed one was recorded")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="breakeven")
