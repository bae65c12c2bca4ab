"""Fit files (``breakeven fit --out FIT.json``) read back: a group of the cycle by k for
``predict`` and ``optimize --fit-file``, a forward surface for ``batch --fit-file``.  Every
problem is one line naming ``--fit-file`` (or the flag that picks an entry)."""

from __future__ import annotations

import math
from typing import Any

from breakeven.errors import BreakevenError, escape_braces


def load_fit_json(path: str) -> Any:
    """A fit file's JSON, refused in one line naming ``fit_file`` (unreadable, not JSON)."""
    import json

    from breakeven.iotools.sources import read_whole

    shown = escape_braces(repr(str(path)))
    try:
        text = read_whole(path)
    except (OSError, ValueError) as e:
        raise BreakevenError(
            "{0}: cannot read " + shown + ": " + escape_braces(str(e)), "fit_file"
        ) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
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


def _group_name(g: dict[str, Any]) -> str:
    parts = [str(g.get(key) or "") for key in ("model", "hardware", "spec_method")]
    return " ".join(p for p in parts if p) or "unnamed"


def read_fit(path: str, group: int | None = None) -> dict[str, Any]:
    """One group of a fit file: the only one, or number ``group`` (from 1, in the file's
    order)."""
    from breakeven.fit import COEFFICIENTS

    shown = escape_braces(repr(str(path)))
    data = load_fit_json(path)
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
    listed = "; ".join(f"{i} = {_group_name(g)}" for i, g in enumerate(groups, start=1))
    chosen = _pick(groups, group, shown, "groups", "fit_group", listed)
    for name, value in chosen["coefficients"].items():
        if name not in COEFFICIENTS or not (
            isinstance(value, (int, float)) and 0 <= value < math.inf
        ):
            raise BreakevenError(
                "{0}: "
                + shown
                + " has "
                + escape_braces(repr(name))
                + " = "
                + escape_braces(repr(value))
                + "; expected the coefficients "
                "of breakeven fit, each a finite number >= 0 [ms]",
                "fit_file",
            )
    return chosen


def _same(x: Any, like: Any) -> bool:
    return isinstance(x, dict) and all(
        str(x.get(key, "")) == str(getattr(like, key, ""))
        for key in ("model", "hardware", "spec_method")
    )


def read_surface(
    path: str, index: int | None = None, like: Any = None, flag: str = "fit_surface"
) -> Any:
    """One forward surface of a fit file (a :class:`breakeven.surface.BatchSurface`): the
    only one, number ``index`` (from 1, in the file's order, picked with ``flag``), or the
    one of the same model, hardware and method as ``like`` (a tree acceptance)."""
    from breakeven.surface import TERMS, BatchSurface, MoE

    shown = escape_braces(repr(str(path)))
    data = load_fit_json(path)
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
                + escape_braces(_group_name(vars(like)))
                + ": its baselines "
                "ran at one batch size",
                "fit_file",
            )
    x = _pick(surfaces, index, shown, "surfaces", flag)
    try:
        coefficients = {name: float(x["coefficients"][name]) for name in TERMS}
        moe = (
            MoE(int(x["moe"]["experts"]), int(x["moe"]["top_k"]), int(x["moe"].get("shared", 0)))
            if x.get("moe")
            else None
        )
    except (KeyError, TypeError, ValueError):
        raise BreakevenError(
            "{0}: " + shown + " has a surface without the coefficients of breakeven fit", "fit_file"
        ) from None
    if not all(0 <= v < math.inf for v in coefficients.values()):
        raise BreakevenError(
            "{0}: " + shown + " has a coefficient that is not a finite number >= 0 [ms]", "fit_file"
        )
    return BatchSurface(
        str(x.get("model", "")),
        str(x.get("hardware", "")),
        str(x.get("spec_method", "")),
        coefficients,
        (),
        moe,
        math.nan,
        (),
        math.nan,
        tuple(x.get("batches", ())),
    )


def read_tree(path: str, index: int | None = None) -> Any:
    """One tree acceptance of a fit file (a :class:`breakeven.tree.TreeAcceptance`): the only
    one, or number ``index`` (from 1, in the file's order; the ``--fit-group`` of
    ``optimize --tree``)."""
    from breakeven.tree import TreeAcceptance

    shown = escape_braces(repr(str(path)))
    data = load_fit_json(path)
    trees = data.get("trees") if isinstance(data, dict) else None
    if not isinstance(trees, list) or not trees:
        raise BreakevenError(
            "{0}: " + shown + " holds no tree acceptance: fit runs with a tree "
            "draft among them (spec_topk > 1), or give --alpha and "
            "--rank-decay",
            "fit_file",
        )
    listed = "; ".join(
        f"{i} = {_group_name(t) if isinstance(t, dict) else '?'}"
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
    return TreeAcceptance(
        alpha,
        decay,
        str(x.get("basis", "")),
        model=str(x.get("model", "")),
        hardware=str(x.get("hardware", "")),
        spec_method=str(x.get("spec_method", "")),
    )


def fitted_alpha(path: str, like: Any) -> tuple[float, str]:
    """The per-token acceptance a fit file holds for the model, hardware and method of
    ``like`` (a surface): a chain group's fitted alpha, else a tree acceptance's; and where it
    comes from, in words."""
    shown = escape_braces(repr(str(path)))
    data = load_fit_json(path)
    for key, what in (
        ("groups", "the fit's alpha of"),
        ("trees", "the tree acceptance's alpha of"),
    ):
        items = data.get(key) if isinstance(data, dict) else None
        for x in items if isinstance(items, list) else []:
            alpha = x.get("alpha") if isinstance(x, dict) else None
            if _same(x, like) and isinstance(alpha, (int, float)) and 0 <= alpha <= 1:
                return float(alpha), f"{what} {_group_name(x)}"
    raise BreakevenError(
        "{0}: "
        + shown
        + " holds no alpha of "
        + escape_braces(_group_name(vars(like)))
        + ": give the acceptance (--alpha, --per-position or "
        "--accept-len-by-k)",
        "fit_file",
    )
