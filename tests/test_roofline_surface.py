"""The roofline form of the surface across batch sizes (issue 41): runs simulated from a known
roofline are predicted at batch sizes not run, a fit file keeps the roof, and ``fit
--model-config`` refuses what it cannot use in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from breakeven.fitting.batch_holdout import BATCH_PROTOCOLS, batch_summary, held_out_batches
from breakeven.fitting.fit import fit
from breakeven.fitting.roofs import roof_source
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.modelconfig import read_model_config
from breakeven.model.roof import Roof
from breakeven.model.surface import BatchSurface, MoE
from tests.cli_checks import run_cli

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "benchmarks" / "data" / "model_configs"
QWEN8B_A30 = (
    ROOT
    / "benchmarks"
    / "data"
    / "published_batch"
    / ("dsparkbench_qwen3_8b_a30_dspark_k7_batch.csv")
)


def _truth(roof: Roof, moe: MoE | None, overhead: float, per_seq: float, draft_step: float):
    """A known world: the forward and the cycle as the roofline form writes them."""
    loaded = moe.loaded if moe else None

    def forward(b, q):
        return overhead + per_seq * b + roof.ms(b, q, loaded)

    def cycle(b, k):
        return forward(b, k + 1) + k * draft_step

    return forward, cycle


def _runs(forward, cycle, baselines, spec, ks, tau=lambda k: 1 + 0.8 * k):
    rows = [
        {
            "model": "m",
            "hardware": "h",
            "concurrency": b,
            "num_spec_tokens": 0,
            "tok_s": 1000 / forward(b, 1),
        }
        for b in baselines
    ]
    rows += [
        {
            "model": "m",
            "hardware": "h",
            "spec_method": "eagle3",
            "concurrency": b,
            "num_spec_tokens": k,
            "accept_len": tau(k),
            "tok_s": 1000 * tau(k) / cycle(b, k),
        }
        for b in spec
        for k in ks
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "case",
    [
        # dense: Qwen3-8B-like on an H100 (4.5 ms of weights, 0.0166 ms of FLOPs a token)
        ("dense", Roof(4.5, 0.0, 0.0, 0.0166, 1 / 0.7, 1 / 0.45, "sim"), None),
        # MoE: 128 experts, top 8 (a 30B-A3B-like model): experts dominate the reads
        ("moe", Roof(0.9, 0.012, 0.0, 0.0040, 1 / 0.75, 1 / 0.35, "sim"), MoE(128, 8)),
    ],
    ids=lambda c: c[0],
)
def test_runs_from_a_known_roofline_are_predicted_at_batches_not_run(case):
    """Fitted on baselines at batches 1 and 8 and speculation at one batch size (32, where
    the verify of k + 1 tokens nears the ridge), the roofline form predicts batches 2-64
    within 3%, from memory-bound to compute-bound, with the efficiencies unknown to it."""
    _, roof, moe = case
    forward, cycle = _truth(roof, moe, overhead=1.2, per_seq=0.05, draft_step=0.6)
    data = _runs(forward, cycle, baselines=(1, 8), spec=(32,), ks=(1, 3, 5, 7))
    prior = Roof(roof.weights_ms, roof.expert_ms, roof.kv_ms, roof.compute_ms, source="sim")
    (s,) = fit(data, moe=moe, roof_for=lambda *_: prior).surfaces
    assert s.roof is not None, s.notes
    bound = set()
    for b in (2, 4, 16, 32, 64):
        for k in (1, 3, 7):
            predicted = (1 + 0.8 * k) * float(s.forward_ms(b, 1)) / float(s.cycle_ms(b, k))
            measured = (1 + 0.8 * k) * forward(b, 1) / cycle(b, k)
            assert predicted == pytest.approx(measured, rel=0.03), (b, k)
            bound.add(s.roof.bound(b, k + 1, moe.loaded if moe else None))
    assert bound == {"memory", "compute"}  # the prediction crossed the ridge


def test_a_fit_file_keeps_the_roof_and_batch_prices_with_it(tmp_path):
    out = tmp_path / "fit.json"
    config = CONFIGS / "qwen3-8b.json"
    runs = tmp_path / "runs.csv"
    data, _ = read_measurements(QWEN8B_A30)
    # speculation at batch 1 only: the runs cannot test the forms, so the roof is taken
    data[(data["num_spec_tokens"] == 0) | (data["concurrency"] == 1)].to_csv(runs, index=False)
    r = run_cli(["fit", str(runs), "--model-config", str(config), "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "roof(B, q)" in text and "roofline form (the model's config on NVIDIA A30" in text
    saved = json.loads(out.read_text())["surfaces"][0]
    assert saved["roof"]["compute_ms"] > 0 and saved["roof"]["memory_scale"] >= 1
    surface = BatchSurface.from_dict(saved)
    assert surface.roof is not None
    (fitted,) = fit(
        read_measurements(runs)[0], roof_for=roof_source(read_model_config(str(config)))
    ).surfaces
    for b in (1, 4, 16, 64):
        assert float(surface.cycle_ms(b, 7)) == pytest.approx(float(fitted.cycle_ms(b, 7)))
    batch = ["batch", "--fit-file", str(out), "-k", "7", "--accept-len", "2.6", "--json"]
    r = run_cli(batch)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["speedup_by_batch"]
    assert all(math.isfinite(x["speedup"]) for x in rows)


def test_fit_says_the_form_and_how_its_intervals_held():
    config = CONFIGS / "qwen3-8b.json"
    r = run_cli(["fit", str(QWEN8B_A30), "--model-config", str(config)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "on the speculative batch sizes left out one at a time," in text
    assert "measured speedups inside their interval, median half-width" in text
    assert "form" in text and ("roofline form (" in text or "additive form" in text)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--accelerator", "H100"], "--accelerator needs --model-config"),
        (["--weight-bits", "4"], "--weight-bits needs --model-config"),
        (
            ["--model-config", "CONFIG", "--accelerator", "a potato"],
            "--accelerator: got 'a potato'",
        ),
        (["--model-config", "MISSING"], "--model-config: cannot read"),
        (["--model-config", "NOTJSON"], "--model-config:"),
    ],
)
def test_fit_refuses_what_the_roofline_cannot_use_in_one_line(tmp_path, args, named):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    swap = {
        "CONFIG": str(CONFIGS / "qwen3-8b.json"),
        "MISSING": str(tmp_path / "none.json"),
        "NOTJSON": str(bad),
    }
    r = run_cli(["fit", str(QWEN8B_A30), *[swap.get(a, a) for a in args]])
    assert r.exit_code == 2, r.output
    assert named in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output


def test_every_protocol_predicts_a_published_sweep_with_intervals():
    data, _ = read_measurements(QWEN8B_A30)
    config = read_model_config(str(CONFIGS / "qwen3-8b.json"))
    results = held_out_batches(data, roof_for=roof_source(config))
    summary = batch_summary(results)
    assert set(summary) == set(BATCH_PROTOCOLS)
    for x in results:
        assert x.measured > 0 and x.predicted > 0
        assert x.low <= x.predicted <= x.high
        assert x.protocol == "transfer" or x.batch not in x.fitted_on
    # transfer: baselines at 1 and the batch asked for, speculation at 1 only
    assert {x.fitted_on for x in results if x.protocol == "transfer"} == {
        (1, b) for b in (2, 4, 8, 16)
    }


def test_a_roof_from_a_fit_file_that_is_not_one_is_none():
    assert Roof.from_dict(None) is None
    assert Roof.from_dict({"weights_ms": "x"}) is None
    good = Roof(1.0, 0.0, 0.0, 0.01, 1.2, 2.0, "s")
    assert Roof.from_dict(good.to_dict()) == good
    assert Roof.from_dict({**good.to_dict(), "memory_scale": -1}) is None
    assert Roof.from_dict({**good.to_dict(), "compute_ms": np.inf}) is None


def test_tensor_parallel_links_price_each_tokens_all_reduces():
    """Two all-reduces a layer of hidden_size 16-bit activations, a ring moving 2 (N - 1) / N
    of them: Qwen3-32B (64 layers, hidden 5120) at TP8 moves 2.29 MB a token per device, over
    PCIe (25 GB/s) 0.092 ms; on one device nothing."""
    from breakeven.fitting.roofs import FAST_LINK_GBS, PCIE_GBS, allreduce_bytes, link_gbs

    shape = read_model_config(str(CONFIGS / "qwen3-32b.json"))
    assert allreduce_bytes(shape, 8) == 2 * 64 * 5120 * 2 * 2 * 7 / 8
    assert link_gbs("NVIDIA A30", "8x NVIDIA A30 24GB (TP=8)") == PCIE_GBS
    assert link_gbs("NVIDIA H100 SXM", "8x H100 SXM") == FAST_LINK_GBS
    assert link_gbs("NVIDIA RTX PRO 6000 Blackwell", "8x RTX PRO 6000 NVLink") == FAST_LINK_GBS
    roof_for = roof_source(shape)
    tp8 = roof_for("Qwen3-32B", "8x NVIDIA A30 24GB (TP=8)", math.nan)
    one = roof_for("Qwen3-32B", "1x NVIDIA A30 24GB", math.nan)
    assert tp8.link_ms == pytest.approx(allreduce_bytes(shape, 8) / 25e9 * 1e3)
    assert tp8.link_ms == pytest.approx(0.0917, abs=1e-4)
    assert one.link_ms == 0.0 and "links" not in one.source and "25 GB/s links" in tp8.source
    assert tp8.per_token_prior()[0] == tp8.link_ms and one.per_token_prior()[0] == 0.0


def test_under_tensor_parallelism_the_baselines_growth_is_read_per_token():
    """Baselines at batches 1 and 8 and speculation at batch 1 cannot tell a cost per sequence
    from one per token.  On one device the fit reads the baselines' growth beyond the roof as
    per sequence (a verify at batch 8 costs about a step more); at TP8 over PCIe, where each
    token's all-reduces cost about what the baselines grew by, as per token (a verify of 8
    tokens at batch 8 costs the growth 8 times over)."""
    rows = [(1, 20.0), (8, 20.0 + 7 * 0.1)]  # the step grows 0.1 ms a sequence (or token)
    data = pd.DataFrame(
        [
            {
                "model": "m",
                "hardware": "h",
                "concurrency": b,
                "num_spec_tokens": 0,
                "tok_s": 1000 / t,
            }
            for b, t in rows
        ]
        + [
            {
                "model": "m",
                "hardware": "h",
                "spec_method": "e",
                "concurrency": 1,
                "num_spec_tokens": 7,
                "accept_len": 3.0,
                "tok_s": 1000 * 3.0 / 27.0,
            }
        ]
    )
    growth = {}
    for name, link in (("one", 0.0), ("tp8", 0.1)):
        prior = Roof(8.0, 0.0, 0.0, 0.05, source="sim", link_ms=link)
        (s,) = fit(data, roof_for=lambda *_, p=prior: p).surfaces
        growth[name] = float(s.forward_ms(8, 8) - s.forward_ms(8, 1))
    assert growth["one"] < 0.3 * growth["tp8"]
    assert growth["tp8"] == pytest.approx(7 * 8 * 0.1, rel=0.35)
