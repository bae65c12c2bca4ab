"""``--context N`` beyond what a fit's runs support (issue 41, item 4): a cost the tool derives
from the context fit and finds impossible (a negative draft step, a verify forward shorter
than a step) is clamped and said in a note, never refused as if the user had typed it.

The runs are simulated from a known cost model whose cycle grows more slowly with the context
than the step does (``BD < 0``: each draft token costs less as the cache grows, as a drafter
that reads a shorter window can): within the runs' 1000 to 32000 tokens every cost is
positive, but the fit's straight line, followed far enough, makes the per-draft-token cost
negative.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
from cli_checks import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

W, COMP, A, DS, BD = 20.0, 0.3, 0.25, 0.5, -0.02  # ms; per token; per ktok; per draft token
TAU = {1: 1.8, 2: 2.4, 3: 2.9, 4: 3.3}
CONTEXTS = (1000, 8000, 32000)
CONTEXT_SWEEP = (
    Path(__file__).parent
    / "data/published/bradrlaw_aiserver_qwen36_27b_q6k_v100_mtp_nmax_context_sweep.csv"
)
BATCHES = (1, 4, 16)


def forward(b: float, q: float, c: float) -> float:
    return W + 0.1 * b + COMP * b * q + A * b * c / 1000


def cycle(b: float, k: int, c: float) -> float:
    return forward(b, k + 1, c) + k * (DS + 0.02 * b + BD * b * c / 1000)


def _write_runs(path: Path, sweep: list[tuple[int, int]]) -> Path:
    rows = []
    for b, c in sweep:
        common = {"model": "m", "hardware": "h", "concurrency": b, "context_tokens": c}
        rows.append(
            {"run_id": f"b{b}c{c}k0", **common, "num_spec_tokens": 0, "spec_method": ""}
            | {"tok_s": 1000 / forward(b, 1, c), "accept_len": ""}
        )
        for k, tau in TAU.items():
            rows.append(
                {"run_id": f"b{b}c{c}k{k}", **common, "num_spec_tokens": k}
                | {"spec_method": "eagle3", "tok_s": 1000 * tau / cycle(b, k, c)}
                | {"accept_len": tau}
            )
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def fits(tmp_path_factory) -> dict[str, Path]:
    """A fit of a context sweep at batch 1 (``sweep``), and one of a batch sweep at 1000
    tokens with that context sweep (``surface``: a forward surface moved by the context fit)."""
    here = tmp_path_factory.mktemp("beyond")
    out = {}
    sweeps = {
        "sweep": [(1, c) for c in CONTEXTS],
        "surface": [(b, 1000) for b in BATCHES] + [(1, c) for c in CONTEXTS[1:]],
    }
    for name, sweep in sweeps.items():
        fit = here / f"{name}.json"
        r = run_cli(["fit", str(_write_runs(here / f"{name}.csv", sweep)), "--out", str(fit)])
        assert r.exit_code == 0, r.output
        out[name] = fit
    published = here / "published.json"  # a real V100 context sweep, its growth positive
    r = run_cli(["fit", str(CONTEXT_SWEEP), "--out", str(published)])
    assert r.exit_code == 0, r.output
    out["published"] = published
    (c,) = json.loads(out["sweep"].read_text())["contexts"]
    assert c["cycle_ms_per_ktok_per_k"] == pytest.approx(BD, abs=1e-6)  # the fit sees BD < 0
    return out


def _flags_named(text: str) -> set[str]:
    return set(re.findall(r"--[a-z][a-z-]+", text))


DERIVED = {"--step-ms", "--verify-ms", "--draft-step-ms", "--draft-ms", "--baseline-tok-s"}
"""The cost flags a fit file's derived costs would be named by, were they refused as typed."""


def test_predict_far_beyond_the_fit_notes_the_clamped_verify(fits):
    """At 1,000,000 tokens and k = 16 the fitted verify forward comes out -36.48 ms: it is
    clamped to the step, and the prediction says so, as an extrapolation (before: exit 2,
    ``--verify-ms: got -36.48``, a flag never typed)."""
    args = ["predict", "--fit-file", fits["sweep"], "--fit-group", "1", "-k", "16"]
    args += ["--accept-len", "3.3", "--context", "1000000"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (flag,) = [f for f in data["flags"] if f["code"] == "context_extrapolated"]
    assert "verify forward" in flag["message"] and "-36.480 ms" in flag["message"]
    assert "clamped" in flag["message"] and "1000000 tokens" in flag["message"]
    assert "beyond what the fit's runs support" in flag["message"]
    assert data["verify_ms"] == pytest.approx(data["step_ms"])  # a verify costs a step at least
    assert data["speedup"] <= data["accept_len"] + 1e-9
    text = run_cli(args)
    assert text.exit_code == 0, text.output
    assert "context_extrapolated" in text.output and "clamped" in text.output
    assert not _flags_named(text.output + r.output) & DERIVED


def test_optimize_beyond_the_fit_notes_the_clamped_draft_step(fits):
    """At 100,000 tokens the fit's draft step comes out -1.18 ms: clamped to 0, and the note
    says that the cycle then has no drafting cost (before: exit 2, ``--draft-step-ms``)."""
    args = ["optimize", "--fit-file", fits["sweep"], "--fit-group", "1", "--context", "100000"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    note = json.loads(r.stdout)["note"]
    assert "draft step" in note and "-1.180 ms" in note and "clamped to 0" in note
    assert "context_extrapolated" in note and "no drafting cost" in note
    text = run_cli(args)
    assert text.exit_code == 0 and "clamped to 0" in text.output
    assert not _flags_named(text.output + r.output) & DERIVED


def test_a_curved_fits_cycle_beyond_the_fit_is_clamped_to_a_step(fits, tmp_path):
    """A curved fit prices optimize's whole cycle as a curve: at 1,000,000 tokens its cycle at
    k = 16 falls below a plain step and is held at the step, with a note (before: exit 2,
    ``--verify-curve and --step-ms: the speedup ... is above k + 1``, neither typed)."""
    data = json.loads(fits["sweep"].read_text())
    data["groups"][0]["coefficients"]["curvature_ms"] = 0.001  # the same fit, made curved
    data["groups"][0]["cycle_form"] = "curved"
    curved = tmp_path / "curved.json"
    curved.write_text(json.dumps(data))
    args = ["optimize", "--fit-file", curved, "--fit-group", "1", "--context", "1000000"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (
        "the fitted cycle at k = 16" in out["note"]
        and "a cycle costs one plain step" in out["note"]
    )
    for o in out["by_k"]:
        assert o["speedup"] <= o["accept_len"] + 1e-9


def test_a_context_within_the_runs_is_not_clamped(fits):
    args = ["optimize", "--fit-file", fits["sweep"], "--fit-group", "1", "--context", "20000"]
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    assert "clamped" not in json.loads(r.stdout).get("note", "")


@pytest.mark.parametrize("command", ["batch", "schedule"])
def test_batch_and_schedule_beyond_the_fit_clamp_the_draft_token_cost(fits, command):
    """At 1,000,000 tokens the surface's per-draft-token cost comes out negative: before, the
    sweep priced it silently and a speculative cycle came out cheaper than a plain step
    (a speedup above accept_len); now it is clamped to 0 with a note."""
    args = [command, "--fit-file", fits["surface"], "--context", "1000000", "--max-k", "4"]
    args += ["--accept-len-by-k", ",".join(f"{k}:{t}" for k, t in TAU.items())]
    args += ["--max-batch", "32"] + (
        ["--engine", "vllm", "--min-gain", "0"] * (command == "schedule")
    )
    r = run_cli([*args, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (note,) = [n for n in data["notes"] if "clamped" in n]
    assert "per draft token" in note and "beyond what the fit's runs support" in note
    if command == "batch":
        for p in data["speedup_by_batch"]:
            assert p["speedup"] <= TAU[p["k"]] * (1 + 1e-9)
    text = run_cli(args)
    assert text.exit_code == 0 and "clamped" in text.output


COMMANDS = {
    "predict": ["-k", "4", "--alpha", "0.8", "--fit-group", "1"],
    "optimize": ["--fit-group", "3"],
    "batch": ["--accept-len-by-k", "2:2.4,4:3.3", "--max-k", "4", "--max-batch", "16"],
    "schedule": ["--accept-len-by-k", "2:2.4,4:3.3", "--max-k", "4", "--max-batch", "16"],
}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    context=st.one_of(
        st.integers(1, 10**8),
        st.floats(0, 8).map(lambda e: max(1, round(10**e))),
    ),
    k=st.integers(1, 16),
    published=st.booleans(),
)
def test_a_context_never_refuses_a_flag_the_user_did_not_type(fits, command, context, k, published):
    """Any --context the option accepts, on fits with a context fit (the simulated ones, and
    a real V100 sweep's for predict and optimize): exit 0, or exit 2 naming only flags on the
    command line."""
    fit = fits["sweep"] if command in ("predict", "optimize") else fits["surface"]
    if published and command in ("predict", "optimize"):
        fit = fits["published"]
    extra = COMMANDS[command]
    if command == "predict":
        extra = ["-k", str(k), *extra[2:]]
    if command == "schedule":
        extra = [*extra, "--engine", "vllm"]
    args = [command, "--fit-file", str(fit), "--context", str(context), *extra, "--json"]
    r = run_cli(args)
    assert r.exit_code in (0, 2), r.output
    if r.exit_code == 2:
        assert _flags_named(r.output) <= set(args), r.output
    else:
        assert "Traceback" not in r.output
        assert math.isfinite(float(json.loads(r.stdout).get("speedup", 1.0) or 1.0))


def test_a_prediction_beyond_the_runs_contexts_widens_per_doubling(fits):
    """The published V100 sweep measured contexts up to about 32k tokens: at 4x beyond
    (two doublings) predict's interval is CONTEXT_RATE x 2 wider than within them, and at
    any context within them it is as wide as the fit's own interval at that k."""
    from breakeven.model.context import CONTEXT_RATE

    def width(context):
        args = ["predict", "--fit-file", fits["published"], "--fit-group", "1", "-k", "3"]
        r = run_cli([*args, "--accept-len", "2.5", "--context", str(context), "--json"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        return (d["speedup_high"] - d["speedup_low"]) / 2 / d["speedup"]

    (c,) = [x for x in json.loads(fits["published"].read_text())["contexts"]][:1]
    high = max(c["contexts"])
    inside = width(int(high / 2))
    assert width(int(high)) == pytest.approx(inside)
    assert width(int(high * 4)) == pytest.approx(inside + 2 * CONTEXT_RATE)


def test_a_surface_moved_beyond_the_runs_contexts_widens_per_doubling(fits):
    from breakeven.fitting.saved import load_surface, surface_at_context
    from breakeven.model.context import CONTEXT_RATE

    surface = load_surface(str(fits["surface"]))
    within = surface_at_context(str(fits["surface"]), surface, CONTEXT_SWEEP_HIGH)
    beyond = surface_at_context(str(fits["surface"]), surface, 4 * CONTEXT_SWEEP_HIGH)
    assert within.context_doublings == 0
    assert beyond.context_doublings == pytest.approx(2)
    for b in (1, 4, 16):
        assert beyond.half_width(b) == pytest.approx(within.half_width(b) + 2 * CONTEXT_RATE)


CONTEXT_SWEEP_HIGH = max(CONTEXTS)
