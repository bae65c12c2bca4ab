"""The runs of llama.cpp's command-line programs, ``llama-cli`` and ``llama-speculative``:
the names of their line kinds (defined in :mod:`breakeven.iotools.engines.llamacpp`, whose
``sequence`` hands their rows to :func:`_runs`) and one record a run."""

from __future__ import annotations

from typing import Any

import polars as pl

from breakeven.iotools.lines import LAUNCH_COLUMNS

CLI_EVAL = "llamacpp_cli_eval"  # llama_perf_context_print's "eval time = ... / N runs"
SPEC_ENCODED = "llamacpp_spec_encoded"  # llama-speculative: "encoded N tokens in ..."
SPEC_DECODED = "llamacpp_spec_decoded"  # "decoded N tokens in T seconds, speed: S t/s"
SPEC_COUNTS = {  # llama-speculative's summary counts: kind, and the name as printed, padded
    "llamacpp_spec_n_draft": "n_draft   ",
    "llamacpp_spec_n_predict": "n_predict ",
    "llamacpp_spec_n_drafted": "n_drafted ",
    "llamacpp_spec_n_accept": "n_accept  ",
}
CLI_KINDS = (CLI_EVAL, SPEC_ENCODED, SPEC_DECODED, *SPEC_COUNTS)
CLI_FORMAT = "llamacpp_cli"
SPECULATIVE_FORMAT = "llamacpp_speculative"


def _runs(
    rows: pl.DataFrame, state: dict[str, Any], new_state: dict[str, Any], final: bool
) -> tuple[pl.DataFrame | None, list[tuple[int, str]]]:
    """Records of ``llama-cli`` and ``llama-speculative`` output, and problems.

    ``llama_perf_context_print`` (``src/llama-context.cpp``; ``llama_print_timings`` before
    late 2024) prints ``eval time = T ms / N runs (..., R tokens per second)``: N single-token
    decodes, every generated token but the first (sampled from the prompt's batch).  Outside a
    ``llama-speculative`` summary it is a ``llama-cli`` run of one sequence without speculation:
    a baseline whose rate R is the sequence's.

    ``llama-speculative`` (``examples/speculative/speculative.cpp``) prints ``decoded N tokens
    in T seconds, speed: S t/s`` (``generated`` in 2023), then ``n_draft`` (k), ``n_predict``
    (tokens made), ``n_drafted``, ``n_accept``; then the draft and the target model's perf
    blocks, whose eval lines (decode calls of the draft, the target's single-token ones) are no
    run of their own: every eval line after a summary, up to the next launch, is left out.
    Each round samples the accepted tokens and one more from the target; the first round
    samples from the prompt's batch, every later one verifies a draft of k tokens, so it ran
    ``n_predict - n_accept - 1`` verify steps and ``n_drafted = k x`` that:
    ``accept_len = 1 + n_accept / (n_predict - n_accept - 1)``.  ``llama-speculative-simple``
    prints the same lines but verifies in every round (``n_predict - n_accept`` steps,
    ``n_drafted`` the tokens of drafts of up to k).  Drafts stop short of k where the draft
    model's confidence falls below ``--draft-p-min`` (a draft under ``--draft-min`` is dropped):
    then ``n_drafted`` is less than k times the steps, the decode rate is still the one
    sequence's, and :func:`_short_drafts` says what acceptance the counts still give."""
    out, problems, run, spec_launch = _closed_runs(
        rows, state.get("run"), state.get("spec_launch"), final
    )
    new_state["run"], new_state["spec_launch"] = run, spec_launch
    if not out:
        return None, problems
    frame = pl.DataFrame(
        out,
        schema_overrides={
            "line": pl.Int64,
            **LAUNCH_COLUMNS,
            "num_spec_tokens": pl.Int64,
            "concurrency": pl.Int64,
        },
        infer_schema_length=None,
    )
    return frame.with_columns(undecided=pl.lit(False)), problems


def _closed_runs(
    rows: pl.DataFrame, run: dict[str, Any] | None, spec_launch: Any, final: bool
) -> tuple[list[dict[str, Any]], list[tuple[int, str]], dict[str, Any] | None, Any]:
    """The records and problems of the runs that ``rows`` close (all, where ``final``), after
    the summary ``run`` left open by the rows before; then the summary still open and the
    launch of the last summary (``spec_launch``; see :func:`_runs`)."""
    problems: list[tuple[int, str]] = []
    out: list[dict[str, Any]] = []

    def close(run: dict[str, Any]) -> None:
        record, problem = _speculative_record(run)
        if record is not None:
            out.append(record)
        if problem is not None:
            problems.append((run["line"], problem))

    if rows.height:
        if "launch_line" not in rows.columns:
            rows = rows.with_columns(*(pl.lit(None, t).alias(c) for c, t in LAUNCH_COLUMNS.items()))
        for row in rows.iter_rows(named=True):
            launch = -1 if row["launch_line"] is None else row["launch_line"]
            kind = row["kind"]
            if kind in (SPEC_ENCODED, SPEC_DECODED):
                if run is not None and (kind == SPEC_ENCODED or "n" in run):
                    close(run)  # a summary that stopped short
                    run = None
                if run is None:
                    run = {"line": row["line"], "launch": launch}
                    for c in LAUNCH_COLUMNS:
                        run[c] = row[c]
                if kind == SPEC_ENCODED:
                    run["encoded"] = row["spec_encoded"]
                else:
                    run.update(n=row["spec_decoded"], tok_s=row["tok_s"], line=row["line"])
                spec_launch = launch
            elif kind in SPEC_COUNTS:
                if run is not None:
                    run[SPEC_COUNTS[kind].strip()] = row["spec_value"]
                    if kind == "llamacpp_spec_n_accept":
                        close(run)
                        run = None
            elif launch != spec_launch:  # CLI_EVAL outside a speculative run
                runs, ms = row["eval_runs"], row["eval_ms"]
                out.append(
                    {
                        "line": row["line"],
                        **{c: row[c] for c in LAUNCH_COLUMNS},
                        "format": CLI_FORMAT,
                        "num_spec_tokens": 0,
                        "concurrency": 1,
                        "tok_s": row["tok_s"],
                        # the decodes its rate counts, and the first token (the prompt's)
                        "completion_tokens": 1 + runs if runs is not None and ms else None,
                    }
                )
    if final and run is not None:
        close(run)
        run = None
    return out, problems, run, spec_launch


def _speculative_record(run: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A ``llama-speculative`` summary's record, or why it gives none (see :func:`_runs`)."""
    names = ("n", "n_draft", "n_predict", "n_drafted", "n_accept")
    missing = [n if n != "n" else "decoded" for n in names if run.get(n) is None]
    if missing:
        return None, "llama-speculative summary without " + ", ".join(missing) + ": not read"
    k, made, drafted, accepted = (int(run[n]) for n in names[1:])
    steps, note = None, None
    for rounds in (made - accepted - 1, made - accepted):  # -speculative, then -simple
        if k > 0 and rounds > 0 and drafted == k * rounds:
            steps = rounds
            break
    if steps is None:
        steps, note = _short_drafts(k, made, drafted, accepted)
        if note is None:
            return None, (
                f"llama-speculative summary not read: n_drafted = {drafted} is more than "
                f"n_draft x (n_predict - n_accept) = {k * (made - accepted)}, or n_accept = "
                f"{accepted} more than n_drafted: its counts do not add up"
            )
    encoded = run.get("encoded")
    record = {
        "line": run["line"],
        **{c: run.get(c) for c in LAUNCH_COLUMNS},
        "format": SPECULATIVE_FORMAT,
        "num_spec_tokens": k,
        "concurrency": 1,
        "tok_s": run["tok_s"],
        "completion_tokens": float(run["n"]),
        "accepted_tokens": float(accepted),
        "draft_tokens": float(drafted),
        "acceptance_rate": accepted / drafted if drafted else None,
        "num_drafts": float(steps) if steps is not None else None,
        "accept_len": 1 + accepted / steps if steps is not None else None,
        # its prompt, and half the tokens it made: the mean context while it decoded
        "context_tokens": encoded + run["n"] / 2 if encoded is not None else None,
        "note": note,
    }
    return record, None


def _short_drafts(k: int, made: int, drafted: int, accepted: int) -> tuple[int | None, str | None]:
    """The verify steps of a summary whose drafts stopped short of k (``n_drafted`` below k
    times the steps), where the counts tell them, and the record's note; ``(None, None)`` for
    counts that do not add up (more drafted than k a step, or more accepted than drafted).

    Every step yields its accepted tokens and one more, so the steps are ``n_predict -
    n_accept - 1`` (``llama-speculative``, whose first token is the prompt's) or ``n_predict -
    n_accept`` (``llama-speculative-simple``), whatever the drafts' lengths.  Drafts of at most
    k tokens each fit ``n_drafted <= k x steps``: where only the second count fits, the run is
    ``-simple`` and accept_len is known; where both fit, the summary does not tell the two
    programs apart and accept_len is one of two values, given in the note, not in the record.
    """
    fits = [r for r in (made - accepted - 1, made - accepted) if r > 0 and drafted <= k * r]
    if k <= 0 or not fits or accepted > drafted:
        return None, None
    short = (
        f"drafts stopped short of k = {k} (n_drafted = {drafted} < n_draft x verify steps: "
        "--draft-p-min ends a draft early, a draft under --draft-min is dropped): k is n_draft, "
        "the most a draft "
        f"held; acceptance_rate is n_accept / n_drafted = {accepted}/{drafted} over the "
        "shorter drafts; the decode rate is the sequence's"
    )
    if len(fits) == 1:
        (steps,) = fits
        return steps, (
            f"{short}; accept_len is 1 + {accepted}/{steps} verify steps "
            "(n_predict - n_accept: only llama-speculative-simple's count fits)"
        )
    a, b = fits
    return None, (
        f"{short}; accept_len is 1 + {accepted}/{a} = {1 + accepted / a:.3f} "
        f"(llama-speculative) or 1 + {accepted}/{b} = {1 + accepted / b:.3f} "
        "(llama-speculative-simple): the summary does not tell which program printed it, "
        "so accept_len is left empty"
    )
