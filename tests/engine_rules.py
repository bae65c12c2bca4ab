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


# TensorRT-LLM, draft length by batch size: ``DecodingBaseConfig`` in
# ``tensorrt_llm/llmapi/llm_args.py`` (``max_draft_len: Optional[NonNegativeInt]``,
# ``draft_len_schedule: Optional[dict[int, int]]`` and its ``validate_draft_len_schedule_and_sort``),
# ``get_draft_len_for_batch_size`` in ``tensorrt_llm/_torch/speculative/utils.py`` (the first key
# at or above the batch gives its draft length; above the largest key, 0), NVIDIA/TensorRT-LLM
# main as the code index holds it (December 2026; the index does not give that file's commit),
# and the YAML of ``docs/source/features/speculative-decoding.md`` at commit
# 04c8822cc42ffd1f5b6270874e5b9a64a20e7a58 (``speculative_config:`` with ``decoding_type``).
# The error messages are TensorRT-LLM's.
TRTLLM_DECODING_TYPES = ("MTP", "Eagle3", "Eagle", "NGram", "DraftTarget", "PARD", "DFlash", "SA")


def trtllm_load_options(text: str) -> dict:
    """The ``speculative_config`` of an ``--extra_llm_api_options`` file, read as trtllm-serve
    reads it (``yaml.safe_load``)."""
    import yaml  # lazy: only the TensorRT-LLM round trips read YAML

    options = yaml.safe_load(text)
    if not isinstance(options, dict) or not isinstance(options.get("speculative_config"), dict):
        raise EngineRejects(f"no speculative_config mapping in {options!r}")
    spec = options["speculative_config"]
    if spec.get("decoding_type") not in TRTLLM_DECODING_TYPES:
        raise EngineRejects(f"Invalid decoding type: {spec.get('decoding_type')}")
    return spec


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def trtllm_validate(spec: dict) -> dict[int, int] | None:
    """TensorRT-LLM's checks of ``max_draft_len`` and ``draft_len_schedule``, then the schedule
    sorted by key (None: no schedule)."""
    max_draft_len = spec.get("max_draft_len")
    if max_draft_len is not None and (not _int(max_draft_len) or max_draft_len < 0):
        raise EngineRejects("max_draft_len: Input should be greater than or equal to 0")
    v = spec.get("draft_len_schedule")
    if v is None:
        return None
    if not isinstance(v, dict) or not all(_int(a) and _int(b) for a, b in v.items()):
        raise EngineRejects("draft_len_schedule: Input should be a valid dictionary of int to int")
    for batch_size, draft_len in v.items():
        if batch_size < 1:
            raise EngineRejects(
                f"draft_len_schedule: batch size threshold must be >= 1, got {batch_size}"
            )
        if draft_len < 0:
            raise EngineRejects(f"draft_len_schedule: draft length must be >= 0, got {draft_len}")
    smallest = min(v)
    if max_draft_len is not None and v[smallest] != max_draft_len:
        raise EngineRejects(
            f"draft_len_schedule[{smallest}] must equal max_draft_len because it is the smallest "
            f"batch-size key. Got schedule[{smallest}]={v[smallest]}, but "
            f"max_draft_len={max_draft_len}."
        )
    if max_draft_len is not None:
        for batch_size, draft_len in v.items():
            if draft_len > max_draft_len:
                raise EngineRejects(
                    "draft_len_schedule: all draft lengths must be <= max_draft_len. Got "
                    f"draft_len={draft_len} for batch_size={batch_size}, but "
                    f"max_draft_len={max_draft_len}."
                )
    return dict(sorted(v.items()))


def trtllm_draft_len(schedule: dict[int, int] | None, batch_size: int, max_draft_len: int) -> int:
    """The draft length TensorRT-LLM runs at ``batch_size`` (``get_draft_len_for_batch_size``)."""
    if schedule is None:
        return max_draft_len
    keys = list(schedule)
    idx = bisect.bisect_left(keys, batch_size)
    return schedule[keys[idx]] if idx < len(keys) else 0
