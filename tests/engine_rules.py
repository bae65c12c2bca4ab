"""How each engine reads a batch-size schedule, written from the engine's source, not from
breakeven's: the round-trip tests emit a config with breakeven and read it back with these.

vLLM, Dynamic SD: ``vllm/v1/spec_decode/dynamic/utils.py`` at vllm-project/vllm commit
a6f6bb1d3c1707ede85d03a7c7d47a105a1873fc (PR 32374, merged; ``validate_...`` and
``build_dynamic_sd_schedule_lookup``), the field declared in ``vllm/config/speculative.py``
as ``list[tuple[int, int, int]]``, and the scheduler's ``dynamic_sd_lookup[len(
num_scheduled_tokens)]`` (``vllm/v1/core/sched/scheduler.py``).  The error messages are
vLLM's.

Older vLLM: ``SpecDecodeWorker._should_disable_all_speculation`` in
``vllm/spec_decode/spec_decode_worker.py`` at commit
00b974dbffec005d4b6d379833e9f3c100dddd3e (PR 4592): ``running_queue_size >=
disable_by_batch_size``; ``vllm/config.py`` refused a threshold below 2.

SGLang, adaptive steps: ``python/sglang/srt/speculative/adaptive_spec_params.py`` at
sgl-project/sglang commit 015c872628e328b530880bcf95ae91222604b225 (integer-string keys, each
``{"candidate_steps": [non-negative ints]}``, other keys ignored) and
``adaptive_step_router.py`` at a12239f6ac74d804d169ee5d3cfed3c49fa7162c (a batch is rounded
up to the next CUDA-graph size, then the largest key at or below it is its slot).
"""

from __future__ import annotations

import bisect
import json
import shlex


class EngineRejects(ValueError):
    """The engine would refuse this configuration (the message is the engine's)."""


def vllm_parse_flags(flags: str) -> dict:
    """The speculative config of ``--speculative-config '<json>'``."""
    words = shlex.split(flags)
    if words[:1] != ["--speculative-config"] or len(words) != 2:
        raise EngineRejects(f"expected --speculative-config JSON, got {flags!r}")
    config = json.loads(words[1])
    if not isinstance(config, dict):
        raise EngineRejects("speculative config is not an object")
    return config


def vllm_validate(schedule) -> list[tuple[int, int, int]]:
    """vLLM's checks of ``num_speculative_tokens_per_batch_size``, then its sorted entries."""
    if not isinstance(schedule, list):
        raise EngineRejects(
            "num_speculative_tokens_per_batch_size must be a non-empty list of "
            "(range_start, range_end, num_speculative_tokens) entries."
        )
    if not schedule:
        raise EngineRejects("num_speculative_tokens_per_batch_size must not be empty.")
    parsed = []
    for entry in schedule:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise EngineRejects(
                "Each num_speculative_tokens_per_batch_size entry must be a "
                "3-item sequence: (range_start, range_end, "
                "num_speculative_tokens)."
            )
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
            raise EngineRejects("pydantic: entries must be integers")
        start, end, k = entry
        if start <= 0 or end <= 0:
            raise EngineRejects(f"Batch-size range ({start}, {end}) must be positive.")
        if start > end:
            raise EngineRejects(f"Batch-size range start must be <= end for ({start}, {end}, {k}).")
        if k < 0:
            raise EngineRejects("num_speculative_tokens_per_batch_size values must be >= 0.")
        parsed.append((start, end, k))
    parsed.sort(key=lambda e: e[0])
    previous_end = 0
    for start, end, _ in parsed:
        if start <= previous_end:
            raise EngineRejects("Batch-size ranges must be non-overlapping and sorted.")
        previous_end = end
    if parsed[0][0] != 1:
        raise EngineRejects(
            "The first batch-size range must start at 1 so every runtime "
            "batch size has a defined schedule."
        )
    return parsed


def vllm_lookup(config: dict, max_num_seqs: int) -> list[int]:
    """k at every batch size 0..max_num_seqs, as vLLM's dense lookup table has it."""
    k_max = config.get("num_speculative_tokens")
    if not isinstance(k_max, int) or k_max <= 0:
        raise EngineRejects(f"Expected num_speculative_tokens to be greater than zero ({k_max}).")
    if max_num_seqs <= 0:
        raise EngineRejects("vllm_max_batch_size must be > 0.")
    entries = vllm_validate(config["num_speculative_tokens_per_batch_size"])
    dense = [0] * (max_num_seqs + 1)
    next_batch, last_k = 1, None
    for start, end, k in entries:
        if start > next_batch and last_k is not None:  # a gap: the previous k carries on
            for b in range(next_batch, min(start - 1, max_num_seqs) + 1):
                dense[b] = min(k_max, last_k)
        for b in range(max(start, next_batch), min(end, max_num_seqs) + 1):
            dense[b] = min(k_max, k)
        next_batch = max(next_batch, end + 1)
        last_k = k
        if next_batch > max_num_seqs:
            break
    for b in range(next_batch, max_num_seqs + 1):  # the tail: the last k carries on
        dense[b] = min(k_max, last_k)
    return dense


def vllm_legacy_k(config: dict, running: int) -> int:
    """k older vLLM speculates with at ``running`` requests."""
    k = config["num_speculative_tokens"]
    n = config.get("disable_by_batch_size")
    if n is not None and n < 2:
        raise EngineRejects(
            "Expect the batch size threshold of disabling speculative decoding "
            f"is > 1, but got {n=}"
        )
    return 0 if n is not None and running >= n else k


def sglang_parse_flags(flags: str) -> dict:
    """SGLang's spec server args among ``flags`` (``--name value`` pairs, flags alone)."""
    words = shlex.split(flags)
    out, i = {}, 0
    while i < len(words):
        name = words[i].removeprefix("--").replace("-", "_")
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[name] = words[i + 1]
            i += 2
        else:
            out[name] = True
            i += 1
    return out


def sglang_slots(config: dict) -> dict[int, list[int]]:
    """SGLang's reading of an adaptive config: integer-string keys to candidate steps."""
    if not isinstance(config, dict):
        raise EngineRejects(f"speculative adaptive config must be a JSON object, got {config!r}")
    slots = {}
    for key, entry in config.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, int) and s >= 0 for s in steps)
        ):
            raise EngineRejects(
                f"BS {key}: candidate_steps must be a list of non-negative ints, got {steps!r}"
            )
        slots[int(key)] = steps
    if not slots:
        raise EngineRejects(
            "speculative_adaptive_config must contain at least one integer-string BS key"
        )
    return slots


def sglang_steps(config: dict, batch: int, cuda_graph_bs: list[int] | None) -> int:
    """The steps SGLang drafts with at ``batch`` (a one-candidate slot never moves)."""
    slots = sglang_slots(config)
    keys = sorted(slots)
    if cuda_graph_bs:
        graphs = sorted(cuda_graph_bs)
        i = bisect.bisect_left(graphs, batch)
        if i < len(graphs):
            batch = graphs[i]
    slot = keys[max(0, bisect.bisect_right(keys, batch) - 1)]
    steps = slots[slot]
    if len(steps) != 1:
        raise AssertionError("a fixed schedule has one candidate per slot")
    return steps[0]


def sglang_check_launch(args: dict, config: dict) -> None:
    """SGLang's launch checks for adaptive steps (``_init_adaptive_speculative_params``)."""
    if str(args.get("speculative_algorithm", "")).upper() not in ("EAGLE", "EAGLE3"):
        raise EngineRejects("speculative_adaptive disabled: only EAGLE/EAGLE3")
    if int(args.get("speculative_eagle_topk", 1)) != 1:
        raise EngineRejects("speculative_adaptive disabled: only topk=1 is supported")
    candidates = sorted({s for steps in sglang_slots(config).values() for s in steps})
    steps = int(args["speculative_num_steps"])
    if steps not in candidates:
        raise EngineRejects(
            f"--speculative-num-steps={steps} is not in the adaptive config "
            f"candidate_steps {candidates}. Pass one of those values."
        )


# SGLang's fixed-k launch: ``ServerArgs._handle_speculative_decoding`` (the EAGLE family's
# branch) in ``python/sglang/srt/server_args.py`` at sgl-project/sglang commit
# 015c872628e328b530880bcf95ae91222604b225, the choices of ``--speculative-algorithm`` in
# ``add_cli_args``.
SGLANG_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


def sglang_fixed_k(args: dict) -> tuple[tuple[int, int, int], list[str]]:
    """(steps, topk, draft tokens) as SGLang runs them, and the warnings it logs on the way:
    without --speculative-num-steps it chooses all three itself (and refuses topk or draft
    tokens given alone); with topk 1 it sets the draft tokens to steps + 1."""
    algorithm = str(args.get("speculative_algorithm", ""))
    if algorithm not in SGLANG_ALGORITHMS:
        raise EngineRejects(
            f"argument --speculative-algorithm: invalid choice: {algorithm!r} "
            f"(choose from {', '.join(SGLANG_ALGORITHMS)})"
        )
    if args.get("speculative_num_steps") is None:
        if (
            args.get("speculative_eagle_topk") is not None
            or args.get("speculative_num_draft_tokens") is not None
        ):
            raise EngineRejects("AssertionError")  # auto-choose asserts both are None
        return (3, 1, 4), []
    steps = int(args["speculative_num_steps"])
    topk = int(args.get("speculative_eagle_topk", 1))
    tokens = int(args.get("speculative_num_draft_tokens", steps + 1))
    warnings = []
    if topk == 1 and tokens != steps + 1:
        warnings.append(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1"
        )
        tokens = steps + 1
    return (steps, topk, tokens), warnings
