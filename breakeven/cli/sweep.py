"""``breakeven sweep``: the whole experiment, from a serve command to a verdict."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli, settle_signals
from breakeven.cli.params import LibraryChoice, Renamed, Values, draft_lengths, say
from breakeven.core.errors import BreakevenError, Terminated, escape_braces


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
    type=LibraryChoice("breakeven.render.engine_configs", "SPECULATION_ENGINES"),
    help="Whose speculation flags to add.",
)
@click.option(
    "--spec-method",
    "method",
    cls=Renamed,
    old=("--method",),
    help="Drafting method: eagle3, draft_model, ngram, mtp, ...",
)
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
@o.concurrency("Load levels each launch runs [requests in flight].")
@o.open_loop
@o.sampling
@o.slo
@click.option(
    "--repeats",
    type=int,
    default=1,
    show_default=True,
    help="Launches of each configuration, each a new server start: the unit of an interval "
    "(3 or more give a usable one).",
)
@click.option("--requests", type=int, metavar="N", help="Requests per level (bench's default).")
@click.option(
    "--max-tokens",
    "max_tokens",
    type=int,
    default=256,
    show_default=True,
    help="Tokens each request generates (at most, with --no-ignore-eos) [tokens].",
)
@click.option("--port", type=int, default=8000, show_default=True, help="What {port} stands for.")
@click.option(
    "--url", metavar="URL", help="Where the launches serve (default: http://127.0.0.1:PORT)."
)
@click.option(
    "--stop",
    "stop_command",
    metavar="'CMD'",
    help="Stops a launch after its measurement ({port} as in --serve): for a --serve that "
    "hands the server on and exits 0 (ssh HOST systemctl restart UNIT, docker run -d). "
    "Every process the launch started is ended too, and --stop runs even if the sweep "
    "is killed.",
)
@click.option(
    "--stop-grace",
    "stop_grace_s",
    type=float,
    default=15.0,
    show_default=True,
    metavar="S",
    help="How long a launch's server may take to exit after SIGTERM [s]; then every process "
    "of the launch left is killed (SIGKILL).",
)
@o.server_env_from
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
@click.option(
    "--resume",
    is_flag=True,
    help="Continue the sweep in DIR, skipping what is done; its plan must be this one.",
)
@click.option(
    "--plan", "plan_only", is_flag=True, help="Print the launches and their cost; run nothing."
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    help="Run the whole plan on each node of this Ray cluster, a block per node (auto, "
    "HOST:PORT or ray://HOST:10001; the ray extra). Each launch serves on 127.0.0.1 of its "
    "node at a free port; rows carry the node.",
)
@click.option(
    "--nodes",
    type=int,
    metavar="N",
    help="With --ray: the first N alive nodes (by address) run the sweep (default: every one).",
)
@o.json_only
def sweep(
    as_json: bool,
    ray_address: str | None,
    nodes: int | None,
    plan_only: bool,
    out: str,
    resume: bool,
    url: str | None,
    stop_command: str | None,
    server_env_from: str | None,
    requests: int | None,
    stop_grace_s: float,
    slo: str | None,
    **options: Any,
) -> None:
    """Run the experiment: a baseline and each k, interleaved, each a server launch of its own.

    Each launch is started from --serve (plus the engine's speculation flags), waited for,
    checked (its server's settings, less speculation, must match the first launch's: a
    variable lost on a restart fails the launch before it is measured), warmed, measured by
    bench at every --concurrency level (or --request-rate level: open loop), and stopped;
    rows go to DIR/runs.csv as requests complete, with each launch's server environment;
    DIR/manifest.json records the plan and each launch's outcome, so that --resume
    continues it.  A launch that fails is recorded with its log's tail, and the sweep goes
    on.

    The end is the answer: check's verdict per k and load (launch-level intervals), with
    --request-rate each k's break-even request rate (by goodput under --slo, else by TPOT),
    fit's costs (DIR/fit.json), schedule's best k per batch where two or more loads ran
    (DIR/schedule.json), the best k at each load and its flags to paste, and
    DIR/report.html.  Each can be made again: breakeven check DIR/runs.csv, breakeven fit
    DIR/runs.csv.

    Exit codes: 0; 1 when no speculative launch was measured against a baseline; 2 for bad input; 130/143 when
    interrupted (every completed row kept; --resume continues).

    \b
      breakeven sweep --serve 'vllm serve /models/m --port {port}' --engine vllm \\
          --spec-method eagle3 --draft /models/eagle3 -k 0 2 4 --repeats 2 --plan
    """
    from breakeven.sweep.plan import plan_sweep  # lazy: start-up

    _refuse_an_input_as_output(out, server_env_from)
    o.one_load_axis(options)
    if options["request_rate"] is None:  # closed loop: nothing shapes a schedule
        options.update(request_rate=(), burstiness=None, seed=None, max_concurrency=None)
    if slo is not None:
        from breakeven.measurements.slo import parse_slo  # lazy: start-up

        parse_slo(slo)  # before any launch
    serve, engine = options.pop("serve"), options.pop("engine")
    ks = options.pop("num_spec_tokens")
    plan = plan_sweep(serve, engine, ks, requests=requests, config_dir=out, **options)
    if ray_address is not None or nodes is not None:
        given = {"serve": serve, "engine": engine, "num_spec_tokens": ks, "requests": requests}
        where = (out, url, stop_command, server_env_from, resume, stop_grace_s)
        _on_cluster(ray_address, nodes, plan, given | options, *where, plan_only, as_json, slo)
        return
    if plan_only:
        click.echo(json.dumps(plan.to_dict(), indent=2) if as_json else plan.report(), nl=False)
        return
    result = _sweep_run(
        plan, out, url, stop_command, server_env_from, requests, resume, stop_grace_s
    )
    _answer(result, out, slo, as_json)


@cli.command()
@click.option(
    "--out",
    default="breakeven-demo",
    show_default=True,
    metavar="DIR",
    help="The demo's directory: its models in DIR/models, its sweep in DIR/sweep.",
)
@click.option(
    "--llama-server",
    "llama_server",
    metavar="PATH",
    help="The llama-server to run (default: the engine extra's, else llama-server on PATH).",
)
@click.option(
    "--threads",
    type=int,
    metavar="N",
    help="llama-server's -t [threads] (default: half this machine's cores, 1 to 4).",
)
@click.option(
    "--port", type=int, default=8090, show_default=True, help="Where the demo's launches serve."
)
@click.option(
    "--repeats",
    type=int,
    default=3,
    show_default=True,
    help="Launches of each configuration, each a new server start: the unit of an interval.",
)
@click.option(
    "--resume", is_flag=True, help="Continue the demo's sweep in DIR, skipping what is done."
)
@click.option(
    "--plan", "plan_only", is_flag=True, help="Print what the demo would do; run nothing."
)
@o.json_only
def demo(
    out: str,
    llama_server: str | None,
    threads: int | None,
    port: int,
    repeats: int,
    resume: bool,
    plan_only: bool,
    as_json: bool,
) -> None:
    """The whole experiment on this machine's CPU in a few minutes: models made here, a sweep
    on llama.cpp, and its answer.

    Makes a small target model and its draft in GGUF (DIR/models; a target whose step is
    mostly reading its weights, so that speculation pays on a CPU), runs a short sweep on
    llama.cpp's llama-server (a baseline and k = 2, 4, 6, interleaved, each a server launch
    of its own, at concurrency 1 and 4, three times; DIR/sweep), and ends with the sweep's answer,
    its report and the commands to try next.  Needs llama-server and the gguf package: the
    engine extra (python scripts/install_engine.py in breakeven's folder).

    Exit codes: as sweep's: 0; 1 when no speculative launch was measured against a
    baseline; 2 for bad input, or no llama-server; 130/143 when interrupted (--resume
    continues).

    \b
      breakeven demo --plan
      breakeven demo --out demo/
    """
    from breakeven.sweep.answer import answer_sweep  # lazy: start-up
    from breakeven.sweep.demo import (  # lazy: start-up
        DemoResult,
        make_models,
        plan_demo,
        require_server,
    )

    plan = plan_demo(out, llama_server=llama_server, threads=threads, port=port, repeats=repeats)
    if plan_only:
        click.echo(json.dumps(plan.to_dict(), indent=2) if as_json else plan.report(), nl=False)
        return
    require_server(plan)
    if os.path.exists(plan.sweep_dir) and not resume:
        raise BreakevenError(
            "{0}: " + escape_braces(plan.sweep_dir) + " exists: the demo was run there "
            "(continue it with --resume, or give another --out)",
            "out",
        )
    for path in make_models(plan):
        say(f"Made {path}.")
    run = _sweep_run(plan.sweep, plan.sweep_dir, None, None, None, None, resume, 15.0)
    say(run.report().rstrip("\n"))
    if not any(o.ok for o in run.outcomes):
        sys.exit(1)
    result = DemoResult(plan, answer_sweep(plan.sweep_dir))
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json else result.report(), nl=False)
    say(f"Wrote {', '.join(result.answer.files.values())}.")
    if not result.answer.best:
        sys.exit(1)


def _sweep_run(
    plan: Any,
    out: str,
    url: str | None,
    stop_command: str | None,
    server_env_from: str | None,
    requests: int | None,
    resume: bool,
    stop_grace_s: float,
) -> Any:
    """The sweep run (:func:`breakeven.sweep.run.run_sweep`), its progress on stderr; Ctrl-C
    exits 130 and SIGTERM 143, saying where the completed rows are."""
    from breakeven.bench.config import Config  # lazy: start-up
    from breakeven.sweep.run import run_sweep  # lazy: start-up

    bench = Config(
        url="http://127.0.0.1",
        label="sweep",
        requests=requests,
        max_tokens=plan.max_tokens,
        server_env_from=server_env_from,
    )
    show = _Shown(sys.stderr.isatty())
    try:
        result = run_sweep(
            plan,
            out,
            bench,
            url=url,
            stop_command=stop_command,
            resume=resume,
            on_progress=show,
            stop_grace_s=stop_grace_s,
        )
    except KeyboardInterrupt as e:
        settle_signals()  # decided: a second signal changes nothing
        show.end()
        _interrupted(e, out, "the launch under way was stopped")
    show.end()
    return result


def _on_cluster(
    address: str | None,
    nodes: int | None,
    plan: Any,
    plan_args: dict[str, Any],
    out: str,
    url: str | None,
    stop_command: str | None,
    server_env_from: str | None,
    resume: bool,
    stop_grace_s: float,
    plan_only: bool,
    as_json: bool,
    slo: str | None,
) -> None:
    """``sweep --ray``: the plan on each node of the cluster (:mod:`breakeven.sweep.cluster`)."""
    from breakeven.bench.config import Config  # lazy: start-up
    from breakeven.sweep.cluster import ClusterPlan, on_cluster, run_on_nodes  # lazy: start-up

    if address is None:
        raise BreakevenError(
            "{0}: chooses among a Ray cluster's nodes; give {1} too", "nodes", "ray_address"
        )
    for name, given in (("url", url), ("server_env_from", server_env_from)):
        if given is not None:
            raise BreakevenError(
                "{0}: not with {1}: each launch serves on 127.0.0.1 of its own node, and its "
                "settings are read from its own process there",
                name,
                "ray_address",
            )
    plan_args.pop("port", None)
    bench = Config(
        url="http://127.0.0.1",
        label="sweep",
        requests=plan_args["requests"],
        max_tokens=plan.max_tokens,
    )
    try:
        with on_cluster(address, nodes) as found:  # Ray's own messages kept off stdout
            if plan_only:
                shown = ClusterPlan(plan, tuple(found))
            else:
                result = run_on_nodes(
                    plan,
                    plan_args,
                    out,
                    bench,
                    found,
                    stop_command=stop_command,
                    resume=resume,
                    stop_grace_s=stop_grace_s,
                    on_progress=say,
                )
    except KeyboardInterrupt as e:
        settle_signals()  # decided: a second signal changes nothing
        _interrupted(e, out, "the launches under way were stopped")
    if plan_only:
        click.echo(json.dumps(shown.to_dict(), indent=2) if as_json else shown.report(), nl=False)
        return
    _answer(result, out, slo, as_json)


def _interrupted(e: KeyboardInterrupt, out: str, stopped: str) -> None:
    """Exit 130 after Ctrl-C, 143 after SIGTERM, saying where the completed rows are."""
    what = "Terminated (SIGTERM)" if isinstance(e, Terminated) else "Interrupted"
    say(f"{what}: {stopped}; every completed row is in {out}/runs.csv (continue with --resume).")
    sys.exit(143 if isinstance(e, Terminated) else 130)


def _answer(result: Any, out: str, slo: str | None, as_json: bool) -> None:
    """The sweep's end: its launches in a line, then its answer (exit 1 where no speculative
    launch was measured against a baseline, or nothing answers)."""
    from breakeven.sweep.answer import answer_sweep  # lazy: start-up

    say(result.report().rstrip("\n"))
    if not any(o.ok for o in result.outcomes):
        sys.exit(1)
    answer = answer_sweep(out, slo=slo)
    click.echo(json.dumps(answer.to_dict(), indent=2) if as_json else answer.report(), nl=False)
    say(f"Wrote {', '.join(answer.files.values())}.")
    if not answer.best:
        sys.exit(1)


def _refuse_an_input_as_output(out: str, server_env_from: str | None) -> None:
    """--server-env-from FILE refused where it is one of the files the sweep writes in DIR."""
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    if server_env_from is None or server_env_from.strip().isdigit():  # none, or a process id
        return
    for name in ("runs.csv", "manifest.json", "fit.json", "schedule.json", "report.html"):
        refuse_input_as_output(
            os.path.join(out, name), "out", [("server_env_from", server_env_from)], force=None
        )


class _Shown:
    """The sweep's progress on stderr: on a terminal, one line rewritten in place (the
    launch, its phase, its requests, launches done and the ETA); off one, a line per phase."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.width = 0

    def __call__(self, p: Any) -> None:
        from breakeven.sweep.plan import duration_text  # lazy: start-up

        head = f"launch {p.launch.index}/{p.launches} ({p.launch.label}, repeat {p.launch.repeat})"
        if not self.tty:
            if p.phase != "measuring" or p.requests_done == 0:
                eta = f"; ETA {duration_text(p.eta_s)}" if p.phase in ("done", "failed") else ""
                say(f"{head}: {p.phase}{eta}")
            return
        text = f"{head}: {p.phase}"
        if p.phase == "measuring":
            text += f" {p.requests_done}/{p.requests} requests"
        text += "; ETA " + (
            duration_text(p.eta_s) if p.eta_s is not None else "after the first launch"
        )
        line = text[:200]
        click.echo("\r" + line.ljust(self.width), nl=False, err=True)
        self.width = len(line)
        if p.phase in ("done", "failed"):
            click.echo(err=True)
            self.width = 0

    def end(self) -> None:
        if self.tty and self.width:
            click.echo(err=True)
            self.width = 0
