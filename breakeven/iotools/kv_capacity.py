"""The KV cache capacity a server logs at start-up, for ``batch`` and ``schedule``'s
``--kv-tokens LOG`` and ``--spec-kv-tokens LOG`` (:mod:`breakeven.model.memory`).

The lines, as the engines print them (each read in the engine's source):

- vLLM: ``GPU KV cache size: 1,234,560 tokens`` (``_report_kv_cache_config`` in
  ``vllm/v1/core/kv_cache_utils.py``, ``logger.info_once("GPU KV cache size: %s tokens",
  f"{num_tokens:,}")``, vllm-project/vllm 001cabc1be16a59a70d720ed61a13b678c060a18), beside
  ``Maximum concurrency for 2,048 tokens per request: 12.34x``, which is that capacity over
  ``max_model_len``;
- SGLang: ``max_total_num_tokens=934545, ...`` (the scheduler's start-up line) and ``KV Cache
  is allocated. #tokens: 934545, K size: ... GB, V size: ... GB`` (``KV size`` for MLA; the
  memory pool's ``__init__`` in ``python/sglang/srt/mem_cache/memory_pool.py``).  With
  speculation SGLang's draft worker logs its own pool of the same size
  (``draft_runner_cache_size``, ``model_runner_kv_cache_mixin.py`` at sgl-project/sglang
  001ccef0072a4537d4ec6bdd50a73e6feb2c907d, whose ``profile_max_num_token`` sizes the pool as
  ``rest_memory * 2^30 // cell_size``), so
  ``max_total_num_tokens`` is read first.

Each rank of a tensor-parallel server logs the same line; a log of several launches gives its
last launch's.
"""

from __future__ import annotations

import os
import re

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces
from breakeven.iotools.sources import Block, iter_blocks, open_input

CAPACITY_LINES = (
    ("vLLM", re.compile(rb"GPU KV cache size: ([0-9][0-9,]*) tokens")),
    ("SGLang", re.compile(rb"max_total_num_tokens=([0-9]+)")),
    ("SGLang", re.compile(rb"KV Cache is allocated\. #tokens: ([0-9]+)")),
)
"""The lines that give the capacity, each with its engine, in the order they are believed."""


def read_kv_capacity(path: str | os.PathLike[str], name: str = "kv_tokens") -> tuple[int, str]:
    """The KV cache capacity [tokens] a server's log gives, and the line it came from.

    Parameters
    ----------
    path : str
        A vLLM or SGLang server log (compressed or not).
    name : str
        The argument that named it, for messages.

    Returns
    -------
    tokens : int  [tokens]
    line : str
        Which engine's line, e.g. ``"vLLM's 'GPU KV cache size'"``.
    """
    path = os.fspath(path)
    last: list[bytes | None] = [None] * len(CAPACITY_LINES)
    try:
        source = open_input(path)
    except UnreadableInput as e:
        raise BreakevenError("{0}: " + escape_braces(f"{path}: ") + e.template, name) from None
    try:
        for block in iter_blocks(source):
            if not isinstance(block, Block):
                continue  # a binary tail or an over-long line: the lines before still count
            for i, (_, pattern) in enumerate(CAPACITY_LINES):
                found = pattern.findall(block.data)
                if found:
                    last[i] = found[-1]
    finally:
        source.close()
    for (engine, pattern), value in zip(CAPACITY_LINES, last, strict=True):
        if value is not None:
            words = pattern.pattern.decode().split("(")[0].rstrip(" =:#").replace("\\", "")
            return int(value.replace(b",", b"")), f"{engine}'s {words!r}"
    raise BreakevenError(
        "{0}: "
        + escape_braces(
            f"{path} logs no KV cache capacity: expected vLLM's 'GPU KV cache size: N tokens' "
            "or SGLang's 'max_total_num_tokens=N' or 'KV Cache is allocated. #tokens: N'"
        ),
        name,
    )


__all__ = ["CAPACITY_LINES", "read_kv_capacity"]
