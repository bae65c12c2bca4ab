"""Non-negative least squares over terms that runs may not tell apart: the one solver that
``breakeven fit`` (the cycle by k) and :mod:`breakeven.model.surface` (t(B, q) across batch
sizes) share.  Pure math, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def proportional_groups(a: Any, names: Sequence[str]) -> tuple[list[list[int]], tuple[str, ...]]:
    """Columns the equations cannot tell apart, grouped (each group is fitted as one term):
    two columns merge when one is a multiple of the other on every equation; a column that
    is zero everywhere is dropped.  Returns the groups and each merged one as ``a + b``."""
    groups: list[list[int]] = []
    for j in range(a.shape[1]):
        column = a[:, j]
        if not column.any():
            continue
        for g in groups:
            other = a[:, g[0]]
            # Proportional columns: Cauchy-Schwarz holds with equality.
            dot, norms = float(other @ column), float(other @ other) * float(column @ column)
            if dot * dot >= norms * (1 - 1e-12):
                g.append(j)
                break
        else:
            groups.append([j])
    merged = tuple(" + ".join(names[j] for j in g) for g in groups if len(g) > 1)
    return groups, merged


def independent_groups(
    a: Any, groups: list[list[int]], names: Sequence[str]
) -> tuple[list[list[int]], tuple[str, ...]]:
    """The groups less those in the span of the ones before them (in order), which the
    equations cannot separate (a dependency of three or more columns), and a sentence for each
    one left out."""

    kept: list[list[int]] = []
    dropped: tuple[str, ...] = ()
    if not groups:
        return kept, dropped
    # The groups' columns (each scaled to a largest value of 1) in order, each kept when
    # its part orthogonal to the kept ones' span is not near 0 (Gram-Schmidt, twice for
    # accuracy): what the rank of every prefix says, without an SVD a group.
    basis = np.zeros((a.shape[0], 0))
    for g in groups:
        tol = 1e-9 * max(a.shape[0], len(kept) + 1)
        v = a[:, g[0]] / np.abs(a[:, g[0]]).max()
        r = v - basis @ (basis.T @ v)
        r = r - basis @ (basis.T @ r)
        norm = float(np.linalg.norm(r))
        if norm > tol and basis.shape[1] < a.shape[0]:
            basis = np.column_stack([basis, r / norm])
            kept.append(g)
        else:
            dropped += (
                " + ".join(names[j] for j in g) + ": not separable from the terms "
                "before it by these runs, taken as 0",
            )
    return kept, dropped


def solve_groups(
    a: Any, b: Any, groups: list[list[int]], *, scaled: bool = False
) -> tuple[Any, float]:
    """Non-negative least squares (``scipy.optimize.nnls``) over the groups' columns: the full
    coefficient vector (a group's value in its first column) and the residual RMS.  With
    ``scaled``, each column is divided by its largest value first (for conditioning)."""

    x = np.zeros(a.shape[1])
    if not len(b) or not groups:
        return x, math.nan
    reduced = np.column_stack([a[:, g[0]] for g in groups])
    scale = np.ones(reduced.shape[1])
    if scaled:
        scale = np.abs(reduced).max(axis=0)
        scale[scale == 0] = 1.0
    from scipy.optimize import nnls  # lazy: scipy.optimize is slow to import; check needs none

    solution, norm = nnls(reduced / scale, b)
    for g, value in zip(groups, solution / scale, strict=True):
        x[g[0]] = value
    return x, float(norm / math.sqrt(len(b)))
