"""vLLM's offline summary: ``examples/offline_inference/spec_decode.py``'s counts, mean and
``acceptance at token i`` lines, one record a summary (see :mod:`breakeven.iotools.engines.vllm`'s
docstring).  A part of the vLLM engine: no ``ENGINE`` of its own."""

from __future__ import annotations

import polars as pl

from breakeven.iotools.lines import Field, LineKind

# examples/offline_inference/spec_decode.py's summary, one value a line (see the docstring).
OFFLINE = "vllm_offline_spec_decode"
OFFLINE_AT = "vllm_offline_acceptance_at_token"
_OFFLINE_COUNTS = (  # kind, the line's start, column; in the order the example prints them
    ("vllm_offline_output_tokens", "total_num_output_tokens:", "offline_output_tokens"),
    ("vllm_offline_drafts", "num_drafts:", "offline_drafts"),
    ("vllm_offline_draft_tokens", "num_draft_tokens:", "offline_draft_tokens"),
    ("vllm_offline_accepted", "num_accepted_tokens:", "offline_accepted"),
    ("vllm_offline_mean", "mean acceptance length:", "offline_mean"),
)
OFFLINE_KINDS = (*(name for name, _, _ in _OFFLINE_COUNTS), OFFLINE_AT)
OFFLINE_COLUMNS = {
    **{column: pl.Float64 for _, _, column in _OFFLINE_COUNTS},
    "offline_position": pl.Float64,
    "offline_rate": pl.Float64,
}
NO_DRAFTS_NOTE = "no drafts in this summary (num_drafts 0): no acceptance"


def _offline_count(name: str, start: str, column: str) -> LineKind:
    """A count line of the offline summary: ``start``, a space, one value, nothing after."""
    return LineKind(
        name,
        "vllm",
        start + " ",
        fields=(Field(column, rf"^\s*{start} *(\S+)\s*$", start.rstrip(":")),),
        required=(column,),
        match=rf"^\s*{start} ",
    )


OFFLINE_LINE_KINDS = (
    *(_offline_count(name, marker, column) for name, marker, column in _OFFLINE_COUNTS),
    LineKind(
        OFFLINE_AT,
        "vllm",
        "acceptance at token ",
        fields=(
            Field("offline_position", r"^\s*acceptance at token (\d+):", "acceptance at token"),
            Field("offline_rate", r"^\s*acceptance at token \d+: *(\S+)\s*$", "acceptance"),
        ),
        required=("offline_position", "offline_rate"),
        match=r"^\s*acceptance at token \d+:",
    ),
)


def offline_records(
    rows: pl.DataFrame, held: pl.DataFrame | None, k: int | None, final: bool
) -> tuple[pl.DataFrame | None, pl.DataFrame | None]:
    """Records of the offline summaries in ``rows`` (after the lines ``held`` from the block
    before), and the lines of the last summary, held back unless ``final``: more of its
    lines may follow in the next block.

    A summary's lines come in the example's order (counts, mean, then positions 0, 1, ...):
    a line that does not come after the one before in that order starts another summary.
    """
    if held is not None:
        rows = pl.concat([held, rows], how="diagonal_relaxed") if rows.height else held
    if not rows.height:
        return None, None
    rows = rows.with_columns(
        pl.lit(None, t).alias(c) for c, t in OFFLINE_COLUMNS.items() if c not in rows.columns
    )
    order = {name: i for i, name in enumerate(OFFLINE_KINDS)}
    rank = pl.col("kind").replace_strict(order, return_dtype=pl.Float64) + pl.col(
        "offline_position"
    ).fill_null(0.0)
    at = pl.col("kind") == OFFLINE_AT
    # Positions count up by one; a count line comes after the lines before it in the order.
    follows = (
        pl.when(at & (rank.shift(1) >= order[OFFLINE_AT]))
        .then(rank == rank.shift(1) + 1)
        .otherwise(rank > rank.shift(1))
    )
    rows = rows.with_columns(summary=(~follows.fill_null(False)).cum_sum())
    kept = None
    if not final:
        last = rows["summary"][-1]
        kept = rows.filter(pl.col("summary") == last).drop("summary")
        rows = rows.filter(pl.col("summary") != last)
        if not rows.height:
            return None, kept
    launched = "launch_k" in rows.columns
    return _summary_records(_summaries(rows, k), launched), kept


def _summaries(rows: pl.DataFrame, k: int | None) -> pl.DataFrame:
    """The offline summaries' lines (numbered by ``summary``) as one row a summary: its first
    line, counts, printed mean, ``per_position`` rates, ``given_k`` (``k``, else the launch's)
    and launch (see :func:`_offline`)."""
    at = pl.col("kind") == OFFLINE_AT
    given = pl.lit(k, pl.Int64)
    if "launch_k" in rows.columns:
        given = pl.coalesce(given, pl.col("launch_k").cast(pl.Int64, strict=False))
    first = [
        pl.col(c).drop_nulls().first().alias(c)
        for c in ("offline_output_tokens", "offline_drafts", "offline_draft_tokens")
    ]
    return rows.group_by("summary", maintain_order=True).agg(
        pl.col("line").first(),
        *first,
        pl.col("offline_accepted").drop_nulls().first(),
        pl.col("offline_mean").drop_nulls().first(),
        pl.col("offline_rate").filter(at).alias("per_position"),
        given.first().alias("given_k"),
        *(
            pl.col(c).first()
            for c in ("launch_line", "launched_at", "env", "launch_model", "launch_method")
            if c in rows.columns
        ),
    )


def _summary_records(summaries: pl.DataFrame, launched: bool) -> pl.DataFrame:
    """The records of offline summaries (:func:`_summaries`; ``launched``: they carry their
    launch's settings), see :func:`_offline`."""
    drafts = pl.col("offline_drafts")
    accepted = pl.col("offline_accepted")
    positions = pl.col("per_position").list.len()
    row_k = pl.when(positions > 0).then(positions).otherwise(pl.col("given_k"))
    from_counts = 1 + accepted / drafts
    # Where a count is missing (not printed, or a line that did not parse), the printed mean.
    accept_len = (
        pl.when(drafts.is_null() | accepted.is_null())
        .then(pl.col("offline_mean"))
        .when(drafts > 0)
        .then(from_counts)
    )
    printed = pl.col("offline_mean")
    # The example prints the mean with 2 decimals ("%.2f"): it agrees within their rounding.
    disagrees = (drafts > 0) & ((printed - from_counts).abs() > 0.005 + 1e-9)
    draft_tokens = pl.col("offline_draft_tokens")
    return summaries.select(
        "line",
        *(c for c in ("launch_line", "launched_at", "env") if c in summaries.columns),
        format=pl.lit(OFFLINE),
        num_spec_tokens=row_k,
        num_drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        per_position=pl.when(positions > 0).then(pl.col("per_position")),
        accept_len=accept_len,
        acceptance_rate=pl.when(draft_tokens > 0)
        .then(accepted / draft_tokens)
        .when(draft_tokens.is_null() & (row_k > 0))
        .then((accept_len - 1) / row_k),
        note=pl.when(drafts == 0)
        .then(pl.lit(NO_DRAFTS_NOTE))
        .when(disagrees)
        .then(
            pl.lit("printed mean acceptance length ")
            + printed.cast(pl.String)
            + pl.lit(" is not 1 + num_accepted_tokens / num_drafts = ")
            + from_counts.round(4).cast(pl.String)
        ),
        undecided=pl.lit(False),
        **(
            {
                "model": pl.col("launch_model"),
                "spec_method": pl.col("launch_method"),
            }
            if launched
            else {}
        ),
    )
