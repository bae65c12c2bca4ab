"""k and the record's note for a printed ``vllm bench serve`` result table (issue 44).

The table's Speculative Decoding section prints ``Drafts`` (verify steps that drafted) and
``Draft tokens`` (tokens drafted), then one ``Position i`` row per draft position, k of them
(``spec_decode_per_position_acceptance_rates``, one a speculative token).  A table pasted
into an issue, a note or a chat is often cut: its last rows, and its closing ``====`` rule,
are lost.  Counting the Position rows that survived would then give a k too small; every
draft of vLLM's proposers but n-gram and suffix decoding has k tokens, so ``Draft tokens /
Drafts`` gives k exactly where it is a whole number.  A table without its closing rule says
in the record's note after which row it was cut, and what that cost.
"""

from __future__ import annotations

import math
from typing import Any


def cut_note(table: dict[str, Any]) -> str | None:
    """What a table read without its closing rule (``table['_closed']`` False) lost: the
    rows after the last one read (``table['_last']``)."""
    last = table.get("_last")
    if last is None:
        return "result table cut right after its title: its rows are lost"
    return f"result table cut after its '{last}' row (no closing rule): the rows after it are lost"


def _whole(drafts: float, drafted: float) -> int | None:
    """``drafted / drafts`` where it is a whole number > 0, else None (NaN: not printed)."""
    if not (drafts > 0 and drafted > 0):
        return None
    ratio = drafted / drafts
    k = round(ratio)
    return k if k > 0 and math.isclose(ratio, k, rel_tol=1e-9) else None


def spec_counts(
    table: dict[str, Any], drafts: float, drafted: float, per_position: list[float] | None
) -> tuple[int | None, str | None]:
    """k of a table's Speculative Decoding section, and a note where its Position rows do not
    tell k by themselves (see the module).  ``drafts`` and ``drafted`` are the Drafts and
    Draft tokens rows (NaN where not printed); ``table['_closed']`` is False for a table read
    without its closing rule (a JSON result has no such key: it is whole)."""
    printed = len(per_position) if per_position else 0
    cut = table.get("_closed") is False
    k = _whole(drafts, drafted)
    counts = f"Draft tokens / Drafts = {drafted:g} / {drafts:g}"
    if k is not None and k >= printed:
        if printed < k and (cut or printed):
            why = "the table was cut" if cut else "the other rows were left out"
            return k, (
                f"per-position rates for {printed} of k = {k} positions ({why}); "
                f"k is {counts}, not the Position rows printed"
            )
        return k, None
    if not cut:
        return (printed or None), None
    if math.isnan(drafts) or math.isnan(drafted):
        why = "its Drafts and Draft tokens rows are lost"
    elif k is not None:
        why = f"{counts} is less than the Position rows (drafts shorter than k)"
    else:
        why = f"{counts} is no whole number (drafts shorter than k)"
    return None, f"k not told: the table was cut after {printed} Position rows and {why}"
