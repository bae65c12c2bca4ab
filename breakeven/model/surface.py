"""Batch is not tokens: the forward-time surface t(B, q), fitted across batch sizes.

``t(B, q)`` is one forward over B sequences with q new tokens each: q = 1 for a decode, the
verify's tokens per sequence for a verify.  Pricing a verify as a decode of ``B * q``
sequences (``batch --cost-curve``) counts the KV cache ``q`` times over: what a forward
reads splits three ways, and the surface keeps them apart::

    t(B, q) = weights_ms + expert_ms * E(B * q) + kv_ms * B + compute_ms * B * q

- ``weights_ms``: what is read once per forward whatever B and q (the dense weights);
- ``expert_ms * E(B * q)``: for a Mixture-of-Experts model, the routed experts the B * q
  tokens load, ``E`` the expected distinct experts (:func:`breakeven.model.costs.expected_distinct_experts`);
- ``kv_ms * B``: the KV cache, read per sequence, not per token;
- ``compute_ms * B * q``: what grows with the tokens.

The terms add rather than take a roofline ``max``: linear in its coefficients, the sum is
fitted by non-negative least squares however few points are compute-bound, and it is the
roofline's own value wherever one term dominates.  A cycle adds its drafting,
``steps * (draft_step_ms + draft_token_ms * B * topk)`` (each draft step a forward of the draft
model over the B sequences' topk branches; a chain: topk = 1, steps = k), and
``spec_seq_ms * B``, what speculation costs per sequence per cycle beyond its forwards
(sampling, tree building, scheduling): on both public sweeps below, a cycle grows with B by more
than its verify forward and drafting explain.

A run's cycle is ``1000 * accept_len / tok_s`` and a baseline's step ``1000 / tok_s``
(per-sequence rates); the fit takes every baseline and speculative run of a model, hardware
and drafting method across batch sizes, each equation weighted by its measured time
(relative residuals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import SURFACE_TERM_UNITS
from breakeven.model._lsq import independent_groups, proportional_groups, solve_groups
from breakeven.model.context import CONTEXT_RATE, clamped_note, context_doublings
from breakeven.model.costs import expected_distinct_experts
from breakeven.model.cycle import INTERVAL_FLOOR, INTERVAL_SCALE
from breakeven.model.roof import RUN_NOISE, Roof, fit_roof

TERMS = tuple(SURFACE_TERM_UNITS)
"""The surface's coefficients, in the order of its design matrix."""
UNITS = SURFACE_TERM_UNITS
"""Each term and its unit (:data:`breakeven.core.quantities.SURFACE_TERM_UNITS`)."""


_CLAMPED_MEANING = {
    "kv_ms": "a step there costs what the weights and compute of the surface give, as at no "
    "context",
    "draft_token_ms": "drafting there costs its per-step part only, so the speedup is an upper "
    "bound",
}
"""What clamping each term of :meth:`BatchSurface.at_context` does to the answer."""


@dataclass(frozen=True)
class MoE:
    """Routing of a Mixture-of-Experts model: routed experts per layer, per token, shared."""

    experts: int
    top_k: int
    shared: int = 0

    def loaded(self, tokens: Any) -> Any:

        return expected_distinct_experts(self.experts, self.top_k, tokens, self.shared)


@dataclass(frozen=True)
class SurfacePoint:
    """One speculative configuration at one batch size, measured and predicted."""

    batch: int
    """Sequences decoded together [sequences]."""
    steps: int
    """Draft steps per cycle (k for a chain) [steps]."""
    topk: int
    """Branches per draft step (1 for a chain) [branches]."""
    verify_tokens: int
    """Tokens per sequence in the verify forward [tokens]."""
    accept_len: float
    """[tokens/cycle]"""
    measured_speedup: float
    """Speculative over baseline per-sequence rate at this batch [x]."""
    predicted_speedup: float
    """accept_len * step / fitted cycle, the fit on every run [x]."""
    held_out_speedup: float
    """The same from the fit without this run [x]."""


@dataclass(frozen=True)
class BatchSurface:
    """t(B, q) and the draft's cost of one model, hardware and drafting method."""

    model: str
    hardware: str
    spec_method: str
    coefficients: dict[str, float]
    """Each of :data:`TERMS` [see :data:`UNITS`]; a merged one holds the merged sum."""
    merged: tuple[str, ...]
    """Terms the runs could not tell apart, as ``a + b``."""
    moe: MoE | None
    residual_rms: float
    """Root mean square of the relative residuals [fraction]."""
    points: tuple[SurfacePoint, ...]
    held_out_max_rel_error: float
    """Largest |held_out_speedup / measured_speedup - 1| [fraction]."""
    batches: tuple[int, ...]
    """The batch sizes of the baseline runs [sequences]."""
    notes: tuple[str, ...] = ()
    baseline_steps: tuple[tuple[int, float], ...] = ()
    """The measured plain step at each baseline's batch size, ``(batch [sequences], step
    [ms])``: what a speedup at that batch divides by, rather than the fitted t(B, 1)."""
    spec_batches: tuple[int, ...] = ()
    """The batch sizes of the speculative runs [sequences]: the speculation terms are known
    there, and less so the further a batch is from them."""
    context_tokens: float = math.nan
    """The mean context of the runs fitted [tokens] (NaN where they do not say): the
    surface's KV term holds there (:meth:`at_context` moves it)."""
    moved_from_context: float = math.nan
    """The context :meth:`at_context` moved the surface from [tokens] (NaN: not moved)."""
    context_shift_ms: tuple[float, float] = (0.0, 0.0)
    """What that move added per sequence to each forward, and to each draft token [ms]."""
    interval_base: float = math.nan
    """The half-width of a predicted speedup's interval at a measured speculative batch
    [fraction]: twice the residual RMS, at least :data:`~breakeven.model.cycle.INTERVAL_FLOOR`
    (NaN in an older fit file: :meth:`half_width` then uses the held-out error)."""
    interval_rate: float = math.nan
    """What the half-width grows per doubling of batch away from the nearest measured
    speculative batch [fraction]: :data:`INTERVAL_SCALE` times the largest error per doubling
    of the batch sizes left out (:attr:`held_out_batches`), at least :data:`RATE_PRIOR`."""
    held_out_batches: tuple[tuple[int, float, float, float], ...] = ()
    """Each speculative run predicted with every run at its batch size left out: ``(batch
    [sequences], error, low, high)``, the error ``measured / predicted speedup - 1`` and that
    fit's own interval there as ``low / predicted - 1`` and ``high / predicted - 1``
    [fraction]."""
    context_doublings: float = 0.0
    """Doublings of context :meth:`at_context` moved the surface beyond its context fit's runs
    [doublings]: :meth:`half_width` grows by :data:`~breakeven.model.context.CONTEXT_RATE`
    for each."""
    roof: Roof | None = None
    """The hardware's floor under each forward (:mod:`breakeven.model.roof`), where the runs'
    accelerator and model are known: then ``weights_ms``, ``kv_ms`` and ``compute_ms`` are what
    a forward costs beyond it, per forward, per sequence and per token (the last pulled towards
    the tensor-parallel all-reduces' time, :meth:`~breakeven.model.roof.Roof.per_token_prior`),
    and ``expert_ms`` is 0 (the roof holds the experts' reads).  None: the additive form of the
    module's description."""
    context_clamped: tuple[str, ...] = ()
    """A sentence for each term that move made negative and clamped to 0
    (:func:`breakeven.model.context.clamped_note`)."""

    def at_context(
        self,
        context_tokens: float,
        step_ms_per_ktok: float,
        cycle_ms_per_ktok_per_k: float,
        runs: tuple[float, float] | None = None,
    ) -> BatchSurface:
        """The surface moved from its runs' context to ``context_tokens`` [tokens]: each
        sequence's forward reads ``step_ms_per_ktok`` [ms] more per 1000 more cached tokens,
        in a step and in a verify (the KV term, and each measured step by that times its
        batch), and each draft token ``cycle_ms_per_ktok_per_k`` [ms] more (the draft's
        per-token term): :class:`breakeven.model.context.ContextFit`'s ``a`` and ``b`` per sequence.
        A term the move makes negative (a context far from ``runs``, the lowest and highest
        context the context fit's runs measured [tokens]) is clamped to 0, and
        :attr:`context_note` says so.  Raises where the surface's runs gave no context."""
        if not self.context_tokens > 0:
            raise BreakevenError(
                "{0} needs a surface whose runs give context_tokens: this one's have none",
                "context",
            )
        shift = (context_tokens - self.context_tokens) / 1000.0
        c = dict(self.coefficients)
        clamped = []
        for term, growth, what in (
            ("kv_ms", step_ms_per_ktok, "the KV cache's cost per sequence in each forward"),
            ("draft_token_ms", cycle_ms_per_ktok_per_k, "the drafting cost per draft token"),
        ):
            moved = c[term] + growth * shift
            if moved < 0:
                meaning = _CLAMPED_MEANING[term]
                clamped.append(
                    clamped_note(what, moved, 0.0, "no cost", context_tokens, meaning, runs)
                )
            c[term] = max(moved, 0.0)
        a = c["kv_ms"] - self.coefficients["kv_ms"]  # what the move added, once clamped
        b = c["draft_token_ms"] - self.coefficients["draft_token_ms"]
        steps = tuple((batch, step + a * batch) for batch, step in self.baseline_steps)
        return replace(
            self,
            coefficients=c,
            baseline_steps=steps,
            context_tokens=float(context_tokens),
            moved_from_context=self.context_tokens,
            context_shift_ms=(a, b),
            context_clamped=tuple(clamped),
            context_doublings=context_doublings(context_tokens, runs),
        )

    @property
    def context_note(self) -> str:
        """Where :meth:`at_context` moved the surface, in a sentence, and any term it clamped
        ("" where it did not move it)."""
        if not math.isfinite(self.moved_from_context):
            return ""
        a, b = self.context_shift_ms
        return "; ".join(
            (
                f"costs moved from the runs' {self.moved_from_context:.0f} tokens of context to "
                f"{self.context_tokens:.0f} by the fit's context growth: {a:+.3f} ms per "
                f"sequence in each forward, {b:+.3f} ms per sequence per draft token",
                *self.context_clamped,
            )
        )

    def half_width(self, batch: float) -> float:
        """The relative half-width of a predicted speedup's interval at ``batch`` [fraction]:
        :attr:`interval_base` plus :attr:`interval_rate` per doubling of batch to the nearest
        measured speculative batch; NaN without speculative runs.  (A fit file without them:
        :data:`~breakeven.model.cycle.INTERVAL_SCALE` times the largest held-out error, at
        least :data:`~breakeven.model.cycle.INTERVAL_FLOOR`, grown by the doublings beyond the
        speculative batches over their span.)"""
        if not (self.spec_batches and batch > 0):
            return math.nan
        distance = min(abs(math.log2(batch / b)) for b in self.spec_batches)
        beyond = CONTEXT_RATE * self.context_doublings
        if math.isfinite(self.interval_base) and math.isfinite(self.interval_rate):
            return self.interval_base + self.interval_rate * distance + beyond
        error = self.held_out_max_rel_error
        width = max(INTERVAL_FLOOR, INTERVAL_SCALE * error if math.isfinite(error) else 0.0)
        low, high = min(self.spec_batches), max(self.spec_batches)
        doublings = max(math.log2(low / batch), math.log2(batch / high), 0.0)
        return width * (1 + doublings / max(math.log2(high / low), 1.0)) + beyond

    def speedup_range(
        self,
        batch: float,
        speedup: float,
        cycle_ms: float,
        steps: float,
        topk: float = 1,
        verify_tokens: float | None = None,
    ) -> tuple[float, float]:
        """The interval of a speedup [x] this surface predicts at ``batch`` with a cycle of
        ``cycle_ms`` [ms] (``steps`` draft steps of ``topk`` branches, ``verify_tokens``):
        +- :meth:`half_width`; and where the speculative runs were at one batch size B0 only,
        over both readings of what a cycle costs beyond a step there, E0 = cycle(B0) -
        step(B0), which such runs cannot tell apart: all per cycle (E0 at any batch) or all
        per sequence (E0 x B / B0), as well as the fit's own.  A cycle whose extra cost is a
        constant plus a part per sequence lies between the two.  NaN, NaN where there is
        none."""
        h = self.half_width(batch)
        if not (math.isfinite(h) and 0 < speedup < math.inf and cycle_ms > 0):
            return math.nan, math.nan
        low = high = speedup
        if len(self.spec_batches) == 1:
            b0 = self.spec_batches[0]
            extra = float(self.cycle_ms(b0, steps, topk, verify_tokens)) - self.step_ms(b0)[0]
            step = self.step_ms(batch)[0]
            for cost in (extra, extra * batch / b0):
                cycle = step + cost
                if cycle > 0 and extra >= 0:  # a cycle cheaper than a step is no reading
                    other = speedup * cycle_ms / cycle
                    low, high = min(low, other), max(high, other)
        return low * max(1 - h, 0.0), high * (1 + h)

    def step_ms(self, batch: float) -> tuple[float, bool]:
        """The plain step at ``batch`` [ms], and whether it is the measured baseline's.  At
        a batch no baseline ran (or a mean batch between two), the fitted t(B, 1) times the
        measured-to-fitted ratio of the measured steps, interpolated on log batch between
        them and the nearest one's beyond (:meth:`step_ratio`): the speedup does not jump at
        a measured batch."""
        for b, step in self.baseline_steps:
            if b == batch:
                return float(step), True
        return float(self.forward_ms(batch, 1)) * self.step_ratio(batch), False

    def step_ratio(self, batch: float) -> float:
        """The measured step over the fitted t(B, 1) [x], interpolated on log batch between
        the measured batches and held at the nearest one's beyond them; 1 without any."""
        points = sorted(
            (math.log(b), step / fitted)
            for b, step in self.baseline_steps
            if (fitted := float(self.forward_ms(b, 1))) > 0
        )
        if not points or not batch > 0:
            return 1.0
        return float(np.interp(math.log(batch), [x for x, _ in points], [y for _, y in points]))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchSurface:
        """A surface as a fit file holds it (:func:`breakeven.iotools.fitfile.read_surface`):
        ``model``, ``hardware``, ``spec_method``, ``coefficients`` [ms], ``moe`` (None or
        ``experts``, ``top_k``, ``shared``), ``batches`` [sequences], ``baseline_steps``
        (pairs of batch [sequences] and measured step [ms]), ``spec_batches`` [sequences] and
        ``held_out_max_rel_error`` [fraction] and ``context_tokens`` [tokens] (none of the last
        four in an older fit file); the
        fit's points and residuals are not kept (NaN, empty)."""
        moe = data.get("moe")
        return cls(
            str(data.get("model", "")),
            str(data.get("hardware", "")),
            str(data.get("spec_method", "")),
            dict(data["coefficients"]),
            (),
            MoE(int(moe["experts"]), int(moe["top_k"]), int(moe.get("shared", 0))) if moe else None,
            math.nan,
            (),
            _number(data.get("held_out_max_rel_error")),
            tuple(data.get("batches", ())),
            (),
            tuple((int(b), float(t)) for b, t in data.get("baseline_steps") or ()),
            tuple(int(b) for b in data.get("spec_batches") or ()),
            _number(data.get("context_tokens")),
            interval_base=_number(data.get("interval_base")),
            interval_rate=_number(data.get("interval_rate")),
            roof=Roof.from_dict(data.get("roof")),
        )

    def forward_ms(self, batch: Any, q: Any) -> Any:
        """t(B, q) [ms]."""
        c = self.coefficients
        experts = self.moe.loaded(batch * q) if self.moe else 0.0
        linear = (
            c["weights_ms"]
            + c["expert_ms"] * experts
            + c["kv_ms"] * batch
            + c["compute_ms"] * batch * q
        )
        if self.roof is None:
            return linear
        return linear + self.roof.ms(batch, q, self.moe.loaded if self.moe else None)

    def draft_ms(self, batch: Any, steps: Any, topk: Any = 1) -> Any:
        """One cycle's drafting, and speculation's own cost per sequence [ms]."""
        c = self.coefficients
        return (
            steps * (c["draft_step_ms"] + c["draft_token_ms"] * batch * topk)
            + c.get("spec_seq_ms", 0.0) * batch
        )

    def cycle_ms(self, batch: Any, steps: Any, topk: Any = 1, verify_tokens: Any = None) -> Any:
        """One cycle at batch B: the verify forward and the drafting [ms]."""
        q = steps + 1 if verify_tokens is None else verify_tokens
        return self.forward_ms(batch, q) + self.draft_ms(batch, steps, topk)


@dataclass(frozen=True)
class SurfaceCost:
    """A fitted surface as the cost model ``batch`` sweeps: ``t(tokens)`` is a decode of
    that many sequences, ``forward_ms(B, q)`` a verify, and ``draft`` its drafting (a chain:
    k steps)."""

    surface: BatchSurface
    min_tokens: float = 1.0
    max_tokens: float = math.inf

    def __call__(self, tokens: Any) -> Any:
        return self.surface.forward_ms(tokens, 1)

    def forward_ms(self, batch: Any, q: Any) -> Any:
        return self.surface.forward_ms(batch, q)

    def speedup_range(
        self,
        batch: float,
        speedup: float,
        cycle_ms: float,
        steps: float,
        topk: float = 1,
        verify_tokens: float | None = None,
    ) -> tuple[float, float]:
        """A predicted speedup's interval [x] (:meth:`BatchSurface.speedup_range`)."""
        return self.surface.speedup_range(batch, speedup, cycle_ms, steps, topk, verify_tokens)

    def plain_step(self, batch: int) -> tuple[float, bool]:
        """The plain step at ``batch`` [ms] and whether it is a measured baseline's
        (:meth:`BatchSurface.step_ms`)."""
        return self.surface.step_ms(batch)

    @property
    def draft(self) -> _SurfaceDraft:
        """The fitted drafting, as ``batch`` calls it: ``draft(k, batch[, topk])``."""
        return _SurfaceDraft(self.surface)


@dataclass(frozen=True)
class _SurfaceDraft:
    surface: BatchSurface
    takes_topk = True

    def __call__(self, k: Any, batch: Any = 1, topk: Any = 1) -> Any:
        return self.surface.draft_ms(batch, k, topk)


RATE_PRIOR = 0.12
"""The least a predicted speedup's half-width grows per doubling of batch away from the
measured speculative batches [fraction]: calibrated on the published batch sweeps of
``benchmarks/data/published_batch`` (``benchmarks/batch_heldout.py``)."""


def _doublings(batch: float, spec_batches: Sequence[int]) -> float:
    """Doublings from ``batch`` to the nearest other speculative batch, at least 1."""
    others = [b for b in spec_batches if b != batch]
    return max(min(abs(math.log2(batch / b)) for b in others), 1.0) if others else 1.0


def _number(value: Any) -> float:
    """A fit file's number, NaN where it holds none (null, or an older file)."""
    return float(value) if isinstance(value, (int, float)) else math.nan


def _row(moe: MoE | None, batch: float, q: float, steps: float, topk: float) -> list[float]:
    experts = float(moe.loaded(batch * q)) if moe else 0.0
    speculative = 1.0 if steps > 0 else 0.0
    return [1.0, experts, batch, batch * q, steps, steps * batch * topk, speculative * batch]


def _relative(rows: Any, targets: Any) -> tuple[Any, Any]:
    """The equations relative to their measured times: each row over its target, and ones."""
    a = np.array(rows, dtype=float).reshape(-1, len(TERMS))
    b = np.array(targets, dtype=float)
    return a / b[:, None], np.ones_like(b)


def _solve(
    rows: list[list[float]], targets: list[float]
) -> tuple[Any, tuple[str, ...], float, list[list[int]]]:
    """Non-negative least squares on relative residuals, proportional columns merged; also
    the groups of columns solved for."""

    return _solve_relative(*_relative(rows, targets))


def _solve_relative(a: Any, b: Any) -> tuple[Any, tuple[str, ...], float, list[list[int]]]:
    """:func:`_solve` on equations already relative to their times."""
    groups, merged = proportional_groups(a, TERMS)
    # A term in the span of those before it (TERMS' order) cannot be told apart from them:
    # chains alone make compute = kv + draft per token + speculation per sequence.
    groups, dropped = independent_groups(a, groups, TERMS)
    x, rms = solve_groups(a, b, groups, scaled=True)
    return x, merged + dropped, rms, groups


_EXPERTS = TERMS.index("expert_ms")
_SPEC_SEQ = TERMS.index("spec_seq_ms")
_PER_TOKEN = TERMS.index("compute_ms")


def _solve_roofed(
    roof: Roof, moe: MoE | None, rows: list[list[float]], targets: list[float]
) -> tuple[Roof, Any, tuple[str, ...], float, list[list[int]]]:
    """The roof's scales (:func:`breakeven.model.roof.fit_roof`) and the linear terms beyond
    it: a fixed cost per forward, per sequence, per token (pulled towards the roof's
    :meth:`~breakeven.model.roof.Roof.per_token_prior` by one more equation, so that what the
    runs cannot tell apart from a cost per sequence goes where the hardware says) and the
    draft's.  The roof holds the experts' reads."""
    a, _ = _relative(rows, targets)
    a[:, _EXPERTS] = 0.0
    median, spread = roof.per_token_prior()
    weight = RUN_NOISE / spread if spread > 0 else 0.0
    prior = np.zeros((1, a.shape[1]))
    prior[0, _PER_TOKEN] = weight
    a = np.vstack([a, prior])

    last: list[Any] = []  # the latest solve: fit_roof's last is at the scales it returns

    def rest(remainder: Any) -> tuple[Any, float]:
        last[:] = _solve_relative(a, np.append(remainder, weight * median))
        n = len(remainder)  # rms over n + 1 equations, as fit_roof weighs n
        return last[0], last[2] * math.sqrt((n + 1) / n)

    equations = [(r[2], r[3] / r[2], t) for r, t in zip(rows, targets, strict=True)]
    fitted, _, _ = fit_roof(roof, equations, rest, moe.loaded if moe else None)
    x, merged, rms, groups = last
    return fitted, x, merged, rms, groups


def _held_out(
    equations: list[Any],
    skip: int,
    groups: list[list[int]],
    roof: Roof | None = None,
    moe: MoE | None = None,
    relative: tuple[Any, Any] | None = None,
    separable: bool | None = None,
) -> tuple[Any, Roof | None]:
    """The coefficients fitted without equation ``skip`` (and the roof refitted, where there
    is one): with the whole fit's ``groups`` where the rest still tell them apart (full
    column rank: merged and dropped terms stay so on fewer equations), which is what
    :func:`_solve` finds there, without its search for them; else by :func:`_solve`.
    ``relative``: every equation made relative (:func:`_relative`), and ``separable``, whether
    the rest tell the groups apart (:func:`_separable`), where already found."""
    if roof is not None:
        others = equations[:skip] + equations[skip + 1 :]
        fitted, x, *_ = _solve_roofed(roof, moe, [e[0] for e in others], [e[1] for e in others])
        return x, fitted
    if relative is None:
        relative = _relative([e[0] for e in equations], [e[1] for e in equations])
    keep = np.arange(len(equations)) != skip
    a, b = relative[0][keep], relative[1][keep]
    if separable is None:
        (separable,) = _separable(relative[0], [skip], groups)
    if separable:
        return solve_groups(a, b, groups, scaled=True)[0], None
    return _solve_relative(a, b)[0], None


def _separable(a: Any, skips: list[int], groups: list[list[int]]) -> Any:
    """Whether the equations ``a`` less each of ``skips`` in turn still tell the ``groups``
    apart (their first columns of full rank), all at once (``np.linalg.matrix_rank`` of the
    stack); False for every one where there are no groups."""
    if not groups or not skips:
        return [False] * len(skips)
    reduced = a[:, [g[0] for g in groups]]
    rows = np.arange(len(a))
    stack = np.stack([reduced[rows != skip] for skip in skips])
    return (np.linalg.matrix_rank(stack) == len(groups)).tolist()


def _points(
    key: tuple[str, str, str],
    moe: MoE | None,
    surface: BatchSurface,
    equations: list[Any],
    baselines: int,
    runs: list[dict[str, Any]],
    groups: list[list[int]],
    steps_at: dict[float, float],
) -> list[SurfacePoint]:
    """Each speculative run's measured speedup, the ``surface``'s prediction of it, and the
    prediction of the fit without it (its equation follows the ``baselines`` ones), for the
    surface of ``key`` and ``moe``."""
    points = []
    relative = _relative([e[0] for e in equations], [e[1] for e in equations])
    held = [baselines + i for i in range(len(runs))]
    separable = (
        _separable(relative[0], held, groups) if surface.roof is None else [None] * len(runs)
    )
    for i, r in enumerate(runs):
        held, held_roof = _held_out(
            equations, baselines + i, groups, surface.roof, moe, relative, separable[i]
        )
        held_surface = BatchSurface(
            *key,
            dict(zip(TERMS, map(float, held), strict=True)),
            (),
            moe,
            math.nan,
            (),
            math.nan,
            (),
            roof=held_roof,
        )
        step = steps_at.get(r["batch"], float(surface.forward_ms(r["batch"], 1)))
        args = (r["batch"], r["steps"], r["topk"], r["verify_tokens"])
        points.append(
            SurfacePoint(
                r["batch"],
                r["steps"],
                r["topk"],
                r["verify_tokens"],
                r["accept_len"],
                r["accept_len"] * step / r["cycle"],
                r["accept_len"] * step / float(surface.cycle_ms(*args)),
                # The only speculative run held out leaves nothing of speculation to fit.
                r["accept_len"] * step / float(held_surface.cycle_ms(*args))
                if len(runs) > 1
                else math.nan,
            )
        )
    return points


def _surface_notes(
    base: Any, runs: list[dict[str, Any]], spec_batches: tuple[int, ...]
) -> list[str]:
    """What the runs cannot tell apart: the KV and weight terms from baselines at one batch
    size, the speculative terms without speculative runs, or with them at one batch only."""
    notes = []
    if len({b["batch"] for b in base}) < 2:
        notes.append("baselines at one batch size: the KV and weight terms are not separated")
    if not runs:
        notes.append("no speculative run: the draft's cost and the verify's tokens are unknown")
    if len(spec_batches) == 1:
        notes.append(
            f"speculative runs at batch {spec_batches[0]} only: what a cycle costs beyond a "
            "step there may be per cycle or per sequence, which these runs fit alike; at "
            "other batches the two differ, so the predictions' intervals cover both and grow "
            "with the distance from that batch; run speculation at a second batch size to "
            "tell them apart"
        )
    return notes


def fit_surface(
    key: tuple[str, str, str],
    base: Any,
    spec: Any,
    moe: MoE | None = None,
    context_tokens: float = math.nan,
    roof: Roof | None = None,
) -> BatchSurface:
    """The surface of one model, hardware and method from its baseline rows (``batch``,
    ``step``) and speculative rows (``batch``, ``steps``, ``topk``, ``verify_tokens``,
    ``accept_len``, ``cycle``) as lists of dicts, and the runs' mean ``context_tokens``
    [tokens]; see the module's description.  With a ``roof`` (the datasheet floor of the
    runs' accelerator and model, :mod:`breakeven.model.roof`), the roofline form too, and the
    form that predicts the speculative batch sizes left out best (:func:`batch_errors`); the
    roofline form where the runs cannot tell (speculation at one batch size)."""
    runs = [r for r in spec if math.isfinite(r["cycle"])]
    if not base and not runs:
        raise BreakevenError("{0}: no run with a rate to fit", "runs")
    additive = _fit_form(key, base, runs, moe, context_tokens, None)
    if roof is None:
        return additive
    roofed = _fit_form(key, base, runs, moe, context_tokens, roof)
    errors = {"additive": additive.held_out_batches, "roofline": roofed.held_out_batches}
    mean = {f: sum(abs(x[1]) for x in e) / len(e) if e else math.nan for f, e in errors.items()}
    if mean["additive"] < mean["roofline"]:
        chosen, note = (
            additive,
            (
                f"the additive form predicts the speculative batch sizes left out better than the "
                f"roofline form ({mean['additive']:.1%} against {mean['roofline']:.1%} mean error): "
                "the additive form is used"
            ),
        )
    else:
        chosen, note = roofed, _roof_note(roofed.roof, mean)
    return replace(chosen, notes=(*chosen.notes, note))


def _roof_note(roof: Any, mean: dict[str, float]) -> str:
    """The roofline form's note: what the runs achieve of the datasheet, and why it was
    chosen."""
    why = (
        f"it predicts the speculative batch sizes left out with {mean['roofline']:.1%} mean "
        f"error against the additive form's {mean['additive']:.1%}"
        if math.isfinite(mean["roofline"])
        else "the runs cannot test the forms against each other (speculation at one batch "
        "size), and the hardware's floor is the better-founded guess"
    )
    return (
        f"roofline form ({roof.source}): forwards read at {1 / roof.memory_scale:.0%} of the "
        f"datasheet bandwidth and compute at {1 / roof.compute_scale:.0%} of its peak; "
        f"{why}"
    )


def _batch_checks(
    base: Any, runs: list[dict[str, Any]], moe: MoE | None, roof: Roof | None
) -> tuple[tuple[int, float, float, float], ...]:
    """Each speculative run predicted with every speculative run at its batch size left out
    of the fit (the additive form where ``roof`` is None, else the roofline form), and that
    fit's interval there (:attr:`BatchSurface.held_out_batches`): how the surface predicts a
    batch size it was not given.  Empty with speculation at one batch size."""
    batches = sorted({r["batch"] for r in runs})
    if len(batches) < 2:
        return ()
    out = []
    for b in batches:
        given = [r for r in runs if r["batch"] != b]
        fitted = _fit_form(("", "", ""), base, given, moe, math.nan, roof, points=False)
        for r in (r for r in runs if r["batch"] == b):
            args = (b, r["steps"], r["topk"], r["verify_tokens"])
            predicted = float(fitted.cycle_ms(*args))
            if not predicted > 0:
                continue
            low, high = fitted.speedup_range(b, 1.0, predicted, *args[1:])
            out.append((int(b), predicted / r["cycle"] - 1, low - 1, high - 1))
    return tuple(out)


def _fit_form(
    key: tuple[str, str, str],
    base: Any,
    runs: list[dict[str, Any]],
    moe: MoE | None,
    context_tokens: float,
    roof: Roof | None,
    *,
    points: bool = True,
) -> BatchSurface:
    """The surface in one form: additive (``roof`` None) or roofline; without ``points``,
    only its coefficients (no run held out)."""
    equations = [(_row(moe, b["batch"], 1, 0, 0), b["step"]) for b in base]
    equations += [
        (_row(moe, r["batch"], r["verify_tokens"], r["steps"], r["topk"]), r["cycle"]) for r in runs
    ]
    if len({r["batch"] for r in runs}) == 1:
        # Speculation at one batch size: what it costs per sequence cannot be told from what
        # it costs per cycle there; the point prediction reads it per cycle (the draft's
        # steps), and speedup_range covers the per-sequence reading.
        for row, _ in equations:
            row[_SPEC_SEQ] = 0.0
    rows, targets = [e[0] for e in equations], [e[1] for e in equations]
    if roof is None:
        x, merged, rms, groups = _solve(rows, targets)
    else:
        roof, x, merged, rms, groups = _solve_roofed(roof, moe, rows, targets)
    steps_at = {b["batch"]: b["step"] for b in base}
    surface = BatchSurface(
        key[0],
        key[1],
        key[2],
        dict(zip(TERMS, map(float, x), strict=True)),
        merged,
        moe,
        rms,
        (),
        math.nan,
        tuple(sorted(steps_at)),
        roof=roof,
    )
    spec_batches = tuple(sorted({int(r["batch"]) for r in runs}))
    base_width = max(INTERVAL_FLOOR, 2 * rms) if math.isfinite(rms) else INTERVAL_FLOOR
    surface = replace(
        surface,
        spec_batches=spec_batches,
        interval_base=base_width,
        interval_rate=RATE_PRIOR,
    )
    if not points:
        return surface
    checks = _batch_checks(base, runs, moe, roof)
    rate = max(
        [RATE_PRIOR]
        + [INTERVAL_SCALE * abs(e) / _doublings(b, spec_batches) for b, e, *_ in checks]
    )
    fitted = _points(key, moe, surface, equations, len(base), runs, groups, steps_at)
    errors = [
        abs(p.held_out_speedup / p.measured_speedup - 1)
        for p in fitted
        if math.isfinite(p.held_out_speedup)
    ]
    return replace(
        surface,
        interval_rate=rate,
        held_out_batches=checks,
        points=tuple(fitted),
        held_out_max_rel_error=max(errors) if errors else math.nan,
        notes=tuple(_surface_notes(base, runs, spec_batches)),
        baseline_steps=tuple(sorted(steps_at.items())),
        spec_batches=spec_batches,
        context_tokens=context_tokens,
    )


__all__: Sequence[str] = (
    "TERMS",
    "UNITS",
    "BatchSurface",
    "MoE",
    "SurfaceCost",
    "SurfacePoint",
    "fit_surface",
)
