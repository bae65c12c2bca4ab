"""The roofline prior: the accelerator table, reading hardware strings, model shapes from real
config.json files (benchmarks/data/model_configs, sources in its README) and the prior's
arithmetic, checked by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from breakeven.core.errors import BreakevenError
from breakeven.model.roofline import (
    ACCELERATORS,
    ModelShape,
    accelerator_of,
    model_shape,
    roofline_prior,
)

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "benchmarks" / "data" / "model_configs"
DTYPES = {"fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8"}


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def test_every_accelerator_has_a_source_a_bandwidth_and_dense_peaks_by_known_dtypes():
    assert len(ACCELERATORS) >= 25
    for name, acc in ACCELERATORS.items():
        assert acc.name == name
        assert acc.source.startswith("https://"), name
        assert acc.memory_bw_gbs > 0 and acc.memory_gib > 0, name
        assert set(acc.peak_tflops) <= DTYPES, name
        assert all(v > 0 for v in acc.peak_tflops.values()), name
        # dense peaks: a 16-bit peak is never above the 8-bit one
        if "bf16" in acc.peak_tflops and "fp8" in acc.peak_tflops:
            assert acc.peak_tflops["bf16"] <= acc.peak_tflops["fp8"], name


def test_the_table_cannot_be_changed_in_place():
    acc = ACCELERATORS["NVIDIA H100 SXM"]
    with pytest.raises(TypeError):
        acc.peak_tflops["bf16"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        ACCELERATORS["x"] = acc  # type: ignore[index]


@pytest.mark.parametrize(
    ("hardware", "name", "count"),
    [
        ("1x NVIDIA A30 24GB per endpoint (...)", "NVIDIA A30", 1),
        ("8x AMD MI355X, TP8", "AMD Instinct MI355X", 8),
        ("1x A100 80GB", "NVIDIA A100 SXM 80GB", 1),
        ("8x RTX PRO 6000 Blackwell, TP8, PCIe", "NVIDIA RTX PRO 6000 Blackwell", 8),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 1),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 1),
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 1),
        ("2x RTX 5060 Ti", "NVIDIA GeForce RTX 5060 Ti 16GB", 2),
        ("H200", "NVIDIA H200", 1),
        ("Tesla V100-SXM2-32GB", "NVIDIA Tesla V100 SXM2", 1),
        ("AMD Instinct MI300X", "AMD Instinct MI300X", 1),
        ("gpu=H100x8", "NVIDIA H100 SXM", 8),
        ("TP4 A100", "NVIDIA A100 SXM 80GB", 4),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM 40GB", 1),
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB", 1),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB", 1),
        ("RTX 5060 Ti (PCIe 3.0 x8)", "NVIDIA GeForce RTX 5060 Ti 16GB", 1),
    ],
)
def test_hardware_strings_name_their_accelerator_and_count(hardware, name, count):
    acc, devices = accelerator_of(hardware)
    assert (acc.name, devices) == (name, count)


DELIBERATELY_NONE = {
    "": "no hardware given",
    "RTX 4070 12GB + CPU experts (--cpu-moe)": "experts run from host memory",
    "RTX 3060 Laptop 6GB + 64GB RAM": "a laptop part, and the model spills to host memory",
    "not stated in PR text (imp project GPU; NVFP4 => Blackwell)": "the hardware is not stated",
    "AMD Radeon AI PRO R9700 32GB (Windows 11 Vulkan)": "no datasheet figure was checked for it",
}
"""The published hardware strings accelerator_of reads as None, each with why."""


def published_hardware() -> set[str]:
    files = [
        *ROOT.glob("benchmarks/data/published_batch/*.csv"),
        *ROOT.glob("benchmarks/data/published_heldout/*.csv"),
        *ROOT.glob("benchmarks/data/published_context/*.csv"),
        *ROOT.glob("tests/data/published/*.csv"),
    ]
    found = set()
    for path in files:
        with path.open() as f:
            rows = csv.DictReader(line for line in f if not line.startswith("#"))
            found |= {row["hardware"] for row in rows}
    return found


def test_every_published_hardware_string_is_read_or_none_for_a_stated_reason():
    hardware = published_hardware()
    assert len(hardware) >= 20
    for text in sorted(hardware):
        found = accelerator_of(text)
        if text in DELIBERATELY_NONE:
            assert found is None, text
        else:
            assert found is not None, text
            assert found[1] >= 1
    assert set(DELIBERATELY_NONE) <= hardware


def test_unknown_and_non_text_hardware_is_none():
    assert accelerator_of("Intel Gaudi 3") is None
    assert accelerator_of("A1000") is None
    assert accelerator_of(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        ("qwen3-8b", 8.2e9, 8.2e9 - 0.62e9),  # model card: 8.2B, the embedding table 0.62B
        ("qwen3-32b", 32.8e9, 32.8e9 - 0.78e9),
        ("llama-3.1-8b", 8.03e9, 8.03e9 - 0.53e9),
        ("deepseek-r1", 671e9, 37e9),  # DeepSeek: 671B total, 37B activated
        ("qwen3-30b-a3b", 30.5e9, 3.3e9 - 0.31e9),  # Qwen: 3.3B activated, embeddings in
        ("glm-5", 744e9, 40e9),  # Z.ai: 744B total, 40B active
        ("qwen3.5-27b", 27e9, 27e9 - 1.27e9),
        ("qwen3.5-35b-a3b", 35e9, 3e9),
    ],
)
def test_real_configs_give_the_published_parameter_counts(name, total, active):
    shape = model_shape(config(name))
    assert shape.total_params == pytest.approx(total, rel=0.05)
    assert shape.active_params == pytest.approx(active, rel=0.05)
    assert shape.flops_per_token == 2 * shape.active_params


def test_the_families_layer_rules_are_read():
    r1 = model_shape(config("deepseek-r1"))
    assert (r1.experts, r1.top_k, r1.moe_layers) == (256, 8, 58)  # first_k_dense_replace 3
    assert r1.kv_lora_rank == 512 and r1.weight_bytes == 1.0 and r1.compute_dtype == "fp8"
    assert r1.head_bytes == 2.0  # the LM head stays bf16
    # MLA caches the latent and the rope key: (512 + 64) x 61 layers x 2 bytes
    assert r1.kv_bytes_per_token == (512 + 64) * 61 * 2
    assert r1.attention_flops_per_token_per_context == 61 * 2 * 128 * (2 * 512 + 64)
    moe = model_shape(config("qwen3.5-35b-a3b"))  # nested text_config, hybrid attention
    assert (moe.full_attention_layers, moe.linear_attention_layers) == (10, 30)
    assert moe.kv_bytes_per_token == 10 * 2 * 2 * 256 * 2  # only full-attention layers
    assert moe.shared_expert_intermediate_size == 512 and moe.intermediate_size == 0
    dense = model_shape(config("qwen3-8b"))
    assert (dense.experts, dense.expert_bytes, dense.full_attention_layers) == (0, 0.0, 36)
    assert dense.kv_bytes_per_token == 36 * 2 * 8 * 128 * 2
    assert dense.attention_flops_per_token_per_context == 36 * 4 * 32 * 128


def test_the_prior_of_qwen3_8b_on_one_a30_by_hand():
    shape = model_shape(config("qwen3-8b"))
    # by hand: per layer attention 4096*(32*128) + 2*4096*(8*128) + (32*128)*4096 = 41,943,040,
    # MLP 3*4096*12288 = 150,994,944, norms 2*4096; 36 layers; final norm; LM head 151936*4096
    layer = 41_943_040 + 150_994_944 + 2 * 4096
    head = 151_936 * 4096
    dense = 36 * layer + 4096 + head
    assert shape.dense_params == dense
    assert shape.dense_weight_bytes == 2 * dense  # 15.14 GB (the embedding table not read)
    prior = roofline_prior(shape, ACCELERATORS["NVIDIA A30"], 1, context_tokens=1000)
    assert prior.weights_ms == pytest.approx(2 * dense / 933e9 * 1e3)  # 16.2 ms
    assert prior.weights_ms == pytest.approx(16.22, abs=0.01)
    assert prior.kv_ms_per_sequence == pytest.approx(1000 * 147_456 / 933e9 * 1e3)
    assert prior.expert_ms == 0.0
    # 2 x active parameters (the embedding lookup not counted) over the A30's 165 dense TFLOPs
    flops = 2 * shape.active_params
    assert prior.compute_ms_per_token == pytest.approx(flops / 165e12 * 1e3)
    assert prior.peak_dtype == "bf16"
    assert prior.bandwidth_gbs == 933.0


def test_devices_add_up_bandwidth_and_peak():
    shape = model_shape(config("deepseek-r1"))
    h100 = ACCELERATORS["NVIDIA H100 SXM"]
    one = roofline_prior(shape, h100, 1, 8192)
    eight = roofline_prior(shape, h100, 8, 8192)
    assert eight.weights_ms == pytest.approx(one.weights_ms / 8)
    assert eight.expert_ms == pytest.approx(one.expert_ms / 8)
    assert eight.kv_ms_per_sequence == pytest.approx(one.kv_ms_per_sequence / 8)
    assert one.peak_dtype == "fp8" and one.peak_tflops == 1978.9
    # 2 x 36.6e9 FLOPs at 1978.9e12 a second, in ms
    assert one.compute_ms_per_token == pytest.approx(shape.flops_per_token / 1978.9e12 * 1e3)
    assert eight.compute_ms_per_token == pytest.approx(one.compute_ms_per_token / 8)
    # one expert: 58 MoE layers x 3 x 7168 x 2048 weights at 1 byte
    assert shape.expert_bytes == 58 * 3 * 7168 * 2048
    assert one.expert_ms == pytest.approx(58 * 3 * 7168 * 2048 / 3350e9 * 1e3)
    assert eight.to_dict()["bandwidth_gbs"] == 8 * 3350.0


def test_a_peak_the_datasheet_lacks_falls_back_to_bf16():
    shape = model_shape(config("deepseek-r1"))  # fp8 weights
    prior = roofline_prior(shape, ACCELERATORS["NVIDIA A100 SXM 80GB"], 1)
    assert prior.peak_dtype == "bf16" and prior.peak_tflops == 312.0


@pytest.mark.parametrize(
    ("devices", "context"), [(0, 0), (1.5, 0), (True, 0), (1, -1), (1, float("nan"))]
)
def test_bad_devices_or_context_are_one_line(devices, context):
    shape = model_shape(config("qwen3-8b"))
    with pytest.raises(BreakevenError) as e:
        roofline_prior(shape, ACCELERATORS["NVIDIA H200"], devices, context)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("quantization", "weight_bytes", "compute"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5, "bf16"),
        ({"quant_method": "gptq", "bits": 8}, 1.0, "bf16"),
        ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}, 1.0, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 0.5, "fp4"),
        ({"quant_method": "mxfp4"}, 0.5, "bf16"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            0.5,
            "bf16",
        ),
    ],
)
def test_quantization_sets_the_bytes_per_weight_and_the_peak(quantization, weight_bytes, compute):
    shape = model_shape({**config("qwen3-8b"), "quantization_config": quantization})
    assert (shape.weight_bytes, shape.compute_dtype, shape.head_bytes) == (
        weight_bytes,
        compute,
        2.0,
    )
    plain = model_shape(config("qwen3-8b"))
    head = 151_936 * 4096
    body = plain.dense_params - head
    assert shape.dense_weight_bytes == pytest.approx(body * weight_bytes + head * 2)


def test_an_fp8_kv_cache_halves_the_kv_bytes():
    assert model_shape(config("qwen3-8b"), kv_bytes=1).kv_bytes_per_token == 36 * 2 * 8 * 128


def test_a_shape_is_frozen():
    shape = model_shape(config("qwen3-8b"))
    assert isinstance(shape, ModelShape)
    with pytest.raises(AttributeError):
        shape.hidden_size = 1  # type: ignore[misc]
