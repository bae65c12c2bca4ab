"""Held-out error of ``breakeven fit`` on published k sweeps the tests do not use.

Issue 27's protocols (:mod:`breakeven.holdout`): each sweep's groups fitted on their
smallest and largest k and asked for the k between, and fitted on their two smallest k and
asked for the larger ones.  Printed per file and in all: how many k were predicted, the
median and worst absolute error of the speedup, and the share of measured speedups inside
the predicted interval.  The sweeps are in ``benchmarks/data/published_heldout`` (each
file's source in its header); the tests' own sweeps are in ``tests/data/published``.

    python benchmarks/fit_heldout.py [--cycle-form auto|leviathan|anchored|linear|curved]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from breakeven.fit import FORM_CHOICES
from breakeven.holdout import PROTOCOLS, held_out, summary
from breakeven.iotools.measurements import read_measurements

HELD_OUT = Path(__file__).resolve().parent / "data" / "published_heldout"


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


if __name__ == "__main__":
    main()
