"""TensorRT-LLM's ``trtllm-bench`` report, as printed.

Source: ``tensorrt_llm/bench/dataclasses/reporting.py`` (``ReportUtility``).  The
report prints ``Number of concurrent requests`` (REQUEST DETAILS), then the
PERFORMANCE OVERVIEW with ``Average time-per-output-token [TPOT] (ms)`` and,
when streaming, ``Per User Output Speed (tps/user)``, then, when it drafted,
``= DECODING STATISTICS (<mode>)`` with ``[AL] AVERAGE: x.xx``: the mean over
requests of output tokens / (decode iterations + 1), tokens per iteration with
the bonus token, so it is ``accept_len``.  Reports before August 2025 print the
same quantity as ``[AR] AVERAGE`` under "Acceptance Rate Details".

Every report is its own record, with its own fields only (one a report lacks stays empty):
a sweep's log holds one report per run.  A report ends with its acceptance line, or where
the next begins: at its first section's header (``= PYTORCH BACKEND``, or ``= ENGINE
DETAILS`` for the TensorRT backend), at a field the report already holds (excerpts without
headers), or at ``Number of concurrent requests`` (REQUEST DETAILS) after the report's TPOT
or output speed (PERFORMANCE OVERVIEW, which follows it).  A report without any of these
after it ends with the file.  ``tok_s`` is ``1000 / TPOT``, as for the
other benchmarks (``Per User Output Speed`` where TPOT is not printed); ``Per
User Output Throughput [w/ ctx]`` counts the prefill and is not read.  k is not
printed (``max_draft_len``): give it with ``-k``.  A report without decoding
statistics is not taken as a baseline: published reports of speculative runs
omit the section.

A report's values are read from its own sections only (issue 44): ``Number of concurrent
requests`` under ``= REQUEST DETAILS``; TPOT, ``Per User Output Speed`` and ``Total Output
Throughput (tokens/sec)`` (``aggregate_tok_s``: output tokens, first ones included, over the
run) under ``= PERFORMANCE OVERVIEW``; the acceptance under ``= DECODING STATISTICS``.  Lines
with these labels elsewhere are another tool's (a script's own summary printed above the
report, say), and are not read; in an input that holds a section header, lines before the
first one are not read either.  Excerpts with no section header at all are read as before.  A
report run without ``--streaming`` prints no TPOT: its record has the aggregate rate and its
concurrency, no per-sequence rate.

``context_tokens`` is ``Average Input Length (tokens) + Average Output Length (tokens) / 2``
(REQUEST DETAILS; PERFORMANCE OVERVIEW or STATISTICS in older reports): the requests' mean
prompt and half their mean output, ``stats.average_input_length`` and
``stats.average_output_length`` as ``ReportUtility`` prints them (``:.4f``).  The mean of each
request's ``input + output / 2`` is that, as ``bench`` gives a request's.  A report without
both lines gets none.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from breakeven.iotools.lines import Engine, Field, LineKind, with_pending

FORMAT = "trtllm_bench"
CONCURRENCY, TPOT, SPEED, ACCEPT = "trtllm_concurrency", "trtllm_tpot", "trtllm_speed", "trtllm_al"
INPUT, OUTPUT = "trtllm_input_length", "trtllm_output_length"
START, START_TRT = "trtllm_pytorch_backend", "trtllm_engine_details"
AGGREGATE = "trtllm_total_output_throughput"
# The report's other section headers: where each value may be read (see the module).
REQUESTS, PERFORMANCE, DECODING = "trtllm_requests", "trtllm_performance", "trtllm_decoding"
_OTHER_SECTIONS = {
    "trtllm_world": "= WORLD + RUNTIME INFORMATION",
    "trtllm_machine": "= MACHINE DETAILS",
    "trtllm_dataset": "= DATASET DETAILS",
}

KINDS = (
    # The first section of every report: it starts a report (no fields).
    LineKind(START, "trtllm", "= PYTORCH BACKEND"),
    LineKind(START_TRT, "trtllm", "= ENGINE DETAILS"),
    LineKind(REQUESTS, "trtllm", "= REQUEST DETAILS"),
    LineKind(PERFORMANCE, "trtllm", "= PERFORMANCE OVERVIEW"),
    LineKind(DECODING, "trtllm", "= DECODING STATISTICS"),
    *(LineKind(name, "trtllm", header) for name, header in _OTHER_SECTIONS.items()),
    LineKind(
        AGGREGATE,
        "trtllm",
        "Total Output Throughput (tokens/sec):",
        fields=(
            Field(
                "aggregate_tok_s",
                r"Throughput \(tokens/sec\): *(\S*)",
                "Total Output Throughput (tokens/sec)",
            ),
        ),
        required=("aggregate_tok_s",),
    ),
    LineKind(
        CONCURRENCY,
        "trtllm",
        "Number of concurrent requests:",
        fields=(
            Field(
                "concurrency",
                r"Number of concurrent requests: *(\S*)",
                "Number of concurrent requests",
            ),
        ),
        required=("concurrency",),
    ),
    LineKind(
        INPUT,
        "trtllm",
        "Average Input Length (tokens):",
        fields=(Field("input_tokens", r"\(tokens\): *(\S*)", "Average Input Length (tokens)"),),
        required=("input_tokens",),
    ),
    LineKind(
        OUTPUT,
        "trtllm",
        "Average Output Length (tokens):",
        fields=(Field("output_tokens", r"\(tokens\): *(\S*)", "Average Output Length (tokens)"),),
        required=("output_tokens",),
    ),
    LineKind(
        TPOT,
        "trtllm",
        "Average time-per-output-token [TPOT] (ms):",
        fields=(Field("tpot_ms", r"\[TPOT\] \(ms\): *(\S*)", "TPOT (ms)"),),
        required=("tpot_ms",),
    ),
    LineKind(
        SPEED,
        "trtllm",
        "Per User Output Speed (tps/user):",
        fields=(Field("speed", r"\(tps/user\): *(\S*)", "Per User Output Speed"),),
        required=("speed",),
    ),
    LineKind(
        ACCEPT,
        "trtllm",
        "] AVERAGE",
        match=r"^\s*\[A[LR]\] AVERAGE *:",
        fields=(Field("accept_len", r"AVERAGE *: *(\S*)", "[AL] AVERAGE"),),
        required=("accept_len",),
    ),
)

_COLUMNS = {
    "concurrency": pl.Float64,
    "tpot_ms": pl.Float64,
    "speed": pl.Float64,
    "accept_len": pl.Float64,
    "input_tokens": pl.Float64,
    "output_tokens": pl.Float64,
    "aggregate_tok_s": pl.Float64,
}


_ONCE = frozenset({CONCURRENCY, INPUT, OUTPUT, TPOT, SPEED, AGGREGATE, ACCEPT})  # once a report
_STARTS = frozenset({START, START_TRT})
_AFTER_REQUESTS = frozenset({TPOT, SPEED, AGGREGATE})  # PERFORMANCE OVERVIEW: after REQUEST
_HEADERS = _STARTS | {REQUESTS, PERFORMANCE, DECODING, *_OTHER_SECTIONS}
_READ_IN = {  # the sections each value is read in (lengths: PERFORMANCE OVERVIEW in old reports)
    CONCURRENCY: {REQUESTS},
    INPUT: {REQUESTS, PERFORMANCE},
    OUTPUT: {REQUESTS, PERFORMANCE},
    TPOT: {PERFORMANCE},
    SPEED: {PERFORMANCE},
    AGGREGATE: {PERFORMANCE},
    ACCEPT: {DECODING},
}
_NOT_STREAMED = (
    "no TPOT in the report (run without --streaming): no per-sequence rate; aggregate_tok_s "
    "is its Total Output Throughput (first tokens included)"
)


def _in_sections(
    rows: pl.DataFrame, section: str | None, unheaded: pl.DataFrame | None, final: bool
) -> tuple[str | None, pl.DataFrame | None, pl.DataFrame]:
    """The rows a report reads (see the module), given the section the rows before ended in
    (None: no header yet) and the rows before the first header (``unheaded``): the section
    they end in, the rows still before any header, and the rows to read (the unheaded ones
    too, at the end of an input without a header)."""
    keep, held = [], []
    for i, kind in enumerate(rows["kind"].to_list() if rows.height else []):
        if kind in _HEADERS:
            if section is None:  # lines above the first report are another tool's
                held, unheaded = [], None
            section = kind
            if kind in _STARTS:
                keep.append(i)  # a report's first section: it starts a report
        elif section is None:
            held.append(i)
        elif section in _READ_IN[kind]:
            keep.append(i)
    if held:
        more = rows[held]
        unheaded = more if unheaded is None else pl.concat([unheaded, more], how="diagonal_relaxed")
    kept = rows[keep] if rows.height else rows
    if final and section is None and unheaded is not None:
        return None, None, unheaded
    return section, unheaded, kept


def _reports(kinds: list[str]) -> list[int]:
    """The report of each line (its kind, in line order), numbered from 0."""
    out, report, seen = [], 0, set()
    for kind in kinds:
        if seen and (
            ACCEPT in seen  # an acceptance line ends its report
            or kind in _STARTS
            or kind in seen
            or (kind == CONCURRENCY and seen & _AFTER_REQUESTS)
        ):
            report, seen = report + 1, set()
        if kind in _ONCE or kind in _STARTS:
            seen.add(kind)
        out.append(report)
    return out


def sequence(
    rows: pl.DataFrame, state: dict[str, Any], k: int | None, final: bool
) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """One record per report.  State: the lines of a report not yet ended (``pending``), the
    section the last rows were in and the rows before any section header
    (:func:`_in_sections`)."""
    section, unheaded, rows = _in_sections(rows, state.get("section"), state.get("unheaded"), final)
    new_state: dict[str, Any] = {}
    if section is not None:
        new_state["section"] = section
    if unheaded is not None:
        new_state["unheaded"] = unheaded
    rows = with_pending(rows, state, _COLUMNS)
    if not rows.height:
        return None, new_state
    # Report lines are few (a report is a screenful): told apart line by line.
    rows = rows.with_columns(report=pl.Series(_reports(rows["kind"].to_list()), dtype=pl.Int64))
    last = rows["report"][-1]
    if not final and rows["kind"][-1] != ACCEPT:  # the rest of this report may follow
        new_state["pending"] = rows.filter(pl.col("report") == last).drop("report")
        rows = rows.filter(pl.col("report") != last)
    if not rows.height:
        return None, new_state
    reports = rows.group_by("report", maintain_order=True).agg(
        pl.col("line").last(),
        pl.col("concurrency").drop_nulls().last(),
        pl.col("tpot_ms").drop_nulls().last(),
        pl.col("speed").drop_nulls().last(),
        pl.col("accept_len").drop_nulls().last(),
        pl.col("input_tokens").drop_nulls().last(),
        pl.col("output_tokens").drop_nulls().last(),
        pl.col("aggregate_tok_s").drop_nulls().last(),
    )
    records = reports.with_columns(
        format=pl.lit(FORMAT),
        origin=pl.lit("client"),
        tok_s=pl.when(pl.col("tpot_ms") > 0).then(1000 / pl.col("tpot_ms")).otherwise("speed"),
        num_spec_tokens=pl.when(pl.col("accept_len").is_not_null()).then(pl.lit(k, pl.Int64)),
        context_tokens=pl.col("input_tokens") + pl.col("output_tokens") / 2,
    )
    records = records.with_columns(
        note=pl.when(pl.col("tok_s").is_null() & pl.col("aggregate_tok_s").is_not_null()).then(
            pl.lit(_NOT_STREAMED)
        )
    ).filter(pl.any_horizontal(pl.col("tok_s", "accept_len", "aggregate_tok_s").is_not_null()))
    return records.drop("report", "speed", "input_tokens", "output_tokens"), new_state


ENGINE = Engine(
    "trtllm",
    KINDS,
    sequence,
    tok_s={FORMAT: "1000 / the report's average TPOT (Per User Output Speed where no TPOT)"},
)
