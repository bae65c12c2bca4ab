"""Start-up cost of ``breakeven predict`` and of every ``--help``, side by side with ``import click``.

Target (issue 22): the median wall time of

    breakeven predict --baseline-tok-s 62.9 --verify-ms 28.7 --json

is at most 1.4x that of ``python -c "import click"`` in the same environment, with bytecode
cached.  The two commands are run alternately, so machine noise hits both alike.

Both ways are measured: with bytecode cached (the package compiled once, as ``pip install``
leaves it) and with ``PYTHONDONTWRITEBYTECODE=1`` and no cache, where every run compiles
breakeven's modules (click's own bytecode, installed by pip, is cached either way).

Target (issue 43): ``breakeven --help`` and the ``--help`` of every command, subcommands of
groups too (``breakeven plot k --help``), each at most 2x ``python -c "import click"``, with
bytecode cached; each round runs ``import click`` then every help once, in turn.

    python benchmarks/cli_startup.py [--runs 40] [--only predict|help]
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
HELP_TARGET = 2.0


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


def _measure_help(runs: int) -> tuple[float, dict[str, float]]:
    """The median of ``import click`` and of each command's ``--help``, bytecode cached."""
    from breakeven.cli import cli
    from breakeven.cli.group import command_paths

    parent = _package_copy(True)
    env = {**os.environ, "PYTHONPATH": parent}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    script = str(_script())
    commands = {"import click": [sys.executable, "-c", "import click"]}
    for path in [(), *command_paths(cli)]:
        commands[" ".join(("breakeven", *path, "--help"))] = [script, *path, "--help"]
    for cmd in commands.values():  # warm the file cache
        _wall(cmd, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(_wall(cmd, env))
    shutil.rmtree(parent)
    medians = {name: 1000 * statistics.median(t) for name, t in times.items()}
    return medians.pop("import click"), medians


def _print_help(runs: int) -> None:
    click_ms, medians = _measure_help(runs)
    print(f"--help, bytecode cached ({runs} rounds):")
    print(f"  {'python -c import click':<36} median {click_ms:7.1f} ms")
    worst = 0.0
    for name, ms in medians.items():
        ratio = ms / click_ms
        worst = max(worst, ratio)
        print(f"  {name:<36} median {ms:7.1f} ms  {ratio:5.2f}x")
    verdict = "meets" if worst <= HELP_TARGET else "MISSES"
    print(f"  largest ratio {worst:.2f}x  ({verdict} the target of at most {HELP_TARGET:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--only", choices=("predict", "help"), default=None)
    args = parser.parse_args()
    if args.only != "predict":
        _print_help(args.runs)
    if args.only == "help":
        return
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
