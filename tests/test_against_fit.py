"""Measured runs against a prediction's interval: ``check`` and ``compare --fit-file`` (each
run against the speedup a fit predicts at its k) and ``--schedule`` with a schedule whose
speedups carry intervals (a fit file's surface sized them)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from cli_checks import run_cli

from breakeven.fitting.saved import against_fit
from breakeven.jobs.measure import check_from_file
from breakeven.measurements.intervals import agrees
from breakeven.model.cycle import cycle_at
from breakeven.planning.schedule import against

PUBLISHED = Path(__file__).parent / "data" / "published"
CLUB3090 = PUBLISHED / "vllm_club3090_issue1052_qwen38_27b_int4_mtp_ksweep.csv"


def _fit(tmp_path: Path, rows: Path, *extra: str) -> Path:
    out = tmp_path / "fit.json"
    r = run_cli(["fit", str(rows), "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out


def _without_k(tmp_path: Path, k: int) -> Path:
    """club-3090 #1052's sweep without its runs at ``k``: a fit that did not see them."""
    table = pd.read_csv(CLUB3090, comment="#")
    kept = tmp_path / f"without_k{k}.csv"
    table[table["num_spec_tokens"] != k].to_csv(kept, index=False)
    return kept


def test_check_tests_a_fit_on_a_k_it_did_not_see(tmp_path):
    """bench-like rows -> fit without k = 6 -> check of every run against that fit: the k = 6
    run's prediction is the run's accept_len x the baseline's step over the cycle the fit
    extrapolates to k = 6, with an interval wider than at the k it measured."""
    fit = _fit(tmp_path, _without_k(tmp_path, 6))
    r = run_cli(["check", str(CLUB3090), "--fit-file", str(fit), "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["k"]: x for x in json.loads(r.stdout)["fit_check"]}
    assert set(rows) == {2, 4, 6}
    group = json.loads(fit.read_text())["groups"][0]
    table = pd.read_csv(CLUB3090, comment="#")
    base = float(table.loc[table["num_spec_tokens"] == 0, "tok_s"].iloc[0])
    spec = table[table["num_spec_tokens"] == 6].iloc[0]
    by_hand = spec["accept_len"] * (1000 / base) / float(cycle_at(group["coefficients"], 6))
    six = rows[6]
    assert six["predicted_speedup"] == pytest.approx(by_hand, rel=1e-9)
    assert six["residual"] == pytest.approx(six["measured_speedup"] - by_hand, rel=1e-9)
    width = {k: x["predicted_high"] / x["predicted_speedup"] - 1 for k, x in rows.items()}
    assert width[6] > width[4] > 0  # beyond the measured k, less sure
    assert six["predicted_low"] == pytest.approx(by_hand * (1 - width[6]), rel=1e-9)
    inside = six["predicted_low"] <= six["measured_speedup"] <= six["predicted_high"]
    assert six["verdict"] == ("holds" if inside else "off")
    text = run_cli(["check", str(CLUB3090), "--fit-file", str(fit)]).output
    assert "Against the fit" in text
    assert f"{by_hand:.3f} ({six['predicted_low']:.3f}-{six['predicted_high']:.3f})" in text


def test_a_run_the_fit_misses_is_off(tmp_path):
    """A run 30% slower than its fit predicts, its interval narrow: off."""
    fit = _fit(tmp_path, CLUB3090)
    run = {
        "label": "slow",
        "model": "",
        "num_spec_tokens": 4,
        "concurrency": 1,
        "accept_len": 2.5,
        "baseline_tok_s": 69.5,
        "measured_speedup": 0.7,
        "ci_low": 0.69,
        "ci_high": 0.71,
    }
    (row,) = against_fit([run], str(fit))
    assert row["verdict"] == "off" and row["predicted_speedup"] > 1.0
    assert row["predicted_low"] > row["ci_high"]


def test_a_run_of_another_model_has_no_fit(tmp_path):
    fit = _fit(tmp_path, CLUB3090)
    run = {"label": "other", "model": "another/model", "num_spec_tokens": 4}
    run |= {"concurrency": 1, "accept_len": 2.5, "baseline_tok_s": 69.5}
    (row,) = against_fit([{**run, "measured_speedup": 1.1}], str(fit))
    assert row["verdict"] == "no fit" and row["predicted_speedup"] is None
    (row,) = against_fit([{**run, "model": "", "accept_len": None, "measured_speedup": 1.1}], fit)
    assert row["verdict"] == "no fit"  # matches, but no accept_len to predict with


def test_a_fit_file_without_intervals_falls_back_on_the_tolerance(tmp_path):
    """A fit file written before intervals (no interval_width): no predicted interval, and
    the tolerance stands in for one, as it does for a schedule without intervals."""
    fit = _fit(tmp_path, CLUB3090)
    data = json.loads(fit.read_text())
    for g in data["groups"]:
        g.pop("interval_width", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    result = check_from_file(str(CLUB3090), tolerance=0.05, fit_file=str(old))
    assert result.fit_check
    for row in result.fit_check:
        assert row["predicted_low"] is None and row["predicted_high"] is None
        near = abs(row["measured_speedup"] / row["predicted_speedup"] - 1) <= 0.05
        assert row["verdict"] == ("holds" if near else "off")


def test_compare_types_a_run_in_and_tests_it_against_a_fit(tmp_path):
    """The seed's typed-in numbers against a fit: a run that names no model matches the fit's
    only group, and the prediction uses its accept_len and the typed baseline."""
    fit = _fit(tmp_path, CLUB3090)
    args = ["compare", "--baseline-tok-s", "69.5", "--spec-tok-s", "76.6", "--accept-len"]
    args += ["2.9", "-k", "4", "--fit-file", str(fit), "--json"]
    r = run_cli(args)
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["fit_check"]
    coefficients = json.loads(fit.read_text())["groups"][0]["coefficients"]
    by_hand = 2.9 * (1000 / 69.5) / float(cycle_at(coefficients, 4))
    assert row["predicted_speedup"] == pytest.approx(by_hand, rel=1e-9)
    assert row["verdict"] in {"holds", "off"}


def test_a_schedule_with_intervals_is_tested_by_overlap():
    """A schedule (by_batch with speedup_low/high) against runs: a run whose interval overlaps
    the prediction's holds, even where the tolerance alone would have called it off."""
    by_batch = [{"batch": 1, "k": 3, "speedup": 1.5, "speedup_low": 1.2, "speedup_high": 1.8}]
    run = {"label": "r", "concurrency": 1, "num_spec_tokens": 3, "measured_speedup": 1.25}
    (held,) = against([{**run, "ci_low": 1.22, "ci_high": 1.28}], by_batch, tolerance=0.02)
    assert held["verdict"] == "holds" and held["predicted_low"] == 1.2
    bare = [{"batch": 1, "k": 3, "speedup": 1.5}]
    (off,) = against([{**run, "ci_low": 1.22, "ci_high": 1.28}], bare, tolerance=0.02)
    assert off["verdict"] == "off" and off["predicted_low"] is None


@pytest.mark.parametrize(
    "measured,ci,predicted,band,tolerance,expected",
    [
        (1.0, (0.98, 1.02), 1.1, (1.0, 1.2), 0.0, True),  # overlap at 1.0..1.02
        (1.0, (0.98, 1.02), 1.1, (1.05, 1.2), 0.0, False),
        (1.0, (None, None), 1.04, (None, None), 0.05, True),  # the tolerance stands in
        (1.0, (math.nan, math.nan), 1.06, (None, None), 0.05, False),
        (1.0, (None, None), 1.06, (0.99, 1.1), 0.0, True),  # a point inside the band
    ],
)
def test_agrees(measured, ci, predicted, band, tolerance, expected):
    assert agrees(measured, *ci, predicted, *band, tolerance=tolerance) is expected


@pytest.mark.parametrize(
    "row",
    [
        {"batch": 1, "k": 3, "speedup": 1.5, "speedup_low": 1.6, "speedup_high": 1.4},
        {"batch": 1, "k": 3, "speedup": 1.5, "speedup_low": "1.2", "speedup_high": 1.8},
        {"batch": 1, "k": 3, "speedup": 1.5, "speedup_low": 1.2},
    ],
)
def test_a_schedule_with_a_bad_interval_is_one_line(tmp_path, row):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"by_batch": [row]}))
    r = run_cli(["check", str(CLUB3090), "--schedule", str(bad)])
    assert r.exit_code == 2 and "--schedule" in r.output and "speedup_low" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("content", ["{", "[]", '{"groups": [{"coefficients": {"x": -1}}]}'])
def test_a_bad_fit_file_for_check_is_one_line(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = run_cli(["check", str(CLUB3090), "--fit-file", str(bad)])
    assert r.exit_code == 2 and "--fit-file" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
