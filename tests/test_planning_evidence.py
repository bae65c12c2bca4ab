"""Planning within the evidence (issue 38, item 6): ``schedule``, ``optimize`` and ``batch``
from a fit file flag their answer, and paste nothing, where it goes beyond what the fit's runs
support (:func:`breakeven.fitting.saved.within_evidence`): a k or batch further beyond the runs than
the fit's held-out error allows, or a held-out error larger than the gain claimed.

The fit files are made as users make them, by ``breakeven fit --out`` on a measurements CSV.
The CSVs are runs of a known forward surface (made for the test: the logic, not an engine's
numbers), ``t(B, q) = 8 + 0.02 B + 0.01 B q`` [ms] with drafting ``k (0.3 + 0.002 B)`` and
0.2 ms of overhead per cycle, alpha 0.75; each configuration launched twice or three times,
each launch its own ``launch_id``.  The field report: a sweep on a busy host whose launches of
one configuration varied 26x wrote a fit from which ``schedule --fit-file`` pasted "k = 16 at
every batch (1-256): 6.208x" while the sweep itself said "Config to paste: none"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from cli_checks import invoke, one_line_exit_2

from breakeven.fitting.saved import EVIDENCE_FLOOR, Evidence, within_evidence
from breakeven.jobs.inputs import batch_from_files, optimize_from_files
from breakeven.jobs.schedules import schedule_from_files

ALPHA = 0.75
CLEAN = (0.997, 1.003, 1.0)
"""Launch-to-launch factors of a quiet host: 0.3% apart."""
WILD = (0.2, 1.0, 5.2, 0.5, 2.6)
"""Launch factors of a busy host: 26x from the slowest to the fastest."""


def _runs(batches, ks, factors, launches=2):
    """Measurement rows of the known surface at each batch and k (k = 0: the baseline), each
    configuration launched ``launches`` times, launch ``l`` of configuration ``i`` at rate x
    ``factors[(3 * i + l) % len(factors)]``."""
    rows = []
    for i, (batch, k) in enumerate((b, k) for b in batches for k in ks):
        step = 8.0 + 0.02 * batch + 0.01 * batch
        if k == 0:
            tau, cycle = 1.0, step
        else:
            tau = (1 - ALPHA ** (k + 1)) / (1 - ALPHA)
            cycle = 8.0 + 0.02 * batch + 0.01 * batch * (k + 1) + k * (0.3 + 0.002 * batch) + 0.2
        for launch in range(launches):
            rows.append(
                {
                    "model": "m",
                    "hardware": "h",
                    "concurrency": batch,
                    "num_spec_tokens": k,
                    "spec_method": "eagle3" if k else "",
                    "tok_s": 1000.0 * tau / cycle * factors[(3 * i + launch) % len(factors)],
                    "accept_len": tau if k else None,
                    "launch_id": f"b{batch}-k{k}-{launch}",
                    "run_id": f"b{batch}-k{k}-{launch}",
                }
            )
    return pd.DataFrame(rows)


def _fit_file(tmp_path: Path, name: str, runs: pd.DataFrame) -> Path:
    """``breakeven fit RUNS.csv --out FIT.json``, as a user makes a fit file."""
    csv, out = tmp_path / f"{name}.csv", tmp_path / f"{name}.json"
    runs.to_csv(csv, index=False)
    r = invoke("fit", csv, "--out", out)
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """The three fit files: runs at batch 1-2 (k 2-4), clean runs at batch 1-8 (k 1-4), and
    the same runs launched three times each on a busy host."""
    tmp = tmp_path_factory.mktemp("fits")
    return {
        "narrow": _fit_file(tmp, "narrow", _runs([1, 2], [0, 2, 3, 4], CLEAN)),
        "clean": _fit_file(tmp, "clean", _runs([1, 2, 4, 8], [0, 1, 2, 3, 4], CLEAN)),
        "noisy": _fit_file(tmp, "noisy", _runs([1, 2, 4, 8], [0, 1, 2, 3, 4], WILD, 3)),
    }


def _pastes_nothing(r):
    """A flagged answer: printed, exit 0, the reason first, and nothing to paste."""
    assert r.exit_code == 0, r.output
    assert r.output.startswith("Not pasted: the runs of "), r.output
    assert "Launch with:" not in r.output and "--speculative-config" not in r.output
    assert "--speculative-adaptive-config" not in r.output
    return r.output


# (a) A fit of runs at batch 1-2 asked to plan batch 1-256: extrapolation, flagged.


def test_a_fit_of_batch_1_and_2_schedules_nothing_up_to_256(fits, tmp_path):
    r = invoke("schedule", "--fit-file", fits["narrow"], "--engine", "vllm")
    text = _pastes_nothing(r)
    first = " ".join(text.split("\n\n")[0].split())  # the reason, before the answer
    assert "(k 2-4, batch 1-2: " in first and "x in batch" in first and "held-out error" in first
    assert "beyond what the runs measured" in first
    assert "Config to paste: none" in text
    assert "Schedule for vLLM" in text  # the answer is still printed, below the reason
    data = json.loads(
        invoke("schedule", "--fit-file", fits["narrow"], "--engine", "vllm", "--json").stdout
    )
    assert data["pasted"] is False and data["config"] is None and data["flags"] == ""
    assert data["refused"] and all("beyond what the runs measured" in x for x in data["refused"])
    assert data["evidence"]["spec_batches"] == [1, 2] and data["evidence"]["ks"] == [2, 3, 4]
    assert 0 < data["evidence"]["held_out_error"] < 0.1  # a clean fit: beyond its runs all the same
    assert data["ranges"] and data["max_batch"] == 256  # the schedule itself is kept, flagged


def test_out_writes_no_config_from_an_unsupported_schedule(fits, tmp_path):
    """``schedule --out`` is a gate: never a success beside a file it did not write."""
    out = tmp_path / "adaptive.json"
    r = invoke("schedule", "--fit-file", fits["narrow"], "--engine", "sglang", "--out", out)
    one_line_exit_2(r, "--out: no config to write (not pasted: k = ", "nothing written")
    assert not out.exists()
    out.write_text("{}")
    r = invoke(
        "schedule", "--fit-file", fits["narrow"], "--engine", "sglang", "--out", out, "--force"
    )
    one_line_exit_2(r, "is left as it was")
    assert out.read_text() == "{}"


def test_batch_from_a_fit_of_batch_1_and_2_gives_no_schedule_up_to_256(fits):
    r = invoke("batch", "--fit-file", fits["narrow"])
    text = _pastes_nothing(r)
    assert "Best k by batch: not given" in text and "[[1, " not in text
    data = json.loads(invoke("batch", "--fit-file", fits["narrow"], "--json").stdout)
    assert data["pasted"] is False and data["refused"]
    assert data["breakeven_batch"] is not None  # the answer is kept, flagged


def test_within_its_runs_the_same_fit_schedules(fits, tmp_path):
    """The narrow fit planned where it ran (batch 1-2, k 2-4 and a little beyond) pastes."""
    out = tmp_path / "config.json"
    args = ("--fit-file", fits["narrow"], "--max-batch", 2, "--max-k", 5)
    r = invoke("schedule", *args, "--engine", "vllm", "--out", out)
    assert r.exit_code == 0 and "Not pasted" not in r.output, r.output
    assert "Launch with:" in r.output and out.exists()
    data = json.loads(invoke("schedule", *args, "--engine", "vllm", "--json").stdout)
    assert data["pasted"] is True and data["refused"] == [] and data["config"] is not None


# (b) A fit of noisy launches: the held-out error is larger than the gain claimed.


def test_a_fit_of_launches_26x_apart_pastes_nothing(fits):
    """The field report: from such a fit, schedule pasted k = 16 at every batch 1-256."""
    data = json.loads(
        invoke("schedule", "--fit-file", fits["noisy"], "--engine", "vllm", "--json").stdout
    )
    assert data["pasted"] is False and data["config"] is None and data["flags"] == ""
    _pastes_nothing(invoke("schedule", "--fit-file", fits["noisy"], "--engine", "vllm"))
    # Within its runs too: the runs disagree by more than the gain.
    args = ("--fit-file", fits["noisy"], "--max-batch", 8, "--max-k", 4, "--engine", "vllm")
    text = _pastes_nothing(invoke("schedule", *args))
    assert "within what the runs measured" in " ".join(text.split("\n\n")[0].split())
    data = json.loads(invoke("schedule", *args, "--json").stdout)
    error = data["evidence"]["held_out_error"]
    top = max(x["speedup"] for x in data["by_batch"])
    assert error > 1 - 1 / top  # larger than the gain's share of the speedup
    assert any("runs disagree by more than the gain" in x for x in data["refused"])
    assert f"{error:.1%}" in data["refused"][0]


def test_batch_and_optimize_from_the_noisy_fit_are_flagged(fits):
    text = _pastes_nothing(
        invoke("batch", "--fit-file", fits["noisy"], "--max-batch", 8, "--max-k", 4)
    )
    assert "runs disagree by more than the gain" in " ".join(text.split())
    result = optimize_from_files(fit_file=str(fits["noisy"]), fit_group=3, k_max=4)
    data = result.to_dict()
    assert data["best_k"] > 0 and data["pasted"] is False
    assert "held-out error" in data["refused"][0]
    assert result.report().startswith("Not pasted: the runs of ")


# (c) A clean fit within its runs still pastes: no regression.


def test_a_clean_fit_within_its_runs_pastes(fits, tmp_path):
    out = tmp_path / "config.json"
    args = ("--fit-file", fits["clean"], "--max-batch", 8, "--max-k", 4)
    r = invoke("schedule", *args, "--engine", "vllm", "--out", out)
    assert r.exit_code == 0 and "Not pasted" not in r.output, r.output
    assert "--speculative-config" in r.output and out.exists()
    r = invoke("schedule", *args, "--engine", "sglang")
    assert r.exit_code == 0 and "--speculative-num-steps" in r.output, r.output
    data = json.loads(invoke("schedule", *args, "--engine", "vllm", "--json").stdout)
    assert data["pasted"] is True and data["refused"] == [] and data["config"] is not None
    assert data["evidence"]["ks"] == [1, 2, 3, 4] and data["evidence"]["spec_batches"] == [
        1,
        2,
        4,
        8,
    ]
    r = invoke("batch", *args)
    assert r.exit_code == 0 and "Best k by batch, as [first batch" in r.output
    assert json.loads(invoke("batch", *args, "--json").stdout)["pasted"] is True
    r = invoke("optimize", "--fit-file", fits["clean"], "--fit-group", 1, "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["best_k"] > 0 and data["pasted"] is True and data["refused"] == []


def test_commands_without_a_fit_file_say_nothing_of_evidence():
    r = invoke("optimize", "--alpha", 0.8, "--cost-ratio", 0.05, "--json")
    assert r.exit_code == 0 and "pasted" not in json.loads(r.stdout)


# The Python API makes the same decisions.


def test_the_api_refuses_as_the_command_line_does(fits):
    data = schedule_from_files(fit_file=str(fits["narrow"]), engine="vllm")
    assert data["pasted"] is False and data["config"] is None
    assert data.report().startswith("Not pasted: the runs of ")
    batch = batch_from_files(fit_file=str(fits["narrow"]))
    assert batch.refused and batch.to_dict()["pasted"] is False
    kept = schedule_from_files(fit_file=str(fits["clean"]), engine="vllm", max_batch=8, k_max=4)
    assert kept["pasted"] is True and kept["config"] is not None


def test_an_older_fit_file_is_unknown_evidence_and_flagged(fits, tmp_path):
    """A fit file without the runs' k (a surface's points) or a held-out error supports no
    claim: missing is unknown, never an unbounded extrapolation."""
    data = json.loads(fits["clean"].read_text())
    for s in data["surfaces"]:
        del s["points"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    args = ("--fit-file", old, "--max-batch", 8, "--max-k", 4, "--engine", "vllm")
    text = _pastes_nothing(invoke("schedule", *args))
    assert "does not record the k its runs measured" in " ".join(text.split())
    for s in data["surfaces"]:
        s["held_out_max_rel_error"] = None
    old.write_text(json.dumps(data))
    assert "has no held-out error" in " ".join(_pastes_nothing(invoke("schedule", *args)).split())


# The rule itself, in numbers.

EVIDENCE = Evidence("fit.json", (2, 3, 4), 0.05, (2, 4, 8), (1, 2, 4, 8))
"""Runs at k 2-4, speculative runs at batch 2-8, baselines at 1-8; held-out error 5%."""


@pytest.mark.parametrize(
    "claim,supported",
    [
        ((4, 8, 1.5), True),  # within the runs: 5% against a margin of 1 - 1/1.5 = 33%
        ((8, 16, 1.5), True),  # 2x in k, 2x in batch: 5% x 4 = 20% < 33%
        ((8, 32, 1.5), False),  # 2x, 4x: 5% x 8 = 40% >= 33%
        ((4, 1, 1.1), False),  # batch 1, half the speculative runs' 2: 10% >= 9.1%
        ((4, 1, 1.2), True),  # 10% < 16.7%
        ((3, 4, 1.04), False),  # within, but 5% >= 3.8%: the error is larger than the gain
        ((16, 256, 0.9), True),  # no gain claimed: nothing to check
        ((0, 256, 1.0), True),  # plain decoding: nothing to check
    ],
)
def test_the_rule(claim, supported):
    assert (within_evidence(EVIDENCE, [claim]) == []) is supported


def test_the_error_counts_at_least_the_floor_and_a_group_has_no_batch():
    group = Evidence("fit.json", (2, 3, 4), 0.001, None, None)
    margin = 1 - 1 / 1.015  # 1.5%, above the 0.1% held out, below the 2% floor
    assert margin < EVIDENCE_FLOOR == 0.02
    (reason,) = within_evidence(group, [(3, None, 1.015)])
    assert "0.1% (counted as 2%)" in reason
    assert within_evidence(group, [(3, 64, 1.5)]) == []  # a group's cycle: batch does not move it
    assert within_evidence(group, [(6, None, 1.5)]) == []  # 2% x 1.5 = 3% < 33%


def test_unknown_evidence_supports_no_claim():
    unknown = Evidence("fit.json", (2, 3), math.nan, (1, 2), (1, 2))
    assert "has no held-out error" in within_evidence(unknown, [(2, 1, 3.0)])[0]
    no_k = Evidence("fit.json", (), 0.01, (1, 2), (1, 2))
    assert "does not record the k" in within_evidence(no_k, [(2, 1, 3.0)])[0]
    no_batches = Evidence("fit.json", (2,), 0.01, (), ())
    assert "batch sizes" in within_evidence(no_batches, [(2, 1, 3.0)])[0]
    no_contexts = Evidence("fit.json", (2,), 0.01, (1,), (1,), ())
    assert "context lengths" in within_evidence(no_contexts, [(2, 1, 3.0)], context=8000.0)[0]


def test_one_reason_per_k_naming_its_batches_and_worst_claim():
    claims = [(4, b, 1.5) for b in range(1, 65)] + [(6, b, 1.15) for b in range(1, 65)]
    reasons = within_evidence(EVIDENCE, claims)
    assert len(reasons) == 2
    # k = 4 beyond batch 8: 5% x B / 8 >= 1 - 1 / 1.5 from B = 54 on
    assert reasons[0].startswith("k = 4 at batch 54-64: claims 1.500x at batch 64, 8x beyond")
    assert "(k 2-4, batch 2-8 (baselines 1-8): 8x in batch)" in reasons[0]
    # k = 6 (1.5x beyond k 4) at 1.15x: 5% x 1.5 x 2 >= 13% at batch 1 (half of 2), and beyond 8
    # from batch 14 on
    assert reasons[1].startswith("k = 6 at batch 1, 14-64: claims 1.150x at batch 64, 12x beyond")


def test_a_context_beyond_the_runs_counts_as_distance():
    evidence = Evidence("fit.json", (2, 3, 4), 0.05, (1, 8), (1, 8), (1000.0, 4000.0))
    assert within_evidence(evidence, [(3, 4, 1.5)], context=16000.0) == []  # 5% x 4 < 33%
    (reason,) = within_evidence(evidence, [(3, 4, 1.5)], context=64000.0)  # 5% x 16 = 80%
    assert "16x in context" in reason and "context 1000-4000 tokens" in reason
