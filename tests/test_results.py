"""Every public result reports itself, as lmfit's do: ``report()`` is the very text the command
prints for the same inputs, ``_repr_html_()`` renders it in a notebook, ``to_dict()`` is strict
JSON and ``plot()`` draws on a matplotlib Axes (where a picture exists).

Inputs are the bundled data (data/, tests/data/) and the README's examples."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import matplotlib
import pytest
from cli_checks import run_cli

from breakeven import render
from breakeven.core.quantities import plain_json
from breakeven.fitting.fit import fit_file
from breakeven.fleet.view import FleetResult, Instance
from breakeven.iotools import read_cost_curve
from breakeven.measurements.check import check_file
from breakeven.measurements.compare import compare, parse_run
from breakeven.model.costs import TableCost
from breakeven.planning.batch import batch_sweep
from breakeven.planning.schedule import schedule_report
from breakeven.prediction.moe import moe_summary
from breakeven.prediction.optimize import optimize
from breakeven.prediction.predict import predict
from breakeven.prediction.sensitivity import sensitivity
from breakeven.prediction.tree import optimize_tree
from breakeven.render.report import check_page

matplotlib.use("Agg")
from matplotlib.axes import Axes

ROOT = Path(__file__).resolve().parent.parent
CURVE = str(ROOT / "data" / "llama3_8b_decode_curve.csv")
CASE_STUDY = str(ROOT / "data" / "case_study.csv")
# vLLM issue 20780: EAGLE on Llama 3.1 8B at batch 1 (tests/data/published/README.md).
ISSUE_20780 = str(
    ROOT / "tests" / "data" / "published" / "vllm_issue20780_llama31_8b_eagle_bs1.csv"
)
SGLANG = ROOT / "tests" / "data" / "case_study"


def printed(*args: str) -> str:
    """What the command prints to stdout, checked to succeed."""
    r = run_cli(list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def curve() -> TableCost:
    data, meta = read_cost_curve(CURVE)
    return TableCost(tuple(data["tokens"]), tuple(data["ms"]), source=meta["path"])


def strict_json(result) -> dict:
    """``to_dict()``, checked to be strict JSON (no NaN or infinity) that round-trips."""
    data = result.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    return data


def html_with(result, *numbers: str) -> str:
    page = result._repr_html_()
    assert page.lstrip().startswith("<") and all(n in page for n in numbers), page
    return page


def drawn(result) -> Axes:
    ax = result.plot()
    assert isinstance(ax, Axes) and ax.has_data()
    return ax


def test_prediction():
    p = predict(baseline_tok_s=62.9, verify_ms=28.7, draft_ms=1.2, accept_len=2.1)
    assert p.report() == printed(
        "predict",
        "--baseline-tok-s",
        "62.9",
        "--verify-ms",
        "28.7",
        "--draft-ms",
        "1.2",
        "--accept-len",
        "2.1",
    )
    strict_json(p)
    html_with(p, f"{p.speedup:.3f}", "Speculation pays")
    ax = drawn(p)
    assert any(line.get_gid() == "given" for line in ax.lines)


def test_optimize_result():
    r = optimize(alpha=0.8, cost_ratio=0.05)
    assert r.report() == printed("optimize", "--alpha", "0.8", "--cost-ratio", "0.05")
    data = strict_json(r)
    html_with(r, f"Best k: {data['best_k']}")
    ax = drawn(r)
    assert any(line.get_gid() == "best_k" for line in ax.lines)


def test_batch_result():
    r = batch_sweep(curve(), accept_len=2.1, k=3)
    assert r.report() == printed("batch", "--cost-curve", CURVE, "--accept-len", "2.1", "-k", "3")
    strict_json(r)
    html_with(r, f"Break-even batch: {r.breakeven_batch}")
    drawn(r)


def test_moe_summary():
    s = moe_summary(384, 8, 7, shared=1)
    assert s.report() == printed(
        "moe", "--experts", "384", "--top-k", "8", "--shared", "1", "--tokens", "7"
    )
    strict_json(s)
    html_with(s, f"{s['active_experts']:.2f}"[:4], "Mixture-of-Experts forward")


def test_tree_search():
    r = optimize_tree(verify_curve=curve(), alpha=0.8, draft_step_ms=0.5)
    assert r.report() == printed(
        "optimize", "--tree", "--cost-curve", CURVE, "--alpha", "0.8", "--draft-step-ms", "0.5"
    )
    strict_json(r)
    html_with(r, f"verify tokens {r.best.verify_tokens}", f"{r.best.speedup:.3f}x")


def test_sensitivity():
    """No command prints it (``plot sensitivity`` draws it): its report is its renderer's."""
    r = sensitivity(accept_len=2.1, step_ms=15.898, verify_ms=28.7, draft_ms=1.2)
    assert r.report() == render.sensitivity_text(r.to_dict())
    lines = r.report().splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["input"])
    assert r.rows[0].name in lines[head + 1]
    strict_json(r)
    html_with(r, f"{r.speedup:.3f}x", r.rows[0].name)
    drawn(r)


def measurements(tmp_path) -> str:
    """Three launches a side, with the cycle's cost (rows made for the test: the logic, not an
    engine's output)."""
    path = tmp_path / "runs.csv"
    rows = ["run_id,label,model,hardware,concurrency,num_spec_tokens,tok_s,accept_len,cycle_ms"]
    rows += [f"b{i},base,m,h,1,0,{t},," for i, t in enumerate((50, 51, 49))]
    rows += [f"s{i},k3,m,h,1,3,{t},2.5,36.0" for i, t in enumerate((70, 69, 71))]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_check_result_and_its_intervals(tmp_path):
    path = measurements(tmp_path)
    r = check_file(path)
    assert r.report() == printed("check", path)
    data = strict_json(r)
    html_with(r, "1.400", "1.344-1.459", data["comparisons"][0]["verdict"])
    ax = drawn(r)
    assert any(c.get_gid() == "identity" for c in ax.lines)
    (interval,) = r.intervals
    assert " ".join(interval.report().split()) == (  # one sentence, fitted to 100 columns
        "Speedup 1.400x, 95% interval 1.344-1.459 (across 3 and 3 runs; speculative: "
        "across 3 runs; baseline: across 3 runs)."
    )
    assert strict_json(interval)["ci_low"] == interval.low
    html_with(interval, "1.400x", "1.344-1.459")


def test_check_of_the_case_study():
    r = check_file(CASE_STUDY)
    assert r.report() == printed("check", CASE_STUDY)
    strict_json(r)


def test_compare_result():
    base, spec = SGLANG / "sglang_baseline.log", SGLANG / "sglang_eagle3_k3.log"
    r = compare(parse_run(str(base)), [replace(parse_run(str(spec)), num_spec_tokens=3)])
    assert r.report() == printed("compare", str(base), str(spec), "-k", "3")
    strict_json(r)
    html_with(r, r.runs[0].headline.split(":")[0])
    drawn(r)


def test_fit_result():
    r = fit_file(ISSUE_20780, predict_k=tuple(range(1, 9)))
    assert r.report() == printed("fit", ISSUE_20780, "--predict-k", "1-8")
    strict_json(r)
    html_with(r, "best k 3: 1.634x predicted")


def test_schedule_report():
    by_k = {2: 2.36, 3: 2.79, 4: 3.08}
    r = schedule_report(curve(), engine="vllm", accept_len_by_k=by_k, draft_step_ms=0.98)
    assert r.report() == printed(
        "schedule",
        "--cost-curve",
        CURVE,
        "--accept-len-by-k",
        "2:2.36,3:2.79,4:3.08",
        "--draft-step-ms",
        "0.98",
        "--engine",
        "vllm",
    )
    strict_json(r)
    html_with(r, f"best fixed k ({r['best_fixed_k']})")
    ax = drawn(r)
    assert any(line.get_gid() == "schedule" for line in ax.lines)
    assert r.schedule.to_dict()["schedule"] == r["schedule"]  # the grid stays out of to_dict


def test_fleet_result(monkeypatch):
    """The server is faked at the library's edge (read_fleet, as measure calls it): the command prints what the
    result reports."""
    server = Instance(
        "vllm",
        "gpu-1:8000",
        "llama",
        120,
        2.4,
        3.0,
        8.0,
        55.5,
        444.0,
        "a",
        "b",
        predicted_speedup=1.3,
        breakeven_batch=18.0,
        share_above_breakeven=0.25,
        schedule_gain=0.04,
        flags=("above_breakeven",),
        notes=("25% of the time above 18",),
    )
    r = FleetResult(
        (server,),
        "http://prom:9090",
        "2025-01-01T00:00:00Z",
        "2025-01-01T06:00:00Z",
        60.0,
        {},
        360,
        1,
    )
    monkeypatch.setattr(
        "breakeven.jobs.measure.read_fleet", lambda *a, **k: (r, {"gpu-1:8000": ([], [])})
    )
    assert r.report() == printed("fleet", "--prometheus", "http://prom:9090", "--since", "6h")
    strict_json(r)
    html_with(r, "gpu-1:8000", "55.50", "[above_breakeven]")
    drawn(r)


def test_report_writers_take_results(tmp_path):
    """``report.write_report`` runs no analysis: the caller's result becomes the page."""
    from breakeven.render.report import write_report

    result = check_file(CASE_STUDY)
    path = write_report(result, str(tmp_path), source=CASE_STUDY)
    page = Path(path).read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert render.check_html(result.to_dict(), flags=False) in page
    assert check_page(result, CASE_STUDY).count("<h2>") == page.count("<h2>")


def test_one_json_conversion():
    """NaN is None, tuples are lists, all the way down; infinities on request."""
    value = {"a": (1.0, math.nan), "b": [{"c": math.inf}]}
    assert plain_json(value) == {"a": [1.0, None], "b": [{"c": None}]}
    assert plain_json(value, keep_infinite=True) == {"a": [1.0, None], "b": [{"c": math.inf}]}


def test_the_renderers_keep_their_names():
    """``from breakeven.render import ...`` and lookups by name keep working."""
    for name in render.__all__:
        assert callable(getattr(render, name)), name
    with pytest.raises(AttributeError):
        render.no_such_renderer  # noqa: B018
