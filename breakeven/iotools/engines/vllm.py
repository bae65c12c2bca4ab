"""vLLM's server log: spec-decode metrics (V1 and V0) and the throughput line beside them.

Sources: ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingLogging.log``),
``vllm/v1/metrics/loggers.py`` and, for V0, ``vllm/engine/metrics.py``.

- V1 ``SpecDecoding metrics:`` per logging interval (counts of the interval):
  ``Mean acceptance length``, ``Accepted: N tokens``, ``Drafted: N tokens``,
  ``Per-position acceptance rate: a1, a2, ...`` (one rate per draft position,
  so k is their number).  ``accept_len = 1 + accepted / drafts`` with
  ``drafts = drafted / k``, or ``accepted / sum(rates)`` where drafts were shorter than k
  (:func:`_v1_drafts`).  Its first format (early 2025) said ``Speculative
  metrics: Draft acceptance rate: ..., Number of accepted tokens: ..., Number
  of draft tokens: ...``.  The line is logged only for intervals with drafts
  (``if not self.num_drafts: return``), and never without a speculative config.
- V0 ``Speculative metrics: ... Number of speculative tokens: k, Number of
  accepted tokens, Number of draft tokens, Number of emitted tokens``: counters
  cumulative since server start, so a record is the difference from the
  previous line (a decrease is a restart); ``accept_len = emitted / (drafted /
  k)``, since V0 counts accepted positions even after a rejection.
- ``Avg prompt throughput: ..., Avg generation throughput: ..., Running: N
  reqs, Waiting|Pending: N reqs`` (V1: ``LoggingStatLogger.log`` in
  ``vllm/v1/metrics/loggers.py``, every ``VLLM_LOG_STATS_INTERVAL``, 10 s; V0:
  ``vllm/engine/metrics.py``): the tokens of the interval over its wall time, for all
  running requests, and the requests running at its end.  A spec-decode line printed
  right after it with the same timestamp is one record with it.  The per-sequence rate
  is ``generation throughput / running``, only in a window of pure decode:

  - a window where requests started (prompt throughput above 0; V1 counts a request's
    prompt tokens in the window its first token came out) counts their prefill, and any
    idle time before it, in its throughput (at concurrency 1 with gaps between requests,
    30-45% low): no ``tok_s``, a note;
  - the first window after idle (``first_after_idle``, as SGLang's guard names it): the
    first window of a launch, or after a window that ended with ``Running: 0 reqs``.  Its
    interval may span idle time (V1 logs an interval at DEBUG where it and the one before it
    had no throughput, so idle intervals after the first are not printed; V0 logs from the
    engine's step, and its first step after idle logs the whole gap): no ``tok_s``, a note.
    The log's first window is not one by itself: V1's logger resets its window at every
    interval, printed or not, and only a window with prompt throughput above 0 holds request
    starts (the case above), so a first window with prompt throughput 0.0 is pure decode;
  - a window with requests running and no token generated (a long prefill under way):
    no ``tok_s``, a note.

  Such windows keep their throughput as ``aggregate_tok_s``, and their acceptance: check
  leaves a row without a rate out of its comparisons, fit reads its acceptance.  A log
  with throughput lines and no spec-decode line at all is a baseline (k = 0).
- ``examples/offline_inference/spec_decode.py``'s summary (vLLM V1 from mid 2025; offline
  ``LLM.generate`` then ``llm.get_metrics()``, the engine's spec-decode counters over the
  whole run), one ``print`` a line, nothing before or after the value::

      total_num_output_tokens: 16994
      num_drafts: 4687
      num_draft_tokens: 46870
      num_accepted_tokens: 12368
      mean acceptance length: 3.64
      acceptance at token 0: 0.74
      ...

  (between ``"-" * 50`` lines; ``acceptance at token i`` for i < ``--num-spec-tokens``,
  ``%.2f``; the mean ``%.2f``).  Its first form (``examples/offline_inference/eagle.py``,
  spring 2025) printed only the mean and ``acceptance at token i:0.74``, without the space.
  One record a summary (format ``vllm_offline_spec_decode``): ``accept_len = 1 +
  num_accepted_tokens / num_drafts``, pooled from the counts (the printed mean where there
  are none; a note where the printed mean is not the counts' within its rounding, and no
  acceptance where ``num_drafts`` is 0, as the example prints for ``--method None``),
  ``per_position`` the ``acceptance at token i`` values, k their number (else ``-k``, else
  the launch's ``num_spec_tokens``), ``acceptance_rate = accepted / drafted``.  The summary
  has no time: no ``tok_s``, acceptance only.  ``total_num_output_tokens`` is not read.
- The engine's launch line, ``Initializing a V1 LLM engine (vX) with config:
  model=..., speculative_config=SpeculativeConfig(method='eagle3', model=...,
  num_spec_tokens=3), ..., served_model_name=...`` (``vllm/v1/engine/core.py``,
  the config's ``__str__`` in ``vllm/config/``): the records after it take the
  method as ``spec_method``, the served model name as the model, and
  ``num_spec_tokens`` as k where a line does not tell it, and its version as
  ``version=`` in ``env``.
- ``non-default args: {'model': ..., 'port': 8001, 'speculative_config': {...}}``
  (``log_non_default_args``, ``vllm/entrypoints/utils.py``, later
  ``vllm/entrypoints/serve/utils/api_utils.py``; a dict's repr), a few lines before the
  engine config: the launch's settings, as ``env`` (a nested dict's keys as
  ``speculative_config.method``; secrets as ``***``).  The two lines are one launch
  (:func:`breakeven.iotools.lines.carry_launch`); a restart prints them again.  Only the
  version is taken from the engine config line: the rest is every setting resolved, some
  3,000 characters that differ between runs only where the arguments do.

- Lines as users paste them (issue 44), each read for what it still holds, its loss in the
  record's note: a per-position list cut short (:func:`_cut_lists`); a ``SpecDecoding`` line
  cut after ``Drafted throughput: N`` (``V1_CUT``: the throughputs and k give the acceptance);
  a throughput line whose timestamp was clipped (one window with the spec line on the next
  line, :func:`_clipped`), or its prompt throughput (no ``tok_s``); prose that quotes a field
  (``_LOGGED``: no log line); records run together where newlines were lost (``line_start``
  splits them, :func:`_in_print_order` orders them).  ``vllm bench serve``'s printed result
  tables are read by :mod:`breakeven.iotools.bench_results`: a table cut in its Position rows
  takes k from ``Draft tokens / Drafts`` (:mod:`breakeven.iotools.spec_tables`), and one
  commented out line by line is read as the table (:mod:`breakeven.iotools.commented`).

No line of the server log gives ``context_tokens``: it stays empty.  ``SpecDecoding metrics``
counts drafted and accepted tokens, and the throughput line rates and requests; its ``GPU KV
cache usage`` is a percentage of blocks (one decimal, block-rounded), not read.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from breakeven.iotools.engines.spec_decode_example import (
    OFFLINE,
    OFFLINE_COLUMNS,
    OFFLINE_KINDS,
    OFFLINE_LINE_KINDS,
    offline_records,
)
from breakeven.iotools.lines import (
    Engine,
    Field,
    LineKind,
    carry_launch,
    dict_env,
    env_from,
    merge_into_previous,
)

THROUGHPUT = "vllm_throughput"
V1 = "vllm_v1"
V1_FIRST = "vllm_v1_first_format"
V1_CUT = "vllm_v1_cut_after_throughputs"
V0 = "vllm_v0"
SPEC = (V1, V1_FIRST, V1_CUT, V0)
CUT_NOTE = (
    "SpecDecoding line cut after its throughputs: its Accepted and Drafted counts and "
    "per-position rates are lost; accept_len is 1 + accepted throughput / (drafted throughput "
    "/ k), else the printed mean"
)
LAUNCH = "vllm_engine_config"
ARGS = "vllm_non_default_args"
LAUNCHES = (ARGS, LAUNCH)
_LAUNCH_COLUMNS = {"launch_model": pl.String, "launch_method": pl.String, "launch_k": pl.Float64}
_THROUGHPUT_FIELDS = ("prompt_tok_s", "gen_tok_s", "running_reqs", "queue_reqs")
PREFILL_NOTE = (
    "requests started in this window (prompt throughput above 0): its generation throughput "
    "counts their prefill and any idle time before them, so it is not a decode rate (tok_s "
    "left empty; bench, or the difference of two /metrics scrapes, measures one)"
)

IDLE_NOTE = (
    "first window after idle (a new launch, or the one before had no request running): its "
    "interval may hold idle time and prefill, so it is not a decode rate (tok_s left empty)"
)
CLIPPED_NOTE = (
    "a timestamp clipped from the throughput line or the SpecDecoding line after it: the two "
    "lines, printed one after the other, are one window"
)
NO_PROMPT_NOTE = (
    "throughput line clipped before 'Avg generation throughput': its prompt throughput is lost, "
    "so whether requests started in the window is unknown (tok_s left empty)"
)
STALL_NOTE = "no token generated in this window with requests running: no decode rate"


_TIMESTAMP = Field(
    "timestamp", r"(?:INFO|WARNING|DEBUG|ERROR) +(\d\d-\d\d \d\d:\d\d:\d\d)", "time", kind="text"
)
_LAUNCH_TIME = Field(
    "launch_time",
    r"(?:INFO|WARNING|DEBUG|ERROR) +(\d\d-\d\d \d\d:\d\d:\d\d)",
    "time",
    kind="text",
)
_FIRST_COUNTS = (
    Field("accepted_tokens", r"Number of accepted tokens: ([^,]*)", "Number of accepted tokens"),
    Field("draft_tokens", r"Number of draft tokens(?: tokens)?: ([^,]*)", "Number of draft tokens"),
)

# A throughput line as the engine prints it: its log prefix, "Engine NNN:", or the field before
# or after "Avg generation throughput" as the logger joins them.  Prose that quotes the field
# ("- Avg generation throughput: 6.5 tokens/s (compared to ...)") is no line of this kind.
_LOGGED = (
    r"(?:INFO|WARNING|DEBUG|ERROR) +\d\d-\d\d \d\d:\d\d:\d\d|Engine \d+:"
    r"|Avg prompt throughput: [^,]*, Avg generation throughput:"
    r"|Avg generation throughput: [^,]*, Running:"
)
_PRINTED_MEAN = Field(
    "printed_accept_len", r"Mean acceptance length: ([^,]*)", "Mean acceptance length"
)

KINDS = (
    LineKind(
        V1_CUT,  # before V1: its lines have V1's marker, and no "Drafted:" count
        "vllm",
        "SpecDecoding metrics:",
        also="Drafted throughput:",
        unless=", Drafted: ",
        fields=(
            _TIMESTAMP,
            _PRINTED_MEAN,
            Field("accepted_tok_s", r"Accepted throughput: (\d[\d.]*)", "Accepted throughput"),
            Field("drafted_tok_s", r"Drafted throughput: (\d[\d.]*)", "Drafted throughput"),
        ),
        required=("accepted_tok_s", "drafted_tok_s"),
    ),
    LineKind(
        THROUGHPUT,
        "vllm",
        "Avg generation throughput:",
        fields=(
            _TIMESTAMP,
            Field(
                "prompt_tok_s", r"Avg prompt throughput: ([^,]*?) tokens/s", "Avg prompt throughput"
            ),
            Field(
                "gen_tok_s",
                r"Avg generation throughput: ([^,]*?) tokens/s",
                "Avg generation throughput",
            ),
            Field("running_reqs", r"Running: ([^,]*?) reqs", "Running"),
            Field("queue_reqs", r"(?:Waiting|Pending): ([^,]*?) reqs", "Waiting"),
        ),
        required=("gen_tok_s", "running_reqs"),
        match=_LOGGED,
    ),
    LineKind(
        V1,
        "vllm",
        "SpecDecoding metrics:",
        fields=(
            _TIMESTAMP,
            _PRINTED_MEAN,
            Field("accepted_tokens", r"Accepted: ([^,]*?) tokens", "Accepted"),
            Field("draft_tokens", r"Drafted: ([^,]*?) tokens", "Drafted"),
            Field(
                "per_position",
                r"Per-position acceptance rate: (\d[\d.]*(?:, ?\d[\d.]*)*)",
                "Per-position acceptance rate",
                kind="numbers",
            ),
        ),
        required=("accepted_tokens", "draft_tokens"),
    ),
    LineKind(
        V0,
        "vllm",
        "Speculative metrics:",
        also="emitted tokens",
        fields=(
            _TIMESTAMP,
            Field(
                "printed_k",
                r"Number of speculative tokens: ([^,]*)",
                "Number of speculative tokens",
            ),
            *_FIRST_COUNTS,
            Field(
                "emitted_tokens",
                r"Number of emitted tokens(?: tokens)?: ([^,]*)",
                "Number of emitted tokens",
            ),
        ),
        required=("printed_k", "accepted_tokens", "draft_tokens", "emitted_tokens"),
    ),
    LineKind(
        V1_FIRST,
        "vllm",
        "Speculative metrics:",
        fields=(_TIMESTAMP, *_FIRST_COUNTS),
        required=("accepted_tokens", "draft_tokens"),
    ),
    LineKind(
        ARGS,
        "vllm",
        "non-default args: {",
        fields=(
            _LAUNCH_TIME,
            Field(
                "launch_env",
                r"non-default args: (\{.*\})\s*$",
                "non-default args",
                kind="text",
                transform=lambda e: env_from(e, dict_env),
            ),
        ),
    ),
    LineKind(
        LAUNCH,
        "vllm",
        " LLM engine (v",
        also="with config:",
        fields=(
            _LAUNCH_TIME,
            Field(
                "launch_env",
                r" LLM engine \(v([^)\s]+)\)",
                "version",
                kind="text",
                transform=lambda e: pl.lit("version=") + e,
            ),
            Field("launch_model", r"\bserved_model_name=([^,]*)", "served_model_name", kind="text"),
            Field(
                "launch_method",
                r"SpeculativeConfig\(method='([^']*)'",
                "speculative method",
                kind="text",
                transform=lambda e: e.str.to_lowercase(),
            ),
            Field(
                "launch_k", r"SpeculativeConfig\([^)]*\bnum_spec_tokens=([^,)]*)", "num_spec_tokens"
            ),
        ),
    ),
    *OFFLINE_LINE_KINDS,
)

_COLUMNS = {
    "timestamp": pl.String,
    "printed_accept_len": pl.Float64,
    "printed_k": pl.Float64,
    "accepted_tokens": pl.Float64,
    "draft_tokens": pl.Float64,
    "emitted_tokens": pl.Float64,
    "per_position": pl.List(pl.Float64),
    "throughput_ts": pl.String,
    "accepted_tok_s": pl.Float64,
    "drafted_tok_s": pl.Float64,
    **dict.fromkeys(_THROUGHPUT_FIELDS, pl.Float64),
}


def sequence(
    rows: pl.DataFrame, state: dict[str, Any], k: int | None, final: bool
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """Records of vLLM's lines.  State: the last throughput line, when no line after it has
    told yet whether a spec-decode line merges into it (``pending``), V0's counters at its
    last line (``v0_last``), the running requests and launch of the last window given
    (``last_window``: what tells a first window after idle) and the lines of an offline
    summary the block ended in (``offline``)."""
    if rows.height and rows["line"].is_duplicated().any():
        rows = _in_print_order(rows)
    launch = {"launch": state.get("launch")}
    rows = carry_launch(rows, launch, LAUNCHES, _LAUNCH_COLUMNS)
    offline = None
    if state.get("offline") is not None or any(c in rows.columns for c in OFFLINE_COLUMNS):
        is_offline = pl.col("kind").is_in(OFFLINE_KINDS) if rows.height else pl.lit(False)
        offline = rows.filter(is_offline) if rows.height else rows
        rows = rows.filter(~is_offline) if rows.height else rows
        rows = rows.drop([c for c in OFFLINE_COLUMNS if c in rows.columns])
    ts = pl.col("timestamp")
    if "timestamp" in rows.columns:  # the throughput line's, carried into the merged row
        rows = rows.with_columns(throughput_ts=ts)
    rows, pending = merge_into_previous(
        rows,
        state,
        _COLUMNS,
        THROUGHPUT,
        SPEC,
        # The same timestamp; or one of them clipped (a paste that cut the log prefix), on the
        # line right after.
        ts.shift(1).eq_missing(ts) | _clipped(),
        (*_THROUGHPUT_FIELDS, "throughput_ts"),
        final,
    )
    new_state: dict[str, Any] = {
        "v0_last": state.get("v0_last"),
        "pending": pending,
        "launch": launch.get("launch"),
        "last_window": state.get("last_window"),
        "offline": None,
    }
    summaries = None
    if offline is not None:
        summaries, new_state["offline"] = offline_records(offline, state.get("offline"), k, final)
    if not rows.height:
        return summaries, new_state
    rows = _v0_differences(rows, new_state)
    rows = _after_idle(rows, new_state)
    launched = "launch_k" in rows.columns
    one_clipped = pl.col("throughput_ts").is_null() != ts.is_null()
    rows = rows.with_columns(clipped=pl.col("merge") & one_clipped).drop("throughput_ts")
    rows = _cut_lists(rows, k, launched)
    records = rows.with_columns(_derived(k, launched))
    if launched:
        spec = pl.col("kind").is_in(SPEC)
        records = records.with_columns(
            model=pl.col("launch_model"),
            spec_method=pl.when(spec).then(pl.col("launch_method")),
        ).drop(list(_LAUNCH_COLUMNS))
    dropped = ("kind", "merge", "printed_accept_len", "printed_k", "restarted")
    records = records.drop(*dropped, "positions_cut", "cut_k", "cut_note", "clipped")
    records = records.drop("accepted_tok_s", "drafted_tok_s")
    if summaries is not None and summaries.height:
        records = pl.concat([records, summaries], how="diagonal_relaxed").sort("line")
    return records, new_state


def _in_print_order(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows in the order the engine printed them, where a paste that lost its newlines ran
    several on one line (``line_start`` split them; they come here by kind): by timestamp,
    then launch lines, throughput line, spec-decode line, as the logger prints an interval's.
    Parts with no timestamp keep that order of kinds."""
    rank = {**dict.fromkeys(LAUNCHES, 0), THROUGHPUT: 1, **dict.fromkeys(SPEC, 2)}
    order = pl.col("kind").replace_strict(rank, default=3, return_dtype=pl.Int8)
    by = [pl.col("line")]
    if "timestamp" in rows.columns:
        by.append(pl.col("timestamp"))
    return rows.sort([*by, order], nulls_last=True, maintain_order=True)


def _clipped() -> pl.Expr:
    """A spec line right after a throughput line (the next line of the input), one of the two
    without its timestamp."""
    ts = pl.col("timestamp")
    return (ts.is_null() | ts.shift(1).is_null()) & (pl.col("line") == pl.col("line").shift(1) + 1)


def _after_idle(rows: pl.DataFrame, state: dict[str, Any]) -> pl.DataFrame:
    """Rows with ``first_after_idle`` (windows only: rows with a throughput line): no window
    before it in this log, a launch since the window before, or that window ended with no
    request running.  Sets ``state['last_window']`` to the last window's running requests and
    launch line."""
    window = pl.col("running_reqs").is_not_null()
    added = "launch_line" not in rows.columns
    if added:
        rows = rows.with_columns(launch_line=pl.lit(None, pl.Int64))
    last = state.get("last_window")
    running = pl.when(window).then(pl.col("running_reqs")).forward_fill().shift(1)
    launch = pl.when(window).then(pl.col("launch_line")).forward_fill().shift(1)
    seen = window.cast(pl.Int64).cum_sum().shift(1, fill_value=0) > 0
    if last is not None:
        running = pl.when(seen).then(running).otherwise(pl.lit(last["running"], pl.Float64))
        launch = pl.when(seen).then(launch).otherwise(pl.lit(last["launch"], pl.Int64))
        seen = pl.lit(True)
    # The log's first window follows idle only as far as its prompt throughput says: V1's
    # logger resets its window every interval, printed or not, and only a window with prompt
    # throughput above 0 holds request starts (which the prefill note covers).
    idle = (seen & (running == 0).fill_null(True)) | launch.ne_missing(pl.col("launch_line"))
    windows = rows.filter(window)
    if windows.height:
        state["last_window"] = {
            "running": windows["running_reqs"][-1],
            "launch": windows["launch_line"][-1],
        }
    rows = rows.with_columns(first_after_idle=pl.when(window).then(idle))
    return rows.drop("launch_line") if added else rows


def _v0_differences(rows: pl.DataFrame, state: dict[str, Any]) -> pl.DataFrame:
    """V0's counters as differences from the line before (from 0 after a restart); sets
    ``state['v0_last']`` to the counters of the last V0 line, as printed."""
    counters = ("accepted_tokens", "draft_tokens", "emitted_tokens")
    last = state.get("v0_last") or {}
    is_v0 = pl.col("kind") == V0
    previous = {c: pl.col(c).shift(1, fill_value=last.get(c)).over("kind") for c in counters}
    restarted = previous["accepted_tokens"].is_null() | pl.any_horizontal(
        pl.col(c) < previous[c] for c in counters
    )
    printed = rows.filter(is_v0).select(counters).tail(1)
    if printed.height:
        state["v0_last"] = printed.to_dicts()[0]
    return rows.with_columns(restarted=is_v0 & restarted).with_columns(
        pl.when(is_v0 & ~pl.col("restarted"))
        .then(pl.col(c) - previous[c])
        .otherwise(pl.col(c))
        .alias(c)
        for c in counters
    )


# Per-position rates are printed with 3 decimals ("%.3f"): their sum is off by up to this much
# per position.
_RATE_ROUNDING = 0.0005


def _v1_drafts(row_k: pl.Expr) -> pl.Expr:
    """Drafts in a V1 interval: ``drafted / k`` when every draft was k tokens long, else
    ``accepted / sum(per-position rates)``.

    vLLM counts drafts (``SpecDecodingStats.observe_draft``) and prints each position's
    accepted count over them, so the rates add up to ``accepted / drafts`` exactly, whatever
    the drafts' lengths.  A drafter that proposes fewer than k tokens (ngram without a match
    long enough) makes ``drafted / k`` too few drafts and the acceptance length too long
    (1.545 where vLLM printed 1.50).  ``drafted / k`` is kept, being exact, where it agrees
    with the rates within their rounding; with no accepted token the rates tell nothing and
    ``drafted / k`` (the fewest drafts that many tokens make) stands.
    """
    full = pl.col("draft_tokens") / row_k
    rates = pl.col("per_position").list.sum()
    from_rates = pl.col("accepted_tokens") / rates
    band = from_rates * pl.col("per_position").list.len() * _RATE_ROUNDING / rates
    return (
        pl.when(~pl.col("positions_cut") & (rates > 0) & ((from_rates - full).abs() > band + 1e-9))
        .then(from_rates)
        .otherwise(full)
    )


def _given_k(k: int | None, launched: bool) -> pl.Expr:
    """k as ``-k`` gives it, else the launch's ``num_spec_tokens``."""
    given = pl.lit(k, pl.Int64)
    if launched:
        given = pl.coalesce(given, pl.col("launch_k").cast(pl.Int64, strict=False))
    return given


def _cut_lists(rows: pl.DataFrame, k: int | None, launched: bool) -> pl.DataFrame:
    """A per-position acceptance list that was cut (a paste or a quote that ended it early):
    ``per_position`` without its cut last value, ``positions_cut`` and its note, and
    ``cut_k``, the k it was cut from.

    The list is cut where its last value does not read as a number (``0.1...``), or where the
    k that ``-k`` or the launch gives, else the drafted and accepted counts with the printed
    mean (``drafted x (mean - 1) / accepted``, within 0.1 of a whole number), is longer than it.
    A drafter that proposes fewer than k tokens makes that count k shorter, never longer.
    """
    listed = pl.col("per_position")
    kept = listed.list.drop_nulls()
    n = kept.list.len()
    counts = pl.col("draft_tokens") * (pl.col("printed_accept_len") - 1) / pl.col("accepted_tokens")
    counted = pl.when((counts - counts.round(0)).abs() <= 0.1).then(counts.round(0))
    given = _given_k(k, launched).cast(pl.Float64)
    longer = pl.coalesce(given, counted)
    elided = (listed.list.len() > n).fill_null(False)
    cut = (n > 0) & (elided | (longer > n).fill_null(False))
    source = pl.when(given.is_not_null()).then(pl.lit("-k or the launch"))
    source = source.otherwise(pl.lit("the drafted and accepted counts with the printed mean"))
    note = pl.format(
        "per-position acceptance list cut after {} values: k = {} from {}; per_position holds the "
        "values printed, the positions after them are lost (acceptance from drafted / k)",
        n,
        longer.cast(pl.Int64),
        source,
    )
    unknown = pl.format(
        "per-position acceptance list cut after {} values, and nothing tells k: the printed "
        "mean acceptance length stands",
        n,
    )
    return rows.with_columns(
        per_position=pl.when(listed.is_not_null()).then(kept),
        positions_cut=cut,
        cut_k=pl.when(cut).then(longer.cast(pl.Int64)),
        cut_note=pl.when(cut & longer.is_not_null()).then(note).when(cut).then(unknown),
    )


def _row_k(k: int | None, launched: bool) -> pl.Expr:
    """A spec line's k: V0 prints it; V1's is its per-position list's length (unless the list
    was cut, :func:`_cut_lists`), else ``-k`` or the launch's."""
    kind = pl.col("kind")
    per_position_k = pl.col("per_position").list.len()
    v1_k = (
        pl.when(pl.col("positions_cut"))
        .then(pl.col("cut_k"))
        .when(per_position_k > 0)
        .then(per_position_k)
        .otherwise(_given_k(k, launched))
    )
    return (
        pl.when(kind == V0)
        .then(pl.col("printed_k").cast(pl.Int64))
        .when(kind.is_in([V1, V1_FIRST, V1_CUT]))
        .then(v1_k)
    )


def _accept_len(row_k: pl.Expr, drafts: pl.Expr) -> pl.Expr:
    """``accept_len`` by the line's kind (see the module's docstring)."""
    kind = pl.col("kind")
    drafted_tok_s = pl.col("drafted_tok_s")
    v1_accept_len = (
        pl.when(row_k > 0)
        .then(pl.when(drafts > 0).then(1 + pl.col("accepted_tokens") / drafts))
        .otherwise(pl.col("printed_accept_len"))
    )
    v0_accept_len = pl.when((row_k > 0) & (pl.col("draft_tokens") > 0)).then(
        pl.col("emitted_tokens") / drafts
    )
    cut_accept_len = (
        pl.when((row_k > 0) & (drafted_tok_s > 0))
        .then(1 + pl.col("accepted_tok_s") / (drafted_tok_s / row_k))
        .otherwise(pl.col("printed_accept_len"))
    )
    return (
        pl.when(kind == V0)
        .then(v0_accept_len)
        .when(kind == V1_CUT)
        .then(cut_accept_len)
        .otherwise(v1_accept_len)
    )


def _window(generated: pl.Expr) -> tuple[pl.Expr, list[pl.Expr]]:
    """Whether a window's throughput is a decode rate, and the notes of why not (see the
    module's docstring), for rows where ``generated``."""
    # Requests started in the window: its throughput counts their prefill, and the idle time
    # before them (at concurrency 1 with gaps between requests it read 30-45% low).  A line
    # clipped before "Avg generation throughput" lost its prompt throughput: that is unknown.
    unknown = pl.col("prompt_tok_s").is_null()
    prefill = pl.col("prompt_tok_s").fill_null(0.0) > 0
    after_idle = pl.col("first_after_idle").fill_null(False)
    stalled = pl.col("gen_tok_s") == 0
    rate = generated & ~unknown & ~prefill & ~after_idle & ~stalled
    return rate, [
        pl.when(pl.col("clipped")).then(pl.lit(CLIPPED_NOTE)),
        pl.when(generated & unknown).then(pl.lit(NO_PROMPT_NOTE)),
        pl.when(pl.col("restarted")).then(
            pl.lit("counters since server start (first line, or after a restart)")
        ),
        pl.when(generated & prefill).then(pl.lit(PREFILL_NOTE)),
        pl.when(generated & after_idle & ~prefill).then(pl.lit(IDLE_NOTE)),
        pl.when(generated & stalled & ~prefill & ~after_idle).then(pl.lit(STALL_NOTE)),
    ]


def _derived(k: int | None, launched: bool = False) -> list[pl.Expr]:
    kind = pl.col("kind")
    row_k = _row_k(k, launched)
    cut_line = kind == V1_CUT
    drafted_tok_s = pl.col("drafted_tok_s")
    drafts = _v1_drafts(row_k)
    accept_len = _accept_len(row_k, drafts)
    generated = pl.col("gen_tok_s").is_not_null() & (pl.col("running_reqs") > 0)
    rate, notes = _window(generated)
    return [
        pl.when(kind == THROUGHPUT)
        .then(pl.lit(THROUGHPUT))
        .when(kind == V0)
        .then(pl.lit(V0))
        .otherwise(pl.lit(V1))
        .alias("format"),
        row_k.alias("num_spec_tokens"),
        pl.when(row_k > 0).then(drafts).alias("num_drafts"),
        accept_len.alias("accept_len"),
        pl.when(kind == V0)
        .then((accept_len - 1) / row_k)
        .when(pl.col("draft_tokens") > 0)
        .then(pl.col("accepted_tokens") / pl.col("draft_tokens"))
        .when(cut_line & (drafted_tok_s > 0))
        .then(pl.col("accepted_tok_s") / drafted_tok_s)
        .alias("acceptance_rate"),
        pl.concat_str(
            [pl.when(cut_line).then(pl.lit(CUT_NOTE)), pl.col("cut_note"), *notes],
            separator="; ",
            ignore_nulls=True,
        ).alias("note"),
        pl.when(generated).then(pl.col("gen_tok_s")).alias("aggregate_tok_s"),
        pl.when(rate).then(pl.col("gen_tok_s") / pl.col("running_reqs")).alias("tok_s"),
        pl.when(generated).then(pl.col("running_reqs")).alias("concurrency"),
        (kind == THROUGHPUT).alias("undecided"),
    ]


ENGINE = Engine(
    "vllm",
    KINDS,
    sequence,
    speculative_kinds=frozenset(SPEC),
    baseline_note="no spec-decode line in this log: a baseline (k = 0)",
    # The log prefix (after its process's, if any), or the logger's own start of a line.
    line_start=r"`?(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|DEBUG|ERROR) +\d\d-\d\d \d\d:\d\d:\d\d"
    r"|`?Engine \d+:|`?SpecDecoding metrics:",
    tok_s={
        THROUGHPUT: "Avg generation throughput / Running requests, where no request started "
        "in the window",
        V1: "Avg generation throughput / Running requests (the throughput line beside it), "
        "where no request started in the window",
        V0: "Avg generation throughput / Running requests (the throughput line beside it), "
        "where no request started in the window",
        OFFLINE: "none: the offline summary prints counts, no time (acceptance only)",
    },
)
