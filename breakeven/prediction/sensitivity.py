"""Which measured input moves the speedup most: each one moved by a fraction, the others held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from breakeven import model, render
from breakeven.model import _xp


@dataclass(frozen=True)
class SensitivityRow:
    """The speedup with one input moved down and up."""

    name: str
    """The input's name (``accept_len``, ``step_ms``, ``verify_ms``, ...)."""
    value: float
    """Its measured value [its unit]."""
    low_speedup: float
    """Speedup with the input at (1 - delta) x value [x]."""
    high_speedup: float
    """Speedup with the input at (1 + delta) x value [x]."""

    @property
    def swing(self) -> float:
        """|high_speedup - low_speedup| [x]."""
        return abs(self.high_speedup - self.low_speedup)


@dataclass(frozen=True)
class Sensitivity:
    """The speedup at the measured inputs, and its swing per input, largest first."""

    speedup: float
    """Speedup at the measured inputs [x]."""
    delta: float
    """Relative move applied to each input [fraction]."""
    rows: tuple[SensitivityRow, ...]
    """One per input, largest swing first."""

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame indexed by input name."""

        return pd.DataFrame(
            [
                {
                    "name": r.name,
                    "value": r.value,
                    "low_speedup": r.low_speedup,
                    "high_speedup": r.high_speedup,
                    "swing": r.swing,
                }
                for r in self.rows
            ]
        ).set_index("name")

    def to_dict(self) -> dict[str, Any]:
        """``speedup``, ``delta`` and ``rows`` (``{name, value, low_speedup, high_speedup}``)."""
        return {
            "speedup": self.speedup,
            "delta": self.delta,
            "rows": [
                {
                    "name": r.name,
                    "value": r.value,
                    "low_speedup": r.low_speedup,
                    "high_speedup": r.high_speedup,
                }
                for r in self.rows
            ],
        }

    def report(self) -> str:
        """The speedup with each input moved down and up, largest swing first."""
        return render.sensitivity_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.sensitivity_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """The tornado chart ``breakeven plot sensitivity`` draws; returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.tornado(self, ax)


def sensitivity(
    *,
    accept_len: float,
    step_ms: float,
    verify_ms: float,
    draft_ms: float = 0.0,
    overhead_ms: float = 0.0,
    delta: float = 0.10,
) -> Sensitivity:
    """Move each input by ``delta`` (down and up), the others held, and record the speedup.

    ``accept_len`` is kept at least 1.  Inputs that are 0 (no drafting, no
    overhead) cannot move and are left out.
    """
    xp = _xp.SCALAR
    d = float(_xp.probability(xp, "delta", delta))
    inputs = {
        "accept_len": accept_len,
        "step_ms": step_ms,
        "verify_ms": verify_ms,
        "draft_ms": draft_ms,
        "overhead_ms": overhead_ms,
    }

    def at(**moved: float) -> float:
        values = {**inputs, **moved}
        cycle = model.cycle_ms(values["verify_ms"], values["draft_ms"], values["overhead_ms"])
        return float(model.speedup(values["accept_len"], values["step_ms"], cycle))

    base = at()
    rows = []
    for name, value in inputs.items():
        if value == 0:
            continue
        low, high = value * (1 - d), value * (1 + d)
        if name == "accept_len":
            low = max(low, 1.0)
        rows.append(SensitivityRow(name, float(value), at(**{name: low}), at(**{name: high})))
    rows.sort(key=lambda r: r.swing, reverse=True)
    return Sensitivity(base, d, tuple(rows))
