"""A schedule as each engine takes it: the configuration to paste, following the engine's rules.

Rules read in each engine's source (the tests check the output against validators written
from the same files):

- **vLLM, Dynamic SD** (PR 32374, and 45953 for full CUDA graphs; ``vllm/config/speculative.py``
  and ``vllm/v1/spec_decode/dynamic/utils.py``): ``speculative_config.
  num_speculative_tokens_per_batch_size`` is a list of ``[first, last, k]``, ranges inclusive,
  the first starting at 1, none overlapping (touching ends overlap); k >= 0 (0: no drafts);
  gaps take the previous range's k, batches past the last range its k, up to
  ``max_num_seqs``; a k above ``num_speculative_tokens`` is clamped to it, which must be > 0.
  The batch is the number of requests scheduled in a step.  (The PR's description shows a
  ``{"1-16": 3}`` dict; the code that shipped takes only the list.)
- **older vLLM** (``disable_by_batch_size``, PR 4592; ``vllm/spec_decode/spec_decode_worker.py``):
  one k, and no speculation once the running requests are >= N, with N >= 2; V0 only (V1
  ignored it, and PR 35060 removed it).
- **SGLang, adaptive steps** (PR 24055 and later; ``python/sglang/srt/speculative/
  adaptive_spec_params.py``, ``adaptive_step_router.py``): ``--speculative-adaptive
  --speculative-adaptive-config FILE.json``, the file mapping each range's first batch (a
  string of digits) to ``{"candidate_steps": [k]}``; a batch is rounded up to the next
  CUDA-graph batch size, then takes the largest key at or below it; one candidate fixes the
  steps (0: no drafting, in versions after PR 24055, whose key was ``steps``).  EAGLE and
  EAGLE3 with topk 1 only; ``--speculative-num-steps`` must be one of the candidates, and
  the verify takes steps + 1 tokens.
- **TensorRT-LLM, draft length by batch** (``tensorrt_llm/llmapi/llm_args.py``,
  ``DecodingBaseConfig.draft_len_schedule`` and ``validate_draft_len_schedule_and_sort``;
  ``tensorrt_llm/_torch/speculative/utils.py``, ``get_draft_len_for_batch_size``; docs
  ``docs/source/features/speculative-decoding.md`` at NVIDIA/TensorRT-LLM commit
  04c8822cc42ffd1f5b6270874e5b9a64a20e7a58): a dict of batch size to draft length, each key the
  *last* batch of its range (the first key >= the batch gives its length; above the largest key
  no drafting); lengths >= 0 (0: no drafts), none above ``max_draft_len``, and the smallest
  key's length equal to it.  ``trtllm-serve MODEL --extra_llm_api_options FILE`` (``--config``
  in newer releases) takes it in the YAML's ``speculative_config:``, with ``decoding_type``;
  the LLM API takes it as the speculative config's ``draft_len_schedule`` argument.  Older
  releases read the keys as each range's *first* batch (``bisect_right``, ``{1: ...}``
  required): the form here is the one the docs and the current source give.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from typing import Any

from breakeven.core.errors import BreakevenError

SCHEDULE_ENGINES = ("vllm", "sglang", "vllm-legacy", "trtllm")
"""The engines ``breakeven schedule`` writes for."""


def _speculates(plan: Any) -> bool:
    return any(r.k > 0 for r in plan.ranges)


def _vllm(plan: Any, base: dict[str, Any], max_num_seqs: int) -> dict[str, Any]:
    entries = [[r.first, r.last, r.k] for r in plan.ranges if r.first <= max_num_seqs]
    entries[-1][1] = max_num_seqs  # the schedule spans 1 to max_num_seqs
    config = {
        **base,
        "num_speculative_tokens": max(r.k for r in plan.ranges),
        "num_speculative_tokens_per_batch_size": entries,
    }
    text = json.dumps(config, separators=(", ", ": "))
    return {
        "config": config,
        "flags": f"--speculative-config {shlex.quote(text)}",
        "notes": [
            "vLLM ignores the schedule with data parallelism > 1 (it warns and falls "
            "back to num_speculative_tokens); with full CUDA graphs on the V1 model "
            "runner it switches to piecewise graphs"
        ],
    }


def _legacy(plan: Any, base: dict[str, Any]) -> dict[str, Any]:
    k = plan.ranges[0].k
    config = {**base, "num_speculative_tokens": k}
    flags = [f"--num-speculative-tokens {k}"]
    if len(plan.ranges) > 1:
        config["disable_by_batch_size"] = plan.ranges[1].first
        flags.append(f"--speculative-disable-by-batch-size {plan.ranges[1].first}")
    text = json.dumps(config, separators=(", ", ": "))
    return {
        "config": config,
        "flags": f"--speculative-config {shlex.quote(text)}",
        "notes": [
            "older vLLM (V0, before 0.10): the same as flags, "
            + " ".join(flags)
            + "; vLLM V1 ignores disable_by_batch_size"
        ],
    }


def _sglang(plan: Any, base: dict[str, Any], config_path: str | None) -> dict[str, Any]:
    file = {str(r.first): {"candidate_steps": [r.k]} for r in plan.ranges}
    steps = max(r.k for r in plan.ranges)
    algorithm = str(base.get("method") or "EAGLE3").upper()
    path = config_path or "adaptive_spec.json"
    flags = (
        f"--speculative-algorithm {shlex.quote(algorithm)} --speculative-eagle-topk 1 "
        f"--speculative-num-steps {steps} --speculative-adaptive "
        f"--speculative-adaptive-config {shlex.quote(path)}"
    )
    notes = (
        [
            "SGLang rounds each batch up to its next CUDA-graph batch size before it picks "
            "the steps: give --cuda-graph-sizes (the server's --cuda-graph-bs) so that the "
            "ranges are whole buckets"
        ]
        if not plan.graph_aligned
        else []
    )
    if any(r.k == 0 for r in plan.ranges):
        notes.append(
            "steps 0 (no drafting) needs an SGLang after PR 24055 (candidate_steps); "
            "PR 24055 itself took 'steps' and no 0"
        )
    return {"config": file, "flags": flags, "config_path": path, "notes": notes}


TRTLLM_DECODING_TYPE = {
    "eagle3": "Eagle3",
    "eagle": "Eagle3",
    "mtp": "MTP",
    "nextn": "MTP",
    "ngram": "NGram",
    "draft_model": "DraftTarget",
    "draft_target": "DraftTarget",
    "drafttarget": "DraftTarget",
    "standalone": "DraftTarget",
    "pard": "PARD",
    "dflash": "DFlash",
    "sa": "SA",
}
"""TensorRT-LLM's ``decoding_type`` for each drafting method's name as vLLM and breakeven write
it (``docs/source/features/speculative-decoding.md``: MTP, Eagle3, NGram, DraftTarget, PARD,
DFlash, SA; ``Eagle`` is an alias of Eagle3); a name not here is passed as given."""

TRTLLM_CONFIG_CLASS = {
    "Eagle3": "Eagle3DecodingConfig",
    "MTP": "MTPDecodingConfig",
    "NGram": "NGramDecodingConfig",
    "DraftTarget": "DraftTargetDecodingConfig",
    "PARD": "PARDDecodingConfig",
    "DFlash": "DFlashDecodingConfig",
    "SA": "SADecodingConfig",
}
"""The LLM API's speculative config class of each ``decoding_type`` (``tensorrt_llm.llmapi``)."""

TRTLLM_OPTIONS_FILE = "extra_llm_api_options.yaml"
"""Where ``trtllm-serve --extra_llm_api_options`` reads its YAML, unless told."""


def trtllm_speculative_config(k: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """TensorRT-LLM's ``speculative_config`` drafting ``k`` tokens: ``decoding_type`` (from
    ``base``'s ``method``, default Eagle3, or its own ``decoding_type``), ``max_draft_len`` k and
    ``speculative_model`` (``base``'s draft ``model``); the rest of ``base`` joins it as given."""
    rest = dict(base or {})
    method = str(rest.pop("method", None) or "eagle3")
    kind = rest.pop("decoding_type", None) or TRTLLM_DECODING_TYPE.get(method.lower(), method)
    model = rest.pop("model", None)
    config: dict[str, Any] = {"decoding_type": kind, "max_draft_len": k}
    if model and "speculative_model" not in rest and "speculative_model_dir" not in rest:
        config["speculative_model"] = str(model)
    return config | {key: v for key, v in rest.items() if key not in config}


_YAML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))  # a flow sequence: JSON is YAML
    return json.dumps(str(value))  # double-quoted: JSON's escapes are YAML's


def yaml_text(data: dict[Any, Any], indent: str = "") -> str:
    """``data`` (nested mappings of scalars and lists) as block YAML, every string
    double-quoted, integer keys left integers (``draft_len_schedule``'s keys are ints)."""
    lines = []
    for key, value in data.items():
        plain = isinstance(key, int) or _YAML_NAME.fullmatch(str(key))
        name = str(key) if plain else json.dumps(str(key))
        if isinstance(value, dict) and value:
            lines.append(f"{indent}{name}:")
            lines.append(yaml_text(value, indent + "  ").rstrip("\n"))
        else:
            lines.append(
                f"{indent}{name}: {'{}' if isinstance(value, dict) else _yaml_scalar(value)}"
            )
    return "\n".join(lines) + "\n"


def trtllm_python(config: dict[str, Any]) -> str:
    """The LLM API's form of a ``speculative_config``: its class called with the same fields
    (``LLM(model, speculative_config=...)``)."""
    fields = {key: v for key, v in config.items() if key != "decoding_type"}
    name = TRTLLM_CONFIG_CLASS.get(str(config["decoding_type"]), "DecodingBaseConfig")
    args = ", ".join(f"{key}={value!r}" for key, value in fields.items())
    return f"{name}({args})"


def _trtllm_out(speculative: dict[str, Any], config_path: str | None) -> dict[str, Any]:
    """The YAML, the flag that names it and the LLM API's call, for ``speculative``."""
    path = config_path or TRTLLM_OPTIONS_FILE
    return {
        "config": {"speculative_config": speculative},
        "flags": f"--extra_llm_api_options {shlex.quote(path)}",
        "config_path": path,
        "python": trtllm_python(speculative),
        "notes": [],
    }


def trtllm_draft_len_schedule(plan: Any, max_batch_size: int) -> dict[int, int]:
    """The schedule's ``draft_len_schedule``: each range's last batch (the last range's:
    ``max_batch_size``) to its k, trailing zeros left out (no key: no drafting).  TensorRT-LLM
    takes the smallest key's length as ``max_draft_len``, so a schedule whose k at batch 1 is
    not its largest has no form there (one line naming the engine says so)."""
    ranges = [r for r in plan.ranges if r.first <= max_batch_size]
    schedule = {r.last: r.k for r in ranges[:-1]}
    schedule[max_batch_size] = ranges[-1].k
    while schedule and schedule[max(schedule)] == 0:
        del schedule[max(schedule)]
    top = max(r.k for r in ranges)
    if ranges[0].k != top:
        peak = next(r for r in ranges if r.k == top)
        raise BreakevenError(
            "{0}: TensorRT-LLM's draft_len_schedule drafts its max_draft_len (the largest k) "
            f"at the smallest batches, but this schedule's k is {ranges[0].k} at batch "
            f"{ranges[0].first} and {top} at batches {peak.first}-{peak.last}: it has no "
            "TensorRT-LLM form (a larger --min-gain merges it, or run one k)",
            "engine",
        )
    return schedule


def _trtllm(plan: Any, base: dict[str, Any], limit: int, config_path: str | None) -> dict[str, Any]:
    schedule = trtllm_draft_len_schedule(plan, limit)
    speculative = trtllm_speculative_config(max(schedule.values()), base)
    speculative["draft_len_schedule"] = schedule
    out = _trtllm_out(speculative, config_path)
    if max(schedule) == limit:
        out["notes"].append(
            f"TensorRT-LLM drafts nothing above batch {limit}, the schedule's largest key: "
            "give --max-num-seqs the server's max_batch_size so that the last range reaches it"
        )
    return out


SPECULATION_ENGINES = ("vllm", "sglang", "llamacpp", "trtllm")
"""Engines whose fixed-k speculation flags :func:`speculation_args` writes."""


SGLANG_ALGORITHM = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "nextn": "NEXTN",
    "draft_model": "STANDALONE",
    "standalone": "STANDALONE",
    "ngram": "NGRAM",
}
"""SGLang's ``--speculative-algorithm`` for each drafting method's name as vLLM and breakeven
write it (``python/sglang/srt/server_args.py``: MTP heads run as NEXTN, a separate draft model
as STANDALONE)."""


def speculation_args(
    engine: str, k: int, base: dict[str, Any] | None = None, config_path: str | None = None
) -> list[str]:
    """The command-line arguments that make a server speculate with ``k`` draft tokens (a
    chain), as each engine reads them; none for k = 0 (the baseline).  ``base`` is the rest of
    the speculative config: its ``method`` and draft ``model``.

    - TensorRT-LLM: ``--extra_llm_api_options FILE``, ``config_path`` (default
      :data:`TRTLLM_OPTIONS_FILE`), the file holding :func:`trtllm_options_text` (``trtllm-serve``
      takes speculation only from that YAML: docs/source/features/speculative-decoding.md).

    - vLLM: ``--speculative-config JSON``, ``SpeculativeConfig``'s fields ``method``,
      ``model`` and ``num_speculative_tokens`` (``vllm/config/speculative.py``).
    - SGLang: ``--speculative-algorithm`` (upper case), ``--speculative-draft-model-path``,
      ``--speculative-num-steps k --speculative-eagle-topk 1
      --speculative-num-draft-tokens k+1``: a chain verifies k + 1 tokens
      (``python/sglang/srt/server_args.py``).
    - llama.cpp: ``--spec-type draft-simple --spec-draft-model PATH --spec-draft-n-max k
      --spec-draft-n-min 0`` (``common/arg.cpp``; the suite's llama-server runs them).
    """
    base = dict(base or {})
    if engine not in SPECULATION_ENGINES:
        raise BreakevenError(
            "{0}: got " + repr(engine) + f", expected one of {SPECULATION_ENGINES}", "engine"
        )
    if k == 0:
        return []
    if engine == "trtllm":
        return ["--extra_llm_api_options", config_path or TRTLLM_OPTIONS_FILE]
    if engine == "sglang":
        method = str(base.get("method") or "EAGLE3")
        algorithm = SGLANG_ALGORITHM.get(method.lower(), method.upper())
        args = ["--speculative-algorithm", algorithm]
        if base.get("model"):
            args += ["--speculative-draft-model-path", str(base["model"])]
        return [
            *args,
            *("--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"),
            *("--speculative-num-draft-tokens", str(k + 1)),
        ]
    if engine == "llamacpp":
        if not base.get("model"):
            raise BreakevenError("{0}: llama.cpp drafts with a draft model: give its path", "draft")
        return [
            *("--spec-type", "draft-simple", "--spec-draft-model", str(base["model"])),
            *("--spec-draft-n-max", str(k), "--spec-draft-n-min", "0"),
        ]
    config = {**base, "num_speculative_tokens": k}
    return ["--speculative-config", json.dumps(config, separators=(", ", ": "))]


def trtllm_options_text(k: int, base: dict[str, Any] | None = None) -> str:
    """The ``--extra_llm_api_options`` YAML that makes ``trtllm-serve`` draft ``k`` tokens."""
    return yaml_text({"speculative_config": trtllm_speculative_config(k, base)})


def _fixed(k: int, engine: str, base: dict[str, Any], config_path: str | None) -> dict[str, Any]:
    """One k at every batch: no schedule to configure."""
    note = "one range: the same k at every batch size, so no schedule is needed"
    if engine == "trtllm":
        out = _trtllm_out(trtllm_speculative_config(k, base), config_path)
        out["notes"].append(note)
        return out
    shape = "sglang" if engine == "sglang" else "vllm"  # vllm-legacy takes the same config
    flags = " ".join(shlex.quote(a) for a in speculation_args(shape, k, base))
    if engine == "sglang":
        return {"config": None, "flags": flags, "notes": [note]}
    return {"config": {**base, "num_speculative_tokens": k}, "flags": flags, "notes": [note]}


def render(
    plan: Any,
    engine: str,
    *,
    method: str | None = None,
    base_config: dict[str, Any] | None = None,
    max_num_seqs: int | None = None,
    config_path: str | None = None,
) -> dict[str, Any]:
    """The configuration of ``plan`` (a :class:`~breakeven.planning.schedule.Schedule`) for ``engine``:
    ``config`` (the object the engine reads), ``flags`` (the launch flags to paste),
    ``notes``; for SGLang and TensorRT-LLM also ``config_path``, where ``flags`` says the file
    is, and for TensorRT-LLM ``python``, the LLM API's speculative config.
    ``base_config`` is the speculative config the server runs already (its method, draft
    model), which the schedule's keys join; ``max_num_seqs`` is where vLLM's last range ends
    (default: the largest batch swept)."""
    if engine not in SCHEDULE_ENGINES:
        raise BreakevenError(
            "{0}: got " + repr(engine) + f", expected one of {SCHEDULE_ENGINES}", "engine"
        )
    base = dict(base_config or {})
    if method is not None:
        base["method"] = method
    if not _speculates(plan):
        return {
            "config": None,
            "flags": "",
            "notes": ["no k beats plain decoding at any batch swept: launch without speculation"],
        }
    limit = plan.max_batch if max_num_seqs is None else max_num_seqs
    if len(plan.ranges) == 1:
        return _fixed(plan.ranges[0].k, engine, base, config_path)
    if engine == "vllm":
        out = _vllm(plan, base, limit)
    elif engine == "trtllm":
        out = _trtllm(plan, base, limit, config_path)
    elif engine == "vllm-legacy":
        out = _legacy(plan, base)
    else:
        out = _sglang(plan, base, config_path)
    if "method" not in base and "decoding_type" not in base and engine != "sglang":
        out["notes"].append(
            "add your method and draft model to the config (--spec-method, or "
            "--base-config with the config you run)"
        )
    return out


def engine_shape(engine: str) -> str:
    """The schedule shape an engine takes (:data:`breakeven.planning.schedule.SHAPES`)."""
    return "threshold" if engine == "vllm-legacy" else "ranges"


__all__: Sequence[str] = (
    "SCHEDULE_ENGINES",
    "SGLANG_ALGORITHM",
    "SPECULATION_ENGINES",
    "TRTLLM_CONFIG_CLASS",
    "TRTLLM_DECODING_TYPE",
    "TRTLLM_OPTIONS_FILE",
    "engine_shape",
    "render",
    "speculation_args",
    "trtllm_draft_len_schedule",
    "trtllm_options_text",
    "trtllm_python",
    "trtllm_speculative_config",
    "yaml_text",
)
