"""Start-up cost of ``breakeven predict``, measured side by side with ``import click``.

Target (issue 22): the median wall time of

    breakeven predict --baseline-tok-s 62.9 --verify-ms 28.7 --json

is at most 1.4x that of ``python -c "import click"`` in the same environment, with bytecode
cached.  The two commands are run alternately, so machine noise hits both alike.

Both ways are measured: with bytecode cached (the package compiled once, as ``pip install``
leaves it) and with ``PYTHONDONTWRITEBYTECODE=1`` and no cache, where every run compiles
breakeven's modules (click's own bytecode, installed by pip, is cached either way).

    python benchmarks/cli_startup.py [--runs 40]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.4


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def _script() -> Path:
    script = Path(sys.executable).with_name("breakeven")
    if script.exists():
        return script
    found = shutil.which("breakeven")
    if found is None:
        sys.exit("breakeven is not installed in this environment: pip install .")
    return Path(found)


def _package_copy(cached: bool) -> str:
    """A copy of the package, compiled or without any bytecode; its parent folder."""
    import breakeven

    source = Path(breakeven.__file__).parent
    parent = tempfile.mkdtemp(prefix="breakeven-startup-")
    shutil.copytree(
        source, Path(parent) / "breakeven", ignore=shutil.ignore_patterns("__pycache__")
    )
    if cached:
        compileall.compile_dir(Path(parent) / "breakeven", quiet=1)
    return parent


def _measure(runs: int, cached: bool) -> tuple[float, float]:
    parent = _package_copy(cached)
    env = {**os.environ, "PYTHONPATH": parent}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not cached:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    click_cmd = [sys.executable, "-c", "import click"]
    predict_cmd = [
        str(_script()),
        "predict",
        "--baseline-tok-s",
        "62.9",
        "--verify-ms",
        "28.7",
        "--json",
    ]
    for cmd in (click_cmd, predict_cmd):  # warm the file cache
        _wall(cmd, env)
    click_times, predict_times = [], []
    for _ in range(runs):
        click_times.append(_wall(click_cmd, env))
        predict_times.append(_wall(predict_cmd, env))
    shutil.rmtree(parent)
    return 1000 * statistics.median(click_times), 1000 * statistics.median(predict_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    for cached in (True, False):
        click_ms, predict_ms = _measure(args.runs, cached)
        ratio = predict_ms / click_ms
        how = "bytecode cached" if cached else "PYTHONDONTWRITEBYTECODE=1, no cache"
        print(f"{how}:")
        print(f"  python -c 'import click'        median {click_ms:7.1f} ms  ({args.runs} runs)")
        print(f"  breakeven predict ... --json     median {predict_ms:7.1f} ms  ({args.runs} runs)")
        if cached:
            verdict = "meets" if ratio <= TARGET else "MISSES"
            print(f"  ratio {ratio:.2f}x  ({verdict} the target of at most {TARGET:.1f}x)")
        else:
            print(f"  ratio {ratio:.2f}x  (no target: every run compiles breakeven)")


if __name__ == "__main__":
    main()
