"""Speed of ``breakeven compare`` on two large generated logs, side by side with ingesting them.

Target (issue 12): ``compare BASE SPEC`` of two 1 GiB logs takes at most 1.2x the time of
``breakeven ingest`` of each (run one after the other, writing their CSVs).  The log is the
SGLang-like one of ``ingest_speed.py`` (40% decode lines), used for both sides.

    python benchmarks/compare_speed.py [--mb 1024] [--repeat 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_speed import generate, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="size of each log [MiB]")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each command")
    args = parser.parse_args()
    breakeven = Path(sys.executable).with_name("breakeven")
    work = Path(tempfile.mkdtemp(prefix="breakeven-compare-"))
    try:
        log = work / "server.log"
        generate(log, args.mb, "sglang")
        ingest = (
            f"{breakeven} ingest {log} --out {work / 'a.csv'} --force 2>/dev/null && "
            f"{breakeven} ingest {log} --out {work / 'b.csv'} --force 2>/dev/null"
        )
        compare = f"{breakeven} compare base={log} spec={log} --json > {work / 'c.json'}"
        walls: dict[str, list[float]] = {"ingest x2": [], "compare": []}
        peaks: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, cmd in (("ingest x2", ingest), ("compare", compare)):
                wall, peak = timed(cmd)
                walls[name].append(wall)
                peaks[name] = peak
        for name, values in walls.items():
            print(f"{name:10s} {min(values):7.2f} s  peak RSS {peaks[name]:.0f} MiB")
        ratio = min(walls["compare"]) / min(walls["ingest x2"])
        print(
            f"ratio compare / ingest x2: {ratio:.2f}x "
            f"({'meets' if ratio <= 1.2 else 'MISSES'} the target of at most 1.2x)"
        )
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
