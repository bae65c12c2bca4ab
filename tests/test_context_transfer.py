"""``batch`` and ``schedule --context N``: a fit file's forward surface, fitted across batch
sizes at one context, moved to another by the fit's context growth (issue 27, item 4).

The runs are simulated from a known cost model in which each sequence's forward reads its
KV cache (``A`` ms per 1000 tokens) and each draft token reads it too (``BD``): a batch sweep
at 1000 tokens of context and a context sweep at batch 1.  Nothing in the fit knows the
model; the prediction at a batch and context no run measured is checked against it.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from cli_checks import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.model.surface import BatchSurface

W, KV, COMP, A = 20.0, 0.1, 0.3, 0.25  # ms; per sequence; per token; per sequence per ktok
DS, DT, BD = 1.0, 0.02, 0.04  # ms per draft step; per draft token; per draft token per ktok
TAU = {2: 2.3, 4: 2.9}
ACCEPTANCE = ("--accept-len-by-k", ",".join(f"{k}:{t}" for k, t in TAU.items()))


def forward(b: float, q: float, c: float) -> float:
    return W + KV * b + COMP * b * q + A * b * c / 1000


def cycle(b: float, k: int, c: float) -> float:
    return forward(b, k + 1, c) + k * (DS + DT * b + BD * b * c / 1000)


def speedup(b: float, k: int, c: float) -> float:
    return TAU[k] * forward(b, 1, c) / cycle(b, k, c)


def _runs(tmp_path: Path, contexts: tuple[int, ...] = (4000, 16000)) -> Path:
    rows = []
    sweep = [(b, 1000) for b in (1, 4, 16)] + [(1, c) for c in contexts]
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
    path = tmp_path / "runs.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _fit(tmp_path: Path, **kwargs) -> Path:
    out = tmp_path / "fit.json"
    r = run_cli(["fit", str(_runs(tmp_path, **kwargs)), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_the_surface_is_fitted_at_one_context(tmp_path):
    """Batch 1's runs at 4000 and 16000 tokens stay out of the surface: it is the batch
    sweep's, at 1000 tokens, and says so."""
    (surface,) = json.loads(_fit(tmp_path).read_text())["surfaces"]
    assert surface["context_tokens"] == pytest.approx(1000)
    assert surface["batches"] == [1, 4, 16]


@pytest.mark.parametrize("batch", [1, 4, 16, 32])
def test_batch_at_another_context_matches_the_model(tmp_path, batch):
    """At 16000 tokens, where only batch 1 ran, every batch's speedup at each k is the
    simulated model's within 0.5% (the model is in the forms fitted: the error is the
    fits' own)."""
    fit = _fit(tmp_path)
    args = ["batch", "--fit-file", str(fit), "--context", "16000", *ACCEPTANCE]
    r = run_cli([*args, "--max-k", "4", "--max-batch", "32", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    point = next(p for p in data["speedup_by_batch"] if p["batch"] == batch)
    assert point["speedup"] == pytest.approx(speedup(batch, point["k"], 16000), rel=5e-3)
    assert point["k"] == max(TAU, key=lambda k: speedup(batch, k, 16000))
    assert any("16000" in n and "1000 tokens" in n for n in data["notes"])
    text = run_cli([*args, "--max-k", "4", "--max-batch", "32"]).output
    assert "Costs moved from the runs' 1000 tokens of context to 16000" in text


def test_the_context_moves_the_schedule(tmp_path):
    """The batch where k = 2 overtakes k = 4 moves with the context (from 11 at 1000 tokens
    to 14 at 16000 in this model): the schedule at each context switches where the model
    does."""
    fit = _fit(tmp_path)

    def switch(context: int | None) -> int:
        args = ["schedule", "--fit-file", str(fit), *ACCEPTANCE, "--max-k", "4"]
        args += ["--engine", "vllm", "--max-batch", "32", "--min-gain", "0", "--json"]
        r = run_cli(args + (["--context", str(context)] if context else []))
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout)
        if context:
            assert any("costs moved" in n for n in data["notes"])
        return next(x["batch"] for x in data["by_batch"] if x["k"] == 2)

    def truth(c: int) -> int:
        return next(b for b in range(1, 33) if speedup(b, 2, c) > speedup(b, 4, c))

    assert switch(16000) == truth(16000) != truth(1000) == switch(None)


def test_context_needs_a_fit_file_and_a_context_fit(tmp_path):
    r = run_cli(["batch", "--cost-curve", "x.csv", "--context", "8000"])
    assert r.exit_code == 2 and "--context needs --fit-file" in r.output
    fit = _fit(tmp_path, contexts=())  # a batch sweep at one context: no growth to move by
    args = ["batch", "--fit-file", str(fit), "--context", "8000", *ACCEPTANCE]
    r = run_cli(args)
    assert r.exit_code == 2 and "--context" in r.output
    assert "about 1000 tokens of context only" in r.output
    assert len(r.output.strip().splitlines()) == 1


def _surface(context: float) -> BatchSurface:
    coefficients = {"weights_ms": 20.0, "expert_ms": 0.0, "kv_ms": 0.1, "compute_ms": 0.3}
    coefficients |= {"draft_step_ms": 1.0, "draft_token_ms": 0.02, "spec_seq_ms": 0.0}
    return BatchSurface(
        "m",
        "h",
        "eagle3",
        coefficients,
        (),
        None,
        math.nan,
        (),
        0.01,
        (1, 4),
        baseline_steps=((1, 20.4), (4, 21.6)),
        spec_batches=(1,),
        context_tokens=context,
    )


@settings(max_examples=60, deadline=None)
@given(
    here=st.floats(100, 1e5),
    there=st.floats(100, 1e5),
    a=st.floats(0, 1),
    b=st.floats(0, 0.2),
    batch=st.integers(1, 256),
    k=st.integers(1, 8),
)
def test_moving_the_context_adds_what_the_growth_says(here, there, a, b, batch, k):
    """A step grows by a x batch x the shift, a cycle by (a + b k) x batch x the shift; a
    move there and back is no move.  Where the move would make the KV term or the draft's
    per-token term negative (a context far below the runs'), that term is clamped to 0 and
    the note says so (issue 41, item 4): the growth is what the clamped terms add."""
    surface = _surface(here)
    moved = surface.at_context(there, a, b)
    shift = (there - here) / 1000
    kv, token = surface.coefficients["kv_ms"], surface.coefficients["draft_token_ms"]
    grow_a, grow_b = max(kv + a * shift, 0.0) - kv, max(token + b * shift, 0.0) - token
    assert moved.step_ms(batch)[0] == pytest.approx(
        surface.step_ms(batch)[0] + grow_a * batch, rel=1e-9, abs=1e-9
    )
    assert float(moved.cycle_ms(batch, k)) == pytest.approx(
        float(surface.cycle_ms(batch, k)) + (grow_a + grow_b * k) * batch, rel=1e-9, abs=1e-9
    )
    assert moved.context_tokens == there and "by the fit's context growth" in moved.context_note
    clamped = (grow_a, grow_b) != pytest.approx((a * shift, b * shift), rel=1e-12, abs=1e-12)
    assert ("clamped to 0.000 ms" in moved.context_note) == clamped
    if not clamped:
        back = moved.at_context(here, a, b)
        assert back.coefficients == pytest.approx(surface.coefficients, abs=1e-9)
