"""Every splitter is linear: doubling a line's length at most about doubles its parse time.

Measured as a ratio within one run (best of several repeats, so that a busy machine's noise
cancels): a quadratic splitter, such as the old ``logs._fields`` that built a line with
``+=``, takes four times as long on a line twice as long, and a 1 MB line took 5.5 s.  The
bound (3) is generous for a noisy 2-CPU machine; the sizes make a line's own cost dominate
each call.
"""

from __future__ import annotations

import time

import pytest

from breakeven.credentials import hide_url_passwords
from breakeven.formatting import printable
from breakeven.iotools.bench_results import parse_result_tables
from breakeven.iotools.ingest import ingest

RATIO = 3.0
REPEATS = 5


def _best(call) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _ratio(make, size: int) -> float:
    """Time of ``make(2 * size)`` over time of ``make(size)``, each the best of REPEATS."""
    small, large = make(size), make(2 * size)
    small()  # warm: imports, compiled patterns
    return _best(large) / _best(small)


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


@pytest.mark.parametrize("kind", list(LINES))
def test_ingest_parses_a_line_in_linear_time(tmp_path, kind):
    line, size = LINES[kind]

    def make(n):
        path = tmp_path / f"{kind}-{n}.log"
        path.write_text(line(n) * 4)
        return lambda: ingest([path])

    assert len(make(size // 100)().records) >= 1  # the lines are read, not skipped
    assert _ratio(make, size) < RATIO


def test_printed_tables_split_in_linear_time():
    def make(n):
        text = _table(n) * 20
        return lambda: parse_result_tables(text)

    assert _ratio(make, 100_000) < RATIO


@pytest.mark.parametrize(
    "text",
    [
        "x" * 200_000,  # one long word: a URL scheme tried at every position was quadratic
        "http://" + "u" * 200_000,
        "a:" * 100_000,
    ],
    ids=["word", "userinfo", "colons"],
)
def test_url_passwords_are_hidden_in_linear_time(text):
    def make(n):
        return lambda: hide_url_passwords(text[:n])

    assert _ratio(make, len(text) // 2) < RATIO


@pytest.mark.parametrize(
    "text",
    ["\x1b[" + "1" * 100_000, "\x1b]" + "t" * 100_000, "\x1b[" * 50_000],
    ids=["csi", "osc", "many"],
)
def test_control_characters_are_stripped_in_linear_time(text):
    def make(n):
        return lambda: printable(text[:n])

    assert _ratio(make, len(text) // 2) < RATIO
