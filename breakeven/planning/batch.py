"""Speculation against load: the speedup at every batch size and k of a cost model, the
break-even batch, and the best k at each batch (``breakeven batch``; ``breakeven schedule``
chooses from the same grid, :func:`speedup_grid`).

At batch size B, with k draft tokens per sequence, the speedup is the one of
:mod:`breakeven.prediction.optimize`: ``accept_len(k) * t(B) / (t(B * (k + 1)) + draft(k, B) +
overhead_ms)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypedDict

import pandas as pd

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import MAX_BATCH, plain_json
from breakeven.fitting.saved import Evidence, within_evidence
from breakeven.measurements.plausibility import typed_times
from breakeven.model import _speedup, _xp
from breakeven.model.costs import DraftCost
from breakeven.model.memory import KvRoom
from breakeven.planning.rates import RateView, request_rates
from breakeven.prediction.optimize import (
    DEFAULT_K_MAX,
    _evidence_fields,
    acceptance_by_k,
    curve_flags,
    draft_cost,
)

BEYOND_THE_CURVE = "beyond the curve"
DEFAULT_MAX_BATCH = 256  # batches swept when the cost model has no token limit


@dataclass(frozen=True)
class BatchPoint:
    """The speedup at one batch size."""

    batch: int
    """Sequences decoded together."""
    k: int
    """Draft tokens per cycle used at this batch."""
    speedup: float
    """Speculative over plain per-sequence decode rate at this batch [x]."""
    step_ms: float
    """Plain decode step of the batch, t(batch) [ms]."""
    cycle_ms: float
    """t(batch * (k + 1)) + drafting + overhead [ms]."""


@dataclass(frozen=True)
class BatchResult:
    """How speculation's gain changes with load."""

    speedup_by_batch: tuple[BatchPoint, ...]
    """Every batch size whose forwards the cost curve covers (best k at each, if several)."""
    breakeven_batch: int | str | None
    """Largest batch with speedup >= 1; None if speculation never pays; "beyond the curve"
    if it still pays at the largest batch the curve covers."""
    max_batch: int
    """Largest batch size swept: the largest the curve covers, or the limit asked for."""
    best_k_by_batch: tuple[tuple[int, int, int], ...] | None = None
    """[first batch, last batch, best k] ranges, k = 0 for "do not speculate"; only when
    acceptance is known for several k."""
    acceptance: str = ""
    """Where the acceptance came from when none was given (a fit file's alpha), else ""."""
    measured_steps: tuple[int, ...] = ()
    """The batches whose step is the measured baseline's (a fit file's), not the cost
    model's t(batch) [sequences]."""
    intervals: tuple[tuple[float, float], ...] = ()
    """Each point's speedup interval, low and high [x], where a fit file's surface sizes them
    (:meth:`breakeven.model.surface.BatchSurface.speedup_range`); none otherwise."""
    notes: tuple[str, ...] = ()
    """What the costs were moved by before the sweep (a fit file's surface moved to another
    context), in sentences."""
    evidence: Evidence | None = None
    """What the fit file's runs measured, where its surface gives the costs (None otherwise)."""
    refused: tuple[str, ...] = ()
    """Why the best k by batch goes beyond that evidence
    (:func:`breakeven.fitting.saved.within_evidence`), one sentence per k; empty: it does not."""
    max_batch_plain: int | None = None
    """The most sequences the KV cache holds without speculation [sequences]; None: the
    cache was not given (:mod:`breakeven.model.memory`)."""
    max_batch_spec: int | None = None
    """The most sequences it holds speculating (at the smallest k swept) [sequences]: past it
    speculation cannot run, and the speedup there is None."""
    rates: RateView | None = None
    """The sweep in requests per second, where each request's decoded tokens are given
    (:meth:`in_request_rates`); None otherwise."""

    def in_request_rates(self, output_tokens: float) -> BatchResult:
        """This sweep with its thresholds in requests per second, each request decoding
        ``output_tokens`` [tokens] (:func:`breakeven.planning.rates.request_rates`)."""
        return replace(self, rates=request_rates(self.speedup_by_batch, output_tokens))

    def with_evidence(self, evidence: Evidence, context: float | None = None) -> BatchResult:
        """This sweep checked against a fit file's ``evidence``: each batch's k and speedup,
        at ``context`` [tokens] (None: the runs'), refused where the runs do not support it
        (:func:`breakeven.fitting.saved.within_evidence`)."""
        claims = [(p.k, p.batch, p.speedup) for p in self.speedup_by_batch if p.k > 0]
        return replace(
            self, evidence=evidence, refused=tuple(within_evidence(evidence, claims, context))
        )

    def to_dict(self) -> dict[str, Any]:
        """``speedup_by_batch`` (each ``{batch, k, speedup, step_ms, cycle_ms}``),
        ``breakeven_batch``, ``max_batch``, ``best_k_by_batch``, ``acceptance``,
        ``measured_steps`` and ``notes``; with request rates, ``request_rates``
        (:class:`~breakeven.planning.rates.RateView`); from a fit file, ``pasted``, ``refused`` and
        ``evidence`` (:meth:`with_evidence`)."""
        several = self.best_k_by_batch is not None
        points = [plain_json(asdict(p)) for p in self.speedup_by_batch]
        for p, (low, high) in zip(points, self.intervals, strict=False):
            if math.isfinite(low) and high >= low:
                p["speedup_low"], p["speedup_high"] = low, high
        out: dict[str, Any] = {
            "speedup_by_batch": points,
            "breakeven_batch": self.breakeven_batch,
            "max_batch": self.max_batch,
            "acceptance": self.acceptance,
            "measured_steps": list(self.measured_steps),
            "notes": list(self.notes),
        }
        if several:
            out["best_k_by_batch"] = [list(r) for r in self.best_k_by_batch]
        if self.max_batch_plain is not None:
            out["max_batch_plain"] = self.max_batch_plain
            out["max_batch_spec"] = self.max_batch_spec
        if self.rates is not None:
            out["request_rates"] = self.rates.to_dict()
        return out | _evidence_fields(self.evidence, self.refused)

    def to_frame(self) -> Any:
        """``speedup_by_batch`` as a pandas DataFrame indexed by batch."""

        return pd.DataFrame([asdict(p) for p in self.speedup_by_batch]).set_index("batch")

    def report(self) -> str:
        """What ``breakeven batch`` prints: the break-even batch, the best k by batch and the
        sweep."""
        return render.batch_text(self.to_dict())

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The main table's heads and cells (every batch size swept), as ``--format markdown`` and
        ``--format csv`` print it."""
        return render.batch_table(self.to_dict())

    def _repr_html_(self) -> str:
        return render.batch_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Speedup against batch size, the break-even batch marked; returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.speedup_vs_batch(self, ax)


def _tree(k: int, topk: Any, verify_tokens: Any) -> tuple[int, int | None]:
    """A tree's branches and verify tokens, checked: at least k + 1 verify tokens."""
    topk = int(_xp.draft_tokens(_xp.SCALAR, "topk", topk))
    if verify_tokens is None:
        return topk, None
    verify_tokens = int(_xp.draft_tokens(_xp.SCALAR, "verify_tokens", verify_tokens))
    if verify_tokens < k + 1:
        raise BreakevenError(
            "{0}: got " + str(verify_tokens) + f", expected at least "
            f"k + 1 = {k + 1} (the tree's path and the bonus token)",
            "verify_tokens",
        )
    return topk, verify_tokens


def _tree_draft(draft: Any, topk: int, draft_step_ms: float | None) -> Any:
    """Drafting as the sweep calls it for a tree of ``topk`` branches: a model that takes
    the branches (a fitted surface's), or drafting per cycle, which they do not change."""
    if topk == 1 or getattr(draft, "takes_topk", False):
        return draft
    if draft_step_ms is not None or not isinstance(draft, DraftCost):
        raise BreakevenError(
            "{0}: a tree's drafting grows with its branches; give its "
            "drafting per cycle ({1}), or a surface fitted with trees "
            "(breakeven fit)",
            "topk",
            "draft_ms",
        )
    return _PerCycle(draft)


@dataclass(frozen=True)
class _PerCycle:
    """Drafting given per cycle, the same whatever a tree's branches."""

    draft: Any
    takes_topk = True

    def __call__(self, k: Any, batch: Any = 1, topk: Any = 1) -> Any:
        return self.draft(k, batch)


def _verify_ms(curve: Any, batch: int, q: int) -> Any:
    """The verify forward of ``batch`` sequences with ``q`` tokens each: from a surface
    t(B, q) where the cost model is one (:mod:`breakeven.model.surface`), else priced as a forward
    over ``batch * q`` tokens, the curve's stated assumption."""
    forward = getattr(curve, "forward_ms", None)
    return forward(batch, q) if forward is not None else curve(batch * q)


@dataclass(frozen=True)
class SpeedupGrid:
    """The speedup at every batch size swept and every k whose acceptance is known."""

    batches: tuple[int, ...]
    """[sequences]"""
    ks: tuple[int, ...]
    """Draft tokens per cycle [tokens], ascending."""
    step_ms: tuple[float, ...]
    """Plain decode step at each batch, t(batch) [ms]."""
    cycle_ms: tuple[tuple[float, ...], ...]
    """``cycle_ms[i][j]``: the cycle at ``batches[i]`` and ``ks[j]`` [ms] (NaN: the verify is
    beyond the cost model)."""
    speedup: tuple[tuple[float, ...], ...]
    """``speedup[i][j]`` [x] (NaN where the cycle is)."""
    several: bool
    """Acceptance at several k (else the one measured operating point)."""
    max_batch: int
    measured_steps: tuple[int, ...] = ()
    """The batches whose step is a measured baseline's (a fit file's surface), not the cost
    model's t(batch) [sequences]."""
    kv: KvRoom | None = None
    """The KV cache with and without speculation, where given: a k whose sequences do not fit
    at a batch has no speedup there (NaN), and the sweep ends at the most sequences the cache
    holds without speculation."""
    topk: int = 1
    """A tree's branches per draft step (1: a chain)."""
    verify_tokens: int | None = None
    """A tree's tokens verified per sequence (None: k + 1)."""

    def best(self, i: int) -> BatchPoint:
        """The best k at ``batches[i]`` (the first k of the highest speedup); k = 0 and a NaN
        speedup where no k can run there (the draft's sequences do not fit the cache)."""
        priced = [j for j in range(len(self.ks)) if not math.isnan(self.speedup[i][j])]
        if not priced:
            return BatchPoint(self.batches[i], 0, math.nan, self.step_ms[i], math.nan)
        j = max(priced, key=lambda j: self.speedup[i][j])
        return BatchPoint(
            self.batches[i], self.ks[j], self.speedup[i][j], self.step_ms[i], self.cycle_ms[i][j]
        )

    @property
    def max_batch_spec(self) -> int | None:
        """The most sequences speculation fits in the cache, at the k of the most [sequences]
        (None: no cache given)."""
        if self.kv is None:
            return None
        return max(self.kv.max_batch_spec(k, self.topk, self.verify_tokens) for k in self.ks)

    @property
    def memory_bound(self) -> bool:
        """Whether the sweep ends where the cache does (not where the cost model or
        ``max_batch`` does): speculation that still pays there is not "beyond the curve"."""
        return self.kv is not None and self.max_batch >= self.kv.max_batch_plain

    def breakeven_batch(self, paying: Sequence[int]) -> int | str | None:
        """The break-even batch of the ``paying`` batches (ascending): the last, or "beyond the
        curve" where it is the last swept and the cost model, not the cache, ended the sweep;
        None where none pays."""
        if not paying:
            return None
        if paying[-1] == self.max_batch and not self.memory_bound:
            return BEYOND_THE_CURVE
        return paying[-1]

    def memory_notes(self) -> list[str]:
        """What the cache allows, in sentences (none without a cache)."""
        kv, spec = self.kv, self.max_batch_spec
        if kv is None or spec is None:
            return []
        notes = [kv.describe(min(self.ks), self.topk, self.verify_tokens)]
        if spec < self.max_batch:
            notes.append(
                f"past batch {spec} speculation has no room in the cache: it cannot run there "
                f"(speedup none); a server launched with speculation admits at most {spec} "
                f"such sequences where one without admits {kv.max_batch_plain}"
            )
        if self.memory_bound:
            notes.append(
                f"the sweep ends at batch {self.max_batch}, the most the cache holds without "
                "speculation"
            )
        return notes


def _acceptances(
    accept_len: Any,
    k: Any,
    alpha: Any,
    per_position: Any,
    accept_len_by_k: Any,
    k_max: int,
    topk: int,
    verify_tokens: Any,
) -> tuple[dict[int, float], bool, int, int | None]:
    """accept_len by k (one measured point, or several), whether several, and the tree."""
    if accept_len is not None or k is not None:
        if accept_len is None or k is None:
            raise BreakevenError("{0} and {1} go together: tau measured at k", "accept_len", "k")
        if alpha is not None or per_position is not None or accept_len_by_k is not None:
            raise BreakevenError(
                "give {0} with {1}, or acceptance at several k, not both", "accept_len", "k"
            )
        k = int(_xp.draft_tokens(_xp.SCALAR, "k", k))
        taus = {k: float(_xp.accept_len(_xp.SCALAR, "accept_len", accept_len, float(k)))}
        topk, verify_tokens = _tree(k, topk, verify_tokens)
        return taus, False, topk, verify_tokens
    if topk != 1 or verify_tokens is not None:
        raise BreakevenError(
            "{0} and {1} describe one tree: give them with {2} and {3}",
            "topk",
            "verify_tokens",
            "accept_len",
            "k",
        )
    by_k = acceptance_by_k(
        k_max, alpha=alpha, per_position=per_position, accept_len_by_k=accept_len_by_k
    )
    return {k: t for k, t in enumerate(by_k, start=1) if not math.isnan(t)}, True, 1, None


def _batches(curve: Any, max_batch: int | None, q_min: int) -> range:
    """The batch sizes a sweep covers: from the curve's first to ``max_batch`` (by default,
    the largest whose verify of ``q_min`` tokens per sequence the curve covers, at most
    :data:`~breakeven.core.quantities.MAX_BATCH`: a curve to 2^64 tokens is swept to 4,096)."""
    first_batch = max(1, math.ceil(curve.min_tokens))
    limit = curve.max_tokens
    if max_batch is not None:
        max_batch = _xp.count("max_batch", max_batch, MAX_BATCH)
    if math.isinf(limit):
        max_batch = max_batch or DEFAULT_MAX_BATCH
    else:
        covered = min(int(limit // q_min), MAX_BATCH)
        max_batch = covered if max_batch is None else min(max_batch, covered)
    if max_batch < first_batch:
        raise BreakevenError(
            "{0}: covers " + f"{curve.min_tokens:g} to {curve.max_tokens:g} tokens per forward, "
            f"too few for one batch at k = {q_min - 1}",
            "curve",
        )
    return range(first_batch, max_batch + 1)


class GridInputs(TypedDict, total=False):
    """A sweep's inputs beside its cost curve, as :func:`speedup_grid` and :func:`batch_sweep`
    take them (keyword arguments, each optional): what :func:`breakeven.planning.schedule.plan`
    and :func:`~breakeven.planning.schedule.schedule_report` pass on."""

    accept_len: float | None
    """Tokens a cycle emits at ``k``, bonus token included [tokens/cycle]."""
    k: int | None
    """Draft tokens a cycle at ``accept_len`` [tokens]."""
    alpha: float | None
    """Per-token acceptance, for acceptance at every k [-]."""
    per_position: Sequence[float] | None
    """Acceptance by draft position [-]."""
    accept_len_by_k: Sequence[float] | None
    """accept_len measured at k = 1, 2, ... [tokens/cycle]."""
    k_max: int
    """The largest k swept [tokens]."""
    draft: DraftCost | None
    """The draft's cost model."""
    draft_ms: float | None
    """All drafting in a cycle [ms]."""
    draft_step_ms: float | None
    """One draft token's step [ms]."""
    overhead_ms: float | None
    """Per-cycle overhead [ms]."""
    max_batch: int | None
    """The largest batch swept [sequences]."""
    topk: int
    """A tree's branches per step (1: a chain)."""
    verify_tokens: int | None
    """A tree's tokens verified per sequence [tokens]."""
    kv: KvRoom | None
    """The KV cache with and without speculation (:mod:`breakeven.model.memory`)."""


def speedup_grid(
    curve: Any,
    *,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
    k_max: int = DEFAULT_K_MAX,
    draft: DraftCost | None = None,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    max_batch: int | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    kv: KvRoom | None = None,
) -> SpeedupGrid:
    """The speedup at every batch and k of a sweep (see :func:`batch_sweep`, which takes the
    same parameters and keeps the best k at each batch)."""
    taus, several, topk, verify_tokens = _acceptances(
        accept_len, k, alpha, per_position, accept_len_by_k, k_max, topk, verify_tokens
    )
    if draft is not None and (draft_ms is not None or draft_step_ms is not None):
        raise BreakevenError(
            "give {0} or {1} and {2}, not both", "draft", "draft_ms", "draft_step_ms"
        )
    draft = _tree_draft(draft or draft_cost(draft_ms, draft_step_ms), topk, draft_step_ms)
    overhead = float(_xp.nonnegative(_xp.SCALAR, "overhead_ms", overhead_ms or 0.0, "ms"))
    if kv is not None:
        most = min(kv.max_batch_plain, MAX_BATCH)
        max_batch = (
            most if max_batch is None else min(_xp.count("max_batch", max_batch, MAX_BATCH), most)
        )
    batches = _batches(curve, max_batch, verify_tokens or min(taus) + 1)
    ks = tuple(sorted(taus))
    steps, cycles, speedups, measured_at = [], [], [], []
    plain_step = getattr(curve, "plain_step", None)
    for b in batches:
        step, measured = plain_step(b) if plain_step is not None else (float(curve(b)), False)
        if measured:
            measured_at.append(b)
        row_cycle, row_speedup = [], []
        for kk in ks:
            q = verify_tokens or kk + 1
            if b * q > curve.max_tokens or (
                kv is not None and b > kv.max_batch_spec(kk, topk, verify_tokens)
            ):
                row_cycle.append(math.nan)
                row_speedup.append(math.nan)
                continue
            drafting = draft(kk, b, topk) if topk != 1 else draft(kk, b)
            cycle = float(_verify_ms(curve, b, q)) + float(drafting) + overhead
            row_cycle.append(cycle)
            row_speedup.append(float(_speedup(taus[kk], step, cycle)))
        steps.append(step)
        cycles.append(tuple(row_cycle))
        speedups.append(tuple(row_speedup))
    return SpeedupGrid(
        tuple(batches),
        ks,
        tuple(steps),
        tuple(cycles),
        tuple(speedups),
        several,
        batches[-1],
        tuple(measured_at),
        kv,
        topk,
        verify_tokens,
    )


def batch_sweep(
    curve: Any,
    *,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | None = None,
    k_max: int = DEFAULT_K_MAX,
    draft: DraftCost | None = None,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    max_batch: int | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    kv: KvRoom | None = None,
) -> BatchResult:
    """Speedup against batch size, the break-even batch, and the best k at each batch.

    Acceptance is one measured operating point (``accept_len`` with ``k``), or acceptance at
    several k (exactly one of ``alpha``, ``per_position`` and ``accept_len_by_k``; see
    :func:`~breakeven.prediction.optimize.acceptance_by_k`): then the best k at every batch.

    Parameters
    ----------
    curve : cost model
        Forward time [ms] against total tokens per forward, e.g. a
        :class:`~breakeven.model.costs.TableCost` from a ``bench_one_batch`` run.
    accept_len : float, optional  [tokens/cycle]
        Mean tokens per cycle measured at ``k``, the bonus token included.
    k : int, optional  [tokens]
        Draft tokens per cycle of that measurement (a tree's draft steps).
    alpha : float, optional  [-]
        I.i.d. per-token acceptance, in [0, 1].
    per_position : sequence of float, optional  [-]
        Acceptance rate at each draft position, ``a_1 >= a_2 >= ...``.
    accept_len_by_k : sequence of float, optional  [tokens/cycle]
        Measured accept_len for k = 1, 2, ..., or a mapping ``{k: accept_len}``.
    k_max : int  [tokens]
        Largest k considered with several k, 1 to :data:`~breakeven.core.quantities.MAX_K`.
    draft : DraftCost, optional  [ms]
        Drafting per cycle as a model of k and batch; not with ``draft_ms``, ``draft_step_ms``.
    draft_ms, draft_step_ms : float, optional  [ms]
        Drafting per cycle as ``draft_ms + k * draft_step_ms`` at every batch.
    overhead_ms : float, optional  [ms]
        Other per-cycle cost; none by default.
    max_batch : int, optional  [sequences]
        Largest batch to sweep, 1 to :data:`~breakeven.core.quantities.MAX_BATCH`; by default
        the largest the curve covers (at most that), or :data:`DEFAULT_MAX_BATCH` for a model
        without a token limit (a fit).
    topk : int  [branches]
        A tree draft at the one operating point: branches per draft step.  Its drafting needs
        a fitted surface (:mod:`breakeven.model.surface`), or ``draft_ms`` per cycle.
    verify_tokens : int, optional  [tokens]
        The tree's tokens per sequence in the verify forward (default ``k + 1``).
    kv : KvRoom, optional
        The KV cache with and without speculation (:func:`breakeven.model.memory.kv_room`):
        the sweep ends at the most sequences it holds without speculation; past the most it
        holds speculating at a k, that k cannot run (no speedup past the smallest k's).
    """
    grid = speedup_grid(
        curve,
        accept_len=accept_len,
        k=k,
        alpha=alpha,
        per_position=per_position,
        accept_len_by_k=accept_len_by_k,
        k_max=k_max,
        draft=draft,
        draft_ms=draft_ms,
        draft_step_ms=draft_step_ms,
        overhead_ms=overhead_ms,
        max_batch=max_batch,
        topk=topk,
        verify_tokens=verify_tokens,
        kv=kv,
    )
    typed = [("draft_ms", draft_ms), ("draft_step_ms", draft_step_ms), ("overhead_ms", overhead_ms)]
    return _batch_result(curve, grid, typed, topk, verify_tokens)


def _batch_result(
    curve: Any,
    grid: SpeedupGrid,
    typed: list[tuple[str, float | None]],
    topk: int,
    verify_tokens: int | None,
) -> BatchResult:
    """A sweep's result from its ``grid``: the best k at each batch, the break-even batch, the
    schedule of k (acceptance at several k), each point's interval where ``curve`` sizes them,
    and the flags of the curve and of the ``typed`` costs [ms]."""
    flags = curve_flags(curve, "cost_curve")
    flags += typed_times(grid.step_ms[0], "cost_curve", typed) if grid.step_ms else []
    points = [grid.best(i) for i in range(len(grid.batches))]
    breakeven = grid.breakeven_batch([p.batch for p in points if p.speedup >= 1.0])
    schedule = _schedule(points) if grid.several else None
    ranged = getattr(curve, "speedup_range", None)
    return BatchResult(
        tuple(points),
        breakeven,
        grid.max_batch,
        schedule,
        measured_steps=grid.measured_steps,
        intervals=tuple(
            ranged(p.batch, p.speedup, p.cycle_ms, p.k, topk, verify_tokens)
            if p.k > 0
            else (math.nan, math.nan)  # no room for the draft: no speedup to bound
            for p in points
        )
        if ranged
        else (),
        notes=tuple(f.note() for f in flags) + tuple(grid.memory_notes()),
        max_batch_plain=None if grid.kv is None else grid.kv.max_batch_plain,
        max_batch_spec=grid.max_batch_spec,
    )


def _schedule(points: Sequence[BatchPoint]) -> tuple[tuple[int, int, int], ...]:
    """[[first batch, last batch, k], ...], with k = 0 where no k beats plain decoding."""
    ranges: list[list[int]] = []
    for p in points:
        k = p.k if p.speedup > 1.0 else 0
        if ranges and ranges[-1][2] == k and ranges[-1][1] == p.batch - 1:
            ranges[-1][1] = p.batch
        else:
            ranges.append([p.batch, p.batch, k])
    return tuple(tuple(r) for r in ranges)


__all__ = ["BEYOND_THE_CURVE", "BatchPoint", "BatchResult", "GridInputs", "batch_sweep"]
