"""Held-out error and interval coverage of ``fit``'s surface across batch sizes, on published
batch sweeps from real accelerators that nothing here was fitted to (issue 41).

Each sweep of ``benchmarks/data/published_batch`` is fitted on part of its batch sizes and
asked for the rest (:mod:`breakeven.fitting.batch_holdout`): ``transfer`` (speculation at the
smallest batch only, baselines there and at the batch asked for), ``extrapolated`` (every run
at the two smallest batch sizes) and ``between`` (the smallest and largest).  Each protocol is
run twice, side by side: the additive form alone (no model config), and with the model's
``config.json`` (``benchmarks/data/model_configs``) and the accelerator the runs name, where
the fit may choose the roofline form.  Printed per protocol: how many were predicted, the
median and worst absolute error of the speedup, the share of measured speedups inside the
predicted interval and the interval's median half-width.

    python benchmarks/batch_heldout.py [--verbose]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from breakeven.fitting.batch_holdout import (
    BATCH_PROTOCOLS,
    batch_summary,
    held_out_batches,
    held_out_contexts,
)
from breakeven.fitting.roofs import roof_source, with_weight_bits
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.modelconfig import read_model_config
from breakeven.model.context import CONTEXT_RATE
from breakeven.model.cycle import INTERVAL_FLOOR
from breakeven.model.surface import MoE

DATA = Path(__file__).resolve().parent / "data"
SWEEPS = DATA / "published_batch"
CONFIGS = DATA / "model_configs"
CONTEXTS = DATA / "published_context"
MOE_SWEEPS = {
    # a tests' sweep too: the additive form was tried on it, the roofline form was not
    Path(__file__).resolve().parent.parent
    / "tests/data/published/angelslim_issue163_qwen3_30b_a3b_eagle3_batch.csv": MoE(128, 8),
}
"""Further batch sweeps of Mixture-of-Experts models, with their routing."""

MODELS = (
    # (text in the runs' model, config file, bits per weight of the checkpoint run, KV bytes)
    ("Qwen3-32B-W4A16-AWQ", "qwen3-32b.json", 4, 2.0),
    ("Qwen3-32B", "qwen3-32b.json", None, 2.0),
    ("Qwen3-8B", "qwen3-8b.json", None, 2.0),
    ("DeepSeek-R1", "deepseek-r1.json", None, 1.0),  # fp8 KV cache (the file's env)
    ("Qwen3.8-27B-INT4", "qwen3.5-27b.json", 4, 2.0),  # the closest documented config
    ("Qwen3-30B-A3B", "qwen3-30b-a3b.json", None, 2.0),
)
"""Which stored config stands for each model of the sweeps (see the configs' README)."""


def roof_for(model: str, hardware: str, context: float):
    """The datasheet floor of a sweep's model on its hardware (None: no config for it)."""
    for text, name, bits, kv in MODELS:
        if text in model:
            shape = with_weight_bits(read_model_config(str(CONFIGS / name), kv), bits)
            return roof_source(shape, label=name)(model, hardware, context)
    return None


def line(name: str, s: dict) -> str:
    x = s
    return (
        f"{name:28s} n={x['predicted']:2.0f}  median {x['median_error']:6.1%}  worst "
        f"{x['worst_error']:6.1%}  covered {x['covered']:5.0%}  median half-width "
        f"{x['median_half_width']:6.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every prediction")
    args = parser.parse_args()
    results: dict[str, list] = {"additive only": [], "with config and accelerator": []}
    seconds = dict.fromkeys(results, 0.0)
    sweeps = [(path, None) for path in sorted(SWEEPS.glob("*_batch.csv"))]
    for path, moe in [*sweeps, *MOE_SWEEPS.items()]:
        data, _ = read_measurements(path)
        for label, options in (
            ("additive only", {"moe": moe}),
            ("with config and accelerator", {"roof_for": roof_for, "moe": moe}),
        ):
            start = time.perf_counter()
            mine = held_out_batches(data, **options)
            seconds[label] += time.perf_counter() - start
            results[label] += mine
            if args.verbose:
                for x in mine:
                    print(
                        f"{label[:8]:8s} {path.name[:30]:30s} {x.protocol:12s} B={x.batch:3d} "
                        f"measured {x.measured:.3f} predicted {x.predicted:.3f} "
                        f"({x.error:+.1%}) interval {x.low:.3f}-{x.high:.3f}"
                    )
    for label, mine in results.items():
        print(f"{label} ({seconds[label]:.1f} s):")
        summary = batch_summary(mine)
        for protocol in BATCH_PROTOCOLS:
            if protocol in summary:
                print("  " + line(protocol, summary[protocol]))
        at8 = [x for x in mine if x.protocol == "transfer" and x.batch == 8]
        if at8:
            errors = sorted(abs(x.error) for x in at8)
            print(
                f"  {'transfer to batch 8':28s} n={len(at8):2d}  median "
                f"{errors[(len(errors) - 1) // 2]:6.1%}  worst {errors[-1]:6.1%}"
            )


def contexts() -> None:
    """Each published context sweep fitted on its two shortest lengths and asked for the
    rest; covered: inside +- (the 2% floor + CONTEXT_RATE per doubling beyond the longer)."""
    found = []
    for path in sorted(CONTEXTS.glob("*.csv")):
        data, _ = read_measurements(path)
        found += held_out_contexts(data)
    print(f"context, fitted on the two shortest lengths ({len(found)} predicted):")
    for label, mine in (
        (
            "within 8x of the shortest",
            [x for x in found if x.context_tokens <= 8.4 * x.fitted_on[0]],
        ),
        ("beyond 8x", [x for x in found if x.context_tokens > 8.4 * x.fitted_on[0]]),
        ("all", found),
    ):
        if not mine:
            continue
        errors = sorted(abs(x.error) for x in mine)
        widths = sorted(INTERVAL_FLOOR + CONTEXT_RATE * x.doublings for x in mine)
        inside = sum(abs(x.error) <= INTERVAL_FLOOR + CONTEXT_RATE * x.doublings for x in mine)
        n = len(errors)
        print(
            f"  {label:28s} n={n:2d}  median {errors[(n - 1) // 2]:6.1%}  worst {errors[-1]:6.1%}"
            f"  covered {inside / n:5.0%}  median half-width {widths[(n - 1) // 2]:6.1%}"
        )


if __name__ == "__main__":
    main()
    contexts()
