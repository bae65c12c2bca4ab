"""``breakeven ingest``, ``check`` and ``compare``: measurements read, checked and compared."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli
from breakeven.cli.params import (
    FLOAT,
    Bounded,
    CommandLineError,
    LibraryChoice,
    Renamed,
    emit,
    say,
    writable,
)
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import MAX_SPEC_TOKENS


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE|LABEL=FILE|-...")
@click.option(
    "--format",
    "format",
    type=LibraryChoice("breakeven.core.choices", "INGEST_FORMATS"),
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
    "num_spec_tokens",
    cls=Renamed,
    old=("--steps",),
    type=Bounded(0, MAX_SPEC_TOKENS),
    metavar="K",
    multiple=True,
    help="k, for formats that do not print it (SGLang Decode batch, llama.cpp, early "
    f"vLLM V1), 0 to {MAX_SPEC_TOKENS}. Once for every file, or once per file.",
)
@click.option(
    "--topk",
    "spec_topk",
    type=Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    multiple=True,
    help="A tree draft's branches per step (SGLang's "
    "--speculative-eagle-topk; -k is then its steps): once, or once per file.",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=Bounded(1, MAX_SPEC_TOKENS),
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
    callback=writable,
    help="Write the records as a measurements CSV (atomically).",
)
@o.force
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
@o.year
@o.json_only
def ingest(
    files: tuple[str, ...],
    format: str,
    before: str | None,
    out: str | None,
    force: bool,
    append: bool,
    jobs: int | None,
    year: int | None,
    as_json: bool,
    **per_file: Any,
) -> None:
    """Read engine logs, benchmark results and /metrics scrapes into measurements.

    FILE may be plain or compressed (gzip, bzip2, xz; told by content), UTF-8
    or UTF-16 with its byte-order mark (PowerShell's >), or - for standard input. What a file holds is told from its content: JSON
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
    from breakeven.iotools import pipeline  # lazy: start-up
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    inputs = pipeline.ingest_inputs(files, **per_file)
    read = [("FILE", i.path) for i in inputs]
    refuse_input_as_output(out, "out", [*read, ("before", before)])  # even with --append
    array = pipeline.JsonArray(lambda text: click.echo(text, nl=False)) if as_json else None
    tally, problems = pipeline.write_ingest(
        inputs,
        out=out,
        append=append,
        force=force,
        format=format,
        before=before,
        jobs=jobs,
        json=array,
        year=year,
    )
    if out is not None:
        say(f"{'Added' if append else 'Wrote'} {tally.records} records to {out}.")
    if array is not None:
        array.close()
    else:
        from breakeven.iotools.ingest import tok_s_meanings  # lazy: start-up
        from breakeven.render import ingest_text  # lazy: start-up

        click.echo(ingest_text(tally, tok_s_meanings()), nl=False, err=out is not None)
    for problem in problems:
        click.echo(f"Problem: {problem}", err=True)  # one line per problem, as an error is
    if problems:
        raise CommandLineError(
            f"{len(problems)} problem(s) reading the input; each is "
            "named above with its file and line"
        )


@cli.command(name="check")
@click.argument("measurements", type=click.Path(dir_okay=False))
@o.tolerance(
    "Relative tolerance for baseline drift, prediction mismatch and server/client agreement."
)
@o.schedule_file
@o.fit_check_file
@o.mix
@o.slo
@o.json_option
def check_command(
    measurements: str,
    tolerance: float,
    schedule_file: str | None,
    fit_file: str | None,
    mix: str | None,
    slo: str | None,
    as_json: bool,
) -> None:
    """Measured against predicted speedups, and stale or drifting baselines.

    Pairs each speculative run (num_spec_tokens > 0) with the baseline runs
    (num_spec_tokens = 0) of the same model, hardware and concurrency, and
    flags, with a stable code and a sentence: baseline_drift, baseline_missing,
    stale_baseline, baseline_unverified, unnamed_pairing, prediction_mismatch,
    accept_len_out_of_range, itl_per_chunk, server_client_mismatch.

    \b
      breakeven check data/case_study.csv
    """
    from breakeven.jobs.checking import check_from_file  # lazy: start-up

    emit(check_from_file(measurements, tolerance, schedule_file, fit_file, mix, slo), as_json)


@cli.command(name="compare")
@click.argument("baseline", metavar="BASELINE", required=False)
@click.argument("specs", nargs=-1, metavar="SPEC...")
@click.option(
    "--baseline-tok-s",
    "baseline_tok_s",
    type=FLOAT,
    metavar="TOK_S",
    help="A baseline typed in instead of BASELINE: its per-sequence decode rate [tok/s]. "
    "The arguments are then all SPECs.",
)
@click.option(
    "--baseline-at",
    "baseline_at",
    metavar="DATE",
    help="When the typed-in baseline was measured (ISO 8601: 2026-02-02, 2026-02-02T09:14).",
)
@click.option(
    "--baseline-env",
    "baseline_env",
    metavar="'K=V ...'",
    help="The baseline launch's settings (NCCL_* variables, server flags), as --env gives "
    "each SPEC's.",
)
@click.option(
    "--spec-tok-s",
    "spec_tok_s",
    type=FLOAT,
    metavar="TOK_S",
    help="A speculative run typed in: its per-sequence decode rate [tok/s] (k with -k, "
    "settings with --env).",
)
@click.option(
    "--spec-at",
    "spec_at",
    metavar="DATE",
    help="When the typed-in speculative run was measured (ISO 8601).",
)
@click.option(
    "--accept-len",
    "accept_len",
    type=FLOAT,
    metavar="TAU",
    help="The typed-in speculative run's mean acceptance length [tokens/cycle, bonus "
    "token included].",
)
@click.option(
    "-k",
    "--num-spec-tokens",
    "num_spec_tokens",
    cls=Renamed,
    old=("--steps",),
    type=Bounded(0, MAX_SPEC_TOKENS),
    multiple=True,
    metavar="K",
    help=f"k of each SPEC (a tree's steps), 0 to {MAX_SPEC_TOKENS} (once for all, or "
    "once per SPEC in order).",
)
@click.option(
    "--topk",
    "spec_topk",
    type=Bounded(1, MAX_SPEC_TOKENS),
    metavar="T",
    multiple=True,
    help="A tree draft's branches per step, of each SPEC (once, or once per SPEC).",
)
@click.option(
    "--verify-tokens",
    "verify_tokens",
    type=Bounded(1, MAX_SPEC_TOKENS),
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
@o.cycle_costs
@o.tolerance("Relative tolerance, as for check.")
@click.option(
    "--fail-if",
    "fail_if",
    type=LibraryChoice("breakeven.core.choices", "FAIL_IF"),
    help="Exit with code 1 when this holds: a run is slower, a run is not faster "
    "(slower, within noise or without an interval), or check flagged anything.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    callback=writable,
    help="Also write DIR/report.html: the headline verdicts "
    "first, coloured, then the table, flags and figures (created if missing).",
)
@click.option("--force", is_flag=True, help="Replace DIR/report.html if it exists.")
@o.year
@o.schedule_file
@o.fit_check_file
@o.mix
@o.slo
@o.json_option
def compare_command(
    fail_if: str | None,
    report_dir: str | None,
    force: bool,
    schedule_file: str | None,
    fit_file: str | None,
    mix: str | None,
    as_json: bool,
    **runs: Any,
) -> None:
    """Is speculation faster here, by how much, and can the answer be trusted?

    BASELINE and each SPEC are anything ingest reads (logs, plain or
    compressed; bench JSON or tables; /metrics scrapes) or a measurements CSV;
    FILE+FILE joins the files of one launch, FILE,FILE gives a run's separate
    launches (server starts), and LABEL=FILE names the run (by default: the
    file's stem; in a measurements CSV, its rows of that label where it has
    some). A sweep's directory alone (breakeven sweep --out DIR) is its
    baseline and each of its k. It prints a headline per run first, then the measured
    speedup with a 95% interval whose unit of repetition is the launch (one
    launch a side: batch means over its decode windows or requests, which
    leave launch-to-launch variation out, and it says so), accept_len, the
    break-even accept_len and predicted speedup for the costs given, and
    check's flags.

    Exit codes: 0; 1 when the --fail-if condition holds; 2 for bad input; 130 on
    Ctrl-C and 143 on SIGTERM.

    \b
      breakeven compare baseline=base.log eagle3=spec.log -k 3 --verify-ms 28.7 --draft-ms 1.2
      breakeven compare base.json spec.json --fail-if slower --json
      breakeven compare sweep/
      breakeven compare base.log spec.log --report report/
      breakeven compare --baseline-tok-s 90 --baseline-at 2026-02-02 \\
          --spec-tok-s 75.9 --spec-at 2026-02-26 --accept-len 2.1 -k 3
    """
    from breakeven.iotools.paths import written_as  # lazy: start-up
    from breakeven.jobs.measure import compare_from_files  # lazy: start-up
    from breakeven.render.report import check_report_dir, write_compare_report  # lazy: start-up

    if report_dir is not None:
        _refuse_an_input_as_report(report_dir, runs, schedule_file, fit_file)
        check_report_dir(report_dir, force, "report_dir")  # before the work, not after it
    result = compare_from_files(**runs, schedule_file=schedule_file, fit_file=fit_file, mix=mix)
    emit(result, as_json)
    if report_dir is not None:
        with written_as("report_dir", report_dir):  # a full disk names --report
            say(f"Wrote {write_compare_report(result, report_dir, force=force)}.")
    if result.failed(fail_if):
        sys.exit(1)


def _refuse_an_input_as_report(
    report_dir: str, runs: dict[str, Any], schedule_file: str | None, fit_file: str | None
) -> None:
    """compare's --report DIR, refused where DIR/report.html is one of its inputs: the files
    of BASELINE and each SPEC (as compare reads them), --schedule and --fit-file."""
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up
    from breakeven.iotools.runs import parse_run  # lazy: start-up

    read: list[tuple[str, str | None]] = [("schedule_file", schedule_file), ("fit_file", fit_file)]
    for what, text in [("BASELINE", runs.get("baseline")), *(("SPEC", s) for s in runs["specs"])]:
        if text is None:
            continue
        if os.path.isdir(text):  # a sweep's directory: its runs.csv
            read.append((what, os.path.join(text, "runs.csv")))
            continue
        try:
            read += [(what, path) for path in parse_run(text).paths]
        except BreakevenError:  # said by compare itself
            continue
    refuse_input_as_output(os.path.join(report_dir, "report.html"), "report_dir", read)
