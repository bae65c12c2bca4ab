"""Schedule files (``breakeven schedule --json > FILE``) read back, for ``check`` and ``compare
--schedule``: the schedule's k and predicted speedup at every batch it swept.  Every problem is
one line naming ``--schedule``."""

from __future__ import annotations

import math
from typing import Any

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.sources import read_whole


def read_schedule(path: str) -> list[dict[str, Any]]:
    """The ``by_batch`` rows (``batch``, ``k``, ``speedup``, and ``speedup_low`` and
    ``speedup_high`` where a fit file sized them) of a ``schedule --json`` file."""

    shown = escape_braces(repr(str(path)))
    try:
        text = read_whole(path)
    except (UnreadableInput, OSError) as e:
        raise BreakevenError(
            "{0}: cannot read " + shown + ": " + escape_braces(str(e)), "schedule_file"
        ) from None
    try:
        data = loads_bounded(text, what="its text")
    except ValueError as e:
        raise BreakevenError(
            "{0}: " + shown + " is not JSON (" + escape_braces(str(e)) + "); "
            "expected what breakeven schedule --json prints",
            "schedule_file",
        ) from None
    rows = data.get("by_batch") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise BreakevenError(
            "{0}: " + shown + " is not a schedule: expected the object "
            "breakeven schedule --json prints, with its by_batch rows",
            "schedule_file",
        )
    for x in rows:
        ok = isinstance(x, dict) and all(_finite(x.get(key)) for key in ("batch", "k", "speedup"))
        ranged = [x.get(key) for key in ("speedup_low", "speedup_high")] if ok else []
        if any(v is not None for v in ranged):
            ok = all(map(_finite, ranged)) and 0 <= ranged[0] <= ranged[1]
        if not ok or x["batch"] < 1 or x["k"] < 0 or x["speedup"] < 0:
            raise BreakevenError(
                "{0}: "
                + shown
                + " has a by_batch row "
                + escape_braces(repr(x)[:80])
                + "; expected batch >= 1, k >= 0 "
                "and a speedup >= 0 (with speedup_low <= speedup_high where given)",
                "schedule_file",
            )
    return rows


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite JSON number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
