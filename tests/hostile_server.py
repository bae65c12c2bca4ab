"""A hostile OpenAI-compatible server on 127.0.0.1, for bench's fault tests.

Each mode is one way a server, a proxy or a network has been seen to break
the protocol.  ``models`` modes break ``GET /v1/models`` (the readiness
probe); ``stream`` modes break a streamed completion, on every ``fault_every``-th
request (1-based), while the others are answered well, so a test can check that
the rows completed before a fault are kept.  Every wait is bounded (at most
``MAX_WAIT_S``, and it ends when the server stops): no test can hang on it.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_WAIT_S = 20.0

MODELS_MODES = (
    "reset",  # the connection is reset before a reply
    "html",  # 200 with an HTML page
    "list",  # 200 with a JSON list
    "string",  # 200 with a JSON string
    "bad_ids",  # models whose id is null or an integer
    "stall",  # the request is read, nothing is ever sent
)
STREAM_MODES = (
    "sse_number",  # data: 42
    "sse_list",  # data: [1, 2]
    "usage_strings",  # usage token counts as strings (digits, and a word)
    "choices_not_list",  # choices is an object
    "invalid_json",  # data: {oops
    "no_done",  # the stream ends without [DONE]
    "reset_mid",  # the connection is reset mid-stream
    "stall_headers",  # the request is read, no response headers are ever sent
    "stall_stream",  # two chunks, then nothing
    "drip",  # a byte every 50 ms, never an event: only a whole-request timeout ends it
    "huge_event",  # one 50 MB event, then [DONE]
    "echo_headers",  # 500 with the request's headers (the API key among them) in the body
)
# Modes of a server that echoes secrets (``Hostility.echo``), each placed where bench cuts what
# it shows so that the cut falls inside the first echoed text; kept apart from the modes above
# (tests/test_bench_hostile.py expects each of those).
ECHO_MODELS_MODES = (
    "echo_500",  # /v1/models answers 500 with the echoes in its body
    "echo_html",  # /v1/models answers 200 with a page (not JSON) holding the echoes
)
ECHO_STREAM_MODES = (
    "echo_500",  # a completion answers 500 with the echoes in its body
    "echo_event",  # a malformed server-sent event holding the echoes
)
ECHO_ROUTES = ("props", "version", "sglang")
# Faults the server fuzz draws from besides the modes above (tests/test_fuzz_servers.py): token
# counts and counters no engine sends, events nested past the recursion limit.
FUZZ_STREAM_MODES = (
    "usage_digits",  # completion_tokens a whole number of 400 digits
    "usage_inf",  # completion_tokens Infinity (Python's json writes it; it is not JSON)
    "usage_negative",  # completion_tokens -5
    "deep_event",  # an event nested 100,000 deep
    "spec_digits",  # metrics.speculative_decoding counts of 400 digits, a histogram of them
)
METRICS_MODES = (
    "inf",  # vLLM's spec-decode counters at +Inf
    "digits",  # counters of 400 digits
    "garbage",  # not the text format at all
    "nan",  # NaN counters
    "huge_line",  # one 2 MB metric line
)
TRTLLM_STATS_MODES = (
    "empty",  # [] (drained by an earlier read)
    "not_list",  # one iteration object, not the list
    "missing",  # iterations lacking fields: no iterLatencyMS, no numRequestsWithDraftTokens
    "odd",  # items that are strings or lists, counts that are strings, null or booleans
    "negative",  # negative counts, more tokens accepted than drafted
    "digits",  # counts of 400 digits
    "nan",  # NaN and Infinity counts (Python's json writes them; they are not JSON)
    "backwards",  # iter going back to 1 (a restart between reads), counts valid
    "deep",  # nested 100,000 deep
)
"""How a trtllm-serve-like /metrics (``Hostility.trtllm_stats``) answers: JSON iteration stats,
valid and not, after one valid iteration (two requests drafting 3 each, 4 accepted)."""
"""Which route tells the engine (llama.cpp's /props, vLLM's /version with /metrics,
SGLang's /get_server_info), each with the echoes in what bench records of it."""
# A llama.cpp-like server (``Hostility.llamacpp``): /health, /props, ``timings`` in a stream's
# last chunk and ``llamacpp:`` counters, as llama-server's tools/server answers them; and
# these faults in them (``Hostility.llamacpp_fault``).
LLAMACPP_FAULTS = (
    "props_deep",  # /props nested 100,000 deep
    "props_list",  # /props a JSON list
    "props_digits",  # build_info and total_slots numbers of 400 digits
    "props_odd",  # settings of the wrong types: n_ctx a string, speculative.n_max -3, null
    "timings_digits",  # timings' draft counts of 400 digits
    "timings_inverted",  # more drafts accepted than drafted, a negative predicted_n
    "timings_odd",  # timings a list; draft_n a string; predicted_per_second NaN
    "metrics_inf",  # llamacpp: counters at +Inf
    "metrics_backwards",  # counters that go down between scrapes
)


@dataclass
class Hostility:
    models: str | None = None
    stream: str | None = None
    fault_every: int = 1
    model: str = "hostile-model"
    seconds_per_token: float = 0.001
    requests_seen: int = 0
    faults_sent: int = 0
    authorizations: list[str] = field(default_factory=list)
    echo: tuple[str, ...] = ()  # texts (secrets, their forms, their starts) the server echoes
    echo_route: str | None = None  # one of ECHO_ROUTES: answers with the echoes
    metrics: str | None = None  # one of METRICS_MODES: /metrics answers so (else 404)
    trtllm_stats: str | None = None  # one of TRTLLM_STATS_MODES: /metrics answers so
    llamacpp: bool = False  # answer as llama-server does (see LLAMACPP_FAULTS)
    llamacpp_fault: str | None = None  # one of LLAMACPP_FAULTS
    scrapes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    hostility: Hostility
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _wait(self, seconds: float = MAX_WAIT_S) -> None:
        self.hostility.stop.wait(min(seconds, MAX_WAIT_S))

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _echoed(self, pad: str, width: int) -> str:
        """The echoes after ``width`` characters of ``pad``: a cut of bench's just past
        ``width`` falls inside the first echoed text."""
        return pad * width + " | ".join(self.hostility.echo)

    def _echo_get(self) -> bool:
        """Answer an identity route or /metrics with the echoes; False where none applies."""
        h = self.hostility
        route = {"/props": "props", "/version": "version", "/get_server_info": "sglang"}
        if h.echo_route is not None and route.get(self.path) == h.echo_route:
            version = self._echoed("v", 10)  # the version is cut at 40 characters
            setting = self._echoed("m", 185)  # a served setting at 200
            if h.echo_route == "props":
                body = {"build_info": version, "model_path": setting, "total_slots": 1}
            elif h.echo_route == "version":
                body = {"version": version}
            else:
                body = {"version": version, "model_path": setting, "dtype": setting}
            self._send(200, json.dumps(body).encode())
            return True
        if self.path == "/metrics" and h.echo_route == "version":
            value = self._echoed("c", 185).replace("\\", "\\\\").replace('"', '\\"')
            text = (
                "# TYPE vllm:cache_config_info gauge\n"
                f'vllm:cache_config_info{{block_size="{value}",cache_dtype="auto"}} 1.0\n'
            )
            self._send(200, text.encode(), "text/plain; version=0.0.4")
            return True
        return False

    def do_GET(self) -> None:
        h = self.hostility
        if h.echo and self._echo_get():
            return
        if self.path == "/metrics" and h.trtllm_stats is not None:
            self._send(200, _trtllm_stats(h.trtllm_stats))
            return
        if self.path == "/metrics" and h.metrics is not None:
            self._send(200, _metrics(h.metrics).encode(), "text/plain; version=0.0.4")
            return
        if h.llamacpp and self._llamacpp_get():
            return
        if self.path != "/v1/models":
            self._send(404, b'{"detail": "Not Found"}')
            return
        model = h.model + (" " + " | ".join(h.echo) if h.echo else "")
        good = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
        mode = h.models
        if mode is None:
            self._send(200, good)
        elif mode == "echo_500":  # the body is cut at 200 characters
            self._send(500, json.dumps({"error": self._echoed("e", 175)}).encode())
        elif mode == "echo_html":  # cut at 80
            self._send(200, f"<html>{self._echoed('h', 60)}</html>".encode(), "text/html")
        elif mode == "reset":
            self._reset()
        elif mode == "html":
            self._send(200, b"<html><body><h1>Welcome to nginx!</h1></body></html>", "text/html")
        elif mode == "list":
            self._send(200, b'[{"id": "hostile-model"}]')
        elif mode == "string":
            self._send(200, b'"hostile-model"')
        elif mode == "bad_ids":
            self._send(200, b'{"object": "list", "data": [{"id": null}, {"id": 7}, "x"]}')
        elif mode == "stall":
            self._wait()
            self._reset()

    def _llamacpp_get(self) -> bool:
        """llama-server's own routes; False for the routes it shares with the others."""
        h = self.hostility
        fault = h.llamacpp_fault
        if self.path == "/health":
            self._send(200, b'{"status": "ok"}')
        elif self.path == "/props":
            self._send(200, _props(fault).encode())
        elif self.path == "/metrics":
            with h.lock:
                h.scrapes += 1
                scrapes = h.scrapes
            text = _llamacpp_metrics(fault, h.requests_seen, scrapes)
            self._send(200, text.encode(), "text/plain; version=0.0.4")
        else:
            return False
        return True

    def do_POST(self) -> None:
        h = self.hostility
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        with h.lock:
            h.requests_seen += 1
            h.authorizations.append(self.headers.get("Authorization", ""))
            fault = h.stream is not None and h.requests_seen % h.fault_every == 0
            if fault:
                h.faults_sent += 1
        max_tokens = int(request.get("max_tokens", 16))
        mode = h.stream if fault else None
        if mode == "stall_headers":
            self._wait()
            self._reset()
            return
        if mode == "echo_headers":
            echoed = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
            self._send(500, json.dumps({"error": "upstream failed", "request": echoed}).encode())
            return
        if mode == "echo_500":  # the body is cut at 200 characters
            self._send(500, json.dumps({"error": self._echoed("e", 175)}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self._stream(mode, max_tokens)

    def _event(self, data: str) -> None:
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def _chunk(
        self, sent: int, text: str = "x", usage: object = None, timings: object = None
    ) -> None:
        body: dict[str, object] = {"choices": [{"index": 0, "text": text}]}
        body["usage"] = {"completion_tokens": sent} if usage is None else usage
        if timings is not None:
            body["timings"] = timings
        self._event(json.dumps(body))

    def _stream(self, mode: str | None, max_tokens: int) -> None:
        h = self.hostility
        for sent in range(1, max_tokens + 1):
            time.sleep(h.seconds_per_token)
            if sent == 3 and mode is not None:
                if self._fault(mode, sent):
                    return
            last = sent == max_tokens and h.llamacpp
            self._chunk(sent, timings=_timings(h.llamacpp_fault, sent) if last else None)
        if mode != "no_done":
            self._event("[DONE]")

    def _fault(self, mode: str, sent: int) -> bool:
        """Break the stream at its third token; True if the stream ends here."""
        if mode == "sse_number":
            self._event("42")
        elif mode == "sse_list":
            self._event("[1, 2]")
        elif mode == "usage_strings":
            self._chunk(sent, usage={"completion_tokens": str(sent)})
            self._chunk(sent + 1, usage={"completion_tokens": "many"})
            return False
        elif mode == "choices_not_list":
            self._event(json.dumps({"choices": {"text": "x"}}))
        elif mode == "invalid_json":
            self._event("{oops")
        elif mode == "no_done":
            return False
        elif mode == "reset_mid":
            self._reset()
            return True
        elif mode == "stall_stream":
            self._wait()
            return True
        elif mode == "drip":
            deadline = time.monotonic() + MAX_WAIT_S
            while time.monotonic() < deadline and not self.hostility.stop.is_set():
                self.wfile.write(b":")  # an SSE comment that never ends: bytes, no event
                self.wfile.flush()
                time.sleep(0.05)
            return True
        elif mode == "huge_event":
            self.wfile.write(_huge_event(sent))
            self.wfile.flush()
            return False
        elif mode == "echo_event":  # not JSON: shown cut at 80 characters
            self._event("{oops " + self._echoed("o", 60).replace("\n", " "))
            return True
        elif mode in ("usage_digits", "usage_inf", "usage_negative"):
            value = {"usage_digits": 10**400, "usage_inf": float("inf"), "usage_negative": -5}
            self._chunk(sent, usage={"completion_tokens": value[mode]})
            return False
        elif mode == "deep_event":
            self._event('{"a":' * 100_000 + "1" + "}" * 100_000)
        elif mode == "spec_digits":
            huge = 10**400
            spec = {"num_spec_steps": huge, "num_accepted_draft_tokens": huge}
            spec |= {"num_draft_tokens": huge, "acceptance_histogram": [huge, huge]}
            self._event(json.dumps({"choices": [], "metrics": {"speculative_decoding": spec}}))
            return False
        return False


def _metrics(mode: str) -> str:
    """A /metrics answer of ``mode`` (:data:`METRICS_MODES`)."""
    names = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
    value = {"inf": "+Inf", "digits": "9" * 400, "nan": "NaN"}.get(mode)
    if value is not None:
        return "".join(f'vllm:spec_decode_{n}_total{{model_name="m"}} {value}\n' for n in names)
    if mode == "huge_line":
        return 'vllm:spec_decode_num_drafts_total{x="' + "y" * (2 << 20) + '"} 1\n'
    return "<html>not metrics</html>\n"


def _trtllm_stats(mode: str) -> bytes:
    """trtllm-serve's /metrics in ``mode`` (:data:`TRTLLM_STATS_MODES`)."""
    if mode == "deep":
        return b"[" * 100_000 + b"]" * 100_000
    spec = {"numDraftTokens": 6, "numAcceptedTokens": 4, "numRequestsWithDraftTokens": 2}
    good = {
        "iter": 500,
        "iterLatencyMS": 20.0,
        "numActiveRequests": 2,
        "inflightBatchingStats": {"numContextRequests": 0, "numGenRequests": 2},
        "specDecodingStats": {**spec, "acceptanceLength": 3.0},
    }
    if mode == "empty":
        return b"[]"
    if mode == "not_list":
        return json.dumps(good).encode()
    bad: list = {
        "missing": [
            {k: v for k, v in good.items() if k != "iterLatencyMS"},
            {**good, "specDecodingStats": {"numDraftTokens": 6, "numAcceptedTokens": 4}},
        ],
        "odd": [
            json.dumps(good),
            [good],
            {**good, "numActiveRequests": "2"},
            {**good, "iterLatencyMS": None},
            {**good, "specDecodingStats": {**spec, "numAcceptedTokens": True}},
        ],
        "negative": [
            {**good, "numActiveRequests": -2},
            {**good, "specDecodingStats": {**spec, "numAcceptedTokens": 7}},
        ],
        "digits": [{**good, "specDecodingStats": {**spec, "numDraftTokens": int("9" * 400)}}],
        "nan": [
            {**good, "iterLatencyMS": math.nan},
            {**good, "specDecodingStats": {**spec, "numAcceptedTokens": math.inf}},
        ],
        "backwards": [{**good, "iter": 1}, {**good, "iter": 2}],
    }[mode]
    return json.dumps([good, *bad]).encode()


def _props(fault: str | None) -> str:
    """llama-server's /props (tools/server/server.cpp, ``handle_props``), or its ``fault``."""
    if fault == "props_deep":
        return '{"a":' * 100_000 + "1" + "}" * 100_000
    if fault == "props_list":
        return '[{"build_info": "b1"}]'
    params: dict[str, object] = {"n_predict": -1, "speculative.n_max": 16, "speculative.n_min": 0}
    settings: dict[str, object] = {"id": 0, "n_ctx": 4096, "speculative": True, "params": params}
    props: dict[str, object] = {
        "default_generation_settings": settings,
        "total_slots": 1,
        "model_path": "/models/target-Q4_K_M.gguf",
        "build_info": "b6123-0a1b2c3d",
    }
    if fault == "props_digits":
        props |= {"build_info": 10**400, "total_slots": 10**400}
        params["speculative.n_max"] = 10**400
    elif fault == "props_odd":
        settings |= {"n_ctx": "4096", "params": None}
        props |= {"default_generation_settings": [settings], "model_path": {"x": 1}}
    return json.dumps(props)


def _timings(fault: str | None, predicted: int) -> object:
    """The ``timings`` of a stream's last chunk (``server_task_result_cmpl_final``)."""
    accepted = predicted // 2  # k = 2: a cycle's drafts, its accepted ones and a bonus token
    drafted = 2 * (predicted - accepted)
    if fault == "timings_digits":
        drafted = accepted = 10**400
    elif fault == "timings_inverted":
        drafted, accepted, predicted = 1, 5, -3
    timings: dict[str, object] = {
        "prompt_n": 5,
        "prompt_ms": 2.0,
        "predicted_n": predicted,
        "predicted_ms": 10.0 * abs(predicted),
        "predicted_per_second": 100.0,
        "draft_n": drafted,
        "draft_n_accepted": accepted,
    }
    if fault == "timings_odd":
        timings |= {"draft_n": "12", "predicted_per_second": float("nan")}
        return [timings]
    return timings


def _llamacpp_metrics(fault: str | None, requests: int, scrapes: int) -> str:
    """llama-server's /metrics (``handle_metrics``): its counters after ``requests``."""
    tokens = 8.0 * requests
    if fault == "metrics_inf":
        tokens = float("inf")
    elif fault == "metrics_backwards":
        tokens = 1000.0 / scrapes
    lines = [
        f"llamacpp:prompt_tokens_total {5 * requests}",
        "llamacpp:prompt_seconds_total 0.01",
        f"llamacpp:tokens_predicted_total {tokens}",
        f"llamacpp:tokens_predicted_seconds_total {tokens / 100.0}",
        f"llamacpp:n_decode_total {tokens}",
        "llamacpp:requests_processing 0",
        "llamacpp:requests_deferred 0",
    ]
    return "".join(
        f"# TYPE {line.split()[0]} {'counter' if '_total' in line else 'gauge'}\n{line}\n"
        for line in lines
    )


_HUGE: dict[int, bytes] = {}


def _huge_event(sent: int) -> bytes:
    """One 50 MB event, built once (building it takes longer than a short idle timeout)."""
    if sent not in _HUGE:
        body = {
            "choices": [{"index": 0, "text": "y" * (50 << 20)}],
            "usage": {"completion_tokens": sent},
        }
        _HUGE[sent] = f"data: {json.dumps(body)}\n\n".encode()
    return _HUGE[sent]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    errors: list[str]

    def handle_error(self, request: object, client_address: object) -> None:
        # The client hung up on a fault (its timeout, its reset): expected, kept, not printed
        # (the server's thread would print into the output a test checks).
        import sys

        self.errors.append(repr(sys.exc_info()[1]))


class HostileServer:
    """``with HostileServer(Hostility(stream="drip")) as server: server.url``."""

    def __init__(self, hostility: Hostility) -> None:
        self.hostility = hostility
        handler = type("Handler", (_Handler,), {"hostility": hostility})
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.httpd.errors = []
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.hostility.stop.set()  # every wait ends
        self.httpd.shutdown()
        self.httpd.server_close()
