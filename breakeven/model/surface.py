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
from breakeven.model.context import clamped_note
from breakeven.model.costs import expected_distinct_experts
from breakeven.model.cycle import INTERVAL_FLOOR, INTERVAL_SCALE

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
        :data:`~breakeven.model.cycle.INTERVAL_SCALE` times the largest held-out error, at least
        :data:`~breakeven.model.cycle.INTERVAL_FLOOR` (which is all a fit no run was held out of
        has), grown by the doublings of batch beyond the speculative runs' batches over their
        span (at least one doubling); NaN without speculative runs."""
        if not (self.spec_batches and batch > 0):
            return math.nan
        error = self.held_out_max_rel_error
        width = max(INTERVAL_FLOOR, INTERVAL_SCALE * error if math.isfinite(error) else 0.0)
        low, high = min(self.spec_batches), max(self.spec_batches)
        beyond = max(math.log2(low / batch), math.log2(batch / high), 0.0)
        return width * (1 + beyond / max(math.log2(high / low), 1.0))

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
                other = speedup * cycle_ms / cycle if cycle > 0 else math.inf
                if math.isfinite(other) or other == math.inf:
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
        )

    def forward_ms(self, batch: Any, q: Any) -> Any:
        """t(B, q) [ms]."""
        c = self.coefficients
        experts = self.moe.loaded(batch * q) if self.moe else 0.0
        return (
            c["weights_ms"]
            + c["expert_ms"] * experts
            + c["kv_ms"] * batch
            + c["compute_ms"] * batch * q
        )

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

    a, b = _relative(rows, targets)
    groups, merged = proportional_groups(a, TERMS)
    # A term in the span of those before it (TERMS' order) cannot be told apart from them:
    # chains alone make compute = kv + draft per token + speculation per sequence.
    groups, dropped = independent_groups(a, groups, TERMS)
    x, rms = solve_groups(a, b, groups, scaled=True)
    return x, merged + dropped, rms, groups


def _held_out(equations: list[Any], skip: int, groups: list[list[int]]) -> Any:
    """The coefficients fitted without equation ``skip``: with the whole fit's ``groups``
    where the rest still tell them apart (full column rank: merged and dropped terms stay so
    on fewer equations), which is what :func:`_solve` finds there, without its search for
    them; else by :func:`_solve`."""
    others = equations[:skip] + equations[skip + 1 :]
    a, b = _relative([e[0] for e in others], [e[1] for e in others])
    if groups:
        reduced = a[:, [g[0] for g in groups]]
        if np.linalg.matrix_rank(reduced) == len(groups):
            return solve_groups(a, b, groups, scaled=True)[0]
    return _solve([e[0] for e in others], [e[1] for e in others])[0]


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
    for i, r in enumerate(runs):
        held = _held_out(equations, baselines + i, groups)
        held_surface = BatchSurface(
            *key,
            dict(zip(TERMS, map(float, held), strict=True)),
            (),
            moe,
            math.nan,
            (),
            math.nan,
            (),
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
) -> BatchSurface:
    """The surface of one model, hardware and method from its baseline rows (``batch``,
    ``step``) and speculative rows (``batch``, ``steps``, ``topk``, ``verify_tokens``,
    ``accept_len``, ``cycle``) as lists of dicts, and the runs' mean ``context_tokens``
    [tokens]; see the module's description."""
    runs = [r for r in spec if math.isfinite(r["cycle"])]
    equations = [(_row(moe, b["batch"], 1, 0, 0), b["step"]) for b in base]
    equations += [
        (_row(moe, r["batch"], r["verify_tokens"], r["steps"], r["topk"]), r["cycle"]) for r in runs
    ]
    if not equations:
        raise BreakevenError("{0}: no run with a rate to fit", "runs")
    x, merged, rms, groups = _solve([e[0] for e in equations], [e[1] for e in equations])
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
    )
    points = _points(key, moe, surface, equations, len(base), runs, groups, steps_at)
    errors = [
        abs(p.held_out_speedup / p.measured_speedup - 1)
        for p in points
        if math.isfinite(p.held_out_speedup)
    ]
    spec_batches = tuple(sorted({int(r["batch"]) for r in runs}))
    notes = _surface_notes(base, runs, spec_batches)
    return BatchSurface(
        key[0],
        key[1],
        key[2],
        surface.coefficients,
        merged,
        moe,
        rms,
        tuple(points),
        max(errors) if errors else math.nan,
        surface.batches,
        tuple(notes),
        tuple(sorted(steps_at.items())),
        spec_batches,
        context_tokens,
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
