"""Bounds of ``breakeven fleet`` against a hostile Prometheus (issue 29), as ratios.

- Summary time, linear in steps: one server's summary (:meth:`Collector.instances`:
  means, the acceptance-drop search) of 80,000 steps over that of 10,000.  Linear is about 8;
  the quadratic drop search it replaced (a median of every suffix and of a sliding window,
  each sorted anew) took some 3 s at 80,000 steps, a ratio far above 8.  Its steps fall by a
  quarter halfway, so that the search runs through the steps before it finds the drop.
- Memory of a chunk, bounded by the samples: the peak memory (tracemalloc) of turning a
  117 KB answer of 1,000 servers with 2 samples each, in a 10,000-step chunk, into rows, over
  the answer's size.  The dense table it replaced (10,000 steps x 5 quantities a server)
  took 836 MB, some 7,000 times the answer.
- The depth check of :func:`breakeven.iotools.jsonsafe.loads_bounded` against ``json.loads``
  on a 50 MB answer (its cost over the parse it guards).
- A gzip bomb (a 100 MB answer of spaces, some 100 KB compressed): the bytes decompressed
  before it is refused, over the limit on an answer.

Each time is the best of ``--repeats`` (a busy machine's noise hits both sizes alike).  A
speed figure lives here, not in the tests (tests/test_fleet_hostile.py checks that the same
answers are read right or refused).

    python benchmarks/fleet_bounds.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

from breakeven.core.errors import BreakevenError
from breakeven.fleet.view import Chunk, Collector
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.query_range import MAX_ANSWER_BYTES, PrometheusAPI

START = 1_790_000_000


def _best(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _collector(steps: int) -> Collector:
    collector = Collector()
    for i in range(steps):
        tau = 3.0 + 0.01 * (i % 7) if i < steps // 2 else 2.2 + 0.01 * (i % 5)
        collector.add(
            {
                "run_id": "a:8000|m",
                "engine": "vllm",
                "label": "a:8000",
                "model": "m",
                "time": START + 60.0 * i,
                "accept_len": tau,
                "num_spec_tokens": 4,
                "concurrency": 8.0 + i % 3,
                "tok_s": 40.0,
                "aggregate_tok_s": 320.0,
            }
        )
    return collector


def summary_ratio(repeats: int) -> tuple[float, float, float]:
    small, large = _collector(10_000), _collector(80_000)
    small.instances()  # warm
    a = _best(lambda: small.instances(tolerance=0.2), repeats)
    b = _best(lambda: large.instances(tolerance=0.2), repeats)
    return a, b, b / a


def chunk_memory() -> tuple[int, int, float]:
    result = [
        {
            "metric": {"instance": f"srv{s:04d}:8000", "model_name": "m"},
            "values": [[START + 60 * j, "2.5"] for j in (0, 1)],
        }
        for s in range(1000)
    ]
    size = len(json.dumps(result))
    tracemalloc.start()
    chunk = Chunk("vllm", START, 60.0, 10_000)
    chunk.add("accept_len", result)
    rows = sum(1 for _ in chunk.rows("bench"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rows == 2000
    return size, peak, peak / size


def depth_cost(repeats: int) -> tuple[float, float, float]:
    values = ",".join(f'[{START + 60 * i},"{i * 0.1:.3f}"]' for i in range(2_000_000))
    text = (
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
        '{"instance":"a:8000"},"values":[' + values + "]}]}}"
    )
    plain = _best(lambda: json.loads(text), repeats)
    bounded = _best(lambda: loads_bounded(text, 16, "the answer"), repeats)
    return plain, bounded, bounded / plain


def bomb() -> tuple[int, int, int, str]:
    body = gzip.compress(b'{"status":"success","data":' + b" " * (100 << 20) + b"}", 9)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    api = PrometheusAPI(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        api.query_range("up", START, START + 60, 60.0)
        message = "read (not refused!)"
    except BreakevenError as e:
        message = str(e)
    finally:
        api.close()
        server.shutdown()
        server.server_close()
    return len(body), api.bytes_decoded, MAX_ANSWER_BYTES, message


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    a, b, r = summary_ratio(args.repeats)
    print(f"summary: 10,000 steps {a:.3f} s, 80,000 steps {b:.3f} s: ratio {r:.1f} (linear: 8)")
    size, peak, r = chunk_memory()
    print(
        f"chunk memory: a {size / 1e3:.0f} KB answer of 1,000 servers in a 10,000-step chunk "
        f"peaks at {peak / 1e6:.1f} MB: {r:.1f} times the answer (dense tables: 836 MB)"
    )
    plain, bounded, r = depth_cost(args.repeats)
    print(
        f"depth check: json.loads of a 50 MB answer {plain:.2f} s, loads_bounded {bounded:.2f} s:"
        f" ratio {r:.2f}"
    )
    sent, decoded, limit, message = bomb()
    print(
        f"gzip bomb: {sent / 1e3:.0f} KB sent (100 MB decompressed), {decoded / 1e6:.1f} MB "
        f"decompressed before the refusal: {decoded / limit:.3f} of the {limit >> 20} MiB "
        f"limit\n  {message}"
    )


if __name__ == "__main__":
    main()
