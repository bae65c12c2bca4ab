"""breakeven sweep's run (issue 25): each launch started in its own process group, waited
for, measured by bench and stopped; failed launches recorded with their log's tail and the
sweep going on; a manifest that --resume continues from.  The servers are tests/fake_server.py
in processes of their own, started by the sweep from its serve command."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from local_process import free_port

from breakeven.bench_client import Config
from breakeven.check import check_file
from breakeven.errors import BreakevenError
from breakeven.sweep import plan_sweep
from breakeven.sweep_run import run_sweep

FAKE = Path(__file__).parent / "fake_server.py"


def _serve(extra=""):
    return f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.002 {extra}"


def _bench():
    return Config(url="http://unused", label="unused", max_tokens=16, requests=2)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_sweep_interleaves_launches_and_each_is_its_own_server(tmp_path):
    port = free_port()
    plan = plan_sweep(
        _serve(), "vllm", [2], method="ngram", repeats=2, ready_timeout_s=30, port=port
    )
    out = tmp_path / "sweep"
    phases = []
    result = run_sweep(
        plan,
        str(out),
        _bench(),
        on_progress=lambda p: phases.append((p.launch.index, p.phase)),
    )
    assert [o.ok for o in result.outcomes] == [True] * 4, result.report()
    written = rows(result.runs_csv)
    # The order is the experiment: baseline, k = 2, baseline, k = 2, four server starts.
    launches = dict.fromkeys((r["launch_id"], r["label"]) for r in written)
    assert [label for _, label in launches] == ["baseline", "ngram-k2", "baseline", "ngram-k2"]
    assert len({launch for launch, _ in launches}) == 4
    assert {r["env_from"] for r in written} == {"server"}
    # The speculative launches were started with vLLM's flag; the baselines without it.
    manifest = json.loads((out / "manifest.json").read_text())
    argv = [launch["argv"] for launch in manifest["plan"]["launches"]]
    assert ["--speculative-config" in a for a in argv] == [False, True, False, True]
    assert [d["ok"] for d in manifest["done"]] == [True] * 4
    assert phases[:4] == [(1, "starting"), (1, "warming"), (1, "measuring"), (1, "measuring")]
    assert [p for i, p in phases if i == 1][-2:] == ["stopping", "done"]
    assert len(list((out / "logs").iterdir())) == 4
    # Every artefact is read again by the other commands.
    (comparison,) = check_file(result.runs_csv).comparisons
    assert comparison.label == "ngram-k2" and comparison.baseline_runs > 0


def test_launches_that_exit_or_never_get_ready_are_recorded_and_the_sweep_goes_on(tmp_path):
    port = free_port()
    # A server that exits at once (with k) and one that never listens (the baseline's sleep).
    serve = (
        f'{sys.executable} -c "import sys, time; '
        f'time.sleep(60) if len(sys.argv) == 1 else sys.exit(3)"'
    )
    plan = plan_sweep(serve, "vllm", [2], method="ngram", ready_timeout_s=2, port=port)
    result = run_sweep(plan, str(tmp_path / "s"), _bench())
    baseline, spec = result.outcomes
    assert not baseline.ok and "not ready within 2 s (--ready-timeout)" in baseline.error
    assert not spec.ok and "exited with 3 before it was ready" in spec.error
    assert "0 of 2 launches measured" in result.report()


def test_resume_skips_what_is_done_and_a_used_directory_is_refused(tmp_path):
    port = free_port()
    plan = plan_sweep(_serve(), "vllm", [2], method="ngram", ready_timeout_s=30, port=port)
    out = tmp_path / "sweep"
    run_sweep(plan, str(out), _bench())
    with pytest.raises(BreakevenError, match="exists: a sweep writes a directory of its own"):
        run_sweep(plan, str(out), _bench())
    before = len(rows(out / "runs.csv"))
    again = run_sweep(plan, str(out), _bench(), resume=True)
    assert [o.ok for o in again.outcomes] == [True, True]
    assert len(rows(out / "runs.csv")) == before  # nothing done twice
    with pytest.raises(BreakevenError, match="nothing to resume"):
        run_sweep(plan, str(tmp_path / "other"), _bench(), resume=True)


def test_the_command_runs_the_sweep_and_ends_with_checks_verdict(tmp_path):
    from click.testing import CliRunner

    from breakeven.cli import cli

    port = free_port()
    out = tmp_path / "sweep"
    args = ["sweep", "--serve", _serve(), "--engine", "vllm", "--method", "ngram", "-k", "0,3"]
    args += ["--port", str(port), "--max-tokens", "16", "--requests", "2", "--out", str(out)]
    r = CliRunner().invoke(cli, [*args, "--ready-timeout", "30"])
    assert r.exit_code == 0, r.output
    assert "launch 1/2 (baseline, repeat 1): starting" in r.output
    assert "2 of 2 launches measured" in r.output
    assert "Speculative runs against the baseline" in r.output  # check's report
    r = CliRunner().invoke(cli, [*args, "--ready-timeout", "30"])
    assert r.exit_code == 2 and "--resume" in r.output
