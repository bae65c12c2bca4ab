"""The draft's memory: how many sequences the KV cache holds with and without speculation
(issue 41, item 3).  Pure math, no I/O.

A draft model, or MTP heads, take GPU memory that the target's KV cache would otherwise
have: the engine sizes its cache from what is left after the weights (SGLang's
``profile_max_num_token``: ``rest_memory * 2^30 // cell_size``, cell_size the bytes of one
token's KV; vLLM's ``GPU KV cache size`` from the memory it profiled as free).  A real case:
SGLang with MTP on Qwen3.8-27B on one A100 80GB logs 934,545 cache tokens against 1,431,737
without (``benchmarks/data/published_batch/README.md``).

A sequence holds its context, ``tokens_per_sequence`` (prompt and output), in the cache; a
speculative one also holds slots for its drafts (:func:`draft_slots`): so the largest batch
that fits is ``capacity // (tokens_per_sequence + slots)`` (:func:`largest_batch`), smaller
with speculation on both counts.  Past that batch speculation cannot run at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from breakeven.core.errors import BreakevenError
from breakeven.model import _xp

GIB_BYTES = 1 << 30
"""Bytes in a GiB (engines log GPU memory in GiB: vLLM's ``format_gib``, SGLang's ``GB``
which is ``1 << 30`` bytes)."""
MAX_KV_TOKENS = 1 << 53
"""The largest token count taken: every whole number up to it is a double."""


def draft_slots(k: int, topk: int = 1, verify_tokens: int | None = None) -> int:
    """Cache slots a speculative sequence holds beyond its context in a cycle [tokens]: the
    ``verify_tokens - 1`` draft tokens verified (``k`` for a chain), and ``topk * k`` slots the
    next drafts are written to.

    vLLM's scheduler allocates ``num_new_tokens`` (the unverified draft tokens included) plus
    ``num_lookahead_tokens = num_speculative_tokens`` for EAGLE, MTP and draft models
    (``vllm/v1/core/sched/scheduler.py`` at vllm-project/vllm 00024d314514900f361ad072af6931e403b7f589,
    ``KVCacheManager.allocate_slots`` in ``vllm/v1/core/kv_cache_manager.py`` at
    003df2961dd8830c317a61f9745ccd557da9fa06: ``new + lookahead`` slots); SGLang's EAGLE
    worker allocates ``num_seqs * topk * speculative_num_steps`` slots for the drafts and
    ``speculative_num_draft_tokens`` per sequence for the verify.  A chain: ``2 k``.
    """
    verified = k if verify_tokens is None else verify_tokens - 1
    return verified + topk * k


def largest_batch(capacity_tokens: int, tokens_per_sequence: int, slots: int = 0) -> int:
    """The most sequences of ``tokens_per_sequence`` [tokens] a cache of ``capacity_tokens``
    [tokens] holds, each with ``slots`` [tokens] more (:func:`draft_slots`; 0: plain
    decoding) [sequences]: ``capacity // (tokens_per_sequence + slots)``."""
    return capacity_tokens // (tokens_per_sequence + slots)


@dataclass(frozen=True)
class KvRoom:
    """The KV cache with and without speculation, and the sequences each holds."""

    kv_tokens: int
    """Cache capacity without speculation [tokens]."""
    spec_kv_tokens: int
    """Cache capacity with the draft loaded [tokens]."""
    tokens_per_sequence: int
    """Each sequence's cached tokens, prompt and output [tokens]."""
    source: str
    """Where ``spec_kv_tokens`` came from, in words."""

    @property
    def max_batch_plain(self) -> int:
        """The most sequences without speculation [sequences]."""
        return largest_batch(self.kv_tokens, self.tokens_per_sequence)

    def max_batch_spec(self, k: int, topk: int = 1, verify_tokens: int | None = None) -> int:
        """The most sequences speculating at ``k`` [sequences]."""
        slots = draft_slots(k, topk, verify_tokens)
        return largest_batch(self.spec_kv_tokens, self.tokens_per_sequence, slots)

    def describe(self, k: int, topk: int = 1, verify_tokens: int | None = None) -> str:
        """Both capacities and both largest batches, at ``k``, as a sentence."""
        slots = draft_slots(k, topk, verify_tokens)
        return (
            f"the KV cache holds {self.kv_tokens:,} tokens without speculation and "
            f"{self.spec_kv_tokens:,} with the draft ({self.source}): at "
            f"{self.tokens_per_sequence:,} tokens per sequence, {self.max_batch_plain} "
            f"sequences without speculation and {self.max_batch_spec(k, topk, verify_tokens)} "
            f"with it at k = {k} ({slots} more slots each, for the drafts verified and the next "
            "ones)"
        )


def _tokens(name: str, value: Any) -> int:
    return _xp.count(name, value, MAX_KV_TOKENS)


def kv_room(
    kv_tokens: int,
    tokens_per_sequence: int,
    *,
    spec_kv_tokens: int | None = None,
    draft_memory_gib: float | None = None,
    kv_bytes_per_token: float | None = None,
) -> KvRoom:
    """The cache with and without speculation, checked.

    Parameters
    ----------
    kv_tokens : int  [tokens]
        The capacity without speculation, as the engine logs it (vLLM's ``GPU KV cache
        size``, SGLang's ``max_total_num_tokens``).
    tokens_per_sequence : int  [tokens]
        Each sequence's cached tokens (prompt and output).
    spec_kv_tokens : int, optional  [tokens]
        The capacity with speculation, as the engine logs it when launched with it.
    draft_memory_gib, kv_bytes_per_token : float, optional  [GiB], [bytes]
        Instead of ``spec_kv_tokens``: what the draft takes (weights, its own cache and
        graphs), and the target's KV per token; then ``spec_kv_tokens = kv_tokens -
        floor(draft_memory_gib * 2^30 / kv_bytes_per_token)``.
    """
    kv_tokens = _tokens("kv_tokens", kv_tokens)
    tokens_per_sequence = _tokens("tokens_per_sequence", tokens_per_sequence)
    if kv_tokens < tokens_per_sequence:
        raise BreakevenError(
            "{0}: got " + f"{kv_tokens:,}, expected at least one sequence of "
            f"{{1}} = {tokens_per_sequence:,} tokens",
            "kv_tokens",
            "tokens_per_sequence",
        )
    if spec_kv_tokens is not None:
        if draft_memory_gib is not None or kv_bytes_per_token is not None:
            raise BreakevenError(
                "give {0}, or {1} with {2}, not both",
                "spec_kv_tokens",
                "draft_memory_gib",
                "kv_bytes_per_token",
            )
        spec = _tokens("spec_kv_tokens", spec_kv_tokens)
        source = "as logged"
        if spec > kv_tokens:
            raise BreakevenError(
                "{0}: got " + f"{spec:,}, expected at most {{1}} = {kv_tokens:,}: the draft "
                "takes memory from the cache, it adds none",
                "spec_kv_tokens",
                "kv_tokens",
            )
    else:
        spec, source = _from_draft_memory(kv_tokens, draft_memory_gib, kv_bytes_per_token)
    if spec < tokens_per_sequence:
        if spec_kv_tokens is not None:
            what = "{0}: got " + f"{spec:,}, expected"
        else:
            what = "{0}: takes " + f"{kv_tokens - spec:,} of the {kv_tokens:,} cache tokens, "
            what += "expected to leave"
        raise BreakevenError(
            what + f" at least one sequence of {{1}} = {tokens_per_sequence:,} tokens",
            "spec_kv_tokens" if spec_kv_tokens is not None else "draft_memory_gib",
            "tokens_per_sequence",
        )
    return KvRoom(kv_tokens, spec, tokens_per_sequence, source)


def _from_draft_memory(
    kv_tokens: int, draft_memory_gib: float | None, kv_bytes_per_token: float | None
) -> tuple[int, str]:
    """The capacity with speculation from the draft's memory, and its source in words."""
    if draft_memory_gib is None or kv_bytes_per_token is None:
        raise BreakevenError(
            "give the capacity with speculation: {0}, or {1} with {2}",
            "spec_kv_tokens",
            "draft_memory_gib",
            "kv_bytes_per_token",
        )
    gib = float(_xp.positive(_xp.SCALAR, "draft_memory_gib", draft_memory_gib, "GiB"))
    per_token = float(_xp.positive(_xp.SCALAR, "kv_bytes_per_token", kv_bytes_per_token, "bytes"))
    taken = math.ceil(min(gib * GIB_BYTES / per_token, float(MAX_KV_TOKENS)))
    return kv_tokens - taken, f"{gib:g} GiB for the draft at {per_token:g} bytes per token"


__all__ = ["GIB_BYTES", "KvRoom", "draft_slots", "kv_room", "largest_batch"]
