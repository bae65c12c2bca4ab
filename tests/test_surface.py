"""Batch is not tokens: the forward surface t(B, q) fitted across batch sizes, on runs
simulated from a known surface and on two public Qwen3-30B-A3B batch sweeps with EAGLE-3
tree drafts (Tencent/AngelSlim#163, sgl-project/SpecForge#339)."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.fitting.fit import fit
from breakeven.iotools.csvfile import read_measurements
from breakeven.model.costs import TableCost
from breakeven.model.surface import TERMS, BatchSurface, MoE

PUBLISHED = Path(__file__).resolve().parent / "data" / "published"
ANGELSLIM = PUBLISHED / "angelslim_issue163_qwen3_30b_a3b_eagle3_batch.csv"
SPECFORGE = PUBLISHED / "specforge_issue339_qwen3_30b_a3b_eagle3_batch.csv"
QWEN3_MOE = MoE(experts=128, top_k=8)  # Qwen3-30B-A3B: 128 routed experts, 8 per token


def speedup_errors(surface, data):
    """Per speculative row: (batch, steps, topk, verify tokens) and predicted / measured - 1,
    each against the measured baseline at its batch size."""
    steps = {
        int(r.concurrency): 1000 / r.tok_s for r in data[data["num_spec_tokens"] == 0].itertuples()
    }
    out = {}
    for r in data[data["num_spec_tokens"] > 0].itertuples():
        measured = r.accept_len * steps[int(r.concurrency)] / (1000 * r.accept_len / r.tok_s)
        cycle = float(
            surface.cycle_ms(r.concurrency, r.num_spec_tokens, r.spec_topk, r.verify_tokens)
        )
        predicted = r.accept_len * steps[int(r.concurrency)] / cycle
        key = (int(r.concurrency), int(r.num_spec_tokens), int(r.spec_topk), int(r.verify_tokens))
        out[key] = predicted / measured - 1
    return out


def test_a_known_surface_is_recovered_and_kv_is_read_per_sequence():
    truth = BatchSurface(
        "m",
        "h",
        "eagle",
        dict(zip(TERMS, (5.0, 0.0, 0.4, 0.02, 0.8, 0.01, 0.3), strict=True)),
        (),
        None,
        0.0,
        (),
        0.0,
        (),
    )
    rows = [
        {
            "model": "m",
            "hardware": "h",
            "concurrency": b,
            "num_spec_tokens": 0,
            "tok_s": 1000 / float(truth.forward_ms(b, 1)),
        }
        for b in (1, 2, 4, 8, 16, 32, 64)
    ]
    for b in (1, 8, 32):
        for k in (2, 4):
            cycle = float(truth.cycle_ms(b, k))
            rows.append(
                {
                    "model": "m",
                    "hardware": "h",
                    "concurrency": b,
                    "num_spec_tokens": k,
                    "spec_method": "eagle",
                    "accept_len": 2.5,
                    "tok_s": 2500 / cycle,
                }
            )
    (chains,) = fit(pd.DataFrame(rows)).surfaces
    # Chains alone (topk 1, k + 1 verify tokens): compute per token is kv per sequence plus
    # drafting per token plus speculation per sequence, so those are not told apart (and
    # said), yet every chain's cycle is predicted exactly.
    assert any(m.startswith("draft_token_ms") and "not separable" in m for m in chains.merged)
    for b, k in ((2, 3), (64, 6), (128, 1)):
        assert float(chains.cycle_ms(b, k)) == pytest.approx(float(truth.cycle_ms(b, k)), rel=1e-6)
    # Trees (topk > 1, verify tokens apart from k + 1) separate every term.
    for b in (1, 8, 32):
        for k, topk, n in ((2, 2, 4), (3, 4, 8), (4, 1, 5)):
            cycle = float(truth.cycle_ms(b, k, topk, n))
            rows.append(
                {
                    "model": "m",
                    "hardware": "h",
                    "concurrency": b,
                    "num_spec_tokens": k,
                    "spec_method": "eagle",
                    "spec_topk": topk,
                    "verify_tokens": n,
                    "accept_len": 2.5,
                    "tok_s": 2500 / cycle,
                }
            )
    (surface,) = fit(pd.DataFrame(rows)).surfaces
    assert surface.merged == ()
    for name, value in truth.coefficients.items():
        assert surface.coefficients[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    # A verify of 64 sequences x 5 tokens reads the KV cache of 64 sequences: far cheaper than
    # a decode of 320 sequences, which is what a tokens,ms curve prices it as.
    verify = float(truth.forward_ms(64, 5))
    as_tokens = float(truth.forward_ms(64 * 5, 1))
    assert float(surface.forward_ms(64, 5)) == pytest.approx(verify, rel=0.02)
    assert as_tokens > 3 * verify


def test_angelslim_sweep_fitted_at_two_batch_sizes_predicts_the_others_within_15_percent():
    # The same tree (4 steps, topk 4, 16 verify tokens) at batch 1, 4, 8, 32 and 64: fitted
    # on the baselines and the runs at batch 1 and 8, it predicts 4, 32 and 64.
    data, _ = read_measurements(ANGELSLIM)
    tree = data[(data["num_spec_tokens"] == 0) | (data["verify_tokens"] == 16)]
    train = tree[(tree["num_spec_tokens"] == 0) | tree["concurrency"].isin([1, 8])]
    (surface,) = fit(train, moe=QWEN3_MOE).surfaces
    errors = speedup_errors(surface, tree)
    for batch in (4, 32, 64):
        assert abs(errors[(batch, 4, 4, 16)]) < 0.15, (batch, errors)  # -4%, +12%, -13%
    # Priced as a decode of B x 16 sequences on the baselines' tokens,ms line (the draft's
    # cost taken from batch 1), the same runs are off by far more.
    steps = tree[tree["num_spec_tokens"] == 0]
    line = TableCost(tuple(steps["concurrency"]), tuple(1000 / steps["tok_s"])).fit("linear")
    run = {int(r.concurrency): r for r in tree[tree["num_spec_tokens"] > 0].itertuples()}
    draft = 1000 * run[1].accept_len / run[1].tok_s - float(line(16))
    old = {
        b: (1000 * run[b].accept_len / run[b].tok_s) / (float(line(b * 16)) + draft) - 1
        for b in (4, 32, 64)
    }
    assert max(abs(e) for e in old.values()) > 2 * max(abs(errors[(b, 4, 4, 16)]) for b in old)


def test_batch_divides_by_the_measured_step_where_a_baseline_ran(tmp_path):
    # Issue 27, finding 3: fitted on the runs at batch 1 and 8 (and every baseline), batch
    # --fit-file predicts the tree at batch 32.  Against the fitted step t(32, 1) the
    # prediction was 17.5% off; against the measured baseline's step it is the surface's own
    # 11.9% (speedup_errors divides by the measured step).
    data, _ = read_measurements(ANGELSLIM)
    tree = data[(data["num_spec_tokens"] == 0) | (data["verify_tokens"] == 16)]
    train = tree[(tree["num_spec_tokens"] == 0) | tree["concurrency"].isin([1, 8])]
    runs = tmp_path / "train.csv"
    train.to_csv(runs, index=False)
    out = tmp_path / "fit.json"
    args = ["fit", str(runs), "--experts", "128", "--top-k", "8", "--out", str(out)]
    assert run_cli(args).exit_code == 0
    r = run_cli(
        [
            *("batch", "--fit-file", str(out), "--accept-len", "2.556", "-k", "4"),
            *("--topk", "4", "--verify-tokens", "16", "--max-batch", "64", "--json"),
        ],
    )
    assert r.exit_code == 0, r.output
    at = {p["batch"]: p for p in json.loads(r.stdout)["speedup_by_batch"]}
    measured = {int(x.concurrency): x.tok_s for x in tree.itertuples() if x.num_spec_tokens > 0}
    base = {int(x.concurrency): x.tok_s for x in tree.itertuples() if x.num_spec_tokens == 0}
    error = at[32]["speedup"] / (measured[32] / base[32]) - 1
    (surface,) = fit(train, moe=QWEN3_MOE).surfaces
    assert error == pytest.approx(speedup_errors(surface, tree)[(32, 4, 4, 16)], abs=0.01)
    # The same prediction against the fitted step: 17.5% off.
    fitted_step = at[32]["speedup"] * float(surface.forward_ms(32, 1)) / at[32]["step_ms"]
    assert abs(error) < 0.13 and fitted_step / (measured[32] / base[32]) - 1 > 0.15


def test_angelslim_all_runs_within_15_percent_and_moe_routing_counts():
    data, _ = read_measurements(ANGELSLIM)
    (moe,) = fit(data, moe=QWEN3_MOE).surfaces
    assert max(abs(e) for e in speedup_errors(moe, data).values()) < 0.15  # at most 14%
    assert moe.moe == QWEN3_MOE and moe.coefficients["expert_ms"] > 0


def test_specforge_sweep_at_batch_4_within_15_percent():
    data, _ = read_measurements(SPECFORGE)
    (surface,) = fit(data, moe=QWEN3_MOE).surfaces
    errors = speedup_errors(surface, data)
    assert abs(errors[(4, 3, 1, 4)]) < 0.15 and abs(errors[(4, 3, 3, 8)]) < 0.15  # -11%, +9%
    # At batch 1 its trees disagree among themselves: topk 3 with 4 verify tokens ran faster
    # (207.62 tok/s) than topk 1 with the same steps and verify tokens (159.78), which no cost
    # that grows with topk can follow; those two runs are where the fit is furthest off.
    rate = {
        k: r.tok_s
        for k, r in zip(errors, data[data["num_spec_tokens"] > 0].itertuples(), strict=True)
    }
    assert rate[(1, 3, 3, 4)] > rate[(1, 3, 1, 4)]
    worst = sorted(errors, key=lambda k: -abs(errors[k]))[:2]
    assert set(worst) == {(1, 3, 1, 4), (1, 3, 3, 8)}


def test_batch_sweeps_a_fitted_surface(tmp_path):
    out = tmp_path / "fit.json"
    r = run_cli(["fit", str(ANGELSLIM), "--experts", "128", "--top-k", "8", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "across batch sizes 1, 4, 8, 32, 64" in r.output and "spec_seq_ms" in r.output
    sweep = [
        "batch",
        "--fit-file",
        str(out),
        "--accept-len",
        "2.55",
        "-k",
        "4",
        "--max-batch",
        "64",
    ]
    r = run_cli([*sweep, "--json"])
    assert r.exit_code == 0, r.output
    (surface,) = fit(read_measurements(ANGELSLIM)[0], moe=QWEN3_MOE).surfaces
    point = json.loads(r.stdout)["speedup_by_batch"][31]  # batch 32
    assert point["batch"] == 32
    assert point["cycle_ms"] == pytest.approx(float(surface.cycle_ms(32, 4)))
    # Issue 27, item 3: at a batch with a measured baseline the step is that baseline's
    # (1000 / 35.2594 tok/s), said so; between them, the fitted t(B, 1) scaled by the
    # measured steps' ratio to it, interpolated on log batch (batch 20 is between 8 and 32).
    assert point["step_ms"] == pytest.approx(1000 / 35.2594)
    other = json.loads(r.stdout)["speedup_by_batch"][19]  # batch 20: no baseline ran there
    steps = dict(surface.baseline_steps)
    ratio = {b: steps[b] / float(surface.forward_ms(b, 1)) for b in (8, 32)}
    share = math.log(20 / 8) / math.log(32 / 8)
    expected = ratio[8] + (ratio[32] - ratio[8]) * share
    assert other["step_ms"] == pytest.approx(float(surface.forward_ms(20, 1)) * expected)
    assert json.loads(r.stdout)["measured_steps"] == [1, 4, 8, 32, 64]
    text = run_cli(sweep).output
    assert "The plain step at batch 1, 4, 8, 32, 64 is the measured baseline's" in " ".join(
        text.split()
    )
    for args in (["--experts", "128"], ["--experts", "8", "--top-k", "9"]):
        bad = run_cli(["fit", str(ANGELSLIM), *args])
        assert bad.exit_code == 2 and bad.output.count("\n") == 1, bad.output
    both = run_cli(
        ["batch", "--fit-file", str(out), "--cost-curve", str(out), "--accept-len", "2", "-k", "3"],
    )
    assert both.exit_code == 2 and "cannot be given together" in both.output
    none = run_cli(["batch", "--accept-len", "2", "-k", "3"])
    assert none.exit_code == 2 and "--cost-curve" in none.output


def test_the_fixtures_as_published_without_our_header(tmp_path):
    for path in (ANGELSLIM, SPECFORGE):
        bare = tmp_path / path.name
        bare.write_text(
            "".join(
                line + "\n" for line in path.read_text().splitlines() if not line.startswith("#")
            )
        )
        a = fit(read_measurements(bare)[0], moe=QWEN3_MOE).to_dict()
        b = fit(read_measurements(path)[0], moe=QWEN3_MOE).to_dict()
        assert a["surfaces"] == b["surfaces"]


def test_batch_sweeps_a_tree_on_the_surface(tmp_path):
    out = tmp_path / "fit.json"
    assert (
        run_cli(
            ["fit", str(ANGELSLIM), "--experts", "128", "--top-k", "8", "--out", str(out)]
        ).exit_code
        == 0
    )
    args = [
        "batch",
        "--fit-file",
        str(out),
        "--accept-len",
        "2.553",
        "-k",
        "4",
        "--topk",
        "4",
        "--verify-tokens",
        "16",
        "--max-batch",
        "64",
        "--json",
    ]
    r = run_cli(args)
    assert r.exit_code == 0, r.output
    (surface,) = fit(read_measurements(ANGELSLIM)[0], moe=QWEN3_MOE).surfaces
    by_batch = {p["batch"]: p for p in json.loads(r.stdout)["speedup_by_batch"]}
    for b in (1, 4, 8, 32, 64):  # the tree the runs measured, at the batch sizes they ran
        assert by_batch[b]["cycle_ms"] == pytest.approx(float(surface.cycle_ms(b, 4, 4, 16)))
    curve = [
        "batch",
        "--cost-curve",
        str(PUBLISHED.parent.parent.parent / "data" / "llama3_8b_decode_curve.csv"),
    ]
    for extra, says in (
        (
            ["--accept-len", "2.5", "-k", "4", "--topk", "4", "--draft-step-ms", "1"],
            "drafting per cycle",
        ),
        (["--alpha", "0.7", "--topk", "4"], "describe one tree"),
        (["--accept-len", "2.5", "-k", "4", "--verify-tokens", "3"], "at least k + 1 = 5"),
    ):
        bad = run_cli([*curve, *extra])
        assert bad.exit_code == 2 and says in bad.output, bad.output


def test_ingest_stamps_a_tree_where_the_log_does_not_say(tmp_path):
    log = PUBLISHED.parent / "case_study" / "sglang_eagle3_k3.log"
    out = tmp_path / "tree.csv"
    r = run_cli(
        ["ingest", str(log), "-k", "4", "--topk", "4", "--verify-tokens", "16", "--out", str(out)],
    )
    assert r.exit_code == 0, r.output
    data, _ = read_measurements(out)
    assert set(data["spec_topk"]) == {4} and set(data["verify_tokens"]) == {16}
    assert set(data["num_spec_tokens"]) == {4}
    bad = run_cli(["ingest", str(log), str(log), "--topk", "1", "--topk", "2", "--topk", "3"])
    assert bad.exit_code == 2 and "--topk: given 3 times for 2 files" in bad.output


def test_batch_intervals_hold_the_measured_speedups_and_one_batch_is_said(tmp_path):
    # Issue 27, item 3: fitted on the tree's runs at batch 1 and 8 (and every baseline),
    # batch --fit-file predicts 4, 32 and 64 within 15% (-4%, +12%, -13%) and each measured
    # speedup lies in its interval; the interval widens with the doublings beyond batch 8.
    data, _ = read_measurements(ANGELSLIM)
    tree = data[(data["num_spec_tokens"] == 0) | (data["verify_tokens"] == 16)]
    for batches in ([1, 8], [8]):
        train = tree[(tree["num_spec_tokens"] == 0) | tree["concurrency"].isin(batches)]
        runs = tmp_path / "train.csv"
        train.to_csv(runs, index=False)
        out = tmp_path / "fit.json"
        args = ["fit", str(runs), "--experts", "128", "--top-k", "8", "--out", str(out), "--force"]
        r = run_cli(args)
        assert r.exit_code == 0, r.output
        one = "speculative runs at batch 8 only" in " ".join(r.output.split())
        assert one == (batches == [8])
        if one:
            continue
        r = run_cli(
            [
                *("batch", "--fit-file", str(out), "--accept-len", "2.556", "-k", "4"),
                *("--topk", "4", "--verify-tokens", "16", "--max-batch", "64", "--json"),
            ],
        )
        assert r.exit_code == 0, r.output
        at = {p["batch"]: p for p in json.loads(r.stdout)["speedup_by_batch"]}
        for x in tree[tree["num_spec_tokens"] > 0].itertuples():
            b = int(x.concurrency)
            base = float(
                tree[(tree["num_spec_tokens"] == 0) & (tree["concurrency"] == b)].tok_s.iloc[0]
            )
            measured = x.tok_s / base
            if b in (4, 32, 64):
                assert abs(at[b]["speedup"] / measured - 1) < 0.15, b
            assert at[b]["speedup_low"] <= measured <= at[b]["speedup_high"], b
        width = {b: at[b]["speedup_high"] / at[b]["speedup"] - 1 for b in (8, 16, 32, 64)}
        assert width[8] < width[16] < width[32] < width[64]


@pytest.mark.parametrize("batches", ["one", "two"])
def test_batch_intervals_cover_simulated_surfaces(batches):
    # Issue 27, item 2: surfaces simulated with speculation's own cost per cycle or per
    # sequence (which runs at one batch size cannot tell apart), 1% noise; fitted, then asked
    # for k = 3 at every other batch.  The intervals hold the truth at least 90% of the time
    # (measured: 360 of 360 with runs at one batch, 300 of 300 at two; they are wide, a median
    # of 0.86 and 1.15 times the prediction, because so little informs the terms).
    from breakeven.model.surface import SurfaceCost

    rng = np.random.default_rng(5)
    covered = total = 0
    for _ in range(60):
        w, kv, comp = rng.uniform(5, 20), rng.uniform(0.05, 0.5), rng.uniform(0.01, 0.2)
        draft, cost = rng.uniform(0.2, 2.0), rng.uniform(0.5, 5.0)
        per_sequence, alpha = rng.random() < 0.5, rng.uniform(0.5, 0.85)
        b0 = int(rng.choice([1, 4, 8, 16]))

        def forward(b, q, w=w, kv=kv, comp=comp):
            return w + kv * b + comp * b * q

        def cycle(b, k, draft=draft, cost=cost, per_sequence=per_sequence, b0=b0, f=forward):
            return f(b, k + 1) + draft * k + (cost * b / b0 if per_sequence else cost)

        def tau(k, alpha=alpha):
            return (1 - alpha ** (k + 1)) / (1 - alpha)

        rows = [
            {
                "model": "m",
                "concurrency": b,
                "num_spec_tokens": 0,
                "tok_s": 1000 / forward(b, 1) * (1 + rng.normal(0, 0.01)),
            }
            for b in (1, 2, 4, 8, 16, 32, 64)
        ]
        runs = [(b0, k) for k in (2, 3, 4, 5)] + ([(4 * b0, 3)] if batches == "two" else [])
        rows += [
            {
                "model": "m",
                "spec_method": "e",
                "concurrency": b,
                "num_spec_tokens": k,
                "accept_len": tau(k),
                "tok_s": 1000 * tau(k) / cycle(b, k) * (1 + rng.normal(0, 0.01)),
            }
            for b, k in runs
        ]
        (s,) = fit(pd.DataFrame(rows)).surfaces
        for b in (1, 2, 4, 8, 16, 32, 64):
            if b in {r[0] for r in runs}:
                continue
            c = float(s.cycle_ms(b, 3))
            predicted = tau(3) * s.step_ms(b)[0] / c
            low, high = SurfaceCost(s).speedup_range(b, predicted, c, 3)
            truth = tau(3) * forward(b, 1) / cycle(b, 3)
            covered += low <= truth <= high
            total += 1
    assert covered / total >= 0.9, (covered, total)


def test_schedule_from_a_fit_file_gives_each_batchs_interval(tmp_path):
    out = tmp_path / "fit.json"
    args = ["fit", str(ANGELSLIM), "--experts", "128", "--top-k", "8", "--out", str(out)]
    assert run_cli(args).exit_code == 0
    schedule = ["schedule", "--fit-file", str(out), "--engine", "sglang"]
    schedule += ["--accept-len-by-k", "2:2.0,3:2.3,4:2.5"]
    r = run_cli([*schedule, "--json"])
    assert r.exit_code == 0, r.output
    by_batch = json.loads(r.stdout)["by_batch"]
    for x in by_batch:
        if x["k"]:
            assert x["speedup_low"] <= x["speedup"] <= x["speedup_high"], x
        else:
            assert x["speedup_low"] == x["speedup_high"] == x["speedup"] == 1
    text = " ".join(run_cli(schedule).output.split())
    assert "Intervals of the predicted speedups, from the fit's held-out error" in text


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 9), seed=st.integers(0, 2**32 - 1), repeated=st.booleans())
def test_separability_of_every_held_out_set_at_once_is_each_sets_own(n, seed, repeated):
    """The surface's held-out fits ask, for each run left out, whether the rest still tell its
    terms apart: one stacked ``matrix_rank`` (issue 43) answers what one call a set did."""
    from breakeven.model.surface import TERMS, _separable

    rng = np.random.default_rng(seed)
    a = rng.random((n, len(TERMS)))
    if repeated and n > 1:
        a[1:, 2] = a[0, 2]  # a column that is constant but for one equation
    groups = [[0], [2, 3], [4], [6]]
    want = [
        bool(np.linalg.matrix_rank(np.delete(a, skip, axis=0)[:, [0, 2, 4, 6]]) == len(groups))
        for skip in range(n)
    ]
    assert _separable(a, list(range(n)), groups) == want
    assert _separable(a, list(range(n)), []) == [False] * n
