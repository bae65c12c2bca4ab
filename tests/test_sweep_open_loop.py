"""``breakeven sweep --request-rate`` (issue 42): the whole experiment at open-loop levels.
Every launch runs each rate on the same seeded schedule; the rows carry the level's rate and
each request's latencies; the answer gives the best k at each rate, each k's break-even request
rate, and, with --slo, each level's goodput.  The servers are tests/fake_server.py in processes
of their own, started by the sweep from its serve command."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from cli_checks import run_cli
from local_process import free_port

from breakeven.sweep.answer import answer_sweep

FAKE = Path(__file__).parent / "fake_server.py"
SERVE = f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.002"


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _args(out, port, *more):
    args = ["sweep", "--serve", SERVE, "--engine", "vllm", "--spec-method", "ngram", "-k", "0,3"]
    args += ["--port", str(port), "--max-tokens", "16", "--out", str(out), "--ready-timeout", "30"]
    return [*args, *map(str, more)]


def test_the_plan_names_the_rates_and_the_manifest_keeps_them(tmp_path):
    port = free_port()
    more = ("--request-rate", "4", "8", "--burstiness", "1000", "--requests", "4", "--plan")
    r = run_cli([*_args(tmp_path / "s", port, *more), "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert plan["request_rate"] == [4.0, 8.0] and plan["concurrency"] == []
    assert plan["burstiness"] == 1000.0 and plan["seed"] == 0 and plan["requests"] == [4, 4]
    r = run_cli(_args(tmp_path / "s", port, *more))
    assert "each runs request rate 4, 8 req/s" in " ".join(r.output.split())


def test_a_sweep_at_request_rates_answers_per_rate_with_goodput(tmp_path):
    port, out = free_port(), tmp_path / "sweep"
    more = ("--request-rate", "4", "8", "--burstiness", "1000", "--requests", "6")
    r = run_cli([*_args(out, port, *more), "--slo", "tpot_ms<=1000", "--json"])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout)
    written = [w for w in rows(out / "runs.csv") if w["origin"] == "client"]
    assert {w["request_rate"] for w in written} == {"4", "8"} or {
        float(w["request_rate"]) for w in written
    } == {4.0, 8.0}
    assert all(w["e2e_ms"] and w["start_s"] and w["ttft_ms"] for w in written)
    assert all("burstiness=1000" in w["env"] for w in written)
    # The best k at each rate, named by its rate.
    assert [b["request_rate"] for b in answer["best"]] == [4.0, 8.0]
    # check's levels: each side at each rate, its goodput under the SLO (every request meets a
    # 1 s TPOT) the good requests over the level's duration.
    levels = answer["check"]["levels"]
    assert {(x["side"], x["request_rate"]) for x in levels} == {
        (side, rate) for side in ("baseline", "speculative") for rate in (4.0, 8.0)
    }
    for x in levels:
        assert x["slo_attainment"] == 1.0 and x["goodput_rps"] > 0
    (rate,) = answer["check"]["breakeven_rates"]
    assert rate["label"] == "ngram-k3" and rate["rates"] == [4.0, 8.0]
    text = run_cli(["compare", str(out), "--slo", "tpot_ms<=1000"]).output
    assert text.splitlines()[0].startswith("speculation ")
    said = " ".join(answer_sweep(str(out), write=False).headline().split())
    assert "Break-even: speculation " in said and "Answer at 4 req/s: " in said
    assert "Answer at 8 req/s: " in said
    # Resuming with other rates is another sweep: refused in one line.
    other = ("--request-rate", "4", "16", "--burstiness", "1000", "--requests", "6")
    r = run_cli([*_args(out, port, *other), "--resume"])
    assert r.exit_code == 2 and "request_rate [4.0, 8.0] there, [4.0, 16.0] here" in r.output


def test_the_open_loop_flags_need_request_rate_and_exclude_concurrency(tmp_path):
    port = free_port()
    for more, said in (
        (("--burstiness", "2"), "--burstiness: shapes an open-loop level"),
        (("--request-rate", "2", "--concurrency", "4"), "--request-rate: give either"),
        (("--request-rate", "0"), "--request-rate: got 0"),
        (("--request-rate", "2", "--slo", "tpot_ms>=3"), "--slo"),
    ):
        r = run_cli([*_args(tmp_path / "s", port, *more), "--plan"])
        assert r.exit_code == 2, (more, r.output)
        assert said in r.output and len(r.output.strip().splitlines()) == 1, r.output
