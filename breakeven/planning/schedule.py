"""Deployable schedules: which k to speculate with at each batch size, and what it is worth.

The engines take a batch-size schedule of k (vLLM's Dynamic SD, SGLang's adaptive steps,
older vLLM's off-switch above a batch size) and leave its values to the user.  From the
speedup at every batch size and k of a sweep (:func:`breakeven.planning.batch.speedup_grid`)
this module picks them:

- the **unmerged schedule** takes, at each batch, the k of the highest speedup, or 0 (do
  not speculate) where none beats plain decoding;
- neighbouring ranges are **merged** while the merge gives up less than ``min_gain`` of
  the throughput of the two ranges (each distinct k costs CUDA-graph captures and memory);
  a merge trades one k for another and never speculation for none, so the schedule
  speculates exactly where some k beats plain decoding, and each range says what it gives
  up against the ranges it was merged from;
- the **best fixed k** is the one k (or 0) of the most throughput over the whole sweep.

Throughput is weighted by a load profile: the share of time the server spends at each
batch size (by default, every batch size swept alike).  At batch B the server makes
``B * 1000 / step_ms(B)`` tokens per second without speculation and ``speedup(B, k)``
times that with it, so a schedule's throughput is ``sum_B share(B) * B / step_ms(B) *
speedup(B, k(B))``, and its gain over another is the ratio of the two, less one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import DEFAULT_TOLERANCE, STEPS_BETWEEN, plain_json
from breakeven.fitting.saved import Evidence, within_evidence
from breakeven.measurements.intervals import agrees
from breakeven.planning.batch import BatchPoint, GridInputs, speedup_grid
from breakeven.planning.rates import request_rates
from breakeven.render import engine_configs
from breakeven.render.engine_configs import engine_shape

if TYPE_CHECKING:  # typing_extensions before Python 3.11
    from typing_extensions import Unpack


@dataclass(frozen=True)
class ScheduleRange:
    """One range of batch sizes and the k the schedule speculates with there."""

    first: int
    """First batch size of the range [sequences]."""
    last: int
    """Last batch size of the range, inclusive [sequences]."""
    k: int
    """Draft tokens per cycle; 0: do not speculate."""
    speedup: float
    """The schedule's speedup over plain decoding, throughput-weighted over the range [x]."""
    best_fixed_speedup: float
    """The best fixed k's speedup over the range, weighted the same way [x]."""
    gain: float
    """speedup / best_fixed_speedup - 1 [fraction]."""
    share: float
    """Share of the load profile's time at these batch sizes [fraction]."""
    given_up: float = 0.0
    """Throughput this range gives up by running one k against the best k of each range it
    was merged from (0 where it was not merged) [fraction]."""
    runner_up: int | None = None
    """The k (0: plain decoding) of the most throughput over the range after the range's own
    (None: no other k can be priced there)."""
    runner_up_regret: float = math.nan
    """What the runner-up gives up against the range's k, ``1 - its throughput / the
    range's`` [fraction]: how much the choice of k matters here."""


@dataclass(frozen=True)
class Schedule:
    """A schedule of k by batch size, and what it gains."""

    ranges: tuple[ScheduleRange, ...]
    best_fixed_k: int
    """The one k (0: none) of the most throughput over every batch swept."""
    speedup: float
    """The schedule's throughput over plain decoding's, over the load [x]."""
    best_fixed_speedup: float
    """The best fixed k's, the same way [x]."""
    gain: float
    """speedup / best_fixed_speedup - 1 [fraction]."""
    unmerged_ranges: int
    """Ranges before merging: each change of the best k."""
    merge_loss: float
    """Throughput the merge gives up against the unmerged schedule [fraction]."""
    breakeven_batch: int | str | None
    """Largest batch at which some k beats plain decoding (None: none does; "beyond the
    curve": still at the largest batch swept)."""
    max_batch: int
    """Largest batch swept [sequences]."""
    min_gain: float
    """Merge threshold used [fraction]."""
    load: str
    """'uniform' (every batch size swept alike) or the load profile's source."""
    notes: tuple[str, ...] = field(default=())
    graph_sizes: tuple[int, ...] = ()
    """The CUDA-graph batch sizes the ranges were aligned to (none: every batch size)."""
    by_batch: tuple[tuple[int, int, float], ...] = ()
    """(batch, the schedule's k there, its predicted speedup [x]) at every batch swept."""
    grid: Any = field(default=None, repr=False, compare=False)
    """The speedup grid the schedule was chosen from (:class:`breakeven.planning.batch.SpeedupGrid`),
    which :meth:`plot` draws; not in :meth:`to_dict`."""
    intervals: tuple[tuple[float, float], ...] = ()
    """The interval of each ``by_batch`` speedup, low and high [x], where a fit file's
    surface sizes them (:meth:`breakeven.model.surface.BatchSurface.speedup_range`); else none."""
    max_batch_plain: int | None = None
    """The most sequences the KV cache holds without speculation [sequences] (None: the cache
    was not given)."""
    max_batch_spec: int | None = None
    """The most it holds speculating [sequences]: past it the schedule's k is 0, as
    speculation cannot run there."""

    @property
    def graph_aligned(self) -> bool:
        return bool(self.graph_sizes)

    def k_at(self, batch: int) -> int:
        """The schedule's k at ``batch`` (the last range's beyond the sweep)."""
        for r in self.ranges:
            if r.first <= batch <= r.last:
                return r.k
        return self.ranges[-1].k if batch > self.ranges[-1].last else self.ranges[0].k

    def to_dict(self) -> dict[str, Any]:
        """The schedule as plain data; a figure the cost model cannot give (the best fixed k
        over a range where it cannot price that k) is None."""
        out = asdict(replace(self, grid=None))
        del out["grid"]
        out["ranges"] = [plain_json(asdict(r)) for r in self.ranges]
        out["schedule"] = [[r.first, r.last, r.k] for r in self.ranges]
        out["notes"] = list(self.notes)
        out["by_batch"] = [{"batch": b, "k": k, "speedup": v} for b, k, v in self.by_batch]
        for row, (low, high) in zip(out["by_batch"], self.intervals, strict=False):
            if math.isfinite(low) and high >= low:
                row["speedup_low"], row["speedup_high"] = low, high
        del out["intervals"]
        if self.max_batch_plain is None:  # no cache given: nothing to say about it
            del out["max_batch_plain"], out["max_batch_spec"]
        return out

    def in_request_rates(self, output_tokens: float) -> dict[str, Any]:
        """This schedule in requests per second, each request decoding ``output_tokens``
        [tokens] (:func:`breakeven.planning.rates.request_rates`, speculating at the
        schedule's k at each batch): ``request_rates``, and ``range_rates``, each range's
        ``rate_from`` and ``rate_to`` [req/s], the rates that keep its first and last batch
        busy at its k (plain decoding's where k = 0)."""
        steps = dict(zip(self.grid.batches, self.grid.step_ms, strict=True))
        points = [
            BatchPoint(b, k, v if k > 0 else math.nan, steps[b], math.nan)
            for b, k, v in self.by_batch
        ]
        view = request_rates(points, output_tokens)
        rate_at = {
            p.batch: (spec if p.k > 0 else plain)
            for p, plain, spec in zip(points, view.plain_rps, view.spec_rps, strict=True)
        }
        ranges = [
            {"rate_from": rate_at.get(r.first, math.nan), "rate_to": rate_at.get(r.last, math.nan)}
            for r in self.ranges
        ]
        return plain_json({"request_rates": view.to_dict(), "range_rates": ranges})

    def plot(self, ax: Any = None) -> Any:
        """Speedup against batch for each k, the schedule over them and the break-even batch
        (``breakeven plot schedule``); returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        if self.grid is None:
            raise BreakevenError(
                "{0}: this schedule holds no speedup grid to draw; make it with "
                "schedule_from_grid or plan",
                "grid",
            )
        return plot.schedule(self.grid, self, ax)


class ScheduleReport(dict[str, Any]):
    """What ``breakeven schedule`` prints, as one dict that reports itself: the
    :class:`Schedule`'s ``to_dict()``, the ``engine``, its configuration (``config``,
    ``flags``, ``config_path``), every note and, from a fit file, whether the configuration
    is given (``pasted``), why not (``refused``) and the fit's ``evidence`` (see
    :func:`schedule_report`)."""

    def __init__(self, data: Mapping[str, Any], schedule: Schedule) -> None:
        super().__init__(data)
        self.schedule = schedule
        """The :class:`Schedule` the report was made from."""

    def to_dict(self) -> dict[str, Any]:
        """The report as strict JSON: a number that is not finite is None."""
        return plain_json(dict(self))

    def report(self) -> str:
        """What ``breakeven schedule`` prints: the ranges, what the schedule gains over the
        best fixed k and gives up by merging, and the configuration to paste."""
        return render.schedule_text(self)

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (the ranges), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.schedule_table(self)

    def _repr_html_(self) -> str:
        return render.schedule_html(self)

    def plot(self, ax: Any = None) -> Any:
        """The schedule over each k's speedup against batch (:meth:`Schedule.plot`)."""
        return self.schedule.plot(ax)


def batch_weights(grid: Any, load: Mapping[int, float] | None) -> list[float]:
    """Each swept batch's share of time times its plain throughput ``B / step`` [1/ms].

    Parameters
    ----------
    grid : SpeedupGrid
        The sweep (:func:`breakeven.planning.batch.speedup_grid`): its ``batches`` [sequences] and
        their ``step_ms`` [ms].
    load : mapping of int to float, optional
        Each batch's share of time (a load profile); None: every batch alike.
    """
    if load is None:
        shares = [1.0 / len(grid.batches)] * len(grid.batches)
    else:
        shares = [float(load.get(b, 0.0)) for b in grid.batches]
    return [s * b / step for s, b, step in zip(shares, grid.batches, grid.step_ms, strict=True)]


def _speedup(grid: Any, i: int, k: int) -> float:
    """Speedup at ``grid.batches[i]`` with ``k`` (0: 1.0; NaN where the model stops)."""
    return 1.0 if k == 0 else grid.speedup[i][grid.ks.index(k)]


class _Tokens:
    """Weighted tokens of every range of batches and k, from prefix sums: a range's tokens at
    k are ``sum over its batches of weight * speedup(batch, k)`` (k = 0: speedup 1), and -inf
    where the model cannot price a batch of it at k (such a k is never chosen there)."""

    def __init__(self, grid: Any, weights: Sequence[float], strict: bool = True) -> None:

        full = np.column_stack(
            [
                np.ones(len(grid.batches)),
                np.asarray(grid.speedup, dtype=float).reshape(len(grid.batches), -1),
            ]
        )
        w = np.asarray(weights, dtype=float)[:, None]
        # strict: a k the model cannot price at some batch of a range is never scheduled there
        # (the server may meet that batch); else only batches the load gives time count.
        nan = np.isnan(full) if strict else np.isnan(full) & (w > 0)
        zero = np.zeros((1, full.shape[1]))
        self.sum = np.vstack([zero, np.cumsum(np.where(np.isnan(full), 0.0, full * w), axis=0)])
        self.nan = np.vstack([zero, np.cumsum(nan, axis=0)])
        # Where each k loses to plain decoding (or cannot be priced), counted by prefix sums:
        # a merged range's k must pay at every batch of it.
        loses = ~(full >= 1.0)
        loses[:, 0] = False
        self.loses = np.vstack([zero, np.cumsum(loses, axis=0)])
        self.ks = (0, *grid.ks)
        self.column = {k: c for c, k in enumerate(self.ks)}
        self.weights = list(weights)

    def all_k(self, lo: int, hi: int) -> Any:
        """Tokens over batches ``lo..hi`` (indices, inclusive) at every k of :attr:`ks`."""

        values = self.sum[hi + 1] - self.sum[lo]
        return np.where(self.nan[hi + 1] - self.nan[lo] > 0, -np.inf, values)

    def __call__(self, lo: int, hi: int, k: int) -> float:
        return float(self.all_k(lo, hi)[self.column[k]])

    def best_k(self, lo: int, hi: int) -> int:
        """The k (or 0) of the most tokens over ``lo..hi``; near-ties to the smaller k."""
        values = self.all_k(lo, hi)
        best, value = 0, float(values[0])
        for c in range(1, len(self.ks)):
            if values[c] > value * (1 + 1e-9):
                best, value = self.ks[c], float(values[c])
        return best


def _units(grid: Any, sizes: Sequence[int] | None) -> list[tuple[int, int]]:
    """The pieces a schedule's ranges are made of, as (first index, last index): each batch
    swept, or, given an engine's CUDA-graph batch sizes (SGLang rounds a batch up to the
    next one before it picks k), the batches that round up to the same size."""
    if not sizes:
        return [(i, i) for i in range(len(grid.batches))]
    units: list[tuple[int, int]] = []
    start = 0
    for i, b in enumerate(grid.batches):
        if b in sizes or i == len(grid.batches) - 1:
            units.append((start, i))
            start = i + 1
    return units


def _unmerged(
    tokens: _Tokens, units: Sequence[tuple[int, int]], fallback: _Tokens
) -> list[list[int]]:
    """[first index, last index, k] of each run of the best k by unit (0 where none beats
    plain decoding); a unit the load gives no time is weighted by ``fallback``."""
    ranges: list[list[int]] = []
    for lo, hi in units:
        used = tokens if sum(tokens.weights[lo : hi + 1]) > 0 else fallback
        k = used.best_k(lo, hi)
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = hi
        else:
            ranges.append([lo, hi, k])
    return ranges


def _threshold(tokens: _Tokens, n: int) -> list[list[int]]:
    """The best schedule of one k below a batch and none from it on (older vLLM's
    ``disable_by_batch_size``, which needs the switch at batch 2 or later), over batch
    indices 0..n."""

    plain = tokens.sum[:, 0]
    after = plain[n + 1] - plain[1 : n + 2]  # no speculation from index cut on, cut = 1..n+1
    best, value = [[0, n, 0]], tokens(0, n, 0)
    for k in tokens.ks[1:]:
        c = tokens.column[k]
        before = tokens.sum[1 : n + 2, c] - tokens.sum[0, c]
        before = np.where(tokens.nan[1 : n + 2, c] > 0, -np.inf, before)
        total = before + after
        cut = int(np.argmax(total)) + 1
        if total[cut - 1] > value * (1 + 1e-9):
            best = [[0, cut - 1, k]] + ([[cut, n, 0]] if cut <= n else [])
            value = float(total[cut - 1])
    return best


def _merge(tokens: _Tokens, ranges: list[list[int]], min_gain: float) -> list[list[int]]:
    """Neighbours merged, cheapest first, while a merge gives up less than ``min_gain`` of
    the two ranges' weighted tokens (the merged range takes its own best k).

    A merge trades one k for another, never speculation for none: ranges that speculate are
    merged only with each other, and only into a k that beats plain decoding at every batch
    of the merged range, so that the schedule never turns speculation on where it loses, nor
    off where it wins, whatever ``min_gain``."""
    ranges = [list(r) for r in ranges]
    while len(ranges) > 1:
        costs = []
        for j in range(len(ranges) - 1):
            if ranges[j][2] == 0 or ranges[j + 1][2] == 0:
                continue
            lo, hi = ranges[j][0], ranges[j + 1][1]
            apart = sum(tokens(r[0], r[1], r[2]) for r in ranges[j : j + 2])
            pays = tokens.loses[hi + 1] - tokens.loses[lo] == 0
            values = np.where(pays, tokens.all_k(lo, hi), -np.inf)
            if not np.isfinite(values[1:]).any():
                continue  # no one k pays at every batch of the two
            k = tokens.ks[1 + int(np.argmax(values[1:]))]
            together = float(values[tokens.column[k]])
            cost = 1 - together / apart if apart > 0 else 0.0
            costs.append((cost, j, k))
        if not costs:
            break
        cost, j, k = min(costs)
        if not cost < min_gain:
            break
        ranges[j : j + 2] = [[ranges[j][0], ranges[j + 1][1], k]]
        if j > 0 and ranges[j - 1][2] == k:  # the merged range may now match its neighbour
            ranges[j - 1 : j + 1] = [[ranges[j - 1][0], ranges[j][1], k]]
    return ranges


SHAPES = ("ranges", "threshold")
"""What schedules an engine takes: ranges of batch sizes, each with its k (vLLM's Dynamic SD,
SGLang's adaptive config), or one k up to a batch and none from it (older vLLM)."""


def _checked(grid: Any, min_gain: Any, load: Mapping[int, float] | None, shape: str) -> list[float]:
    """The weights of a schedule's inputs, or a BreakevenError naming the first bad one."""
    if not grid.several:
        raise BreakevenError(
            "{0}: a schedule needs acceptance at several k (--alpha, "
            "--per-position or --accept-len-by-k), not one operating point",
            "accept_len",
        )
    if isinstance(min_gain, bool) or not (
        isinstance(min_gain, (int, float)) and 0 <= min_gain <= 1
    ):
        raise BreakevenError(
            "{0}: got " + repr(min_gain) + ", expected a fraction from 0 to 1", "min_gain"
        )
    if shape not in SHAPES:
        raise BreakevenError("{0}: got " + repr(shape) + f", expected one of {SHAPES}", "shape")
    weights = batch_weights(grid, load)
    if not sum(weights) > 0:
        raise BreakevenError(
            f"{{0}}: gives no time to the batch sizes swept (1 to {grid.max_batch})", "load"
        )
    return weights


def schedule_from_grid(
    grid: Any,
    *,
    min_gain: float = 0.02,
    load: Mapping[int, float] | None = None,
    load_source: str = "uniform",
    shape: str = "ranges",
    graph_sizes: Sequence[int] | None = None,
) -> Schedule:
    """The schedule of a speedup grid (see the module): best k by batch, neighbours merged
    while a merge costs less than ``min_gain`` [fraction] of their throughput, weighted by
    ``load`` (batch size: share of time; default every batch swept alike).  ``shape``
    'threshold' is one k and then none (:data:`SHAPES`); ``graph_sizes`` make the ranges of
    whole CUDA-graph buckets (:func:`_units`)."""
    weights = _checked(grid, min_gain, load, shape)
    n = len(grid.batches) - 1
    tokens = _Tokens(grid, weights)
    uniform = _Tokens(grid, batch_weights(grid, None))
    unmerged = _unmerged(tokens, _units(grid, graph_sizes), uniform)
    merged = (
        _threshold(tokens, n) if shape == "threshold" else _merge(tokens, unmerged, float(min_gain))
    )
    loaded = _Tokens(grid, weights, strict=False)  # a fixed k is judged where the load is
    fixed = loaded.best_k(0, n)
    ranges = []
    for lo, hi, k in merged:
        # A range the load gives no time is still described, as every batch swept alike.
        weighted = tokens(lo, hi, 0) > 0
        used = tokens if weighted else uniform
        mine, plain = used(lo, hi, k), used(lo, hi, 0)
        theirs = (loaded if weighted else uniform)(lo, hi, fixed)
        theirs = theirs if theirs > 0 else math.nan  # -inf: the fixed k cannot be priced here
        parts = sum(used(a, b, j) for a, b, j in unmerged if lo <= a and b <= hi)
        others = [(float(v), j) for j, v in zip(used.ks, used.all_k(lo, hi), strict=True) if j != k]
        runner = max((x for x in others if x[0] > 0), default=None)
        ranges.append(
            ScheduleRange(
                grid.batches[lo],
                grid.batches[hi],
                k,
                mine / plain if plain > 0 else math.nan,
                theirs / plain if plain > 0 else math.nan,
                mine / theirs - 1 if theirs > 0 else math.nan,
                _share(grid, load, lo, hi),
                max(1 - mine / parts, 0.0) if parts > 0 else 0.0,
                runner[1] if runner else None,
                1 - runner[0] / mine if runner and mine > 0 else math.nan,
            )
        )
    total = {
        name: sum(tokens(lo, hi, k) for lo, hi, k in rs)
        for name, rs in (("merged", merged), ("unmerged", unmerged))
    }
    plain = tokens(0, n, 0)
    fixed_tokens = loaded(0, n, fixed)
    paying = [grid.batches[i] for i in range(n + 1) if grid.best(i).speedup > 1.0]
    return Schedule(
        tuple(ranges),
        fixed,
        total["merged"] / plain,
        fixed_tokens / plain,
        total["merged"] / fixed_tokens - 1,
        len(unmerged),
        1 - total["merged"] / total["unmerged"],
        grid.breakeven_batch(paying),
        grid.max_batch,
        float(min_gain),
        load_source,
        _notes(grid, load, merged),
        tuple(sorted(set(graph_sizes or ()))),
        tuple(
            (grid.batches[i], k, _speedup(grid, i, k))
            for lo, hi, k in merged
            for i in range(lo, hi + 1)
        ),
        grid,
        max_batch_plain=None if grid.kv is None else grid.kv.max_batch_plain,
        max_batch_spec=grid.max_batch_spec,
    )


def _notes(grid: Any, load: Mapping[int, float] | None, merged: list[list[int]]) -> tuple[str, ...]:
    notes = []
    if load is not None:
        beyond = math.fsum(v for b, v in load.items() if b > grid.max_batch)
        if beyond > 0:
            notes.append(
                f"{beyond:.1%} of the load's time is at batch sizes beyond the sweep "
                f"(above {grid.max_batch}): left out"
            )
    notes.extend(grid.memory_notes())
    last = grid.best(len(grid.batches) - 1)
    if merged[-1][2] > 0 and last.speedup > 1.0 and not grid.memory_bound:
        notes.append(
            f"speculation still pays at batch {grid.max_batch}, the largest swept: "
            "the last range's k holds beyond it untested (raise --max-batch, or give a "
            "cost model that covers more)"
        )
    if grid.measured_steps:
        at = ", ".join(map(str, grid.measured_steps))
        notes.append(
            f"the plain step at batch {at} is the measured baseline's (the fit file's); "
            + STEPS_BETWEEN
        )
    if grid.ks and max(grid.ks) in {r[2] for r in merged}:
        notes.append(
            f"k = {max(grid.ks)}, the largest considered, is in the schedule: raise "
            "--max-k to look further"
        )
    return tuple(notes)


VERDICTS = ("holds", "off", "other k", "beyond the schedule")
"""How a measured run stands against a schedule's prediction at its batch: the prediction
agrees with the run (:func:`breakeven.measurements.intervals.agrees`: their intervals overlap, or, where
the schedule has none, the prediction is within the run's interval widened by the
tolerance); it does not; the run used another k than
the schedule deploys there; the schedule does not reach its batch."""


def against(
    runs: Sequence[Mapping[str, Any]],
    by_batch: Sequence[Mapping[str, Any]],
    tolerance: float = DEFAULT_TOLERANCE,
) -> list[dict[str, Any]]:
    """Each measured run (``check``'s comparisons, ``compare``'s runs: ``label``,
    ``concurrency``, ``num_spec_tokens``, ``measured_speedup``, ``ci_low``, ``ci_high``)
    against the schedule's k and predicted speedup at its batch (``by_batch`` of
    ``schedule --json``), with a verdict of :data:`VERDICTS`."""
    at = {int(x["batch"]): x for x in by_batch}
    rows = []
    for r in runs:
        batch, k = r.get("concurrency"), r.get("num_spec_tokens")
        measured = r.get("measured_speedup")
        if batch is None or measured is None or not math.isfinite(float(batch)):
            continue
        b = round(float(batch))
        there = at.get(b, {})
        predicted = there.get("speedup")
        row = {
            "label": r.get("label"),
            "batch": b,
            "k": k,
            "schedule_k": there.get("k"),
            "measured_speedup": measured,
            "ci_low": r.get("ci_low"),
            "ci_high": r.get("ci_high"),
            "predicted_speedup": predicted,
            "predicted_low": there.get("speedup_low"),
            "predicted_high": there.get("speedup_high"),
            "residual": None if predicted is None else measured - predicted,
        }
        row["verdict"] = _verdict(row, tolerance)
        rows.append(row)
    return rows


def _verdict(row: dict[str, Any], tolerance: float) -> str:
    if row["schedule_k"] is None:
        return "beyond the schedule"
    if row["k"] is None or int(row["k"]) != int(row["schedule_k"]):
        return "other k"
    keys = ("measured_speedup", "ci_low", "ci_high", "predicted_speedup")
    keys += ("predicted_low", "predicted_high")
    return "holds" if agrees(*(row[key] for key in keys), tolerance=tolerance) else "off"


def schedule_report(
    curve: Any,
    *,
    engine: str = "vllm",
    min_gain: float = 0.02,
    load: Mapping[int, float] | None = None,
    load_source: str = "uniform",
    graph_sizes: Sequence[int] | None = None,
    method: str | None = None,
    base_config: dict[str, Any] | None = None,
    max_num_seqs: int | None = None,
    config_path: str | None = None,
    evidence: Evidence | None = None,
    context: float | None = None,
    **sweep: Unpack[GridInputs],
) -> ScheduleReport:
    """What ``breakeven schedule`` prints: the schedule (:func:`plan`) and its configuration
    for ``engine`` (:func:`breakeven.render.engine_configs.render`), as one dict that reports itself.

    With ``evidence`` (what the fit file whose surface is ``curve`` measured,
    :func:`breakeven.fitting.saved.surface_evidence`; ``context`` [tokens] where the surface was
    moved to, None: its runs'), each batch's k and speedup is checked against it
    (:func:`breakeven.fitting.saved.within_evidence`): where the runs do not support the schedule,
    it is printed flagged, with ``refused`` saying why, and no configuration is given
    (``config`` None, ``flags`` empty, ``pasted`` false)."""

    _, result = plan(
        curve,
        engine=engine,
        min_gain=min_gain,
        load=load,
        load_source=load_source,
        graph_sizes=graph_sizes,
        **sweep,
    )
    if max_num_seqs is not None and max_num_seqs < result.ranges[0].first:
        raise BreakevenError(
            "{0}: got " + str(max_num_seqs) + ", expected at least the first "
            f"batch swept ({result.ranges[0].first})",
            "max_num_seqs",
        )
    refused = []
    if evidence is not None:
        refused = within_evidence(evidence, [(k, b, v) for b, k, v in result.by_batch], context)
    config: dict[str, Any] = {"config": None, "flags": "", "notes": []}
    if not refused:
        config = engine_configs.render(
            result,
            engine,
            method=method,
            base_config=base_config,
            max_num_seqs=max_num_seqs,
            config_path=config_path,
        )
    data = result.to_dict()
    data["notes"] = [*data["notes"], *config.pop("notes")]
    if evidence is not None:
        data |= {"pasted": not refused, "refused": refused, "evidence": evidence.to_dict()}
    return ScheduleReport({"engine": engine, **data, **config}, result)


def plan(
    curve: Any,
    *,
    engine: str = "vllm",
    min_gain: float = 0.02,
    load: Mapping[int, float] | None = None,
    load_source: str = "uniform",
    graph_sizes: Sequence[int] | None = None,
    **sweep: Unpack[GridInputs],
) -> tuple[Any, Schedule]:
    """The speedup grid of a sweep (:func:`breakeven.planning.batch.speedup_grid`'s inputs in
    ``sweep``) and the schedule ``engine`` can take from it (:func:`schedule_from_grid`)."""

    grid = speedup_grid(curve, **sweep)
    schedule = schedule_from_grid(
        grid,
        min_gain=min_gain,
        load=load,
        load_source=load_source,
        shape=engine_shape(engine),
        graph_sizes=graph_sizes,
    )
    ranged = getattr(curve, "speedup_range", None)
    if ranged is None:
        return grid, schedule
    intervals = []
    for b, k, speedup in schedule.by_batch:
        if k == 0:  # plain decoding: 1 exactly
            intervals.append((1.0, 1.0))
            continue
        i = grid.batches.index(b)
        cycle = grid.cycle_ms[i][grid.ks.index(k)]
        topk, verify_tokens = sweep.get("topk", 1), sweep.get("verify_tokens")
        intervals.append(ranged(b, speedup, cycle, k, topk, verify_tokens))
    return grid, replace(schedule, intervals=tuple(intervals))


def _share(grid: Any, load: Mapping[int, float] | None, lo: int, hi: int) -> float:
    if load is None:
        return (hi - lo + 1) / len(grid.batches)
    return sum(float(load.get(b, 0.0)) for b in grid.batches[lo : hi + 1])


__all__: Sequence[str] = (
    "SHAPES",
    "VERDICTS",
    "Schedule",
    "ScheduleRange",
    "ScheduleReport",
    "against",
    "batch_weights",
    "plan",
    "schedule_from_grid",
    "schedule_report",
)
