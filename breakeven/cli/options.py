"""Options that several commands share, alone and in bundles; each command's own options are
written out above it."""

from __future__ import annotations

from typing import Any

import click

from breakeven.cli.params import (
    FLOAT,
    Bounded,
    CommandLineError,
    LibraryChoice,
    Renamed,
    Values,
    accept_lens,
    flag,
    floats,
    levels,
    number,
)
from breakeven.core.quantities import DEFAULT_TOLERANCE, MAX_BATCH, MAX_K, MAX_SPEC_TOKENS

MS = "[ms]"


def options(*decorators: Any) -> Any:
    """Several click options as one decorator, in the order given."""

    def apply(f: Any) -> Any:
        for decorator in reversed(decorators):
            f = decorator(f)
        return f

    return apply


def _keep_format(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None:
        ctx.meta["breakeven.format"] = value
    return value


json_only = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object instead of a table."
)
"""``--json`` alone, for a command whose ``--format`` names what it reads (ingest)."""


def json_option(command: Any) -> Any:
    """``--json``, and ``--format text|json|markdown|csv`` (markdown and csv: the main table,
    every column, where the command prints one); ``emit`` reads the format."""
    command = click.option(
        "--format",
        "output_format",
        type=LibraryChoice("breakeven.core.display", "OUTPUT_FORMATS"),
        default=None,
        expose_value=False,
        callback=_keep_format,
        help="text (the default, fitted to the terminal), json (as --json), or the main "
        "table, every column, as markdown or csv.",
    )(command)
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON object instead of a table."
    )(command)


force = click.option("--force", is_flag=True, help="Replace --out if it exists.")
baseline = click.option(
    "--baseline-tok-s",
    "baseline_tok_s",
    cls=Renamed,
    old=("--baseline",),
    type=FLOAT,
    metavar="TOK_S",
    help="Per-sequence decode rate without speculation [tok/s].",
)
step = click.option(
    "--step-ms",
    "step_ms",
    type=FLOAT,
    metavar="MS",
    help=f"Baseline decode step, instead of --baseline-tok-s {MS}.",
)
overhead = click.option(
    "--overhead-ms",
    "overhead_ms",
    type=FLOAT,
    metavar="MS",
    help=f"Other per-cycle cost: sampling, scheduling (default 0) {MS}.",
)
draft_step = click.option(
    "--draft-step-ms",
    "draft_step_ms",
    type=FLOAT,
    metavar="MS",
    help=f"One draft step; drafting costs k of them per cycle {MS}.",
)
k = click.option(
    "-k",
    "--num-spec-tokens",
    "k",
    cls=Renamed,
    old=("--draft-tokens", "--steps"),
    type=int,
    metavar="K",
    help="Draft tokens per cycle (a tree's steps).",
)
accept_len = click.option(
    "--accept-len",
    "accept_len",
    type=FLOAT,
    metavar="TAU",
    help="Mean tokens emitted per cycle, bonus token included [tokens/cycle].",
)
alpha = click.option(
    "--alpha", "alpha", type=FLOAT, metavar="A", help="Per-token acceptance probability (i.i.d.)."
)
per_position = click.option(
    "--per-position",
    "per_position",
    callback=floats,
    metavar="0.9,0.8,0.6",
    help="Per-position acceptance rates (vLLM prints them); tau(k) = 1 + a_1 + ... + a_k.",
)
accept_len_by_k = click.option(
    "--accept-len-by-k",
    "accept_len_by_k",
    callback=accept_lens,
    metavar="2.36,2.79,3.08",
    help="Measured mean acceptance length [tokens/cycle] for "
    "k = 1, 2, 3, ..., or for the k given as K:TAU "
    "(2:1.64,3:1.72,5:1.80).",
)
max_k = click.option(
    "--max-k",
    "k_max",
    type=Bounded(1, MAX_K),
    default=16,
    show_default=True,
    help=f"Largest k considered (1 to {MAX_K}).",
)
fit = click.option(
    "--fit",
    type=LibraryChoice("breakeven.core.choices", "COST_FORMS"),
    default=None,
    help="Fit the curve (scipy least squares) and extrapolate beyond it: "
    "linear a + b*n, or the roofline knee max(a, b*n) + c. Without it, "
    "the curve's points are interpolated.",
)
engine_choice = LibraryChoice("breakeven.render.engine_configs", "SCHEDULE_ENGINES")


# The cycle's cost given for every speculative run, for a prediction (compare, plot check).
cycle_costs = options(
    click.option(
        "--verify-ms",
        "verify_ms",
        type=FLOAT,
        metavar="MS",
        help="Verify forward of the speculative cycle [ms], for a prediction.",
    ),
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help="All drafting in the cycle [ms] (with --verify-ms).",
    ),
    click.option(
        "--cycle-ms",
        "cycle_ms",
        type=FLOAT,
        metavar="MS",
        help="The whole speculative cycle [ms], instead of --verify-ms and --draft-ms.",
    ),
)

# The inputs of predict (and of plot surface, which draws from them).
predict_inputs = options(
    baseline,
    step,
    click.option(
        "--verify-ms",
        "verify_ms",
        type=FLOAT,
        metavar="MS",
        help=f"One target forward over k + 1 tokens {MS}.",
    ),
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"All drafting in one cycle, not per token (default 0) {MS}.",
    ),
    overhead,
    click.option(
        "--cycle-ms",
        "cycle_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Measured cycle time, instead of the three costs above {MS}.",
    ),
    accept_len,
    alpha,
    k,
    per_position,
    click.option(
        "--cost-ratio",
        "cost_ratio",
        type=FLOAT,
        metavar="C",
        help="Leviathan's c: draft step / target step, verify = one target step; needs -k.",
    ),
)

# The inputs of optimize (and of plot k).
optimize_inputs = options(
    alpha,
    per_position,
    accept_len_by_k,
    click.option(
        "--cost-ratio",
        "cost_ratio",
        type=FLOAT,
        metavar="C",
        help="Leviathan's c: draft step / target step, verify = one target step.",
    ),
    baseline,
    step,
    click.option(
        "--verify-ms",
        "verify_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Verify forward, the same at every k {MS}.",
    ),
    click.option(
        "--cost-curve",
        "verify_curve",
        cls=Renamed,
        old=("--verify-curve",),
        type=click.Path(dir_okay=False),
        metavar="CSV",
        help="Forward time against tokens per forward: columns "
        "tokens,ms. Its time at `batch` tokens is the step unless a baseline is given.",
    ),
    fit,
    draft_step,
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Drafting per cycle that does not grow with k {MS}.",
    ),
    overhead,
    click.option(
        "--batch",
        "batch",
        type=int,
        default=1,
        show_default=True,
        help="Sequences decoded together (with --cost-curve).",
    ),
    max_k,
)

context = click.option(
    "--context",
    "context",
    type=Bounded(1, 10**8),
    metavar="N",
    help="With --fit-file: price the step and the cycle at N tokens of context, from the "
    "fit's runs at two or more context lengths [tokens].",
)
"""``--context N``: predict, optimize, batch and schedule with a fit file."""

# The inputs of batch (and of schedule, plot batch and plot schedule).
batch_inputs = options(
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
        type=Bounded(1, 10**6),
        metavar="N",
        help="Which surface of --fit-file (1 = the first), when it holds several.",
    ),
    context,
    fit,
    accept_len,
    k,
    alpha,
    per_position,
    accept_len_by_k,
    max_k,
    click.option(
        "--draft-ms",
        "draft_ms",
        type=FLOAT,
        metavar="MS",
        help=f"Drafting per cycle, the same at every batch {MS}.",
    ),
    draft_step,
    overhead,
    click.option(
        "--topk",
        "topk",
        type=Bounded(1, MAX_SPEC_TOKENS),
        default=1,
        show_default=True,
        metavar="T",
        help="A tree draft at the one operating "
        "point: branches per draft step (-k is then its steps, accept_len <= k + 1).",
    ),
    click.option(
        "--verify-tokens",
        "verify_tokens",
        type=Bounded(1, MAX_SPEC_TOKENS),
        metavar="N",
        help="Tokens per sequence in the verify forward (a tree's "
        "num_draft_tokens; default k + 1).",
    ),
    click.option(
        "--max-batch",
        "max_batch",
        type=Bounded(1, MAX_BATCH),
        metavar="N",
        help=f"Largest batch to sweep, 1 to {MAX_BATCH} (default: the largest the "
        "curve covers; 256 with --fit).",
    ),
)

# The KV cache with and without speculation, for batch and schedule (breakeven.model.memory).
kv_room = options(
    click.option(
        "--kv-tokens",
        "kv_tokens",
        metavar="N|LOG",
        help="The KV cache capacity without speculation [tokens], or the server log that "
        "prints it (vLLM's GPU KV cache size, SGLang's max_total_num_tokens). With the "
        "capacity with speculation, the sweep ends at the most sequences the cache holds, "
        "and speculation has no speedup past the most it holds with the draft.",
    ),
    click.option(
        "--spec-kv-tokens",
        "spec_kv_tokens",
        metavar="N|LOG",
        help="The capacity with speculation [tokens], or the log of the server launched with it.",
    ),
    click.option(
        "--draft-memory-gib",
        "draft_memory_gib",
        type=FLOAT,
        metavar="G",
        help="Instead of --spec-kv-tokens: what the draft takes (weights, its own cache and "
        "graphs) [GiB]; with --kv-bytes-per-token.",
    ),
    click.option(
        "--kv-bytes-per-token",
        "kv_bytes_per_token",
        metavar="B|CONFIG",
        help="The target's KV cache per token [bytes], or its Hugging Face config.json (a "
        "16-bit cache over its full-attention layers): turns --draft-memory-gib into tokens.",
    ),
    click.option(
        "--tokens-per-sequence",
        "tokens_per_sequence",
        type=Bounded(1, 10**8),
        metavar="N",
        help="Each sequence's cached tokens, prompt and output [tokens] (default: --context); "
        "a speculating one holds 2k more (the drafts verified and the next ones).",
    ),
)
"""``--kv-tokens`` and the rest: the draft's memory, for batch and schedule."""

# A fit file's group, for predict and optimize.
fit_file = options(
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
        type=Bounded(1, 10**6),
        metavar="N",
        help="Which group of --fit-file (1 = the first), when it holds several.",
    ),
    context,
)

# What breakeven schedule printed, for check and compare.
year = click.option(
    "--year",
    "year",
    type=Bounded(1970, 2100),
    metavar="YYYY",
    help="The year of dates logged without one (vLLM's MM-DD HH:MM:SS): timestamp and "
    "launched_at then read YYYY-MM-DDTHH:MM:SS. Without it they stay as printed.",
)
"""``ingest`` and ``compare``'s ``--year``."""

schedule_file = click.option(
    "--schedule",
    "schedule_file",
    type=click.Path(dir_okay=False),
    metavar="SCHEDULE.json",
    help="What breakeven schedule --json printed: each run's measured speedup against the "
    "schedule's k and predicted speedup at its batch.",
)


fit_check_file = click.option(
    "--fit-file",
    "fit_file",
    type=click.Path(dir_okay=False),
    metavar="FIT.json",
    help="What breakeven fit --out wrote: each run's measured speedup against the speedup "
    "the fit predicts at its k (its accept_len x the baseline's step / the fitted cycle), "
    "with the fit's interval.",
)


mix = click.option(
    "--mix",
    "mix",
    metavar="CAT=SHARE,...",
    help="A traffic mix, each category's share of the decoded tokens (code=0.6,chat=0.3,"
    "math=0.1; normalised): the speedup for that traffic, the categories that lose and the "
    "share of them at which speculation stops paying (fit: the mix's speedup at each k, and "
    "its best k). Needs rows with a category (bench --prompts with a category field).",
)


def tolerance(help: str) -> Any:
    """``--tolerance F``, by default :data:`breakeven.core.quantities.DEFAULT_TOLERANCE`."""
    return click.option(
        "--tolerance",
        type=FLOAT,
        default=DEFAULT_TOLERANCE,
        show_default=True,
        metavar="F",
        help=help,
    )


def concurrency(help: str) -> Any:
    """``--concurrency N [N ...]``: load levels [requests in flight], 1 by default."""
    return click.option(
        "--concurrency",
        cls=Values,
        default="1",
        show_default=True,
        callback=levels,
        metavar="N [N ...]",
        help=help,
    )


server_env_from = click.option(
    "--server-env-from",
    "server_env_from",
    metavar="PID|FILE",
    help="Where the server's environment is, when it does not run on this host as your user: "
    "its process id, its systemd unit (Environment=, EnvironmentFile=, ExecStart=), docker "
    "inspect's JSON, or a KEY=VALUE file. Only NCCL_*, CUDA_*, VLLM_*, SGLANG_*, LLAMA_ARG_*, "
    "OMP_* and TORCH_* variables are kept.",
)


open_loop = options(
    click.option(
        "--request-rate",
        "request_rate",
        cls=Values,
        callback=lambda ctx, param, value: rates(param, value),
        metavar="R [R ...]",
        help="Open-loop levels instead [req/s], e.g. --request-rate 1 4 16: each level sends its "
        "requests on a schedule (Poisson gaps by default), whatever the server's progress, so "
        "requests pile up where it falls behind. Not with --concurrency.",
    ),
    click.option(
        "--burstiness",
        type=FLOAT,
        default=1.0,
        show_default=True,
        metavar="B",
        help="With --request-rate: the gaps between requests are gamma-distributed with shape B "
        "and mean 1/R [s] (coefficient of variation 1/sqrt(B)): 1 is Poisson, above 1 evener, "
        "below 1 burstier (vllm bench serve's --burstiness).",
    ),
    click.option(
        "--max-concurrency",
        "max_concurrency",
        type=int,
        metavar="N",
        help="With --request-rate: at most N requests in flight [requests]; a due request waits "
        "for a slot, and its ttft_ms and e2e_ms count the wait (default: no cap).",
    ),
    click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        metavar="S",
        help="With --request-rate: seeds the arrival schedule; the same seed and flags send the "
        "same schedule (gaps and prompts), for the baseline and the speculative run alike.",
    ),
)
"""``--request-rate R [R ...]`` (open-loop levels [req/s]) and what shapes them:
``--burstiness``, ``--max-concurrency`` and ``--seed`` (bench's and sweep's)."""


sampling = options(
    click.option(
        "--ignore-eos/--no-ignore-eos",
        "ignore_eos",
        default=True,
        show_default=True,
        help="Generate every request to --max-tokens, past the end of its text, so that a "
        "baseline and a speculative run decode the same tokens; --no-ignore-eos: each stops "
        "where the model ends it, as in service (its rows count the tokens it generated).",
    ),
    click.option(
        "--temperature",
        type=FLOAT,
        default=0.0,
        show_default=True,
        metavar="T",
        help="Sampling temperature sent with every request (0: greedy) [-].",
    ),
    click.option(
        "--top-p",
        "top_p",
        type=FLOAT,
        default=1.0,
        show_default=True,
        metavar="P",
        help="Nucleus sampling mass sent with every request (1: every token) [fraction].",
    ),
)
"""``--ignore-eos/--no-ignore-eos``, ``--temperature`` and ``--top-p``: the sampling settings
sent with every request and recorded in every row (bench's and sweep's)."""


def rates(param: click.Parameter, value: str | None) -> tuple[float, ...] | None:
    """``1 4 16`` or ``1,4,16``: request rates [req/s], checked by the bench's settings."""
    if value is None:
        return None
    try:
        found = tuple(number(v, param) for v in value.replace(",", " ").split())
    except CommandLineError:  # already one line naming the flag
        raise
    except ValueError:
        raise CommandLineError(
            f"{flag(param)}: got {value!r}, expected requests per second such as 1 4 16"
        ) from None
    if not found:
        raise CommandLineError(f"{flag(param)}: got no rate, expected such as 1 4 16")
    return found


def one_load_axis(given: dict[str, Any]) -> None:
    """--request-rate or --concurrency, not both; the open-loop flags only with --request-rate.
    Without --request-rate, --concurrency's default (1) stands."""
    ctx = click.get_current_context()

    def typed(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source not in (None, click.core.ParameterSource.DEFAULT)

    if given.get("request_rate") is None:
        for name in ("burstiness", "seed", "max_concurrency"):
            if typed(name) and given.get(name) is not None:
                raise CommandLineError(
                    f"--{name.replace('_', '-')}: shapes an open-loop level; give "
                    "--request-rate too (closed loop: --concurrency)"
                )
        return
    if typed("concurrency"):
        raise CommandLineError(
            "--request-rate: give either --request-rate (open loop) or --concurrency "
            "(closed loop), not both"
        )
    given["concurrency"] = None


slo = click.option(
    "--slo",
    "slo",
    metavar="'METRIC[:pP]<=MS,...'",
    help="A service-level objective: bounds on ttft_ms, tpot_ms, itl_ms or e2e_ms, as "
    "vllm bench serve --goodput names them, e.g. 'tpot_ms<=50,ttft_ms:p90<=2000'. A bound "
    "without :pP holds for each request (goodput, attainment); with one, for the level's "
    "P-th percentile. Adds each level's goodput and SLO attainment, and the break-even "
    "request rate by goodput.",
)
"""``--slo``: check's, compare's and sweep's service-level objective."""


output_tokens = click.option(
    "--output-tokens",
    "output_tokens",
    type=Bounded(1, 100_000_000),
    metavar="N",
    help="Tokens each request decodes, on average: the thresholds in requests per second "
    "too, by Little's law over decoding (rate = B / (N x TPOT at batch B)) [tokens].",
)
"""``--output-tokens N``: batch's and schedule's thresholds in requests per second."""
