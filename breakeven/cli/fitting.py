"""``breakeven fit`` and ``schedule``: costs fitted from runs, and the k to deploy at each batch."""

from __future__ import annotations

from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli
from breakeven.cli.params import (
    FLOAT,
    Bounded,
    LibraryChoice,
    Renamed,
    definitions,
    emit,
    json_object,
    k_list,
    say,
    sizes,
    writable,
)
from breakeven.core.quantities import MAX_BATCH, MAX_EXPERTS

SCHEDULE_KEYS = [
    "schedule",
    "best_fixed_k",
    "gain",
    "merge_loss",
    "breakeven_batch",
    "max_batch_plain",
    "max_batch_spec",
]


@cli.command(name="fit")
@click.argument("runs", type=click.Path(dir_okay=False), metavar="RUNS.csv")
@click.option(
    "--draft-cost",
    "draft_cost",
    type=LibraryChoice("breakeven.core.choices", "DRAFT_COSTS"),
    default="per-token",
    show_default=True,
    help="How drafting grows with k: one draft step per token (EAGLE, draft models) "
    "or one pass per cycle (MTP or Medusa heads).",
)
@click.option(
    "--cycle-form",
    "cycle_form",
    type=LibraryChoice("breakeven.core.choices", "FORM_CHOICES"),
    default="auto",
    show_default=True,
    help="The cycle against k: auto (the form of least leave-one-out error), leviathan "
    "(step x (1 + c k)), anchored (a line with the step as k = 0), linear, or curved "
    "(a + b k + c k^2).",
)
@click.option(
    "--predict-k",
    "predict_k",
    callback=k_list,
    metavar="K-K",
    help="Also predict these k (1-8, 2,3,5): accept_len from the alpha fitted to the "
    "runs, marked predicted.",
)
@click.option(
    "--experts",
    "experts",
    type=Bounded(1, MAX_EXPERTS),
    metavar="E",
    help="A Mixture-of-Experts model's routed experts per layer, for the forward "
    "surface across batch sizes (with --top-k).",
)
@click.option(
    "--top-k",
    "top_k",
    type=Bounded(1, MAX_EXPERTS),
    metavar="K",
    help="Routed experts per token (with --experts).",
)
@o.mix
@click.option(
    "--shared",
    "shared",
    type=Bounded(0, MAX_EXPERTS),
    default=0,
    metavar="S",
    help="Shared experts, always active (default 0).",
)
@click.option(
    "--model-config",
    "model_config",
    type=click.Path(dir_okay=False),
    metavar="config.json",
    help="The model's Hugging Face config.json: with the runs' accelerator (their "
    "hardware column, or --accelerator), the surface across batch sizes may take the "
    "roofline form (weights and KV over the datasheet bandwidth, FLOPs over its peak). "
    "Default: each row's model_config column, where the runs file has one.",
)
@click.option(
    "--accelerator",
    "accelerator",
    metavar="NAME",
    help="The runs' accelerator and count, e.g. H100, '8x MI300X' (with --model-config or "
    "a model_config column; default: read from each run's hardware).",
)
@click.option(
    "--weight-bits",
    "weight_bits",
    type=LibraryChoice("breakeven.core.choices", "WEIGHT_BITS"),
    callback=lambda _c, _p, v: None if v is None else int(v),
    help="Bits per weight of the checkpoint run, where --model-config is its base "
    "model's (4: AWQ, GPTQ, NVFP4).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FIT.json",
    callback=writable,
    help="Also write the fit as JSON (what --json prints).",
)
@o.force
@o.json_option
def fit_command(runs: str, as_json: bool, **options: Any) -> None:
    """The cycle's costs, fitted from measured runs; the speedup of k not run.

    RUNS.csv is a measurements CSV (ingest --out, bench --out). Each speculative
    run's implied cycle, 1000 * accept_len / tok_s (tok_s, else 1000 / tpot_ms),
    is fitted as verify_base_ms + verify_per_token_ms * k + draft(k) +
    overhead_ms, every coefficient >= 0 [ms], per model, hardware, concurrency
    and drafting method; each group's baseline (k = 0) gives the step. Terms
    the runs cannot tell apart are merged, and said. Four forms of the cycle
    against k are each fitted without one k at a time (leave-one-out), and
    the one of least held-out error is used, the simpler where a form with
    more parameters is not 10% better; each form's error is printed.
    held_out_speedup is each k predicted by the fit without its runs; a
    prediction's interval [x] is +- 1.5 x the largest held-out error (at
    least 2%), widened beyond the measured k; regret is the speedup a k gives
    up against the best [fraction]. Where baselines ran at two or
    more concurrencies, the forward surface t(B, q) (weights, routed experts
    with --experts/--top-k, KV per sequence, compute per token) and the
    draft's cost are fitted across them too; batch --fit-file sweeps it.
    Where rows have a workload category (bench --prompts), each category's
    accept_len at each k is priced with its group's cycle, and --mix gives a
    traffic mix's speedup at each k and its best k.

    \b
      breakeven fit runs.csv --predict-k 1-8
      breakeven fit runs.csv --out fit.json --json
    """
    from breakeven.jobs.fits import fit_from_file  # lazy: start-up

    result = fit_from_file(runs, **options)
    if options["out"] is not None:
        say(f"Wrote {options['out']}.")
    emit(result, as_json)


@cli.command(epilog=definitions(SCHEDULE_KEYS))
@o.batch_inputs
@o.kv_room
@click.option(
    "--engine",
    "engine",
    type=o.engine_choice,
    required=True,
    help="vllm: Dynamic SD's num_speculative_tokens_per_batch_size; "
    "sglang: --speculative-adaptive-config; vllm-legacy: disable_by_batch_size; "
    "trtllm: draft_len_schedule in the --extra_llm_api_options YAML.",
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
    type=Bounded(1, MAX_BATCH),
    metavar="N",
    help="The server's max_num_seqs (TensorRT-LLM: max_batch_size): where the last range "
    "ends (default: the largest batch swept).",
)
@click.option(
    "--cuda-graph-sizes",
    "graph_sizes",
    callback=sizes,
    metavar="1,2,4,8",
    help="The server's CUDA-graph batch sizes (SGLang's --cuda-graph-bs): SGLang "
    "rounds a batch up to one of them, so the ranges are made of whole buckets.",
)
@click.option(
    "--spec-method",
    "method",
    cls=Renamed,
    old=("--method",),
    metavar="M",
    help="The speculative method for the config (eagle3, mtp, ...; SGLang: EAGLE or EAGLE3).",
)
@click.option(
    "--base-config",
    "base_config",
    callback=json_object,
    metavar="JSON",
    help="The speculative config the server runs (its method, draft model): the "
    "schedule's keys join it.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    callback=writable,
    help="Also write the engine's config as JSON (SGLang: the --speculative-adaptive-config "
    "file; TensorRT-LLM: the --extra_llm_api_options YAML).",
)
@o.output_tokens
@o.force
@o.json_option
def schedule(as_json: bool, **inputs: Any) -> None:
    """The engine config that turns speculation up, down and off with load.

    From batch's inputs (a --cost-curve or a --fit-file surface, acceptance at
    several k, drafting), the best k at every batch size; neighbouring ranges
    merged while a merge costs less than --min-gain of their throughput;
    the gain over the best fixed k, weighted by the time at each batch
    (--load); and the configuration to paste, following the engine's rules.
    From a --fit-file, a schedule its runs do not support (a k or batch
    further beyond them than the fit's held-out error allows, or a held-out
    error larger than the gain) is printed flagged, the reason first, and
    nothing is pasted (--out then writes nothing, exit 2). With --kv-tokens and
    --spec-kv-tokens (or --draft-memory-gib): k is 0 past the most sequences the
    cache holds speculating, and the config never speculates there.

    \b
      breakeven schedule --cost-curve data/llama3_8b_decode_curve.csv \\
          --accept-len-by-k 2:2.36,3:2.79,4:3.08 --draft-step-ms 0.98 --engine vllm
    """
    from breakeven.jobs.schedules import schedule_from_files  # lazy: start-up

    data = schedule_from_files(**inputs, require_config=True)  # never beside a stale --out
    if inputs["out"] is not None:  # written: with no config to write, it raised
        say(f"Wrote {inputs['out']}.")
    emit(data, as_json)
