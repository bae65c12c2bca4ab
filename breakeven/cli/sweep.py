"""``breakeven sweep``: the whole experiment, from a serve command to a verdict."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli
from breakeven.cli.params import LibraryChoice, Values, draft_lengths, levels


@cli.command()
@click.option(
    "--serve",
    required=True,
    metavar="'CMD'",
    help="The plain server command, without speculation; {port} stands for --port. Each "
    "launch adds the engine's speculation flags for its k.",
)
@click.option(
    "--engine",
    required=True,
    type=LibraryChoice("breakeven.deploy", "SPECULATION_ENGINES"),
    help="Whose speculation flags to add.",
)
@click.option("--method", help="Drafting method: eagle3, draft_model, ngram, mtp, ...")
@click.option("--draft", metavar="PATH", help="The draft model (a path or a model id).")
@click.option(
    "-k",
    "--num-spec-tokens",
    "num_spec_tokens",
    cls=Values,
    default="0 2 4",
    show_default=True,
    callback=draft_lengths,
    metavar="K [K ...]",
    help="The k to measure [tokens]; 0, the baseline, is always measured.",
)
@click.option(
    "--concurrency",
    cls=Values,
    default="1",
    show_default=True,
    callback=levels,
    metavar="N [N ...]",
    help="Load levels each launch runs [requests in flight].",
)
@click.option(
    "--repeats", type=int, default=1, show_default=True, help="Launches of each configuration."
)
@click.option("--requests", type=int, metavar="N", help="Requests per level (bench's default).")
@click.option("--max-tokens", "max_tokens", type=int, default=256, show_default=True)
@click.option("--port", type=int, default=8000, show_default=True, help="What {port} stands for.")
@click.option(
    "--url", metavar="URL", help="Where the launches serve (default: http://127.0.0.1:PORT)."
)
@click.option(
    "--ready-timeout",
    "ready_timeout_s",
    type=float,
    default=600.0,
    show_default=True,
    metavar="S",
    help="How long a launch may take to list its models [s]; then it is recorded as failed.",
)
@click.option(
    "--out", "out", default="sweep", show_default=True, metavar="DIR", help="The sweep's directory."
)
@click.option("--resume", is_flag=True, help="Continue the sweep in DIR, skipping what is done.")
@click.option(
    "--plan", "plan_only", is_flag=True, help="Print the launches and their cost; run nothing."
)
@o.json_option
def sweep(
    as_json: bool,
    plan_only: bool,
    out: str,
    resume: bool,
    url: str | None,
    requests: int | None,
    **options: Any,
) -> None:
    """Run the experiment: a baseline and each k, interleaved, each a server launch of its own.

    Each launch is started from --serve (plus the engine's speculation flags), waited for,
    measured by bench at every --concurrency level, and stopped; rows go to DIR/runs.csv as
    requests complete, with each launch's server environment; DIR/manifest.json records
    the plan and each launch's outcome.  The end is check's verdict on DIR/runs.csv.

    \b
      breakeven sweep --serve 'vllm serve /models/m --port {port}' --engine vllm \\
          --method eagle3 --draft /models/eagle3 -k 0 2 4 --repeats 2 --plan
    """
    from breakeven.bench_client import Config  # lazy: start-up
    from breakeven.check import check_file  # lazy: start-up
    from breakeven.sweep import plan_sweep  # lazy: start-up
    from breakeven.sweep_run import run_sweep  # lazy: start-up

    serve, engine = options.pop("serve"), options.pop("engine")
    ks = options.pop("num_spec_tokens")
    plan = plan_sweep(serve, engine, ks, requests=requests, **options)
    if plan_only:
        click.echo(json.dumps(plan.to_dict(), indent=2) if as_json else plan.report(), nl=False)
        return
    bench = Config(
        url="http://127.0.0.1", label="sweep", requests=requests, max_tokens=plan.max_tokens
    )

    def say(launch: Any, phase: str) -> None:
        click.echo(
            f"launch {launch.index}/{len(plan.launches)} ({launch.label}): {phase}", err=True
        )

    result = run_sweep(plan, out, bench, url=url, resume=resume, on_launch=say)
    click.echo(result.report(), nl=False, err=True)
    if not any(o.ok for o in result.outcomes):
        sys.exit(1)
    verdict = check_file(result.runs_csv)
    click.echo(json.dumps(verdict.to_dict(), indent=2) if as_json else verdict.report(), nl=False)
