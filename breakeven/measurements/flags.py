"""The data-quality flags of ``breakeven check``: their codes (:data:`FLAGS`), those that leave
a comparison no verdict (:data:`DOUBT`), how they are collected, and the findings on rows
(accept_len out of range, ITL for TPOT, aggregate rates), on a run's server log against its client
benchmark, and on a measured speedup against the cycle model's prediction."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.core.quantities import number_text as _n
from breakeven.measurements.intervals import verdict
from breakeven.measurements.normalise import key_request_rate
from breakeven.model.pooling import decoded_tokens, group_pooled_rates

LINES_SHOWN = 20  # line numbers listed per flag or comparison


# Stable codes, and what each means.
FLAGS = {
    "baseline_drift": "baselines of the same model, hardware and concurrency disagree",
    "baseline_missing": "no baseline run of the same model, hardware and concurrency",
    "stale_baseline": "the baseline ran in another launch whose settings differ from the "
    "speculative run's launch (more than speculation)",
    "baseline_unverified": "the baseline ran in another launch, and nothing shows whether that "
    "launch was configured the same way as the speculative run's",
    "unnamed_pairing": "the baseline comes from another source file than the speculative run, "
    "and neither model nor hardware is named for them",
    "prediction_mismatch": "the measured speedup differs from the predicted one by more than "
    "the tolerance",
    "accept_len_out_of_range": "accept_len is outside [1, k + 1]",
    "itl_per_chunk": "tok_s was computed from ITL, not TPOT",
    "server_client_mismatch": "the server's own throughput and the client benchmark disagree",
    "launches_disagree": "launches (server starts) of one configuration disagree by more than "
    "1.5x and more than their own spread explains: the host decided the numbers, not the "
    "configuration",
    "swapped_pair": "the baseline's rows show speculation (drafts, acceptance, k > 0) and the "
    "speculative run's none: the two look swapped",
    "speedup_above_bound": "a measured speedup above k + 1, which no cycle can give: a rate that "
    "is not per sequence, or a baseline from another load",
    "cycle_below_step": "the cycle a run's rate and accept_len imply is shorter than the "
    "baseline's plain step: faster than its accept_len allows",
    "node_drift": "the nodes of a cluster (sweep --ray), each of which measured the whole "
    "sweep, disagree beyond noise on a k's speedup at one load: the pooled interval widens to "
    "cover them",
    "sampling_differs": "the speculative run and its baseline were measured with other "
    "sampling settings (temperature, top_p, max_tokens, ignore_eos): their outputs differ in "
    "length or text, and so their rates and acceptance",
    "aggregate_rate": "a per-sequence tok_s that equals or exceeds the aggregate rate of all "
    "sequences at concurrency > 1: an aggregate typed or recorded as per-sequence",
}


DOUBT = {
    "launches_disagree": "too noisy",
    "swapped_pair": "looks swapped",
    "speedup_above_bound": "implausible",
}
"""The flags that leave a comparison no verdict of faster or slower, and the verdict it gets
instead: the data cannot decide, so no config is pasted from it."""


@dataclass(frozen=True)
class Flag:
    """One finding: a stable code, a sentence, and the file lines it concerns."""

    code: str
    """One of :data:`FLAGS`."""
    message: str
    """What was found and what to do, in a sentence."""
    lines: tuple[int, ...] = ()
    """Lines of the measurements file the finding is about (the first :data:`LINES_SHOWN`)."""
    line_count: int = 0
    """How many lines the finding is about, when more than are listed."""


@dataclass(frozen=True)
class ServerCheck:
    """A run measured both by the client benchmark and in the server's own log."""

    run_id: str
    """The run."""
    server_tok_s: float
    """Mean per-sequence rate from the server's lines [tok/s]."""
    client_tok_s: float
    """Mean per-sequence rate from the client benchmark [tok/s]."""
    ratio: float
    """server_tok_s / client_tok_s [x]."""
    agree: bool
    """Whether the ratio is within the tolerance of 1."""


def _lines(column: Any) -> tuple[int, ...]:
    """The first :data:`LINES_SHOWN` file lines of some rows (a Series or an array)."""
    values = column.to_numpy() if hasattr(column, "to_numpy") else np.asarray(column)
    return tuple(map(int, values[:LINES_SHOWN].tolist()))


@dataclass
class _Findings:
    """Flags found so far, and the codes raised on each file line."""

    flags: list[Flag] = field(default_factory=list)
    by_line: dict[int, set[str]] = field(default_factory=dict)
    said: set[str] = field(default_factory=set)
    """Messages already added (a baseline's flag, found again for each run paired with it)."""

    def add(self, flag: Flag, rows: Sequence[int] = ()) -> None:
        if flag.message in self.said:
            return
        self.said.add(flag.message)
        self.flags.append(flag)
        for line in rows:
            self.by_line.setdefault(int(line), set()).add(flag.code)


def flag_rows(df: Any, findings: _Findings) -> None:
    """Flag speculative rows whose accept_len is outside [1, k + 1], or whose tok_s is
    1000 / itl_ms where a chunk carries several tokens."""

    spec = df["is_spec"].to_numpy()
    tau, k, line = (df[c].to_numpy() for c in ("accept_len", "num_spec_tokens", "line"))
    with np.errstate(invalid="ignore"):
        out_of_range = spec & ((tau < 1) | (tau > k + 1 + 0.005))
    for i in np.flatnonzero(out_of_range):
        at = int(line[i])
        kind = "below 1" if tau[i] < 1 else f"above k + 1 = {k[i] + 1:g}"
        findings.add(
            Flag(
                "accept_len_out_of_range",
                f"Line {at}: accept_len {tau[i]:g} is {kind}; a cycle emits 1 to k + 1 "
                "tokens (bonus included). Check that the source counts the bonus token "
                "and that k is right.",
                (at,),
            ),
            (at,),
        )
    _flag_aggregates(df, findings)
    itl, tok, tpot = (df[c].to_numpy() for c in ("itl_ms", "tok_s", "tpot_ms"))
    chunky = np.flatnonzero(spec & ~np.isnan(itl) & ~np.isnan(tok))  # few rows have an ITL
    from_itl = np.abs(tok[chunky] * itl[chunky] / 1000.0 - 1) <= 0.02
    with np.errstate(invalid="ignore"):
        several = (itl[chunky] > 1.2 * tpot[chunky]) | (
            np.isnan(tpot[chunky]) & (tau[chunky] > 1.2)
        )
    for i in chunky[from_itl & several]:
        at = int(line[i])
        findings.add(
            Flag(
                "itl_per_chunk",
                f"Line {at}: tok_s {_n(tok[i], 2)} equals 1000 / itl_ms; under "
                "speculation a streamed chunk carries about accept_len tokens, so this "
                "undercounts the decode rate. Use 1000 / tpot_ms.",
                (at,),
            ),
            (at,),
        )


AGGREGATE_EQUAL = 0.01
"""A per-sequence tok_s within this fraction of the aggregate rate, at concurrency > 1, is the
aggregate written as per-sequence (``aggregate_rate``)."""


def _flag_aggregates(df: Any, findings: _Findings) -> None:
    """Flag rows at concurrency > 1 whose per-sequence tok_s equals their aggregate rate (an
    aggregate typed or recorded as per-sequence), or, on a row that is not one request's
    (a level's, a window's, a typed row), exceeds it: one sequence cannot decode faster than
    all of them together."""
    tok, agg, conc = (
        df[c].to_numpy(dtype=float) for c in ("tok_s", "aggregate_tok_s", "concurrency")
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = tok / agg
        one_request = (df["origin"] == "client").to_numpy()
        equal = np.abs(ratio - 1) <= AGGREGATE_EQUAL
        above = ~one_request & (ratio > 1 + DEFAULT_TOLERANCE)
        found = (conc > 1) & (agg > 0) & (equal | above)
    line = df["line"].to_numpy()
    for i in np.flatnonzero(found):
        at = int(line[i])
        how = "equals" if equal[i] else "exceeds"
        findings.add(
            Flag(
                "aggregate_rate",
                f"Line {at}: tok_s {_n(tok[i], 2)} {how} the aggregate rate "
                f"{_n(agg[i], 2)} tok/s of all {conc[i]:g} sequences; tok_s is one "
                "sequence's rate, about the aggregate over the concurrency "
                f"({_n(agg[i] / conc[i], 2)} tok/s here). An aggregate written as "
                "per-sequence inflates a speedup up to the concurrency.",
                (at,),
            ),
            (at,),
        )


def cross_check(df: Any, tolerance: float, findings: _Findings) -> list[ServerCheck]:
    """Each run measured both in the server's log and by a client benchmark: do they agree?"""
    origins = df["origin"]
    present = set(origins.cat.categories[origins.cat.codes.unique()])
    if not {"server", "client"} <= present:  # one view only: nothing to cross-check
        return []
    # The client's rates as it measured them (check gave its rows the server's: normalise).
    measured = df["tok_s"].where(df["origin"] == "server", df["client_tok_s"])
    runs = df.assign(tok_s=measured).loc[
        (df["run_id"] != "") & measured.notna() & df["origin"].isin(["server", "client"]),
        ["run_id", "origin", "tok_s", "completion_tokens", "line"],
    ]
    runs = runs.assign(run_id=runs["run_id"].astype(str), origin=runs["origin"].astype(str))
    means = _pooled_rates(runs).unstack()
    if not {"server", "client"} <= set(means.columns):
        return []
    both = means.dropna(subset=["server", "client"])
    lines_by_run = runs[runs["run_id"].isin(both.index)].groupby("run_id", observed=True)["line"]
    checks = []
    for run_id, server, client in zip(both.index, both["server"], both["client"], strict=True):
        ratio = server / client
        agree = bool(abs(ratio - 1) <= tolerance)
        checks.append(ServerCheck(str(run_id), float(server), float(client), float(ratio), agree))
        if not agree:
            lines = _lines(lines_by_run.get_group(run_id))
            findings.add(
                Flag(
                    "server_client_mismatch",
                    f"Run {run_id}: the server logged {_n(server, 2)} tok/s per "
                    f"sequence, the client measured {_n(client, 2)} ({_n(ratio, 3)}x). "
                    "The server's counters are the run's rate here (the engine timed its "
                    "own decode); the client's is the cross-check: a client that shares a "
                    "core with the server falls behind its streams, or it measured another "
                    "decode (prefill exclusion, concurrency, ITL for TPOT).",
                    lines,
                ),
                lines,
            )
    return checks


def _pooled_rates(runs: Any) -> Any:
    """Each (run_id, origin)'s per-sequence rate [tok/s], a ratio of sums
    (:func:`~breakeven.measurements.intervals.pooled_rate`): the client's requests pooled as the server's
    counters pool them (a server's row is one already)."""
    number, keys = pd.factorize(pd.MultiIndex.from_frame(runs[["run_id", "origin"]]))
    rates, _ = group_pooled_rates(
        number,
        runs["tok_s"].to_numpy(dtype=float),
        decoded_tokens(runs["completion_tokens"]).to_numpy(dtype=float),
        len(keys),
    )
    return pd.Series(rates, index=keys)


def _mismatch(
    label: str,
    lines: tuple[int, ...],
    measured: float,
    predicted: float,
    tau: float,
    step: float,
    cycle: float,
    s_mean: float,
    implied: float,
) -> Flag:
    """The flag of a measured speedup [x] off the cycle model's prediction [x], from accept_len
    ``tau`` [tokens/cycle], the baseline ``step`` [ms] and the ``cycle`` [ms]; with the run's
    mean rate ``s_mean`` [tok/s], the cycle it ``implied`` [ms]."""
    return Flag(
        "prediction_mismatch",
        f"{label or 'A speculative run'} (line {lines[0]}): measured "
        f"{_n(measured, 3)}x, the cycle model predicts {_n(predicted, 3)}x from "
        f"accept_len {_n(tau, 3)}, step {_n(step, 3)} ms and cycle "
        f"{_n(cycle, 3)} ms. "
        + (
            f"The measured run implies a {_n(implied, 3)} ms cycle: check"
            if s_mean > 0
            else "Check"
        )
        + " the cycle profile and the baseline.",
        lines,
    )


def _cycle_below_step(
    label: str,
    conc: float,
    lines: tuple[int, ...],
    implied: float,
    tau: float,
    s_mean: float,
    step: float,
) -> Flag:
    """The flag of a run whose implied cycle [ms] is shorter than the baseline's step [ms]."""
    return Flag(
        "cycle_below_step",
        f"{label} {_at_concurrency(conc)}: the measurement implies a "
        f"{_n(implied, 3)} ms cycle (accept_len {_n(tau, 3)} at {_n(s_mean, 2)} tok/s), "
        f"shorter than the baseline's {_n(step, 3)} ms plain step, so it is faster "
        "than its accept_len allows; a verify forward costs at least a step. The "
        "accept_len is not this run's (pooled over other runs, or the bonus token "
        "counted twice), or the baseline ran on a slower host or load.",
        lines,
    )


def _verdict(measured: float, low: float, high: float, codes: set[str]) -> str:
    """The interval's verdict, unless a flag of :data:`DOUBT` leaves the data no verdict."""
    for code, said in DOUBT.items():
        if code in codes:
            return said
    return verdict(measured, low, high)


def _percent(ratio: float) -> str:
    """A relative difference in percent; a baseline of 0 tok/s makes it unbounded."""
    return f"{ratio:.1%}" if math.isfinite(ratio) else "an unbounded factor (a rate of 0)"


def _at_concurrency(value: float) -> str:
    """'at concurrency 8', 'at 4 req/s' for an open-loop level (a level key below -1:
    :func:`breakeven.measurements.normalise.level_key`), or 'at an unknown concurrency' where
    the rows did not say."""
    if value < -1:
        return f"at {key_request_rate(value):g} req/s"
    return f"at concurrency {value:g}" if value >= 0 else "at an unknown concurrency"
