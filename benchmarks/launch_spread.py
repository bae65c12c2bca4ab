"""How far launches of one configuration differ on a real engine: llama.cpp's llama-server.

The threshold of ``check``'s ``launches_disagree`` (``LAUNCH_SPREAD_LIMIT``, 1.5x fastest over
slowest launch, and beyond the launches' own spread) is set from what is normal.  This starts
``--launches`` servers of each configuration (a baseline and a speculative k = 4, interleaved:
base, spec, base, spec, ...; each a server start of its own on one port), measures each with
``breakeven bench``, and prints each configuration's launch rates, their spread (fastest over
slowest) and whether ``check`` calls them noise.  Needs the engine extra
(``pip install '.[engine]'``).  Run it beside a load (``stress-ng --cpu 2``) to see a busy host.

    python benchmarks/launch_spread.py [--launches 4] [--requests 8] [--out DIR]
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
from breakeven.core.quantities import LAUNCH_SPREAD_LIMIT
from breakeven.iotools.gguf_models import write_pair

K = 4


def bench(url: str, out: Path, label: str, k: int, requests: int) -> None:
    for args in (
        ["--label", "warm-up", "--requests", "2", "--max-tokens", "16"],
        ["--label", label, "-k", str(k), "--requests", str(requests), "--max-tokens", "64"],
    ):
        extra = ["--out", str(out)] if args[1] == label else []
        r = CliRunner().invoke(cli, ["bench", "--url", url + "/v1", *args, *extra])
        if r.exit_code != 0:
            raise SystemExit(r.output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=4)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = args.out or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    target, draft = write_pair(work / "models", 0.05)
    runs = work / "runs.csv"
    runs.unlink(missing_ok=True)
    port = free_port()
    for _ in range(args.launches):
        for label, d in (("base", None), (f"k{K}", draft)):
            with llama_server(target, work / "server.log", draft=d, k=K, port=port) as s:
                bench(s.url, runs, label, 0 if d is None else K, args.requests)
    r = CliRunner().invoke(cli, ["check", str(runs), "--json"])
    data = json.loads(r.stdout)
    (c,) = data["comparisons"]
    print(f"{args.launches} launches of each configuration ({runs}):")
    print(
        f"  speedup {c['measured_speedup']:.3f}x (95% {c['ci_low']:.3f}-{c['ci_high']:.3f}), "
        f"verdict {c['verdict']}; the larger side's launch spread {c['launch_spread']:.3f}x "
        f"(noise beyond {LAUNCH_SPREAD_LIMIT}x)"
    )
    import pandas as pd

    from breakeven.measurements.intervals import launch_spread

    rows = pd.read_csv(runs)
    for label, side in rows.groupby("label"):
        for origin, view in side.groupby("origin"):
            spread = launch_spread(view["tok_s"], view["launch_id"], view["completion_tokens"] - 1)
            rates = ", ".join(f"{x:.1f}" for x in spread.rates)
            print(
                f"  {label}, {origin}'s rates by launch: {rates} tok/s; fastest/slowest "
                f"{spread.ratio:.3f}x, {'within' if spread.explained else 'beyond'} the "
                "launches' own spread"
            )
    flagged = [f["message"] for f in data["flags"] if f["code"] == "launches_disagree"]
    print("  launches_disagree: " + ("; ".join(flagged) if flagged else "none"))


if __name__ == "__main__":
    main()
