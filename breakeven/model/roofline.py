"""The pure roofline prior: how long one target forward takes at best, from the model's shape
(its Hugging Face ``config.json``) and the accelerator's datasheet.

Pure math, no I/O (stdlib only).  The cost model the fit refines is

    t(B, q) = overhead + max(memory bytes / (bandwidth * eta_m), FLOPs / (peak * eta_c))

and this module gives its prior terms at eta = 1, each in milliseconds at the aggregate
bandwidth and peak of the devices a run used (:func:`roofline_prior`):

* ``weights_ms``: the bytes every forward reads however many tokens it carries (attention,
  dense MLPs, shared experts, routers, norms and the LM head) over the bandwidth;
* ``expert_ms``: the bytes of ONE routed expert summed over all MoE layers: a forward whose
  tokens route to E distinct experts per layer reads ``E * expert_ms`` more;
* ``kv_ms_per_sequence``: one sequence's cached keys and values at ``context_tokens``;
* ``compute_ms_per_token``: 2 x active parameters FLOPs per token over the peak at the
  weights' compute dtype (attention over the context excluded; its per-cached-token FLOPs are
  :attr:`ModelShape.attention_flops_per_token_per_context`).

Units: bytes, FLOPs, GB/s (1e9 bytes a second), TFLOPs (1e12 FLOPs a second), milliseconds.
The accelerators (:data:`ACCELERATORS`, :func:`accelerator_of`) live in
:mod:`breakeven.model.accelerators` and are named here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces, shorten
from breakeven.model.accelerators import ACCELERATORS, Accelerator, accelerator_of

__all__ = [
    "ACCELERATORS",
    "Accelerator",
    "ModelShape",
    "RooflinePrior",
    "accelerator_of",
    "model_shape",
    "roofline_prior",
]

_DTYPE_BYTES = {
    "float32": (4.0, "fp32"),
    "float": (4.0, "fp32"),
    "bfloat16": (2.0, "bf16"),
    "float16": (2.0, "fp16"),
    "half": (2.0, "fp16"),
    "float8_e4m3fn": (1.0, "fp8"),
    "float8_e5m2": (1.0, "fp8"),
}
"""A ``torch_dtype`` / ``dtype`` name: its bytes per weight and the peak it computes at."""

_FOUR_BIT = ("nvfp4", "mxfp4", "fp4", "w4a4", "w4a16", "int4")
"""Quantization names (``quant_algo``, ``quant_method``, ``format``) that mean 4-bit weights."""


@dataclass(frozen=True)
class ModelShape:
    """A transformer's shape, as a Hugging Face ``config.json`` gives it (:func:`model_shape`).

    Assumptions, stated once: every MLP and expert is gated (gate, up and down matrices, as
    SwiGLU and GeGLU are); the multi-token-prediction layers a checkpoint carries for drafting
    (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``) are not part of the target's
    forward; the embedding table is looked up (a few rows a forward), the LM head read whole.
    """

    hidden_size: int
    num_layers: int
    """Decoder layers of the target's forward (``num_hidden_layers``)."""
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    """The dense MLP's width [elements]; 0 where every layer is MoE and none is given."""
    vocab_size: int
    tie_word_embeddings: bool
    experts: int = 0
    """Routed experts per MoE layer; 0 for a dense model."""
    top_k: int = 0
    """Routed experts each token uses per MoE layer (``num_experts_per_tok``)."""
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    """The width of the always-used shared expert(s) of a MoE layer, summed [elements]."""
    moe_layers: int = 0
    """How many layers route to experts (the rest are dense MLPs)."""
    full_attention_layers: int = 0
    """Layers of softmax attention, which keep a growing KV cache."""
    linear_attention_layers: int = 0
    """Layers of linear attention (Gated DeltaNet and the like): a fixed state, no KV cache."""
    window_attention_layers: int = 0
    """Sliding-window layers: their cache stops growing at the window (not in the KV bytes)."""
    kv_lora_rank: int = 0
    """MLA (DeepSeek-style latent attention): the cached latent's width; 0 for plain heads."""
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    attn_output_gate: bool = False
    """Whether the query projection also makes a gate (Qwen3-Next / Qwen3.5): twice its width."""
    index_heads: int = 0
    """A sparse-attention indexer's heads (DeepSeek V3.2 / GLM-5 DSA); 0 where there is none."""
    index_head_dim: int = 0
    linear_key_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_heads: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    weight_bytes: float = 2.0
    """Bytes per weight of the transformer layers (0.5 for 4-bit); group scales not counted."""
    head_bytes: float = 2.0
    """Bytes per weight of the LM head, which quantized checkpoints keep at 16 bits."""
    kv_bytes: float = 2.0
    """Bytes per cached key or value element: 2 (16-bit), what engines use unless told
    ``--kv-cache-dtype fp8`` (then 1), whatever the weights' quantization."""
    compute_dtype: str = "bf16"
    """The peak the weights' matrix products run at (an :class:`Accelerator` ``peak_tflops``
    key): fp8 for FP8 checkpoints, fp4 for W4A4, the activations' dtype for weight-only
    quantization (W4A16)."""

    @property
    def _attention_params(self) -> float:
        """Parameters of one softmax-attention layer (projections and the indexer)."""
        h = self.hidden_size
        if self.kv_lora_rank:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (
                self.q_lora_rank * (h + self.num_heads * qk)
                if self.q_lora_rank
                else h * self.num_heads * qk
            )
            kv = h * (
                self.kv_lora_rank + self.qk_rope_head_dim
            ) + self.kv_lora_rank * self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
            out = self.num_heads * self.v_head_dim * h
            params = q + kv + out
        else:
            q = h * self.num_heads * self.head_dim * (2 if self.attn_output_gate else 1)
            params = (
                q + 2 * h * self.num_kv_heads * self.head_dim + self.num_heads * self.head_dim * h
            )
        if self.index_heads:
            source = self.q_lora_rank or h
            params += (
                self.index_heads * (source * self.index_head_dim + h) + h * self.index_head_dim
            )
        return float(params)

    @property
    def _linear_attention_params(self) -> float:
        """Parameters of one linear-attention (Gated DeltaNet) layer."""
        h = self.hidden_size
        keys = self.linear_key_heads * self.linear_key_head_dim
        values = self.linear_value_heads * self.linear_value_head_dim
        projections = h * (2 * keys + 2 * values + 2 * self.linear_value_heads) + values * h
        return float(projections + (2 * keys + values) * self.linear_conv_kernel)

    @property
    def expert_params(self) -> float:
        """Parameters of ONE routed expert summed over all MoE layers."""
        return float(self.moe_layers * 3 * self.hidden_size * self.moe_intermediate_size)

    @property
    def dense_params(self) -> float:
        """Parameters every forward reads whatever its tokens: attention, dense MLPs, shared
        experts, routers, norms and the LM head (not the embedding table)."""
        h = self.hidden_size
        dense_mlp = (self.num_layers - self.moe_layers) * 3 * h * self.intermediate_size
        shared = self.moe_layers * (3 * h * self.shared_expert_intermediate_size + h * self.experts)
        layers = (
            self.full_attention_layers + self.window_attention_layers
        ) * self._attention_params + self.linear_attention_layers * self._linear_attention_params
        norms = (2 * self.num_layers + 1) * h
        return float(layers + dense_mlp + shared + norms) + self._head_params

    @property
    def _head_params(self) -> float:
        return float(self.vocab_size * self.hidden_size)

    @property
    def total_params(self) -> float:
        """Every parameter of the target: dense, all experts and an untied embedding table."""
        embedding = 0.0 if self.tie_word_embeddings else self._head_params
        return self.dense_params + self.experts * self.expert_params + embedding

    @property
    def active_params(self) -> float:
        """Parameters one token uses: the dense ones and ``top_k`` experts per MoE layer (the
        embedding lookup excluded, as DeepSeek counts its 37B)."""
        return self.dense_params + self.top_k * self.expert_params

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes every forward reads however many tokens it carries [bytes]: attention, dense
        MLPs, shared experts, routers and norms at :attr:`weight_bytes`, the LM head at
        :attr:`head_bytes`."""
        body = self.dense_params - self._head_params
        return body * self.weight_bytes + self._head_params * self.head_bytes

    @property
    def expert_bytes(self) -> float:
        """Bytes of ONE routed expert summed over all MoE layers [bytes]: a forward reading E
        distinct experts per layer reads ``E * expert_bytes``."""
        return self.expert_params * self.weight_bytes

    @property
    def kv_bytes_per_token(self) -> float:
        """Bytes one cached token takes over all full-attention layers [bytes]: keys and
        values of every KV head, or MLA's latent and rope key (plus a DSA indexer's key), at
        :attr:`kv_bytes` per element."""
        if self.kv_lora_rank:
            width = self.kv_lora_rank + self.qk_rope_head_dim + self.index_head_dim
        else:
            width = 2 * self.num_kv_heads * self.head_dim
        return float(self.full_attention_layers * width) * self.kv_bytes

    @property
    def flops_per_token(self) -> float:
        """FLOPs of one token's forward outside attention over the context: 2 x
        :attr:`active_params` [FLOPs]."""
        return 2.0 * self.active_params

    @property
    def attention_flops_per_token_per_context(self) -> float:
        """Attention FLOPs one new token spends per cached token [FLOPs]: scores and the
        weighted sum, 4 x heads x head_dim per full-attention layer; for MLA as decoded with
        absorbed weights, 2 x heads x (2 x kv_lora_rank + rope dim)."""
        if self.kv_lora_rank:
            per_layer = 2 * self.num_heads * (2 * self.kv_lora_rank + self.qk_rope_head_dim)
        else:
            per_layer = 4 * self.num_heads * self.head_dim
        return float(self.full_attention_layers * per_layer)


@dataclass(frozen=True)
class RooflinePrior:
    """Per-forward times at eta = 1 [ms], at the aggregate bandwidth and peak of ``devices``."""

    weights_ms: float
    """:attr:`ModelShape.dense_weight_bytes` over the bandwidth."""
    expert_ms: float
    """One expert's bytes (:attr:`ModelShape.expert_bytes`) over the bandwidth; 0 if dense."""
    kv_ms_per_sequence: float
    """``context_tokens`` x :attr:`ModelShape.kv_bytes_per_token` over the bandwidth."""
    compute_ms_per_token: float | None
    """:attr:`ModelShape.flops_per_token` over the peak at the compute dtype (bf16 where the
    datasheet gives no figure for it); None where the datasheet gives neither."""
    bandwidth_gbs: float
    """The aggregate bandwidth used [GB/s]."""
    peak_tflops: float | None
    """The aggregate peak used [TFLOPs]."""
    peak_dtype: str | None
    """Which of the accelerator's peaks that is."""

    def to_dict(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def roofline_prior(
    shape: ModelShape, accelerator: Accelerator, devices: int = 1, context_tokens: float = 0
) -> RooflinePrior:
    """The roofline's prior terms for ``shape`` on ``devices`` of ``accelerator``.

    Tensor parallelism shards the weights over the devices, so bandwidth and peak add up
    (x ``devices``); interconnect time is not in it (the fit's overhead takes it).

    Parameters
    ----------
    shape : ModelShape
    accelerator : Accelerator
    devices : int
        Devices the forward is spread over (``TP8``: 8).
    context_tokens : float
        Tokens in one sequence's KV cache [tokens].
    """
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise BreakevenError(
            "{0}: got " + escape_braces(shorten(repr(devices))) + ", expected an integer >= 1",
            "devices",
        )
    if not isinstance(context_tokens, (int, float)) or not 0 <= context_tokens < math.inf:
        raise BreakevenError(
            "{0}: got "
            + escape_braces(shorten(repr(context_tokens)))
            + ", expected a finite number >= 0",
            "context_tokens",
        )
    bytes_per_ms = accelerator.memory_bw_gbs * devices * 1e9 / 1e3
    dtype = shape.compute_dtype if shape.compute_dtype in accelerator.peak_tflops else "bf16"
    peak = accelerator.peak_tflops.get(dtype)
    total_peak = peak * devices if peak else None
    return RooflinePrior(
        weights_ms=shape.dense_weight_bytes / bytes_per_ms,
        expert_ms=shape.expert_bytes / bytes_per_ms,
        kv_ms_per_sequence=context_tokens * shape.kv_bytes_per_token / bytes_per_ms,
        compute_ms_per_token=shape.flops_per_token / (total_peak * 1e12 / 1e3)
        if total_peak
        else None,
        bandwidth_gbs=accelerator.memory_bw_gbs * devices,
        peak_tflops=total_peak,
        peak_dtype=dtype if total_peak else None,
    )


_MOST = 2**40
"""The largest count read from a config (a bound, so that products stay finite)."""


def _bad(key: str, value: Any, expected: str) -> BreakevenError:
    """One line: ``key`` holds ``value``, expected ``expected`` (no argument named)."""
    shown = escape_braces(shorten(repr(value)))
    return BreakevenError(f"{escape_braces(key)} is {shown}; expected {escape_braces(expected)}")


def _count(cfg: Mapping[str, Any], *keys: str, required: bool = False, least: int = 0) -> int:
    """The first of ``keys`` that ``cfg`` holds (not null), checked to be an integer from
    ``least`` to 2**40; 0 where none is there and it is not ``required``."""
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= _MOST:
            what = "a positive integer" if least else "an integer >= 0"
            raise _bad(key, value, what)
        return value
    if required:
        raise BreakevenError(
            "no " + " / ".join(keys) + "; expected a Hugging Face config.json of a decoder model"
        )
    return 0


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of ``config``: its ``text_config`` (or ``llm_config``) where
    the top level has no ``hidden_size`` (a multimodal checkpoint)."""
    if "hidden_size" in config:
        return config
    for key in ("text_config", "llm_config", "language_config"):
        inner = config.get(key)
        if isinstance(inner, Mapping) and "hidden_size" in inner:
            return inner
    return config


def _layer_kinds(cfg: Mapping[str, Any], layers: int) -> tuple[int, int, int]:
    """(full, linear, window) attention layers: from ``layer_types``, from
    ``full_attention_interval``, or all full."""
    kinds = cfg.get("layer_types")
    if kinds is not None:
        if not isinstance(kinds, list) or len(kinds) < layers:
            raise _bad("layer_types", kinds, f"a list of {layers} layer names")
        names = [str(k).lower() for k in kinds[:layers]]
        linear = sum("linear" in n or "mamba" in n or "delta" in n for n in names)
        window = sum("sliding" in n or "chunked" in n or "local" in n for n in names)
        return layers - linear - window, linear, window
    interval = _count(cfg, "full_attention_interval", least=1)
    if interval:
        full = layers // interval
        return full, layers - full, 0
    return layers, 0, 0


def _moe_layers(cfg: Mapping[str, Any], layers: int) -> int:
    """How many of ``layers`` route to experts, as each family says it: ``mlp_layer_types``,
    DeepSeek's ``first_k_dense_replace`` and ``moe_layer_freq``, Qwen's ``mlp_only_layers``
    and ``decoder_sparse_step``; otherwise all."""
    kinds = cfg.get("mlp_layer_types")
    if isinstance(kinds, list) and len(kinds) >= layers:
        return sum(str(k).lower() in ("sparse", "moe") for k in kinds[:layers])
    first = _count(cfg, "first_k_dense_replace")
    freq = _count(cfg, "moe_layer_freq", least=1) or 1
    step = _count(cfg, "decoder_sparse_step", least=1) or 1
    only = cfg.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in only
    ):
        raise _bad("mlp_only_layers", only, "a list of layer numbers")
    dense = set(only)
    return sum(
        i >= first and i % freq == 0 and (i + 1) % step == 0 and i not in dense
        for i in range(layers)
    )


def _dtype(config: Mapping[str, Any], cfg: Mapping[str, Any]) -> tuple[float, str]:
    """Bytes per weight and compute dtype of ``torch_dtype`` / ``dtype`` (bf16 where unsaid)."""
    for where in (cfg, config):
        for key in ("torch_dtype", "dtype"):
            name = where.get(key)
            if name is None:
                continue
            found = _DTYPE_BYTES.get(str(name).lower().removeprefix("torch."))
            if found is None:
                raise _bad(key, name, "one of " + ", ".join(_DTYPE_BYTES))
            return found
    return _DTYPE_BYTES["bfloat16"]


def _group_bits(qc: Mapping[str, Any]) -> tuple[int | None, int | None, str]:
    """compressed-tensors / modelopt ``config_groups``: the first group's weight and input
    activation bits, and the weights' type (``int`` or ``float``)."""
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        return None, None, ""
    first = next(iter(groups.values()))
    if not isinstance(first, Mapping):
        raise _bad("quantization_config.config_groups", first, "an object per group")
    weights = first.get("weights") if isinstance(first.get("weights"), Mapping) else {}
    acts = first.get("input_activations")
    acts = acts if isinstance(acts, Mapping) else {}
    bits = _count(weights, "num_bits", least=1) or None
    act_bits = _count(acts, "num_bits", least=1) or None
    return bits, act_bits, str(weights.get("type") or "int").lower()


def _quantization(qc: Any, dtype: tuple[float, str]) -> tuple[float, str] | None:
    """Bytes per weight and compute dtype under a ``quantization_config`` (None: none)."""
    if qc is None:
        return None
    if not isinstance(qc, Mapping):
        raise _bad("quantization_config", qc, "an object")
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    algo = str(qc.get("quant_algo") or "").lower()
    fmt = str(qc.get("fmt") or qc.get("format") or "").lower()
    if "mixed" in algo:
        raise _bad("quantization_config.quant_algo", qc.get("quant_algo"), "one precision")
    group_bits, act_bits, kind = _group_bits(qc)
    if any(name in (algo, method, fmt) for name in ("nvfp4", "w4a4")) or (
        group_bits == 4 and act_bits == 4
    ):
        return 0.5, "fp4"
    if "fp8" in (method, algo) or "e4m3" in fmt or (group_bits == 8 and act_bits == 8):
        return 1.0, "fp8" if kind == "float" or "fp8" in (method, algo) or fmt else "int8"
    if qc.get("load_in_4bit") is True or method in ("mxfp4", "fp4"):
        return 0.5, dtype[1]
    if qc.get("load_in_8bit") is True:
        return 1.0, dtype[1]
    bits = _count(qc, "bits", "w_bit", "weight_bits", least=1) or group_bits
    if bits is None:
        raise _bad(
            "quantization_config",
            dict(qc),
            "bits, w_bit, config_groups' num_bits or a quant_method read (fp8, nvfp4, mxfp4)",
        )
    if bits > 32:
        raise _bad("quantization_config bits", bits, "at most 32")
    return bits / 8, dtype[1]


def _experts(cfg: Mapping[str, Any], layers: int) -> dict[str, int]:
    """The MoE fields: experts, top_k, widths and how many layers route (all 0 if dense)."""
    experts = _count(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    if experts <= 1:
        return {}
    top_k = _count(cfg, "num_experts_per_tok", "moe_topk", "top_k_experts", least=1)
    if not top_k:
        raise BreakevenError(
            f"{experts} experts but no num_experts_per_tok; expected how many each token uses"
        )
    if top_k > experts:
        raise _bad("num_experts_per_tok", top_k, f"at most the {experts} experts")
    width = _count(cfg, "moe_intermediate_size", "expert_intermediate_size", least=1)
    width = width or _count(cfg, "intermediate_size", least=1)
    if not width:
        raise BreakevenError(
            f"{experts} experts but no moe_intermediate_size; expected their width"
        )
    shared = _count(cfg, "shared_expert_intermediate_size")
    shared = shared or _count(cfg, "n_shared_experts", "num_shared_experts") * width
    return {
        "experts": experts,
        "top_k": top_k,
        "moe_intermediate_size": width,
        "shared_expert_intermediate_size": shared,
        "moe_layers": _moe_layers(cfg, layers),
    }


def _attention(cfg: Mapping[str, Any], hidden: int, heads: int) -> dict[str, Any]:
    """Heads, head width, MLA ranks, a DSA indexer and linear-attention widths."""
    head_dim = _count(cfg, "head_dim", least=1) or hidden // heads
    if not head_dim:
        raise _bad("head_dim", hidden / heads, "a width >= 1 (hidden_size / num_attention_heads)")
    fields: dict[str, Any] = {
        "num_kv_heads": _count(cfg, "num_key_value_heads", least=1) or heads,
        "head_dim": head_dim,
        "attn_output_gate": cfg.get("attn_output_gate") is True,
    }
    rank = _count(cfg, "kv_lora_rank")
    if rank:
        fields.update(
            kv_lora_rank=rank,
            q_lora_rank=_count(cfg, "q_lora_rank"),
            qk_nope_head_dim=_count(cfg, "qk_nope_head_dim"),
            qk_rope_head_dim=_count(cfg, "qk_rope_head_dim"),
            v_head_dim=_count(cfg, "v_head_dim") or head_dim,
        )
    if _count(cfg, "index_topk"):
        fields.update(
            index_heads=_count(cfg, "index_n_heads"), index_head_dim=_count(cfg, "index_head_dim")
        )
    fields.update(
        linear_key_heads=_count(cfg, "linear_num_key_heads"),
        linear_key_head_dim=_count(cfg, "linear_key_head_dim"),
        linear_value_heads=_count(cfg, "linear_num_value_heads"),
        linear_value_head_dim=_count(cfg, "linear_value_head_dim"),
        linear_conv_kernel=_count(cfg, "linear_conv_kernel_dim"),
    )
    return fields


_MOST_LAYERS = 100_000
"""The most decoder layers read (a bound, so that the per-layer rules stay quick)."""


def model_shape(config: Mapping[str, Any], kv_bytes: float = 2.0) -> ModelShape:
    """The :class:`ModelShape` of a Hugging Face ``config.json`` (as a dict).

    Reads the top level, or its ``text_config`` where the top level has no ``hidden_size``
    (multimodal checkpoints).  Bytes per weight come from ``torch_dtype`` / ``dtype`` (bf16
    where neither is given) and ``quantization_config`` (AWQ, GPTQ, compressed-tensors and
    AutoRound bits; FP8; NVFP4 and MXFP4 as 4 bits; group scales are not counted), the LM
    head staying at the 16-bit dtype when the layers are quantized.  ``kv_bytes``: bytes per
    cached element (2: 16-bit, the engines' default; 1 for an fp8 KV cache).

    Raises
    ------
    breakeven.core.errors.BreakevenError
        One line naming the key at fault: no ``hidden_size`` or ``num_hidden_layers``, a count
        that is not a positive integer, experts with no ``num_experts_per_tok``, a dtype or
        quantization it cannot read.
    """
    if not isinstance(config, Mapping):
        raise _bad("the config", type(config).__name__, "a JSON object")
    cfg = _text_config(config)
    hidden = _count(cfg, "hidden_size", "d_model", "n_embd", required=True, least=1)
    layers = _count(cfg, "num_hidden_layers", "num_layers", "n_layer", required=True, least=1)
    if layers > _MOST_LAYERS:
        raise _bad("num_hidden_layers", layers, f"at most {_MOST_LAYERS:,}")
    heads = _count(cfg, "num_attention_heads", "n_head", required=True, least=1)
    vocab = _count(cfg, "vocab_size", required=True, least=1)
    if not (isinstance(kv_bytes, (int, float)) and 0 < kv_bytes <= 8):
        raise _bad("kv_bytes", kv_bytes, "a number of bytes from 0 to 8")
    tie = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    dtype = _dtype(config, cfg)
    quantized = _quantization(
        config.get("quantization_config", cfg.get("quantization_config")), dtype
    )
    weight_bytes, compute = quantized or dtype
    moe = _experts(cfg, layers)
    full, linear, window = _layer_kinds(cfg, layers)
    return ModelShape(
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=_count(cfg, "intermediate_size", "ffn_dim", "n_inner"),
        vocab_size=vocab,
        tie_word_embeddings=tie is True,
        full_attention_layers=full,
        linear_attention_layers=linear,
        window_attention_layers=window,
        weight_bytes=weight_bytes,
        head_bytes=dtype[0],
        kv_bytes=float(kv_bytes),
        compute_dtype=compute,
        **moe,
        **_attention(cfg, hidden, heads),
    )
