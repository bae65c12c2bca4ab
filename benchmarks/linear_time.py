"""Linear time: doubling a line's length at most about doubles its parse time.

Targets: for every line kind ingest reads, printed result tables, hiding URL passwords and
stripping control characters, the time of a line twice as long over the time of the line is
below 3 (a quadratic splitter, such as the old ``logs._fields`` that built a line with ``+=``,
gives 4; a 1 MB line took 5.5 s).  Each ratio is measured within one run, the best of several
repeats of both sizes, so that a busy machine's noise hits both alike.  (A timing ratio is a
speed figure: it lives here, not in the tests, which check that these long lines are read
right; issue 24's CI saw 3.6 on a loaded machine for the ``many`` case.)

    python benchmarks/linear_time.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from breakeven.core.credentials import hide_url_passwords
from breakeven.iotools.bench_results import parse_result_tables
from breakeven.iotools.ingest import ingest
from breakeven.render import printable

TARGET = 3.0


def _best(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def ratio(make, size: int, repeats: int) -> float:
    """Time of ``make(2 * size)()`` over time of ``make(size)()``, each the best of
    ``repeats``."""
    small, large = make(size), make(2 * size)
    small()  # warm: imports, compiled patterns
    return _best(large, repeats) / _best(small, repeats)


# Log lines of each kind ingest reads, made long where a line can grow: a list of
# per-position rates, extra fields, a long value.
def _vllm(n: int) -> str:
    rates = ", ".join(["0.5"] * n)
    return (
        "(APIServer pid=1) INFO 09-09 11:51:35 [metrics.py:96] SpecDecoding metrics: Draft "
        "acceptance rate: 88.8%, Mean acceptance length: 5.44, Accepted throughput: 4.37 "
        "tokens/s, Drafted throughput: 4.92 tokens/s, Accepted: 262 tokens, Drafted: 295 "
        f"tokens, Per-position acceptance rate: {rates}\n"
    )


def _sglang(n: int) -> str:
    return (
        "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: "
        "0.00, accept len: 2.17, accept rate: 0.54, cuda graph: True, gen throughput "
        "(token/s): 62.39, #queue-req: 0, " + "spare: 1, " * n + "\n"
    )


def _llamacpp(n: int) -> str:
    rates = ", ".join(["0.500"] * n)
    return (
        "0.06.895.998 I slot print_timing: id  1 | task 0 |        eval time =    2296.72 ms "
        "/   256 tokens (    8.97 ms per token,   111.46 tokens per second)\n"
        "0.06.896.000 I slot print_timing: id  1 | task 0 | draft acceptance = 0.50000 (  "
        "128 accepted /   256 generated), mean acceptance length =  1.50, acceptance rate "
        f"per position = ({rates})\n"
    )


def _table(n: int) -> str:
    return (
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     100\n"
        "Output token throughput (tok/s):         800.5\n"
        f"Mean TPOT (ms):{' ' * n}12.5\n"
        f"Median TPOT (ms): {'7' * n}\n"
        "==================================================\n"
    )


LINES = {
    "vllm": (_vllm, 40_000),
    "sglang": (_sglang, 20_000),
    "llamacpp": (_llamacpp, 30_000),
    "table": (_table, 200_000),
}


TEXTS = {
    "url passwords, one long word": "x" * 200_000,
    "url passwords, a long user": "http://" + "u" * 200_000,
    "url passwords, colons": "a:" * 100_000,
    "control characters, csi": "\x1b[" + "1" * 100_000,
    "control characters, osc": "\x1b]" + "t" * 100_000,
    "control characters, many": "\x1b[" * 50_000,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="breakeven-linear-") as work:
        for kind, (line, size) in LINES.items():

            def make(n, kind=kind, line=line):
                path = Path(work) / f"{kind}-{n}.log"
                path.write_text(line(n) * 4)
                return lambda: ingest([path])

            results[f"ingest, {kind} line"] = ratio(make, size, args.repeats)
    results["printed tables"] = ratio(
        lambda n: lambda: parse_result_tables(_table(n) * 20), 100_000, args.repeats
    )
    for name, text in TEXTS.items():
        call = hide_url_passwords if name.startswith("url") else printable
        results[name] = ratio(
            lambda n, text=text, call=call: lambda: call(text[:n]), len(text) // 2, args.repeats
        )
    width = max(map(len, results))
    for name, value in results.items():
        verdict = "meets" if value < TARGET else "MISSES"
        print(f"{name:<{width}}  2x line / 1x line: {value:4.2f}  ({verdict} < {TARGET:g})")
    sys.exit(0)


if __name__ == "__main__":
    main()
