"""Issue 27, items 1, 2 and 7: the cycle's form chosen by leave-one-out error, intervals on
predictions, regret and the k the runs cannot tell apart; checked on cycles simulated from
each form, on simulated sweeps for the intervals' coverage, and on published k sweeps
(tests/data/published, each file's source in its header).  Other published sweeps are kept
out of the tests as a held-out set (benchmarks/data/published_heldout,
benchmarks/fit_heldout.py)."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.core.errors import BreakevenError
from breakeven.fitting.fit import CYCLE_FORMS, fit, fit_file
from breakeven.fitting.holdout import held_out, summary
from breakeven.iotools.csvfile import read_measurements

PUBLISHED = Path(__file__).parent / "data" / "published"
K_SWEEPS = [
    PUBLISHED / "vllm_issue20780_llama31_8b_eagle_bs1.csv",
    PUBLISHED / "qwen38mtp_rtx5090_powercap_mtp_nmax_sweep.csv",
    PUBLISHED / "llamacpp_pr22673_qwen36_35b_a3b_mtp_nmax_sweep.csv",
    PUBLISHED / "vllm_club3090_issue1052_qwen38_27b_int4_mtp_ksweep.csv",
]
STEP = 10.0


def sweep(cycle, ks, *, step=STEP, alpha=0.7, noise=0.0, rng=None, repeats=1):
    """Runs whose cycle at k is ``cycle(k)`` [ms], times a launch's noise (a relative
    Gaussian), with a baseline of ``step``."""
    rows = [{"model": "m", "num_spec_tokens": 0, "tok_s": 1000.0 / step}]
    for k in ks:
        tau = (1 - alpha ** (k + 1)) / (1 - alpha)
        for _ in range(repeats):
            c = cycle(k) * (1 + (rng.normal(0, noise) if noise else 0.0))
            rows.append(
                {
                    "model": "m",
                    "spec_method": "eagle",
                    "num_spec_tokens": k,
                    "accept_len": tau,
                    "tok_s": 1000.0 * tau / c,
                }
            )
    return pd.DataFrame(rows)


FORMS = {
    "leviathan": lambda c, _o, _q: lambda k: STEP * (1 + c * k),
    "linear": lambda c, o, _q: lambda k: STEP + o + STEP * c * k,
    "curved": lambda c, o, q: lambda k: STEP + o + STEP * c * k + q * k * k,
}


@settings(max_examples=30, deadline=None)
@given(
    form=st.sampled_from(sorted(FORMS)),
    c=st.floats(0.02, 0.4),
    overhead=st.floats(1.0, 4.0),
    curvature=st.floats(0.05, 0.3),
    ks=st.lists(st.integers(1, 10), min_size=4, max_size=7, unique=True),
)
def test_exact_cycles_of_each_form_are_held_out_exactly_by_the_form_chosen(
    form, c, overhead, curvature, ks
):
    truth = FORMS[form](c, overhead, curvature)
    (g,) = fit(sweep(truth, ks)).groups
    chosen = {x.form: x for x in g.forms}[g.cycle_form]
    # The chosen form holds every k out exactly, and so predicts every k, and beyond.
    assert chosen.held_out_max < 1e-6, (form, g.cycle_form, g.forms)
    for k in [*ks, max(ks) + 3]:
        assert g.cycle_ms(k) == pytest.approx(truth(k), rel=1e-6)
    # The true form's own error is 0 too, and no form with more parameters is chosen over a
    # simpler one that holds out as well.
    assert {x.form: x for x in g.forms}[form].held_out_max < 1e-6
    order = list(CYCLE_FORMS)
    assert order.index(g.cycle_form) <= order.index(form)


def test_a_form_with_too_few_k_says_so_and_is_not_chosen():
    (g,) = fit(sweep(FORMS["linear"](0.1, 4.0, 0), [2, 4])).groups
    by_form = {x.form: x for x in g.forms}
    assert by_form["curved"].why == "needs 4 k with a cycle for a held-out error, has 2"
    assert by_form["linear"].why == "needs 3 k with a cycle for a held-out error, has 2"
    assert math.isnan(by_form["curved"].held_out_rms)
    # The step is 4 ms (40%) off the runs' line: the forms through it hold out badly (more
    # than OFF_THE_LINE), and the line through the two k is fitted, said to be unchecked.
    assert g.cycle_form == "linear" and "no held-out k checks" in g.form_reason
    # Without a baseline the forms through the step have nothing to go through.
    data = sweep(FORMS["linear"](0.1, 2.0, 0), [2, 4, 6])
    (g,) = fit(data[data["num_spec_tokens"] > 0]).groups
    assert {x.form: x.why for x in g.forms}["leviathan"] == "needs a baseline's step"
    with pytest.raises(BreakevenError, match="cycle_form: got 'cubic'"):
        fit(data, cycle_form="cubic")


def test_a_power_capped_convex_cycle_is_found_curved_and_a_concave_one_held_flat():
    convex = FORMS["curved"](0.05, 1.0, 0.25)
    (g,) = fit(sweep(convex, [1, 2, 3, 4, 5, 6], noise=0.003, rng=np.random.default_rng(1))).groups
    assert g.cycle_form == "curved" and g.coefficients["curvature_ms"] > 0

    # A concave curve never falls as k grows: it is held flat past its top.
    def concave(k):
        return STEP + 1 + 2.0 * k - 0.15 * k * k

    (g,) = fit(sweep(concave, [1, 2, 3, 4, 5, 6])).groups
    assert g.cycle_form == "curved" and g.coefficients["curvature_ms"] < 0
    top = 2.0 / 0.3
    assert g.cycle_ms(20) == pytest.approx(g.cycle_ms(top)) and g.cycle_ms(7) >= g.cycle_ms(6)


def test_the_intervals_hold_the_truth_on_simulated_sweeps():
    # 300 sweeps from the three forms with 2% launch noise per run: every k a fit did not see
    # (the between and extrapolated protocols) is inside its interval at least 90% of the time.
    rng = np.random.default_rng(27)
    covered, total = 0, 0
    for i in range(300):
        form = sorted(FORMS)[i % 3]
        truth = FORMS[form](rng.uniform(0.03, 0.3), rng.uniform(0.5, 3), rng.uniform(0.02, 0.15))
        ks = sorted(rng.choice(np.arange(1, 9), size=int(rng.integers(3, 6)), replace=False))
        data = sweep(truth, [int(k) for k in ks], noise=0.02, rng=rng)
        for x in held_out(data):
            if x.covered is not None:
                covered += x.covered
                total += 1
    assert total > 500
    assert covered / total >= 0.9, covered / total


def test_published_k_sweeps_by_protocol():
    # Fitted on the smallest and largest k (between) and on the two smallest (extrapolated):
    # 4 sweeps, 8 groups (a laptop GPU with offload, an RTX 5090 at five power caps, two
    # RTX 3090s on vLLM, a GPU vLLM issue 20780 does not name), 31 k predicted each way.
    # Measured: between median 1.6%, worst 4.0%; extrapolated median 2.1%, worst 12.5% (issue
    # 27's target is 10%: missed by the EAGLE-3 sweep, whose cycle bends after K = 4); the
    # intervals hold 90% and 100% of the measured speedups.
    results = []
    for path in K_SWEEPS:
        data, _ = read_measurements(path)
        results += held_out(data)
    s = summary(results)
    assert s["between"]["median_error"] < 0.03 and s["between"]["worst_error"] < 0.08
    assert s["extrapolated"]["median_error"] < 0.03
    assert s["between"]["covered"] >= 0.9 and s["extrapolated"]["covered"] >= 0.9


@pytest.mark.parametrize("path", sorted(PUBLISHED.glob("*.csv")), ids=lambda p: p.name)
def test_each_published_table_reads_the_same_without_our_header(path, tmp_path):
    bare = tmp_path / path.name
    text = path.read_text().splitlines()
    assert text[0].startswith("# source: https://github.com/")
    bare.write_text("".join(line + "\n" for line in text if not line.startswith("#")))

    def groups(p):
        # A note names the rows' lines in its file: the header's lines shift them.
        out = json.dumps(fit_file(str(p)).to_dict()["groups"])
        return re.sub(r"\(lines? \d+( and \d+| to \d+)?\)", "(lines)", out)

    assert groups(bare) == groups(path)


def test_an_acceptance_rate_gives_accept_len_with_a_note():
    # llama.cpp's sweeps publish accepted / drafted only: accept_len = 1 + k x rate.
    path = PUBLISHED / "llamacpp_pr22673_qwen36_35b_a3b_mtp_nmax_sweep.csv"
    result = fit_file(str(path))
    assert any("accept_len = 1 + k x acceptance_rate" in n for n in result.notes)
    (g,) = result.groups
    by_k = {r.k: r for r in g.by_k}
    assert by_k[2].accept_len == pytest.approx(1 + 2 * 0.815)


def test_regret_and_the_k_the_runs_cannot_tell_apart():
    # vLLM issue 20780's EAGLE-3: k = 4 is best, k = 3 and 5 give up 0.3% each, well inside
    # the interval: the runs cannot tell them from k = 4.  EAGLE-1's best, k = 3, is told
    # from k = 6 and 7 (8% and 17% slower).
    result = fit_file(str(K_SWEEPS[0]))
    e1, e3 = sorted(result.groups, key=lambda g: g.spec_method)
    by_k = {r.k: r for r in e3.by_k}
    assert e3.best_k == 4 and by_k[4].regret == 0
    assert 0 < by_k[3].regret < 0.01 and 0 < by_k[5].regret < 0.01
    assert {3, 5} <= set(e3.close_k)
    assert 6 not in e1.close_k and 7 not in e1.close_k
    for g in (e1, e3):
        best = {r.k: r for r in g.by_k}[g.best_k]
        for r in g.by_k:
            assert r.regret == pytest.approx(1 - r.predicted_speedup / best.predicted_speedup)
            assert (r.k in g.close_k) == (
                r.k != g.best_k and r.predicted_high >= best.predicted_low
            )


def test_the_cli_prints_each_forms_error_and_the_interval(tmp_path):
    r = run_cli(["fit", str(K_SWEEPS[0]), "--wide"])
    assert r.exit_code == 0, r.output
    assert "cycle form: a curve a + b k + c k^2, the least held-out error" in r.output
    assert (
        "held-out error RMS by form: leviathan 4.8%; anchored 3.4%; linear 2.4%; curved 1.4%"
        in (r.output)
    )
    assert "best k 4: 1.730x predicted (1.669-1.790)" in " ".join(r.output.split())
    r = run_cli(["fit", str(K_SWEEPS[0]), "--json", "--cycle-form", "linear"])
    assert r.exit_code == 0, r.output
    groups = json.loads(r.stdout)["groups"]
    assert {g["cycle_form"] for g in groups} == {"linear"}
    row = groups[0]["by_k"][0]
    assert row["predicted_low"] < row["predicted_speedup"] < row["predicted_high"]
    r = run_cli(["fit", str(K_SWEEPS[0]), "--cycle-form", "cubic"])
    assert r.exit_code == 2 and "--cycle-form" in r.output and "Traceback" not in r.output


def test_a_curved_fit_file_prices_predict_optimize_and_plot_check(tmp_path):
    out = tmp_path / "fit.json"
    r = run_cli(["fit", str(K_SWEEPS[0]), "--out", str(out)])
    assert r.exit_code == 0, r.output
    groups = json.loads(out.read_text())["groups"]
    number = 1 + [g["spec_method"] for g in groups].index("eagle3")
    curved = groups[number - 1]
    assert curved["cycle_form"] == "curved" and curved["coefficients"]["curvature_ms"] < 0
    r = run_cli(
        [
            "predict",
            "--fit-file",
            str(out),
            "--fit-group",
            str(number),
            "-k",
            "4",
            "--accept-len",
            "3.08",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    predicted = json.loads(r.stdout)
    speedup = predicted.get("speedup", predicted.get("result", {}).get("speedup"))
    assert speedup == pytest.approx(3.08 * 7.07 / 12.590, rel=2e-3)
    r = run_cli(["optimize", "--fit-file", str(out), "--fit-group", str(number), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["best_k"] >= 1


def test_implausible_acceptance_and_launches_pooled_over_k_are_flagged_with_lines(tmp_path):
    # Issue 27, finding 5: an accept_len above k + 1 (line 3), one rising by more than the
    # draft tokens added (k = 2 to 3: +1.6), and a launch with runs at two k.
    runs = tmp_path / "runs.csv"
    runs.write_text(
        "model,hardware,concurrency,num_spec_tokens,tok_s,accept_len,launch_id\n"
        "m,h,1,0,100,,a\n"
        "m,h,1,1,150,2.5,b\n"
        "m,h,1,2,160,2.2,c\n"
        "m,h,1,3,180,3.8,c\n"
    )
    result = fit_file(str(runs))
    (g,) = result.groups
    said = [n for n in g.notes if n.startswith("implausible")]
    assert any("accept_len 2.500 at k = 1 is above k + 1 = 2 (line 3)" in n for n in said)
    assert any("rises by 1.600 from k = 2 to k = 3 (lines 4 and 5)" in n for n in said)
    (pooled,) = [n for n in result.notes if "launch c has runs at k = 2, 3" in n]
    assert "(lines 4 to 5)" in pooled
    # Exact runs of one launch per k raise none of these.
    (g,) = fit(sweep(FORMS["linear"](0.1, 1.0, 0), [1, 2, 4, 6])).groups
    assert not [n for n in g.notes if n.startswith("implausible")]


def test_a_cycle_growing_slower_with_batch_than_the_step_is_flagged_for_a_dense_model(tmp_path):
    # The plain step grows 2x from batch 1 to 8, k = 3's cycle 1.2x: a dense model's verify of
    # 8 x 4 tokens cannot grow slower than its decode of 8.  With --experts it is expected.
    runs = tmp_path / "runs.csv"
    runs.write_text(
        "model,hardware,concurrency,num_spec_tokens,spec_method,tok_s,accept_len\n"
        "m,h,1,0,,100,\n"
        "m,h,8,0,,50,\n"
        "m,h,1,3,eagle,150,2.5\n"
        "m,h,8,3,eagle,125,2.5\n"
    )
    (said,) = [n for n in fit_file(str(runs)).notes if n.startswith("implausible")]
    assert "eagle at k = 3: the cycle grows 1.20x from batch 1 to 8, the plain step 2.00x" in said
    assert "(lines 4 and 5)" in said
    r = run_cli(["fit", str(runs), "--experts", "64", "--top-k", "8", "--json"])
    assert r.exit_code == 0, r.output
    assert not [n for n in json.loads(r.stdout)["notes"] if n.startswith("implausible")]


def test_optimize_and_predict_carry_the_fits_interval_and_regret(tmp_path):
    # Issue 27, items 2 and 7: with a fit file, optimize gives each k's regret and interval,
    # and names the k the fit cannot tell from the best; predict gives the speedup's interval.
    out = tmp_path / "fit.json"
    assert run_cli(["fit", str(K_SWEEPS[0]), "--out", str(out)]).exit_code == 0
    groups = json.loads(out.read_text())["groups"]
    e1 = 1 + [g["spec_method"] for g in groups].index("eagle")
    r = run_cli(["optimize", "--fit-file", str(out), "--fit-group", str(e1)])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    # (optimize takes accept_len from the fit's alpha: k = 3 is 1.582x here, 1.634x in fit.)
    assert "Its neighbours give up k = 2 3.1%, k = 4 1.1% (regret)." in said
    assert "error: 1.550-1.613x; the fit cannot tell k = 2, 4 from it." in said
    r = run_cli(["optimize", "--fit-file", str(out), "--fit-group", str(e1), "--json"])
    data = json.loads(r.stdout)
    best = {o["k"]: o for o in data["by_k"]}[data["best_k"]]
    assert best["regret"] == 0 and best["speedup_low"] < best["speedup"] < best["speedup_high"]
    for o in data["by_k"]:
        assert o["regret"] == pytest.approx(1 - o["speedup"] / best["speedup"])
        reaches = o["k"] != data["best_k"] and o["speedup_high"] >= best["speedup_low"]
        assert (o["k"] in data["close_k"]) == reaches
    # Beyond the measured k (2-7) the interval widens with the distance.
    widths = {o["k"]: o["speedup_high"] / o["speedup"] - 1 for o in data["by_k"]}
    assert widths[3] == pytest.approx(widths[7]) and widths[12] > 1.9 * widths[7]
    # Without a fit file: regret, no interval.
    plain = run_cli(
        ["optimize", "--alpha", "0.7", "--verify-ms", "12", "--step-ms", "10", "--json"]
    )
    rows = json.loads(plain.stdout)["by_k"]
    assert all("regret" in o and "speedup_low" not in o for o in rows)
    r = run_cli(
        [
            *("predict", "--fit-file", str(out), "--fit-group", str(e1), "-k", "3"),
            *("--accept-len", "2.29", "--json"),
        ],
    )
    p = json.loads(r.stdout)
    assert p["speedup_low"] < p["speedup"] < p["speedup_high"]
    assert p["speedup_high"] / p["speedup"] - 1 == pytest.approx(widths[3])


def test_each_schedule_range_names_its_runner_up_and_what_it_gives_up():
    from breakeven.model.costs import TableCost
    from breakeven.planning.schedule import plan

    curve = TableCost((1, 8, 64, 512), (10.0, 10.5, 14.0, 60.0))
    _, schedule = plan(curve, alpha=0.7, draft_step_ms=0.4, k_max=6, max_batch=96)
    grid = schedule.grid
    for r in schedule.ranges:
        assert r.runner_up is not None and r.runner_up != r.k
        assert 0 < r.runner_up_regret < 1
        # At a range of one batch, the runner-up is that batch's second best k, plain included.
        if r.first == r.last:
            i = grid.batches.index(r.first)
            speed = {0: 1.0, **dict(zip(grid.ks, grid.speedup[i], strict=True))}
            second = max((v, k) for k, v in speed.items() if k != r.k)
            assert r.runner_up == second[1]
            assert r.runner_up_regret == pytest.approx(1 - second[0] / speed[r.k])


CONTEXT_SWEEP = PUBLISHED / "bradrlaw_aiserver_qwen36_27b_q6k_v100_mtp_nmax_context_sweep.csv"


def test_runs_at_several_context_lengths_fit_how_the_step_and_cycle_grow():
    # Issue 27, item 4: a V100's llama.cpp MTP sweep at k = 0..4 over prompts of 500 to 32,765
    # tokens.  The step grows 0.25 ms per 1000 tokens of context and each draft token adds
    # 0.08 ms more to the cycle's growth; each context length, predicted from the others
    # (with its measured accept_len), is within 1.1% of its measured speedup.
    result = fit_file(str(CONTEXT_SWEEP))
    assert len(result.groups) == 7  # one per context length
    (c,) = result.contexts
    assert len(c.contexts) == 7 and c.contexts[0] == 500 and c.contexts[-1] == 32765
    assert c.step_ms_per_ktok == pytest.approx(0.25, abs=0.01)
    assert c.cycle_ms_per_ktok_per_k == pytest.approx(0.081, abs=0.01)
    assert c.held_out_max_rel_error < 0.015
    assert len(c.points) == 28
    # The fit's speedup at a context: step and cycle grown as fitted.
    at = {(p.context_tokens, p.k): p for p in c.points}
    p = at[(32765.0, 3)]
    assert c.speedup(3, p.accept_len, 32765) == pytest.approx(p.predicted_speedup)
    assert c.speedup(3, 3.0, 100_000) < c.speedup(3, 3.0, 1000)  # the gain falls with context
    # The k protocols run per context length (7 lengths x 2 protocols x 2 k held out).
    data, _ = read_measurements(CONTEXT_SWEEP)
    assert len(held_out(data)) == 28
    # No group is said to hold at its context only: the context fit covers them.
    assert not any("hold at that context only" in n for g in result.groups for n in g.notes)


def test_runs_at_one_context_length_say_their_prediction_holds_there_only(tmp_path):
    data, _ = read_measurements(CONTEXT_SWEEP)
    one = data[data["context_tokens"] == 4091]
    (g,) = fit(one).groups
    assert g.context_tokens == pytest.approx(4091)
    assert any(
        "about 4091 tokens of context: the predictions hold at that context only" in n
        for n in g.notes
    )
    assert not fit(one).contexts


def test_bench_records_each_requests_context(tmp_path):
    # The fake server's usage says 5 prompt tokens: a request of 40 completion tokens decoded
    # with 5 + 40 / 2 = 25 tokens in its cache on average.
    from breakeven.bench.stream import RequestResult

    r = RequestResult(True, completion_tokens=40, prompt_tokens=5)
    assert r.context_tokens == 25
    assert math.isnan(RequestResult(True, completion_tokens=40).context_tokens)


def test_predict_and_optimize_price_another_context_from_the_context_fit(tmp_path):
    out = tmp_path / "fit.json"
    r = run_cli(["fit", str(CONTEXT_SWEEP), "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    number = 1 + [g["context_tokens"] for g in data["groups"]].index(4091)
    (c,) = data["contexts"]
    a, b = c["step_ms_per_ktok"] / 1000, c["cycle_ms_per_ktok_per_k"] / 1000

    def predict(*extra):
        args = ["predict", "--fit-file", str(out), "--fit-group", str(number), "-k", "3"]
        r = run_cli([*args, "--accept-len", "3.334", *extra, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    here, there = predict(), predict("--context", "32765")
    shift = 32765 - 4091
    assert there["step_ms"] == pytest.approx(here["step_ms"] + a * shift)
    assert there["verify_ms"] == pytest.approx(here["verify_ms"] + (a + 3 * b) * shift)
    # The gain falls with the context; the cycle predicted at 32,765 tokens is within 3% of
    # the sweep's own run there (k = 3: 2.062x at accept_len 3.751).
    assert there["speedup"] < here["speedup"]
    at = next(p for p in c["points"] if p["context_tokens"] == 32765 and p["k"] == 3)
    ratio = at["measured_speedup"] / at["accept_len"]
    assert there["speedup"] / 3.334 == pytest.approx(ratio, rel=0.03)
    r = run_cli(
        ["optimize", "--fit-file", str(out), "--fit-group", str(number), "--context", "32765"]
    )
    assert r.exit_code == 0, r.output
    # A fit without runs at two context lengths, or no fit file: one line, exit 2.
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({**data, "contexts": []}))
    r = run_cli(
        [
            *("predict", "--fit-file", str(bare), "--fit-group", str(number), "-k", "3"),
            *("--accept-len", "3", "--context", "9000"),
        ],
    )
    assert r.exit_code == 2 and "about 4091 tokens of context only" in r.output
    assert r.output.count("\n") == 1
    r = run_cli(
        [
            "predict",
            "-k",
            "3",
            "--accept-len",
            "2",
            "--step-ms",
            "5",
            "--verify-ms",
            "9",
            "--context",
            "10",
        ],
    )
    assert r.exit_code == 2 and "--context needs --fit-file" in r.output


def test_a_levels_requests_of_different_lengths_are_one_context():
    # A bench level's requests stop at different lengths: their contexts (prompt and half
    # the completion) run from 15 to 45 tokens, yet the level is one run at one context; runs
    # at the same short prompts are one group, the baseline their step (the real llama.cpp
    # fit in tests/test_llamacpp.py found this).
    rows = []
    for run, k, rate in (("base", 0, 100.0), ("k2", 2, 150.0), ("k3", 3, 160.0)):
        for i, context in enumerate((15, 25, 45, 30)):
            rows.append(
                {
                    "model": "m",
                    "run_id": run,
                    "num_spec_tokens": k,
                    "tok_s": rate + i,
                    "accept_len": None if k == 0 else 1.5 + 0.4 * k,
                    "context_tokens": context,
                }
            )
    (g,) = fit(pd.DataFrame(rows)).groups
    assert g.step_ms > 0 and [r.k for r in g.by_k] == [2, 3]
    # Runs a doubling apart are two lengths: k = 3 has no baseline at its own.
    data = pd.DataFrame(rows).assign(
        context_tokens=lambda d: d["context_tokens"] * (1 + (d["run_id"] == "k3"))
    )
    assert len(fit(data).groups) == 2
