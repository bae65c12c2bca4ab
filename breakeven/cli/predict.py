"""``breakeven predict``, ``optimize``, ``batch`` and ``moe``: the model, from costs and acceptance."""

from __future__ import annotations

from typing import Any

import click

from breakeven.cli import options as o
from breakeven.cli.group import cli
from breakeven.cli.params import FLOAT, Bounded, definitions, emit

PREDICT_KEYS = [
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
BATCH_KEYS = [
    "speedup_by_batch",
    "breakeven_batch",
    "max_batch",
    "best_k_by_batch",
    "max_batch_plain",
    "max_batch_spec",
    "request_rates",
]
MOE_KEYS = [
    "active_experts",
    "routed_experts",
    "step_active_experts",
    "forward_bytes",
    "step_bytes",
    "verify_step_ratio",
]


@cli.command(epilog=definitions(PREDICT_KEYS))
@o.predict_inputs
@o.fit_file
@click.option(
    "--target",
    "target_speedup",
    type=FLOAT,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Speedup the break-even solves aim for [x].",
)
@o.json_option
def predict(as_json: bool, **inputs: Any) -> None:
    """Speedup and break-even thresholds from measured costs and acceptance.

    Prints every quantity its inputs determine. The example below is the case study.

    \b
      breakeven predict --baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1
    """
    from breakeven.jobs.inputs import predict_from_files  # lazy: start-up

    emit(predict_from_files(**inputs), as_json)


tree_options = o.options(
    click.option(
        "--tree",
        "tree",
        is_flag=True,
        help="Search tree drafts (SGLang's "
        "--speculative-num-steps, --speculative-eagle-topk, "
        "--speculative-num-draft-tokens) instead of k: with --fit-file (a forward "
        "surface and a tree acceptance), or --cost-curve and --alpha.",
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
        type=Bounded(1, 64),
        default=8,
        show_default=True,
        metavar="S",
        help="With --tree: the most draft steps searched.",
    ),
    click.option(
        "--max-topk",
        "max_topk",
        type=Bounded(1, 64),
        default=8,
        show_default=True,
        metavar="T",
        help="With --tree: the most branches per step searched.",
    ),
    click.option(
        "--max-verify-tokens",
        "max_verify_tokens",
        type=Bounded(2, 4096),
        default=64,
        show_default=True,
        metavar="N",
        help="With --tree: the most tokens per sequence in the verify forward.",
    ),
)


@cli.command(epilog=definitions(["best_k", "speedup", "by_k", "step_ms", "batch"]))
@o.optimize_inputs
@o.fit_file
@tree_options
@o.json_option
def optimize(as_json: bool, **inputs: Any) -> None:
    """The number of draft tokens k with the highest speedup.

    Either Leviathan's form (--alpha A --cost-ratio C) or measured costs (a
    baseline, --verify-ms or --cost-curve, drafting, overhead) with acceptance
    as --alpha, --per-position or --accept-len-by-k. best_k = 0 means: do not
    speculate, no k beats plain decoding.

    \b
      breakeven optimize --alpha 0.8 --cost-ratio 0.05
      breakeven optimize --baseline-tok-s 62.9 --verify-ms 28.7 --draft-step-ms 0.2 \\
          --accept-len-by-k 1.6,1.9,2.05,2.1
    """
    from breakeven.jobs.inputs import optimize_from_files  # lazy: start-up

    emit(optimize_from_files(**inputs), as_json)


@cli.command(epilog=definitions(BATCH_KEYS))
@o.batch_inputs
@o.kv_room
@o.output_tokens
@o.json_option
def batch(as_json: bool, **inputs: Any) -> None:
    """Speedup against batch size, and the batch where speculation stops paying.

    At batch B: speedup = accept_len * t(B) / (t(B * (k + 1)) + drafting + overhead),
    with t the --cost-curve; or, with --fit-file, accept_len * t(B, 1) / (t(B, k + 1)
    + draft(B, k) + overhead) on the surface breakeven fit fitted across batch
    sizes. Give -k with --accept-len, or acceptance at several k (--alpha,
    --per-position, --accept-len-by-k) for the best k at every batch. With
    --kv-tokens, and --spec-kv-tokens or --draft-memory-gib: the draft's memory;
    past the most sequences the cache holds speculating, speculation cannot run.
    With --output-tokens: the same in requests per second, and the request rate
    where speculation stops paying.

    \b
      breakeven batch --cost-curve data/llama3_8b_decode_curve.csv --accept-len 2.1 -k 3
    """
    from breakeven.jobs.inputs import batch_from_files  # lazy: start-up

    emit(batch_from_files(**inputs), as_json)


@cli.command(epilog=definitions(MOE_KEYS))
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
@o.json_option
def moe(as_json: bool, **inputs: Any) -> None:
    """Experts a Mixture-of-Experts forward loads, and its cost against a one-token step.

    Uniform top-K routing of T tokens over E experts loads
    N(T) = E * (1 - (1 - K/E)^T) distinct experts on average.

    \b
      breakeven moe --experts 384 --top-k 8 --shared 1 --tokens 7
    """
    from breakeven.prediction.moe import moe_summary  # lazy: start-up

    emit(moe_summary(**inputs), as_json)
