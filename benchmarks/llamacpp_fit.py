"""breakeven fit on a real engine: llama.cpp's llama-server at k = 1..6 and two EPS values.

For each EPS (how much the target's later blocks differ from the draft: breakeven/iotools/gguf_models.py)
it measures a baseline and a speculative run at each k with ``breakeven bench`` (runs
interleaved: base, k=1, base, k=2, ...; each on a server started for it on one port), then
fits the cycle's costs with ``breakeven fit`` and prints each k's measured, predicted and
held-out speedups, the largest held-out error and the best k, and what ``schedule`` makes of
it.  Needs the engine extra (``pip install '.[engine]'``).

    python benchmarks/llamacpp_fit.py [--requests 8] [--eps 0.3 0.05] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from llamacpp_server import free_port, llama_server

from breakeven.cli import cli
from breakeven.iotools.gguf_models import write_pair


def bench(url: str, out: Path, label: str, k: int, requests: int) -> None:
    for args in (
        ["--label", "warm-up", "--requests", "2", "--max-tokens", "16"],
        [
            "--label",
            label,
            "-k",
            str(k),
            "--requests",
            str(requests),
            "--max-tokens",
            "64",
            "--out",
            str(out),
        ],
    ):
        r = CliRunner().invoke(cli, ["bench", "--url", url + "/v1", *args])
        if r.exit_code != 0:
            raise SystemExit(r.output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.3, 0.05])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    for eps in args.eps:
        target, draft = write_pair(work / "models", eps)
        runs = work / f"runs-eps{eps:g}.csv"
        runs.unlink(missing_ok=True)
        port = free_port()
        for k in range(1, 7):
            for label, d in (("base", None), (f"k{k}", draft)):
                with llama_server(target, work / "server.log", draft=d, k=k, port=port) as s:
                    bench(s.url, runs, label, 0 if d is None else k, args.requests)
        r = CliRunner().invoke(cli, ["fit", str(runs), "--json"])
        data = json.loads(r.stdout)
        print(f"EPS {eps:g} ({runs}):")
        for g in data["groups"]:
            for row in g["by_k"]:
                print(
                    f"  k={row['k']}: accept_len {row['accept_len']:.3f}, measured "
                    f"{row['measured_speedup']:.3f}x, predicted {row['predicted_speedup']:.3f}x, "
                    f"held out {row['held_out_speedup']:.3f}x"
                )
            print(
                f"  held-out error at most {g['held_out_max_rel_error']:.1%}; best k "
                f"{g['best_k']} ({g['best_speedup']:.3f}x predicted); coefficients "
                f"{ {n: round(v, 4) for n, v in g['coefficients'].items()} }; merged "
                f"{g['merged']}"
            )


if __name__ == "__main__":
    main()
