"""Every quantity breakeven prints: its JSON key, label, unit and definition.

One table serves the text output (labels and units), ``--help`` and
docs/concepts/definitions.md, which a test keeps in step with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Quantity:
    """How one printed number is named, measured and defined."""

    key: str
    """JSON key and Python attribute name."""
    label: str
    """Short human label for tables."""
    unit: str
    """Unit as printed after the value."""
    decimals: int
    """Decimals shown in text tables (JSON carries full precision)."""
    definition: str
    """Meaning and formula, in one sentence."""


_TABLE = (
    Quantity(
        "baseline_tok_s",
        "baseline decode rate",
        "tok/s",
        2,
        "per-sequence decode rate without speculation; 1000 / step_ms",
    ),
    Quantity(
        "step_ms",
        "baseline decode step",
        "ms",
        3,
        "time of one plain decode step of one sequence; 1000 / baseline_tok_s",
    ),
    Quantity(
        "verify_ms",
        "verify forward",
        "ms",
        3,
        "one target forward over the k drafted tokens plus one",
    ),
    Quantity(
        "draft_ms",
        "drafting per cycle",
        "ms",
        3,
        "all drafting in one cycle (k draft steps, or one head pass), not per token",
    ),
    Quantity(
        "overhead_ms",
        "other cycle overhead",
        "ms",
        3,
        "rejection sampling, scheduling and anything else per cycle",
    ),
    Quantity(
        "cycle_ms",
        "speculative cycle",
        "ms",
        3,
        "draft_ms + verify_ms + overhead_ms, or a measured cycle time",
    ),
    Quantity(
        "cost_ratio",
        "draft step cost",
        "target steps",
        4,
        "Leviathan's c: one draft step over one target step; then cycle_ms / step_ms = k * c + 1",
    ),
    Quantity(
        "accept_len",
        "mean acceptance length",
        "tokens/cycle",
        3,
        "tau, mean tokens emitted per cycle, bonus token included; 1 <= tau <= k + 1",
    ),
    Quantity(
        "alpha",
        "per-token acceptance",
        "probability",
        4,
        "Leviathan's i.i.d. acceptance probability; tau = (1 - alpha^(k+1)) / (1 - alpha)",
    ),
    Quantity("k", "draft tokens", "tokens", 0, "tokens drafted per cycle (the paper's gamma)"),
    Quantity(
        "speedup",
        "speedup",
        "x",
        3,
        "speculative over plain per-sequence decode rate; accept_len * step_ms / cycle_ms",
    ),
    Quantity(
        "speedup_low",
        "speedup, low end",
        "x",
        3,
        "the low end of the speedup's interval where a fit file gives the costs: speedup x (1 - "
        "1.5 x the fit's largest held-out error, at least 2%, wider beyond the measured k)",
    ),
    Quantity(
        "speedup_high",
        "speedup, high end",
        "x",
        3,
        "the high end of that interval: speedup x (1 + the same half-width)",
    ),
    Quantity(
        "regret",
        "regret",
        "fraction",
        4,
        "the speedup a k gives up against the best k: 1 - speedup / best speedup",
    ),
    Quantity(
        "spec_tok_s",
        "speculative decode rate",
        "tok/s",
        2,
        "per-sequence decode rate with speculation; 1000 * accept_len / cycle_ms",
    ),
    Quantity(
        "target_speedup",
        "target speedup",
        "x",
        3,
        "S, the speedup each break-even solve aims for (default 1: break even)",
    ),
    Quantity(
        "breakeven_accept_len",
        "break-even accept_len",
        "tokens/cycle",
        3,
        "accept_len at which speedup = S; S * cycle_ms / step_ms",
    ),
    Quantity(
        "breakeven_alpha",
        "break-even alpha",
        "probability",
        4,
        "smallest alpha with tau(alpha, k) >= breakeven_accept_len at this k; null when even alpha = 1 is not enough",
    ),
    Quantity(
        "max_cycle_ms",
        "largest cycle",
        "ms",
        3,
        "largest cycle time that reaches S; accept_len * step_ms / S",
    ),
    Quantity(
        "max_verify_ms",
        "largest verify forward",
        "ms",
        3,
        "largest verify time that reaches S; max_cycle_ms - draft_ms - overhead_ms (null when that is <= 0)",
    ),
    Quantity(
        "max_draft_ms",
        "largest drafting per cycle",
        "ms",
        3,
        "largest drafting time per cycle that reaches S; max_cycle_ms - verify_ms - overhead_ms (null when that is < 0)",
    ),
    Quantity(
        "max_baseline_tok_s",
        "fastest baseline beaten",
        "tok/s",
        2,
        "fastest per-sequence baseline that speculation still beats by S; spec_tok_s / S",
    ),
    Quantity(
        "breakeven_alpha_by_k",
        "break-even alpha by k",
        "probability",
        4,
        "breakeven_alpha for k = 1..8, a list of {k, breakeven_alpha}; the cycle cost is held fixed (or, with cost_ratio, is k * c + 1 target steps)",
    ),
    Quantity(
        "best_k",
        "best k",
        "tokens",
        0,
        "the k with the highest speedup; 0 means do not speculate (no k beats 1)",
    ),
    Quantity(
        "by_k",
        "by k",
        "-",
        3,
        "one row per k considered: k, accept_len, verify_ms, draft_ms, cycle_ms, speedup",
    ),
    Quantity(
        "batch",
        "batch size",
        "sequences",
        0,
        "sequences decoded together; a step of the batch is t(batch)",
    ),
    Quantity(
        "speedup_by_batch",
        "speedup by batch",
        "x",
        3,
        "rows {batch, speedup} (and k with several k): accept_len * t(B) / (t(B * (k + 1)) + draft_ms + overhead_ms)",
    ),
    Quantity(
        "breakeven_batch",
        "break-even batch",
        "sequences",
        0,
        'largest batch with speedup >= 1; null if speculation never pays, "beyond the curve" if it still pays at max_batch',
    ),
    Quantity(
        "max_batch",
        "largest batch covered",
        "sequences",
        0,
        "largest batch swept: the largest whose verify forward the cost curve covers, or --max-batch",
    ),
    Quantity(
        "max_batch_plain",
        "largest batch without speculation",
        "sequences",
        0,
        "with --kv-tokens: the most sequences the KV cache holds without speculation, floor(kv_tokens / tokens_per_sequence)",
    ),
    Quantity(
        "max_batch_spec",
        "largest batch speculating",
        "sequences",
        0,
        "with --kv-tokens: the most sequences it holds with the draft loaded, floor(spec_kv_tokens / (tokens_per_sequence + 2k)) at the smallest k; past it speculation cannot run (speedup null, k = 0)",
    ),
    Quantity(
        "request_rates",
        "the sweep in requests per second",
        "req/s",
        3,
        "with --output-tokens N: by Little's law over decoding, the rate that keeps a batch of B busy, B / (N * TPOT(B)), without speculation (plain_rps, TPOT = t(B)) and with it (spec_rps, TPOT = t(B) / speedup); breakeven_request_rate, the highest rate at which speculation's TPOT at its own batch is below the plain TPOT at the plain batch; plain_capacity_rps and spec_capacity_rps, the most each serves in the batches swept",
    ),
    Quantity(
        "best_k_by_batch",
        "best k by batch",
        "tokens",
        0,
        "ranges [first batch, last batch, k] of the best k; k = 0: do not speculate",
    ),
    Quantity(
        "schedule",
        "schedule",
        "tokens",
        0,
        "ranges [first batch, last batch, k] an engine is configured with, neighbours merged while a merge gives up less than min_gain of their throughput; k = 0: do not speculate",
    ),
    Quantity(
        "best_fixed_k",
        "best fixed k",
        "tokens",
        0,
        "the one k (0: none) of the most throughput over the load: sum over batches of share * B / step_ms(B) * speedup(B, k)",
    ),
    Quantity(
        "gain",
        "gain over the best fixed k",
        "fraction",
        4,
        "the schedule's throughput over the load divided by the best fixed k's, minus 1",
    ),
    Quantity(
        "merge_loss",
        "throughput given up by merging",
        "fraction",
        4,
        "1 - the merged schedule's throughput over the load / the unmerged one's (each change of the best k kept)",
    ),
    Quantity(
        "active_experts",
        "active experts",
        "experts",
        2,
        "expected distinct experts a forward loads: routed N(t) = E * (1 - (1 - K/E)^t), scaled by overlap, plus shared",
    ),
    Quantity(
        "routed_experts",
        "routed experts",
        "experts",
        2,
        "expected distinct routed experts, K + overlap * (N(t) - K)",
    ),
    Quantity(
        "step_active_experts",
        "experts in a one-token step",
        "experts",
        2,
        "active experts of a one-token forward: K plus shared",
    ),
    Quantity(
        "forward_bytes",
        "weights read per forward",
        "bytes",
        0,
        "dense_bytes + expert_bytes * active_experts",
    ),
    Quantity(
        "step_bytes",
        "weights read per step",
        "bytes",
        0,
        "dense_bytes + expert_bytes * step_active_experts",
    ),
    Quantity(
        "verify_step_ratio",
        "verify/step cost ratio",
        "x",
        3,
        "forward_bytes / step_bytes: a memory-bound verify forward over step time",
    ),
)
QUANTITIES: dict[str, Quantity] = {q.key: q for q in _TABLE}

# Bounds on the sizes a sweep may be asked for (--help and the docs name them): the largest
# k tried, and the largest batch swept.  Real drafters use k <= 20 or so and engines batch at
# most a few thousand sequences; past these a sweep takes seconds and memory for nothing.
MAX_K = 128
MAX_BATCH = 4096
MAX_SPEC_TOKENS = 4096  # k as ingest -k records it: any a server may use, within an int64
MAX_EXPERTS = 100_000  # a MoE's experts per layer (fit --experts, --top-k, a fit file's moe)

CYCLE_COEFFICIENT_UNITS = {
    "verify_base_ms": "ms per cycle",
    "verify_per_token_ms": "ms per draft token",
    "draft_per_token_ms": "ms per draft token",
    "draft_per_cycle_ms": "ms per cycle",
    "overhead_ms": "ms per cycle",
    "curvature_ms": "ms per draft token squared",
}
"""Each coefficient of ``fit``'s cycle model, ``cycle(k) = verify_base_ms +
verify_per_token_ms * k + draft(k) + overhead_ms (+ curvature_ms * k**2 in the curved
form)``, and its unit.  Only ``curvature_ms`` may be negative (a concave cycle)."""

SURFACE_TERM_UNITS = {
    "weights_ms": "ms per forward",
    "expert_ms": "ms per routed expert loaded",
    "kv_ms": "ms per sequence",
    "compute_ms": "ms per token",
    "draft_step_ms": "ms per draft step",
    "draft_token_ms": "ms per draft token",
    "spec_seq_ms": "ms per sequence per cycle",
}
"""Each term of a forward surface t(B, q) across batch sizes and of its draft cost, and its
unit."""

STEPS_BETWEEN = (
    "at other batches, the fitted t(B, 1) scaled by the measured steps' ratio to it, "
    "interpolated on log batch between them (the nearest one's beyond)"
)
"""What a fit file's surface takes as the plain step where no baseline ran
(:meth:`breakeven.model.surface.BatchSurface.step_ms`), as ``batch``, ``schedule`` and ``fleet``
say it."""

DEFAULT_TOLERANCE = 0.05
"""The relative tolerance [fraction] of check, compare and schedule checks by default: baseline
drift, prediction mismatch and server/client agreement within 5%."""

LAUNCH_SPREAD_LIMIT = 1.5
"""The largest ratio [x] of the fastest to the slowest launch (server start) of one
configuration that is still a configuration's own noise.  Launches of one configuration on a
real engine differ by far less: 1.10-1.20x for llama.cpp's llama-server on a loaded 2-core CPU
(the engine suite, tests/test_llamacpp.py), a few percent on a quiet GPU host.  Beyond 1.5x,
and beyond what each launch's own spread explains, the host decided the numbers, not the
configuration (``check``'s ``launches_disagree``)."""

LARGEST_FIXED = 1e15
"""Numbers this large or larger are printed in exponent notation in text (never 300 digits)."""


def as_percent(value: float) -> float | None:
    """The fraction a value above 1 and at most 100 reads as, where a fraction (an alpha, an
    acceptance_rate) was meant and a percent was written (86.4 -> 0.864); None otherwise."""
    return value / 100 if 1 < value <= 100 else None


def number_text(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals, or in exponent notation from :data:`LARGEST_FIXED`
    on; a value that is not finite (an overflow) is ``"overflow"``, or ``"-"`` for NaN."""
    if value != value:
        return "-"
    if abs(value) == float("inf"):
        return "overflow"
    if abs(value) >= LARGEST_FIXED:
        return f"{value:.{max(decimals, 3)}e}"
    return f"{value:.{decimals}f}"


def plain_json(value: object, *, keep_infinite: bool = False) -> object:
    """``value`` as strict JSON takes it, all the way down: NaN (a quantity no value
    satisfies, or one not measured) made None, tuples made lists, and a dataclass instance a
    dict of its fields (as ``dataclasses.asdict`` makes it, without its deep copy).

    Infinities are made None too, unless ``keep_infinite``: a result whose infinities can only
    be an overflow of absurd inputs keeps them, for the command line to refuse in one line.
    This is the one place a result's ``to_dict()`` turns numbers into JSON.
    """
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return value if keep_infinite and not math.isnan(value) else None
    if isinstance(value, dict):
        return {k: plain_json(v, keep_infinite=keep_infinite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v, keep_infinite=keep_infinite) for v in value]
    if hasattr(type(value), "__dataclass_fields__") and not isinstance(value, type):
        return {
            f.name: plain_json(getattr(value, f.name), keep_infinite=keep_infinite)
            for f in fields(value)
        }
    return value
