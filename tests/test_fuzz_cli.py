"""Every subcommand, fuzzed: real flags, hostile values, hostile files among the arguments,
and hostile servers behind its URLs.

Whatever the arguments, a command exits 0 or 2 (no command documents another code), prints
no traceback, raises nothing but SystemExit, never hangs (20 s; a FIFO without a writer
included), shows no piece of a secret it was given (an API key, a bearer token, a URL's
password: in its output or any file it writes), and its ``--json`` output is strict JSON (no
NaN or Infinity).  An exit 2 ends with one line, ``Error: ...``.

bench's ``--url`` is a closed port or a llama.cpp-like server (tests/hostile_server.py) drawn
with any of its faults, and fleet's ``--prometheus`` a closed port or a fake Prometheus
answering anything from the API's documented shapes to broken text
(tests/test_fleet_hostile.py's strategy); either server may echo the secrets it was sent.
Against a server, the commands' time limits are short ones, given last (SERVER_FIXED), so a
stalled server costs seconds.

Arguments are written as placeholders (``<in:fifo>``, ``<out:missing_dir>``,
``<url:llamacpp>``) that each example resolves to real paths and addresses, so a failing
example reads as what it tried.

CI runs ``BREAKEVEN_FUZZ_CLI`` examples a command (30 by default); a one-off run sets it higher
(``BREAKEVEN_FUZZ_CLI=600 pytest -s tests/test_fuzz_cli.py``) and prints its counts, by
command and exit code, at the end.
"""

from __future__ import annotations

import base64
import collections
import gzip
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import click
import pytest
from cli_checks import run_cli
from hostile_server import (
    ECHO_MODELS_MODES,
    ECHO_ROUTES,
    ECHO_STREAM_MODES,
    FUZZ_STREAM_MODES,
    LLAMACPP_FAULTS,
    METRICS_MODES,
    MODELS_MODES,
    STREAM_MODES,
    HostileServer,
    Hostility,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_fleet_hostile import STEADY, FakePrometheus, send
from test_fleet_hostile import _answers as prometheus_answers
from test_fleet_hostile import _value_strings as VALUE_STRINGS

from breakeven.cli import cli
from breakeven.fleet.view import FLEET_ENGINES, queries
from breakeven.iotools import sources

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
ENGINES = ROOT / "tests" / "data" / "engines"


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _commands(command, (*path, name))
        else:
            out.append(((*path, name), command))
    return out


EXAMPLES = int(os.environ.get("BREAKEVEN_FUZZ_CLI", "30"))
FOUND: collections.Counter[tuple[str, str]] = collections.Counter()
KEY = "sk-fuzz-0123456789abcdefghijklmnopqrstuvwx"
"""The API key and bearer token the commands are given (in BREAKEVEN_FUZZ_KEY)."""
PASSWORD = "p#ss/w?rd@0123456789"
"""A URL's password, with the characters a URL parser splits at."""
SECRETS = (KEY, PASSWORD)
COMMANDS = dict(_commands(cli))
# bench is fuzzed here with a closed port and short timeouts (BENCH_FIXED): its arguments, files
# and output paths; tests/test_bench_hostile.py covers what a hostile server sends it.
NOT_FUZZED: set[tuple[str, ...]] = set()
FUZZED = [path for path in COMMANDS if path not in NOT_FUZZED]
# Exit code 1 where a command documents it, for the flag that asks for it.
EXIT_ONE = {("compare",): "--fail-if"}

# Values that break naive parsing: signs, zero, non-finite, overflow, underflow, 10^20 as digits,
# long text, control characters, non-ASCII, and things that look like flags or lists.
HOSTILE = [
    "",
    "-1",
    "0",
    "-0",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "-1e308",
    "1e400",
    "1e-320",
    "1" + "0" * 20,
    "9" * 400,
    "x" * 5000,
    "a\x00b",
    "\x1b[31mred\x1b[0m",
    "two\nlines",
    "tab\there",
    "ünïcødé ✓",
    "-",
    "--json",
    "1,2,3",
    "0.5,nan",
    ",",
    "0.9,inf",
    "1e308,1",
    "$\\frac{$",
    "{0}",
    "%s",
]
# Plausible values by argument name, for arguments a mutation adds.
GOOD = {
    "header": ["X-Scope-OrgID:team", "X-Scope-OrgID:a|b", "X-Api-Key:k-123"],
    "baseline_tok_s": ["62.9", "90"],
    "step_ms": ["15.9"],
    "verify_ms": ["28.7"],
    "draft_ms": ["1.2", "0"],
    "overhead_ms": ["0.5"],
    "cycle_ms": ["29.9"],
    "accept_len": ["2.1"],
    "alpha": ["0.7"],
    "k": ["3", "6"],
    "per_position": ["0.9,0.8,0.6"],
    "cost_ratio": ["0.05"],
    "target_speedup": ["1.2"],
    "accept_len_by_k": ["1.6,1.9,2.05,2.1"],
    "draft_step_ms": ["0.2"],
    "batch": ["4"],
    "k_max": ["8", "1000000"],
    "max_batch": ["1000", "1000000"],
    "experts": ["100000000000000000", "8"],
    "top_k": ["1"],
    "tokens": ["3", "1"],
    "overlap": ["0.5"],
    "dense_bytes": ["1e9"],
    "expert_bytes": ["4e7"],
    "tolerance": ["0.2"],
    "delta": ["0.1"],
    "label": ["eagle3"],
    "num_spec_tokens": ["3", "0"],
    "run_id": ["r1"],
    "jobs": ["2"],
    "year": ["2026"],
    "requests": ["2"],
    "api_key_env": ["BREAKEVEN_FUZZ_KEY"],
    "predict_k": ["1-8", "2,3,5"],
    "rank_decay": ["0.2"],
    "max_steps": ["4"],
    "max_topk": ["3"],
    "max_verify_tokens": ["12"],
    "spec_topk": ["4"],
    "verify_tokens": ["16"],
    "min_gain": ["0.05"],
    "max_num_seqs": ["64"],
    "graph_sizes": ["1,8,64"],
    "method": ["mtp"],
    "base_config": ['{"model": "x"}'],
    "engine": ["sglang"],
    "prometheus": ["<url:prometheus>", "<url:closed>"],
    "trtllm_stats": ["<url:llamacpp>", "<url:closed>"],
    "url": ["<url:llamacpp>", "<url:closed>"],
    "since": ["30m"],
    "step": ["15s"],
    "window": ["2m"],
    "match": ['{job="x"}'],
    "max_share_above": ["0.5"],
    "token_env": ["BREAKEVEN_FUZZ_KEY"],
    "start": ["1796000000"],
    "end": ["2026-12-01T12:00:00Z"],
}
_PREDICT = [
    "--baseline-tok-s 62.9 --verify-ms 28.7 --draft-ms 1.2 --accept-len 2.1 -k 6",
    "--step-ms 11.1 --cycle-ms 29.9 --accept-len 2.1",
    "--alpha 0.8 -k 4 --cost-ratio 0.05",
    "--baseline-tok-s 62.9 --verify-ms 28.7",
    "--baseline-tok-s 62.9 --cycle-ms 29.9 --per-position 0.9,0.8",
]
_OPTIMIZE = [
    "--alpha 0.8 --cost-ratio 0.05",
    "--baseline-tok-s 62.9 --verify-ms 28.7 --draft-step-ms 0.2 --accept-len-by-k 1.6,1.9,2.05",
    "--cost-curve <in:curve> --fit linear --alpha 0.7 --draft-step-ms 0.2 --batch 4",
]
_BATCH = [
    "--cost-curve <in:curve> --alpha 0.7 --max-k 8",
    "--cost-curve <in:curve> --fit linear --accept-len 2.1 -k 3 --max-batch 300",
]
# Invocations that work: the fuzz starts from one and changes a few of its arguments, so that a
# hostile value is often the only thing wrong (random flags mostly just conflict).
VALID = {
    ("predict",): [*_PREDICT, "--fit-file <in:fit_json> -k 3 --accept-len 2.2"],
    ("optimize",): [
        *_OPTIMIZE,
        "--fit-file <in:fit_json>",
        "--tree --fit-file <in:fit_json>",
        "--tree --cost-curve <in:curve> --alpha 0.7 --rank-decay 0.2 "
        "--draft-step-ms 0.2 --batch 2 --max-steps 4 --max-topk 4 "
        "--max-verify-tokens 16",
    ],
    ("moe",): [
        "--experts 384 --top-k 8 --shared 1 --tokens 7",
        "--experts 384 --top-k 8 --tokens 7 --dense-bytes 1e9 --expert-bytes 4e7",
    ],
    ("ingest",): [
        "<in:sglang_log>",
        "<in:sglang_log> --label x -k 3 --out <out:fresh.csv>",
        "<in:prometheus> --before <in:prometheus>",
    ],
    ("check",): [
        "<in:case_study>",
        "<in:published>",
        "<in:case_study> --schedule <in:schedule_json>",
        "<in:case_study> --slo tpot_ms<=50,ttft_ms:p90<=2000",
    ],
    ("plot", "surface"): [
        *(a + " --out <out:fresh.png>" for a in _PREDICT),
        "--alpha-k --cost-ratio 0.05 -k 3 --alpha 0.7 --out <out:fresh.svg>",
    ],
    ("plot", "k"): [a + " --out <out:fresh.png>" for a in _OPTIMIZE],
    ("plot", "batch"): [a + " --out <out:fresh.png>" for a in _BATCH],
    ("plot", "check"): [
        "<in:case_study> --out <out:fresh.svg>",
        "<in:published> --fit-file <in:published_fit> --out <out:fresh.svg>",
        "<in:published> --fit-file <in:published_fit> --cycle-ms 9 --out <out:fresh.png>",
    ],
    ("plot", "sensitivity"): [
        "--baseline-tok-s 62.9 --verify-ms 28.7 --accept-len 2.1 --out <out:fresh.pdf>"
    ],
    ("report",): ["<in:case_study> --out <out:fresh_dir>"],
    ("compare",): [
        "<in:sglang_baseline> <in:sglang_log> -k 3",
        "<in:sglang_baseline> <in:sglang_log> -k 3 --verify-ms 28.7 --draft-ms 1.2",
        "<in:case_study> <in:case_study> --fail-if slower",
        "<in:sglang_baseline> <in:sglang_log> -k 3 --slo tpot_ms:p90<=50",
    ],
    ("bench",): [
        "--label b --requests 2 --max-tokens 8",
        "--label b --requests 3 --max-tokens 6 --concurrency 1,2 --api-key-env BREAKEVEN_FUZZ_KEY"
        " --json",
        "--label b --requests 2 --max-tokens 8 -k 2 --chat --out <out:fresh.csv>",
        "--label b --requests 3 --max-tokens 6 --request-rate 50,100 --burstiness 4"
        " --max-concurrency 2 --seed 7 --json",
    ],
    ("sweep",): [
        "--serve vllm_serve_m_--port_{port} --engine vllm --spec-method ngram -k 0,2 --repeats 2",
        "--serve llama-server --engine llamacpp --draft d.gguf -k 2,4 --concurrency 1,4",
    ],
    ("demo",): [
        "--out <out:fresh_dir>",
        "--out <out:fresh_dir> --llama-server sh --threads 2 --repeats 4 --port 8123",
    ],
    ("batch",): [
        *_BATCH,
        "--fit-file <in:fit_json> --accept-len 2.5 -k 4 --topk 4 --verify-tokens 16",
    ],
    ("schedule",): [
        "--cost-curve <in:curve> --alpha 0.7 --engine vllm",
        "--cost-curve <in:curve> --alpha 0.7 --draft-step-ms 0.3 --engine sglang "
        "--cuda-graph-sizes 1,2,4,8,16 --out <out:fresh.csv> --min-gain 0",
        "--cost-curve <in:curve> --accept-len-by-k 1.6,1.9,2.05 --engine vllm-legacy "
        "--load <in:sglang_log> --spec-method eagle3 --max-num-seqs 128",
        '--fit-file <in:fit_json> --engine vllm --base-config {"method":"eagle3"} --json',
    ],
    ("plot", "schedule"): [
        "--cost-curve <in:curve> --alpha 0.7 --out <out:fresh.png>",
        "--fit-file <in:fit_json> --engine sglang --out <out:fresh.svg>",
    ],
    ("fleet",): [
        "--prometheus <url:prometheus> --since 1h",
        "--prometheus <url:prometheus> --start 1796000000 --end 1796003600 --step 30s "
        '--match {job="vllm"} --json',
        "--prometheus <url:prometheus> --since 2h --fit-file <in:fit_json> "
        "--token-env BREAKEVEN_FUZZ_KEY --out <out:fresh.csv>",
        "--prometheus <url:prometheus> --since 1h --token-env BREAKEVEN_FUZZ_KEY --report "
        "<out:fresh_dir>",
        "--prometheus <url:prometheus> --since 1h --header X-Scope-OrgID:team --dedup "
        "--no-partial-response --json",
    ],
    ("fit",): [
        "<in:case_study>",
        "<in:published> --predict-k 1-8",
        "<in:case_study> --draft-cost per-cycle --out <out:fresh.csv> --json",
    ],
}
BENCH_FIXED = ["--url", "<url:llamacpp>", "--connect-timeout", "0.2", "--ready-timeout", "0.2"]
SERVER_FIXED = {
    ("bench",): [
        *("--connect-timeout", "1", "--ready-timeout", "1"),
        *("--idle-timeout", "1", "--request-timeout", "2"),
    ],
    ("fleet",): ["--timeout", "2", "--deadline", "5"],
}
"""Time limits given last where a command reaches a server (the last of an option given twice
wins): a stalled server then costs seconds, whatever the fuzz gave before."""
SWEEP_FIXED = ["--plan"]
"""sweep and demo are fuzzed planning only: a fuzzed --serve, or the demo's, is never run."""

# Inputs: good files, and every kind of file that is not what a command expects.
INPUTS = [
    "case_study",
    "published",
    "curve",
    "sglang_log",
    "sglang_baseline",
    "prometheus",
    "json_infinity",
    "missing",
    "directory",
    "fit_json",
    "published_fit",
    "schedule_json",
    "empty",
    "binary",
    "fifo",
    "long_cell",
    "long_cell_curve",
    "inf_cells",
    "negative_cells",
    "duplicate_header",
    "escapes",
    "inf_curve",
    "empty_string",
    "proc",
]
# Outputs: a fresh place, and every place that cannot be written.
OUTPUTS = [
    "fresh.png",
    "fresh.svg",
    "fresh.pdf",
    "fresh.csv",
    "fresh_dir",
    "fresh_no_suffix",
    "missing_dir",
    "directory",
    "existing",
    "empty_string",
    "proc",
    "proc_dir",
    "unwritable",
    "under_a_file",
]


def _input_files(root: Path) -> dict[str, str]:
    header = (DATA / "case_study.csv").read_text().splitlines()[7]
    row = "r,{label},,sglang,m,h,1,{k},eagle3,{tok_s},,{tau},,,,,,{env},src,client"

    def measurements(*rows: str, head: str = header) -> str:
        return "\n".join([head, *rows]) + "\n"

    base = row.format(label="base", k=0, tok_s=60, tau="", env="tp=8")
    files = {
        "long_cell": measurements(
            base, row.format(label="spec", k=3, tok_s=70, tau=2.1, env="x" * (200 << 10))
        ),
        "long_cell_curve": "tokens,ms,note\n1,7,a\n128,12," + "n" * (200 << 10) + "\n",
        "inf_cells": measurements(
            base, row.format(label="spec", k=3, tok_s="inf", tau=2.1, env="tp=8")
        ),
        "negative_cells": measurements(
            base, row.format(label="spec", k=3, tok_s=-70, tau=2.1, env="tp=8")
        ),
        "duplicate_header": measurements(base, head=header + ",tok_s"),
        "escapes": measurements(
            base,
            row.format(
                label="\x1b[2J\x1b[31mspec\x07 $\\frac{$",
                k=3,
                tok_s=70,
                tau=2.1,
                env="tp=8\x1b]0;title\x07",
            ),
        ),
        "inf_curve": "tokens,ms\n1,7\n128,inf\n",
        "empty": "",
    }
    paths = {name: str(root / f"{name}.csv") for name in files}
    for name, text in files.items():
        Path(paths[name]).write_text(text)
    binary = root / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    fifo = root / "fifo.csv"
    os.mkfifo(fifo)  # no writer, ever: a command must refuse it or read it to its end
    (root / "a_directory").mkdir()
    # Copies of the bundled files: a fuzzed --out with --force may replace any file it names.
    for name in ("case_study.csv", "published.csv", "llama3_8b_decode_curve.csv"):
        shutil.copy(DATA / name, root / name)
    shutil.copy(DATA / "case_study.csv", root / "existing.csv")
    # A fit file with groups and a surface (fit --out of the AngelSlim sweep and 20780's).
    from breakeven.fitting.fit import fit_file
    from breakeven.model.surface import MoE

    published = ROOT / "tests" / "data" / "published"
    fitted = fit_file(
        str(published / "angelslim_issue163_qwen3_30b_a3b_eagle3_batch.csv"), moe=MoE(128, 8)
    ).to_dict()
    fitted["groups"] = fit_file(
        str(published / "vllm_issue20780_llama31_8b_eagle_bs1.csv")
    ).to_dict()["groups"][:1]
    (root / "fit.json").write_text(json.dumps(fitted))
    (root / "published_fit.json").write_text(
        json.dumps(fit_file(str(DATA / "published.csv")).to_dict())
    )
    from breakeven.model.costs import TableCost
    from breakeven.planning.schedule import schedule_report

    planned = schedule_report(
        TableCost((1, 64, 4096), (10.0, 10.0, 1000.0)),
        alpha=0.8,
        draft_step_ms=0.5,
        k_max=6,
        max_batch=64,
    )
    (root / "schedule.json").write_text(json.dumps(planned))
    return {
        **paths,
        "case_study": str(root / "case_study.csv"),
        "published": str(root / "published.csv"),
        "curve": str(root / "llama3_8b_decode_curve.csv"),
        "sglang_log": str(ROOT / "tests" / "data" / "case_study" / "sglang_eagle3_k3.log"),
        "sglang_baseline": str(ROOT / "tests" / "data" / "case_study" / "sglang_baseline.log"),
        "json_infinity": str(ENGINES / "sglang_bench_serving__dlora_request_rate_Infinity.jsonl"),
        "prometheus": str(ENGINES / "vllm_metrics__pr41916_spec_decode_excerpt.prom"),
        "missing": str(root / "missing.csv"),
        "directory": str(root / "a_directory"),
        "fit_json": str(root / "fit.json"),
        "published_fit": str(root / "published_fit.json"),
        "schedule_json": str(root / "schedule.json"),
        "binary": str(binary),
        "fifo": str(fifo),
        "empty_string": "",
        "proc": "/proc/x",
    }


def _output_paths(fresh: Path, root: Path) -> dict[str, str]:
    return {
        "fresh.png": str(fresh / "out.png"),
        "fresh.svg": str(fresh / "out.svg"),
        "fresh.pdf": str(fresh / "out.pdf"),
        "fresh.csv": str(fresh / "out.csv"),
        "fresh_dir": str(fresh / "report"),
        "fresh_no_suffix": str(fresh / "out"),
        "missing_dir": str(fresh / "no" / "such" / "dir" / "out.png"),
        "directory": str(root / "a_directory"),
        "existing": str(root / "existing.csv"),
        "empty_string": "",
        "proc": "/proc/x.png",
        "proc_dir": "/proc/x",
        # Root writes through chmod 0o500, so run as root this is a fresh place like any other;
        # the other unwritable places above still are unwritable.
        "unwritable": str(root / "read_only" / "out.png"),
        "under_a_file": str(root / "existing.csv" / "out.png"),
    }


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    inputs = _input_files(root)
    (root / "read_only").mkdir()
    (root / "read_only").chmod(0o500)
    bundled = {p: p.read_bytes() for p in DATA.iterdir() if p.is_file()}
    yield root, inputs
    (root / "read_only").chmod(0o700)
    # The fuzz works on copies: the repository's bundled data is never written.
    assert {p: p.read_bytes() for p in bundled} == bundled


def _kind(param: click.Parameter) -> str:
    if param.name == "out":
        return "out"
    if isinstance(param.type, click.Path) or isinstance(param, click.Argument):
        return "in"  # every positional argument of breakeven names input files
    if getattr(param, "is_flag", False):
        return "flag"
    return "value"


def _values(param: click.Parameter) -> st.SearchStrategy[str]:
    kind = _kind(param)
    if kind == "out":
        return st.sampled_from([f"<out:{o}>" for o in OUTPUTS])
    if kind == "in":
        return st.sampled_from([f"<in:{i}>" for i in INPUTS])
    good = GOOD.get(param.name or "", [])
    if isinstance(param.type, click.Choice):
        good = [*good, *map(str, param.type.choices)]
    hostile = st.sampled_from(HOSTILE)
    return st.one_of(hostile, hostile, st.sampled_from(good or ["1"]), st.text(max_size=12))


def _parse(command: click.Command, text: str) -> dict[str, list[str]]:
    """A valid invocation as {parameter name: its arguments}, in order."""
    by_opt = {
        opt: p
        for p in command.params
        if isinstance(p, click.Option)
        for opt in (*p.opts, *p.secondary_opts)  # --no-dedup too
    }
    positional = [p for p in command.params if isinstance(p, click.Argument)]
    words, out = text.split(), {}
    while words:
        word = words.pop(0)
        param = by_opt.get(word)
        if param is None:  # the next positional argument (one taking any number keeps them)
            if positional[0].nargs == 1 and positional[0].name in out:
                positional.pop(0)
            out.setdefault(positional[0].name, []).append(word)
        elif getattr(param, "is_flag", False):
            out[param.name] = [word]
        else:
            out[param.name] = [word, words.pop(0)]
    return out


def _mutated(command: click.Command, base: dict[str, list[str]], draw: Any) -> dict[str, list[str]]:
    """``base`` with a few parameters given hostile values, added or left out."""
    args = dict(base)
    for _ in range(draw(st.integers(0, 3))):
        param = draw(st.sampled_from(command.params))
        if draw(st.integers(0, 5)) == 0 or (
            getattr(param, "is_flag", False) and param.name in args
        ):
            args.pop(param.name, None)  # left out
        elif getattr(param, "is_flag", False):
            args[param.name] = [param.opts[-1]]
        elif isinstance(param, click.Argument):
            count = draw(st.integers(1, 3)) if param.nargs == -1 else 1
            args[param.name] = [draw(_values(param)) for _ in range(count)]
        else:
            args[param.name] = [param.opts[-1], draw(_values(param))]
    return args


@st.composite
def _arguments(draw: Any, path: tuple[str, ...]) -> list[str]:
    """An argument list for one command: a valid invocation, a few of its arguments changed."""
    command = COMMANDS[path]
    base = _parse(command, draw(st.sampled_from(VALID[path])))
    args = _mutated(command, base, draw)
    if any(p.name == "as_json" for p in command.params) and draw(st.booleans()):
        args["as_json"] = ["--json"]
    fixed = {("bench",): BENCH_FIXED, ("sweep",): SWEEP_FIXED, ("demo",): SWEEP_FIXED}.get(path, [])
    return [
        *path,
        *fixed,
        *(a for part in args.values() for a in part),
        *SERVER_FIXED.get(path, []),
    ]


class Hang(Exception):
    """An invocation ran past its time limit: a hang, or work without a bound."""


def _no_constant(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def resolve(
    args: list[str],
    inputs: dict[str, str],
    outputs: dict[str, str],
    urls: dict[str, str] | None = None,
) -> list[str]:
    out = []
    for a in args:
        if a.startswith("<in:"):
            out.append(inputs[a[4:-1]])
        elif a.startswith("<out:"):
            out.append(outputs[a[5:-1]])
        elif a.startswith("<url:"):
            out.append((urls or {}).get(a[5:-1], "http://127.0.0.1:9"))
        else:
            out.append(a)
    return out


def secret_pieces() -> set[str]:
    """Every 8 characters of a secret given (a cut can fall inside one), and the Base64 of a
    URL's user and password (a Basic header echoed)."""
    pieces = {s[i : i + 8] for s in SECRETS for i in range(len(s) - 7)}
    return pieces | {base64.b64encode(f"user:{PASSWORD}".encode()).decode()}


def shown_secrets(text: str, written: Path | None) -> list[str]:
    """The pieces of a secret in ``text`` or in any file under ``written``."""
    texts = [text]
    if written is not None:
        for path in written.rglob("*"):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    return sorted({p for p in secret_pieces() for t in texts if p in t})


def json_asked(args: list[str]) -> bool:
    """Whether ``--json`` is given as the flag (not as the value of an option before it)."""
    path = next((p for p in COMMANDS if tuple(args[: len(p)]) == p), ())
    command = COMMANDS.get(path)
    takes_value = (
        {
            opt
            for p in command.params
            if isinstance(p, click.Option) and not p.is_flag
            for opt in p.opts
        }
        if command
        else set()
    )
    words = iter(args[len(path) :])
    for word in words:
        if word == "--json":
            return True
        if word in takes_value:
            next(words, None)
    return False


def exit_codes(args: list[str]) -> tuple[int, ...]:
    """The exit codes allowed: 0 and 2, and 1 where the command documents it for a flag."""
    path = next((p for p in EXIT_ONE if tuple(args[: len(p)]) == p), None)
    return (0, 1, 2) if path is not None and EXIT_ONE[path] in args else (0, 2)


def invoke(
    args: list[str], seconds: float = 20.0, written: Path | None = None
) -> tuple[Any, list[str]]:
    """Run the command line on ``args``: its result, and what is wrong with it (empty: nothing).
    ``written``: where its output files go, each checked for secrets."""

    def alarm(signum, frame):
        raise Hang(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        r = run_cli(args, env={"BREAKEVEN_FUZZ_KEY": KEY})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    found = []
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        e = r.exception
        found.append(f"uncaught {type(e).__name__}: {str(e)[:200]}")
    if r.exit_code not in exit_codes(args):
        found.append(f"exit code {r.exit_code}")
    if "Traceback" in r.output:
        found.append("a traceback in the output")
    if r.exit_code == 2:
        last = r.stderr.rstrip("\n").rsplit("\n", 1)[-1]
        if not last.startswith("Error: "):
            found.append(f"exit 2 does not end with one 'Error: ...' line: {last[:200]!r}")
    if r.exit_code == 0 and json_asked(args):
        try:
            json.loads(r.stdout, parse_constant=_no_constant)
        except ValueError as e:
            found.append(f"--json output is not strict JSON: {e}")
    shown = shown_secrets(r.output, written)
    if shown:
        found.append(f"a secret shown: {shown[:3]}")
    return r, found


# Faults that wait out a time limit are drawn less: they only cost time.
SLOW = {"stall", "stall_headers", "stall_stream", "drip", "huge_event"}


def _hostilities() -> st.SearchStrategy[dict[str, Any]]:
    """A llama.cpp-like server's behaviour: well, or with any of tests/hostile_server.py's
    faults in its readiness, stream, /metrics, /props and timings."""
    stream = [m for m in (*STREAM_MODES, *FUZZ_STREAM_MODES, *ECHO_STREAM_MODES) if m not in SLOW]
    models = [*MODELS_MODES, *ECHO_MODELS_MODES]
    return st.fixed_dictionaries(
        {
            "models": st.one_of(st.none(), st.none(), st.sampled_from(models)),
            "stream": st.one_of(st.none(), st.sampled_from(stream), st.sampled_from(sorted(SLOW))),
            "fault_every": st.integers(1, 3),
            "metrics": st.one_of(st.none(), st.none(), st.sampled_from(METRICS_MODES)),
            "echo_route": st.one_of(st.none(), st.none(), st.sampled_from(ECHO_ROUTES)),
            "llamacpp_fault": st.one_of(st.none(), st.sampled_from(LLAMACPP_FAULTS)),
        }
    )


def _skeleton(query: str) -> str:
    """A PromQL query without its label matchers and rate() windows."""
    return re.sub(r"\[[^\]]*\]", "[]", re.sub(r"\{[^}]*\}", "", query))


QUANTITIES = {
    _skeleton(query): (engine, name)
    for engine in FLEET_ENGINES
    for name, query in queries(engine, "", "1m").items()
}


def _vllm_answer(form: dict[str, str], changed: dict[str, str]) -> dict[str, Any]:
    """A range query's answer: a vLLM server steady at :data:`STEADY` but for ``changed``, at
    every step asked for; no series of another engine."""
    engine, name = QUANTITIES.get(_skeleton(form.get("query", "")), ("", ""))
    try:
        start, end, step = (float(form[key]) for key in ("start", "end", "step"))
        steps = min(round((end - start) / step) + 1, 2000)
    except (KeyError, ValueError, ZeroDivisionError, OverflowError):
        return {"status": "error", "errorType": "bad_data", "error": "bad range"}
    result = []
    if engine == "vllm":
        value = changed.get(name, STEADY[name])
        values = [[start + j * step, value] for j in range(steps)]
        result = [{"metric": {"instance": "a:8000", "model_name": "m"}, "values": values}]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.fixture(scope="module")
def servers():
    """A llama.cpp-like server and a fake Prometheus, for the whole fuzz; each example sets
    how they answer."""
    current: dict[str, Any] = {"answer": (200, b"{}", False), "echo": False, "vllm": None}

    def respond(handler, form) -> None:
        if current["vllm"] is not None:  # vLLM's quantities, drawn; no other engine's
            send(handler, json.dumps(_vllm_answer(form, current["vllm"])).encode())
            return
        if current["echo"]:  # an error that echoes the bearer token, at both ends
            header = handler.headers.get("Authorization", "")
            text = "x" * 130 + header + "y" * 400 + header + "z" * 120
            body = json.dumps({"status": "error", "errorType": header[:30], "error": text})
            send(handler, body.encode(), 401)
            return
        status, body, zipped = current["answer"]
        headers = [("Content-Encoding", "gzip")] if zipped else []
        send(handler, gzip.compress(body) if zipped else body, status, headers)

    with HostileServer(Hostility(llamacpp=True)) as llama, FakePrometheus(respond) as prometheus:
        yield llama, prometheus, current
        llama.httpd.RequestHandlerClass.hostility.stop.set()


def _serve(servers: Any, data: Any, args: list[str]) -> dict[str, str]:
    """Sets how the servers answer this example, and the addresses of ``args``' placeholders:
    with a password or without; the servers echo the secrets ``args`` gives, if drawn so."""
    llama, prometheus, current = servers
    password = data.draw(st.booleans(), label="a password in the URL")
    given = (KEY,) if "BREAKEVEN_FUZZ_KEY" in args else ()
    given += (PASSWORD,) if password else ()
    echo = data.draw(st.booleans(), label="the servers echo the secrets") and given
    faults = data.draw(_hostilities(), label="the llama.cpp-like server")
    previous = llama.httpd.RequestHandlerClass.hostility
    llama.httpd.RequestHandlerClass.hostility = Hostility(**faults, llamacpp=True, echo=echo or ())
    previous.stop.set()  # every wait of the last example ends
    current["answer"] = data.draw(prometheus_answers(), label="Prometheus answers")
    current["vllm"] = data.draw(
        st.one_of(st.none(), st.dictionaries(st.sampled_from(sorted(STEADY)), VALUE_STRINGS)),
        label="Prometheus answers vLLM's quantities, these ones changed",
    )
    current["echo"] = bool(echo) and data.draw(st.booleans(), label="Prometheus echoes")
    userinfo = f"user:{PASSWORD.replace('#', '%23')}@" if password else ""
    urls = {"llamacpp": llama.url, "prometheus": prometheus.url, "closed": "http://127.0.0.1:9"}
    return {name: url.replace("http://", "http://" + userinfo) for name, url in urls.items()}


def _outcome(r: Any, problems: list[str]) -> str:
    return problems[0].split(":")[0] if problems else f"exit {r.exit_code}"


@pytest.fixture(scope="module", autouse=True)
def _counts():
    """A one-off run (BREAKEVEN_FUZZ_CLI set) prints its counts at the end (with -s)."""
    yield
    if "BREAKEVEN_FUZZ_CLI" in os.environ:
        commands = sorted({c for c, _ in FOUND})
        print(f"\ncommand fuzz, {sum(FOUND.values())} invocations:")
        for command in commands:
            counts = {o: n for (c, o), n in sorted(FOUND.items()) if c == command}
            print(f"  {command}: {counts}")


@pytest.mark.parametrize("path", FUZZED, ids=" ".join)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_command_survives_hostile_arguments(places, servers, monkeypatch, path, data):
    root, inputs = places
    # A FIFO without a writer is refused once sources.FIFO_WRITER_WAIT_S has passed; a short
    # wait keeps the fuzz fast (tests/test_hostile_input.py tests the wait itself).
    monkeypatch.setattr(sources, "FIFO_WRITER_WAIT_S", 0.05)
    args = data.draw(_arguments(path), label="arguments")
    urls = _serve(servers, data, args) if any(a.startswith("<url:") for a in args) else {}
    fresh = Path(tempfile.mkdtemp(dir=root))
    try:
        r, problems = invoke(resolve(args, inputs, _output_paths(fresh, root), urls), written=fresh)
    finally:
        shutil.rmtree(fresh)
    FOUND[" ".join(path), _outcome(r, problems)] += 1
    event(_outcome(r, problems))
    assert not problems, problems


def test_the_fuzz_reaches_every_command():
    # A new command is fuzzed without being named here; only bench is left to its own tests.
    assert set(FUZZED) | NOT_FUZZED == set(COMMANDS) == set(VALID)
    assert ("plot", "surface") in FUZZED and ("ingest",) in FUZZED
