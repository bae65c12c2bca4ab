"""read_model_config: real config.json files read, bad ones refused in one line naming the
file and what is wrong (a BreakevenError: exit 2 wherever the command line meets it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.core.errors import BreakevenError
from breakeven.iotools.modelconfig import read_model_config
from breakeven.model.roofline import ModelShape

CONFIGS = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "model_configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_every_stored_config_reads(path):
    shape = read_model_config(str(path))
    assert shape.dense_weight_bytes > 0 and shape.kv_bytes_per_token > 0
    assert shape.active_params <= shape.total_params


def test_every_stored_config_is_listed_with_its_source():
    readme = (CONFIGS / "README.md").read_text()
    for path in CONFIGS.glob("*.json"):
        assert f"`{path.name}`" in readme, path.name


GOOD = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("", "not JSON"),
        ("{", "not JSON"),
        ("[1, 2]", "holds a JSON list"),
        ("[" * 100_000, "levels deep"),
        (json.dumps({"num_hidden_layers": 2}), "hidden_size"),
        (json.dumps({**GOOD, "num_hidden_layers": None}), "num_hidden_layers"),
        (json.dumps({**GOOD, "num_hidden_layers": 0}), "num_hidden_layers is 0"),
        (json.dumps({**GOOD, "num_hidden_layers": "36"}), "num_hidden_layers is '36'"),
        (json.dumps({**GOOD, "hidden_size": 1.5}), "hidden_size is 1.5"),
        (json.dumps({**GOOD, "hidden_size": True}), "hidden_size is True"),
        ('{"hidden_size": 1e400, "num_hidden_layers": 2}', "hidden_size is inf"),
        (json.dumps({**GOOD, "num_experts": 8}), "no num_experts_per_tok"),
        (json.dumps({**GOOD, "num_experts": 8, "num_experts_per_tok": 9}), "at most the 8"),
        (json.dumps({**GOOD, "torch_dtype": "auto"}), "torch_dtype is 'auto'"),
        (json.dumps({**GOOD, "layer_types": ["full_attention"]}), "layer_types"),
        (json.dumps({**GOOD, "quantization_config": {"quant_method": "x"}}), "bits"),
        (
            json.dumps({**GOOD, "quantization_config": {"quant_algo": "MIXED_PRECISION"}}),
            "one precision",
        ),
        (json.dumps({**GOOD, "num_hidden_layers": 10**9}), "at most 100,000"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_file_and_the_fault(tmp_path, text, wanted):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(BreakevenError) as e:
        read_model_config(str(path))
    message = e.value.render(lambda name: "--model-config")
    assert "\n" not in message
    assert message.startswith("--model-config: ") and str(path) in message, message
    assert wanted in message, message
    assert isinstance(e.value, ValueError)  # the command line's exit 2


def test_a_missing_file_and_a_directory_are_one_line(tmp_path):
    for path in (tmp_path / "none.json", tmp_path):
        with pytest.raises(BreakevenError) as e:
            read_model_config(str(path))
        assert "\n" not in str(e.value) and "cannot read" in str(e.value)


def test_a_minimal_config_reads_with_stated_defaults(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GOOD))
    shape = read_model_config(str(path))
    assert (shape.num_kv_heads, shape.head_dim, shape.weight_bytes, shape.compute_dtype) == (
        4,
        16,
        2.0,
        "bf16",
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "intermediate_size",
        "num_experts",
        "n_routed_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "n_shared_experts",
        "first_k_dense_replace",
        "moe_layer_freq",
        "mlp_only_layers",
        "decoder_sparse_step",
        "kv_lora_rank",
        "q_lora_rank",
        "qk_rope_head_dim",
        "layer_types",
        "full_attention_interval",
        "torch_dtype",
        "quantization_config",
        "text_config",
        "tie_word_embeddings",
        "index_topk",
        "mlp_layer_types",
    ]
)
VALUES = JSON | st.integers(min_value=0, max_value=300) | st.sampled_from(["bfloat16", "fp8"])


@settings(max_examples=150, deadline=None)
@given(
    base=st.sampled_from(sorted(CONFIGS.glob("*.json"))),
    changes=st.dictionaries(KEYS, VALUES, max_size=5),
)
def test_any_json_object_gives_a_shape_or_one_line(tmp_path_factory, base, changes):
    config = json.loads(base.read_text())
    target = config["text_config"] if "text_config" in config else config
    target.update(changes)
    path = tmp_path_factory.mktemp("c") / "config.json"
    path.write_text(json.dumps(config))
    try:
        shape = read_model_config(str(path))
    except BreakevenError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(shape, ModelShape)
    for value in (shape.dense_weight_bytes, shape.expert_bytes, shape.kv_bytes_per_token):
        assert value >= 0


@settings(max_examples=100, deadline=None)
@given(value=st.dictionaries(st.text(max_size=20), JSON, max_size=8))
def test_any_json_object_at_all_gives_a_shape_or_one_line(tmp_path_factory, value):
    path = tmp_path_factory.mktemp("c") / "config.json"
    path.write_text(json.dumps(value))
    try:
        read_model_config(str(path))
    except BreakevenError as e:
        assert "\n" not in str(e)
