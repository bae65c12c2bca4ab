"""What enters a launch's fingerprint (breakeven.core.provenance): only the server variables that
tune it, never a secret, never a variable outside the listed prefixes; and what the client
chose (URL, host, port) or speculation configures never makes two launches differ."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from breakeven.core.provenance import (
    ENV_PREFIXES,
    SECRET_NAME_PARTS,
    age_text,
    fingerprint,
    parse_time,
    server_arguments,
    server_environment,
)

NAMES = st.one_of(
    st.builds(
        lambda prefix, rest: prefix + rest,
        st.sampled_from([*ENV_PREFIXES, "PATH", "HOME", "AWS_", "HF_", "OPENAI_", "DATABASE_"]),
        st.text(string.ascii_uppercase + "_" + string.digits, min_size=0, max_size=12),
    ),
    st.text(string.ascii_letters + "_", min_size=1, max_size=12),
)
VALUES = st.text(string.ascii_letters + string.digits + " /:.-", max_size=20)


@given(st.lists(NAMES, unique=True, max_size=12), st.lists(VALUES, min_size=12, max_size=12))
def test_only_prefixed_variables_without_a_secrets_name_are_kept(names, values):
    # Each variable's value carries a marker of its own: what is written shows what was read.
    environ = {
        name: f"{value}@{i}#" for i, (name, value) in enumerate(zip(names, values, strict=False))
    }
    kept = server_environment(environ)
    written = " ".join(kept)
    for pair in kept:
        name = pair.partition("=")[0]
        assert name.startswith(ENV_PREFIXES)
        assert not any(part in name.upper() for part in SECRET_NAME_PARTS)
        assert not any(c.isspace() for c in pair)
    for i, name in enumerate(names):
        allowed = name.startswith(ENV_PREFIXES) and not any(
            part in name.upper() for part in SECRET_NAME_PARTS
        )
        assert (f"@{i}#" in written) == allowed


def test_the_issues_variables():
    environ = {
        "VLLM_API_KEY": "sk-1",
        "HF_TOKEN": "hf",
        "NCCL_IB_TOKEN": "x",
        "SGLANG_SECRET_SALT": "y",
        "CUDA_PASSWORD": "z",
        "LLAMA_ARG_CREDENTIAL_FILE": "/c",
        "NCCL_PROTO": "LL",
        "OMP_NUM_THREADS": "8",
        "TORCH_CUDA_ARCH_LIST": "9.0 10.0",
        "PATH": "/usr/bin",
    }
    assert server_environment(environ) == [
        "NCCL_PROTO=LL",
        "OMP_NUM_THREADS=8",
        "TORCH_CUDA_ARCH_LIST=9.0_10.0",
    ]


def test_a_command_lines_secret_flags_are_masked_and_others_kept():
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--api-key",
        "sk-a",
        "--hf-token=hf_b",
        "--max-num-batched-tokens",
        "8192",
        "--enforce-eager",
        "--tp",
        "8",
        "--temperature",
        "-1",
    ]
    assert server_arguments(argv) == [
        "-m=sglang.launch_server",
        "--model-path=/m",
        "--api-key=***",
        "--hf-token=***",
        "--max-num-batched-tokens=8192",
        "--enforce-eager",
        "--tp=8",
        "--temperature=-1",
    ]


@given(st.integers(1, 65535), st.integers(1, 65535))
def test_what_the_client_chose_and_speculation_never_differ(port_a, port_b):
    common = "NCCL_PROTO=LL --tp=8"
    a = f"{common} --port={port_a} url=http://h:{port_a} client_host=a LLAMA_ARG_PORT={port_a}"
    b = (
        f"{common} --port={port_b} url=http://h:{port_b} client_host=b "
        "--speculative-config={...} --spec-draft-model=/d -md=/d2 LLAMA_ARG_DRAFT_MAX=4"
    )
    assert fingerprint(a) == fingerprint(b) == "--tp=8 NCCL_PROTO=LL"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("2026-02-02", True),
        ("2026-02-26T16:41", True),
        ("2026-02-26 16:41:03.5Z", True),
        ("2026-02-26T16:41:03+02:00", True),
        ("02-26 16:41:03", False),  # vLLM's, without its year
        ("yesterday", False),
        ("", False),
    ],
)
def test_dates_are_iso_8601_or_not_dates(text, ok):
    assert (parse_time(text) is not None) == ok


def test_an_age_is_said_in_the_unit_a_person_reads():
    assert age_text(40) == "40 s"
    assert age_text(20 * 60) == "20 minutes"
    assert age_text(5 * 3600) == "5 hours"
    assert age_text(24 * 86400 + 16 * 3600) == "24 days"


def test_what_an_endpoint_serves_keeps_launch_settings_and_never_a_key():
    """SGLang's /get_server_info is flat: its server arguments (the API keys among them), sizes
    derived at start-up, settings it adjusts under speculation, and its workers' states
    (the keys as in sglang's http_server.get_server_info)."""
    from breakeven.iotools.server import endpoint_pairs, launch_metrics

    served = {
        "model_path": "/m",
        "tp_size": 8,
        "dtype": "auto",
        "api_key": "sk-served",
        "admin_api_key": "sk-admin",
        "mem_fraction_static": 0.81,  # lowered by SGLang when speculation is on
        "max_total_num_tokens": 123456,
        "random_seed": 42,
        "port": 30000,
        "internal_states": [{"avg_spec_accept_length": 2.1}],
        "version": "0.5.9",
    }
    pairs = endpoint_pairs("sglang", served)
    assert pairs == ["model_path=/m", "tp_size=8", "dtype=auto"]
    props = {
        "build_info": "b6432-abc",
        "model_path": "/m.gguf",
        "total_slots": 4,
        "default_generation_settings": {"n_ctx": 2048, "params": {"temperature": 0.8}},
        "api_key": "never",
    }
    assert endpoint_pairs("llamacpp", props) == [
        "build_info=b6432-abc",
        "model_path=/m.gguf",
        "total_slots=4",
        "n_ctx=2048",
    ]
    fixture = (
        Path(__file__).parent / "data" / "engines" / "vllm_cpu_v0320_metrics_baseline_before.prom"
    )
    started, cache = launch_metrics(fixture.read_text())
    assert started == 1.79617181698e09
    pairs = endpoint_pairs("vllm", None, cache)
    assert "cache_config.kv_cache_memory_bytes=1073741824" in pairs
    assert not any("num_gpu_blocks=" in p for p in pairs)  # derived: a draft model changes it


def test_a_hostile_servers_megabyte_setting_is_cut():
    from breakeven.iotools.server import MAX_VALUE_CHARS, endpoint_pairs

    (pair,) = endpoint_pairs("llamacpp", {"build_info": "x" * 1_000_000})
    assert len(pair) == len("build_info=") + MAX_VALUE_CHARS and pair.endswith("...")
