"""The KV cache with and without speculation, from ``batch`` and ``schedule``'s arguments:
numbers, or the server logs that print them (:mod:`breakeven.iotools.kv_capacity`), made
into a :class:`breakeven.model.memory.KvRoom`.

Every problem is a :class:`breakeven.core.errors.BreakevenError` naming the Python arguments;
the command line spells them as its flags.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from breakeven.core.errors import BreakevenError, invalid_value
from breakeven.model.memory import KvRoom, kv_room

KV_INPUTS = (
    "kv_tokens",
    "spec_kv_tokens",
    "draft_memory_gib",
    "kv_bytes_per_token",
    "tokens_per_sequence",
)
"""The arguments that describe the cache (each optional; ``kv_tokens`` needed with any)."""

_DIGITS = re.compile(r"[0-9][0-9,_]*")
_NUMBERISH = re.compile(r"[-+]?([0-9.,_]+([eE][-+]?[0-9]+)?|nan|inf(inity)?)", re.IGNORECASE)


def capacity(name: str, value: Any) -> int | None:
    """A capacity [tokens] given as a number (``934545``, ``1,431,737``), or read from the
    server log ``value`` names (:func:`breakeven.iotools.kv_capacity.read_kv_capacity`);
    None stays None.  A number's range is checked by :func:`breakeven.model.memory.kv_room`."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    text = str(value).strip()
    if _DIGITS.fullmatch(text):
        return int(text.replace(",", "").replace("_", ""))
    if isinstance(value, (bool, float)) or _NUMBERISH.fullmatch(text):
        raise invalid_value(name, value, "a whole number of tokens >= 1, or a server log")
    from breakeven.iotools.kv_capacity import read_kv_capacity  # lazy: start-up

    return read_kv_capacity(text, name)[0]


def kv_room_of(
    *,
    kv_tokens: Any = None,
    spec_kv_tokens: Any = None,
    draft_memory_gib: float | None = None,
    kv_bytes_per_token: float | None = None,
    tokens_per_sequence: int | None = None,
    context: int | None = None,
) -> KvRoom | None:
    """The cache a sweep is bounded by (:func:`breakeven.model.memory.kv_room`); None where
    none of :data:`KV_INPUTS` is given.

    Parameters
    ----------
    kv_tokens, spec_kv_tokens : int or str, optional  [tokens]
        The capacity without and with speculation: a number, or a server log that prints it.
    draft_memory_gib, kv_bytes_per_token : float, optional  [GiB], [bytes]
        Instead of ``spec_kv_tokens``: what the draft takes, and the target's KV per token
        (or the model's ``config.json``, :func:`per_token_bytes`).
    tokens_per_sequence : int, optional  [tokens]
        Each sequence's cached tokens; by default ``context``, the context a fit file's costs
        are priced at.
    """
    given: Sequence[tuple[str, Any]] = [
        ("kv_tokens", kv_tokens),
        ("spec_kv_tokens", spec_kv_tokens),
        ("draft_memory_gib", draft_memory_gib),
        ("kv_bytes_per_token", kv_bytes_per_token),
        ("tokens_per_sequence", tokens_per_sequence),
    ]
    named = [name for name, value in given if value is not None]
    if not named:
        return None
    if kv_tokens is None:
        raise BreakevenError(
            "{0} needs {1}: the KV cache capacity without speculation [tokens]",
            named[0],
            "kv_tokens",
        )
    per_sequence = tokens_per_sequence if tokens_per_sequence is not None else context
    if per_sequence is None:
        raise BreakevenError(
            "{0} needs {1} (or {2}): each sequence's cached tokens, prompt and output",
            "kv_tokens",
            "tokens_per_sequence",
            "context",
        )
    return kv_room(
        capacity("kv_tokens", kv_tokens),
        per_sequence,
        spec_kv_tokens=capacity("spec_kv_tokens", spec_kv_tokens),
        draft_memory_gib=draft_memory_gib,
        kv_bytes_per_token=per_token_bytes(kv_bytes_per_token),
    )


def per_token_bytes(value: Any) -> float | None:
    """The target's KV cache per token [bytes]: a number, or the model's ``config.json``
    (:attr:`breakeven.model.roofline.ModelShape.kv_bytes_per_token`, a 16-bit cache); None
    stays None.  A number's range is checked by :func:`breakeven.model.memory.kv_room`."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    text = str(value).strip()
    if _NUMBERISH.fullmatch(text):
        try:
            return float(text.replace(",", "").replace("_", ""))
        except ValueError:
            raise invalid_value(
                "kv_bytes_per_token", value, "a number of bytes > 0, or a config.json"
            ) from None
    from breakeven.iotools.modelconfig import read_model_config  # lazy: start-up

    return read_model_config(text, flag="kv_bytes_per_token").kv_bytes_per_token


__all__: Sequence[str] = ("KV_INPUTS", "capacity", "kv_room_of", "per_token_bytes")
