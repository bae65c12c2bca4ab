"""One formula for Python numbers and numpy arrays, and the input checks they share.

breakeven's math is written once, against a small namespace ``xp``: numpy when
any input is an array (or a list, or a pandas Series), and :data:`SCALAR`, a
stand-in built on :mod:`math`, when every input is a plain Python number.  The
command line only ever passes numbers, so it never pays numpy's import time,
which is longer than a whole ``breakeven predict`` call may take.

Formulas must therefore use only arithmetic and the functions defined on both
namespaces below.  ``xp.where`` evaluates both branches (as numpy does), so a
branch that would divide by zero is guarded with a safe stand-in value first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces, invalid_value, shorten
from breakeven.core.quantities import as_percent


class _ScalarNamespace:
    """The subset of numpy that breakeven's formulas use, for Python floats."""

    nan = math.nan
    inf = math.inf

    @staticmethod
    def asarray(x: Any) -> float:
        return float(x)

    @staticmethod
    def where(cond: bool, a: Any, b: Any) -> Any:
        return a if cond else b

    @staticmethod
    def log(x: float) -> float:
        if x > 0:
            return math.log(x)
        return -math.inf if x == 0 else math.nan

    @staticmethod
    def expm1(x: float) -> float:
        return math.expm1(x)

    @staticmethod
    def log1p(x: float) -> float:
        if x > -1:
            return math.log1p(x)
        return -math.inf if x == -1 else math.nan

    @staticmethod
    def isfinite(x: float) -> bool:
        return math.isfinite(x)

    @staticmethod
    def all(x: bool) -> bool:
        return bool(x)

    @staticmethod
    def first(x: Any, bad: bool) -> Any:
        """The value itself when ``bad``, else None."""
        return x if bad else None


class _NumpyNamespace:
    """numpy, with results of 0-d operations returned as scalars."""

    def __init__(self) -> None:
        import numpy as np  # lazy: start-up

        self.np = np
        self.nan = np.nan
        self.inf = np.inf
        self.expm1 = np.expm1
        self.isfinite = np.isfinite

    def asarray(self, x: Any) -> Any:
        return self.np.asarray(x, dtype=float)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.np.where(cond, a, b)[()]

    def log(self, x: Any) -> Any:
        with self.np.errstate(divide="ignore", invalid="ignore"):
            return self.np.log(x)

    def log1p(self, x: Any) -> Any:
        with self.np.errstate(divide="ignore", invalid="ignore"):
            return self.np.log1p(x)

    def all(self, x: Any) -> bool:
        return bool(self.np.all(x))

    def first(self, x: Any, bad: Any) -> Any:
        """The first element of ``x`` where ``bad`` holds, else None."""
        x, bad = self.np.broadcast_arrays(x, bad)
        if not bad.any():
            return None
        return x.flat[int(self.np.argmax(bad))]


SCALAR = _ScalarNamespace()
_numpy_namespace: _NumpyNamespace | None = None


def namespace(*values: Any) -> Any:
    """:data:`SCALAR` if every value is a Python number or None, else numpy's namespace."""
    global _numpy_namespace
    if all(v is None or isinstance(v, (int, float)) for v in values):
        return SCALAR
    if _numpy_namespace is None:
        _numpy_namespace = _NumpyNamespace()
    return _numpy_namespace


def _check(
    xp: Any,
    name: str,
    given: Any,
    x: Any,
    lower: float,
    upper: float,
    expected: str,
    *,
    open_lower: bool = False,
    open_upper: bool = False,
    cause: Callable[[float], str] | None = None,
) -> None:
    """Raise naming the first value of ``x`` outside its bounds (a scalar as ``given``), and
    ``cause(value)``'s likely cause of it where that is not empty.

    NaN is always outside.  Arrays are checked through their min and max, two
    fast passes, and searched element by element only when something is wrong.
    """

    def inside(lo: Any, hi: Any) -> Any:
        above = lo > lower if open_lower else lo >= lower
        below = hi < upper if open_upper else hi <= upper
        return above & below

    if xp is SCALAR:
        if not inside(x, x):
            raise invalid_value(name, given, expected + (cause(x) if cause else ""))
        return
    if x.size == 0 or inside(x.min(), x.max()):
        return
    bad_value = _plain(xp.first(x, ~inside(x, x)))
    raise invalid_value(name, bad_value, expected + (cause(bad_value) if cause else ""))


def _percent_cause(value: float) -> str:
    """Why a probability may be above 1: ``": a percent? give 0.864"`` for 86.4
    (:func:`~breakeven.core.quantities.as_percent`), else ``""``."""
    fraction = as_percent(value)
    return "" if fraction is None else f": a percent? give {fraction:.6g}"


def _plain(x: Any) -> Any:
    """A numpy scalar as the Python number it holds, for messages."""
    return x.item() if hasattr(x, "item") else x


def as_number(xp: Any, name: str, value: Any) -> Any:
    """``value`` as a float or float array; a non-number is a BreakevenError."""
    try:
        return xp.asarray(value)
    except (TypeError, ValueError):
        raise invalid_value(name, value, "a number") from None
    except OverflowError:  # a Python int beyond a double, such as 10**400
        raise invalid_value(
            name, value, "a number a double holds (at most about 1.8e308)"
        ) from None


def positive(xp: Any, name: str, value: Any, unit: str) -> Any:
    """``value`` checked to be finite and > 0 (a latency, a rate)."""
    x = as_number(xp, name, value)
    expected = f"a finite number > 0 [{unit}]"
    _check(xp, name, value, x, 0.0, xp.inf, expected, open_lower=True, open_upper=True)
    return x


def nonnegative(xp: Any, name: str, value: Any, unit: str) -> Any:
    """``value`` checked to be finite and >= 0 (a cost that may be zero)."""
    x = as_number(xp, name, value)
    expected = f"a finite number >= 0 [{unit}]"
    _check(xp, name, value, x, 0.0, xp.inf, expected, open_upper=True)
    return x


def probability(xp: Any, name: str, value: Any) -> Any:
    """``value`` checked to lie in [0, 1]."""
    x = as_number(xp, name, value)
    _check(xp, name, value, x, 0.0, 1.0, "a probability in [0, 1]", cause=_percent_cause)
    return x


def draft_tokens(xp: Any, name: str, value: Any) -> Any:
    """``value`` checked to be a whole number of draft tokens >= 1."""
    expected = "a whole number of draft tokens >= 1"
    if isinstance(value, bool):
        raise invalid_value(name, value, expected)
    x = as_number(xp, name, value)
    _check(xp, name, value, x, 1.0, xp.inf, expected, open_upper=True)
    fractional = x % 1 != 0
    if xp is SCALAR:
        if fractional:
            raise invalid_value(name, value, expected)
    elif xp.first(x, fractional) is not None:
        raise invalid_value(name, _plain(xp.first(x, fractional)), expected)
    return x


def count(name: str, value: Any, high: int, low: int = 1) -> int:
    """``value`` checked to be a whole number from ``low`` to ``high`` (a size that bounds work:
    the largest k tried, the largest batch swept)."""
    expected = f"a whole number from {low} to {high}"
    if isinstance(value, bool):
        raise invalid_value(name, value, expected)
    x = as_number(SCALAR, name, value)
    if not (low <= x <= high and x % 1 == 0):
        raise invalid_value(name, value, expected)
    return int(x)


def accept_len(xp: Any, name: str, value: Any, k: Any = None, k_name: str = "k") -> Any:
    """``value`` checked to be a mean acceptance length in [1, k + 1] (bonus token included)."""
    x = as_number(xp, name, value)
    expected = "a mean acceptance length >= 1 [tokens/cycle]"
    rate = xp.first(x, (x > 0) & (x < 1))
    if rate is not None:
        raise _a_rate(name, value if xp is SCALAR else _plain(rate), expected)
    _check(xp, name, value, x, 1.0, xp.inf, expected, open_upper=True)
    if k is not None:
        # Engines print tau rounded to two decimals: allow that much above k + 1.
        too_long = x > k + 1 + 0.005
        bad = xp.first(x, too_long)
        if bad is not None:
            kk = xp.first(k + 0 * x, too_long)
            raise _too_long(name, k_name, _plain(bad), _plain(kk))
    return x


def _a_rate(name: str, value: Any, expected: str) -> BreakevenError:
    """An accept_len in (0, 1): a per-token rate given where tokens per cycle are meant."""
    shown = repr(value) if isinstance(value, str) else str(value)
    return BreakevenError(
        "{0}: got "
        + escape_braces(shorten(shown))
        + ", expected "
        + expected
        + ": it counts the bonus token, so it is at least 1; a per-token acceptance rate? "
        "give it as {1} (with {2})",
        name,
        "alpha",
        "k",
    )


def _too_long(name: str, k_name: str, tau: float, k: float) -> BreakevenError:
    return BreakevenError(
        "{0}: got " + f"{tau:g}, expected at most k + 1 = {k + 1:g} for {{1}} = {k:g}"
        " [tokens/cycle] (a cycle emits at most k drafted tokens plus the bonus token)",
        name,
        k_name,
    )
