"""Long lines are read right: the inputs whose parse time was once quadratic in a line's
length (a splitter that built a line with ``+=``, a URL scheme tried at every position) give
their records and texts whole.  How their time grows with their length is a speed figure, in
``benchmarks/linear_time.py`` (a timing ratio is not a test: these machines are shared)."""

from __future__ import annotations

import pytest

from breakeven.core.credentials import hide_url_passwords
from breakeven.iotools.bench_results import parse_result_tables
from breakeven.iotools.ingest import ingest
from breakeven.render import printable


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
def test_ingest_reads_a_long_line_of_each_kind(tmp_path, kind):
    line, size = LINES[kind]
    path = tmp_path / f"{kind}.log"
    path.write_text(line(size) * 4)
    records = ingest([path]).records
    assert records, kind
    if kind == "vllm":
        assert {r["num_spec_tokens"] for r in records} == {size}  # one rate per position
    if kind == "llamacpp":
        assert {r["accept_len"] for r in records} == {1.5}
    if kind == "sglang":
        assert {r["accept_len"] for r in records} == {2.17}


def test_a_printed_table_with_a_long_line_is_split():
    tables, unfinished = parse_result_tables(_table(100_000) * 20)
    assert len(tables) == 20 and unfinished is None
    assert {t["mean_tpot_ms"] for _, t in tables} == {12.5}


@pytest.mark.parametrize(
    "text",
    ["x" * 200_000, "http://" + "u" * 200_000, "a:" * 100_000],
    ids=["word", "userinfo", "colons"],
)
def test_long_texts_without_a_password_are_left_whole(text):
    assert hide_url_passwords(text) == text
    assert hide_url_passwords(text + " http://u:pw@h/") == text + " http://u:***@h/"


@pytest.mark.parametrize(
    "text",
    ["\x1b[" + "1" * 100_000, "\x1b]" + "t" * 100_000, "\x1b[" * 50_000],
    ids=["csi", "osc", "many"],
)
def test_long_control_sequences_are_stripped(text):
    assert "\x1b" not in printable(text)
