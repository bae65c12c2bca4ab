"""The draft's memory (issue 41, item 3): a draft model or MTP heads take memory from the KV
cache, so fewer sequences fit with speculation; past the most that fit, speculation cannot run.
``batch`` gives no speedup there and ``schedule`` k = 0, and the config never speculates there.

The real numbers are those of ``benchmarks/data/published_batch/README.md``: SGLang MTP on
Qwen3.8-27B on one A100 80GB, the KV pool falling from 1,431,737 to 934,545 tokens; DSpark on
DeepSeek-V4-Flash on 2x H200, about 10 GB per GPU, the pool falling from 4.54M to 2.94M tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from breakeven.core.errors import BreakevenError
from breakeven.model.memory import GIB_BYTES, draft_slots, kv_room, largest_batch
from tests.cli_checks import one_line_exit_2, run_cli

CURVE = "data/llama3_8b_decode_curve.csv"  # one forward of 1 to 128 tokens
PLAIN, SPEC = 1_431_737, 934_545  # SGLang MTP, Qwen3.8-27B, one A100 80GB
PER_SEQUENCE = 30_000  # tokens: 47 sequences without speculation, 31 with it
SWEEP = [
    "--cost-curve",
    CURVE,
    "--alpha",
    "0.7",
    "--max-k",
    "4",
    "--draft-step-ms",
    "0.5",
    "--tokens-per-sequence",
    PER_SEQUENCE,
]

# Start-up lines as the engines format them (synthetic, from the format strings in their source:
# vLLM's _report_kv_cache_config in vllm/v1/core/kv_cache_utils.py, SGLang's scheduler and
# memory pool), each with the other lines a launch prints around them.
VLLM_LOG = """\
(EngineCore_DP0 pid=41) INFO 05-02 10:11:12 [gpu_worker.py:298] Available KV cache memory: 31.2 GiB
(EngineCore_DP0 pid=41) INFO 05-02 10:11:12 [kv_cache_utils.py:1087] GPU KV cache size: {tokens} tokens
(EngineCore_DP0 pid=41) INFO 05-02 10:11:12 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 43.69x
"""
SGLANG_LOG = """\
[2026-05-02 10:11:12 TP0] KV Cache is allocated. #tokens: {tokens}, K size: 9.81 GB, V size: 9.81 GB
[2026-05-02 10:11:14 TP0] max_total_num_tokens={tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=262144, available_gpu_mem=6.12 GB
"""


def _log(tmp_path, name, text, tokens):
    path = tmp_path / name
    path.write_text(text.format(tokens=tokens))
    return path


def _json(args):
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# The arithmetic.


def test_the_real_pool_holds_a_third_fewer_sequences_with_mtp():
    room = kv_room(PLAIN, 8192, spec_kv_tokens=SPEC)
    assert room.max_batch_plain == 1_431_737 // 8192 == 174
    # k = 3: 6 slots more per sequence (3 drafts verified, 3 next ones).
    assert draft_slots(3) == 6
    assert room.max_batch_spec(3) == 934_545 // (8192 + 6) == 113
    assert largest_batch(SPEC, 8192, 6) == 113


def test_gib_become_tokens_at_the_targets_bytes_per_token():
    # DSpark on DeepSeek-V4-Flash: about 10 GB per GPU took 1.6M of 4.54M tokens.
    per_token = 10 * GIB_BYTES / 1_600_000
    room = kv_room(4_540_000, 8192, draft_memory_gib=10, kv_bytes_per_token=per_token)
    assert abs(room.spec_kv_tokens - 2_940_000) <= 1
    assert "10 GiB" in room.source


def test_a_tree_holds_its_verified_tokens_and_every_branch_drafted():
    assert draft_slots(3, topk=2, verify_tokens=8) == 7 + 2 * 3


@given(
    kv=st.integers(1, 10**9),
    share=st.floats(0, 1),
    per_sequence=st.integers(1, 10**6),
    k=st.integers(1, 16),
)
def test_the_spec_batch_never_exceeds_the_plain_one(kv, share, per_sequence, k):
    spec = max(int(kv * share), per_sequence)
    if per_sequence > kv or spec > kv:
        return
    room = kv_room(kv, per_sequence, spec_kv_tokens=spec)
    assert room.max_batch_spec(k) <= room.max_batch_plain
    assert room.max_batch_spec(k + 1) <= room.max_batch_spec(k)


@given(
    less=st.floats(0.01, 50),
    more=st.floats(0.01, 50),
    per_token=st.floats(1e3, 1e6),
    k=st.integers(1, 16),
)
def test_more_draft_memory_never_fits_more_sequences(less, more, per_token, k):
    less, more = sorted((less, more))
    rooms = []
    for gib in (less, more):
        try:
            rooms.append(kv_room(10**8, 4096, draft_memory_gib=gib, kv_bytes_per_token=per_token))
        except BreakevenError:  # the draft leaves less than one sequence: none fits at all
            rooms.append(None)
    if rooms[0] is None:
        assert rooms[1] is None
        return
    if rooms[1] is not None:
        assert rooms[1].spec_kv_tokens <= rooms[0].spec_kv_tokens
        assert rooms[1].max_batch_spec(k) <= rooms[0].max_batch_spec(k)


# batch, through each route to the capacity.


def _routes(tmp_path):
    return {
        "numbers": ["--kv-tokens", "1,431,737", "--spec-kv-tokens", SPEC],
        "vLLM logs": [
            "--kv-tokens",
            _log(tmp_path, "plain.log", VLLM_LOG, f"{PLAIN:,}"),
            "--spec-kv-tokens",
            _log(tmp_path, "spec.log", VLLM_LOG, f"{SPEC:,}"),
        ],
        "SGLang logs": [
            "--kv-tokens",
            _log(tmp_path, "plain.log", SGLANG_LOG, PLAIN),
            "--spec-kv-tokens",
            _log(tmp_path, "spec.log", SGLANG_LOG, SPEC),
        ],
        "draft memory": [
            "--kv-tokens",
            PLAIN,
            "--draft-memory-gib",
            (PLAIN - SPEC) * 1024 / GIB_BYTES,
            "--kv-bytes-per-token",
            1024,
        ],
    }


@pytest.mark.parametrize("route", ["numbers", "vLLM logs", "SGLang logs", "draft memory"])
def test_batch_has_no_speedup_past_the_most_sequences_speculation_fits(tmp_path, route):
    data = _json(["batch", *SWEEP, *_routes(tmp_path)[route]])
    assert data["max_batch_plain"] == PLAIN // PER_SEQUENCE == 47
    assert data["max_batch_spec"] == SPEC // (PER_SEQUENCE + 2) == 31
    assert data["max_batch"] == 47  # the sweep ends where the cache does
    points = {p["batch"]: p for p in data["speedup_by_batch"]}
    assert all(points[b]["speedup"] is None and points[b]["k"] == 0 for b in range(32, 48))
    assert all(points[b]["speedup"] is not None for b in range(1, 32))
    assert isinstance(data["breakeven_batch"], int) and data["breakeven_batch"] <= 31
    assert data["best_k_by_batch"][-1] == [32, 47, 0]
    assert any("934,545" in n and "1,431,737" in n for n in data["notes"])


def test_batch_text_says_no_room_and_that_a_speculating_server_admits_fewer(tmp_path):
    r = run_cli(["batch", *SWEEP, *_routes(tmp_path)["numbers"]])
    assert r.exit_code == 0, r.output
    assert "no room" in r.stdout
    assert "admits at most 31" in r.stdout and "one without admits 47" in r.stdout


def test_without_the_cache_nothing_changes():
    data = _json(["batch", *SWEEP[:-2]])
    assert "max_batch_plain" not in data and "max_batch_spec" not in data
    assert all(p["speedup"] is not None for p in data["speedup_by_batch"])


def test_a_cache_that_fits_every_batch_swept_changes_no_speedup():
    plain = _json(["batch", *SWEEP[:-2]])
    roomy = _json(["batch", *SWEEP, "--kv-tokens", 10**9, "--spec-kv-tokens", 10**9 - 1])
    assert roomy["max_batch_spec"] > roomy["max_batch"] == plain["max_batch"]
    assert roomy["speedup_by_batch"] == plain["speedup_by_batch"]
    assert roomy["breakeven_batch"] == plain["breakeven_batch"]


# schedule: k = 0 past the most that fit, and a config that never speculates there.


@pytest.mark.parametrize("route", ["numbers", "vLLM logs", "draft memory"])
def test_schedule_turns_speculation_off_where_it_does_not_fit(tmp_path, route):
    data = _json(["schedule", *SWEEP, *_routes(tmp_path)[route], "--engine", "vllm"])
    assert data["max_batch_spec"] == 31 and data["max_batch_plain"] == 47
    assert all(row["k"] == 0 for row in data["by_batch"] if row["batch"] > 31)
    ranges = data["config"]["num_speculative_tokens_per_batch_size"]
    assert all(last <= 31 for first, last, k in ranges if k > 0)
    assert ranges[-1][2] == 0
    assert data["breakeven_batch"] <= 31


@pytest.mark.parametrize("engine", ["sglang", "vllm-legacy"])
def test_every_engines_config_stops_speculating_past_the_spec_batch(tmp_path, engine):
    data = _json(["schedule", *SWEEP, *_routes(tmp_path)["numbers"], "--engine", engine])
    config = data["config"]
    if engine == "sglang":
        on = [int(first) for first, c in config.items() if c["candidate_steps"] != [0]]
        off = [int(first) for first, c in config.items() if c["candidate_steps"] == [0]]
        assert max(on) <= 31 and min(off) <= 32
    else:
        assert config["disable_by_batch_size"] <= 32


# Bad input: one line naming the flag, exit 2.

BAD = [
    (["--kv-tokens", "0", "--spec-kv-tokens", SPEC], "--kv-tokens"),
    (["--kv-tokens", "-5", "--spec-kv-tokens", SPEC], "--kv-tokens"),
    (["--kv-tokens", "nan", "--spec-kv-tokens", SPEC], "--kv-tokens"),
    (["--kv-tokens", PLAIN, "--spec-kv-tokens", "0"], "--spec-kv-tokens"),
    (["--kv-tokens", SPEC, "--spec-kv-tokens", PLAIN], "--spec-kv-tokens"),
    (["--kv-tokens", 20_000, "--spec-kv-tokens", 10_000], "--kv-tokens"),  # below one sequence
    (["--kv-tokens", PLAIN, "--spec-kv-tokens", 10_000], "--spec-kv-tokens"),
    (
        ["--kv-tokens", PLAIN, "--draft-memory-gib", "0", "--kv-bytes-per-token", 1024],
        "--draft-memory-gib",
    ),
    (
        ["--kv-tokens", PLAIN, "--draft-memory-gib", "-1", "--kv-bytes-per-token", 1024],
        "--draft-memory-gib",
    ),
    (
        ["--kv-tokens", PLAIN, "--draft-memory-gib", "1", "--kv-bytes-per-token", "0"],
        "--kv-bytes-per-token",
    ),
    (["--kv-tokens", PLAIN, "--draft-memory-gib", "1"], "--kv-bytes-per-token"),
    (
        ["--kv-tokens", PLAIN, "--draft-memory-gib", "6", "--kv-bytes-per-token", 4096],
        "--draft-memory-gib",
    ),  # takes it all
    (
        [
            "--kv-tokens",
            PLAIN,
            "--spec-kv-tokens",
            SPEC,
            "--draft-memory-gib",
            "1",
            "--kv-bytes-per-token",
            1024,
        ],
        "--draft-memory-gib",
    ),
    (["--spec-kv-tokens", SPEC], "--kv-tokens"),
    (["--kv-tokens", PLAIN], "--spec-kv-tokens"),
]


@pytest.mark.parametrize("command", ["batch", "schedule"])
@pytest.mark.parametrize(("flags", "named"), BAD)
def test_bad_memory_input_is_one_line_naming_the_flag(command, flags, named):
    engine = ["--engine", "vllm"] if command == "schedule" else []
    one_line_exit_2(run_cli([command, *SWEEP, *engine, *flags]), named)


def test_no_tokens_per_sequence_names_the_flag_and_context():
    last = one_line_exit_2(
        run_cli(["batch", *SWEEP[:-2], "--kv-tokens", PLAIN, "--spec-kv-tokens", SPEC]),
        "--tokens-per-sequence",
    )
    assert "--context" in last


def test_zero_tokens_per_sequence_is_refused():
    flags = ["--kv-tokens", PLAIN, "--spec-kv-tokens", SPEC, "--tokens-per-sequence", "0"]
    one_line_exit_2(run_cli(["batch", *SWEEP[:-2], *flags]), "--tokens-per-sequence")


def test_a_log_without_the_line_or_no_log_names_the_flag_and_the_file(tmp_path):
    empty = tmp_path / "server.log"
    empty.write_text("INFO: Started server process\n")
    for path, why in ((empty, "logs no KV cache capacity"), (tmp_path / "gone.log", "cannot read")):
        last = one_line_exit_2(
            run_cli(["batch", *SWEEP, "--kv-tokens", path, "--spec-kv-tokens", SPEC]),
            "--kv-tokens",
            why,
        )
        assert path.name in last


def test_a_log_of_several_launches_gives_the_last(tmp_path):
    path = tmp_path / "restarts.log"
    path.write_text(VLLM_LOG.format(tokens="2,000,000") + VLLM_LOG.format(tokens=f"{PLAIN:,}"))
    data = _json(["batch", *SWEEP, "--kv-tokens", path, "--spec-kv-tokens", SPEC])
    assert data["max_batch_plain"] == 47


def test_the_spec_batch_is_the_smallest_ks():
    room = kv_room(PLAIN, PER_SEQUENCE, spec_kv_tokens=SPEC)
    data = _json(["batch", *SWEEP, "--kv-tokens", PLAIN, "--spec-kv-tokens", SPEC])
    assert data["max_batch_spec"] == room.max_batch_spec(1)
    assert math.isclose(room.max_batch_spec(4), SPEC // (PER_SEQUENCE + 8))


def test_the_kv_bytes_per_token_may_be_the_models_config(tmp_path):
    """``--kv-bytes-per-token`` takes the model's config.json: Qwen3-8B caches 36 layers x 8
    KV heads x 128 x 2 (K and V) x 2 bytes = 147,456 bytes a token, and the sweep is the one
    that number gives.  A config that cannot be read is one line naming the flag."""
    config = Path(__file__).resolve().parents[1] / "benchmarks/data/model_configs/qwen3-8b.json"
    gib = ["--kv-tokens", PLAIN, "--draft-memory-gib", 10]
    by_number = _json(["batch", *SWEEP, *gib, "--kv-bytes-per-token", 147456])
    by_config = _json(["batch", *SWEEP, *gib, "--kv-bytes-per-token", str(config)])
    assert by_config["max_batch_spec"] == by_number["max_batch_spec"]
    assert by_config["speedup_by_batch"] == by_number["speedup_by_batch"]
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2]")
    r = run_cli(["batch", *SWEEP, *gib, "--kv-bytes-per-token", str(bad)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.output.startswith("Error: --kv-bytes-per-token:") and r.output.count("\n") == 1
