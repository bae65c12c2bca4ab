"""breakeven sweep's plan (issue 25, first part): the launches of one experiment, interleaved,
each with its engine's own speculation flags; and what the sweep costs before it starts."""

from __future__ import annotations

import json
import shlex

import pytest

from breakeven.core.errors import BreakevenError
from breakeven.render.engine_configs import speculation_args
from breakeven.sweep.plan import plan_sweep, serve_argv

VLLM = "vllm serve /models/target --port {port} --max-num-seqs 8"


def test_launches_are_interleaved_and_repeats_are_new_launches():
    plan = plan_sweep(VLLM, "vllm", [2, 4], method="draft_model", draft="/d", repeats=2)
    assert [(launch.repeat, launch.num_spec_tokens) for launch in plan.launches] == [
        (1, 0),
        (1, 2),
        (1, 4),
        (2, 0),
        (2, 2),
        (2, 4),
    ]
    assert [launch.index for launch in plan.launches] == [1, 2, 3, 4, 5, 6]
    assert [launch.label for launch in plan.launches[:3]] == [
        "baseline",
        "draft_model-k2",
        "draft_model-k4",
    ]


def test_the_baseline_is_the_plain_command_and_k_adds_only_the_engines_flags():
    plan = plan_sweep(VLLM, "vllm", [0, 3], method="eagle3", draft="/e", port=8123)
    base, spec = plan.launches
    assert base.argv == ("vllm", "serve", "/models/target", "--port", "8123", "--max-num-seqs", "8")
    assert spec.argv[: len(base.argv)] == base.argv
    flag, value = spec.argv[len(base.argv) :]
    assert flag == "--speculative-config"
    # vLLM's SpeculativeConfig fields (vllm/config/speculative.py).
    assert json.loads(value) == {"method": "eagle3", "model": "/e", "num_speculative_tokens": 3}


def test_each_engines_flags():
    assert speculation_args("sglang", 3, {"method": "eagle3", "model": "/d"}) == [
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/d",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",  # a chain verifies k + 1 tokens
    ]
    # The form the suite's real llama-server runs (tests/llamacpp_server.py).
    assert speculation_args("llamacpp", 4, {"model": "/d.gguf"}) == [
        "--spec-type",
        "draft-simple",
        "--spec-draft-model",
        "/d.gguf",
        "--spec-draft-n-max",
        "4",
        "--spec-draft-n-min",
        "0",
    ]
    assert speculation_args("vllm", 0, {"method": "ngram"}) == []
    with pytest.raises(BreakevenError, match=r"draft: llama\.cpp drafts with a draft model"):
        speculation_args("llamacpp", 2, {})


def test_a_sweep_without_k_gets_its_baseline_and_one_without_speculation_is_refused():
    plan = plan_sweep(VLLM, "vllm", [2], method="ngram")
    assert [launch.num_spec_tokens for launch in plan.launches] == [0, 2]
    with pytest.raises(BreakevenError, match="only the baseline"):
        plan_sweep(VLLM, "vllm", [0])


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"serve": "vllm serve 'unclosed"}, "serve: got"),
        ({"serve": "  "}, "serve: got"),
        ({"engine": "tgi"}, "engine: got 'tgi'"),
        ({"num_spec_tokens": [-1]}, "num_spec_tokens"),
        ({"repeats": 0}, "repeats: got 0"),
        ({"repeats": 1000}, "at most 1000 launches"),
        ({"concurrency": [0]}, "concurrency"),
    ],
)
def test_bad_plans_are_refused_naming_their_argument(kwargs, expected):
    given = {"serve": VLLM, "engine": "vllm", "num_spec_tokens": [2], "method": "ngram"}
    given.update(kwargs)
    with pytest.raises(BreakevenError, match=expected):
        plan_sweep(given.pop("serve"), given.pop("engine"), given.pop("num_spec_tokens"), **given)


def test_the_plan_says_its_cost_before_it_starts():
    plan = plan_sweep(
        VLLM,
        "vllm",
        [2, 4, 6],
        method="eagle3",
        draft="/e",
        concurrency=[1, 4],
        repeats=2,
        max_tokens=512,
        ready_timeout_s=1800,
    )
    assert len(plan.launches) == 8
    assert plan.requests == (8, 16)
    assert plan.start_bound_s() == 8 * 1800
    # 8 launches x (8 waves at concurrency 1 + 4 waves at 4) x 512 tokens at 20 tok/s
    assert plan.measure_s(20.0) == pytest.approx(8 * 12 * 512 / 20)
    text = plan.report()
    assert text.startswith(
        "8 launches of vllm (each runs concurrency 1, 4: 24 requests of 512 tokens)"
    )
    assert "4.0 h" in text and "--speculative-config" in text


def test_port_is_filled_in_and_a_command_without_it_keeps_its_own():
    assert serve_argv("llama-server -m m.gguf --port {port}", 9001)[-1] == "9001"
    assert serve_argv("ssh gpu1 systemctl restart sglang", 9001) == [
        "ssh",
        "gpu1",
        "systemctl",
        "restart",
        "sglang",
    ]


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_the_flags_a_sweep_adds_are_read_by_each_engine_as_meant(k):
    """Read back by each engine's own rules (tests/engine_rules.py, from the engines' source):
    SGLang runs k steps of a topk-1 chain verifying k + 1 tokens, with nothing adjusted and no
    warning; vLLM's --speculative-config holds SpeculativeConfig's fields.  (The real vLLM and
    llama-server run the flags in tests/test_vllm.py and tests/test_llamacpp.py.)"""
    from engine_rules import sglang_fixed_k, sglang_parse_flags, vllm_parse_flags

    base = {"method": "eagle3", "model": "/d"}
    args = sglang_parse_flags(shlex.join(speculation_args("sglang", k, base)))
    assert sglang_fixed_k(args) == ((k, 1, k + 1), [])
    assert args["speculative_draft_model_path"] == "/d"
    config = vllm_parse_flags(shlex.join(speculation_args("vllm", k, base)))
    assert config == {"method": "eagle3", "model": "/d", "num_speculative_tokens": k}


@pytest.mark.parametrize(
    ("method", "algorithm"),
    [("eagle", "EAGLE"), ("eagle3", "EAGLE3"), ("mtp", "NEXTN"), ("draft_model", "STANDALONE")],
)
def test_each_method_is_an_algorithm_sglang_accepts(method, algorithm):
    from engine_rules import sglang_fixed_k, sglang_parse_flags

    args = sglang_parse_flags(shlex.join(speculation_args("sglang", 2, {"method": method})))
    assert args["speculative_algorithm"] == algorithm
    assert sglang_fixed_k(args) == ((2, 1, 3), [])


TRTLLM = "trtllm-serve /models/target --port {port} --max_batch_size 8"


@pytest.mark.parametrize(
    ("method", "decoding_type"),
    [("eagle3", "Eagle3"), ("mtp", "MTP"), ("ngram", "NGram"), ("draft_model", "DraftTarget")],
)
def test_a_trtllm_launch_names_its_yaml_in_the_sweep_directory(tmp_path, method, decoding_type):
    """trtllm-serve takes speculation only from --extra_llm_api_options FILE: each speculative
    launch names its own YAML in the sweep's directory, which holds TensorRT-LLM's
    speculative_config for its k (read back by TensorRT-LLM's rules, tests/engine_rules.py)."""
    from engine_rules import trtllm_load_options, trtllm_validate

    out = str(tmp_path / "sweep")
    plan = plan_sweep(TRTLLM, "trtllm", [0, 2, 4], method=method, draft="/d", config_dir=out)
    base, *specs = plan.launches
    assert base.files == () and base.argv == tuple(serve_argv(TRTLLM, 8000))
    for launch in specs:
        path = f"{out}/configs/{launch.label}.yaml"
        assert launch.argv[len(base.argv) :] == ("--extra_llm_api_options", path)
        ((written, text),) = launch.files
        spec = trtllm_load_options(text)
        assert written == path and trtllm_validate(spec) is None
        assert spec == {
            "decoding_type": decoding_type,
            "max_draft_len": launch.num_spec_tokens,
            "speculative_model": "/d",
        }
    # the plan shows each file's text before anything starts
    assert "max_draft_len: 4" in plan.report() and plan.to_dict()["launches"][1]["files"]


def test_a_trtllm_command_with_its_own_options_file_is_refused_in_one_line():
    """trtllm-serve reads one options file: the sweep's would drop the command's unseen."""
    serve = TRTLLM + " --extra_llm_api_options mine.yaml"
    with pytest.raises(BreakevenError, match=r"^serve: got .*--extra_llm_api_options: the sweep"):
        plan_sweep(serve, "trtllm", [2])
    assert plan_sweep(serve, "vllm", [2]).launches  # another engine's flag is not read
