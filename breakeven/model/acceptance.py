"""Acceptance: per-token acceptance ``alpha``, mean acceptance length ``tau``, per-position rates.

The one convention breakeven uses
---------------------------------
``accept_len`` (tau) is the mean number of tokens a speculative cycle emits,
**bonus token included**: the accepted draft tokens plus the one token the
target model always contributes.  So ``1 <= accept_len <= k + 1`` for ``k``
draft tokens.  vLLM's "Mean acceptance length", SGLang's "accept len",
TensorRT-LLM's ``acceptanceLength`` and EAGLE's tau all count it this way.

Engines' "acceptance rate" is not ``alpha``.  ``alpha`` is Leviathan et al.'s
per-token acceptance probability under the i.i.d. assumption, recovered from a
measured ``accept_len`` with :func:`alpha_from_accept_len`.

Every function takes Python numbers or numpy arrays (which broadcast).
"""

from __future__ import annotations

import math
from typing import Any

from breakeven.core.errors import BreakevenError, invalid_value
from breakeven.model import _xp

_BISECTION_STEPS = 64  # halves [0, 1] down to below one float64 spacing


def _tau(xp: Any, alpha: Any, k: Any) -> Any:
    """``(1 - alpha**(k+1)) / (1 - alpha)`` on checked inputs, exact at alpha = 0 and 1.

    Written as ``-expm1((k+1) log alpha) / (1 - alpha)`` so that it keeps full
    precision as alpha approaches 1, where the textbook form cancels.
    """
    at_one = alpha == 1
    a = xp.where(at_one, 0.5, alpha)  # a stand-in that keeps the unused branch finite
    geometric = -xp.expm1((k + 1) * xp.log(a)) / (1 - a)
    return xp.where(at_one, k + 1, geometric)


def accept_len_from_alpha(alpha: Any, k: Any) -> Any:
    """Mean acceptance length for i.i.d. per-token acceptance.

    ``tau(alpha, k) = (1 - alpha**(k+1)) / (1 - alpha)``, the expected number of
    tokens emitted per cycle (Leviathan et al. 2023, eq. 1), bonus token
    included; ``tau(0, k) = 1`` and ``tau(1, k) = k + 1``.

    Parameters
    ----------
    alpha : numeric
        Per-token acceptance probability, in [0, 1].
    k : numeric
        Draft tokens per cycle, a whole number >= 1.

    Returns
    -------
    accept_len : numeric  [tokens/cycle]
    """
    xp = _xp.namespace(alpha, k)
    alpha = _xp.probability(xp, "alpha", alpha)
    k = _xp.draft_tokens(xp, "k", k)
    return _tau(xp, alpha, k)


def alpha_from_accept_len(accept_len: Any, k: Any) -> Any:
    """Per-token acceptance ``alpha`` that gives mean acceptance length ``accept_len`` at ``k``.

    The inverse of :func:`accept_len_from_alpha`, solved by bisection on
    [0, 1] (``tau`` rises strictly with ``alpha``), to within one float64 spacing.

    Parameters
    ----------
    accept_len : numeric  [tokens/cycle]
        Mean tokens emitted per cycle, bonus included, in [1, k + 1].
    k : numeric
        Draft tokens per cycle, a whole number >= 1.

    Returns
    -------
    alpha : numeric
    """
    xp = _xp.namespace(accept_len, k)
    k = _xp.draft_tokens(xp, "k", k)
    tau = _xp.accept_len(xp, "accept_len", accept_len, k)
    tau = xp.where(tau > k + 1, k + 1, tau)  # within the rounding allowance: treat as k + 1
    return _alpha_from_tau(xp, tau, k)


def _alpha_from_tau(xp: Any, tau: Any, k: Any) -> Any:
    """Bisection for ``alpha`` on checked ``1 <= tau <= k + 1``."""
    lo = 0.0 * tau * k
    hi = lo + 1.0
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        below = _tau(xp, mid, k) < tau
        lo = xp.where(below, mid, lo)
        hi = xp.where(below, hi, mid)
    alpha = 0.5 * (lo + hi)
    alpha = xp.where(tau == 1, 0.0, alpha)
    return xp.where(tau == k + 1, 1.0, alpha)


def accept_len_from_per_position(rates: Any) -> float:
    """Mean acceptance length from per-position acceptance rates: ``1 + sum(rates)``.

    ``rates[i]`` is the fraction of cycles whose draft position ``i + 1`` was
    accepted (vLLM's "Per-position acceptance rate").  A position is only
    accepted when every earlier one was, so the rates cannot increase, and their
    sum is the mean number of accepted draft tokens per cycle.

    Parameters
    ----------
    rates : sequence of float
        One rate per draft position, each in [0, 1], non-increasing.  ``k`` is
        their number.

    Returns
    -------
    accept_len : float  [tokens/cycle]
    """
    try:
        values = list(rates)
    except TypeError:
        raise invalid_value("per_position", rates, "a sequence of rates in [0, 1]") from None
    if not values:
        raise BreakevenError("{0}: got no rates, expected at least one", "per_position")
    checked = [_xp.probability(_xp.SCALAR, "per_position", v) for v in values]
    for i in range(1, len(checked)):
        if checked[i] > checked[i - 1]:
            raise BreakevenError(
                "{0}: rate at position "
                + f"{i + 1} ({checked[i]:g}) exceeds the rate at position {i} ({checked[i - 1]:g});"
                " expected non-increasing rates: a position is accepted only if every earlier"
                " one was",
                "per_position",
            )
    return 1.0 + math.fsum(checked)
