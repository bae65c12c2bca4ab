"""Fit files (``breakeven fit --out FIT.json``) read back, as plain data: a group of the cycle
by k for ``predict`` and ``optimize --fit-file``, a forward surface for ``batch --fit-file``, a
tree acceptance for ``optimize --tree``.  Every problem is one line naming ``--fit-file`` (or
the flag that picks an entry).  The objects are built from the data on the analysis side
(:func:`breakeven.fitting.saved.load_surface`, :func:`breakeven.fitting.saved.load_tree`).

An entry's identity, ``like``, is a mapping of ``model``, ``hardware`` and ``spec_method``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces, shorten
from breakeven.core.quantities import MAX_EXPERTS, SURFACE_TERM_UNITS
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.sources import read_whole

IDENTITY = ("model", "hardware", "spec_method")
"""The keys that tell a fit file's entries apart."""


def read_fit_json(path: str) -> Any:
    """A fit file's JSON, refused in one line naming ``fit_file`` (unreadable, not JSON)."""

    shown = escape_braces(repr(str(path)))
    try:
        text = read_whole(path)
    except (OSError, ValueError) as e:
        raise BreakevenError(
            "{0}: cannot read " + shown + ": " + escape_braces(str(e)), "fit_file"
        ) from None
    try:
        return loads_bounded(text, what="its text")
    except ValueError as e:
        raise BreakevenError(
            "{0}: " + shown + " is not JSON (" + escape_braces(str(e)) + "); "
            "expected a fit file, as breakeven fit --out writes",
            "fit_file",
        ) from None


def _pick(
    items: list[Any], index: int | None, shown: str, noun: str, flag: str, listed: str = ""
) -> Any:
    """Entry ``index`` (from 1) of a fit file's list: the only one when none is given."""
    if index is None and len(items) > 1:
        raise BreakevenError(
            "{0}: "
            + shown
            + f" holds {len(items)} {noun}"
            + (f" ({escape_braces(listed)})" if listed else "")
            + "; choose one with {1}",
            "fit_file",
            flag,
        )
    i = 1 if index is None else index
    if not 1 <= i <= len(items):
        raise BreakevenError("{0}: got " + str(i) + f", expected 1 to {len(items)}", flag)
    return items[i - 1]


def group_name(g: Mapping[str, Any]) -> str:
    """A fit file's group by its model, hardware and method, ``unnamed`` where none is said."""
    parts = [str(g.get(key) or "") for key in IDENTITY]
    return " ".join(p for p in parts if p) or "unnamed"


def undetermined(group: Any) -> bool:
    """Whether a fit file's group has coefficients no run determined (``fit`` writes them
    null): it predicts no cycle."""
    coefficients = group.get("coefficients") if isinstance(group, dict) else None
    return isinstance(coefficients, dict) and None in coefficients.values()


def read_fit(
    path: str, group: int | None = None, names: Collection[str] | None = None
) -> dict[str, Any]:
    """One group of a fit file, as its JSON object: the only one, or number ``group`` (from
    1, in the file's order).  Its coefficients are each a finite number >= 0 [ms], named in
    ``names`` where given (:data:`breakeven.fitting.fit.COEFFICIENTS`)."""
    shown = escape_braces(repr(str(path)))
    data = read_fit_json(path)
    groups = data.get("groups") if isinstance(data, dict) else None
    if (
        not isinstance(groups, list)
        or not groups
        or not all(isinstance(g, dict) and isinstance(g.get("coefficients"), dict) for g in groups)
    ):
        raise BreakevenError(
            "{0}: " + shown + " is not a fit (breakeven fit --out): expected "
            "an object with a list of groups, each with coefficients",
            "fit_file",
        )
    listed = "; ".join(f"{i} = {group_name(g)}" for i, g in enumerate(groups, start=1))
    chosen = _pick(groups, group, shown, "groups", "fit_group", listed)
    if undetermined(chosen):
        raise BreakevenError(
            "{0}: "
            + shown
            + " group "
            + escape_braces(group_name(chosen))
            + " has undetermined coefficients (no run of it gave a cycle: an accept_len with a "
            "rate); expected a group its runs determined (--fit-group: "
            + escape_braces(listed)
            + ")",
            "fit_file",
        )
    for name, value in chosen["coefficients"].items():
        least = -math.inf if name == "curvature_ms" else 0  # a concave curve's may be < 0
        if (names is not None and name not in names) or not (
            isinstance(value, (int, float)) and least <= value < math.inf
        ):
            raise BreakevenError(
                "{0}: "
                + shown
                + " has "
                + escape_braces(repr(name))
                + " = "
                + escape_braces(repr(value))
                + "; expected the coefficients "
                "of breakeven fit, each a finite number >= 0 [ms] (curvature_ms of any sign)",
                "fit_file",
            )
    return chosen


def _same(x: Any, like: Mapping[str, Any]) -> bool:
    return isinstance(x, dict) and all(
        str(x.get(key, "")) == str(like.get(key, "")) for key in IDENTITY
    )


def read_surface(
    path: str,
    index: int | None = None,
    like: Mapping[str, Any] | None = None,
    flag: str = "fit_surface",
) -> dict[str, Any]:
    """One forward surface of a fit file: the only one, number ``index`` (from 1, in the
    file's order, picked with ``flag``), or the one of the same model, hardware and method as
    ``like``.

    Returns
    -------
    dict
        ``model``, ``hardware``, ``spec_method`` (str); ``coefficients``, each of
        :data:`breakeven.core.quantities.SURFACE_TERM_UNITS` [ms];
        ``moe``, None or a dict of ``experts``, ``top_k`` and ``shared`` (int); ``baseline_steps``
        (pairs of batch [sequences] and measured step [ms], empty in older files); ``batches``,
        the batch sizes fitted [sequences].  :meth:`breakeven.model.surface.BatchSurface.from_dict`
        builds the surface.  ``measured_k``: the draft steps of its speculative runs
        [tokens] (from its ``points``; empty where the file keeps none).  ``interval_base``
        and ``interval_rate`` [fraction] (NaN in an older file) size its intervals; ``roof``
        (a mapping, or None) is its datasheet floor (:class:`breakeven.model.roof.Roof`).
    """
    shown = escape_braces(repr(str(path)))
    data = read_fit_json(path)
    surfaces = data.get("surfaces") if isinstance(data, dict) else None
    if not isinstance(surfaces, list) or not surfaces:
        raise BreakevenError(
            "{0}: " + shown + " holds no forward surface: fit runs whose "
            "baselines ran at two or more batch sizes",
            "fit_file",
        )
    if like is not None:
        surfaces = [x for x in surfaces if _same(x, like)]
        if not surfaces:
            raise BreakevenError(
                "{0}: "
                + shown
                + " holds no forward surface of "
                + escape_braces(group_name(like))
                + ": its baselines "
                "ran at one batch size",
                "fit_file",
            )
    x = _pick(surfaces, index, shown, "surfaces", flag)
    coefficients, moe = _coefficients_and_moe(x, shown)
    steps = _baseline_steps(x, shown)
    return {
        "model": str(x.get("model", "")),
        "hardware": str(x.get("hardware", "")),
        "spec_method": str(x.get("spec_method", "")),
        "coefficients": coefficients,
        "moe": moe,
        "batches": _batches(x.get("batches", []), shown),
        "baseline_steps": tuple(steps),
        "spec_batches": tuple(b for b in _listed(x.get("spec_batches")) if _whole(b) and b > 0),
        "held_out_max_rel_error": _error(x.get("held_out_max_rel_error")),
        "context_tokens": _error(x.get("context_tokens")),
        "measured_k": _steps_of(x.get("points")),
        "interval_base": _error(x.get("interval_base")),
        "interval_rate": _error(x.get("interval_rate")),
        "roof": x.get("roof") if isinstance(x.get("roof"), dict) else None,
    }


def _coefficients_and_moe(x: Any, shown: str) -> tuple[dict[str, float], dict[str, int] | None]:
    """A surface's coefficients [ms] and its ``moe`` (None for a dense model), checked (see
    :func:`read_surface`; ``shown``: the file's name as messages show it)."""
    try:
        coefficients = {name: float(x["coefficients"][name]) for name in SURFACE_TERM_UNITS}
    except (KeyError, TypeError, ValueError):
        raise BreakevenError(
            "{0}: " + shown + " has a surface without the coefficients of breakeven fit", "fit_file"
        ) from None
    if not all(0 <= v < math.inf for v in coefficients.values()):
        raise BreakevenError(
            "{0}: " + shown + " has a coefficient that is not a finite number >= 0 [ms]", "fit_file"
        )
    given = x.get("moe")
    if not given:
        return coefficients, None
    counts = [
        given.get(key, 0 if key == "shared" else None) if isinstance(given, dict) else None
        for key in ("experts", "top_k", "shared")
    ]
    if not all(_whole(n) for n in counts) or not (
        1 <= counts[1] <= counts[0] <= MAX_EXPERTS and 0 <= counts[2] <= MAX_EXPERTS
    ):
        raise BreakevenError(
            "{0}: "
            + shown
            + " has a surface's moe of "
            + escape_braces(shorten(repr(given)))
            + f"; expected an object of whole numbers, 1 <= top_k <= experts <= {MAX_EXPERTS:,} "
            f"and 0 <= shared <= {MAX_EXPERTS:,}, as fit --experts writes",
            "fit_file",
        )
    return coefficients, dict(zip(("experts", "top_k", "shared"), counts, strict=True))


def _baseline_steps(x: Any, shown: str) -> list[tuple[int, float]]:
    """A surface's ``baseline_steps``, pairs of batch [sequences] and step [ms], checked."""
    steps = x.get("baseline_steps") or []
    try:
        steps = [(int(b), float(t)) for b, t in steps]
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        steps = [(-1, math.nan)]
    if not all(b >= 1 and 0 < t < math.inf for b, t in steps):
        raise BreakevenError(
            "{0}: " + shown + " has baseline_steps that are not pairs of a batch size >= 1 "
            "[sequences] and a step > 0 [ms]",
            "fit_file",
        )
    return steps


def _listed(value: Any) -> list[Any]:
    """``value`` where it is a list, else an empty one (a part the file may leave out)."""
    return value if isinstance(value, list) else []


def _whole(value: Any) -> bool:
    """Whether ``value`` is a JSON whole number (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _batches(value: Any, shown: str) -> tuple[int, ...]:
    """A surface's ``batches``, the batch sizes fitted [sequences]: finite numbers > 0."""
    if not isinstance(value, list) or not all(
        isinstance(b, (int, float)) and not isinstance(b, bool) and 0 < b < math.inf for b in value
    ):
        raise BreakevenError(
            "{0}: "
            + shown
            + " has a surface's batches of "
            + escape_braces(shorten(repr(value)))
            + "; expected a list of batch sizes > 0 [sequences], as breakeven fit writes",
            "fit_file",
        )
    return tuple(value)


def _steps_of(points: Any) -> tuple[int, ...]:
    """The draft steps (k of a chain) of a surface's speculative runs [tokens], from its
    ``points``; empty where the file keeps none (then they are unknown)."""
    steps = {
        p.get("steps") for p in _listed(points) if isinstance(p, dict) and _whole(p.get("steps"))
    }
    return tuple(sorted(k for k in steps if k > 0))


def _error(value: Any) -> float | None:
    """A surface's held-out error [fraction] or context [tokens], None where it is not a
    finite number >= 0."""
    if isinstance(value, (int, float)) and 0 <= value < math.inf:
        return float(value)
    return None


def read_tree(path: str, index: int | None = None) -> dict[str, Any]:
    """One tree acceptance of a fit file: the only one, or number ``index`` (from 1, in the
    file's order; the ``--fit-group`` of ``optimize --tree``).

    Returns
    -------
    dict
        ``alpha`` [probability], ``rank_decay`` [fraction], ``basis`` (how they were found),
        ``model``, ``hardware`` and ``spec_method``.
        :meth:`breakeven.fitting.tree.TreeAcceptance.from_dict` builds the acceptance.
    """
    shown = escape_braces(repr(str(path)))
    data = read_fit_json(path)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, list) or not trees:
        raise BreakevenError(
            "{0}: " + shown + " holds no tree acceptance: fit runs with a tree "
            "draft among them (spec_topk > 1), or give --alpha and "
            "--rank-decay",
            "fit_file",
        )
    listed = "; ".join(
        f"{i} = {group_name(t) if isinstance(t, dict) else '?'}"
        for i, t in enumerate(trees, start=1)
    )
    x = _pick(trees, index, shown, "tree acceptances", "fit_group", listed)
    try:
        alpha, decay = float(x["alpha"]), float(x["rank_decay"])
    except (KeyError, TypeError, ValueError):
        raise BreakevenError(
            "{0}: " + shown + " has a tree acceptance without alpha and rank_decay", "fit_file"
        ) from None
    if not (0 <= alpha <= 1 and 0 <= decay <= 1 - alpha + 1e-9):
        raise BreakevenError(
            "{0}: " + shown + " has a tree acceptance with alpha outside [0, "
            "1] or rank_decay outside [0, 1 - alpha]",
            "fit_file",
        )
    return {
        "alpha": alpha,
        "rank_decay": decay,
        "basis": str(x.get("basis", "")),
        "model": str(x.get("model", "")),
        "hardware": str(x.get("hardware", "")),
        "spec_method": str(x.get("spec_method", "")),
    }


def read_fitted_alpha(path: str, like: Mapping[str, Any]) -> tuple[float, str]:
    """The per-token acceptance [probability] a fit file holds for the model, hardware and
    method of ``like``: a chain group's fitted alpha, else a tree acceptance's; and where it
    comes from, in words."""
    shown = escape_braces(repr(str(path)))
    data = read_fit_json(path)
    for key, what in (
        ("groups", "the fit's alpha of"),
        ("trees", "the tree acceptance's alpha of"),
    ):
        items = data.get(key) if isinstance(data, dict) else None
        for x in items if isinstance(items, list) else []:
            alpha = x.get("alpha") if isinstance(x, dict) else None
            if _same(x, like) and isinstance(alpha, (int, float)) and 0 <= alpha <= 1:
                return float(alpha), f"{what} {group_name(x)}"
    raise BreakevenError(
        "{0}: "
        + shown
        + " holds no alpha of "
        + escape_braces(group_name(like))
        + ": give the acceptance (--alpha, --per-position or "
        "--accept-len-by-k)",
        "fit_file",
    )


__all__ = [
    "IDENTITY",
    "group_name",
    "read_fit",
    "read_fit_json",
    "read_fitted_alpha",
    "read_surface",
    "read_tree",
    "undetermined",
]
