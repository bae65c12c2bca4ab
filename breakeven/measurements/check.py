"""Check measured speedups against the model, and catch stale or drifting baselines.

Each speculative run (``num_spec_tokens > 0``) is paired with the baseline runs
(``num_spec_tokens == 0``) of the same model, hardware and concurrency.  Rows
that share a label, k, method and environment fingerprint are repeats of one
run.  For each pairing: the measured speedup (speculative over baseline
``tok_s``, each a ratio of sums) with a bootstrap confidence interval whose unit
is the launch, the speedup the cycle model predicts from the run's ``accept_len``
and cycle cost, their residual, and the cycle cost the measurement implies,
``1000 * accept_len / tok_s``.

A baseline is judged by its *launch* (one server start: ``launch_id``,
``launched_at``; :mod:`breakeven.core.provenance`), never by its URL.  It is fair when
it comes from the run's own launch, or from a launch whose settings (the
fingerprint: ``env`` less speculation and less what the client chose) equal the
run's launch's where both know their server's environment.  Otherwise it is
``baseline_unverified`` (another launch, how long before, nothing recorded of
its environment) or ``stale_baseline`` (what differs, named, with both
launches' times): the case study's NCCL variables, lost on a restart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from breakeven import render
from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.core.provenance import (
    ENV_SOURCES,
    ENVIRONMENT_KNOWN,
    age_text,
    fingerprint,
    is_environment_key,
)
from breakeven.core.quantities import DEFAULT_TOLERANCE, LAUNCH_SPREAD_LIMIT, plain_json
from breakeven.core.quantities import number_text as _n
from breakeven.core.schema import (
    ALL_COLUMNS,
    SPECULATIVE_SERVER,
    bad_number_message,
    first_bad_number,
)
from breakeven.iotools.csvfile import read_measurements
from breakeven.measurements.intervals import (
    LaunchSpread,
    SpeedupInterval,
    interval_of,
    side_and_spread,
    verdict,
)
from breakeven.measurements.plausibility import speedup_bound
from breakeven.measurements.positions import PositionRow, by_run
from breakeven.measurements.workload import CategoryRow, MixAnswer, as_dicts, by_category
from breakeven.model.formulas import _implied_cycle_ms, _speedup, _step_ms
from breakeven.model.formulas import cycle_ms as cycle_of
from breakeven.model.pooling import (
    adopt_server_rates,
    decoded_tokens,
    group_pooled_accept_len,
    group_pooled_rates,
    server_echoes,
    take_server_view,
)

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
class Comparison:
    """One speculative run against its baseline."""

    label: str
    """The speculative run's label."""
    model: str
    """Target model."""
    hardware: str
    """GPUs and interconnect."""
    concurrency: float
    """Requests decoded together [sequences]."""
    num_spec_tokens: float
    """k [tokens] (NaN when the source did not say)."""
    spec_method: str
    """Drafting method."""
    runs: int
    """Speculative rows with a tok_s (or a published speedup)."""
    baseline_runs: int
    """Baseline rows compared with."""
    tok_s: float
    """Per-sequence decode rate with speculation [tok/s]: the mean of its launches' rates,
    each a ratio of sums, the tokens its requests decoded over their decode time, where its
    rows give their tokens (completion_tokens), else the mean of its rows' rates (log
    windows); one launch's rate where it has one."""
    baseline_tok_s: float
    """Per-sequence decode rate of the baseline [tok/s], over its launches as ``tok_s`` is."""
    measured_speedup: float
    """tok_s / baseline_tok_s [x]: the speedup of several launches, the same in ``compare``,
    ``check``, ``sweep`` and the report (docs/concepts/intervals.md)."""
    ci_low: float
    """Lower end of the 95% confidence interval of measured_speedup [x]."""
    ci_high: float
    """Upper end of the 95% confidence interval of measured_speedup [x]."""
    verdict: str
    """'faster', 'slower', 'within noise' (the interval holds 1) or 'no interval' (too few
    values or launches: :mod:`breakeven.measurements.intervals`); where the data cannot decide, a verdict
    of :data:`DOUBT`: 'too noisy', 'looks swapped' or 'implausible'."""
    accept_len: float
    """The run's accept_len [tokens/cycle]: pooled from counts, 1 + sum(accepted) /
    sum(drafts), where its rows give their drafts (num_drafts); else their mean."""
    cycle_ms: float
    """Cycle cost from the rows: cycle_ms, or verify_ms + draft_ms [ms]."""
    predicted_speedup: float
    """accept_len * step_ms / cycle_ms, step from the baseline [x]."""
    residual: float
    """measured_speedup - predicted_speedup [x]."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s: the cycle the measurement implies [ms]."""
    flags: tuple[str, ...]
    """Codes of the flags that concern this comparison."""
    lines: tuple[int, ...]
    """Lines of the speculative rows (the first :data:`LINES_SHOWN`)."""
    baseline_lines: tuple[int, ...]
    """Lines of the baseline rows compared with (the first :data:`LINES_SHOWN`)."""
    fingerprint: str = ""
    """The run's environment (:func:`fingerprint`)."""
    launch_note: str = ""
    """Why the baseline's launch is stale or unverified, in a clause (empty when fair)."""
    launch_spread: float = math.nan
    """The fastest launch's rate over the slowest's [x], on whichever side (speculative or
    baseline) disagrees more; NaN where neither side has two launches."""


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


@dataclass(frozen=True)
class Baseline:
    """The baseline runs of one model, hardware, concurrency and environment."""

    model: str
    hardware: str
    concurrency: float
    """[sequences] (NaN where the rows do not say)."""
    fingerprint: str
    """The environment (:func:`fingerprint`)."""
    labels: tuple[str, ...]
    """The runs' labels."""
    tok_s: float
    """Mean per-sequence decode rate of its runs [tok/s]."""
    runs: int
    """Runs (a run_id, or a label and environment) averaged."""


@dataclass(frozen=True)
class CheckResult:
    """Every comparison, and every flag with its sentence."""

    comparisons: tuple[Comparison, ...]
    """One per speculative run."""
    flags: tuple[Flag, ...]
    """Findings, most serious first."""
    tolerance: float
    """Relative tolerance used for drift, mismatch and noise [fraction]."""
    server_checks: tuple[ServerCheck, ...] = ()
    """Runs whose server log and client benchmark were compared."""
    intervals: tuple[SpeedupInterval, ...] = ()
    """Each comparison's interval, with what it covers and how it was estimated (``compare``
    prints those)."""
    baselines: tuple[Baseline, ...] = ()
    """The baseline runs of each configuration and environment (``compare``'s report places a
    run against each)."""
    schedule_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a schedule's k and predicted speedup at its batch
    (:func:`breakeven.jobs.measure.with_schedule`); None when no schedule was given."""
    fit_check: tuple[dict[str, Any], ...] | None = None
    """Each run against a fit file's predicted speedup at its k, with the prediction's
    interval (:func:`breakeven.jobs.measure.with_fit`); None when no fit file was given."""
    categories: tuple[CategoryRow, ...] = ()
    """Each speculative run's rows of each workload category against the baseline's of that
    category (:func:`breakeven.measurements.workload.by_category`); none where no row has a category."""
    mix: tuple[MixAnswer, ...] = ()
    """Each run's speedup over a traffic mix (:func:`breakeven.jobs.measure.with_mix`)."""
    positions: tuple[PositionRow, ...] = ()
    """Each speculative run's acceptance at each draft position and its accept_len at every
    smaller k (:func:`breakeven.measurements.positions.by_run`); none where no row gives them."""

    def to_dict(self) -> dict[str, Any]:
        """``comparisons``, ``flags`` (each ``{code, message, lines}``) and ``tolerance``;
        ``categories`` and ``mix`` where rows have a category and a mix was given; and
        ``schedule_check`` and ``fit_check`` when a schedule or fit file was given; NaN (not
        measured) is None, an infinity (an overflow) is kept for the caller to refuse."""
        data = {
            "comparisons": [plain_json(asdict(c), keep_infinite=True) for c in self.comparisons],
            "flags": [
                {
                    "code": f.code,
                    "message": f.message,
                    "lines": list(f.lines),
                    "line_count": max(f.line_count, len(f.lines)),
                }
                for f in self.flags
            ],
            "server_checks": [asdict(c) for c in self.server_checks],
            "baselines": [plain_json(asdict(b), keep_infinite=True) for b in self.baselines],
            "tolerance": self.tolerance,
        }
        if self.categories:
            data["categories"] = as_dicts(self.categories)
        if self.mix:
            data["mix"] = as_dicts(self.mix)
        if self.positions:
            data["positions"] = as_dicts(self.positions)
        if self.schedule_check is not None:
            data["schedule_check"] = [dict(row) for row in self.schedule_check]
        if self.fit_check is not None:
            data["fit_check"] = [plain_json(dict(row)) for row in self.fit_check]
        return data

    def to_frame(self) -> Any:
        """The comparisons as a pandas DataFrame."""

        return pd.DataFrame([asdict(c) for c in self.comparisons])

    def report(self) -> str:
        """What ``breakeven check`` prints: the comparisons, the server cross-checks, the
        flags, and each run against a schedule when one was given."""
        return render.check_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (the comparisons, every column), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.check_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.check_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Measured against predicted speedup with y = x and the tolerance band (``breakeven
        plot check``); returns the axes.  Raises :class:`breakeven.render.plot.NothingToDraw` when
        no run has both speedups."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.measured_vs_predicted(self.to_dict(), ax)


def _lines(column: Any) -> tuple[int, ...]:
    """The first :data:`LINES_SHOWN` file lines of some rows (a Series or an array)."""
    values = column.to_numpy() if hasattr(column, "to_numpy") else column
    return tuple(int(x) for x in values[:LINES_SHOWN])


def _launches(df: Any) -> Any:
    """Each row's launch (an integer), the unit of repetition of an interval: its
    ``launch_id`` (runs repeated within one server launch are not launches); else its
    ``run_id``; else the file of its ``source`` (a log's windows are one launch); else the
    row itself (a row typed into a CSV is a run of its own)."""

    codes = np.full(len(df), -1, dtype=np.int64)
    offset = 0
    for column in ("launch_id", "run_id"):  # a launch_id first; else a run_id
        values = df[column].astype("category")  # categories already: a view of the codes
        categories = values.cat.categories
        these = values.cat.codes.to_numpy().astype(np.int64)
        if "" in categories:
            these[these == categories.get_loc("")] = -1
        fill = (codes < 0) & (these >= 0)
        codes[fill] = offset + these[fill]
        offset += len(categories)
    launch = codes.copy()
    missing = np.flatnonzero(launch < 0)
    if len(missing):
        if "source" in df.columns:
            sources = df["source"].to_numpy(dtype=object)[missing]
            files = pd.Series(sources, dtype=object).str.replace(r":\d+$", "", regex=True)
            file_codes, _ = pd.factorize(files.where(files.fillna("") != "", None))
        else:
            file_codes = np.full(len(missing), -1)
        rows = offset + len(missing) + np.arange(len(missing))
        launch[missing] = np.where(file_codes >= 0, offset + file_codes, rows)
    return _first_appearance(launch)[0]  # numbered in file order: a launch's rows run together


# The measurement columns check reads (others, such as source, are not needed).
COLUMNS_USED = (
    "model",
    "hardware",
    "spec_method",
    "label",
    "env",
    "env_from",
    "launch_id",
    "launched_at",
    "timestamp",
    "run_id",
    "origin",
    "concurrency",
    "num_spec_tokens",
    "tok_s",
    "aggregate_tok_s",
    "accept_len",
    "cycle_ms",
    "verify_ms",
    "draft_ms",
    "step_ms",
    "tpot_ms",
    "itl_ms",
    "speedup",
    "num_drafts",
    "draft_tokens",
    "accepted_tokens",
    "completion_tokens",
    "category",
    "per_position",
    "acceptance_histogram",
    "source",
)
# Their types are the schema's; source stays as written (a row's citation, never grouped on), and
# so do the positions' (text in a CSV, lists in ingest's records: breakeven.measurements.positions reads both).
AS_WRITTEN = ("source", "per_position", "acceptance_histogram")
TIME_COLUMNS = ("launched_at", "timestamp")
"""Read as datetimes where a file writes them in one ISO 8601 form (bench's), else as text."""
_TEXT_COLUMNS = tuple(
    c
    for c in COLUMNS_USED
    if ALL_COLUMNS[c].kind == "text" and c not in AS_WRITTEN and c not in TIME_COLUMNS
)
_NUMBER_COLUMNS = tuple(c for c in COLUMNS_USED if ALL_COLUMNS[c].kind != "text")
CONFIG = ["model", "hardware", "concurrency_key"]
"""What a speculative run and its baseline share: model, hardware and concurrency."""


def check(
    data: Any, tolerance: float = DEFAULT_TOLERANCE, *, named_pairs: bool = False
) -> CheckResult:
    """Pair speculative runs with baselines; compare measured and predicted speedups; flag.

    The steps, each a function of this module that ``compare`` reuses:
    :func:`normalise` the columns, :func:`flag_rows` (acceptance out of range,
    ITL for TPOT), :func:`cross_check` server log against client benchmark,
    :func:`baselines` (and their drift), then :func:`pair` each speculative run
    with its baseline and the model's prediction.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows in the measurement schema, as :func:`breakeven.iotools.read_measurements`
        returns them (a ``line`` column, when present, names rows in flags).
    tolerance : float
        Relative tolerance for baseline drift, prediction mismatch and
        server/client agreement (default :data:`breakeven.core.quantities.DEFAULT_TOLERANCE`).
    named_pairs : bool
        The caller named which rows are the baseline of which (``compare``'s BASELINE and
        SPEC): no ``unnamed_pairing`` flag, which warns where the rows alone pair files that
        name neither model nor hardware.
    """
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise BreakevenError(
            "{0}: got " + f"{tolerance!r}, expected a fraction in (0, 1)", "tolerance"
        )
    df = normalise(data)
    findings = _Findings()
    flag_rows(df, findings)
    server_checks = cross_check(df, tolerance, findings)
    base = baselines(df, tolerance, findings)
    comparisons, intervals = pair(df, base, tolerance, findings, named_pairs=named_pairs)
    order = list(FLAGS)
    flags = sorted(findings.flags, key=lambda f: order.index(f.code))
    return CheckResult(
        tuple(comparisons),
        tuple(flags),
        float(tolerance),
        tuple(server_checks),
        tuple(intervals),
        tuple(base.summary),
        categories=by_category(df[~df["echo"]]),
        positions=by_run(df[~df["echo"]]),
    )


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


def _categorical(column: Any) -> Any:
    """A text column as categories, a missing value as "" (one more category, made from the
    codes: each distinct text is hashed once, and groupby works on integer codes)."""

    values = column.astype("category")
    codes = values.cat.codes.to_numpy()
    if not (codes < 0).any():
        return values
    categories = list(values.cat.categories)
    empty = categories.index("") if "" in categories else len(categories)
    if empty == len(categories):
        categories.append("")
    codes = np.where(codes < 0, empty, codes)
    return pd.Series(pd.Categorical.from_codes(codes, categories), index=column.index)


def normalise(data: Any) -> Any:
    """The rows with every column check reads: texts as categories ("" when missing), numbers
    as floats (a bad one refused with its line), and ``line``, ``is_spec``, ``fingerprint``,
    ``concurrency_key``, ``launch`` and ``echo`` (a server row whose run a client measured)."""

    df = data.copy(deep=False)  # columns are replaced below, never changed in place
    if "line" not in df.columns:
        df["line"] = np.arange(2, len(df) + 2)
    for column in _TEXT_COLUMNS:
        if column not in df.columns:  # all empty: one category, no strings to hash
            df[column] = pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), [""])
        df[column] = _categorical(df[column])
    for column in _NUMBER_COLUMNS:
        df[column] = pd.to_numeric(df[column], errors="coerce") if column in df.columns else np.nan
    found = first_bad_number(df)  # read_measurements says which file; a DataFrame has none
    if found is not None:
        column, at, value = found
        message = f"line {int(df['line'].iloc[at])}: {bad_number_message(column, value)}"
        raise BreakevenError(escape_braces(message))
    # A client row and the server's log of the same run are one measurement: keep the client's,
    # with what the server measured of it.
    df["echo"] = server_echoes(df)
    take_server_view(df, df["echo"])
    # The engine's own count first: a run's rate is its server's where the server's counters
    # cover its requests; the client's stays as the cross-check (``server_client_mismatch``).
    df["client_tok_s"] = adopt_server_rates(df, df["echo"])
    k = df["num_spec_tokens"]
    df["speculating_server"] = (
        df["source"].astype(str).str.contains(SPECULATIVE_SERVER, regex=False).to_numpy()
        if "source" in df.columns
        else np.zeros(len(df), dtype=bool)
    )
    df["shows_speculation"] = _shows_speculation(df)
    df["is_spec"] = (k > 0) | (k.isna() & _speculated(df))
    envs = df["env"].cat.categories
    df["fingerprint"] = df["env"].map(dict(zip(envs, map(fingerprint, envs), strict=True)))
    df["fingerprint"] = df["fingerprint"].astype("category")
    for column in TIME_COLUMNS:
        df[column] = _time_column(df[column]) if column in df.columns else _empty_text(len(df))
    df["launch_code"] = _codes(df["launch_id"])
    df["env_known"], df["recorded"] = _knowledge(df)
    df["when"] = _when(df)
    df["concurrency_key"] = df["concurrency"].fillna(-1.0)
    df["launch"] = _launches(df)
    df["decoded"] = decoded_tokens(df["completion_tokens"])
    return df


def _speculated(df: Any) -> Any:
    """Rows that show speculation whatever their k (for rows without one): an accept_len, a
    method, drafts (``num_drafts``; bench's ``draft_tokens``, llama.cpp's
    ``timings.draft_n``), or bench's note that the server showed spec-decode counters when
    the level began (:data:`~breakeven.core.schema.SPECULATIVE_SERVER`: a level stopped before the
    scrape that closes it has no server row to give its k)."""
    signs = df["accept_len"].notna() | (df["spec_method"] != "") | (df["num_drafts"] > 0)
    if "draft_tokens" in df.columns:
        signs |= pd.to_numeric(df["draft_tokens"], errors="coerce") > 0
    return signs | df["speculating_server"]


def _shows_speculation(df: Any) -> Any:
    """Rows whose own data show that their server speculated, whatever k they are said to
    have: an accept_len above 1, drafts, or bench's note that the server showed spec-decode
    counters.  A baseline's rows that do, beside speculative rows that do not, are a swapped
    pair (``swapped_pair``)."""
    signs = (df["accept_len"] > 1) | (df["num_drafts"] > 0) | df["speculating_server"]
    if "draft_tokens" in df.columns:
        signs |= pd.to_numeric(df["draft_tokens"], errors="coerce") > 0
    return signs.to_numpy()


def _empty_text(rows: int) -> Any:
    return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), [""])


def _time_column(column: Any) -> Any:
    """A time column as read: datetimes (one ISO 8601 form throughout), else text as
    categories ("" when missing)."""
    if column.dtype.kind == "M":
        return column
    if isinstance(column.dtype, pd.CategoricalDtype):
        return _categorical(column)
    return _categorical(column.astype(str).where(column.notna(), ""))


def _codes(column: Any) -> Any:
    """A categorical text column's codes, -1 where it is empty."""
    codes = column.cat.codes.to_numpy().astype(np.int64)
    categories = column.cat.categories
    if "" in categories:
        codes[codes == categories.get_loc("")] = -1
    return codes


def _per_category(column: Any, func: Any, dtype: Any = object) -> Any:
    """``func`` of each row's text, computed once per distinct text (a categorical column)."""
    values = np.array([func(str(c)) for c in column.cat.categories], dtype=dtype)
    codes = column.cat.codes.to_numpy()
    return values[codes] if len(values) else np.zeros(len(codes), dtype=dtype)


def _has(column: Any) -> Any:
    """Whether each row holds a value (a time, or a text that is not empty)."""
    if column.dtype.kind == "M":
        return column.notna().to_numpy()
    return _codes(column) >= 0


def _knowledge(df: Any) -> tuple[Any, Any]:
    """Each row's ``env_known`` (its env holds its server's environment: read from the
    server's process or a file, or typed; :data:`breakeven.core.provenance.ENVIRONMENT_KNOWN`)
    and ``recorded`` (anything of its launch is recorded: an id, a time, settings)."""
    source = _per_category(df["env_from"], str)
    has_fp = _per_category(df["fingerprint"], bool, bool)
    # bench wrote the client's variables and no env_from before it read the server's.
    client_only = _per_category(df["env"], lambda e: "client_host=" in e or " host=" in e, bool)
    typed = source == ""
    known = np.where(typed, has_fp & ~client_only, np.isin(source, list(ENVIRONMENT_KNOWN - {""})))
    recorded = has_fp | ~typed | (df["launch_code"].to_numpy() >= 0)
    for column in TIME_COLUMNS:
        recorded = recorded | _has(df[column])
    return known, recorded


def _seconds(column: Any) -> Any:
    """Each row's time [s since the epoch; NaN where no full ISO 8601 date is written; a time
    without a zone is taken as UTC]."""
    if column.dtype.kind == "M":
        times = column if column.dt.tz is not None else column.dt.tz_localize("UTC")
        return (times - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    categories = pd.Index(column.cat.categories.astype(str))
    parsed = pd.to_datetime(categories, format="ISO8601", utc=True, errors="coerce")
    values = np.asarray((parsed - pd.Timestamp(0, tz="UTC")).total_seconds(), dtype=float)
    return values[column.cat.codes.to_numpy()] if len(values) else np.full(len(column), np.nan)


def _when(df: Any) -> Any:
    """Each row's time [s since the epoch; NaN where no full date is written]: its launch's
    start, else its measurement's."""
    launched, measured = _seconds(df["launched_at"]), _seconds(df["timestamp"])
    return np.where(np.isnan(launched), measured, launched)


def _time_text(df: Any, positions: Any) -> str:
    """The first time written at these rows (their launch's start, else their
    measurement's), as written: a text without its year stays as printed."""
    for column in TIME_COLUMNS:
        values = df[column].iloc[positions]
        present = values[values.notna() & (values.astype(str) != "")]
        if len(present):
            first = present.iloc[0]
            if not isinstance(first, pd.Timestamp):
                return str(first)
            midnight = first == first.normalize()  # a date written without its time
            return first.strftime("%Y-%m-%d" if midnight else "%Y-%m-%dT%H:%M:%S")
    return ""


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


@dataclass
class _Baselines:
    """Baseline rows as arrays, indexed by configuration and by environment."""

    tok_s: Any
    decoded: Any
    """Each row's decoded tokens (NaN: not known), its rate's weight."""
    launch: Any
    step_ms: Any
    fingerprint: Any
    line: Any
    by_config: dict[Any, Any]
    by_env: dict[Any, Any]
    drift: dict[Any, str]
    """Configurations whose baselines disagree, with the flag's sentence."""
    summary: list[Baseline]
    provenance: _Provenance
    """The rows' launches."""
    fingerprints: dict[Any, list[Any]]
    """Each configuration's baseline fingerprints, in file order."""
    shows: Any = None
    """Each row shows speculation (:func:`_shows_speculation`): a swapped pair's sign."""
    accept_len: Any = None
    sides: dict[Any, Any] = field(default_factory=dict)

    def side(self, rows: Any) -> Any:
        """The interval side of these baseline rows (many runs share a configuration's rows:
        each set is estimated once)."""
        return self._estimated(rows)[0]

    def spread(self, rows: Any) -> LaunchSpread:
        """How far the launches of these baseline rows disagree (each set estimated once)."""
        return self._estimated(rows)[1]

    def _estimated(self, rows: Any) -> tuple[Any, LaunchSpread]:
        key = rows.tobytes()
        if key not in self.sides:
            self.sides[key] = side_and_spread(
                self.tok_s[rows], self.launch[rows], self.decoded[rows]
            )
        return self.sides[key]


def baselines(df: Any, tolerance: float, findings: _Findings) -> _Baselines:
    """The baseline rows, and a ``baseline_drift`` flag where the runs of a configuration
    disagree by more than the tolerance or ran in different environments.  Drift is between
    runs (a run_id, or a label and environment), not between the requests of one run, whose
    spread the interval accounts for."""

    rows = np.flatnonzero((~df["is_spec"] & df["tok_s"].notna() & ~df["echo"]).to_numpy())
    tok = df["tok_s"].to_numpy(dtype=float)[rows]
    decoded = df["decoded"].to_numpy(dtype=float)[rows]
    line = df["line"].to_numpy()[rows]
    run, run_first = _group_numbers(df, rows, [*CONFIG, "run_id", "label", "fingerprint"])
    run_mean = group_pooled_rates(run, tok, decoded, len(run_first))[0]
    config, config_first = _group_numbers(df, rows, CONFIG)
    env, env_first = _group_numbers(df, rows, [*CONFIG, "fingerprint"])
    run_env, run_config = env[run_first], config[run_first]
    env_mean, env_runs = _group_means(run_env, run_mean, len(env_first))
    config_keys = list(zip(*(_values_at(df[c], rows[config_first]) for c in CONFIG), strict=True))
    env_fp = _values_at(df["fingerprint"], rows[env_first])
    run_label = _values_at(df["label"], rows[run_first])
    summary, envs_by_config = [], {}
    for e, first in enumerate(env_first):
        m, h, c = config_keys[config[first]]
        labels = tuple(dict.fromkeys(map(str, run_label[run_env == e])))
        summary.append(
            Baseline(
                str(m),
                str(h),
                float(c) if c >= 0 else math.nan,
                str(env_fp[e]),
                labels,
                float(env_mean[e]),
                int(env_runs[e]),
            )
        )
        envs_by_config.setdefault((m, h, c), []).append((env_fp[e], float(env_mean[e])))
    by_config = _positions(config, config_keys)
    by_env = _positions(
        env, [(*config_keys[config[f]], env_fp[e]) for e, f in enumerate(env_first)]
    )
    high = np.full(len(config_first), -np.inf)
    low = np.full(len(config_first), np.inf)
    np.maximum.at(high, run_config, run_mean)
    np.minimum.at(low, run_config, run_mean)
    with np.errstate(divide="ignore", invalid="ignore"):  # a rate of 0: unbounded, or 0 / 0
        spreads = high / low - 1
    drift = {}
    for key, spread in zip(config_keys, spreads, strict=True):
        means = envs_by_config[key]
        if len(means) == 1 and not spread > tolerance:
            continue
        parts = [
            f"{_n(m, 2)} tok/s" + (f" ({fp})" if fp else " (no env recorded)") for fp, m in means
        ]
        why = "their environments differ" if len(means) > 1 else "with the same environment"
        drift[key] = (
            f"Baselines for {key[0] or 'this model'} on {key[1] or 'this hardware'} "
            f"{_at_concurrency(key[2])} disagree by {_percent(spread)} ({why}): "
            f"{'; '.join(parts)}. A baseline measured in another launch is not a "
            "baseline: re-measure it right before the speculative run, same "
            "environment."
        )
        at = by_config[key]  # positions in the baseline rows, in file order
        findings.add(Flag("baseline_drift", drift[key], _lines(line[at]), len(at)))
    return _Baselines(
        tok,
        decoded,
        df["launch"].to_numpy()[rows],
        df["step_ms"].to_numpy(dtype=float)[rows],
        _values_at(df["fingerprint"], rows),
        line,
        by_config,
        by_env,
        drift,
        summary,
        _Provenance.of(df, rows),
        {key: [fp for fp, _ in means] for key, means in envs_by_config.items()},
        df["shows_speculation"].to_numpy()[rows],
        df["accept_len"].to_numpy(dtype=float)[rows],
    )


def _values_at(column: Any, positions: Any) -> Any:
    """A column's values at some positions, as a numpy array; a categorical column's texts
    are looked up from its codes (its ``to_numpy()`` would build a string per row)."""

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray(column.cat.categories, dtype=object)
        codes = column.cat.codes.to_numpy()[positions]
        values = categories[codes]
        if (codes < 0).any():  # a missing value (NaN k): NaN, as the column held it
            values[codes < 0] = math.nan
        return values
    return column.to_numpy()[positions]


def _stable_order(number: Any, groups: int) -> Any:
    """Positions sorted by group number, in file order within a group (a radix sort, when the
    numbers fit 16 bits)."""

    small = number.astype(np.int16) if groups < (1 << 15) else number
    return np.argsort(small, kind="stable")


def _positions(number: Any, keys: Sequence[Any]) -> dict[Any, Any]:
    """The positions (in file order) of each group's rows, by the group's key."""

    order = _stable_order(number, len(keys))
    starts = np.searchsorted(number[order], np.arange(len(keys) + 1))
    return {key: order[starts[g] : starts[g + 1]] for g, key in enumerate(keys)}


_RUN_KEYS = [*CONFIG, "num_spec_tokens", "spec_method", "label", "fingerprint"]
"""What makes rows repeats of one speculative run."""


def _group_numbers(df: Any, rows: Any, keys: Sequence[str]) -> tuple[Any, Any]:
    """Each of ``rows`` (positions in ``df``) numbered by its group of equal ``keys``, groups
    in order of first appearance; and each group's first row.  One integer per row from the
    columns' codes, then one sort: a groupby of seven columns costs several times more."""

    combined = np.zeros(len(rows), dtype=np.int64)
    span = 1
    for key in keys:
        column = df[key]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy()[rows].astype(np.int64) + 1  # NaN: -1 -> 0
            size = len(column.cat.categories) + 1
        else:  # a number: NaN is a value of its own here, as in groupby(dropna=False)
            codes, uniques = pd.factorize(column.to_numpy()[rows], use_na_sentinel=False)
            size = len(uniques)
        if size <= 1:  # one value: it separates nothing
            continue
        if span > (1 << 62) // size:  # too many combinations for one integer: pandas groups
            frame = df.iloc[rows][list(keys)]
            number = frame.groupby(list(keys), sort=False, dropna=False, observed=True).ngroup()
            return _first_appearance(number.to_numpy())
        combined = combined * size + codes
        span *= size
    if span <= (1 << 20):  # few combinations: first appearances without hashing
        return _first_appearance_small(combined, span)
    return _first_appearance(combined)


def _first_appearance_small(values: Any, span: int) -> tuple[Any, Any]:
    """:func:`_first_appearance` of integers in ``[0, span)``: each value's first position by
    one scatter (the reversed positions written last win), then ranks."""

    first = np.full(span, -1, dtype=np.int64)
    first[values[::-1]] = np.arange(len(values) - 1, -1, -1)
    present = np.flatnonzero(first >= 0)
    present = present[np.argsort(first[present], kind="stable")]
    rank = np.empty(span, dtype=np.int64)
    rank[present] = np.arange(len(present))
    return rank[values], first[present]


def _first_appearance(values: Any) -> tuple[Any, Any]:
    """``values`` numbered 0, 1, ... in order of first appearance (a hash, no sort), and the
    position of each number's first appearance."""

    number, _ = pd.factorize(values)
    if not len(number):
        return number, number
    seen = np.maximum.accumulate(number)
    return number, np.flatnonzero(np.concatenate(([True], number[1:] > seen[:-1])))


def _group_means(number: Any, values: Any, groups: int) -> tuple[Any, Any]:
    """Each group's mean of ``values`` over its values that are not NaN, and their count."""

    ok = ~np.isnan(values)
    count = np.bincount(number[ok], minlength=groups)
    total = np.bincount(number[ok], weights=values[ok], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan), count


@dataclass(frozen=True)
class _RunStats:
    """One speculative run's means over its rows."""

    tau: float
    cycle: float
    verify: float
    draft: float
    published: float
    n_published: int


def pair(
    df: Any, base: _Baselines, tolerance: float, findings: _Findings, *, named_pairs: bool = False
) -> tuple[list[Comparison], list[SpeedupInterval]]:
    """Each speculative run (rows sharing :data:`_RUN_KEYS`) against its baseline: the same
    configuration, in the same environment where one ran in it (else ``stale_baseline``);
    ``unnamed_pairing`` where neither model nor hardware is named and the baseline comes from
    another source file (unless ``named_pairs``: the caller named the pairs)."""

    # A row with neither a rate, a published speedup nor a cycle cost measures nothing to
    # compare (a decode window after idle time, say): it is not a run of its own.
    measures = df[["tok_s", "speedup", "cycle_ms", "verify_ms"]].notna().any(axis=1)
    rows = np.flatnonzero((df["is_spec"] & ~df["echo"] & measures).to_numpy())
    number, first = _group_numbers(df, rows, _RUN_KEYS)
    n = len(first)
    means = {
        name: _group_means(number, df[column].to_numpy(dtype=float)[rows], n)
        for name, column in (
            ("cycle", "cycle_ms"),
            ("verify", "verify_ms"),
            ("draft", "draft_ms"),
            ("published", "speedup"),
        )
    }
    means["tau"] = group_pooled_accept_len(
        number,
        df["accept_len"].to_numpy(dtype=float)[rows],
        df["num_drafts"].to_numpy(dtype=float)[rows],
        n,
    )
    order = _stable_order(number, n)  # rows of each group, in file order
    starts = np.searchsorted(number[order], np.arange(n + 1))
    tok = df["tok_s"].to_numpy(dtype=float)[rows]
    decoded = df["decoded"].to_numpy(dtype=float)[rows]
    launch, line = (df[c].to_numpy()[rows] for c in ("launch", "line"))
    shows = df["shows_speculation"].to_numpy()[rows]
    provenance = _Provenance.of(df, rows)
    codes_by_group: dict[int, set[str]] = {}  # the row flags of each group's rows
    if findings.by_line:
        for i in np.flatnonzero(np.isin(line, list(findings.by_line))):
            codes_by_group.setdefault(int(number[i]), set()).update(findings.by_line[int(line[i])])
    key_columns = [_values_at(df[k], rows[first]) for k in _RUN_KEYS]
    comparisons, intervals = [], []
    for g in range(n):
        key = tuple(column[g] for column in key_columns)
        stats = _RunStats(
            *(float(means[m][0][g]) for m in ("tau", "cycle", "verify", "draft", "published")),
            int(means["published"][1][g]),
        )
        at = order[starts[g] : starts[g + 1]]
        unnamed = not named_pairs and key[0] == "" and key[1] == ""
        c, interval = _pair_one(
            key,
            stats,
            tok[at],
            decoded[at],
            launch[at],
            bool(shows[at].any()),
            provenance.side(at, str(key[-1])),
            _lines(line[at]),
            set(codes_by_group.get(g, ())),
            base,
            tolerance,
            findings,
            _source_files(df, rows[at]) if unnamed else None,
        )
        comparisons.append(c)
        intervals.append(interval)
    return comparisons, intervals


@dataclass(frozen=True)
class _Side:
    """What is recorded of the launches of some rows (a speculative run, or baselines)."""

    launches: Any
    """Their launches (codes of their launch_ids, where recorded; an array)."""
    known: bool
    """Every row's env holds its server's environment."""
    recorded: bool
    """Anything of a launch is recorded (an id, a time, settings)."""
    when: float
    """The earliest launch start, else measurement [s since the epoch]; NaN: no full date."""
    source: str
    """Where the first row's env came from (``env_from``)."""
    fingerprint: str
    texts: Any = field(default=None, compare=False, repr=False)
    """A function giving the first time written at these rows, as written (read only for a
    flag's sentence)."""

    @property
    def when_text(self) -> str:
        return self.texts() if self.texts is not None else ""


@dataclass(frozen=True)
class _Provenance:
    """The launch columns of some rows (``rows``, positions in ``df``), as arrays."""

    df: Any
    rows: Any
    launch_code: Any
    env_known: Any
    recorded: Any
    when: Any
    env_from: Any

    @classmethod
    def of(cls, df: Any, rows: Any) -> _Provenance:
        return cls(
            df,
            rows,
            df["launch_code"].to_numpy()[rows],
            df["env_known"].to_numpy()[rows],
            df["recorded"].to_numpy()[rows],
            df["when"].to_numpy()[rows],
            _values_at(df["env_from"], rows),
        )

    def side(self, at: Any, fp: str) -> _Side:
        """What is recorded of the launches of the rows at ``at`` (positions in ``rows``),
        whose fingerprint is ``fp``."""
        when = self.when[at]
        timed = when[~np.isnan(when)]
        codes = self.launch_code[at]
        return _Side(
            np.unique(codes[codes >= 0]),
            bool(self.env_known[at].all()),
            bool(self.recorded[at].any()),
            float(timed.min()) if len(timed) else math.nan,
            str(self.env_from[at[0]]) if len(at) else "",
            fp,
            lambda: _time_text(self.df, self.rows[at]),
        )


def _kind(source: str) -> str:
    """Sources whose settings are named alike: a process's command line reads the same from
    /proc and from a unit's ExecStart."""
    return "process" if source in ("server", "file") else source


def _judge(spec: _Side, base: _Side) -> tuple[str, list[str], list[str]]:
    """``fair``, ``unverified`` or ``stale``, and the settings only the baseline's launch had
    and only the speculative run's launch has.  Settings are compared where both sides know
    them: variables only where both know the server's environment; arguments and served
    configuration only where both were read alike (a log's and a process's name them
    differently)."""
    a, b = set(spec.fingerprint.split()), set(base.fingerprint.split())
    if _kind(spec.source) != _kind(base.source):
        a, b = ({p for p in x if is_environment_key(p)} for x in (a, b))
    both = spec.known and base.known
    if not both:
        a, b = ({p for p in x if not is_environment_key(p)} for x in (a, b))
        if not a or not b:
            return "unverified", [], []
    if a != b:
        return "stale", sorted(b - a), sorted(a - b)
    return ("fair" if both else "unverified"), [], []


def _pick_baseline(
    key: tuple[Any, ...],
    spec: _Side,
    lines: tuple[int, ...],
    published: bool,
    base: _Baselines,
    findings: _Findings,
) -> tuple[Any, set[str], str]:
    """The baseline rows a run is compared with (positions in ``base``), the codes raised,
    and why the baseline's launch is stale or unverified (a clause; empty when fair).

    By preference: the baselines of the run's own launch; else those of launches whose
    settings equal the run's launch's, less speculation, where both are known (fair); else
    those whose settings cannot be told apart (``baseline_unverified``, said where anything
    of a launch is recorded); else all of the configuration's (``stale_baseline``, naming
    what differs)."""

    model, hardware, conc, _, _, label, _ = key
    config = (model, hardware, conc)
    none = np.array([], dtype=int)
    codes = {"baseline_drift"} if config in base.drift else set()
    candidates = base.by_config.get(config, none)
    where = f"{label or 'A speculative run'} (line {lines[0]})"
    if published:
        return none, codes, ""  # the source's own speedup needs no baseline row
    if not len(candidates):
        there = sorted(
            {
                f"{b.model or 'an unnamed model'} on {b.hardware or 'unnamed hardware'} "
                f"{_at_concurrency(-1 if math.isnan(b.concurrency) else b.concurrency)}"
                for b in base.summary
            }
        )
        findings.add(
            Flag(
                "baseline_missing",
                f"{where}: no baseline of {model or 'this model'} on "
                f"{hardware or 'this hardware'} {_at_concurrency(conc)}"
                + (f" (the baselines are of {'; '.join(there[:3])})" if there else "")
                + ". Measure one, in the same launch environment, before enabling "
                "speculation.",
                lines,
            )
        )
        return none, codes | {"baseline_missing"}, ""
    if len(spec.launches):
        ours = np.isin(base.provenance.launch_code[candidates], spec.launches, kind="table")
        if ours.any():
            return candidates[ours], codes, ""
    provenance = base.provenance
    judged = {"fair": [], "unverified": [], "stale": []}
    for base_fp in base.fingerprints.get(config, []):
        at = base.by_env[(*config, base_fp)]
        side = provenance.side(at, str(base_fp))
        verdict_, only_base, only_spec = _judge(spec, side)
        judged[verdict_].append((at, side, only_base, only_spec))
    if judged["fair"]:
        return np.sort(np.concatenate([at for at, *_ in judged["fair"]])), codes, ""
    if judged["unverified"]:
        chosen = np.sort(np.concatenate([at for at, *_ in judged["unverified"]]))
        _, side, _, _ = judged["unverified"][0]
        if not (spec.recorded or side.recorded):
            return chosen, codes, ""  # nothing of either launch is recorded: nothing to say
        cause = _unverified_cause(spec, side)
        findings.add(
            Flag(
                "baseline_unverified",
                f"{where}: {cause}. {_sources(spec, side)} Re-measure the baseline right "
                "before the speculative run, or record both launches' environment: bench "
                "reads it from the server's own process on its host, or from "
                "--server-env-from.",
                lines + _lines(base.line[chosen]),
            )
        )
        return chosen, codes | {"baseline_unverified"}, cause
    _, side, only_base, only_spec = judged["stale"][0]
    cause = _stale_cause(spec, side, only_base, only_spec)
    findings.add(
        Flag(
            "stale_baseline",
            f"{where} is compared with a baseline from another launch with other settings: "
            f"{cause}. Its speedup is not trustworthy: re-measure the baseline in a launch "
            "with the speculative run's settings (speculation off), or restore the settings. "
            + _sources(spec, side),
            lines + _lines(base.line[candidates]),
        )
    )
    return candidates, codes | {"stale_baseline"}, cause


def _time_of(side: _Side) -> str:
    """' (2026-02-26 16:41)' (as written, to the minute), or nothing."""
    text = side.when_text.replace("T", " ")[:16]
    return f" ({text})" if text else ""


def _source_of(side: _Side) -> str:
    if side.source == "" and not side.fingerprint:
        return "nothing (no env recorded)"
    return ENV_SOURCES.get(side.source, side.source)


def _sources(spec: _Side, base: _Side) -> str:
    """Where each side's settings came from, as a sentence."""
    if _source_of(spec) == _source_of(base):
        if _source_of(base).startswith("nothing"):
            return "Neither launch's settings are recorded (no env)."
        return f"Both launches' settings came from {_source_of(base)}."
    return (
        f"The baseline's settings came from {_source_of(base)}; the speculative run's from "
        f"{_source_of(spec)}."
    )


def _stale_cause(spec: _Side, base: _Side, only_base: list[str], only_spec: list[str]) -> str:
    had = " ".join(only_base) if only_base else "none of the speculative run's settings below"
    has = " ".join(only_spec) if only_spec else "none of them"
    return (
        f"the baseline's launch{_time_of(base)} had {had}; the speculative run's launch"
        f"{_time_of(spec)} has {has}"
    )


def _unverified_cause(spec: _Side, base: _Side) -> str:
    if not (math.isnan(spec.when) or math.isnan(base.when)):
        gap = spec.when - base.when
        order = "earlier" if gap >= 0 else "later"
        age = f" {age_text(gap)} {order} ({_time_of(base)[2:-1]}; the run {_time_of(spec)[2:-1]})"
    elif base.when_text or spec.when_text:
        age = (
            f" (the baseline {base.when_text or 'undated'}, the run {spec.when_text or 'undated'}"
            ": no full date, so no age)"
        )
    else:
        age = " (neither is dated)"
    return (
        f"the baseline came from another launch{age}, and nothing shows whether that launch "
        "was configured the same way"
    )


def _cycle_ms(row: Any) -> float:
    """A run's cycle [ms]: profiled, else verify + draft; NaN unless positive."""
    cycle = float(row.cycle)
    if math.isnan(cycle):
        cycle = float(row.verify) + (0.0 if math.isnan(row.draft) else float(row.draft))
    return cycle if cycle > 0 else math.nan


def _baseline_step_ms(steps: Any, b_mean: float) -> float:
    """The baseline's decode step [ms]: the mean of its measured ``steps`` [ms], else
    1000 / its mean rate ``b_mean`` [tok/s]; NaN if neither is known."""
    steps = steps[~np.isnan(steps)]
    return float(steps.mean()) if len(steps) else (_step_ms(b_mean) if b_mean > 0 else math.nan)


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


def _pair_one(
    key: tuple[Any, ...],
    row: Any,
    spec_tok: Any,
    spec_decoded: Any,
    spec_launch: Any,
    spec_shows: bool,
    spec: _Side,
    lines: tuple[int, ...],
    codes: set[str],
    base: _Baselines,
    tolerance: float,
    findings: _Findings,
    spec_files: tuple[str, ...] | None = None,
) -> tuple[Comparison, SpeedupInterval]:
    """One run against its baseline: measured speedup and interval, prediction, residual.
    ``spec_files``: the run's source files, where a baseline from another file is flagged
    (``unnamed_pairing``; None: not looked at)."""

    model, hardware, conc, k_value, method, label, fp = key
    spec_side, s_spread = side_and_spread(spec_tok, spec_launch, spec_decoded)
    spec_tok = spec_tok[~np.isnan(spec_tok)]
    published = row.n_published > 0 and len(spec_tok) == 0
    chosen, raised, launch_note = _pick_baseline(key, spec, lines, published, base, findings)
    codes |= raised
    if spec_files is not None and len(chosen):
        codes |= _unnamed_pairing(label, lines, spec_files, base, chosen, findings)
    base_tok = base.tok_s[chosen]
    base_side = base.side(chosen)
    # One speedup (docs/concepts/intervals.md#one-speedup): the means of the launches' rates.
    interval = interval_of(spec_side, base_side)
    s_mean, b_mean = spec_side.mean, base_side.mean
    measured = interval.speedup if len(spec_tok) and len(base_tok) else math.nan
    low, high = interval.low, interval.high
    if published:
        measured, low, high = float(row.published), math.nan, math.nan
    doubts, spread = _doubts(
        label, conc, k_value, measured, lines, s_spread, spec_shows, base, chosen, findings
    )
    codes |= doubts
    tau = float(row.tau)
    cycle = _cycle_ms(row)
    step = _baseline_step_ms(base.step_ms[chosen], b_mean)
    predicted = float(_speedup(tau, step, cycle))
    implied = float(_implied_cycle_ms(tau, s_mean)) if s_mean > 0 else math.nan
    residual = measured - predicted
    if implied > 0 and step > 0 and implied < step * (1 - tolerance):
        codes.add("cycle_below_step")
        findings.add(_cycle_below_step(label, conc, lines, implied, tau, s_mean, step), lines)
    if not math.isnan(residual) and predicted > 0 and abs(measured / predicted - 1) > tolerance:
        codes.add("prediction_mismatch")
        findings.add(
            _mismatch(label, lines, measured, predicted, tau, step, cycle, s_mean, implied)
        )
    comparison = Comparison(
        label=label,
        model=model,
        hardware=hardware,
        concurrency=float(conc) if conc >= 0 else math.nan,
        num_spec_tokens=float(k_value),
        spec_method=method,
        runs=int(row.n_published) if published else len(spec_tok),
        baseline_runs=len(base_tok),
        tok_s=s_mean,
        baseline_tok_s=b_mean,
        measured_speedup=measured,
        ci_low=low,
        ci_high=high,
        verdict=_verdict(measured, low, high, codes),
        accept_len=tau,
        cycle_ms=cycle,
        predicted_speedup=predicted,
        residual=residual,
        implied_cycle_ms=implied,
        flags=tuple(sorted(codes)),
        lines=lines,
        baseline_lines=_lines(base.line[chosen]),
        fingerprint=str(fp),
        launch_note=launch_note,
        launch_spread=spread,
    )
    return comparison, interval


def _verdict(measured: float, low: float, high: float, codes: set[str]) -> str:
    """The interval's verdict, unless a flag of :data:`DOUBT` leaves the data no verdict."""
    for code, said in DOUBT.items():
        if code in codes:
            return said
    return verdict(measured, low, high)


def _doubts(
    label: str,
    conc: float,
    k: float,
    measured: float,
    lines: tuple[int, ...],
    spec_spread: LaunchSpread,
    spec_shows: bool,
    base: _Baselines,
    chosen: Any,
    findings: _Findings,
) -> tuple[set[str], float]:
    """The flags of :data:`DOUBT` on one run against its baseline: launches that disagree
    (either side), a pair that looks swapped, a speedup above k + 1; and the larger side's
    launch spread [x] (NaN where neither side has two launches)."""
    spreads = {label: spec_spread}
    if len(chosen):
        spreads["the baseline"] = base.spread(chosen)
    codes = set()
    at = _at_concurrency(conc) if conc >= 0 else ""
    for who, spread in spreads.items():
        if not spread.disagree(LAUNCH_SPREAD_LIMIT):
            continue
        codes.add("launches_disagree")
        rates = ", ".join(_n(r, 2) for r in spread.rates[:LINES_SHOWN])
        where = base.line[chosen] if who == "the baseline" else lines
        findings.add(
            Flag(
                "launches_disagree",
                f"Launches of {who} {at} disagree {_n(spread.ratio, 2)}x: "
                f"{len(spread.rates)} launches ran at {rates} tok/s, beyond what each "
                "launch's own spread explains and beyond the "
                f"{_n(LAUNCH_SPREAD_LIMIT, 1)}x that launches of one configuration differ "
                "by on a real engine. The host decided these numbers, not the "
                "configuration: measure on a quiet host (nothing else running, pinned CPUs "
                "or GPUs, fixed clocks), and add --repeats.",
                _lines(where),
                len(where),
            ),
            _lines(where),
        )
    base_shows = base.shows[chosen] if len(chosen) else np.zeros(0, dtype=bool)
    if base_shows.any() and not spec_shows:
        codes.add("swapped_pair")
        first = int(base.line[chosen][base_shows][0])
        tau = base.accept_len[chosen][base_shows]
        tau = tau[tau > 1]
        shown = f"an accept_len of {_n(float(tau[0]), 2)}, " if len(tau) else ""
        flipped = (
            f" (then about {_n(1 / measured, 2)}x, not {_n(measured, 2)}x)" if measured > 0 else ""
        )
        findings.add(
            Flag(
                "swapped_pair",
                f"{label} {at}: the baseline shows speculation ({shown}line {first}) and "
                f"{label} none (no acceptance, no drafts): the two runs look swapped"
                f"{flipped}. Give the baseline first, then the speculative run.",
                (first, *lines[:1]),
            ),
            (first,),
        )
    if k > 0 and measured > speedup_bound(k):
        codes.add("speedup_above_bound")
        findings.add(
            Flag(
                "speedup_above_bound",
                f"{label} {at}: measured {_n(measured, 2)}x is above k + 1 = {k + 1:g}, "
                "which no cycle can give (it emits at most its k drafted tokens and the "
                "bonus, in at least one plain step's time). A rate is not per sequence (an "
                "aggregate over all sequences), in other units, or the baseline ran at "
                "another load or on another host.",
                lines,
            ),
            lines,
        )
    widest = max((x.ratio for x in spreads.values() if x.ratio == x.ratio), default=math.nan)
    return codes, widest


def _source_files(df: Any, positions: Any) -> tuple[str, ...]:
    """The files the rows at ``positions`` came from (their ``source`` less its ``:LINE``), in
    first-seen order; rows without a source give none."""
    if "source" not in df.columns:
        return ()
    sources = pd.Series(df["source"].to_numpy()[positions], dtype=object).dropna().astype(str)
    files = sources.str.replace(r":\d+$", "", regex=True)
    return tuple(f for f in dict.fromkeys(files) if f)


def _unnamed_pairing(
    label: str,
    lines: tuple[int, ...],
    spec_files: tuple[str, ...],
    base: _Baselines,
    chosen: Any,
    findings: _Findings,
) -> set[str]:
    """``{"unnamed_pairing"}``, with its flag, where baseline rows ``chosen`` (positions in
    ``base``) come from a file none of the speculative run's rows (from ``spec_files``) came
    from: with no model or hardware named, nothing but k = 0 made them its baseline."""
    base_files = _source_files(base.provenance.df, base.provenance.rows[chosen])
    other = [f for f in base_files if f not in spec_files]
    if not spec_files or not other:
        return set()
    where = f"{label or 'A speculative run'} (line {lines[0]})"
    shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
    findings.add(
        Flag(
            "unnamed_pairing",
            f"{where}, from {', '.join(spec_files[:3])}, is compared with the baseline of "
            f"{shown}, another file, and neither model nor hardware is named for them: "
            "nothing shows the two measured the same deployment. Give --model and "
            "--hardware (ingest them with those set, or fill the CSV's model and hardware) "
            "so that only runs of one model and hardware are paired.",
            lines + _lines(base.line[chosen]),
        )
    )
    return {"unnamed_pairing"}


def _percent(ratio: float) -> str:
    """A relative difference in percent; a baseline of 0 tok/s makes it unbounded."""
    return f"{ratio:.1%}" if math.isfinite(ratio) else "an unbounded factor (a rate of 0)"


def _at_concurrency(value: float) -> str:
    """'at concurrency 8', or 'at an unknown concurrency' where the rows did not say."""
    return f"at concurrency {value:g}" if value >= 0 else "at an unknown concurrency"


def cycle_given(
    verify_ms: float | None = None, draft_ms: float | None = None, cycle_ms: float | None = None
) -> float | None:
    """The cycle the costs given make [ms]: ``cycle_ms``, or ``verify_ms`` plus ``draft_ms``
    (None: no costs given); a BreakevenError naming the flags where they conflict."""
    if cycle_ms is not None and verify_ms is not None:
        raise BreakevenError(
            "{0} and {1}: give one (the cycle, or its parts)", "cycle_ms", "verify_ms"
        )
    if draft_ms is not None and verify_ms is None:
        raise BreakevenError(
            "{0}: needs {1} (the cycle is verify + draft)", "draft_ms", "verify_ms"
        )
    if cycle_ms is not None:
        return cycle_ms
    return float(cycle_of(verify_ms, draft_ms or 0.0)) if verify_ms is not None else None


def with_cycle(rows: Any, cycle: float | Any, *, override: bool = True) -> Any:
    """``rows`` with ``cycle`` [ms] (a number, or a Series by row; NaN: none) as the
    ``cycle_ms`` of each speculative row with a rate or a speedup: a prediction for it.  A
    cycle typed on the command line overrides the rows' own (``override``); a fitted one
    fills only the rows that record none.  A row without a rate is not a run."""
    rows = rows.copy()
    given = rows["cycle_ms"] if "cycle_ms" in rows.columns else math.nan
    given = pd.to_numeric(pd.Series(given, index=rows.index), errors="coerce")
    k = pd.to_numeric(rows.get("num_spec_tokens", pd.Series(0, index=rows.index)), errors="coerce")
    rate = pd.to_numeric(rows.get("tok_s", pd.Series(math.nan, index=rows.index)), errors="coerce")
    speedup = pd.to_numeric(
        rows.get("speedup", pd.Series(math.nan, index=rows.index)), errors="coerce"
    )
    cycle = pd.Series(cycle, index=rows.index, dtype=float)
    takes = (k.isna() | (k > 0)) & (rate.notna() | speedup.notna()) & cycle.notna()
    if not override:
        takes &= given.isna()
    rows["cycle_ms"] = given.where(~takes, cycle)
    return rows


def check_file(path: str, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """:func:`check` on a measurements CSV."""

    data, _ = read_measurements(path, columns=COLUMNS_USED, times=TIME_COLUMNS)
    return check(data, tolerance)


__all__: Sequence[str] = (
    "FLAGS",
    "CheckResult",
    "Comparison",
    "Flag",
    "ServerCheck",
    "check",
    "check_file",
    "cycle_given",
    "fingerprint",
    "with_cycle",
)
