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
    whether a draft line belongs to it (``pending``)."""
    launch = {"launch": state.get("launch")}
    rows = carry_launch(rows, launch, LAUNCHES, {})
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
    if not rows.height:
        return None, new_state
    kind = pl.col("kind")
    rows = rows.filter((kind != ACC_POS) | pl.col("merge"))  # rates of a request not seen
    if not rows.height:
        return None, new_state
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
    return _from_rate(records).drop("kind", "merge", "task", "eval_ms", "eval_tokens"), new_state


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
