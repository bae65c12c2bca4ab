"""Speed and memory of ``breakeven ingest`` on a large generated engine log, side by side with
``grep | awk`` doing the same work.

The yardstick selects the same line kinds ingest reads (SGLang's Decode and Prefill batch
lines, vLLM's throughput and SpecDecoding lines), with their line numbers, and extracts the
same fields from each (:data:`AWK_SAME`); both write what they extract to a file.  ingest
also computes the per-sequence rates and idle time and writes the schema's columns with
file:line sources.  Targets (issue 10), ingest's time over the yardstick's: a decode-heavy
SGLang log (--mix sglang) at most 0.8x, a sparse vLLM log (--mix vllm, 2% metric lines) at
most 3x, the same logs gzip-compressed (--gzip) at most 1.3x ``zcat LOG.gz | grep | awk``,
and a peak RSS of at most 256 MiB on a 1 GiB log.  The log mixes SGLang scheduler lines
(decode and prefill), vLLM spec-decode and throughput lines, and HTTP access lines, in
proportions like a busy server's (--mix picks an SGLang-like, vLLM-like or mixed log).
Peak memory (max RSS of one process) is reported for ingest, which reads in one process
(polars uses a thread per CPU).  A calibration, not a target: grep selecting only the lines
ingest reads (every marker breakeven knows, ``grep -nF``), with no parsing at all.  The
generated log is deleted at the end (--keep keeps it).

    python benchmarks/ingest_speed.py [--mb 1024] [--mix both|sglang|vllm] [--gzip] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The commands run in the environment the benchmark was started in: importing polars here
# (for the markers) sets polars' allocator settings in os.environ, which would reach them.
ENVIRONMENT = dict(os.environ)

# The yardstick does ingest's work on the same lines: grep selects every line kind ingest
# reads from these logs (SGLang's Decode and Prefill batch lines, vLLM's throughput and
# SpecDecoding lines), with line numbers (ingest keeps each record's file:line), and awk
# extracts the same fields ingest reads from each: decode (time, #running-req, #token,
# accept len, gen throughput, #queue-req), prefill (time, #new-token, #running-req,
# #queue-req: idle time), throughput (time, prompt and generation throughput, running,
# waiting) and SpecDecoding (time, mean acceptance length, accepted, drafted, per-position
# rates).
PATTERN = "Decode batch|Prefill batch|Avg prompt throughput|SpecDecoding metrics"
AWK_SAME = r"""
{ c = index($0, ":"); ln = substr($0, 1, c - 1); $0 = substr($0, c + 1) }
/Decode batch/ {
  n = split($0, f, ", "); ts = substr($1, 2) " " $2; r = ""; t = ""; a = ""; g = ""; q = ""
  for (i = 1; i <= n; i++) {
    split(f[i], kv, ": ")
    if (kv[1] ~ /#running-req$/) r = kv[2]
    else if (kv[1] == "#token") t = kv[2]
    else if (kv[1] == "accept len") a = kv[2]
    else if (kv[1] == "gen throughput (token/s)") g = kv[2]
    else if (kv[1] == "#queue-req") q = kv[2]
  }
  print ln ",decode," ts "," r "," t "," a "," g "," q; next
}
/Prefill batch/ {
  n = split($0, f, ", "); ts = substr($1, 2) " " $2; nt = ""; r = ""; q = ""
  for (i = 1; i <= n; i++) {
    split(f[i], kv, ": ")
    if (kv[1] == "#new-token") nt = kv[2]
    else if (kv[1] == "#running-req") r = kv[2]
    else if (kv[1] == "#queue-req") q = kv[2]
  }
  print ln ",prefill," ts "," nt "," r "," q; next
}
/Avg prompt throughput/ {
  n = split($0, f, ", "); p = ""; g = ""; r = ""; w = ""
  for (i = 1; i <= n; i++) {
    c = split(f[i], kv, ": ")
    if (kv[c - 1] ~ /Avg prompt throughput$/) p = kv[c]
    else if (kv[1] == "Avg generation throughput") g = kv[2]
    else if (kv[1] == "Running") r = kv[2]
    else if (kv[1] == "Waiting") w = kv[2]
  }
  print ln ",throughput," $4 " " $5 "," p "," g "," r "," w; next
}
/SpecDecoding metrics/ {
  n = split($0, f, ", "); m = ""; acc = ""; dr = ""; pp = ""; inpp = 0
  for (i = 1; i <= n; i++) {
    c = split(f[i], kv, ": ")
    if (c == 1 && inpp) { pp = pp " " f[i]; continue }
    inpp = 0
    if (i == 1 && kv[2] == "Mean acceptance length") m = kv[3]
    else if (kv[1] == "Accepted") acc = kv[2]
    else if (kv[1] == "Drafted") dr = kv[2]
    else if (kv[1] == "Per-position acceptance rate") { pp = kv[2]; inpp = 1 }
  }
  print ln ",spec," $4 " " $5 "," m "," acc "," dr "," pp
}
"""


# Line proportions: [access, SGLang prefill, SGLang decode, vLLM throughput, vLLM spec-decode].
MIXES = {
    # Both engines in one file, decode-heavy: the hardest case, and the default.
    "both": (0.40, 0.20, 0.30, 0.05, 0.05),
    # An SGLang server: a Decode batch line every 40 decode steps, prefill and access lines.
    "sglang": (0.35, 0.25, 0.40, 0.0, 0.0),
    # A vLLM server: metrics every 10 s among per-request access lines.
    "vllm": (0.98, 0.0, 0.0, 0.01, 0.01),
}


def generate(path: Path, megabytes: int, mix: str = "both", seed: int = 7) -> int:
    rng = random.Random(seed)
    bounds = [sum(MIXES[mix][: i + 1]) for i in range(5)]
    target = megabytes << 20
    written, lines, tokens = 0, 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            chunk = []
            for _ in range(2000):
                lines += 1
                s = lines // 60
                stamp = f"2026-02-26 {10 + (s // 3600) % 12:02d}:{(s // 60) % 60:02d}:{s % 60:02d}"
                roll = rng.random()
                if roll < bounds[0]:
                    chunk.append(
                        f"INFO:     10.0.0.{lines % 250}:{40000 + lines % 20000} - "
                        f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
                    )
                elif roll < bounds[1]:
                    chunk.append(
                        f"[{stamp} TP0] Prefill batch, #new-seq: 1, #new-token: "
                        f"{rng.randint(20, 900)}, #cached-token: 0, token usage: 0.01, "
                        f"#running-req: {rng.randint(1, 64)}, #queue-req: 0\n"
                    )
                elif roll < bounds[2]:
                    tokens += 40
                    chunk.append(
                        f"[{stamp} TP0] Decode batch, #running-req: {rng.randint(1, 64)}"
                        f", #token: {tokens}, token usage: 0.02, accept len: "
                        f"{rng.uniform(1.5, 3.5):.2f}, accept rate: 0.55, cuda graph: "
                        f"True, gen throughput (token/s): {rng.uniform(50, 900):.2f}, "
                        "#queue-req: 0\n"
                    )
                elif roll < bounds[3]:
                    chunk.append(
                        f"(APIServer pid=1) INFO 02-26 {stamp[11:]} [loggers.py:123] Engine"
                        f" 000: Avg prompt throughput: {rng.uniform(0, 9000):.1f} tokens/s,"
                        f" Avg generation throughput: {rng.uniform(50, 900):.1f} tokens/s, "
                        f"Running: {rng.randint(1, 64)} reqs, Waiting: 0 reqs, GPU KV cache"
                        " usage: 1.2%, Prefix cache hit rate: 0.0%\n"
                    )
                else:
                    drafted = rng.randint(100, 5000) * 3
                    accepted = rng.randint(0, drafted)
                    chunk.append(
                        f"(APIServer pid=1) INFO 02-26 {stamp[11:]} [metrics.py:96] "
                        f"SpecDecoding metrics: Mean acceptance length: "
                        f"{1 + accepted / (drafted / 3):.2f}, Accepted throughput: 4.37 "
                        f"tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: "
                        f"{accepted} tokens, Drafted: {drafted} tokens, Per-position "
                        "acceptance rate: 0.900, 0.700, 0.500, Avg Draft acceptance rate:"
                        " 70.0%\n"
                    )
            text = "".join(chunk)
            f.write(text)
            written += len(text.encode())
    return lines


def _markers() -> list[str]:
    """The literals ingest selects lines by (every engine's line kinds and result tables)."""
    from breakeven.iotools import bench_results as bench
    from breakeven.iotools.engines import engines

    kinds = {kind.marker for engine in engines() for kind in engine.kinds}
    return sorted(kinds | {bench.TABLE_MARKER, bench.SPEC_SECTION})


def timed(cmd: str) -> tuple[float, float]:
    """Wall seconds, and the largest peak RSS [MiB] of one of the command's processes
    (NaN without GNU time)."""
    gnu_time = shutil.which("time") if sys.platform == "linux" else None
    prefix = [gnu_time, "-f", "%M"] if gnu_time else []
    start = time.perf_counter()
    out = subprocess.run(
        [*prefix, "bash", "-c", cmd], check=True, stderr=subprocess.PIPE, text=True, env=ENVIRONMENT
    )
    wall = time.perf_counter() - start
    peak = int(out.stderr.strip().splitlines()[-1]) / 1024 if gnu_time else math.nan
    return wall, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="log size [MiB] (default 1024)")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument(
        "--mix",
        choices=sorted(MIXES),
        default="both",
        help="which server's log to imitate (default: both in one file)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    parser.add_argument(
        "--gzip",
        action="store_true",
        help="compress the log (gzip -6) and compare with zcat | grep | awk",
    )
    args = parser.parse_args()
    awk = shutil.which("mawk") or shutil.which("awk")
    breakeven = Path(sys.executable).with_name("breakeven")
    work = Path(tempfile.mkdtemp(prefix="breakeven-bench-"))
    log = work / "server.log"
    try:
        start = time.perf_counter()
        lines = generate(log, args.mb, args.mix)
        size = log.stat().st_size
        print(
            f"generated a {args.mix!r} log of {size / 2**20:.0f} MiB, {lines:,} lines in "
            f"{time.perf_counter() - start:.1f} s ({work})"
        )
        cat = "cat"
        if args.gzip:
            subprocess.run(["gzip", "-6", str(log)], check=True)
            log, cat = log.with_suffix(".log.gz"), "zcat"
            print(f"compressed to {log.stat().st_size / 2**20:.0f} MiB")
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
        commands = {}
        (work / "same.awk").write_text(AWK_SAME)
        source = f"zcat {log} | grep" if args.gzip else "grep"
        tail = "" if args.gzip else f" {log}"
        commands[f"{cat} | grep | awk"] = (
            f"{source} -anE '{PATTERN}'{tail} | {awk} -f {work / 'same.awk'} > {work / 'same.csv'}"
        )
        # A calibration, not a target: grep doing only ingest's selection of lines (every
        # marker breakeven knows, with line numbers), none of its parsing.
        (work / "markers.txt").write_text("\n".join(_markers()) + "\n")
        source = f"zcat {log} | LC_ALL=C grep" if args.gzip else "LC_ALL=C grep"
        tail = "" if args.gzip else f" {log}"
        commands[f"{cat} | grep -nF all markers"] = (
            f"{source} -anF -f {work / 'markers.txt'}{tail} > {work / 'marked.txt'}"
        )
        commands["breakeven ingest --out"] = (
            f"{breakeven} ingest {log} --out {work / 'ingest.csv'} --force 2>/dev/null"
        )
        results: dict[str, list[float]] = {}
        peaks: dict[str, float] = {}
        for _ in range(args.repeat):  # interleaved, so that a busy moment hits all alike
            for name, cmd in commands.items():
                wall, peak = timed(cmd)
                results.setdefault(name, []).append(wall)
                peaks[name] = peak
        rows = {
            f"{cat} | grep | awk": work / "same.csv",
            f"{cat} | grep -nF all markers": work / "marked.txt",
            "breakeven ingest --out": work / "ingest.csv",
        }
        mib = size / 2**20
        for name, walls in results.items():
            count = sum(1 for _ in open(rows[name]))
            print(
                f"{name:31s} {min(walls):6.2f} s  {mib / min(walls):7.1f} MiB/s  {count:,} lines "
                "out"
                + (
                    f"  (records and header; peak RSS of one process {peaks[name]:.0f} MiB)"
                    if name.startswith("breakeven")
                    else ""
                )
            )
        b = min(results["breakeven ingest --out"])
        target = 1.3 if args.gzip else {"sglang": 0.8, "vllm": 3.0}.get(args.mix)
        g = min(results[f"{cat} | grep -nF all markers"])
        print(
            f"ratio ingest / ({cat} | grep -nF all markers): {b / g:.2f}x (calibration: "
            "grep selecting the lines ingest reads, no parsing)"
        )
        for name in (f"{cat} | grep | awk",):
            g = min(results[name])
            verdict = (
                ""
                if target is None
                else f" ({'meets' if b <= target * g else 'MISSES'} the target of at most "
                f"{target}x)"
            )
            print(f"ratio ingest / ({name}): {b / g:.2f}x{verdict}")
        peak = peaks["breakeven ingest --out"]
        print(
            f"peak RSS {peak:.0f} MiB ({'meets' if peak <= 256 else 'MISSES'} the target of at "
            "most 256 MiB)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
