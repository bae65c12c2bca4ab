"""What a Mixture-of-Experts forward loads (``breakeven moe``): the expected distinct experts
of a forward over some tokens, and its cost against a one-token step.
"""

from __future__ import annotations

from typing import Any

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import plain_json
from breakeven.model import _xp
from breakeven.model.costs import expected_distinct_experts


class MoESummary(dict[str, float]):
    """What a Mixture-of-Experts forward loads, and its cost against a one-token step: a dict
    of :data:`~breakeven.core.quantities.QUANTITIES` keys (see :func:`moe_summary`) that reports
    itself."""

    def to_dict(self) -> dict[str, Any]:
        """The quantities as a plain dict, for ``--json``."""
        return plain_json(dict(self), keep_infinite=True)

    def report(self) -> str:
        """What ``breakeven moe`` prints: label, value, unit and JSON key per line."""
        return render.moe_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.moe_html(self.to_dict())


def moe_summary(
    experts: int,
    top_k: int,
    tokens: float,
    shared: int = 0,
    overlap: float = 1.0,
    dense_bytes: float | None = None,
    expert_bytes: float | None = None,
) -> MoESummary:
    """What a forward over ``tokens`` tokens loads on a MoE target, and what it costs against a step.

    Returns ``active_experts`` (expected distinct routed experts plus shared
    ones), ``routed_experts``, ``step_active_experts`` (a one-token forward's),
    and, with ``dense_bytes`` and ``expert_bytes``, ``forward_bytes``,
    ``step_bytes`` and ``verify_step_ratio = forward_bytes / step_bytes`` (a
    memory-bound forward's time follows the bytes it reads).
    """

    if (dense_bytes is None) != (expert_bytes is None):
        raise BreakevenError("{0} and {1} go together", "dense_bytes", "expert_bytes")
    routed = expected_distinct_experts(experts, top_k, tokens, 0, overlap)
    step_routed = expected_distinct_experts(experts, top_k, 1, 0, overlap)
    shared = float(_xp.nonnegative(_xp.SCALAR, "shared", shared, "experts"))
    out = {
        "active_experts": routed + shared,
        "routed_experts": routed,
        "step_active_experts": step_routed + shared,
    }
    if dense_bytes is not None:
        d = float(_xp.nonnegative(_xp.SCALAR, "dense_bytes", dense_bytes, "bytes"))
        x = float(_xp.positive(_xp.SCALAR, "expert_bytes", expert_bytes, "bytes"))
        out["forward_bytes"] = d + x * (routed + shared)
        out["step_bytes"] = d + x * (step_routed + shared)
        out["verify_step_ratio"] = out["forward_bytes"] / out["step_bytes"]
    return MoESummary(out)


__all__ = ["MoESummary", "moe_summary"]
