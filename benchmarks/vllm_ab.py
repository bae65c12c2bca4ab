"""breakeven bench against vllm bench serve on one real vLLM A/B (issue 23): a baseline server
and a draft_model server (vLLM 0.32.0's CPU build, tiny models), launched alike on two ports,
each measured by breakeven bench and by vllm bench serve in turn, at concurrency 1 and 4.

Prints, per round and concurrency, the speedup each tool measures and their ratio, and bench's
per-sequence rate over the server's own (its decode-time histograms, the same requests).  The
tools run minutes apart, so their ratio moves with the machine (a server's rate moved 25%
between rounds on a shared 2-core machine): a figure to report, not a test.

    BREAKEVEN_VLLM=../vllm-venv/bin/vllm python benchmarks/vllm_ab.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_vllm import VLLM, Pool, measure_ab
from vllm_server import environment, python

from breakeven.cli import cli


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if VLLM is None:
        sys.exit("set BREAKEVEN_VLLM to a vllm mended by scripts/vllm_cpu_fixes.py")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = subprocess.run(
            [python(VLLM), str(Path(__file__).parent.parent / "tests" / "vllm_models.py"), tmp],
            capture_output=True,
            text=True,
            env=environment(VLLM),
            check=True,
        )
        models = {k: Path(v) for k, v in json.loads(made.stdout.splitlines()[-1]).items()}
        (root / "logs").mkdir()
        pool = Pool(models, root / "logs")
        try:
            for i in range(1, args.rounds + 1):
                run = measure_ab(pool, root / f"round{i}")
                r = CliRunner().invoke(
                    cli, ["compare", f"baseline={run.csv}", f"draft_model={run.csv}", "--json"]
                )
                rows = {int(row["concurrency"]): row for row in json.loads(r.output)["runs"]}
                for c, row in sorted(rows.items()):
                    served = run.served
                    theirs = (
                        served[("baseline", c)]["mean_tpot_ms"]
                        / served[("draft_model", c)]["mean_tpot_ms"]
                    )
                    ours = row["measured_speedup"]
                    rates = {
                        name: next(v for v in run.bench[name] if v["concurrency"] == c)
                        for name in ("baseline", "draft_model")
                    }
                    agreement = ", ".join(
                        f"{name} bench/server {v['tok_s'] / v['server']['tok_s']:.3f}"
                        for name, v in rates.items()
                    )
                    print(
                        f"round {i} concurrency {c}: bench (compare) {ours:.3f}x, "
                        f"vllm bench serve {theirs:.3f}x, ratio {ours / theirs:.3f}; {agreement}"
                    )
        finally:
            pool.close()


if __name__ == "__main__":
    main()
