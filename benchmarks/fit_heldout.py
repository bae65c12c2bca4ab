"""Held-out error of ``breakeven fit`` on published k sweeps the tests do not use.

Issue 27's protocols (:mod:`breakeven.fitting.holdout`): each sweep's groups fitted on their
smallest and largest k and asked for the k between, and fitted on their two smallest k and
asked for the larger ones; then the context sweeps, each context length predicted from the
others (:mod:`breakeven.model.context`).  Printed per file and in all: how many k were predicted, the
median and worst absolute error of the speedup, and the share of measured speedups inside
the predicted interval.  The sweeps are in ``benchmarks/data/published_heldout`` (each
file's source in its header); the tests' own sweeps are in ``tests/data/published``.

    python benchmarks/fit_heldout.py [--cycle-form auto|leviathan|anchored|linear|curved]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from breakeven.fitting.fit import FORM_CHOICES, fit
from breakeven.fitting.holdout import PROTOCOLS, held_out, summary
from breakeven.iotools.csvfile import read_measurements

HELD_OUT = Path(__file__).resolve().parent / "data" / "published_heldout"
CONTEXTS = Path(__file__).resolve().parent / "data" / "published_context"


def line(name: str, s: dict) -> str:
    parts = []
    for protocol in PROTOCOLS:
        if protocol in s:
            x = s[protocol]
            parts.append(
                f"{protocol} n={x['predicted']:.0f} median {x['median_error']:.1%} "
                f"worst {x['worst_error']:.1%} covered {x['covered']:.0%}"
            )
    return f"{name[:48]:48s}  " + "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycle-form", default="auto", choices=FORM_CHOICES)
    args = parser.parse_args()
    everything = []
    for path in sorted(HELD_OUT.glob("*.csv")):
        data, _ = read_measurements(path)
        results = held_out(data, cycle_form=args.cycle_form)
        everything += results
        print(line(path.name, summary(results)))
    print(line("all held-out sweeps", summary(everything)))
    print()
    print("Across context lengths (each length predicted from the others, fit's context fit):")
    for path in sorted(CONTEXTS.glob("*.csv")):
        data, _ = read_measurements(path)
        for c in fit(data).contexts:
            print(
                f"{path.name[:48]:48s}  {len(c.contexts)} lengths "
                f"{c.contexts[0]:.0f}-{c.contexts[-1]:.0f} tokens, held out at most "
                f"{c.held_out_max_rel_error:.1%}"
            )


if __name__ == "__main__":
    main()
