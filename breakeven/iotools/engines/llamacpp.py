"""llama.cpp's ``llama-server`` log: the per-request ``print_timing`` lines.

Source: ``tools/server/server-context.cpp``, ``server_slot::print_timings()``:

- ``eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per
  second)``: the request's decode, prefill excluded (``prompt eval time`` is
  the prefill).  Its tokens per second is the request's own decode rate: per
  sequence.  It is taken as printed (recent builds divide by n - 1 tokens,
  since the first comes from the prompt batch).
- ``if (n_draft_total > 0)``: ``draft acceptance = %0.5f (%5d accepted / %5d
  generated), mean len = %5.2f``; earlier ``draft acceptance rate = ...``
  without mean len, and in mid-2026 ``mean acceptance length = ..., acceptance
  rate per position = (...)``.  ``mean len`` is 1 + accepted / verify steps:
  tokens per cycle, bonus token included, so it is ``accept_len``.

With ``-lv 4`` a draft line is followed by ``acc per pos = (a1, a2, ...)``, the request's
acceptance rate at each draft position (one rate per position, so k is their number): one
record with the draft line.

Lines carry ``slot print_timing: id N | task M |`` (older builds printed the
block as one call, so only its first line has it).  A draft line is one record
with the eval line before it.  A request that drafted nothing prints no draft
line, so a log without any draft line is a baseline (k = 0); in a log that has
some, a request without one has k unknown.  k is not printed (it is
``--spec-draft-n-max``): give it with ``-k``, or it comes from the number of
per-position rates where the line lists them.

``context_tokens``, the request's mean context while it decoded, is its whole prompt P plus
half its eval tokens M, ``P + M / 2`` (as ``bench`` gives it), where a line of the same task
(the ``| task N |`` on both) tells P:

- ``new prompt, n_ctx_slot = C, n_keep = K, task.n_tokens = P`` (``n_prompt_tokens = P``
  before late 2025), logged (``update_slots``) when the slot starts on the prompt: the whole
  prompt, the part reused from the slot's cache included;
- else ``stop processing: n_tokens = S, truncated = T`` (``n_past = S`` in 2025;
  ``server_slot::release()``): the slot's tokens when the request ends, its prompt and every
  generated token but the last, which was sampled and never evaluated, so ``P = S - (M - 1)``
  (the fixtures: 20 + 256 - 1 = 275, 30 + 192 - 1 = 221, 51 + 275 - 1 = 325).  It follows the
  request's ``print_timing`` block in 2026 builds and came before it in 2025 ones.

``prompt eval time = ... / N tokens`` is not used: N is ``n_prompt_processed``, the tokens not
found in the slot's cache (``print_timings``, ``server-context.cpp``; ``/slots`` gives
``n_prompt_tokens`` and ``n_prompt_tokens_cache`` apart), so where the cache hit it is below
the prompt, by any amount (the suite's second request of a prompt evaluates 1 of its 13
tokens; the club-3090 request reuses a slot by its longest common prefix).  A request
without either line of its task (an excerpt; the 2025 multi-line blocks whose eval line has
no ``| task N |``) gets no context.

Launch lines (``common/common.cpp``, ``tools/server/server.cpp``): ``build: N (commit)
with CC for TARGET`` (late 2026, at ``-lv 4``: ``common_params_print_info: build N
(commit) with ...``) gives ``build=N commit=...``; ``system_info: n_threads = N
(n_threads_batch = M) / CPUS | ...`` gives ``n_threads=N n_threads_batch=M``; ``main:
server is listening on http://...`` (late 2026: ``llama_server: listening on http://...``)
marks the launch up and gives nothing (the address is the client's choice).  The lines of
one start are one launch; its timestamp is time since start, so ``launched_at`` is empty.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from breakeven.iotools.lines import Engine, Field, LineKind, carry_launch, merge_into_previous

EVAL = "llamacpp_eval"
DRAFT = "llamacpp_draft"
ACC_POS = "llamacpp_acc_per_pos"  # -lv 4: the request's acceptance rate at each draft position
PROMPT = "llamacpp_new_prompt"  # the request's whole prompt, cached part included
STOP = "llamacpp_stop"  # the slot's tokens when the request ends
CONTEXT = (PROMPT, STOP)
FORMAT = "llamacpp_server"
BUILD = "llamacpp_build"  # "build: N (commit) with CC for TARGET" (common_init)
BUILD_INFO = "llamacpp_build_info"  # late 2026: "common_params_print_info: build N (commit) ..."
SYSTEM_INFO = "llamacpp_system_info"
LISTENING = "llamacpp_listening"
LAUNCHES = (BUILD, BUILD_INFO, SYSTEM_INFO, LISTENING)
_BUILD = r"\bbuild:? (\d+ \([^)\s]*\)) with .+ for \S"

_WHERE = (
    Field("timestamp", r"(\d+\.\d\d\.\d{3}\.\d{3}) [IWED] ", "time", kind="text"),
    Field("task", r"\| task +(-?\d+) \|", "task", kind="text"),
)
KINDS = (
    LineKind(
        EVAL,
        "llamacpp",
        "eval time =",
        unless="prompt eval time",
        fields=(
            *_WHERE,
            Field("eval_ms", r"eval time = +([^ ]*) ms", "eval time"),
            Field("eval_tokens", r"eval time = +[^ ]* ms / +([^ ]*) tokens", "tokens"),
            Field("tok_s", r"([^ (]*) tokens per second", "tokens per second"),
        ),
        required=("eval_tokens", "tok_s"),
    ),
    LineKind(
        DRAFT,
        "llamacpp",
        "draft acceptance",
        fields=(
            *_WHERE,
            Field("accepted_tokens", r"\( *([^ ]*) accepted", "accepted"),
            Field("draft_tokens", r"accepted / +([^ )]*) generated", "generated"),
            Field("accept_len", r"mean (?:len|acceptance length) = +([^ ,]*)", "mean len"),
            Field(
                "per_position",
                r"acceptance rate per position = \(([^)]*)\)",
                "acceptance rate per position",
                kind="numbers",
            ),
        ),
        required=("accepted_tokens", "draft_tokens"),
    ),
    LineKind(
        BUILD,
        "llamacpp",
        "build: ",
        match=_BUILD,
        fields=(Field("launch_env", _BUILD, "build", kind="text", transform=lambda e: _build(e)),),
    ),
    LineKind(
        BUILD_INFO,
        "llamacpp",
        "common_params_print_info: build ",
        match=_BUILD,
        fields=(Field("launch_env", _BUILD, "build", kind="text", transform=lambda e: _build(e)),),
    ),
    LineKind(
        SYSTEM_INFO,
        "llamacpp",
        "system_info: n_threads = ",
        fields=(
            Field(
                "launch_env",
                r"system_info: n_threads = (\d+(?: \(n_threads_batch = \d+\))?)",
                "n_threads",
                kind="text",
                transform=lambda e: e.str.replace(
                    r"^(\d+) \(n_threads_batch = (\d+)\)$", "${1} n_threads_batch=${2}"
                ).str.replace(r"^", "n_threads="),
            ),
        ),
    ),
    # The server is up; the address is the client's choice, not the launch's setting.
    LineKind(
        LISTENING,
        "llamacpp",
        "listening on http",
        match=r"(?:server is|llama_server:) listening on https?://",
    ),
    LineKind(
        PROMPT,
        "llamacpp",
        "new prompt, n_ctx_slot =",
        fields=(
            *_WHERE,
            Field(
                "prompt_tokens",
                r"(?:task\.n_tokens|n_prompt_tokens) = +([^ ,]*)",
                "task.n_tokens",
            ),
        ),
        required=("prompt_tokens",),
    ),
    LineKind(
        STOP,
        "llamacpp",
        "stop processing: n_",
        fields=(
            *_WHERE,
            Field("end_tokens", r"stop processing: n_(?:tokens|past) = +([^ ,]*)", "n_tokens"),
        ),
        required=("end_tokens",),
    ),
    LineKind(
        ACC_POS,
        "llamacpp",
        "acc per pos = (",
        fields=(
            *_WHERE,
            Field("per_position", r"acc per pos = \(([^)]*)\)", "acc per pos", kind="numbers"),
        ),
        required=("per_position",),
    ),
)


def _build(printed: pl.Expr) -> pl.Expr:
    """``N (commit)`` as ``build=N commit=commit``."""
    return printed.str.replace(r"^(\d+) \(([^)]*)\)$", "build=${1} commit=${2}")


_COLUMNS = {
    "timestamp": pl.String,
    "task": pl.String,
    "eval_ms": pl.Float64,
    "eval_tokens": pl.Float64,
    "tok_s": pl.Float64,
    "accepted_tokens": pl.Float64,
    "draft_tokens": pl.Float64,
    "accept_len": pl.Float64,
    "per_position": pl.List(pl.Float64),
}


def sequence(
    rows: pl.DataFrame, state: dict[str, Any], k: int | None, final: bool
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """Records of requests.  State: the last eval line, while no line after it has told
    whether a draft line belongs to it (``pending``); the prompt and release lines seen
    (``prompts``, ``stops``) and the records waiting for a release line (``waiting``), for
    :func:`_with_context`."""
    launch = {"launch": state.get("launch")}
    rows = carry_launch(rows, launch, LAUNCHES, {})
    lengths = rows.filter(pl.col("kind").is_in(CONTEXT)) if rows.height else rows
    rows = rows.filter(~pl.col("kind").is_in(CONTEXT)) if rows.height else rows
    task = pl.col("task")
    same_request = task.is_null() | task.shift(1).is_null() | (task == task.shift(1))
    rows, pending = merge_into_previous(
        rows, state, _COLUMNS, EVAL, DRAFT, same_request, ("tok_s", "eval_ms", "eval_tokens"), final
    )
    # -lv 4 prints the request's per-position rates after its draft line: one record with it.
    rows, pending_draft = merge_into_previous(
        rows.drop("merge") if "merge" in rows.columns else rows,
        {"pending": state.get("pending_draft")},
        _COLUMNS,
        DRAFT,
        ACC_POS,
        same_request,
        (
            "timestamp",
            "tok_s",
            "eval_ms",
            "eval_tokens",
            "accepted_tokens",
            "draft_tokens",
            "accept_len",
        ),
        final,
    )
    new_state: dict[str, Any] = {
        "pending": pending,
        "pending_draft": pending_draft,
        "launch": launch.get("launch"),
    }
    kind = pl.col("kind")
    if rows.height:
        rows = rows.filter((kind != ACC_POS) | pl.col("merge"))  # rates of a request not seen
    if not rows.height:
        return _with_context(None, lengths, state, new_state, final), new_state
    per_position_k = pl.col("per_position").list.len()
    draft_k = pl.when(per_position_k > 0).then(per_position_k).otherwise(pl.lit(k, pl.Int64))
    records = rows.with_columns(
        format=pl.lit(FORMAT),
        num_spec_tokens=pl.when(kind.is_in([DRAFT, ACC_POS])).then(draft_k),
        acceptance_rate=pl.when(pl.col("draft_tokens") > 0).then(
            pl.col("accepted_tokens") / pl.col("draft_tokens")
        ),
        undecided=kind == EVAL,
        # The request's tokens as its rate counts them, and the prefill's first: its rate is
        # then pooled with others' as a ratio of sums.
        completion_tokens=pl.when((pl.col("tok_s") > 0) & (pl.col("eval_ms") > 0)).then(
            1 + pl.col("tok_s") * pl.col("eval_ms") / 1000
        ),
        # Its verify cycles, accepted / (mean len - 1), weigh its accept_len when pooled.
        num_drafts=pl.when((pl.col("accept_len") > 1) & (pl.col("accepted_tokens") > 0)).then(
            pl.col("accepted_tokens") / (pl.col("accept_len") - 1)
        ),
    )
    records = _from_rate(records).drop("kind", "merge", "eval_ms")
    return _with_context(records, lengths, state, new_state, final), new_state


_KEEP_LENGTHS = 10_000
"""Prompt and release lines kept for records of later blocks (requests in flight at once are
far fewer)."""


def _with_context(
    records: pl.DataFrame | None,
    lengths: pl.DataFrame,
    state: dict[str, Any],
    new_state: dict[str, Any],
    final: bool,
) -> pl.DataFrame | None:
    """Records with ``context_tokens``, ``P + M / 2``: P from the ``new prompt`` line of their
    task before them, else ``S - (M - 1)`` from its ``stop processing`` line (the first after
    them, else the last before).  A record whose task has neither yet, after the last release
    line seen, waits for the next block (``new_state['waiting']``) unless ``final``."""
    by_kind = {
        name: (lengths.filter(pl.col("kind") == name) if lengths.height else lengths)
        for name in CONTEXT
    }
    prompts = _kept(state.get("prompts"), by_kind[PROMPT], "prompt_tokens")
    stops = _kept(state.get("stops"), by_kind[STOP], "end_tokens")
    new_state["prompts"], new_state["stops"] = prompts, stops
    parts = [p for p in (state.get("waiting"), records) if p is not None and p.height]
    if not parts:
        return None
    records = pl.concat(parts, how="diagonal_relaxed").sort("line")
    key = (pl.col("task").cast(pl.Int64, strict=False)).alias("_task")
    if "launch_line" in records.columns:
        launch = pl.col("launch_line").cast(pl.Int64).fill_null(-1).alias("_launch")
    else:
        launch = pl.lit(-1, pl.Int64).alias("_launch")
    found = records.with_row_index("_row").with_columns(key, launch, pl.col("line").cast(pl.Int64))
    for name, column, strategy in (
        ("_prompt", prompts, "backward"),
        ("_after", stops, "forward"),
        ("_before", stops, "backward"),
    ):
        found = found.sort("line").join_asof(
            column.rename({column.columns[-1]: name}),
            on="line",
            by=["_launch", "_task"],
            strategy=strategy,
            check_sortedness=False,
        )
    m = pl.col("eval_tokens")
    prompt = pl.coalesce(pl.col("_prompt"), pl.col("_after") - (m - 1), pl.col("_before") - (m - 1))
    found = found.sort("_row").with_columns(
        context_tokens=pl.when((prompt >= 0) & (m > 0)).then(prompt + m / 2)
    )
    last_stop = stops["line"].max() if stops.height else None
    waiting = (
        pl.col("context_tokens").is_null()
        & pl.col("_task").is_not_null()
        & pl.lit(last_stop is not None and not final)
        & (pl.col("line") > (last_stop if last_stop is not None else 0))
    )
    new_state["waiting"] = records.filter(found.select(waiting).to_series())
    out = found.filter(~waiting).drop("_row", "_task", "_launch", "_prompt", "_after", "_before")
    return out.drop("task", "eval_tokens")


def _kept(earlier: pl.DataFrame | None, lines: pl.DataFrame, column: str) -> pl.DataFrame:
    """A block's prompt or release lines after the kept ones of earlier blocks: ``_launch``,
    ``_task``, ``line`` and the count, the last :data:`_KEEP_LENGTHS`."""
    schema = {"_launch": pl.Int64, "_task": pl.Int64, "line": pl.Int64, column: pl.Float64}
    if lines.height:
        launch = (
            pl.col("launch_line").cast(pl.Int64).fill_null(-1)
            if "launch_line" in lines.columns
            else pl.lit(-1, pl.Int64)
        )
        lines = lines.select(
            launch.alias("_launch"),
            pl.col("task").cast(pl.Int64, strict=False).alias("_task"),
            pl.col("line").cast(pl.Int64),
            pl.col(column).cast(pl.Float64),
        ).filter(pl.col("_task").is_not_null() & pl.col(column).is_not_null())
    else:
        lines = pl.DataFrame(schema=schema)
    both = pl.concat([earlier, lines]) if earlier is not None else lines
    return both.tail(_KEEP_LENGTHS).sort("line")


FROM_RATE_NOTE = (
    "accept_len = 1 + k x accepted / generated (this build prints no mean len): exact where "
    "every draft has k tokens, too high where drafts stop short (--draft-p-min)"
)
"""What a draft line without ``mean len`` gives, and on what assumption."""


def _from_rate(records: pl.DataFrame) -> pl.DataFrame:
    """Older builds print ``draft acceptance rate = R (A accepted / G generated)`` and no
    ``mean len``.  With k known (``-k``), a request whose every draft had k tokens ran
    ``G / k`` verify cycles, so its accept_len is ``1 + A / (G / k) = 1 + k x R``
    (:data:`FROM_RATE_NOTE`, said in the record's note); its cycles weigh it when pooled."""
    k = pl.col("num_spec_tokens")
    derived = pl.col("accept_len").is_null() & (k > 0) & pl.col("acceptance_rate").is_not_null()
    return records.with_columns(
        accept_len=pl.when(derived)
        .then(1 + k * pl.col("acceptance_rate"))
        .otherwise(pl.col("accept_len")),
        num_drafts=pl.when(derived)
        .then(pl.col("draft_tokens") / k)
        .otherwise(pl.col("num_drafts")),
        note=pl.when(derived).then(pl.lit(FROM_RATE_NOTE)),
    )


ENGINE = Engine(
    "llamacpp",
    KINDS,
    sequence,
    speculative_kinds=frozenset({DRAFT}),
    baseline_note="no draft acceptance line in this log: a baseline (k = 0)",
    tok_s={FORMAT: "the request's eval tokens per second (its decode, prefill excluded)"},
)
