"""``breakeven bench``: decode rates measured against an OpenAI-compatible server."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli, settle_signals
from breakeven.cli.params import Bounded, CommandLineError, Renamed, say
from breakeven.core.errors import Terminated
from breakeven.core.quantities import MAX_SPEC_TOKENS


@cli.command()
@click.option(
    "--url",
    required=True,
    metavar="URL",
    help="The server: http://host:8000, with or without a trailing /v1.",
)
@click.option("--label", required=True, help="Name of this run, e.g. baseline or eagle3-k3.")
@click.option("--model", help="Model to request (default: the first the server lists).")
@o.concurrency(
    "Closed-loop levels [requests in flight], e.g. --concurrency 1 8 32: each request is sent "
    "as one finishes."
)
@o.open_loop
@click.option(
    "--max-tokens",
    "max_tokens",
    type=int,
    default=512,
    show_default=True,
    help="Tokens per request: each generates this many (--ignore-eos), or at most this many "
    "(--no-ignore-eos).",
)
@o.sampling
@click.option(
    "--requests",
    type=int,
    metavar="N",
    help="Requests per level (default: 4 x concurrency, at least 8; with --request-rate, "
    "those of about 30 s of arrivals, ceil(30 x R), from 8 to 1,000).",
)
@click.option(
    "--prompts",
    "prompts",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help='Prompts, one per line, or JSON Lines with a "prompt" (or the "turns" of Spec-Bench '
    'and SPEED-Bench: the first is sent) and an optional "category", written in each row.',
)
@click.option("--chat", is_flag=True, help="Use /v1/chat/completions instead of /v1/completions.")
@click.option(
    "--api-key-env",
    "api_key_env",
    metavar="VAR",
    help="Environment variable holding the API key (never printed or written).",
)
@click.option(
    "-k",
    "--num-spec-tokens",
    "num_spec_tokens",
    cls=Renamed,
    old=("--steps",),
    type=int,
    metavar="K",
    help="k the server speculates with (a tree's steps); 0 for a baseline (default: "
    "from /metrics).",
)
@click.option(
    "--topk",
    "spec_topk",
    type=Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    help="A tree draft's branches per step (SGLang's --speculative-eagle-topk).",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=Bounded(1, MAX_SPEC_TOKENS),
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
    help="More of the server's launch, as K=V pairs bench cannot see (variables holding "
    "KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL are dropped).",
)
@o.server_env_from
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
@o.json_only
def bench(as_json: bool, out: str | None, **options: Any) -> None:
    """Measure decode rates against any OpenAI-compatible server (vLLM, SGLang, ...).

    Run it right before changing the server, and again after: each row carries
    the server's launch (launch_id, launched_at) and its settings (env: the
    server process's arguments and NCCL_*, CUDA_*, VLLM_*, ... variables, read
    from /proc where it runs on this host, else --server-env-from, and what its
    endpoints serve), so check can tell a stale baseline. Per request: TTFT,
    decode tok/s with prefill excluded, TPOT, end-to-end latency, chunks and tokens
    per chunk. Per level: per-sequence and aggregate tok/s, accept_len from
    /metrics, the request rates achieved and the latencies' p50, p90 and p99.

    \b
      breakeven bench --url http://localhost:8000/v1 --label baseline \\
          --concurrency 1 8 --max-tokens 512 --out runs.csv
      breakeven bench --url http://localhost:8000/v1 --label baseline \\
          --request-rate 1 4 --max-concurrency 64 --out runs.csv
    """
    from breakeven.bench.session import run_bench  # lazy: start-up
    from breakeven.core.provenance import launch_text  # lazy: start-up
    from breakeven.jobs.measure import bench_config  # lazy: start-up

    _refuse_an_input_as_out(out, options.get("prompts"), options.get("server_env_from"))
    o.one_load_axis(options)
    config, note = bench_config(**options)
    if note:
        say(f"Note: {note}")
    total = sum(config.requests_in(load) for load in config.loads())
    try:
        if sys.stderr.isatty():  # a bar on a terminal; scripts and logs get no control characters
            with click.progressbar(length=total, label="requests", file=sys.stderr) as bar:
                levels, failures, rows = run_bench(config, out, lambda level, r: bar.update(1))
        else:
            levels, failures, rows = run_bench(config, out)
    except KeyboardInterrupt as e:
        settle_signals()  # decided: a second signal changes nothing
        what = "Terminated (SIGTERM)" if isinstance(e, Terminated) else "Interrupted"
        kept = f"; every completed request's row is in {out}" if out else ""
        say(f"{what}{kept}.")
        sys.exit(143 if isinstance(e, Terminated) else 130)
    if as_json:
        from breakeven.core.quantities import plain_json  # lazy: start-up

        click.echo(json.dumps(plain_json(levels), indent=2, allow_nan=False))
    else:
        from breakeven.render import bench_text  # lazy: start-up

        click.echo(bench_text(levels, config.label), nl=False)
    if out:
        say(f"Appended {rows} rows to {out}.")
    if levels:
        say(f"Launch: {launch_text(levels[0]['launch'])}")
    for warning in dict.fromkeys(w for level in levels for w in level.get("warnings", ())):
        say(f"Warning: {warning}.")
    for failure in failures:
        click.echo(f"Problem: {failure}", err=True)  # one line per problem, as an error is
    if failures:
        raise CommandLineError(
            f"{len(failures)} request(s) failed; every completed one was recorded"
        )


def _refuse_an_input_as_out(out: str | None, prompts: str | None, env_from: str | None) -> None:
    """--out refused, before any request, where it is the --prompts file or the
    --server-env-from file (not a process id)."""
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    env_file = None if env_from is None or env_from.strip().isdigit() else env_from
    refuse_input_as_output(
        out, "out", [("prompts", prompts), ("server_env_from", env_file)], force=None
    )
