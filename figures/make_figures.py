"""Regenerate every figure in figures/ from the data in data/.

    python figures/make_figures.py

Writes (replacing the previous versions):

- case_study_surface.png: speedup over (accept_len, cycle/step) with the case study's EAGLE-3
  k = 6 run placed against the true 62.9 tok/s baseline and against the stale 90 tok/s one;
- case_study_sensitivity.png: which of its inputs, moved by 10%, moves the speedup most;
- leviathan_alpha_k.png and leviathan_k.png: Leviathan et al.'s model at c = 0.05;
- llama3_8b_batch.png: speedup against batch on the Llama-3-8B decode curve, alpha = 0.7;
- llama3_8b_schedule.png: the schedule of k by batch over that curve (the README's example);
- case_study_prediction.png and case_study_alpha_k.png: the seed's prediction (62.9 tok/s,
  verify 28.7 ms, draft 1.2 ms, accept_len 2.1 at k = 6) on both surfaces;
- case_study_k.png: speedup against k from the team's accept_len at k = 1 to 4;
- published_check.png: the published runs' measured against predicted speedup, predicted
  from a fit of the same runs.

Every figure is drawn as its ``breakeven plot`` command draws it (:mod:`breakeven.jobs.drawing`).
"""

from __future__ import annotations

from pathlib import Path

from breakeven.iotools import read_cost_curve, read_measurements
from breakeven.measurements.check import check_file
from breakeven.model.costs import TableCost
from breakeven.planning.batch import batch_sweep
from breakeven.prediction.optimize import optimize_leviathan
from breakeven.prediction.sensitivity import sensitivity
from breakeven.render import plot

ROOT = Path(__file__).resolve().parents[1]
DATA, FIGURES = ROOT / "data", ROOT / "figures"


def case_study() -> None:
    data, _ = read_measurements(DATA / "case_study.csv")
    run = data[data["label"] == "eagle3-k6"].iloc[0]
    real = data[(data["label"] == "baseline") & (data["origin"] == "client")]["tok_s"].iloc[0]
    tau = float(run["accept_len"])
    # The run placed as `breakeven plot surface --from data/case_study.csv` places it: against
    # the 62.9 tok/s baseline of its own environment and, the baselines having drifted,
    # against the stale 90 tok/s one.
    surface = plot.runs_surface(check_file(DATA / "case_study.csv"))
    plot.save(surface, FIGURES / "case_study_surface.png", force=True)
    result = sensitivity(
        accept_len=tau,
        step_ms=1000 / real,
        verify_ms=float(run["verify_ms"]),
        draft_ms=float(run["draft_ms"]),
    )
    plot.save(plot.tornado(result), FIGURES / "case_study_sensitivity.png", force=True)


def leviathan() -> None:
    plot.save(plot.surface_alpha_k(cost_ratio=0.05), FIGURES / "leviathan_alpha_k.png", force=True)
    plot.save(
        plot.speedup_vs_k(optimize_leviathan(0.8, 0.05)), FIGURES / "leviathan_k.png", force=True
    )


def batch() -> None:
    data, meta = read_cost_curve(DATA / "llama3_8b_decode_curve.csv")
    curve = TableCost(tuple(data["tokens"]), tuple(data["ms"]), source=meta["path"]).fit("linear")
    result = batch_sweep(curve, alpha=0.7, k_max=8, max_batch=512)
    plot.save(plot.speedup_vs_batch(result), FIGURES / "llama3_8b_batch.png", force=True)


def as_commands_draw() -> None:
    from breakeven.fitting.fit import fit_file
    from breakeven.jobs import drawing

    seed = {"baseline_tok_s": 62.9, "verify_ms": 28.7, "draft_ms": 1.2, "accept_len": 2.1}
    seed_k = {**seed, "k": 6}
    plot.save(drawing.surface_figure(**seed_k), FIGURES / "case_study_prediction.png", force=True)
    plot.save(
        drawing.surface_figure(alpha_k=True, k_max=8, **seed_k),
        FIGURES / "case_study_alpha_k.png",
        force=True,
    )
    plot.save(
        drawing.k_figure(
            baseline_tok_s=62.9,
            verify_ms=28.7,
            draft_step_ms=0.2,
            accept_len_by_k=(1.6, 1.9, 2.05, 2.1),
        ),
        FIGURES / "case_study_k.png",
        force=True,
    )
    plot.save(
        drawing.schedule_figure(
            cost_curve=str(DATA / "llama3_8b_decode_curve.csv"),
            accept_len_by_k={2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54},
            draft_step_ms=0.98,
            min_gain=0.005,
        ),
        FIGURES / "llama3_8b_schedule.png",
        force=True,
    )
    fitted = FIGURES / "published_fit.json"
    fitted.write_text(__import__("json").dumps(fit_file(str(DATA / "published.csv")).to_dict()))
    try:
        plot.save(
            drawing.check_figure(str(DATA / "published.csv"), fit_file=str(fitted)),
            FIGURES / "published_check.png",
            force=True,
        )
    finally:
        fitted.unlink()


if __name__ == "__main__":
    case_study()
    leviathan()
    batch()
    as_commands_draw()
    for path in sorted(FIGURES.glob("*.png")):
        print(path.relative_to(ROOT))
