"""breakeven fleet against a hostile Prometheus (issue 29): a local server in Prometheus'
place answers what the HTTP API documents, and everything it does not.

Every answer is either read right or refused in one line naming the flag at fault (exit 2),
never a traceback: wrong shapes and types, results that are not a matrix, NaN and +Inf and
numbers hundreds of digits long, JSON nested 100,000 deep, a gzip bomb, an answer larger than
the limit, a server that stalls or sends a byte at a time (``--timeout``, ``--deadline``),
URLs that httpx and urllib refuse in their own ways, and a token or password echoed back.
No test here measures speed (benchmarks/fleet_bounds.py measures speed and memory); one
bounds, generously, how long a server sending a byte a second holds a request past --timeout.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import math
import random
import statistics
import threading
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

import pytest
from cli_checks import run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_server import free_port

from breakeven.core.errors import BreakevenError, UnreadableInput
from breakeven.fleet.view import FLEET_ENGINES, MAX_VALUE, Chunk, _drop, queries
from breakeven.iotools.httpclient import check_url
from breakeven.iotools.jsonsafe import loads_bounded, nesting_depth
from breakeven.iotools.query_range import Limits, PrometheusAPI, matrix_result

END = 1_790_000_000
START = END - 3600
GRID = [START + 60 * j for j in range(61)]
TOKEN = "s3cret-token-0123456789abcdef"
MAX_WAIT_S = 20.0  # every wait of the fake server ends by then, or when it stops


# -- A server in Prometheus' place ---------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(parse_qsl(self.rfile.read(length).decode()))
        with self.server.lock:
            self.server.seen.append((dict(self.headers), form))
        self.server.respond(self, form)

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hung up (its deadline): expected; printing would land in the output


class FakePrometheus:
    """``with FakePrometheus(respond) as p: p.url``; ``respond(handler, form)`` writes each
    reply (``form``: the range query's parameters)."""

    def __init__(self, respond) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.respond = respond
        self.httpd.seen = []
        self.httpd.lock = threading.Lock()
        self.stop = threading.Event()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def seen(self) -> list:
        return self.httpd.seen

    def __enter__(self) -> FakePrometheus:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # every trickle and stall ends
        self.httpd.shutdown()
        self.httpd.server_close()


def send(handler, body: bytes, status: int = 200, headers=()) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def answering(body: bytes, status: int = 200, headers=()):
    return lambda handler, form: send(handler, body, status, headers)


def matrix(*series) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}


def fleet(url: str, *args: object, env=None):
    return run_cli(
        ["fleet", "--prometheus", url, "--start", str(START), "--end", str(END)]
        + [str(a) for a in args],
        env=env,
    )


def one_error(r, *fragments: str) -> str:
    """The one line of an exit 2, holding each of ``fragments``."""
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.output
    for fragment in fragments:
        assert fragment in lines[0], r.output
    return lines[0]


def _by_quantity(step_s: float = 60.0) -> dict[str, tuple[str, str]]:
    window = f"{max(60, int(2 * step_s))}s"
    return {
        q: (engine, name)
        for engine in FLEET_ENGINES
        for name, q in queries(engine, "", window).items()
    }


def vllm_server(values, step_s: float = 60.0, instance: str = "a:8000"):
    """A responder that answers vLLM's quantities with ``values(name, t)`` (a string, or None
    for no sample) at each step asked for, and no series of the other engines."""
    known = _by_quantity(step_s)

    def respond(handler, form) -> None:
        engine, name = known[form["query"]]
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        result = []
        if engine == "vllm":
            samples = []
            for j in range(round((end - start) / step) + 1):
                t = start + j * step
                value = values(name, t)
                if value is not None:
                    samples.append([t, value])
            result = [{"metric": {"instance": instance, "model_name": "m"}, "values": samples}]
        send(handler, json.dumps(matrix(*result)).encode())

    return respond


STEADY = {"accept_len": "3", "k": "4", "aggregate_tok_s": "320", "running": "8"}


# -- The fuzz: answers built from the documented shapes, valid and mutated -------------------

_times = st.sampled_from(GRID) | st.sampled_from(GRID).map(float)
_value_strings = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1", "2.5", "-3", "8"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),  # 1e+308 and 5e-324 too
    st.integers(-(10**400), 10**400).map(str),  # a counter hundreds of digits long
)
_labels = st.dictionaries(
    st.sampled_from(["instance", "model_name", "job", "__name__"]) | st.text(max_size=6),
    st.text(max_size=12),
    max_size=4,
)
_series = st.fixed_dictionaries(
    {"metric": _labels, "values": st.lists(st.tuples(_times, _value_strings).map(list), max_size=8)}
)
_success = st.fixed_dictionaries(
    {
        "status": st.just("success"),
        "data": st.fixed_dictionaries(
            {"resultType": st.just("matrix"), "result": st.lists(_series, max_size=4)}
        ),
    }
)
_error = st.fixed_dictionaries(
    {
        "status": st.just("error"),
        "errorType": st.sampled_from(["bad_data", "execution", "timeout", "internal"]),
        "error": st.text(max_size=400),
    }
)
_documented = st.one_of(_success, _success, _success, _error)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**500), 10**500)
    | st.floats()  # NaN and Infinity literals too
    | st.text(max_size=10)
    | st.sampled_from(["vector", "scalar", "string", "matrix", "NaN", "+Inf", "success"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate(draw, node, top: bool = True):
    """``node`` with one thing changed somewhere inside it: a member or item replaced by any
    JSON value, or removed, or (below the top) the node itself replaced; deep changes are
    as likely as shallow ones."""
    if isinstance(node, (dict, list)) and node and (top or draw(st.integers(0, 3)) > 0):
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        action = draw(st.sampled_from(["descend", "descend", "replace", "delete"]))
        if action == "descend":
            node[key] = _mutate(draw, node[key], top=False)
        elif action == "replace":
            node[key] = draw(_json_values)
        else:
            del node[key]
        return node
    return draw(_json_values)


@st.composite
def _answers(draw) -> tuple[int, bytes, bool]:
    """(HTTP status, body, gzip it): a documented answer, a mutated one, or broken text."""
    kind = draw(st.sampled_from(["documented", "documented", "mutated", "mutated", "text"]))
    answer = draw(_documented)
    if kind != "documented":
        for _ in range(draw(st.integers(1, 3))):
            answer = _mutate(draw, answer)
    text = json.dumps(answer)
    if kind == "text":
        text = draw(
            st.sampled_from(
                [
                    text[: draw(st.integers(0, len(text)))],
                    "[" * 50_000 + "]" * 50_000,
                    '{"status": "success", "data": ' + "9" * 5000 + "}",
                    "<html><body>502 Bad Gateway</body></html>",
                    "",
                ]
            )
        )
    status = draw(st.sampled_from([200, 200, 200, 400, 422, 500, 503]))
    return status, text.encode(), draw(st.booleans())


@pytest.fixture(scope="module")
def shared():
    """One server for the fuzz, answering whatever the current example holds."""
    current = {"answer": (200, b"{}", False)}

    def respond(handler, form) -> None:
        status, body, zipped = current["answer"]
        headers = [("Content-Encoding", "gzip")] if zipped else []
        send(handler, gzip.compress(body) if zipped else body, status, headers)

    with FakePrometheus(respond) as server:
        yield server, current


@pytest.fixture(scope="module")
def fit_path(tmp_path_factory):
    from test_fleet import FIT

    path = tmp_path_factory.mktemp("fit") / "fit.json"
    path.write_text(json.dumps(FIT))
    return path


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(answer=_answers(), as_json=st.booleans(), with_fit=st.booleans(), with_out=st.booleans())
def test_any_answer_is_read_or_refused_in_one_line(
    shared, fit_path, answer, as_json, with_fit, with_out
):
    server, current = shared
    current["answer"] = answer
    args = (["--json"] if as_json else []) + (["--fit-file", fit_path] if with_fit else [])
    args += ["--out", fit_path.parent / "steps.csv", "--force"] if with_out else []
    r = fleet(server.url, *args, "--timeout", 20)
    event(f"exit {r.exit_code}")
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output, r.output
    if r.exit_code == 2:
        lines = r.output.strip().splitlines()
        assert lines[-1].startswith("Error: "), r.output
        assert sum(line.startswith("Error:") for line in lines) == 1, r.output
    elif as_json:
        json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json output"))


# -- The shapes the API documents, and deviations from them ---------------------------------


def _series(*values, instance="a:8000"):
    return {
        "metric": {"instance": instance, "model_name": "m"},
        "values": [list(v) for v in values],
    }


@pytest.mark.parametrize(
    "answer,message",
    [
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "'vector'"),
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}, "'scalar'"),
        ({"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}, "'string'"),
        ({"status": "success"}, 'no "data" object'),
        ({"status": "success", "data": {"resultType": "matrix", "result": {}}}, '"result"'),
        (matrix({"metric": {"instance": 7}, "values": []}), "label strings"),
        (matrix(["a:8000"]), "series 1 of 1 not an object"),
        (matrix({"metric": {}, "values": {"a": 1}}), '"values" that are not a list'),
        (matrix(_series((GRID[0], "1", "2"))), 'not [time, "value"]'),
        (matrix(_series((GRID[0],))), 'not [time, "value"]'),
        (matrix(_series((GRID[0], 2.5))), "not a string"),
        (matrix(_series((GRID[0], None))), "not a string"),
        (matrix(_series((GRID[0], "two"))), "'two'"),
        (matrix(_series(("1790000000", "1"))), "not Unix seconds"),
        (matrix(_series((True, "1"))), "not Unix seconds"),
        (matrix(_series((-60, "1"))), "not Unix seconds"),
        (matrix(_series((10**300, "1"))), "not Unix seconds"),
        ({"data": {}}, "without Prometheus' JSON"),
        ([1, 2], "without Prometheus' JSON"),
        ({"status": "partial"}, "without Prometheus' JSON"),
    ],
)
def test_a_deviation_from_the_documented_answer_is_one_line(answer, message):
    with FakePrometheus(answering(json.dumps(answer).encode())) as server:
        one_error(fleet(server.url), "--prometheus: ", message)


@pytest.mark.parametrize(
    "body,message",
    [
        (b'{"status": "success", "data": {"resultType": "matrix", "result": [[[', "not JSON"),
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (b'{"status": "success", "data": ' + b"7" * 5000 + b"}", "a number too long"),
        (b'["\xff\xfe"]', "not UTF-8"),
        (
            b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},'
            b'"values":[[NaN,"1"]]}]}}',
            "not Unix seconds",
        ),
    ],
)
def test_an_answer_that_is_not_json_is_one_line(body, message):
    with FakePrometheus(answering(body, 502 if b"html" in body else 200)) as server:
        one_error(fleet(server.url), "--prometheus: ", message)


def test_the_matrix_is_checked_and_its_values_read():
    got = matrix_result(
        matrix(
            _series(
                (GRID[0], "2.5"), (float(GRID[1]), "NaN"), (GRID[2], "+Inf"), (GRID[3], "-Inf")
            ),
            {"metric": {}, "histograms": [[GRID[0], {"count": "1"}]]},  # a native histogram
        )
    )
    values = got[0]["values"]
    assert values[0] == (GRID[0], 2.5) and [t for t, _ in values] == GRID[:4]
    assert math.isnan(values[1][1]) and values[2][1] == math.inf and values[3][1] == -math.inf
    assert got[1] == {"metric": {}, "values": []}
    # A value hundreds of digits long is a number out of range; thousands, not even parsed.
    ((_, huge),) = matrix_result(matrix(_series((GRID[0], "9" * 300))))[0]["values"]
    ((_, longer),) = matrix_result(matrix(_series((GRID[0], "9" * 5000))))[0]["values"]
    assert huge > MAX_VALUE and longer == math.inf


def test_nan_is_a_gap_and_inf_or_absurd_values_are_ignored_with_a_note():
    def values(name, t):
        j = round((t - START) / 60)
        if name == "accept_len":
            return {3: "NaN", 4: "+Inf", 5: "1" + "0" * 300, 6: "-Inf"}.get(j, "3")
        if name == "running" and j == 7:
            return "1e-300"  # aggregate / running would overflow: no tok_s at that step
        return STEADY[name]

    with FakePrometheus(vllm_server(values)) as server:
        r = fleet(server.url, "--json")
        text = fleet(server.url)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (a,) = data["instances"]
    assert a["accept_len"] == pytest.approx(3.0) and a["tok_s"] == pytest.approx(40.0)
    assert a["points"] == 61 and a["batch"] < 10
    (note,) = data["notes"]
    assert note.startswith("3 samples infinite or larger than 1e+12") and "ignored" in note
    assert text.exit_code == 0 and "Note: 3 samples infinite" in text.output


def test_counters_of_absurd_size_never_overflow_the_summary(fit_path):
    """Every quantity at the largest value believed: the means, the predicted speedup and
    the schedule (k far beyond any grid) stay finite or are left out, never overflow."""

    def values(name, t):
        return {"accept_len": "1e12", "k": "999999999999", "running": "1e12"}.get(name, "1e12")

    with FakePrometheus(vllm_server(values)) as server:
        r = fleet(server.url, "--json", "--fit-file", fit_path)
    assert r.exit_code == 0, r.output
    (a,) = json.loads(r.stdout)["instances"]
    assert a["accept_len"] == 1e12 and a["schedule_gain"] is None


# -- Depth, size, compression ---------------------------------------------------------------


def test_a_depth_bomb_is_one_line():
    body = b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with FakePrometheus(answering(body)) as server:
        one_error(fleet(server.url), "--prometheus: ", "nested 100,001 levels deep")


@pytest.mark.parametrize(
    "text,depth",
    [
        ("3", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "]]]"]', 1),  # brackets in strings do not count
        ('["a\\"[[[[", 1]', 1),  # nor after an escaped quote
        ('["a\\\\", [[1]]]', 3),  # an escaped backslash ends no string
        ('["\\n", [1], "\\u005b"]', 2),
        ('["", "", "[", [[]]]', 3),
        ("[" * 5000 + "]" * 5000, 5000),
    ],
)
def test_nesting_depth_skips_strings_and_escapes(text, depth):
    assert nesting_depth(text) == depth
    assert nesting_depth(text.encode()) == depth


def test_loads_bounded_says_what_is_wrong_in_one_line():
    assert loads_bounded('{"a": [[1]]}', max_depth=3) == {"a": [[1]]}
    for text, message in [
        ('{"a": [[1]]}', "the answer is JSON nested 3 levels deep, more than the 2 read"),
        ("[" * 100_000, "nested 100,000 levels deep"),
        ("{oops", "the answer is not JSON (Expecting property name"),
        (b"\xff", "the answer is not UTF-8"),
        ("1" * 5000, "the answer holds a number too long to read"),
    ]:
        with pytest.raises(UnreadableInput) as e:
            loads_bounded(text, max_depth=2, what="the answer")
        assert message in str(e.value) and "\n" not in str(e.value)


def _gzip_bomb(decompressed: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip
    head = b'{"status": "success", "data": {"resultType": "matrix", "result": ['
    parts = [z.compress(head)]
    piece = b" " * (1 << 20)
    for _ in range(decompressed >> 20):
        parts.append(z.compress(piece))
    parts.append(z.compress(b"]}}") + z.flush())
    return b"".join(parts)


def test_a_gzip_bomb_is_refused_before_it_is_decompressed():
    bomb = _gzip_bomb(200 << 20)  # 200 MiB of JSON in some 200 KB
    assert len(bomb) < 300_000
    with FakePrometheus(answering(bomb, headers=[("Content-Encoding", "gzip")])) as server:
        api = PrometheusAPI(server.url)
        with pytest.raises(BreakevenError) as e:
            api.query_range("up", START, END, 60.0)
        api.close()
        one_error(fleet(server.url), "--prometheus: ", "a compression bomb?")
    assert "grows more than 100 times when decompressed" in str(e.value)
    # It stopped within a few MiB: 100 times what came, past the first MiB.
    assert 1 << 20 < api.bytes_decoded < 16 << 20
    assert api.bytes_received <= len(bomb)


def test_a_gzip_answer_is_read():
    body = json.dumps(matrix(_series((GRID[0], "2.5")))).encode()
    zipped = gzip.compress(body)
    with FakePrometheus(answering(zipped, headers=[("Content-Encoding", "gzip")])) as server:
        api = PrometheusAPI(server.url)
        (series,) = api.query_range("up", START, END, 60.0)
        api.close()
        (headers, _), *_ = server.seen
    assert series["values"] == [(GRID[0], 2.5)] and api.bytes_decoded == len(body)
    assert headers.get("Accept-Encoding") == "gzip, deflate"


@pytest.mark.parametrize("encoding", ["br", "gzip, gzip", "zstd"])
def test_an_encoding_not_read_is_one_line(encoding):
    with FakePrometheus(answering(b"{}", headers=[("Content-Encoding", encoding)])) as server:
        one_error(fleet(server.url), "--prometheus: ", "an encoding breakeven does not read")


def test_an_answer_past_the_size_limit_is_refused_naming_it():
    big = json.dumps(matrix(_series(*[(GRID[0], "1")] * 200_000))).encode()  # some 3 MB
    assert len(big) > 2 << 20

    def unsized(handler, form) -> None:  # no Content-Length: read until the limit
        handler.send_response(200)
        handler.end_headers()
        handler.wfile.write(big)

    limit = Limits(max_bytes=1 << 20)
    for respond in (unsized, answering(big)):
        with FakePrometheus(respond) as server:
            api = PrometheusAPI(server.url, limits=limit)
            with pytest.raises(BreakevenError) as e:
                api.query_range("up", START, END, 60.0)
            api.close()
        assert "an answer of more than 1,048,576 bytes" in str(e.value)
        assert api.bytes_received <= (1 << 20) + (1 << 17)
    assert api.bytes_received == 0  # its Content-Length said so: nothing was read


def test_a_chunk_holds_the_samples_not_the_steps():
    """A 117 KB answer of 1,000 servers with 2 samples each, in a chunk of 10,000 steps: rows
    for each sample, in memory that grows with the samples (the dense tables it replaced,
    10,000 steps x 5 quantities a server, took 400 MB here)."""
    result = [_series((GRID[0], "2.5"), (GRID[1], "3"), instance=f"s{s:04d}") for s in range(1000)]
    tracemalloc.start()
    try:
        chunk = Chunk("vllm", START, 60.0, 10_000)
        chunk.add("accept_len", result)
        rows = list(chunk.rows("test"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(rows) == 2000 and {r["accept_len"] for r in rows} == {2.5, 3.0}
    assert peak < 20 << 20


# -- Time: --timeout and --deadline -----------------------------------------------------------


def _stall(server):
    def respond(handler, form) -> None:
        server.stop.wait(MAX_WAIT_S)

    return respond


def _trickle_body(server):
    def respond(handler, form) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        handler.wfile.write(b'{"status": "success", ')
        end = time.monotonic() + MAX_WAIT_S
        while time.monotonic() < end and not server.stop.is_set():
            handler.wfile.write(b" ")  # white space JSON allows, never the end of it
            handler.wfile.flush()
            time.sleep(0.05)

    return respond


def _trickle_headers(server):
    def respond(handler, form) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        end = time.monotonic() + MAX_WAIT_S
        while time.monotonic() < end and not server.stop.is_set():
            handler.wfile.write(b"a")  # a header that never ends
            handler.wfile.flush()
            time.sleep(0.05)

    return respond


def _serving(make):
    server = FakePrometheus(None)
    server.httpd.respond = make(server)
    return server


@pytest.mark.parametrize("make", [_trickle_body, _trickle_headers, _stall])
def test_a_trickling_or_stalled_server_is_ended_by_the_deadline(make):
    with _serving(make) as server:
        one_error(fleet(server.url, "--deadline", 2), "--deadline: ", "was not done after 2 s")


@pytest.mark.parametrize("make", [_trickle_body, _trickle_headers, _stall])
def test_each_request_is_ended_by_the_timeout(make):
    with _serving(make) as server:
        one_error(fleet(server.url, "--timeout", 1), "--timeout: ", "within 1 s")


def _one_byte_a_second(headers: bool):
    """A server that sends its answer (or, ``headers``, its headers) one byte a second for
    longer than any --timeout here: each byte would reset a per-read socket timeout."""

    def make(server):
        def respond(handler, form) -> None:
            if headers:
                handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            else:
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.end_headers()
                handler.wfile.write(b'{"status": "success", ')
            end = time.monotonic() + MAX_WAIT_S
            while time.monotonic() < end and not server.stop.wait(1.0):
                handler.wfile.write(b"a" if headers else b" ")
                handler.wfile.flush()

        return respond

    return make


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers"])
def test_a_byte_a_second_for_longer_than_the_timeout_ends_within_it(headers):
    """The request's whole time is bounded, not each read's: a trickle of one byte a second
    for 20 s ends at --timeout 2, well before the trickle does (the bound of 12 s is
    generous: a behaviour, not a speed), in one line naming --timeout and the server."""
    with _serving(_one_byte_a_second(headers)) as server:
        started = time.monotonic()
        r = fleet(server.url, "--timeout", 2)
        took = time.monotonic() - started
        line = one_error(r, "--timeout: ", server.url, "within 2 s")
    assert took < 2 + 10, (took, line)


def test_the_deadline_bounds_the_whole_read_not_one_request():
    """Each answer comes in 0.3 s, well within --timeout; the twelve of the read do not fit
    in --deadline 1."""
    body = json.dumps(matrix()).encode()

    def slow(handler, form) -> None:
        time.sleep(0.3)
        send(handler, body)

    with FakePrometheus(slow) as server:
        one_error(fleet(server.url, "--deadline", 1, "--timeout", 5), "--deadline: ")
        assert len(server.seen) < 12


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--timeout", 0], "--timeout"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", 1e9], "--timeout"),
        (["--deadline", -1], "--deadline"),
        (["--deadline", "inf"], "--deadline"),
    ],
)
def test_bad_time_limits_are_one_line(args, flag):
    one_error(fleet("http://127.0.0.1:9", *args), f"{flag}: got ")


# -- A long range, summarised -----------------------------------------------------------------


def test_a_long_range_of_one_second_steps_is_summarised_right():
    """15,001 one-second steps (two range queries): accept_len 3.0, then 1.5 from DROP on.
    The summary is the same as the quadratic one it replaced (test_the_drop_search_...)."""
    end = START + 15_000
    drop = START + 9_000

    def values(name, t):
        if name == "accept_len":
            return "3" if t < drop else "1.5"
        return STEADY[name]

    with FakePrometheus(vllm_server(values, step_s=1.0)) as server:
        args = ["--prometheus", server.url, "--start", START, "--end", end, "--step", "1s"]
        r = run_cli(["fleet", *map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["chunks"] == 2 and data["rows"] == 15_001
    (a,) = data["instances"]
    assert a["points"] == 15_001 and a["k"] == 4 and a["batch"] == 8 and a["tok_s"] == 40
    assert a["accept_len"] == pytest.approx((9_000 * 3.0 + 6_001 * 1.5) / 15_001)
    assert a["flags"] == ["acceptance_drop"]
    from datetime import datetime

    when = datetime.fromisoformat(a["notes"][0].split(" from ")[1].split(" on")[0]).timestamp()
    assert drop - 15_001 // 20 <= when <= drop


def _drop_reference(times, taus, tolerance):
    """The search as it was (quadratic): a median of every window and every suffix."""
    n = len(taus)
    if n < 10:
        return None
    baseline = statistics.median(taus[: max(2, n // 5)])
    low = baseline * (1 - tolerance)
    width = max(3, n // 20)
    for i in range(n // 5, n - width + 1):
        if statistics.median(taus[i : i + width]) < low and statistics.median(taus[i:]) < low:
            return times[i]
    return None


@settings(max_examples=300, deadline=None)
@given(
    taus=st.lists(st.sampled_from([1.0, 1.5, 2.0, 2.5, 2.7, 3.0, 3.3]), max_size=120)
    | st.lists(st.floats(1, 5), max_size=120),
    tolerance=st.sampled_from([0.0, 0.1, 0.2, 0.5]),
)
def test_the_drop_search_is_the_quadratic_one(taus, tolerance):
    times = list(range(len(taus)))
    assert _drop(times, taus, tolerance) == _drop_reference(times, taus, tolerance)


def test_the_drop_search_on_long_random_runs():
    rng = random.Random(29)
    for _ in range(20):
        n, cut = rng.randint(200, 2000), rng.random()
        taus = [rng.gauss(3, 0.2) if j < cut * n else rng.gauss(2.4, 0.4) for j in range(n)]
        times = list(range(n))
        assert _drop(times, taus, 0.1) == _drop_reference(times, taus, 0.1)


# -- URLs and secrets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "http://[zz]:9090",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:port",
        "http://127.0.0.1:-1",
        "http://127.0.0.1:9090\x00",
        "http://127.0.0.1\n:9090",
        "http://127.0.0.1:9090/\x7f",
        "http://xn--zz.example:9090",
        "http://xn--.example",
        "http://a..b:9090",
        "http://" + "a" * 64 + ".example",
        "http://\u2603.net",
        "http://:9090",
        "ftp://127.0.0.1:9090",
        "127.0.0.1:9090",
        "http://127.0.0.1:9090/?match=x",
        "http://127.0.0.1:9090/#top",
    ],
)
def test_a_url_no_client_can_request_is_one_line(url):
    one_error(fleet(url), "--prometheus: got ")
    with pytest.raises(BreakevenError):
        PrometheusAPI(url)


def test_an_ipv6_url_is_requested():
    r = fleet(f"http://[::1]:{free_port()}")
    one_error(r, "--prometheus: cannot reach http://[::1]:")


def test_a_url_s_password_is_never_shown_even_refused():
    r = fleet("http://user:se cret-pass@127.0.0.1:9090")
    line = one_error(r, "--prometheus: got ")
    assert "cret" not in line and "***" in line
    with pytest.raises(BreakevenError) as e:
        check_url("http://user:pw-0123456789@[::1", "url")
    assert "0123456789" not in str(e.value)


def _echo(handler, form) -> None:
    """Refuses the query with an error that echoes the Authorization header, cut by the
    server across the secret, at both ends of what fleet shows (it keeps a long text's start
    and end)."""
    header = handler.headers.get("Authorization", "")
    text = "x" * 130 + header + "y" * 400 + header + "z" * 120
    body = json.dumps({"status": "error", "errorType": header[:30], "error": text})
    send(handler, body.encode(), 401)


def test_a_token_echoed_in_an_error_is_masked_before_the_error_is_cut():
    with FakePrometheus(_echo) as server:
        r = fleet(server.url, "--token-env", "FLEET_TOKEN", env={"FLEET_TOKEN": TOKEN})
        (headers, _), *_ = server.seen
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    one_error(r, "--prometheus: Prometheus refused the query", "***")
    pieces = {TOKEN[i : i + 6] for i in range(len(TOKEN) - 5)}
    assert not any(p in r.output for p in pieces), r.output


def test_a_password_with_a_hash_is_sent_and_never_shown():
    password = "pa#ss-word/0123456789"
    with FakePrometheus(_echo) as server:
        url = server.url.replace("http://", f"http://user:{password}@")
        r = fleet(url)
        (headers, _), *_ = server.seen
    basic = base64.b64encode(f"user:{password}".encode()).decode()
    assert headers["Authorization"] == f"Basic {basic}"
    one_error(r, "--prometheus: ")
    pieces = {s[i : i + 6] for s in (password, basic) for i in range(len(s) - 5)}
    assert not any(p in r.output for p in pieces), r.output


def test_a_token_a_header_cannot_carry_is_one_line():
    one_error(
        fleet("http://127.0.0.1:9", "--token-env", "T", env={"T": "tok\u00e9n-value"}),
        "--token-env: the token holds a character",
    )


def test_a_connection_that_breaks_mid_answer_is_one_line():
    def broken(handler, form) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        handler.wfile.write(b'{"status": "success"')  # then the connection closes

    with FakePrometheus(broken) as server:
        one_error(fleet(server.url), "--prometheus: ")


def test_every_query_of_a_read_is_answered_by_the_fake_server():
    """The fake server answers each of the seventeen queries a read makes (the tests above
    rely on it): vLLM's four, llama.cpp's five, SGLang's three, TensorRT-LLM's five."""
    counts = {
        engine: len(list(qs))
        for engine, qs in itertools.groupby(_by_quantity().values(), key=lambda x: x[0])
    }
    assert counts == {"vllm": 4, "llamacpp": 5, "sglang": 3, "trtllm": 5}
