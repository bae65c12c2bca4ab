"""``breakeven fleet``: is speculation paying across many servers? Read from Prometheus."""

from __future__ import annotations

import os
from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli
from breakeven.cli.params import FLOAT, Bounded, emit, say, writable


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
    type=Bounded(1, 10**6),
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
    "--trtllm-stats",
    "trtllm_stats",
    multiple=True,
    metavar="URL",
    help="A trtllm-serve whose /metrics iteration stats to read too (repeatable): one "
    "point a server, pooled over the iterations it held; the read takes them off its queue.",
)
@click.option(
    "--token-env",
    "token_env",
    metavar="VAR",
    help="Environment variable holding a bearer token (never printed or written).",
)
@click.option(
    "--header",
    "header",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="A header sent with every query to --prometheus (repeatable), such as "
    "'X-Scope-OrgID: team' for a Mimir or Cortex tenant; its value is never printed.",
)
@click.option(
    "--dedup/--no-dedup",
    "dedup",
    default=None,
    help="Thanos: send dedup=true or dedup=false (merge or keep the replicas' series); "
    "not sent unless given.",
)
@click.option(
    "--partial-response/--no-partial-response",
    "partial_response",
    default=None,
    help="Thanos: send partial_response=true or false (answer with the stores that answered, "
    "with warnings, or fail); not sent unless given. Warnings become notes.",
)
@click.option(
    "--timeout",
    "timeout",
    type=FLOAT,
    default=60.0,
    show_default=True,
    metavar="S",
    help="How long one range query may take in all [s], its answer read (a server that "
    "stalls, or sends a few bytes at a time).",
)
@click.option(
    "--deadline",
    "deadline",
    type=FLOAT,
    metavar="S",
    help="How long the whole read may take [s] (default: no limit but --timeout's).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    callback=writable,
    help="Also write every server's steps as a measurements CSV.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    callback=writable,
    help="Also write DIR/report.html: the servers, their flags, "
    "accept_len over time and the time above break-even.",
)
@click.option("--force", is_flag=True, help="Replace --out and DIR/report.html if they exist.")
@o.json_option
def fleet(
    as_json: bool,
    report_dir: str | None,
    out: str | None,
    force: bool,
    timeout: float,
    deadline: float | None,
    **options: Any,
) -> None:
    """Is speculation paying across many servers? Read from Prometheus.

    For every vLLM, SGLang, llama.cpp and TensorRT-LLM server whose metrics
    Prometheus keeps: accept_len (1 + rate(accepted) / rate(drafts), bonus token
    included; TensorRT-LLM's drafts are its drafted tokens at position 0),
    per-sequence and aggregate decode rates and running requests, over time;
    with --fit-file also the predicted speedup at the load it saw and the time
    above its break-even batch. One line per server, worst first; flags
    acceptance_drop and above_breakeven. A trtllm-serve whose Prometheus text
    has no spec-decode counters: --trtllm-stats URL reads its /metrics
    iteration stats once (one point, pooled from counts; the read drains them).

    Prometheus' answers are checked before they are believed: each range query
    ends within --timeout and the whole read within --deadline, an answer is read
    up to 64 MiB (decompressed too), and one that is not the HTTP API's
    documented JSON is one line naming --prometheus.

    A multi-tenant Prometheus (Mimir, Cortex, Thanos): --header
    'X-Scope-OrgID: team' names the tenant, a base path is kept
    (http://mimir:8080/prometheus), --dedup and --partial-response are sent
    to Thanos as its query parameters, and its answers' warnings are notes.

    \b
      breakeven fleet --prometheus http://prom:9090 --since 6h --match '{job="vllm"}'
      breakeven fleet --prometheus http://mimir:8080/prometheus --header 'X-Scope-OrgID: team'
    """
    from breakeven.iotools.paths import refuse_input_as_output, written_as  # lazy: start-up
    from breakeven.iotools.query_range import limits  # lazy: start-up
    from breakeven.jobs.measure import fleet_from_prometheus  # lazy: start-up
    from breakeven.render.report import check_report_dir, write_fleet_report  # lazy: start-up

    if report_dir is not None:
        page = os.path.join(report_dir, "report.html")
        refuse_input_as_output(page, "report_dir", [("fit_file", options.get("fit_file"))])
        check_report_dir(report_dir, force, "report_dir")  # before the work, not after it
    with limits(timeout_s=timeout, deadline_s=deadline):
        result, series = fleet_from_prometheus(out=out, force=force, **options)
    if out is not None:
        say(f"Wrote {result.rows} rows to {out}.")
    emit(result, as_json)
    if not as_json:
        for note in result.notes:
            say(f"Note: {note}.")
    if report_dir is not None:
        with written_as("report_dir", report_dir):  # a full disk names --report
            written = write_fleet_report(result, series, report_dir, force=force)
        say(f"Wrote {written}.")
