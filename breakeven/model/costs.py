"""Cost models: how the verify forward and drafting grow with tokens, batch and MoE routing.

Pure math, no I/O.  Every verify-cost model is a callable with one interface,
``model(tokens) -> ms``: the time of one target forward over ``tokens`` tokens
in total.  A plain decode step of a batch of B sequences is ``model(B)``; the
verify forward of k drafted tokens per sequence is ``model(B * (k + 1))``.
Each model also says which token counts it covers (``min_tokens`` to
``max_tokens``); asking outside them is a :class:`~breakeven.BreakevenError`.

Leviathan et al.'s Theorem 3.8 assumes the verify forward costs one decode
step.  That fails on Mixture-of-Experts targets, where each extra token routes
to other experts (:class:`MoECost`), and at large batch, where the forward turns
compute-bound (:class:`RooflineCost`, or a measured :class:`TableCost`).

Drafting is a :class:`DraftCost`: ``draft(k, batch) -> ms`` for one cycle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear

from breakeven.core.choices import COST_FORMS
from breakeven.core.errors import BreakevenError, invalid_value
from breakeven.model import _xp


def _tokens(model: Any, tokens: Any) -> Any:
    """``tokens`` checked to be >= 1 and inside the range ``model`` covers."""
    xp = _xp.namespace(tokens)
    t = _xp.positive(xp, "tokens", tokens, "tokens per forward")
    lo, hi = model.min_tokens, model.max_tokens
    outside = (t < lo) | (t > hi) if xp is not _xp.SCALAR else (t < lo or t > hi)
    bad = xp.first(t, outside)
    if bad is not None:
        raise BreakevenError(
            "{0}: got "
            + f"{_xp._plain(bad):g}, expected a token count the cost model covers, "
            + f"{lo:g} to {hi:g}"
            + (
                "; fit a model to extrapolate (TableCost.fit, or --fit on the command line)"
                if isinstance(model, TableCost)
                else ""
            ),
            "tokens",
        )
    return t


@dataclass(frozen=True)
class ConstantCost:
    """A forward that costs ``ms`` whatever the token count (Leviathan's assumption)."""

    ms: float
    """Time of one forward [ms]."""
    min_tokens: float = 1.0
    max_tokens: float = math.inf

    def __post_init__(self) -> None:
        _xp.positive(_xp.SCALAR, "ms", self.ms, "ms")

    def __call__(self, tokens: Any) -> Any:
        return 0.0 * _tokens(self, tokens) + self.ms


def _curve_points(tokens: Sequence[float], ms: Sequence[float], where: str) -> tuple[list, list]:
    """Validated (tokens, ms) lists: at least two points, tokens rising, times finite and >= 0."""
    t, m = [float(v) for v in tokens], [float(v) for v in ms]
    if len(t) != len(m):
        raise BreakevenError(
            "{0}: " + f"{len(t)} token counts but {len(m)} times{where}", "cost_curve"
        )
    if len(t) < 2:
        raise BreakevenError(
            "{0}: got " + f"{len(t)} point(s){where}, expected at least two (tokens, ms) points",
            "cost_curve",
        )
    for i, (ti, mi) in enumerate(zip(t, m, strict=True)):
        if not (math.isfinite(ti) and ti >= 1):
            raise BreakevenError(
                "{0}: tokens " + f"{ti:g} at point {i + 1}{where}, expected a count >= 1",
                "cost_curve",
            )
        if not (math.isfinite(mi) and mi >= 0):
            raise BreakevenError(
                "{0}: ms " + f"{mi:g} at point {i + 1}{where}, expected a finite time >= 0",
                "cost_curve",
            )
        if i and ti <= t[i - 1]:
            raise BreakevenError(
                "{0}: tokens "
                + f"{ti:g} at point {i + 1} after {t[i - 1]:g}{where}, expected strictly "
                "increasing token counts",
                "cost_curve",
            )
    return t, m


@dataclass(frozen=True)
class TableCost:
    """A measured forward-time curve, linearly interpolated between its points.

    Outside the measured token range it raises; :meth:`fit` gives a model that
    extrapolates.
    """

    tokens: tuple[float, ...]
    """Total tokens per forward, strictly increasing [tokens]."""
    ms: tuple[float, ...]
    """Forward time at each token count [ms]."""
    source: str = ""
    """Where the points come from (a file name), for messages."""

    def __post_init__(self) -> None:
        where = f" in {self.source}" if self.source else ""
        t, m = _curve_points(self.tokens, self.ms, where)
        object.__setattr__(self, "tokens", tuple(t))
        object.__setattr__(self, "ms", tuple(m))

    @property
    def min_tokens(self) -> float:
        return self.tokens[0]

    @property
    def max_tokens(self) -> float:
        return self.tokens[-1]

    def __call__(self, tokens: Any) -> Any:
        t = _tokens(self, tokens)
        if isinstance(t, float):
            i = max(1, next(j for j, x in enumerate(self.tokens) if x >= t))
            t0, t1, m0, m1 = self.tokens[i - 1], self.tokens[i], self.ms[i - 1], self.ms[i]
            return m0 + (m1 - m0) * (t - t0) / (t1 - t0)

        return np.interp(t, self.tokens, self.ms)

    def fit(self, form: str = "linear") -> FittedCost:
        """A :class:`FittedCost` of ``form`` ('linear' or 'knee') through these points."""
        return fit_cost_curve(self.tokens, self.ms, form)


FORMS = COST_FORMS
"""The forms a measured cost curve is fitted in: :data:`breakeven.core.choices.COST_FORMS`."""


@dataclass(frozen=True)
class FittedCost:
    """A forward-time model fitted to measured points by least squares (scipy.optimize).

    - ``linear``: ``a + b * n``: a fixed cost plus a per-token cost.
    - ``knee``: ``max(a, b * n) + c``, a roofline: flat (memory-bound) at
      ``a + c`` up to the knee ``n = a / b``, then rising ``b`` ms per token
      (compute-bound).

    A model fitted to measured points keeps them: between them it interpolates the
    measurements, and only beyond them does the form extrapolate, from the nearest point.
    """

    form: str
    """'linear' or 'knee'."""
    a: float
    """linear: fixed cost; knee: memory-bound level above c [ms]."""
    b: float
    """Slope [ms per token]."""
    c: float = 0.0
    """knee: the offset added to both regimes [ms]; 0 for linear."""
    residuals_ms: tuple[float, ...] = ()
    """Fitted minus measured time at each point [ms]."""
    min_tokens: float = 1.0
    max_tokens: float = math.inf
    points: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    """The measured (tokens, ms) the model was fitted to: inside their range it interpolates
    them, and extrapolates with the fitted form only beyond it (from the nearest point)."""

    @property
    def rms_residual_ms(self) -> float:
        """Root-mean-square residual [ms]."""
        r = self.residuals_ms
        return math.sqrt(math.fsum(x * x for x in r) / len(r)) if r else 0.0

    @property
    def max_abs_residual_ms(self) -> float:
        """Largest absolute residual [ms]."""
        return max((abs(x) for x in self.residuals_ms), default=0.0)

    @property
    def knee_tokens(self) -> float:
        """knee: the token count where the forward turns compute-bound, ``a / b``."""
        return self.a / self.b if self.form == "knee" and self.b > 0 else math.inf

    def __call__(self, tokens: Any) -> Any:
        t = _tokens(self, tokens)
        measured_tokens, measured_ms = self.points
        if not measured_tokens:
            return _fitted(self.form, t, self.a, self.b, self.c)

        x = np.asarray(t, dtype=float)
        first, last = measured_tokens[0], measured_tokens[-1]
        shape = _fitted(self.form, x, self.a, self.b, self.c)
        below = measured_ms[0] + shape - _fitted(self.form, first, self.a, self.b, self.c)
        above = measured_ms[-1] + shape - _fitted(self.form, last, self.a, self.b, self.c)
        inside = np.interp(x, measured_tokens, measured_ms)
        out = np.where(x < first, below, np.where(x > last, above, inside))
        return float(out) if isinstance(t, float) else out


def _fitted(form: str, n: Any, a: float, b: float, c: float) -> Any:
    if form == "linear":
        return a + b * n
    bn = b * n
    return (bn > a) * (bn - a) + a + c  # max(a, b n) + c, for floats and arrays alike


def fit_cost_curve(
    tokens: Sequence[float], ms: Sequence[float], form: str = "linear"
) -> FittedCost:
    """Fit a forward-time model to measured (tokens, ms) points with scipy.optimize.

    Parameters
    ----------
    tokens : sequence of float  [tokens]
        Total tokens per forward, strictly increasing, at least two points.
    ms : sequence of float  [ms]
        Measured forward times.
    form : {'linear', 'knee'}
        ``a + b*n``, or the roofline knee ``max(a, b*n) + c``.  The slope
        ``b`` and the level (``a``, or ``a + c``) are kept >= 0.

    Returns
    -------
    FittedCost
        With its residuals at the measured points.
    """
    if form not in FORMS:
        raise invalid_value("form", form, "one of " + ", ".join(FORMS))
    t, m = _curve_points(tokens, ms, "")

    n, y = np.asarray(t), np.asarray(m)
    if form == "linear":
        sol = lsq_linear(np.column_stack([np.ones_like(n), n]), y, bounds=(0, np.inf))
        a, b, c = float(sol.x[0]), float(sol.x[1]), 0.0
    else:
        # For a knee at n0 the model is level + slope * max(0, n - n0), linear in
        # (level, slope): profile the knee position, refine it with a bounded search.
        def solve(n0: float) -> tuple[float, Any]:
            design = np.column_stack([np.ones_like(n), np.maximum(0.0, n - n0)])
            sol = lsq_linear(design, y, bounds=(0, np.inf))
            return float(np.sum((design @ sol.x - y) ** 2)), sol.x

        # The best knee lies at a data point, or inside an interval between two, where the
        # points left of it are flat and those right of it on one line: try every such place.
        candidates = [(solve(float(x))[0], float(x)) for x in n]
        for j in range(len(n) - 1):
            left, right = n <= n[j], n >= n[j + 1]
            if right.sum() < 2:
                continue
            slope, intercept = np.polyfit(n[right], y[right], 1)
            if slope > 0:
                inside = (y[left].mean() - intercept) / slope
                if n[j] < inside < n[j + 1]:
                    candidates.append((solve(float(inside))[0], float(inside)))
        knee = min(candidates)[1]
        level, slope = solve(knee)[1]
        a, b = float(slope * knee), float(slope)
        c = float(level - a)  # may be negative: the compute-bound line's intercept
    fitted = _fitted(form, n, a, b, c)
    return FittedCost(
        form,
        a,
        b,
        c,
        tuple(float(r) for r in fitted - y),
        min_tokens=1.0,
        max_tokens=math.inf,
        points=(tuple(float(x) for x in n), tuple(float(x) for x in y)),
    )


def expected_distinct_experts(
    experts: Any, top_k: Any, tokens: Any, shared: Any = 0, overlap: Any = 1.0
) -> Any:
    """Expected number of experts a forward over ``tokens`` tokens loads.

    With each token routed to ``top_k`` of ``experts`` routed experts,
    uniformly and independently, the expected number of distinct routed experts
    is ``N(t) = E * (1 - (1 - K/E)**t)``.  Real routing overlaps more than
    uniform routing; ``overlap`` scales the experts beyond the first token's:
    ``K + overlap * (N(t) - K)`` (1: uniform routing, 0: every token picks the
    same experts; see :func:`overlap_from_measurement`).  Shared experts,
    which every token uses, are added.

    Parameters
    ----------
    experts : numeric  [experts]
        Routed experts E per MoE layer.
    top_k : numeric  [experts]
        Routed experts K per token, 1 <= K <= E.
    tokens : numeric  [tokens]
        Tokens in the forward (>= 1).
    shared : numeric  [experts]
        Shared experts, always active.
    overlap : numeric
        In [0, 1].

    Returns
    -------
    active_experts : numeric  [experts]
    """
    xp = _xp.namespace(experts, top_k, tokens, shared, overlap)
    e = _xp.positive(xp, "experts", experts, "experts")
    k = _xp.positive(xp, "top_k", top_k, "experts")
    bad = xp.first(k, k > e)
    if bad is not None:
        shown = top_k if xp is _xp.SCALAR else _xp._plain(bad)
        raise invalid_value("top_k", shown, "at most the number of experts")
    t = _xp.positive(xp, "tokens", tokens, "tokens")
    s = _xp.nonnegative(xp, "shared", shared, "experts")
    f = _xp.probability(xp, "overlap", overlap)
    # E (1 - (1 - K/E)^t) = -E expm1(t log1p(-K/E)): exact for K/E below the float spacing
    # near 1 (E = 10^17 experts), where 1 - K/E would round, and at K = E (log1p(-1) = -inf).
    uniform = -e * xp.expm1(t * xp.log1p(-k / e))
    return k + f * (uniform - k) + s


def overlap_from_measurement(experts: float, top_k: float, tokens: float, measured: float) -> float:
    """The ``overlap`` that makes :func:`expected_distinct_experts` match a measured count.

    ``measured`` is the mean number of distinct routed experts (shared ones
    excluded) seen in forwards over ``tokens`` tokens.
    """
    uniform = expected_distinct_experts(experts, top_k, tokens)
    if uniform == top_k:
        raise BreakevenError(
            "{0}: one token loads only top_k experts: nothing to calibrate", "tokens"
        )
    f = (float(measured) - top_k) / (uniform - top_k)
    return float(_xp.probability(_xp.SCALAR, "overlap", round(f, 12)))


@dataclass(frozen=True)
class MoECost:
    """A Mixture-of-Experts forward: a fixed part plus routed experts, priced by experts loaded.

    ``cost(t) = dense_ms + expert_ms * N(t) / top_k``, where ``N(t)`` is
    :func:`expected_distinct_experts` (routed only) and ``expert_ms`` the time
    the routed experts take in a one-token forward.  Decode is memory-bound, so
    expert time follows the expert weights read.
    """

    dense_ms: float
    """Time of everything routing does not change: attention, shared experts, communication [ms]."""
    expert_ms: float
    """Time of the top_k routed experts in a one-token forward [ms]."""
    experts: int
    """Routed experts per MoE layer."""
    top_k: int
    """Routed experts per token."""
    overlap: float = 1.0
    """Routing overlap correction, in [0, 1] (1: uniform routing)."""
    min_tokens: float = 1.0
    max_tokens: float = math.inf

    def __post_init__(self) -> None:
        _xp.nonnegative(_xp.SCALAR, "dense_ms", self.dense_ms, "ms")
        _xp.nonnegative(_xp.SCALAR, "expert_ms", self.expert_ms, "ms")
        expected_distinct_experts(self.experts, self.top_k, 1, 0, self.overlap)

    def active_experts(self, tokens: Any) -> Any:
        """Expected distinct routed experts a forward over ``tokens`` loads [experts]."""
        return expected_distinct_experts(self.experts, self.top_k, tokens, 0, self.overlap)

    def __call__(self, tokens: Any) -> Any:
        t = _tokens(self, tokens)
        return self.dense_ms + self.expert_ms * self.active_experts(t) / self.top_k


@dataclass(frozen=True)
class RooflineCost:
    """A forward priced from hardware and model specs: a roofline plus tensor-parallel AllReduce.

    ``cost(t) = max(bytes(t) / (tp * mem_bw), 2 * active_params * t / (tp * peak_flops))
    + allreduce(t)``, with ``bytes(t) = dense_bytes + expert_bytes * N(t) + kv_bytes``
    (``N`` from :func:`expected_distinct_experts`; 0 for a dense model) and, when
    ``tp > 1``, ``allreduces_per_forward`` AllReduces of ``t * allreduce_bytes_per_token``
    each costing ``allreduce_latency_us + 2 (tp - 1) / tp * bytes / link_bw`` (ring).
    """

    dense_bytes: float
    """Weights every forward reads, whatever the routing (attention, shared experts) [bytes]."""
    active_params: float
    """Parameters applied per token; 2 FLOPs each [parameters]."""
    mem_bw: float
    """Memory bandwidth of one GPU [bytes/s]."""
    peak_flops: float
    """Peak throughput of one GPU at the weights' precision [FLOP/s]."""
    expert_bytes: float = 0.0
    """One routed expert across all layers, for a MoE target [bytes]."""
    experts: int = 0
    """Routed experts per layer (0: a dense model)."""
    top_k: int = 0
    """Routed experts per token."""
    overlap: float = 1.0
    """Routing overlap correction (see :func:`expected_distinct_experts`)."""
    kv_bytes: float = 0.0
    """KV cache read per forward, for the batch and context modelled [bytes]."""
    tp: int = 1
    """Tensor-parallel degree: GPUs the weights are split over."""
    allreduces_per_forward: int = 0
    """AllReduces per forward, typically 2 per layer."""
    allreduce_bytes_per_token: float = 0.0
    """Activation bytes each AllReduce moves per token (hidden size x bytes per value)."""
    allreduce_latency_us: float = 0.0
    """Fixed cost of one AllReduce [us]."""
    link_bw: float = math.inf
    """Bandwidth of the GPU interconnect, per GPU [bytes/s] (PCIe or NVLink)."""
    min_tokens: float = 1.0
    max_tokens: float = math.inf

    def __post_init__(self) -> None:
        for name in (
            "dense_bytes",
            "active_params",
            "expert_bytes",
            "kv_bytes",
            "allreduce_bytes_per_token",
            "allreduce_latency_us",
        ):
            _xp.nonnegative(_xp.SCALAR, name, getattr(self, name), "")
        for name in ("mem_bw", "peak_flops"):
            _xp.positive(_xp.SCALAR, name, getattr(self, name), "")
        if not self.link_bw > 0:
            raise invalid_value("link_bw", self.link_bw, "a bandwidth > 0 [bytes/s]")
        if self.experts:
            expected_distinct_experts(self.experts, self.top_k, 1, 0, self.overlap)
        if int(self.tp) != self.tp or self.tp < 1:
            raise invalid_value("tp", self.tp, "a whole number of GPUs >= 1")

    def breakdown(self, tokens: Any) -> dict[str, Any]:
        """The parts of one forward [ms]: ``memory``, ``compute``, ``allreduce`` and ``total``.

        ``total = max(memory, compute) + allreduce``.
        """
        t = _tokens(self, tokens)
        routed = 0.0 * t
        if self.experts:
            routed = expected_distinct_experts(self.experts, self.top_k, t, 0, self.overlap)
        weight_bytes = self.dense_bytes + self.expert_bytes * routed + self.kv_bytes
        memory = 1000.0 * weight_bytes / (self.tp * self.mem_bw)
        compute = 1000.0 * 2.0 * self.active_params * t / (self.tp * self.peak_flops)
        allreduce = 0.0 * t
        if self.tp > 1 and self.allreduces_per_forward:
            ring = 2.0 * (self.tp - 1) / self.tp * t * self.allreduce_bytes_per_token
            one = self.allreduce_latency_us / 1000.0 + 1000.0 * ring / self.link_bw
            allreduce = self.allreduces_per_forward * one
        bound = (compute > memory) * (compute - memory) + memory  # max, for floats and arrays
        return {
            "memory": memory,
            "compute": compute,
            "allreduce": allreduce,
            "total": bound + allreduce,
        }

    def __call__(self, tokens: Any) -> Any:
        return self.breakdown(tokens)["total"]


DRAFT_KINDS = ("autoregressive", "head", "single-pass", "ngram")


@dataclass(frozen=True)
class DraftCost:
    """Drafting time per cycle: ``draft(k, batch) = fixed_ms + steps(k) * step(batch)``.

    Kinds:

    - ``autoregressive``: a draft model, k sequential forwards.
    - ``head``: EAGLE or MTP heads run once per drafted token, k passes.
    - ``single-pass``: Medusa-style heads draft all k tokens in one pass.
    - ``ngram``: prompt lookup; no forward at all (``step_ms`` is ignored).

    ``step_ms`` is one draft step's time, a number [ms] or a cost model priced
    by batch size (a draft step over B sequences is ``step_ms(B)``).
    """

    kind: str
    """One of :data:`DRAFT_KINDS`."""
    step_ms: Any = 0.0
    """One draft step or head pass [ms], or a cost model of the batch size."""
    fixed_ms: float = 0.0
    """Drafting cost per cycle that does not grow with k, e.g. an n-gram lookup [ms]."""

    def __post_init__(self) -> None:
        if self.kind not in DRAFT_KINDS:
            raise invalid_value("kind", self.kind, "one of " + ", ".join(DRAFT_KINDS))
        if not callable(self.step_ms):
            _xp.nonnegative(_xp.SCALAR, "step_ms", self.step_ms, "ms")
        _xp.nonnegative(_xp.SCALAR, "fixed_ms", self.fixed_ms, "ms")

    def steps(self, k: Any) -> Any:
        """Draft passes per cycle for ``k`` draft tokens."""
        if self.kind == "ngram":
            return 0 * k
        return 0 * k + 1 if self.kind == "single-pass" else k

    def __call__(self, k: Any, batch: Any = 1) -> Any:
        step = self.step_ms(batch) if callable(self.step_ms) else self.step_ms
        return self.fixed_ms + self.steps(k) * step
