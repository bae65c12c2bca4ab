"""``breakeven plot ...`` and ``breakeven report``: pictures and HTML pages."""

from __future__ import annotations

from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import Group, cli
from breakeven.cli.params import FLOAT, Bounded, say, sizes, writable
from breakeven.core.quantities import MAX_K

out_picture = click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    required=True,
    metavar="FILE",
    callback=writable,
    help="Where to write the picture: .png, .svg or .pdf.",
)


FILE_INPUTS = ("from_csv", "verify_curve", "cost_curve", "fit_file", "load")
"""The options of the plot commands that name files they read."""


def _refuse_inputs(out: str, inputs: dict[str, Any], *read: tuple[str, str]) -> None:
    """--out refused, before the work, where it is a file the command reads: one of its
    :data:`FILE_INPUTS`, or ``read`` (an argument's metavar and path)."""
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    given = [(name, inputs.get(name)) for name in FILE_INPUTS]
    refuse_input_as_output(out, "out", [*read, *given])


def _save(ax: Any, out: str, force: bool) -> None:
    from breakeven.render.plot import save  # lazy: start-up

    save(ax, out, force=force)
    say(f"Wrote {out}.")


@cli.group(cls=Group)
def plot() -> None:
    """Draw the pictures people decide from: surfaces with the break-even line, and more.

    Every subcommand writes one PNG, SVG or PDF (by the suffix of --out) and
    never replaces a file without --force.
    """


@plot.command(name="surface", display=False)
@o.predict_inputs
@click.option(
    "--alpha-k",
    "alpha_k",
    is_flag=True,
    help="Draw speedup over (alpha, k) instead of (accept_len, cycle/step).",
)
@click.option(
    "--max-k",
    "k_max",
    type=Bounded(1, MAX_K),
    default=16,
    show_default=True,
    help=f"Largest k of the (alpha, k) surface (1 to {MAX_K}).",
)
@click.option(
    "--label",
    default="prediction",
    show_default=True,
    help="Label of the point the inputs place on the surface (a prediction from them).",
)
@click.option(
    "--point",
    "points",
    multiple=True,
    metavar="LABEL:ACCEPT_LEN:CYCLE_MS",
    help="Another run to place: its accept_len [tokens/cycle] and cycle [ms], over "
    "the step of --baseline-tok-s or --step-ms (repeat for several).",
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
@out_picture
@o.force
def plot_surface(out: str, force: bool, **inputs: Any) -> None:
    """Speedup surface with its break-even line; the inputs' operating point marked.

    By default over (accept_len, cycle_ms / step_ms), where speculation breaks
    even on the line accept_len = cycle / step. With --alpha-k, over (alpha, k)
    for Leviathan's --cost-ratio or the inputs' cycle/step.

    \b
      breakeven plot surface --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 \\
          --accept-len 2.1 --out surface.png
    """
    from breakeven.jobs.drawing import surface_figure  # lazy: start-up

    _refuse_inputs(out, inputs)
    _save(surface_figure(**inputs), out, force)


@plot.command(name="k", display=False)
@o.optimize_inputs
@out_picture
@o.force
def plot_k(out: str, force: bool, **inputs: Any) -> None:
    """Speedup against k, the best k marked (optimize's inputs).

    \b
      breakeven plot k --baseline-tok-s 62.9 --verify-ms 28.7 --draft-step-ms 0.2 \\
            --accept-len-by-k 1.6,1.9,2.05,2.1 --out k.png
    """
    from breakeven.jobs.drawing import k_figure  # lazy: start-up

    _refuse_inputs(out, inputs)
    _save(k_figure(**inputs), out, force)


@plot.command(name="batch", display=False)
@o.batch_inputs
@out_picture
@o.force
def plot_batch(out: str, force: bool, **inputs: Any) -> None:
    """Speedup against batch size, the break-even batch marked (batch's inputs).

    \b
      breakeven plot batch --cost-curve data/llama3_8b_decode_curve.csv --alpha 0.7 \\
            --max-k 8 --out batch.png
    """
    from breakeven.jobs.drawing import batch_figure  # lazy: start-up

    _refuse_inputs(out, inputs)
    _save(batch_figure(**inputs), out, force)


@plot.command(name="schedule", display=False)
@o.batch_inputs
@click.option(
    "--engine",
    "engine",
    type=o.engine_choice,
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
    callback=sizes,
    metavar="1,2,4,8",
    help="As schedule's --cuda-graph-sizes.",
)
@out_picture
@o.force
def plot_schedule(out: str, force: bool, **inputs: Any) -> None:
    """Speedup against batch for each k, the schedule over them and the break-even batch.

    \b
      breakeven plot schedule --cost-curve data/llama3_8b_decode_curve.csv \\
            --accept-len-by-k 2:2.36,3:2.79,4:3.08 --draft-step-ms 0.98 --out schedule.png
    """
    from breakeven.jobs.drawing import schedule_figure  # lazy: start-up

    _refuse_inputs(out, inputs)
    _save(schedule_figure(**inputs), out, force)


@plot.command(name="check", display=False)
@click.argument("measurements", type=click.Path(dir_okay=False))
@o.cycle_costs
@click.option(
    "--fit-file",
    "fit_file",
    type=click.Path(dir_okay=False),
    metavar="FIT.json",
    help="Instead: the cycle breakeven fit fitted, at each run's k (the group of the same "
    "model, hardware and method).",
)
@o.tolerance("Relative tolerance: the band drawn around measured = predicted.")
@out_picture
@o.force
def plot_check(measurements: str, tolerance: float, out: str, force: bool, **costs: Any) -> None:
    """Measured against predicted speedup, with y = x and the tolerance band (check's input).

    A prediction needs the cycle's cost: the rows' own (cycle_ms, or verify_ms and
    draft_ms), or one given here for every speculative run, or a fit's.

    \b
      breakeven fit data/published.csv --out fit.json
      breakeven plot check data/published.csv --fit-file fit.json --out check.png
    """
    from breakeven.jobs.drawing import check_figure  # lazy: start-up

    _refuse_inputs(out, costs, ("MEASUREMENTS", measurements))
    _save(check_figure(measurements, tolerance, **costs), out, force)


@plot.command(name="sensitivity", display=False)
@o.baseline
@o.step
@click.option(
    "--verify-ms",
    "verify_ms",
    type=FLOAT,
    metavar="MS",
    required=True,
    help=f"One target forward over k + 1 tokens {o.MS}.",
)
@click.option(
    "--draft-ms",
    "draft_ms",
    type=FLOAT,
    default=0.0,
    metavar="MS",
    help=f"All drafting in one cycle (default 0) {o.MS}.",
)
@click.option(
    "--overhead-ms",
    "overhead_ms",
    type=FLOAT,
    default=0.0,
    metavar="MS",
    help=f"Other per-cycle cost (default 0) {o.MS}.",
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
@out_picture
@o.force
def plot_sensitivity(out: str, force: bool, **inputs: Any) -> None:
    """Which input, moved by ±10%, moves the speedup most (a tornado chart).

    \b
      breakeven plot sensitivity --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 \\
            --accept-len 2.1 --out sensitivity.png
    """
    from breakeven.jobs.drawing import sensitivity_figure  # lazy: start-up

    _save(sensitivity_figure(**inputs), out, force)


@cli.command(display=False)
@click.argument("measurements", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    required=True,
    metavar="DIR",
    callback=writable,
    help="Directory to write report.html into (created if missing).",
)
@o.tolerance("Relative tolerance, as for check.")
@o.force
def report(measurements: str, out: str, tolerance: float, force: bool) -> None:
    """A self-contained HTML report of a check: table, flags and figures.

    \b
      breakeven report data/case_study.csv --out report/
    """
    from breakeven.jobs.measure import report_from_file  # lazy: start-up

    path = report_from_file(measurements, out, tolerance=tolerance, force=force)
    say(f"Wrote {path}.")
