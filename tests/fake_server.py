"""A small OpenAI-compatible streaming server on 127.0.0.1, for bench tests and benchmarks.

It generates ``max_tokens`` tokens at a configured rate, ``tokens_per_chunk``
tokens per streamed chunk (as a speculative server emits several tokens per
cycle), keeps vLLM-style spec-decode counters on ``/metrics`` (as trtllm-serve, its
``/prometheus/metrics`` and drained ``/metrics`` iteration stats: tests/fake_trtllm.py), and can be told
to misbehave: a 404 on the models route, a 503 until it is "loaded", a
connection reset mid-stream, malformed SSE, a slow first token.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import socket
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fake_trtllm


@dataclass
class Behaviour:
    model: str = "fake-model"
    seconds_per_token: float = 0.005
    tokens_per_chunk: int = 1
    num_spec_tokens: int = 0  # > 0: count spec-decode cycles on /metrics
    spec_counters: bool = False  # show them with k = 0 too (a speculative server not drafting)
    # trtllm-serve's /metrics: a JSON list of iteration stats, no Prometheus text
    # (tensorrt_llm/serve/openai_server.py, get_iteration_stats)
    trtllm: bool = False
    # trtllm-serve's /prometheus/metrics (return_perf_metrics: true) and its iteration stats
    # on /metrics (enable_iter_perf_stats: true), in TensorRT-LLM's formats (tests/fake_trtllm.py)
    trtllm_prometheus: bool = False
    iteration_stats: bool = False
    stats: Any = None  # the iterations not yet read (a deque)
    drafted_per_pos: list[int] = field(default_factory=list)
    accepted_per_pos: list[int] = field(default_factory=list)
    iterations: int = 0
    models_404: bool = False
    loading_until: float = 0.0  # 503 on every route before this time.monotonic()
    reset_after_chunks: int | None = None  # abort the connection mid-stream
    reset_requests: int = 10**9  # ... for this many requests, then behave
    malformed_sse: bool = False
    first_token_delay: float = 0.0
    usage_per_chunk: bool = True
    # /metrics padded with this many histogram samples, as a real server's is (vLLM's runs to
    # thousands of lines): its parse then takes that long.
    metrics_padding: int = 0
    # With num_spec_tokens: the last (usage) chunk carries the request's own spec-decode counts
    # under metrics.speculative_decoding, as vLLM's --per-request-spec-decode-metrics summary
    # does (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict, vLLM 0.32.0).
    per_request_spec: bool = False
    # Tokens a chunk (a cycle: 1 + the drafts it accepted) carries for a request whose prompt
    # holds the key (the first key it holds), else tokens_per_chunk: workloads that accept
    # differently, as code accepts more than chat under most drafters.
    chunk_tokens_by_prompt: dict[str, int] = field(default_factory=dict)
    # Tokens a cycle drafts (default num_spec_tokens): a llama.cpp draft model stops short of
    # k where its next token's probability is under --draft-p-min.
    draft_len: int | None = None
    # With num_spec_tokens: the last chunk carries llama-server's ``timings`` with the
    # request's own drafted and accepted tokens and not its cycles (tools/server
    # server_task_result_cmpl_final: draft_n, draft_n_accepted).
    llamacpp_timings: bool = False
    # With num_spec_tokens: answer /get_server_info as SGLang does and, to a request that asks
    # with return_spec_tokens_details, send its counts in ``sglext.spec_tokens_details``
    # before the usage chunk (sgl-project/sglang PR 33518).
    sglang_spec: bool = False
    # vLLM's own timing on /metrics (request_generation_tokens, request_decode_time_seconds,
    # inter_token_latency_seconds: sums and counts), its decode times scaled by timing_scale
    # (below 1: a server whose clock disagrees with the client's).
    timing_counters: bool = False
    timing_scale: float = 1.0
    # A cycle's time when set [s]: each chunk (a cycle of tokens_per_chunk tokens) sleeps this
    # long instead of seconds_per_token per token, as a verify forward costs about one step.
    cycle_s: float | None = None
    # The whole output held back and sent at once when decoded, as a vLLM CPU server whose API
    # process is starved by its engine's threads sends it (a first token after the whole
    # decode, then every chunk within a millisecond): bursts the client cannot time.
    held: bool = False
    # /metrics sleeps this long [s] once metrics_slow_after requests have finished (the scrapes
    # before a level stay quick), as a loaded server's does: metrics_waiting counts the scrapes
    # sleeping now.
    metrics_delay: float = 0.0
    metrics_slow_after: int = 0
    metrics_waiting: int = 0
    # Every reply (the stream, /metrics, /v1/models, /version) sent gzip-encoded: on the routes
    # of bomb_routes, a bomb of gzip_bomb bytes of zeros where set; else the reply itself.
    gzip_replies: bool = False
    gzip_bomb: int = 0
    bomb_routes: tuple[str, ...] = ("/v1/completions", "/v1/chat/completions")
    # Each completion request's arrival (time.perf_counter, on the client's clock when the
    # server runs in the test's process) and the requests in flight, itself included, as it
    # arrived: the schedule an open-loop bench sent, as the server saw it.
    arrivals: list[float] = field(default_factory=list)
    in_flight_at_arrival: list[int] = field(default_factory=list)
    in_flight: int = 0
    # A decode that slows as requests pile up, as a batching server's does: each token takes
    # seconds_per_token x (1 + crowding x the other requests in flight).
    crowding: float = 0.0
    # A decode that slows with the rate requests arrive at, as one whose batch grows with the
    # load: each chunk's time x (1 + rate_crowding x 1 / the gap since the previous request's
    # arrival [req/s]; the first request's rate is 0).  Its TPOT at a steady rate R is then
    # known exactly, whatever the requests in flight: seconds_per_token (or cycle_s /
    # tokens_per_chunk) x (1 + rate_crowding x R).
    rate_crowding: float = 0.0
    # Where set, a request's text ends after this many tokens (the model's end of text): the
    # stream ends there, unless the request sends ignore_eos true,
    # as vLLM's and SGLang's sampling params do.
    natural_stop: int | None = None
    # Each completion request's body, as sent (sampling settings included).
    bodies: list[dict] = field(default_factory=list)
    finished: int = 0
    generated: int = 0
    decode_s: float = 0.0
    steps: int = 0
    # Counters, as the metrics endpoint reports them.
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    requests_seen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    behaviour: Behaviour

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:  # the client hung up (a bomb it read no further): no traceback
            pass

    def _json(self, status: int, body: object) -> None:
        data = self._body(json.dumps(body).encode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self._encoding()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _raw(self, status: int, data: bytes, content_type: str) -> None:
        data = self._body(data)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self._encoding()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self, data: bytes) -> bytes:
        """A reply's body as sent: gzip-encoded (or the gzip bomb) with gzip_replies; the
        caller sends the Content-Encoding header (:meth:`_encoding`)."""
        b = self.behaviour
        if not b.gzip_replies:
            return data
        return gzip_bomb(b.gzip_bomb) if self._bombed() else gzip.compress(data)

    def _bombed(self) -> bool:
        b = self.behaviour
        return b.gzip_replies and b.gzip_bomb > 0 and self.path in b.bomb_routes

    def _encoding(self) -> None:
        if self.behaviour.gzip_replies:
            self.send_header("Content-Encoding", "gzip")

    def _loading(self) -> bool:
        if time.monotonic() < self.behaviour.loading_until:
            self._json(503, {"error": "model is loading"})
            return True
        return False

    def do_GET(self) -> None:
        b = self.behaviour
        if self._loading():
            return
        if self.path == "/v1/models":
            if b.models_404:
                self._json(404, {"detail": "Not Found"})
            else:
                self._json(200, {"object": "list", "data": [{"id": b.model, "object": "model"}]})
        elif self.path == "/version" and not b.sglang_spec:
            self._json(200, {"version": "fake-0.1"})
        elif self.path == "/get_server_info" and b.sglang_spec:
            self._json(200, {"version": "fake-sglang-0.1", "speculative_algorithm": "EAGLE"})
        elif self.path == "/metrics" and b.trtllm:
            self._raw(200, fake_trtllm.iteration_stats(b), "application/json")
        elif self.path == "/prometheus/metrics" and b.trtllm and b.trtllm_prometheus:
            self._raw(200, fake_trtllm.prometheus_text(b).encode(), "text/plain; version=0.0.4")
        elif self.path == "/metrics":
            if b.metrics_delay and b.finished >= b.metrics_slow_after:
                with b.lock:
                    b.metrics_waiting += 1
                time.sleep(b.metrics_delay)
                with b.lock:
                    b.metrics_waiting -= 1
            with b.lock:
                # Only a speculating server has spec-decode counters: vLLM creates them only
                # with a speculative config (vllm/v1/spec_decode/metrics.py, SpecDecodingProm,
                # 0.32.0: "if not self.spec_decoding_enabled: return").
                text = (
                    ""
                    if not (b.num_spec_tokens or b.spec_counters)
                    else (
                        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
                        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
                        f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="{b.model}"}} {b.drafts}\n'
                        "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.\n"
                        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
                        f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="{b.model}"}} {b.draft_tokens}\n'
                        "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.\n"
                        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
                        f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="{b.model}"}} {b.accepted}\n'
                    )
                )
                if b.timing_counters:
                    labels = f'{{engine="0",model_name="{b.model}"}}'
                    text += "".join(
                        f"vllm:{name}{labels} {value}\n"
                        for name, value in (
                            ("request_generation_tokens_sum", b.generated),
                            ("request_generation_tokens_count", b.finished),
                            ("request_decode_time_seconds_sum", b.decode_s),
                            ("request_decode_time_seconds_count", b.finished),
                            ("inter_token_latency_seconds_sum", b.decode_s),
                            ("inter_token_latency_seconds_count", b.steps),
                        )
                    )
                if b.metrics_padding:
                    text += "# TYPE vllm:request_latency_seconds histogram\n" + "".join(
                        f'vllm:request_latency_seconds_bucket{{model_name="{b.model}",le="{i}"}} 0\n'
                        for i in range(b.metrics_padding)
                    )
            data = self._body(text.encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self._encoding()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        b = self.behaviour
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self._loading():
            return
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self._json(404, {"detail": "Not Found"})
            return
        if request.get("model") != b.model:
            self._json(
                404, {"error": {"message": f"The model `{request.get('model')}` does not exist."}}
            )
            return
        with b.lock:
            b.requests_seen += 1
            resetting = b.reset_after_chunks is not None and b.requests_seen <= b.reset_requests
            b.in_flight += 1
            now = time.perf_counter()
            gap = now - b.arrivals[-1] if b.arrivals else math.inf
            b.arrivals.append(now)
            b.in_flight_at_arrival.append(b.in_flight)
        self.load = 1.0 + b.rate_crowding * (1.0 / gap if gap > 0 else 0.0)
        try:
            self._complete(b, request, resetting)
        finally:
            with b.lock:
                b.in_flight -= 1

    def _complete(self, b: Behaviour, request: dict, resetting: bool) -> None:
        """Stream a completion of ``request``."""
        max_tokens = int(request.get("max_tokens", 16))
        with b.lock:
            b.bodies.append(request)
        if b.natural_stop is not None and request.get("ignore_eos") is not True:
            max_tokens = min(max_tokens, b.natural_stop)
        chat = self.path.endswith("chat/completions")
        per_chunk = _chunk_tokens(b, request)
        drafted_per_cycle = b.num_spec_tokens if b.draft_len is None else b.draft_len
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self._encoding()
        self.end_headers()
        if self._bombed():
            self.wfile.write(gzip_bomb(b.gzip_bomb))
            return
        # gzip_replies: the stream is one gzip member, flushed at each chunk (as a compressing
        # server or proxy streams it).
        packer = zlib.compressobj(wbits=31) if b.gzip_replies else None

        def send(data: bytes, last: bool = False) -> None:
            if packer is not None:
                data = packer.compress(data) + packer.flush(
                    zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH
                )
            self.wfile.write(data)

        time.sleep(b.first_token_delay)
        sent, chunks = 0, 0
        due = time.perf_counter()  # rate_crowding: when the next chunk is due
        histogram = [0] * (b.num_spec_tokens + 1)
        first = None
        held: list[bytes] = []  # what is decoded and not yet sent
        while sent < max_tokens:
            if resetting and chunks == b.reset_after_chunks:
                # An abortive close: the client sees a connection reset mid-stream.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
                return
            m = min(per_chunk, max_tokens - sent)
            crowd = (1.0 + b.crowding * max(0, b.in_flight - 1)) * self.load
            pause = crowd * (b.cycle_s if b.cycle_s is not None else b.seconds_per_token * m)
            if b.rate_crowding:  # each chunk on its own due time: sleeps' overshoots don't add up
                due = (due if chunks else time.perf_counter()) + pause  # from the first
                time.sleep(max(0.0, due - time.perf_counter()))
            else:
                time.sleep(pause)
            sent += m
            chunks += 1
            if b.num_spec_tokens:
                histogram[min(m - 1, b.num_spec_tokens)] += 1
                with b.lock:
                    b.drafts += 1
                    b.draft_tokens += drafted_per_cycle
                    b.accepted += m - 1
                    if b.trtllm:
                        fake_trtllm.on_cycle(b, m, drafted_per_cycle, pause)
            delta = {"delta": {"content": "x" * m}} if chat else {"text": "x" * m}
            body = {"choices": [{"index": 0, **delta, "finish_reason": None}]}
            if b.usage_per_chunk:
                body["usage"] = {
                    "prompt_tokens": 5,
                    "completion_tokens": sent,
                    "total_tokens": 5 + sent,
                }
            if b.malformed_sse and chunks == 2:
                held.append(b"data: {this is not json\n\n")
            else:
                held.append(f"data: {json.dumps(body)}\n\n".encode())
            if not b.held:
                send(b"".join(held))
                self.wfile.flush()
                held.clear()
            first = first if first is not None else time.perf_counter()
        send(b"".join(held))
        with b.lock:
            b.finished += 1
            b.generated += sent
            b.decode_s += b.timing_scale * (time.perf_counter() - first if first else 0.0)
            b.steps += max(chunks - 1, 0)
        usage = {"prompt_tokens": 5, "completion_tokens": sent, "total_tokens": 5 + sent}
        last: dict = {"choices": [], "usage": usage}
        steps = sum(histogram)
        accepted = sum(j * n for j, n in enumerate(histogram))
        if b.llamacpp_timings and b.num_spec_tokens:
            last["timings"] = {
                "predicted_n": sent,
                "draft_n": steps * drafted_per_cycle,
                "draft_n_accepted": accepted,
            }
        if b.sglang_spec and b.num_spec_tokens and request.get("return_spec_tokens_details"):
            details = {
                "spec_num_proposed_drafts": steps * drafted_per_cycle,
                "spec_num_correct_drafts": accepted,
                "spec_verify_ct": steps,
                "spec_correct_drafts_histogram": histogram,
            }
            extra = {"choices": [], "usage": None, "sglext": {"spec_tokens_details": details}}
            send(f"data: {json.dumps(extra)}\n\n".encode())
        if b.per_request_spec and b.num_spec_tokens:
            last["metrics"] = {
                "speculative_decoding": {
                    "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
                    "draft_acceptance_rate": accepted / (steps * b.num_spec_tokens or 1),
                    "acceptance_histogram": histogram,
                    "num_spec_steps": steps,
                    "num_accepted_draft_tokens": accepted,
                    "num_draft_tokens": steps * drafted_per_cycle,
                    "num_spec_tokens": b.num_spec_tokens,
                }
            }
        send(f"data: {json.dumps(last)}\n\n".encode())
        send(b"data: [DONE]\n\n", last=True)
        self.wfile.flush()


def _chunk_tokens(b: Behaviour, request: dict) -> int:
    """Tokens a chunk of this request carries: chunk_tokens_by_prompt's for its prompt (a
    completion's prompt, a chat's last message), else tokens_per_chunk."""
    prompt = request.get("prompt")
    messages = request.get("messages")
    if prompt is None and isinstance(messages, list) and messages:
        prompt = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    text = prompt if isinstance(prompt, str) else ""
    for key, tokens in b.chunk_tokens_by_prompt.items():
        if key in text:
            return tokens
    return b.tokens_per_chunk


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(size: int) -> bytes:
    """``size`` bytes of zeros, gzip-compressed (about a thousandth of ``size``), built once a
    megabyte at a time."""
    if size not in _BOMBS:
        packer = zlib.compressobj(9, wbits=31)
        zeros = bytes(1 << 20)
        parts = [
            packer.compress(zeros[: min(len(zeros), size - done)])
            for done in range(0, size, len(zeros))
        ]
        _BOMBS[size] = b"".join(parts) + packer.flush()
    return _BOMBS[size]


ACCEPT = 0.7
"""The share of a cycle's k drafted tokens the fake server's main() accepts."""
VERIFY_PER_TOKEN = 0.25
"""What each drafted token adds to the fake server's cycle [steps]."""


class FakeServer:
    """Start with ``with FakeServer(Behaviour(...)) as server: server.url``."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        handler = type("Handler", (_Handler,), {"behaviour": self.behaviour})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _note_pid(path: str, pid: int) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{pid}\n")


def _sleep_forever_ignoring_sigterm() -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(3600)


def _behave(args: object) -> None:
    """Behave as real servers' processes do, as the flags ask (in this order):
    ``--daemonize`` (fork, ``setsid``, fork again; the first two exit 0 at once, as a wrapper
    that backgrounds the server does), ``--print-args`` (its arguments, a token among them,
    and a terminal's window-title and clipboard escapes, on stdout), ``--children`` (a child
    that ignores SIGTERM, as vLLM's engine core and workers are, and a grandchild that
    escapes with a double fork and ``setsid``, ignoring SIGTERM too), ``--stubborn`` (the
    server ignores SIGTERM), ``--ready-after S`` (listen only after S seconds).  Every
    process's id goes to ``--pid-file``."""
    import os
    import signal
    import sys

    if args.daemonize:
        if os.fork():
            os._exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
    _note_pid(args.pid_file, os.getpid())
    if args.print_args:
        print(" ".join(sys.argv), flush=True)
        print("\x1b]0;title set by the server\x07\x1b]52;c;ZXZpbA==\x07 ready soon", flush=True)
    if args.children:
        for escape in (False, True):
            pid = os.fork()
            if pid == 0:
                if escape:
                    os.setsid()
                    if os.fork():
                        os._exit(0)
                _note_pid(args.pid_file, os.getpid())
                _sleep_forever_ignoring_sigterm()
            if escape:
                os.waitpid(pid, 0)
    if args.stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.ready_after)


def _trtllm_draft_len(path: str | None) -> int:
    """The max_draft_len of an --extra_llm_api_options file, refused (an exception: the server
    exits before it is ready) where TensorRT-LLM would refuse it; 0 without one."""
    if path is None:
        return 0
    from engine_rules import trtllm_load_options, trtllm_validate

    with open(path, encoding="utf-8") as f:
        spec = trtllm_load_options(f.read())
    trtllm_validate(spec)
    return int(spec["max_draft_len"])


def main(argv: list[str] | None = None) -> None:
    """A fake server in a process of its own, whose command line and environment are its own
    as a real server's are: ``python tests/fake_server.py --port N [--seconds-per-token S]
    [--num-spec-tokens K] [--speculative-config JSON] [FLAG ...]`` (other flags are accepted
    and ignored: they stand for a server's own).

    ``--speculative-config`` is vLLM's flag, as ``breakeven sweep`` adds it, and
    ``--spec-draft-n-max`` llama.cpp's: with k = ``num_speculative_tokens`` or that, a cycle takes ``(1 + VERIFY_PER_TOKEN * k)`` steps and emits
    ``1 + round(ACCEPT * k)`` tokens, so k = 2 and 4 pay about 1.33x and 2x."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seconds-per-token", type=float, default=0.001)
    parser.add_argument("--num-spec-tokens", type=int, default=0)
    parser.add_argument("--speculative-config", type=json.loads, default=None)
    # llama.cpp's k, as sweep --engine llamacpp (and so breakeven demo) adds it; llama-server's
    # other flags (-m, -t, -c, -np, --metrics, --spec-type, ...) are parsed and ignored.
    parser.add_argument("--spec-draft-n-max", type=int, default=None)
    # TensorRT-LLM's: trtllm-serve MODEL --extra_llm_api_options FILE, the YAML read and checked
    # by TensorRT-LLM's own rules (tests/engine_rules.py), as sweep --engine trtllm writes it.
    parser.add_argument("--extra_llm_api_options", default=None)
    parser.add_argument("--trtllm", action="store_true", help="trtllm-serve's /metrics (JSON)")
    # A noisy host: the n-th launch (counted in --launch-count-file) runs its tokens this many
    # times slower, from the comma-separated --launch-slowdowns (cycled), as launches of one
    # configuration on a busy host do.
    parser.add_argument("--launch-slowdowns", default="")
    parser.add_argument("--launch-count-file", default="")
    # How a real server's processes behave (issue 40), for the sweep's keeper to cope with.
    parser.add_argument("--pid-file", default="", help="append every process's id to it")
    parser.add_argument("--children", action="store_true", help=_behave.__doc__)
    parser.add_argument("--stubborn", action="store_true", help="ignore SIGTERM itself")
    parser.add_argument("--daemonize", action="store_true", help="double fork, setsid, exit 0")
    parser.add_argument("--ready-after", type=float, default=0.0, help="listen only after S s")
    parser.add_argument("--print-args", action="store_true", help="print argv and escapes")
    parser.add_argument("--natural-stop", type=int, default=None, help="Behaviour.natural_stop")
    args, _ = parser.parse_known_args(argv)
    _behave(args)
    seconds_per_token = args.seconds_per_token
    if args.launch_slowdowns and args.launch_count_file:
        slowdowns = [float(x) for x in args.launch_slowdowns.split(",")]
        with open(args.launch_count_file, "a+", encoding="utf-8") as f:
            f.seek(0)
            launch = len(f.read())
            f.write(".")
        seconds_per_token *= slowdowns[launch % len(slowdowns)]
    behaviour = Behaviour(
        seconds_per_token=seconds_per_token,
        num_spec_tokens=args.num_spec_tokens,
        natural_stop=args.natural_stop,
    )
    trtllm_k = _trtllm_draft_len(args.extra_llm_api_options)
    behaviour.trtllm = args.trtllm or args.extra_llm_api_options is not None
    if args.speculative_config or args.spec_draft_n_max or trtllm_k:
        k = (
            trtllm_k
            or args.spec_draft_n_max
            or int(args.speculative_config["num_speculative_tokens"])
        )
        behaviour.num_spec_tokens = k
        behaviour.tokens_per_chunk = 1 + round(ACCEPT * k)
        behaviour.cycle_s = seconds_per_token * (1 + VERIFY_PER_TOKEN * k)
        # A node whose speculation runs faster (sweep --ray's node drift): the raylet's
        # environment, which its tasks' processes and so their launches inherit.
        behaviour.cycle_s /= float(os.environ.get("FAKE_SERVER_SPEC_SPEEDUP", "1"))
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


if __name__ == "__main__":
    main()


def timed(row: dict) -> bool:
    """A bench CSV row has a positive rate, or says why not: a request read from the socket at
    once (a client busy for a few milliseconds while a fast fake server wrote 8 tokens a
    millisecond apart) came in one burst, and its row keeps no rate."""
    if row["tok_s"]:
        return float(row["tok_s"]) > 0
    return row["source"].endswith("(came in one burst: no rate)")
