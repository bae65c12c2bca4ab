"""SGLang's scheduler log: ``Decode batch`` lines, and the prefill lines that show idle time;
and a request's ``meta_info`` printed whole (its request log line, or ``/generate``'s reply),
whose speculative counts give the request's own accept_len (:func:`_requests`).

Source: ``python/sglang/srt/managers/scheduler_metrics_mixin.py``,
``log_decode_stats`` (2025 ``Decode batch.``, 2026 ``Decode batch,``):
``#running-req``, ``#token``, ``token usage``, then ``accept len`` (and, from
late 2025, ``accept rate``) only ``if not self.spec_algorithm.is_none()``, then
``cuda graph`` and ``gen throughput (token/s)``, ``#queue-req``.  ``accept len`` and
``accept rate`` are added by one statement, ``msg += f"accept len: ..., accept rate: ..., "``,
in the ``else`` of ``if self.spec_algorithm.is_none()`` (sgl-project/sglang commits
78ac30c2056f2c25089c1d3203c3d5c13dc3d946 and 01bb3c807f7e62c19a31de7548837505488c2b64; before
late 2025 the statement printed ``accept len`` alone).  So either field on a decode line proves
its server was speculating, and a decode line with neither proves it was not: a baseline line
(k = 0).  A line that kept ``accept rate`` but lost ``accept len`` (a paste cut across the
columns, the pr25960 fixture: ``token usaccept rate: 0.32``) is speculative: it gets k (``-k``,
else the launch line's steps, else none) and no ``accept_len``, never 1 and never k = 0.

``-k`` (``num_spec_tokens``) wins over the launch line for every speculative line; a line with
no speculative field stays a baseline even with ``-k`` (a comparison ingests the baseline log and
the speculative log with one ``-k``).

``accept len`` is accepted tokens per verify pass, bonus token included
(``spec_num_accepted_tokens / spec_num_forward_ct``, ``update_spec_metrics`` adding
``num_accepted_tokens + bs``).  ``accept rate`` is not a per-draft-token rate: it is the same
accepted tokens, bonus included, over ``spec_num_forward_ct * num_draft_tokens``, with
``num_draft_tokens = speculative_num_draft_tokens or speculative_num_steps + 1`` (the verify
tokens, of a tree too): ``accept len / verify tokens``, so ``1 + k x rate`` is not the accept
length even for a chain (k + 1 verify tokens: ``accept len = (k + 1) x rate``).  Before PR #11572
(October 2025, "the accept rate can be larger than 1") it was computed otherwise, and it is
printed to two decimals (times 16 verify tokens, +/-0.08): no accept length is derived from it,
and ``acceptance_rate`` is recomputed from ``accept len`` and k where ``accept len`` is printed.

``gen throughput`` is the tokens of the interval over the wall time since the
previous decode line, for all running requests: the per-sequence rate is
``gen throughput / #running-req``.  After idle time (no decode line yet, or a
prefill line reporting an empty batch, ``#running-req: 0``) the next decode
line's interval spans the idle time: it is flagged ``first_after_idle`` and
gets no rate; its ``#running-req``, printed on the line, is still its concurrency.

``context_tokens`` is ``#token / #running-req``: the tokens the running requests hold in the
KV cache, per sequence, at the line (0 running requests: none).  ``#token`` is
``num_used = max_total_num_tokens - (available_size + evictable_size)``
(``_get_token_info``, ``scheduler.py`` / ``scheduler_metrics_mixin.py``; 2026:
``SchedulerPoolStatsObserver._get_token_info``).  The radix cache's tokens of finished
requests are not in it: a node no running request holds has ``lock_ref == 0`` and counts as
evictable (``RadixCache.inc_lock_ref`` / ``dec_lock_ref`` move a node between evictable and
protected), so it is usable; what it still differs by:

- it is the count when the line is logged, the end of its window: above the window's mean by
  half the tokens each sequence gained in it (``decode_log_interval`` steps, 40 by default,
  times the accept length);
- a prefix the running requests share (a radix-cache hit) is held once, so where they share one
  the count per sequence is below each one's own context;
- it also counts tokens held for requests not in ``#running-req``: a chunked prefill under
  way, and with prefill-decode disaggregation the pre-allocated KV of requests still arriving
  (lines with ``#prealloc-req`` or ``#transfer-req`` above 0 get no context for that reason),
  and up to a page less one token per request with ``--page-size`` above 1;
- hybrid models print ``#full token`` / ``#swa token`` and HiSparse (2026) ``#gpu token``
  instead of ``#token``: no context.  Before PR #22331 (April 2026) HiSparse printed its
  device pool as ``#token``, which stays flat while requests grow (the pr22331 fixture: 20800
  for 5 requests over 10 s at 140 tokens/s); nothing on the line tells it apart.

The launch line, ``server_args=ServerArgs(...)`` (``launch_server`` logs the
dataclass after its own adjustments, e.g. ``speculative_num_draft_tokens`` set
to steps + 1 when topk is 1), says how the server drafts: the decode records
after it take ``speculative_num_steps`` as k (unless ``-k`` is given),
``speculative_eagle_topk`` as ``spec_topk``, ``speculative_num_draft_tokens`` as
``verify_tokens``, ``speculative_algorithm`` (lower case) as ``spec_method``
and ``served_model_name`` as the model.  Its fields are the launch's ``env`` (those that
are None left out: the dataclass prints every field, set or not), its timestamp
``launched_at``; a second such line (a restart) starts another launch.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from breakeven.iotools.lines import Engine, Field, LineKind, call_env, carry_launch, env_from

DECODE = "sglang_decode"
IDLE = "sglang_idle"  # a prefill line reporting an empty batch: never a record
ONE_BATCH = "sglang_bench_one_batch"  # its printed summary line, as the JSONL's records
REQUEST = "sglang_request"  # a request's meta_info, printed whole (request logs, /generate)
LAUNCH = "sglang_server_args"
_NO_ACCEPT_LEN = "speculative (accept rate printed) but accept len not printed: no accept_len"
_LAUNCH_COLUMNS = {
    "launch_model": pl.String,
    "launch_method": pl.String,
    "launch_steps": pl.Float64,
    "launch_topk": pl.Float64,
    "launch_verify_tokens": pl.Float64,
}

_TIMESTAMP = Field(
    "timestamp",
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)",
    "time",
    kind="text",
    transform=lambda e: e.str.replace(" ", "T", literal=True),
)


def _meta(name: str, keys: str) -> Field:
    """A whole number of a printed meta_info, ``'key': N`` or ``"key":N``, under any of
    ``keys`` (alternatives joined by ``|``)."""
    return Field(name, rf"""['"](?:{keys})['"]\s*:\s*(\d+)""", keys.split("|")[0])


KINDS = (
    LineKind(
        DECODE,
        "sglang",
        "Decode batch",
        fields=(
            _TIMESTAMP,
            Field("running_reqs", r"#running-req: ([^,]*)", "#running-req"),
            Field("tokens_in_use", r"#token: ([^,]*)", "#token"),
            Field("accept_len", r"accept len: ([^,]*)", "accept len"),
            # Printed only while speculating (with or without a value): the line speculates.
            Field("spec_field", r"(accept len|accept rate):", "accept len/rate", kind="text"),
            Field("gen_tok_s", r"gen throughput \(token/s\): ([^,]*)", "gen throughput (token/s)"),
            Field("queue_reqs", r"#queue-req: ([^,]*)", "#queue-req"),
            # Prefill-decode disaggregation (decode side): pre-allocated KV counts in #token.
            Field("prealloc_reqs", r"#prealloc-req: ([^,]*)", "#prealloc-req"),
            Field("transfer_reqs", r"#transfer-req: ([^,]*)", "#transfer-req"),
        ),
        required=("running_reqs", "gen_tok_s"),
    ),
    LineKind(IDLE, "sglang", "Prefill batch", match=r"#running-req: 0(?:,|\s*$)"),
    LineKind(
        LAUNCH,
        "sglang",
        "server_args=ServerArgs(",
        fields=(
            Field(
                "launch_time",
                _TIMESTAMP.pattern,
                "time",
                kind="text",
                transform=_TIMESTAMP.transform,
            ),
            Field(
                "launch_env",
                r"server_args=ServerArgs\((.*)\)\s*$",
                "server_args",
                kind="text",
                transform=lambda e: env_from(e, call_env),
            ),
            Field(
                "launch_model", r"\bserved_model_name='([^']*)'", "served_model_name", kind="text"
            ),
            Field(
                "launch_method",
                r"\bspeculative_algorithm='([^']*)'",
                "speculative_algorithm",
                kind="text",
                transform=lambda e: e.str.to_lowercase(),
            ),
            Field("launch_steps", r"\bspeculative_num_steps=([^,)]*)", "speculative_num_steps"),
            Field("launch_topk", r"\bspeculative_eagle_topk=([^,)]*)", "speculative_eagle_topk"),
            Field(
                "launch_verify_tokens",
                r"\bspeculative_num_draft_tokens=([^,)]*)",
                "speculative_num_draft_tokens",
            ),
        ),
    ),
    # A request's meta_info, as a Python dict (the request log's "Finish: ... out={...}", a
    # script printing /generate's result) or as JSON (/generate's reply): with speculation,
    # spec_verify_ct (its verify forwards, sgl-project/sglang PR 3152), the accepted and
    # drafted tokens under the names of their time (spec_accept_token_num and
    # spec_draft_token_num, 2025; spec_accepted_drafts, spec_num_correct_drafts), and
    # completion_tokens.
    LineKind(
        REQUEST,
        "sglang",
        "spec_verify_ct",
        fields=(
            _meta("req_steps", "spec_verify_ct"),
            _meta(
                "req_accepted", "spec_accept_token_num|spec_accepted_drafts|spec_num_correct_drafts"
            ),
            _meta(
                "req_drafted", "spec_draft_token_num|spec_proposed_drafts|spec_num_proposed_drafts"
            ),
            _meta("completion_tokens", "completion_tokens"),
            _meta("prompt_tokens", "prompt_tokens"),
        ),
        required=("req_steps",),
    ),
    # bench_one_batch prints "Decode.  median latency: 0.02711 s, median throughput: 36.88
    # token/s" per run: the target's decode step at a batch size (throughput = batch / latency).
    LineKind(
        ONE_BATCH,
        "sglang",
        "Decode.  median latency:",
        fields=(
            Field("median_latency_s", r"median latency: *([^ ,]*) s", "median latency"),
            Field("aggregate_tok_s", r"median throughput: *([^ ,]*) token/s", "median throughput"),
        ),
        required=("median_latency_s", "aggregate_tok_s"),
    ),
)


def sequence(
    rows: pl.DataFrame, state: dict[str, Any], k: int | None, final: bool
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """Decode records; the state is the kind of the last decode or idle line."""
    if not rows.height:
        return None, state
    if "req_steps" in rows.columns:
        requests = _requests(rows.filter(pl.col("kind") == REQUEST), k)
        rest = rows.filter(pl.col("kind") != REQUEST)
        rest = rest.drop(
            "req_steps", "req_accepted", "req_drafted", "completion_tokens", "prompt_tokens"
        )
        others, state = sequence(rest, state, k, final)
        parts = [p for p in (others, requests) if p is not None and p.height]
        return (pl.concat(parts, how="diagonal_relaxed").sort("line") if parts else None), state
    if "median_latency_s" in rows.columns:
        one_batch = _one_batch(rows.filter(pl.col("kind") == ONE_BATCH))
        rows = rows.filter(pl.col("kind") != ONE_BATCH).drop("median_latency_s", "aggregate_tok_s")
        decode, state = sequence(rows, state, k, final)
        parts = [p for p in (decode, one_batch) if p is not None and p.height]
        return (pl.concat(parts, how="diagonal_relaxed").sort("line") if parts else None), state
    state = dict(state)
    rows = carry_launch(rows, state, LAUNCH, _LAUNCH_COLUMNS)
    if not rows.height:
        return None, state
    previous = pl.col("kind").shift(1, fill_value=state.get("last", IDLE))
    rows = rows.with_columns(first_after_idle=previous == IDLE)
    state["last"] = rows["kind"][-1]
    decode = rows.filter(pl.col("kind") == DECODE)
    if not decode.height:
        return None, state
    tau = pl.col("accept_len")
    rate = ~pl.col("first_after_idle") & (pl.col("running_reqs") > 0)
    launched = "launch_steps" in decode.columns
    steps = pl.lit(k, pl.Int64)
    if launched:
        steps = pl.coalesce(steps, pl.col("launch_steps").cast(pl.Int64, strict=False))
    spec = pl.col("spec_field").is_not_null()  # accept len or accept rate on the line
    records = decode.with_columns(
        format=pl.lit(DECODE),
        aggregate_tok_s=pl.when(rate).then(pl.col("gen_tok_s")),
        tok_s=pl.when(rate).then(pl.col("gen_tok_s") / pl.col("running_reqs")),
        concurrency=pl.when(pl.col("running_reqs") > 0).then(pl.col("running_reqs")),
        num_spec_tokens=pl.when(spec).then(steps).otherwise(pl.lit(0)),
        note=pl.when(spec & tau.is_null()).then(pl.lit(_NO_ACCEPT_LEN)),
        context_tokens=pl.when(
            (pl.col("running_reqs") > 0)
            & (pl.col("prealloc_reqs").fill_null(0) == 0)
            & (pl.col("transfer_reqs").fill_null(0) == 0)
        ).then(pl.col("tokens_in_use") / pl.col("running_reqs")),
    ).with_columns(
        acceptance_rate=pl.when(pl.col("num_spec_tokens") > 0).then(
            (tau - 1) / pl.col("num_spec_tokens")
        ),
    )
    if launched:
        records = records.with_columns(
            model=pl.col("launch_model"),
            spec_method=pl.when(spec).then(pl.col("launch_method")),
            spec_topk=pl.when(spec).then(pl.col("launch_topk").cast(pl.Int64, strict=False)),
            verify_tokens=pl.when(spec).then(
                pl.col("launch_verify_tokens").cast(pl.Int64, strict=False)
            ),
        ).drop(list(_LAUNCH_COLUMNS))
    return records.drop("kind", "prealloc_reqs", "transfer_reqs", "spec_field"), state


def _requests(rows: pl.DataFrame, k: int | None) -> pl.DataFrame:
    """Requests' meta_info: each request's verify forwards and accepted drafts.  Its
    accept_len is ``1 + accepted / forwards`` (bonus token included), where SGLang's own
    ``spec_accept_length`` is ``completion_tokens / spec_verify_ct``, counting the token the
    prefill made too (PR 3152's "average acceptance length"): above by 1 / forwards.  Where
    the accepted drafts are not printed, they are ``completion_tokens - 1 - forwards`` (one
    token from the prefill, one from each forward)."""
    steps = pl.col("req_steps")
    accepted = pl.coalesce(pl.col("req_accepted"), pl.col("completion_tokens") - 1 - steps)
    return rows.filter(steps > 0).select(
        "line",
        format=pl.lit(REQUEST),
        origin=pl.lit("server"),
        num_spec_tokens=pl.lit(k, pl.Int64),
        num_drafts=steps,
        accepted_tokens=accepted,
        draft_tokens=pl.col("req_drafted"),
        accept_len=1 + accepted / steps,
        completion_tokens=pl.col("completion_tokens"),
    )


def _one_batch(rows: pl.DataFrame) -> pl.DataFrame:
    """bench_one_batch's printed runs: the batch is throughput x latency (tokens per step)."""
    latency = pl.col("median_latency_s")
    return rows.filter(latency > 0).select(
        "line",
        format=pl.lit(ONE_BATCH),
        origin=pl.lit("client"),
        num_spec_tokens=pl.lit(0),
        step_ms=1000 * latency,
        tok_s=1 / latency,
        aggregate_tok_s=pl.col("aggregate_tok_s"),
        concurrency=(pl.col("aggregate_tok_s") * latency).round(0),
    )


ENGINE = Engine(
    "sglang",
    KINDS,
    sequence,
    tok_s={
        DECODE: "gen throughput / #running-req (the first window after idle gets none)",
        REQUEST: "none (a request's meta_info gives its tokens, not its decode time)",
    },
)
