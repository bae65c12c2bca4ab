"""What each picture says: the break-even line where the model puts it, units on the axes,
the best-k marker at the argmax; and every plot command renders headless."""

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_checks import run_cli
from matplotlib.figure import Figure

from breakeven.measurements.check import check
from breakeven.model.costs import TableCost
from breakeven.planning.batch import batch_sweep
from breakeven.prediction.optimize import optimal_k, optimize_leviathan
from breakeven.prediction.sensitivity import sensitivity
from breakeven.render import plot

ROOT = Path(__file__).resolve().parents[1]


def by_gid(ax, gid):
    artists = [a for a in [*ax.collections, *ax.lines, *ax.patches] if a.get_gid() == gid]
    assert artists, f"no artist with gid {gid!r}"
    return artists


def assert_units(ax):
    assert "[" in ax.get_xlabel() and "]" in ax.get_xlabel(), ax.get_xlabel()
    assert "[" in ax.get_ylabel() and "]" in ax.get_ylabel(), ax.get_ylabel()


def test_surface_breakeven_contour_lies_on_accept_len_equals_cycle_over_step():
    ax = plot.surface(accept_len=(1, 4), cycle_over_step=(1, 4), resolution=200)
    (line,) = by_gid(ax, "breakeven")
    vertices = np.concatenate([p.vertices for p in line.get_paths()])
    assert len(vertices) > 10
    np.testing.assert_allclose(vertices[:, 0], vertices[:, 1], atol=0.02)
    assert_units(ax)


def test_surface_marks_the_measured_points_on_the_right_side():
    ax = plot.surface(points=[(2.1, 1.881, "real"), (2.1, 2.694, "stale")])
    texts = {t.get_text() for t in ax.texts}
    assert "real\n1.12x" in texts and "stale\n0.78x" in texts


def test_alpha_k_surface_best_k_line_is_the_argmax():
    ax = plot.surface_alpha_k(cost_ratio=0.05, k_max=16, resolution=101)
    (best,) = by_gid(ax, "best_k")
    alphas, ks = best.get_data()
    expected, _ = optimal_k(np.asarray(alphas), 0.05, k_max=16)
    np.testing.assert_array_equal(ks, expected)
    by_gid(ax, "breakeven")
    assert_units(ax)


def test_alpha_k_surface_needs_one_cost_form():
    with pytest.raises(ValueError, match="give one of cost_ratio or cycle_over_step"):
        plot.surface_alpha_k()


def test_best_k_marker_is_at_the_argmax():
    result = optimize_leviathan(0.8, 0.05)
    ax = plot.speedup_vs_k(result)
    (marker,) = by_gid(ax, "best_k")
    x, y = marker.get_data()
    top = max(result.by_k, key=lambda o: o.speedup)
    assert (x[0], y[0]) == (top.k, top.speedup) == (8, pytest.approx(3.092, abs=5e-4))
    assert_units(ax)


def test_batch_plot_marks_the_breakeven_batch():
    curve = TableCost(
        (1, 2, 4, 8, 16, 32, 64, 128, 256), (10, 10, 10.1, 10.2, 10.4, 11, 14, 22, 38)
    )
    result = batch_sweep(curve, accept_len=2.5, k=3)
    ax = plot.speedup_vs_batch(result)
    (line,) = by_gid(ax, "breakeven")
    assert line.get_xdata()[0] == result.breakeven_batch == 52
    assert_units(ax)


def test_measured_vs_predicted_draws_identity_and_points():
    import pandas as pd

    data = pd.DataFrame(
        [
            {"model": "m", "hardware": "h", "concurrency": 1, "num_spec_tokens": 0, "tok_s": t}
            for t in (50, 51, 49)
        ]
        + [
            {
                "model": "m",
                "hardware": "h",
                "concurrency": 1,
                "num_spec_tokens": 3,
                "tok_s": t,
                "accept_len": 2.5,
                "cycle_ms": 36.0,
                "label": "k3",
            }
            for t in (70, 69, 71)
        ]
    )
    result = check(data)
    ax = plot.measured_vs_predicted(result)
    (identity,) = by_gid(ax, "identity")
    x, y = identity.get_data()
    np.testing.assert_array_equal(x, y)
    (runs,) = [c for c in ax.containers]
    px, py = runs.lines[0].get_data()
    assert px[0] == pytest.approx(result.comparisons[0].predicted_speedup)
    assert py[0] == pytest.approx(result.comparisons[0].measured_speedup)
    assert_units(ax)


def test_tornado_orders_by_swing():
    result = sensitivity(accept_len=2.1, step_ms=15.898, verify_ms=28.7, draft_ms=1.2)
    ax = plot.tornado(result)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1].startswith(result.rows[0].name)  # the largest swing drawn on top
    assert "[x]" in ax.get_xlabel()
    assert result.rows[0].swing >= result.rows[-1].swing
    assert list(result.to_frame().index) == [r.name for r in result.rows]
    assert "<table>" in result._repr_html_()


def test_plot_functions_draw_on_a_given_axes():
    ax = Figure().add_subplot()
    assert plot.speedup_vs_k(optimize_leviathan(0.7, 0.1), ax=ax) is ax


def test_save_refuses_to_overwrite_and_checks_the_format(tmp_path):
    ax = plot.speedup_vs_k(optimize_leviathan(0.7, 0.1))
    out = tmp_path / "k.png"
    plot.save(ax, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="exists; give --force"):
        plot.save(ax, out)
    with pytest.raises(ValueError, match=r"expected a file name ending in \.png, \.svg or \.pdf"):
        plot.save(ax, tmp_path / "k.gif")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.png"]


CASE = str(ROOT / "data" / "case_study.csv")
CURVE = str(ROOT / "data" / "llama3_8b_decode_curve.csv")


@pytest.mark.parametrize(
    ("args", "suffix", "magic"),
    [
        (
            [
                "surface",
                "--baseline-tok-s",
                "62.9",
                "--verify-ms",
                "28.7",
                "--draft-ms",
                "1.2",
                "--accept-len",
                "2.1",
            ],
            ".png",
            b"\x89PNG",
        ),
        (
            ["surface", "--alpha", "0.6", "-k", "4", "--cost-ratio", "0.05", "--alpha-k"],
            ".svg",
            b"<?xml",
        ),
        (["k", "--alpha", "0.8", "--cost-ratio", "0.05"], ".pdf", b"%PDF"),
        (["batch", "--cost-curve", CURVE, "--alpha", "0.7"], ".png", b"\x89PNG"),
        (["check", "MEASURED_CSV"], ".png", b"\x89PNG"),
        (
            [
                "sensitivity",
                "--baseline-tok-s",
                "62.9",
                "--verify-ms",
                "28.7",
                "--accept-len",
                "2.1",
            ],
            ".png",
            b"\x89PNG",
        ),
    ],
)
def test_every_plot_command_renders(tmp_path, args, suffix, magic):
    args = [str(_measured_csv(tmp_path)) if a == "MEASURED_CSV" else a for a in args]
    out = tmp_path / f"picture{suffix}"
    result = run_cli(["plot", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(magic)


def test_plot_commands_render_headless_in_a_fresh_process(tmp_path):
    out = tmp_path / "s.png"
    env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": ""}
    run = subprocess.run(
        [sys.executable, "-m", "breakeven", "plot", "surface", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert out.exists()


def test_bad_plot_input_is_one_line():
    r = run_cli(["plot", "surface", "--alpha-k", "--out", "x.png"])
    assert r.exit_code == 2 and r.output.startswith("Error: --alpha-k needs")


def test_importing_breakeven_does_not_import_matplotlib():
    code = "import sys, breakeven; print('matplotlib' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def _measured_csv(tmp_path):
    """Runs with both a measured and a predicted speedup: a baseline and a k = 3 run with its
    cycle cost, three repeats each."""
    lines = ["model,hardware,concurrency,num_spec_tokens,tok_s,accept_len,cycle_ms,label"]
    lines += [f"m,h,1,0,{t},,,base" for t in (50, 51, 49)]
    lines += [f"m,h,1,3,{t},2.5,36,k3" for t in (70, 69, 71)]
    path = tmp_path / "measured.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plot_check_draws_the_bundled_data_given_a_fit_or_a_cycle(tmp_path):
    """Issue 26: the published runs carry no cycle; a fit of them gives each run's at its k,
    and a typed cycle gives every run one.  A cycle and a fit together are one line, exit 2."""
    published = Path(CASE).parent / "published.csv"
    fit_json = tmp_path / "fit.json"
    assert run_cli(["fit", str(published), "--out", str(fit_json)]).exit_code == 0
    for costs in (["--fit-file", str(fit_json)], ["--cycle-ms", "9.5"]):
        out = tmp_path / f"check{len(costs[1])}.png"
        r = run_cli(["plot", "check", str(published), *costs, "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert out.read_bytes().startswith(b"\x89PNG")
    from breakeven.jobs.drawing import check_figure

    ax = check_figure(str(published), fit_file=str(fit_json))
    assert len(ax.texts) >= 5  # a labelled point per run the fit covers
    r = run_cli(
        [
            *("plot", "check", str(published), "--cycle-ms", "9", "--fit-file", str(fit_json)),
            *("--out", str(tmp_path / "x.png")),
        ],
    )
    assert r.exit_code == 2 and "--fit-file and --cycle-ms: give one" in r.output, r.output


@pytest.mark.parametrize("csv", ["case_study.csv", "published.csv"])
def test_plot_check_with_nothing_to_draw_says_what_is_missing(tmp_path, csv):
    # Without a cost neither bundled CSV has a run with both a measured and a predicted
    # speedup: no empty chart under y = x, but one line naming the file and what is missing
    # (and the flags that would give it), exit 2.
    out = tmp_path / "check.png"
    path = Path(CASE).parent / csv
    result = run_cli(["plot", "check", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert str(path) in line and "no run has both a measured and a predicted speedup" in line
    assert "--cycle-ms, --verify-ms or --fit-file" in line
    assert not out.exists()


def _points(ax, kind):
    return [line.get_data() for line in ax.get_lines() if line.get_gid() == kind]


def test_surface_from_runs_places_measured_predicted_and_the_other_baseline(tmp_path):
    data = check_file_rows(tmp_path)
    points = plot.run_points(data["comparisons"], data["baselines"])
    kinds = {kind: (x, y) for x, y, _, kind in points}
    # The measured point reads its measured speedup off the surface: x / y = tok_s / base.
    x, y = kinds["measured"]
    assert x / y == pytest.approx(70 / 50)
    x, y = kinds["predicted"]
    assert x / y == pytest.approx(2.5 * 20 / 36)
    ax = plot.surface_around(points)
    assert len(_points(ax, "measured")) == 1 and len(_points(ax, "predicted")) == 1


def check_file_rows(tmp_path):
    from breakeven.measurements.check import check_file

    return check_file(str(_measured_csv(tmp_path))).to_dict()


def test_surface_places_the_case_study_against_both_baselines(tmp_path):
    # The README's figure from the command line: the k = 6 profile against the 62.9 tok/s
    # baseline of its own environment and, since the baselines drifted, the stale 90 one.
    out = tmp_path / "surface.svg"
    result = run_cli(["plot", "surface", "--from", CASE, "--out", str(out)])
    assert result.exit_code == 0, result.output
    from breakeven.measurements.check import check_file

    data = check_file(CASE).to_dict()
    points = {
        kind: (x, y, label)
        for x, y, label, kind in plot.run_points(data["comparisons"], data["baselines"])
    }
    x, y, _ = points["predicted"]
    assert x / y == pytest.approx(2.1 * (1000 / 62.9) / 29.9, rel=1e-3)  # 1.12x, a win
    x, y, label = points["other"]
    assert x / y == pytest.approx(2.1 * (1000 / 90) / 29.9, rel=1e-3)  # 0.78x, a loss
    assert "90.0 tok/s" in label and "measured" not in label
    assert "measured" not in points  # the k = 6 run was profiled, not measured


def test_surface_takes_several_points(tmp_path):
    out = tmp_path / "points.png"
    args = [
        "plot",
        "surface",
        "--baseline-tok-s",
        "62.9",
        "--point",
        "real:2.1:29.9",
        "--point",
        "a:b:c:2.5:30",
        "--out",
        str(out),
    ]
    result = run_cli(args)
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(b"\x89PNG")
    for bad, says in [
        ("x:1.5", "LABEL:ACCEPT_LEN:CYCLE_MS"),
        ("x:one:30", "with numbers"),
        ("x:0.5:30", "ACCEPT_LEN in [1"),
        ("x:2:inf", "CYCLE_MS a finite"),
    ]:
        r = run_cli(
            [
                "plot",
                "surface",
                "--baseline-tok-s",
                "62.9",
                "--point",
                bad,
                "--out",
                str(tmp_path / "bad.png"),
            ],
        )
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output
    r = run_cli(["plot", "surface", "--point", "x:2:30", "--out", str(out)])
    assert r.exit_code == 2 and "--baseline-tok-s or --step-ms" in r.output


def _deuteranope(colour):
    """``colour`` as a deuteranope sees it: Machado, Oliveira and Fernandes (2009), severity 1,
    applied in linear RGB."""
    from matplotlib.colors import to_rgb

    m = np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.01182, 0.04294, 0.968881],
        ]
    )
    c = np.array(to_rgb(colour))
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    seen = np.clip(m @ linear, 0, 1)
    return np.where(seen <= 0.0031308, 12.92 * seen, 1.055 * seen ** (1 / 2.4) - 0.055)


def test_each_k_of_a_schedule_stays_apart_under_deuteranopia():
    """Issue 26: under deuteranopia the old palette's k = 3, 4, 5 and 7 looked alike.  The
    lines are now Okabe-Ito colours, which stay at least 0.2 apart (RGB distance) as a
    deuteranope sees them (the old tab10 colours: 0.12), and neighbouring k differ in dash."""
    from breakeven.jobs.drawing import schedule_figure
    from breakeven.render.plot import OKABE_ITO

    ax = schedule_figure(
        cost_curve=CURVE, accept_len_by_k={2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54}
    )
    lines = [line for line in ax.get_lines() if str(line.get_label()).startswith("k = ")]
    assert len(lines) == 6
    colours = [line.get_color() for line in lines]
    assert set(colours) <= set(OKABE_ITO) and len(set(colours)) == len(colours)
    seen = [_deuteranope(c) for c in colours]
    apart = min(np.linalg.norm(a - b) for i, a in enumerate(seen) for b in seen[i + 1 :])
    old = [_deuteranope(f"C{i}") for i in range(6)]
    old_apart = min(np.linalg.norm(a - b) for i, a in enumerate(old) for b in old[i + 1 :])
    assert apart > 0.19 > 0.13 > old_apart
    dashes = [line.get_linestyle() for line in lines]
    assert all(a != b for a, b in itertools.pairwise(dashes))
    # The chosen k's own line is drawn over the schedule's band, not hidden under it.
    (band,) = [line for line in ax.get_lines() if line.get_gid() == "schedule"]
    assert all(line.get_zorder() > band.get_zorder() for line in lines)


def test_labels_of_close_runs_do_not_overprint(tmp_path):
    """Issue 26: runs close together (the published EAGLE and MTP runs near 1.3x) had their
    labels drawn over each other; each label now takes a free place around its point."""
    from breakeven.jobs.drawing import check_figure

    published = Path(CASE).parent / "published.csv"
    fit_json = tmp_path / "fit.json"
    run_cli(["fit", str(published), "--out", str(fit_json)])
    ax = check_figure(str(published), fit_file=str(fit_json))
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) >= 5
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_k_has_whole_ticks_and_a_prediction_is_labelled_as_one():
    from breakeven.jobs.drawing import k_figure, surface_figure

    ax = k_figure(
        baseline_tok_s=62.9,
        verify_ms=28.7,
        draft_step_ms=0.2,
        accept_len_by_k=(1.6, 1.9, 2.05, 2.1),
    )
    assert all(float(t).is_integer() for t in ax.get_xticks())
    ax = surface_figure(baseline_tok_s=62.9, verify_ms=28.7, draft_ms=1.2, accept_len=2.1, k=6)
    assert "measured" not in " ".join(t.get_text() for t in ax.texts)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "prediction (diamond)" in legend and "break-even (speedup = 1)" in legend
    assert ax.get_title() == "Speedup (baseline 62.9 tok/s, cycle 29.9 ms, accept_len 2.1, k = 6)"
    ax = surface_figure(alpha_k=True, baseline_tok_s=62.9, verify_ms=28.7, draft_ms=1.2, k=6)
    assert ax.get_title() == "Speedup by acceptance and k (cycle 1.88 steps at every k)"


def test_a_speedup_a_hair_outside_its_interval_is_drawn():
    """A real llama.cpp sweep under load: the pooled speedup drawn lay 0.06% below the lower
    end of the interval around its interval's own estimate, and matplotlib refused the
    negative error bar ('yerr' must not contain negative values); the bar now reaches the
    point."""
    from breakeven.render.plot import measured_vs_predicted

    run = {
        "label": "k4",
        "measured_speedup": 1.5,
        "ci_low": 1.501,
        "ci_high": 1.6,
        "predicted_speedup": 1.45,
    }
    ax = measured_vs_predicted({"comparisons": [run], "tolerance": 0.05})
    assert len(ax.texts) == 1
