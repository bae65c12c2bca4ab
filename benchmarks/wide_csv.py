"""``compare`` and ``check`` on a measurements CSV of many empty columns, side by side.

Issue 29: ``compare`` on a CSV with 100,000 empty columns took over a minute, where ``check``
took 2 s: compare read every column of a CSV run, check only those it uses.  Target: compare
within 2x check's time on the same file.  Prints each command's median time and the ratio.

    python benchmarks/wide_csv.py [--columns 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="breakeven-wide-"))
    try:
        path = work / "wide.csv"
        head = ["label", "model", "hardware", "concurrency", "num_spec_tokens", "tok_s"]
        head += ["accept_len"] + [f"x{i}" for i in range(args.columns)]
        empty = "," * args.columns
        rows = [f"b,m,h,1,0,{50 + i % 3},{empty}" for i in range(20)]
        rows += [f"s,m,h,1,3,{60 + i % 3},2.1{empty}" for i in range(20)]
        path.write_text(",".join(head) + "\n" + "\n".join(rows) + "\n")
        breakeven = shutil.which("breakeven") or "breakeven"
        commands = {
            "check": [breakeven, "check", str(path), "--json"],
            "compare": [breakeven, "compare", f"b={path}", f"s={path}", "--json"],
        }
        times = {}
        for name, command in commands.items():
            runs = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                runs.append(time.perf_counter() - start)
            times[name] = statistics.median(runs)
            print(f"{name:8} {times[name]:7.2f} s  ({args.columns:,} empty columns)")
        ratio = times["compare"] / times["check"]
        print(f"compare / check: {ratio:.2f}x (target: at most 2x)")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
