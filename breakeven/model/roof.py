"""The hardware's floor under a forward: the roofline form of the surface t(B, q).

A forward of B sequences with q new tokens each reads the model's weights and the sequences'
KV cache, and computes each token's FLOPs.  It can go no faster than the slower of the two::

    memory(B, q)  = weights + expert * E(B * q) + kv * B      [ms at the datasheet bandwidth]
    compute(B, q) = flops * B * q                             [ms at the datasheet peak]
    roof(B, q)    = (memory_scale * memory) (+)_p (compute_scale * compute)

``(+)_p`` is the soft maximum ``(x^p + y^p)^(1/p)`` with p = :data:`ROOF_SOFTNESS`: real
kernels leave the memory floor gradually, not at a corner (a hard maximum is p -> inf).  The
datasheet times come from the accelerator and the model's ``config.json``
(:mod:`breakeven.model.roofline`); ``memory_scale`` and ``compute_scale`` (1 / the achieved
fraction of bandwidth and of peak) are fitted on the runs, pulled towards the usual values
(:data:`MEMORY_SCALE_PRIOR`, :data:`COMPUTE_SCALE_PRIOR`) where the runs cannot say: a maximum
a posteriori fit, with each run's time known to :data:`RUN_NOISE`.

The surface adds what a forward costs beyond its floor (a fixed overhead per forward and a cost
per sequence: launches, sampling, scheduling) and the draft's cost, both fitted linearly
(:mod:`breakeven.model.surface`).  Pure math, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

ROOF_SOFTNESS = 3.0
"""p of the soft maximum of the memory and compute times: at the ridge, where the two are
equal, a forward takes 2^(1/p) = 1.26x either."""
MEMORY_SCALE_PRIOR = (1 / 0.8, 0.3)
"""The prior of ``memory_scale``: its median (a forward reads at 80% of the datasheet
bandwidth) and the standard deviation of its natural log."""
COMPUTE_SCALE_PRIOR = (1 / 0.4, 0.5)
"""The prior of ``compute_scale``: its median (decode-sized GEMMs reach 40% of the datasheet
peak) and the standard deviation of its natural log."""
RUN_NOISE = 0.005
"""The relative noise of a pooled step or cycle that the prior is weighed against [fraction]:
runs that say where the roof bends (a verify near the ridge) move the scales off the prior;
runs that cannot leave them there."""
LINK_PRIOR_SPREAD = 0.25
"""The prior's spread of what a token costs beyond the floor, over the token's FLOPs time at
the datasheet peak [x]: on one device little (sampling), on several their all-reduces."""
_MEMORY_RANGE = (1.0, 8.0)
_COMPUTE_RANGE = (1.0, 50.0)


@dataclass(frozen=True)
class Roof:
    """A forward's floor on one accelerator (or a tensor-parallel group), at the datasheet's
    bandwidth and peak, and the fitted scales that make it the achieved one."""

    weights_ms: float
    """What every forward reads once (attention, dense MLPs, shared experts, LM head) [ms]."""
    expert_ms: float
    """One routed expert, over all MoE layers [ms per expert loaded]."""
    kv_ms: float
    """One sequence's KV cache at the runs' context [ms per sequence]."""
    compute_ms: float
    """One token's FLOPs [ms per token]."""
    memory_scale: float = MEMORY_SCALE_PRIOR[0]
    """1 / the achieved fraction of the bandwidth [x]."""
    compute_scale: float = COMPUTE_SCALE_PRIOR[0]
    """1 / the achieved fraction of the peak [x]."""
    source: str = ""
    """Where the datasheet numbers come from, in words."""
    link_ms: float = 0.0
    """Each token's tensor-parallel all-reduces over the devices' link at its nominal bandwidth
    [ms per token]: 0 on one device.  Not part of the floor: the prior median of the surface's
    cost per token beyond it (:data:`LINK_PRIOR_SPREAD`)."""

    def memory(self, batch: Any, q: Any, loaded: Callable[[Any], Any] | None = None) -> Any:
        """The achieved memory time of a forward [ms]; ``loaded(tokens)`` the experts that
        many tokens load (None: a dense model)."""
        experts = loaded(batch * q) if loaded is not None else 0.0
        base = self.weights_ms + self.expert_ms * experts + self.kv_ms * batch
        return self.memory_scale * base

    def compute(self, batch: Any, q: Any) -> Any:
        """The achieved compute time of a forward [ms]."""
        return self.compute_scale * self.compute_ms * batch * q

    def ms(self, batch: Any, q: Any, loaded: Callable[[Any], Any] | None = None) -> Any:
        """roof(B, q) [ms]: the soft maximum of :meth:`memory` and :meth:`compute`."""
        m = np.asarray(self.memory(batch, q, loaded), dtype=float)
        c = np.asarray(self.compute(batch, q), dtype=float)
        top = np.maximum(np.maximum(m, c), 1e-300)
        p = ROOF_SOFTNESS
        out = top * ((m / top) ** p + (c / top) ** p) ** (1 / p)
        return float(out) if out.ndim == 0 else out

    def bound(self, batch: float, q: float, loaded: Callable[[Any], Any] | None = None) -> str:
        """'memory' or 'compute': which floor is higher at (B, q)."""
        return "compute" if self.compute(batch, q) > self.memory(batch, q, loaded) else "memory"

    def ridge_tokens(self, loaded: Callable[[Any], Any] | None = None) -> float:
        """Tokens per forward (B x q at B = 1's memory) where compute overtakes memory
        [tokens]: where the roofline bends; inf without a compute time."""
        per_token = self.compute_scale * self.compute_ms
        if not per_token > 0:
            return math.inf
        return float(self.memory(1, 1, loaded)) / per_token

    def to_dict(self) -> dict[str, Any]:
        """The roof as a fit file holds it."""
        return {
            "weights_ms": self.weights_ms,
            "expert_ms": self.expert_ms,
            "kv_ms": self.kv_ms,
            "compute_ms": self.compute_ms,
            "memory_scale": self.memory_scale,
            "compute_scale": self.compute_scale,
            "source": self.source,
            "link_ms": self.link_ms,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Roof | None:
        """A roof from a fit file's mapping; None where there is none or it is not one."""
        if not isinstance(data, dict):
            return None
        names = ("weights_ms", "expert_ms", "kv_ms", "compute_ms", "memory_scale")
        values = [data.get(n) for n in (*names, "compute_scale")]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
            return None
        link = data.get("link_ms", 0.0)
        if not (isinstance(link, (int, float)) and math.isfinite(link) and link >= 0):
            return None
        return cls(*map(float, values), source=str(data.get("source", "")), link_ms=float(link))

    def per_token_prior(self) -> tuple[float, float]:
        """The prior of what a token costs beyond the floor [ms per token]: its median
        (:attr:`link_ms`) and standard deviation (:attr:`link_ms` plus
        :data:`LINK_PRIOR_SPREAD` x the token's FLOPs time at the datasheet peak)."""
        return self.link_ms, self.link_ms + LINK_PRIOR_SPREAD * self.compute_ms


def fit_roof(
    roof: Roof,
    equations: Sequence[tuple[float, float, float]],
    solve_rest: Callable[[Any], tuple[Any, float]],
    loaded: Callable[[Any], Any] | None = None,
) -> tuple[Roof, Any, float]:
    """The roof's scales of greatest posterior density, and the rest's coefficients.

    ``equations`` are (batch, q, measured time [ms]); ``solve_rest(remainder)`` fits the linear
    terms to each time less its roof, relative to the time (``remainder[i] = 1 - roof_i /
    time_i``), and returns their coefficients and the RMS of the relative residuals.  The
    scales are searched on a grid of their logs, then polished from the best (Nelder-Mead);
    the last call of ``solve_rest`` is at the scales returned."""
    batch = np.array([e[0] for e in equations], dtype=float)
    q = np.array([e[1] for e in equations], dtype=float)
    t = np.array([e[2] for e in equations], dtype=float)
    memory = roof.memory(batch, q, loaded) / roof.memory_scale
    compute = roof.compute_ms * batch * q
    p, n = ROOF_SOFTNESS, len(t)

    def score(log_m: float, log_c: float) -> tuple[float, Any, float]:
        m, c = math.exp(log_m) * memory, math.exp(log_c) * compute
        top = np.maximum(np.maximum(m, c), 1e-300)
        floor = top * ((m / top) ** p + (c / top) ** p) ** (1 / p)
        x, rms = solve_rest(1 - floor / t)
        misfit = (rms if math.isfinite(rms) else 0.0) ** 2 * n / RUN_NOISE**2
        prior = sum(
            ((v - math.log(mu)) / sd) ** 2
            for v, (mu, sd) in ((log_m, MEMORY_SCALE_PRIOR), (log_c, COMPUTE_SCALE_PRIOR))
        )
        return misfit + prior, x, rms

    def search(ms: Any, cs: Any) -> tuple[float, float, float, Any, float]:
        best: tuple[float, float, float, Any, float] | None = None
        for log_m in ms:
            for log_c in cs:
                s, x, rms = score(float(log_m), float(log_c))
                if best is None or s < best[0]:
                    best = (s, float(log_m), float(log_c), x, rms)
        assert best is not None
        return best

    lm = np.log(_MEMORY_RANGE)
    lc = np.log(_COMPUTE_RANGE)
    _, m1, c1, _, _ = search(np.linspace(*lm, 9), np.linspace(*lc, 13))
    from scipy.optimize import minimize  # lazy: only a fit with a roof polishes its scales

    def objective(v: Any) -> float:
        log_m = float(np.clip(v[0], *lm))
        log_c = float(np.clip(v[1], *lc))
        return score(log_m, log_c)[0]

    polished = minimize(objective, [m1, c1], method="Nelder-Mead", options={"xatol": 1e-4})
    m2, c2 = float(np.clip(polished.x[0], *lm)), float(np.clip(polished.x[1], *lc))
    _, x, rms = score(m2, c2)
    return replace(roof, memory_scale=math.exp(m2), compute_scale=math.exp(c2)), x, rms


__all__: Sequence[str] = (
    "COMPUTE_SCALE_PRIOR",
    "LINK_PRIOR_SPREAD",
    "MEMORY_SCALE_PRIOR",
    "ROOF_SOFTNESS",
    "RUN_NOISE",
    "Roof",
    "fit_roof",
)
