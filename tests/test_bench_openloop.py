"""``breakeven bench --request-rate``: open-loop levels, whose requests are sent on a schedule
(gamma gaps, as ``vllm bench serve`` draws them) whatever the server's progress, and the
latency columns every request row carries (issue 42).

The arrival tests read the schedule the fake server saw (its logged arrivals), never a
wall-clock speed: their tolerances come from the sample sizes, and the schedules are seeded.
"""

from __future__ import annotations

import collections
import csv
import itertools
import json
import math
import signal
import statistics
import subprocess
import sys
import time
import tracemalloc

import pytest
from cli_checks import one_line_exit_2, run_cli
from fake_server import Behaviour, FakeServer
from hypothesis import given, settings
from hypothesis import strategies as st

from breakeven.bench.arrivals import arrival_times
from breakeven.bench.config import Config, Load
from breakeven.bench.rows import _CATEGORY, BENCH_COLUMNS
from breakeven.core.errors import BreakevenError
from breakeven.jobs.measure import bench_config


def bench(*args):
    return run_cli(["bench", *map(str, args)])


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cv(values):
    """The coefficient of variation of ``values``: their sd over their mean."""
    return statistics.stdev(values) / statistics.fmean(values)


def gaps(times):
    return [b - a for a, b in itertools.pairwise(times)]


# --- the schedule -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(0.01, 1e4),
    requests=st.integers(1, 300),
    burstiness=st.floats(0.05, 50),
    seed=st.integers(-(2**63), 2**63),
)
def test_a_schedule_is_seeded_ordered_and_ends_at_requests_over_rate(
    rate, requests, burstiness, seed
):
    times = list(arrival_times(rate, requests, burstiness, seed))
    assert len(times) == requests
    assert all(t >= 0 for t in times) and times == sorted(times)
    # As vllm bench serve scales it: the last request is due at requests / rate exactly.
    assert times[-1] == pytest.approx(requests / rate, rel=1e-9)
    assert list(arrival_times(rate, requests, burstiness, seed)) == times


@pytest.mark.parametrize(
    ("burstiness", "tolerance"),
    # The gaps' CV is 1 / sqrt(B).  Over 200 gamma gaps its standard error is about
    # CV x sqrt((mu4 / sigma^4 - 1) / 4n + CV^2 / n): 0.10 for B = 1 (exponential: mu4 = 9
    # sigma^4) and 0.04 for B = 4 (mu4 = 4.5 sigma^4); the tolerances are 3 of them.
    [(1.0, 0.30), (4.0, 0.12)],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gaps_have_the_coefficient_of_variation_of_their_burstiness(
    burstiness, tolerance, seed
):
    times = list(arrival_times(50.0, 200, burstiness, seed))
    assert cv(gaps([0.0, *times])) == pytest.approx(1 / math.sqrt(burstiness), abs=tolerance)
    assert statistics.fmean(gaps([0.0, *times])) == pytest.approx(1 / 50.0, rel=1e-9)


def test_a_schedule_holds_nothing_that_grows_with_its_requests():
    tracemalloc.start()
    try:
        last = collections.deque(arrival_times(1000.0, 100_000, 1.0, 0), maxlen=1)[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last == pytest.approx(100.0)
    assert peak < 64 * 1024  # a list of 10^5 floats alone is 3 MB


def test_levels_and_their_default_requests():
    config = Config(url="http://127.0.0.1:9", label="t", request_rate=(0.1, 2, 100))
    config.check()
    assert config.loads() == [Load(None, 0.1), Load(None, 2.0), Load(None, 100.0)]
    # About 30 s of arrivals, 8 at the fewest and 1,000 at the most.
    assert [config.requests_in(load) for load in config.loads()] == [8, 60, 1000]
    assert Config(url="http://x:1", label="t").loads() == [Load(1)]
    capped = Config(url="http://x:1", label="t", request_rate=(2,), max_concurrency=4)
    assert capped.loads() == [Load(4, 2.0)] and capped.loads()[0].tag == "r2-c4"


# --- the server sees the schedule ---------------------------------------------------------


def test_the_server_sees_the_offered_rate(tmp_path):
    # 40 req/s: a client and a server in one process (a GIL) on a loaded 2-CPU machine kept
    # 50 and fell behind at 100 (70-79 req/s seen: the warning of the next test).
    rate, n = 40, 200
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 2),
            *("--request-rate", rate, "--requests", n, "--json"),
        )
        arrivals = list(server.behaviour.arrivals)
    assert r.exit_code == 0, r.output
    assert len(arrivals) == n
    # The rate the server saw over 199 gaps: the schedule's within 10% (its gaps' sum is fixed
    # bar the first, 1% of it on average), whatever the client's lateness: a request sent late
    # never delays those after it, so a hiccup of tens of ms moves only the ends of a 5 s span.
    # (The gaps' spread is tested on the schedule, seeded: the server's clock adds the
    # jitter of a shared machine, up to 30-40 ms a gap here, to gaps of 10 ms.)
    seen = (n - 1) / (arrivals[-1] - arrivals[0])
    assert seen == pytest.approx(rate, rel=0.10)
    (level,) = json.loads(r.stdout[r.stdout.index("[") :])
    assert level["request_rate"] == rate and level["requests"] == n
    assert level["arrival_rate"] == pytest.approx(rate, rel=0.10)


def test_open_loop_piles_requests_up_on_a_slow_server_and_the_cap_holds_them(tmp_path):
    # A decode that slows with the requests in flight: 100 req/s is far past what it serves.
    slow = dict(seconds_per_token=0.005, crowding=0.2)
    common = ("--label", "t", "--max-tokens", 20, "--request-rate", 100, "--requests", 40)
    with FakeServer(Behaviour(**slow)) as server:
        out = tmp_path / "open.csv"
        r = bench("--url", server.url, *common, "--out", out, "--json")
        crowd = list(server.behaviour.in_flight_at_arrival)
    assert r.exit_code == 0, r.output
    assert len(crowd) == 40
    assert max(crowd) >= 10 and max(crowd[-10:]) > max(crowd[:5])
    (level,) = json.loads(r.stdout[r.stdout.index("[") :])
    assert level["max_in_flight"] >= 10 and level["concurrency"] is None
    assert all(row["concurrency"] == "" for row in rows(out))

    with FakeServer(Behaviour(**slow)) as server:
        out = tmp_path / "capped.csv"
        r = bench("--url", server.url, *common, "--max-concurrency", 3, "--out", out, "--json")
        crowd = list(server.behaviour.in_flight_at_arrival)
    assert r.exit_code == 0, r.output
    assert len(crowd) == 40 and max(crowd) <= 3
    (level,) = json.loads(r.stdout[r.stdout.index("[") :])
    assert level["max_in_flight"] <= 3 and level["concurrency"] == 3
    got = [row for row in rows(out) if row["origin"] == "client"]
    assert len(got) == 40 and all(row["concurrency"] == "3" for row in got)
    # Each row is timed from when its request was due, its wait for a slot included: the
    # requests between their due times and their ends overlap more than the 3 the server had.
    spans = [(float(x["start_s"]), float(x["start_s"]) + float(x["e2e_ms"]) / 1000) for x in got]
    most = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert most > 3


def test_the_same_seed_sends_the_same_schedule_and_prompts(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": f"p{i}", "category": f"c{i}"}) + "\n" for i in range(5))
    )

    def run(seed, name):
        out = tmp_path / name
        args = ("--request-rate", 200, "--requests", 20, "--max-tokens", 2, "--seed", seed)
        r = bench("--url", server.url, "--label", name, *args, "--prompts", prompts, "--out", out)
        assert r.exit_code == 0, r.output
        got = [row for row in rows(out) if row["origin"] == "client"]
        return sorted((float(row["start_s"]), row["category"]) for row in got)

    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        first, again, other = run(7, "a.csv"), run(7, "b.csv"), run(8, "c.csv")
    assert len(first) == 20
    assert [c for _, c in first] == [c for _, c in again]
    assert [s for s, _ in first] == pytest.approx([s for s, _ in again], abs=1e-9)
    # The prompts in turn, the i-th request the i-th prompt: the same under any seed.
    assert [c for _, c in first] == [f"c{i % 5}" for i in range(20)] == [c for _, c in other]
    assert [s for s, _ in first] != pytest.approx([s for s, _ in other], abs=1e-6)
    expected = list(arrival_times(200.0, 20, 1.0, 7))
    assert [s for s, _ in first] == pytest.approx(expected, abs=1e-9)


# --- rows ---------------------------------------------------------------------------------


@pytest.mark.parametrize("load", [("--concurrency", 2), ("--request-rate", 40)])
def test_every_request_row_carries_its_latencies(tmp_path, load):
    out = tmp_path / "r.csv"
    with FakeServer(Behaviour(seconds_per_token=0.002, first_token_delay=0.01)) as server:
        r = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 12, "--requests", 8),
            *(*load, "--out", out),
        )
    assert r.exit_code == 0, r.output
    with open(out, newline="") as f:
        assert tuple(next(csv.reader(f))) == BENCH_COLUMNS
    # The latencies, then the level's offered rate, after the columns of older bench CSVs
    # (and before the sampling settings, issue 44).
    latencies = BENCH_COLUMNS.index("e2e_ms")
    assert BENCH_COLUMNS[latencies : latencies + 3] == ("e2e_ms", "start_s", "request_rate")
    got = [row for row in rows(out) if row["origin"] == "client"]
    assert len(got) == 8
    rate = "40.0" if load[0] == "--request-rate" else ""
    for row in got:
        ttft, e2e, tpot = (float(row[k]) for k in ("ttft_ms", "e2e_ms", "tpot_ms"))
        assert ttft >= 10.0 and float(row["itl_ms"]) > 0 and float(row["start_s"]) >= 0
        # The decode time: about the tokens after the first at tpot_ms each.  Not exactly: tpot
        # is timed over the stream's live window (a stream read late, on a loaded host, has
        # its caught-up chunks left out: 5-9% apart under 3 busy loops on 2 cores), e2e_ms
        # from sending to the last token.
        decode_ms = (int(row["completion_tokens"]) - 1) * tpot
        assert e2e > ttft
        assert e2e - ttft == pytest.approx(decode_ms, rel=0.5)
        assert row["request_rate"] == rate
    assert sorted(float(row["start_s"]) for row in got)[0] < 0.5


def test_a_bench_csv_written_before_the_latency_columns_stays_appendable(tmp_path):
    out = tmp_path / "old.csv"
    out.write_text(",".join(_CATEGORY) + "\n")
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 4, "--requests", 3),
            *("--request-rate", 50, "--out", out),
        )
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(_CATEGORY) and len(lines) >= 4
    assert all(len(row) == len(_CATEGORY) for row in rows(out))


def test_an_open_loop_level_summary_says_its_load_and_latencies(tmp_path):
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 6, "--requests", 10),
            *("--request-rate", 100, "--json"),
        )
        text = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 6, "--requests", 10),
            "--request-rate",
            100,
        )
    assert r.exit_code == 0 and text.exit_code == 0, r.output + text.output
    (level,) = json.loads(r.stdout[r.stdout.index("[") :])
    for key in ("arrival_rate", "request_throughput", "mean_in_flight", "duration_s"):
        assert level[key] > 0, key
    for name in ("ttft", "tpot", "e2e"):
        p50, p90, p99 = (level[f"{name}_{p}_ms"] for p in ("p50", "p90", "p99"))
        assert 0 < p50 <= p90 <= p99, name
    # Little's law: the mean in flight is the throughput times the mean e2e.
    assert level["mean_in_flight"] <= level["max_in_flight"] + 1e-9
    assert "t: " in text.stdout and "at request rate 100 req/s" in text.stdout
    assert "Load and latency by level" in text.stdout


def test_an_interrupted_open_loop_level_keeps_every_row_written(tmp_path):
    out = tmp_path / "r.csv"
    with FakeServer(Behaviour(seconds_per_token=0.01)) as server:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "breakeven", "bench", "--url", server.url),
                *("--label", "t", "--max-tokens", "10", "--request-rate", "20"),
                *("--requests", "400", "--out", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and server.behaviour.finished < 5:
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "Terminated (SIGTERM)" in err
    got = rows(out)
    assert 3 <= len(got) < 400
    assert all(len(row) == len(BENCH_COLUMNS) and row["request_rate"] == "20.0" for row in got)


# --- bad input ----------------------------------------------------------------------------

URL = ("--url", "http://127.0.0.1:9", "--label", "t")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--request-rate", 0), "--request-rate"),
        (("--request-rate", -2), "--request-rate"),
        (("--request-rate", "nan"), "--request-rate"),
        (("--request-rate", "inf"), "--request-rate"),
        (("--request-rate", "1", "fast"), "--request-rate"),
        (("--request-rate", 1, "--burstiness", 0), "--burstiness"),
        (("--request-rate", 1, "--burstiness", -1), "--burstiness"),
        (("--request-rate", 1, "--burstiness", "nan"), "--burstiness"),
        (("--request-rate", 1, "--burstiness", "inf"), "--burstiness"),
        (("--request-rate", 1, "--concurrency", 4), "--concurrency"),
        (("--concurrency", 4, "--request-rate", 1), "--request-rate"),
        (("--request-rate", 1, "--max-concurrency", 0), "--max-concurrency"),
        (("--max-concurrency", 2), "--max-concurrency"),
        (("--burstiness", 2), "--burstiness"),
        (("--seed", 3), "--seed"),
    ],
)
def test_bad_open_loop_input_is_one_line_naming_the_flag(args, named):
    last = one_line_exit_2(bench(*URL, *args), named)
    assert "Traceback" not in last


@pytest.mark.parametrize(
    "settings",
    [
        {"request_rate": (0,)},
        {"request_rate": (math.nan,)},
        {"request_rate": (math.inf,)},
        {"request_rate": (1,), "burstiness": 0},
        {"request_rate": (1,), "burstiness": math.inf},
        {"request_rate": (1,), "burstiness": math.nan},
        {"request_rate": (1,), "concurrency": (2,)},
        {"request_rate": (1,), "max_concurrency": 0},
        {"max_concurrency": 2},
    ],
)
def test_bad_open_loop_settings_raise_a_breakeven_error_in_python(settings):
    with pytest.raises(BreakevenError) as e:
        bench_config(url="http://127.0.0.1:9", label="t", **settings)
    assert isinstance(e.value, ValueError)
    name = next(k for k in ("max_concurrency", "burstiness", "request_rate") if k in settings)
    assert name in e.value.render()


def test_a_level_that_falls_behind_its_schedule_says_so(tmp_path):
    # With a cap of 1 on a server of 50 ms a request, 50 req/s cannot be sent: the requests
    # wait for the slot, and the achieved rate falls short (about 20 req/s).
    with FakeServer(Behaviour(seconds_per_token=0.01)) as server:
        r = bench(
            *("--url", server.url, "--label", "t", "--max-tokens", 5, "--requests", 10),
            *("--request-rate", 50, "--max-concurrency", 1, "--json"),
        )
    assert r.exit_code == 0, r.output
    (level,) = json.loads(r.stdout[r.stdout.index("[") :])
    assert level["arrival_rate"] < 0.9 * 50
    assert any("short of the rate offered" in w for w in level["warnings"])
    assert "requests waited for a slot (--max-concurrency)" in r.stderr
