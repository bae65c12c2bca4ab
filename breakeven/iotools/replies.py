"""What an OpenAI-compatible server says of one request in its reply: its token counts and its
drafts.  ``breakeven bench`` reads them from the streamed chunks; ``ingest`` from a saved reply
(format ``openai_reply``, :mod:`breakeven.iotools.bench_results`)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

MAX_COUNT = 10**15
"""The largest token or cycle count a reply may give: beyond it (a whole number of hundreds of
digits, say) no engine sent it, and a double would not hold it exactly."""


def count(value: Any) -> int | None:
    """A token count as a server may send it: a whole number from 0 to :data:`MAX_COUNT`, or
    its digits as text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isdigit() and len(text) <= 16 else None
    if isinstance(value, int) and 0 <= value <= MAX_COUNT:
        return value
    return None


class Drafts(NamedTuple):
    """What a server says of one request's drafts [tokens, cycles] (None where it does not)."""

    drafted: int | None = None
    accepted: int | None = None
    steps: int | None = None
    histogram: str | None = None
    k: int | None = None


def histogram_text(value: Any) -> str | None:
    """A per-request acceptance histogram (index j: the verify cycles that accepted j drafted
    tokens) as rows write it, its counts joined by ``;`` (None unless a list of counts)."""
    counts = [count(c) for c in value] if isinstance(value, list) else []
    return ";".join(map(str, counts)) if counts and None not in counts else None


def reply_drafts(chunk: Any) -> Drafts:
    """A request's drafts, from the ``timings`` llama.cpp's last chunk carries, the
    ``metrics.speculative_decoding`` of vLLM's last (usage) chunk, which a vLLM started with
    ``--per-request-spec-decode-metrics summary`` sends (vllm/v1/metrics/stats.py,
    ``RequestSpecDecodeMetrics.to_dict``), or the ``sglext.spec_tokens_details`` of the chunk
    SGLang sends before its usage chunk when asked with ``return_spec_tokens_details``
    (``breakeven.bench.session.Bench._payload``; sgl-project/sglang PR 33518)."""
    if not isinstance(chunk, dict):
        return Drafts()
    timings = chunk.get("timings")
    if isinstance(timings, dict):
        return Drafts(count(timings.get("draft_n")), count(timings.get("draft_n_accepted")))
    sglext = chunk.get("sglext")
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, list):  # one per choice where n > 1; bench asks for one
        details = details[0] if details else None
    if isinstance(details, dict):
        # SGLang's per-request counts (python/sglang/srt/entrypoints/openai/utils.py,
        # spec_tokens_details_from_meta_info, copies the meta_info that
        # python/sglang/srt/managers/tokenizer_manager.py _calculate_spec_decoding_metrics
        # fills): spec_num_proposed_drafts, the draft tokens put to verification
        # (spec_verify_ct x (speculative_num_draft_tokens - 1) at a fixed k);
        # spec_num_correct_drafts, those accepted (no bonus token); spec_verify_ct, the verify
        # forwards; spec_correct_drafts_histogram[j], the forwards that accepted j drafts.
        # SGLang's spec_accept_length is completion_tokens / spec_verify_ct (bonus token
        # included): 1 + accepted / steps where every token came from a verify forward, as
        # RequestResult.accept_len reckons it.
        return Drafts(
            count(details.get("spec_num_proposed_drafts")),
            count(details.get("spec_num_correct_drafts")),
            count(details.get("spec_verify_ct")),
            histogram_text(details.get("spec_correct_drafts_histogram")),
        )
    metrics = chunk.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(spec, dict):
        return Drafts()
    return Drafts(
        count(spec.get("num_draft_tokens")),
        count(spec.get("num_accepted_draft_tokens")),
        count(spec.get("num_spec_steps")),
        histogram_text(spec.get("acceptance_histogram")),
        count(spec.get("num_spec_tokens")),
    )


def per_position_from_histogram(counts: Any) -> tuple[float, ...]:
    """``a_1 ... a_k`` from cycles that accepted 0 ... k drafted tokens (summed over requests):
    ``a_i = sum(counts[i:]) / sum(counts)``; empty where no cycle is counted."""
    values = [float(c) for c in counts]
    total = math.fsum(values)
    if not total > 0:
        return ()
    # cycles that accepted i or more drafted tokens, for i = 1 ... k
    at_least = [math.fsum(values[i:]) for i in range(1, len(values))]
    return tuple(n / total for n in at_least)


__all__ = [
    "MAX_COUNT",
    "Drafts",
    "count",
    "histogram_text",
    "per_position_from_histogram",
    "reply_drafts",
]
