"""bench against a hostile server, fuzzed (issue 29): every fault of tests/hostile_server.py
(readiness, stream, /metrics, token counts no engine sends, events nested past the recursion
limit, echoed secrets), drawn with bench's own arguments.  Whatever the server does, bench ends
within its timeouts with exit 0 or 2, no traceback, no internal error, and no secret shown.

CI runs a sample (``BREAKEVEN_FUZZ_SERVERS`` examples, 25 by default); a one-off run sets it
higher (``BREAKEVEN_FUZZ_SERVERS=2000 pytest tests/test_fuzz_servers.py``) and counts what it
found with ``-s``.  fleet's Prometheus answers have a fuzz of their own
(tests/test_fleet_hostile.py)."""

from __future__ import annotations

import collections
import os
import signal
from typing import Any

import pytest
from cli_checks import run_cli
from hostile_server import (
    ECHO_ROUTES,
    FUZZ_STREAM_MODES,
    METRICS_MODES,
    MODELS_MODES,
    STREAM_MODES,
    HostileServer,
    Hostility,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("BREAKEVEN_FUZZ_SERVERS", "25"))
KEY = "sk-fuzz-0123456789abcdefghijklmnopqrstuvwx"
PASSWORD = "p#ss/w?rd@0123456789"
HANG_S = 30.0  # bench's own timeouts below end every fault well before this
FOUND: collections.Counter[str] = collections.Counter()

# Modes that wait out bench's timeouts are drawn less: they only cost time.
SLOW = {"stall", "stall_headers", "stall_stream", "drip", "huge_event"}


class Hang(Exception):
    pass


def _faults() -> Any:
    stream = [m for m in (*STREAM_MODES, *FUZZ_STREAM_MODES) if m not in SLOW]
    return st.fixed_dictionaries(
        {
            "models": st.one_of(st.none(), st.sampled_from(MODELS_MODES)),
            "stream": st.one_of(st.none(), st.sampled_from(stream), st.sampled_from(sorted(SLOW))),
            "fault_every": st.integers(1, 3),
            "metrics": st.one_of(st.none(), st.sampled_from(METRICS_MODES)),
            "echo_route": st.one_of(st.none(), st.sampled_from(ECHO_ROUTES)),
        }
    )


def _arguments() -> Any:
    return st.fixed_dictionaries(
        {
            "requests": st.integers(1, 4),
            "concurrency": st.sampled_from(["1", "2", "1,2"]),
            "max_tokens": st.integers(1, 12),
            "k": st.one_of(st.none(), st.integers(0, 4)),
            "json": st.booleans(),
            "chat": st.booleans(),
            "secret": st.sampled_from(["key", "password", "none"]),
        }
    )


def _run(faults: dict[str, Any], args: dict[str, Any], out: str) -> tuple[Any, list[str]]:
    given = {"key": (KEY,), "password": (PASSWORD,), "none": ()}[args["secret"]]
    echoes = faults["echo_route"] or faults["stream"] == "echo_headers"
    echo = given if echoes else ()  # the server echoes the secrets bench was given
    hostility = Hostility(**faults, echo=echo)
    found = []
    with HostileServer(hostility) as server:
        url = server.url
        env = {}
        line = ["bench", "--label", "fuzz", "--out", out]
        if args["secret"] == "password":
            url = url.replace("http://", f"http://user:{PASSWORD.replace('#', '%23')}@")
        elif args["secret"] == "key":
            env["FUZZ_KEY"] = KEY
            line += ["--api-key-env", "FUZZ_KEY"]
        line += ["--url", url, "--requests", str(args["requests"])]
        line += ["--concurrency", args["concurrency"], "--max-tokens", str(args["max_tokens"])]
        line += ["--ready-timeout", "1", "--idle-timeout", "1", "--request-timeout", "2"]
        line += ["--connect-timeout", "1"]
        if args["k"] is not None:
            line += ["-k", str(args["k"])]
        if args["json"]:
            line.append("--json")
        if args["chat"]:
            line.append("--chat")

        def alarm(signum: int, frame: Any) -> None:
            raise Hang(f"bench still running after {HANG_S:g} s")

        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        try:
            r = run_cli(line, env=env)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        found.append(f"uncaught {type(r.exception).__name__}: {str(r.exception)[:200]}")
    if r.exit_code not in (0, 2):
        found.append(f"exit code {r.exit_code}: {r.output[-300:]}")
    if "Traceback" in r.output:
        found.append("a traceback in the output")
    written = open(out, encoding="utf-8", errors="replace").read() if os.path.exists(out) else ""
    for secret in given:
        pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
        if any(p in r.output or p in written for p in pieces):
            found.append(f"a piece of the {args['secret']} in the output or the CSV")
    FOUND[found[0].split(":")[0] if found else f"exit {r.exit_code}"] += 1
    return r, found


@pytest.fixture(scope="module", autouse=True)
def _counts():
    """A one-off run (BREAKEVEN_FUZZ_SERVERS set) prints its counts, by exit code and by
    what it found, at the end (with -s)."""
    yield
    if "BREAKEVEN_FUZZ_SERVERS" in os.environ:
        print("\nserver fuzz:", dict(FOUND))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(faults=_faults(), args=_arguments())
def test_bench_survives_any_server(tmp_path_factory, faults, args):
    out = str(tmp_path_factory.mktemp("fuzz") / "runs.csv")
    _, found = _run(faults, args, out)
    assert not found, (faults, args, found)
