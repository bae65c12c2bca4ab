"""Start-up cost of ``breakeven predict``, measured side by side with ``import click``.

Target (issue 2): the median wall time of

    breakeven predict --baseline 62.9 --verify-ms 28.7 --json

is at most 2.0x that of ``python -c "import click"`` in the same environment.
The two commands are run alternately, so machine noise hits both alike.

    python benchmarks/cli_startup.py [--runs 40]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = 2.0


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    script = Path(sys.executable).with_name("breakeven")
    if not script.exists():
        found = shutil.which("breakeven")
        if found is None:
            sys.exit("breakeven is not installed in this environment: pip install .")
        script = Path(found)
    click_cmd = [sys.executable, "-c", "import click"]
    predict_cmd = [str(script), "predict", "--baseline", "62.9", "--verify-ms", "28.7", "--json"]

    for cmd in (click_cmd, predict_cmd):  # warm the file cache
        _wall(cmd)
    click_times, predict_times = [], []
    for _ in range(args.runs):
        click_times.append(_wall(click_cmd))
        predict_times.append(_wall(predict_cmd))

    click_ms = 1000 * statistics.median(click_times)
    predict_ms = 1000 * statistics.median(predict_times)
    ratio = predict_ms / click_ms
    print(f"python -c 'import click'        median {click_ms:7.1f} ms  ({args.runs} runs)")
    print(f"breakeven predict ... --json     median {predict_ms:7.1f} ms  ({args.runs} runs)")
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"ratio {ratio:.2f}x  ({verdict} the target of at most {TARGET:.1f}x)")


if __name__ == "__main__":
    main()
