"""The break-even request rate of a server built to have a known one (issue 42), across
commands: ``bench --request-rate`` against a plain and a speculative fake server, then
``compare``.

The fake servers' decode slows with the rate requests arrive at (``rate_crowding``: each
chunk's time x (1 + c x 1 / the gap since the previous arrival)), so a request's TPOT is known
from the gaps the server saw: the plain one's ``a_b (1 + c_b R)``, the speculative one's, three
tokens a cycle, ``cycle / 3 x (1 + c_s R)``.  Speculation is faster alone and slows faster with
load: at a steady rate they cross at ``(a_b - a_s) / (a_s c_s - a_b c_b)`` = 5.56 req/s.
"""

from __future__ import annotations

import csv
import itertools
import json
import math

import pytest
from cli_checks import run_cli
from fake_server import Behaviour, FakeServer

TOKENS = 33
REQUESTS = 12
RATES = (3.0, 4.5, 6.0, 7.5)
PLAIN = {"seconds_per_token": 0.010, "rate_crowding": 0.01}
SPEC = {"tokens_per_chunk": 3, "cycle_s": 0.015, "rate_crowding": 0.2, "num_spec_tokens": 3}
STEADY = (0.010 - 0.005) / (0.005 * 0.2 - 0.010 * 0.01)
"""The break-even rate at a steady rate [req/s]: 5.56."""


def _measured(tmp_path, label, behaviour, k):
    """bench's rows of one server at every rate, and each request's TPOT by the server's
    law from the gaps it saw [ms]."""
    out = tmp_path / f"{label}.csv"
    with FakeServer(Behaviour(**behaviour)) as server:
        args = ["bench", "--url", server.url, "--label", label, "-k", str(k)]
        args += ["--max-tokens", str(TOKENS), "--requests", str(REQUESTS), "--burstiness", "1000"]
        r = run_cli([*args, "--request-rate", *map(str, RATES), "--out", str(out)])
        arrivals = list(server.behaviour.arrivals)
    assert r.exit_code == 0, r.output
    per_token = behaviour.get("seconds_per_token") or behaviour["cycle_s"] / 3
    gaps = [math.inf] + [b - a for a, b in itertools.pairwise(arrivals)]
    law = [1000 * per_token * (1 + behaviour["rate_crowding"] / g) for g in gaps]
    return out, law


def _crossing(margins):
    """The highest rate where the margin is positive, linear to the next (by hand)."""
    i = max(j for j, m in enumerate(margins) if m > 0)
    return RATES[i] + (RATES[i + 1] - RATES[i]) * margins[i] / (margins[i] - margins[i + 1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rates")
    plain, plain_law = _measured(tmp, "baseline", PLAIN, 0)
    spec, spec_law = _measured(tmp, "eagle3-k3", SPEC, 3)
    return plain, spec, plain_law, spec_law


def _level_means(values):
    return [sum(values[i * REQUESTS : (i + 1) * REQUESTS]) / REQUESTS for i in range(len(RATES))]


def test_compare_finds_the_servers_break_even_rate(runs):
    plain, spec, plain_law, spec_law = runs
    r = run_cli(["compare", str(plain), str(spec), "--json"])
    assert r.exit_code == 0, r.output
    (answer,) = json.loads(r.stdout)["breakeven_rates"]
    assert answer["how"] == "interpolated" and answer["by"] == "mean TPOT"
    # The server's own law, over the gaps it saw, crosses where compare says.
    law = [b - s for b, s in zip(_level_means(plain_law), _level_means(spec_law), strict=True)]
    assert answer["breakeven_request_rate"] == pytest.approx(_crossing(law), rel=0.05)
    # And the steady-state break-even lies between the two levels that bracket it.
    low, high = max(x for x in RATES if x < STEADY), min(x for x in RATES if x > STEADY)
    assert low <= answer["breakeven_request_rate"] <= high
    # By hand from bench's rows: each level's mean TPOT, each side.
    means = {}
    for path in (plain, spec):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["origin"] == "client":
                    means.setdefault((str(path), float(row["request_rate"])), []).append(
                        float(row["tpot_ms"])
                    )
    margins = [
        sum(means[(str(plain), x)]) / REQUESTS - sum(means[(str(spec), x)]) / REQUESTS
        for x in RATES
    ]
    assert answer["margins"] == pytest.approx(margins)
    assert answer["breakeven_request_rate"] == pytest.approx(_crossing(margins))


def test_the_first_line_says_it_in_words_under_an_slo(runs):
    plain, spec, *_ = runs
    r = run_cli(["compare", str(plain), str(spec), "--slo", "tpot_ms:p90<=30"])
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("speculation pays up to ") and "above it, turn it off" in first
    got = json.loads(
        run_cli(["compare", str(plain), str(spec), "--slo", "tpot_ms<=30", "--json"]).stdout
    )
    levels = [x for x in got["levels"] if x["request_rate"] == RATES[0]]
    assert {x["side"] for x in levels} == {"baseline", "speculative"}
    for x in levels:
        assert x["requests"] == REQUESTS and x["slo_attainment"] == 1.0
        assert x["goodput_rps"] == pytest.approx(REQUESTS / x["duration_s"])


def test_the_report_page_gives_the_levels_and_the_break_even_rate(runs, tmp_path):
    plain, spec, *_ = runs
    report = tmp_path / "report"
    r = run_cli(["compare", str(plain), str(spec), "--slo", "tpot_ms<=30", "--report", str(report)])
    assert r.exit_code == 0, r.output
    (page,) = report.glob("*.html")
    text = page.read_text()
    assert "<p>Break-even: speculation pays up to " in text
    assert "By level, under the SLO tpot_ms&lt;=30" in text and "4.5 req/s" in text
