"""Ingest's encodings (a byte-order mark says UTF-16 or UTF-8), its summary per run and
concurrency, and check's ``unnamed_pairing`` flag.

Every file read here is a real fixture from tests/data/engines (its source is named in its
``#`` header or its .source.txt); the encoding tests re-encode those fixtures, as Windows
PowerShell's ``docker logs x > server.log`` writes them (UTF-16 LE with its mark), so the
records must be the original file's.
"""

import bz2
import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from cli_checks import run_cli

from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.ingest import ingest, iter_frames
from breakeven.measurements.check import check, check_file

DATA = Path(__file__).parent / "data" / "engines"
VLLM_LOG = DATA / "vllm_cpu_v0320_server_draft_model_k3.txt"
LLAMACPP_LOG = DATA / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
VLLM_BENCH_JSON = DATA / "vllm_cpu_v0320_bench_serve_draft_model_k3.json"
SGLANG_SWEEP = DATA / "sglang_bench_serving_accept_length_dsv3_mi300x.txt"
SGLANG_EAGLE3 = DATA / "sglang_decode_batch_issue11948_eagle3_accept_len_rate.txt"
SGLANG_PLAIN = DATA / "sglang_decode_batch_issue2271_no_spec_2024.txt"

BOMS = {
    "utf-16-le": b"\xff\xfe",
    "utf-16-be": b"\xfe\xff",
    "utf-8": b"\xef\xbb\xbf",
}
CITED = ("source", "launch_id")  # file:line citations: the only fields that name the file


def comparable(path):
    """The records of ``path``, its name taken out of their citations (line numbers kept)."""
    result = ingest([path])
    assert not result.problems, result.problems
    return uncited(result.records, path)


def re_encoded(tmp_path, original, encoding, compress=None):
    """``original`` re-encoded in ``encoding`` with its byte-order mark (then compressed)."""
    data = BOMS[encoding] + original.read_text(encoding="utf-8").encode(encoding)
    if compress is not None:
        data = compress(data)
    path = tmp_path / f"{original.stem}.{encoding}{'.z' if compress else ''}.log"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "original", [VLLM_LOG, LLAMACPP_LOG, VLLM_BENCH_JSON], ids=lambda p: p.stem
)
@pytest.mark.parametrize("encoding", list(BOMS))
def test_a_byte_order_mark_gives_the_original_records(tmp_path, original, encoding):
    expected = comparable(original)
    assert expected  # the fixture gives records, so equality says something
    assert comparable(re_encoded(tmp_path, original, encoding)) == expected


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress], ids=["gzip", "bzip2"])
@pytest.mark.parametrize("original", [VLLM_LOG, LLAMACPP_LOG], ids=lambda p: p.stem)
def test_compressed_utf16_gives_the_original_records(tmp_path, original, compress):
    path = re_encoded(tmp_path, original, "utf-16-le", compress)
    assert comparable(path) == comparable(original)


def uncited(records, path):
    return [
        {**r, **{c: r[c].replace(str(path), "") for c in CITED if r[c] is not None}}
        for r in records
    ]


def test_utf16_streams_in_blocks(tmp_path):
    # Small blocks: lines cut across blocks, and across the transcoder's reads, still join.
    path = re_encoded(tmp_path, VLLM_LOG, "utf-16-le")
    problems = []
    frames = list(iter_frames([str(path)], problems, block_bytes=977))
    assert not problems
    assert uncited([r for f in frames for r in f.to_dicts()], path) == comparable(VLLM_LOG)


def test_utf16_on_standard_input(tmp_path):
    path = re_encoded(tmp_path, VLLM_LOG, "utf-16-be")
    out = run_cli(["ingest", "-", "--json"], input=path.read_bytes())
    assert out.exit_code == 0, out.output
    assert uncited(json.loads(out.output), "-") == comparable(VLLM_LOG)


def test_utf16_without_a_mark_is_refused_in_one_line(tmp_path):
    # No mark: not guessed.  Its NUL bytes stop the reading, with a problem naming the file,
    # the line and what to do, and exit code 2.
    path = tmp_path / "server.log"
    path.write_bytes(VLLM_LOG.read_text(encoding="utf-8").encode("utf-16-le"))
    out = run_cli(["ingest", str(path)])
    assert out.exit_code == 2
    (problem,) = [line for line in out.output.splitlines() if line.startswith("Problem:")]
    assert problem.startswith(f"Problem: {path}, line 1: binary data (a NUL byte)")
    assert "UTF-16 without a byte-order mark" in problem
    assert "Traceback" not in out.output


def summary_lines(*paths):
    out = run_cli(["ingest", *map(str, paths), "--wide"])
    assert out.exit_code == 0, out.output
    return out.output.splitlines()


def test_the_summary_keeps_concurrencies_apart():
    # The SGLang cookbook's bench_serving tables: concurrency 1 at 1000 / 25.04 ms = 39.94
    # tok/s and concurrency 100 at 1000 / 214.73 ms = 4.66 tok/s, each its own line (their
    # mean, 22.30, is no one's rate).
    lines = summary_lines(SGLANG_SWEEP)
    rows = [line.split() for line in lines if "sglang_bench_serving_table " in line]
    assert len(rows) == 2
    by_concurrency = {row[2]: row for row in rows}
    assert set(by_concurrency) == {"1", "100"}
    assert "39.94" in by_concurrency["1"] and "4.66" in by_concurrency["100"]
    assert by_concurrency["1"][1] == by_concurrency["100"][1] == "sglang"  # the run: its label
    # One record each: its rate, said so.
    assert all(" ".join(row).count("1 rate") == 1 for row in rows)
    assert not any("22.30" in line for line in lines)


def test_the_summary_is_a_ratio_of_sums_where_tokens_are_known():
    # vllm bench serve --save-detailed: 16 requests at concurrency 1, each with its output
    # length, so tok_s is their decoded tokens over their decode time.
    result = ingest([VLLM_BENCH_JSON])
    decoded = [r["completion_tokens"] - 1 for r in result.records]
    seconds = [d / r["tok_s"] for d, r in zip(decoded, result.records, strict=True)]
    pooled = sum(decoded) / sum(seconds)
    mean = sum(r["tok_s"] for r in result.records) / len(result.records)
    assert f"{pooled:.2f}" != f"{mean:.2f}"
    (row,) = [line for line in summary_lines(VLLM_BENCH_JSON) if " vllm_bench_serve " in line]
    assert f" {pooled:.2f} " in row and "tokens/time" in row and f" {mean:.2f} " not in row


def test_the_summary_pools_accept_len_within_one_concurrency_only():
    # vLLM 0.3.20's server log: two intervals at one running request, 104 and 143 drafts,
    # 256 and 340 accepted: 1 + 596 / 247 = 3.413 (the mean of their ratios says 3.420); its
    # other intervals print no running count, and stay on a line of their own.
    lines = summary_lines(VLLM_LOG)
    rows = [line.split() for line in lines if " vllm_v1 " in line]
    by_concurrency = {row[2]: row for row in rows}
    assert set(by_concurrency) == {"-", "1"}
    assert "3.413" in by_concurrency["1"] and "3.420" not in by_concurrency["1"]


def ingested(tmp_path, *paths, extra=()):
    out = tmp_path / "runs.csv"
    r = run_cli(["ingest", *map(str, paths), *extra, "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


def test_check_flags_a_baseline_paired_from_another_unnamed_file(tmp_path):
    # An EAGLE3 run's log (issue 11948) and a plain run's (issue 2271, Llama-3.1-8B), neither
    # naming its model or hardware: check pairs them by concurrency 1 alone.
    runs = ingested(tmp_path, SGLANG_EAGLE3, SGLANG_PLAIN)
    result = check_file(str(runs))
    (c,) = result.comparisons
    assert c.model == "" and c.hardware == ""
    assert "unnamed_pairing" in c.flags
    (flag,) = [f for f in result.flags if f.code == "unnamed_pairing"]
    assert str(SGLANG_EAGLE3) in flag.message and str(SGLANG_PLAIN) in flag.message
    assert "--model" in flag.message and "--hardware" in flag.message
    assert set(c.baseline_lines) <= set(flag.lines) and set(c.lines) <= set(flag.lines)
    out = run_cli(["check", str(runs)])
    assert "[unnamed_pairing]" in out.output


def test_check_says_nothing_of_it_where_the_model_and_hardware_are_named(tmp_path):
    runs = ingested(
        tmp_path, SGLANG_EAGLE3, SGLANG_PLAIN, extra=("--model", "m", "--hardware", "h")
    )
    (c,) = check_file(str(runs)).comparisons
    assert c.model == "m" and c.baseline_runs == 1
    assert "unnamed_pairing" not in c.flags


def test_a_pair_the_caller_named_is_not_flagged(tmp_path):
    # compare's BASELINE SPEC: the user named the pair (check's named_pairs).
    runs = ingested(tmp_path, SGLANG_EAGLE3, SGLANG_PLAIN)
    data, _ = read_measurements(str(runs))
    assert isinstance(data, pd.DataFrame)
    named = check(data, named_pairs=True)
    (c,) = named.comparisons
    assert c.baseline_runs == 1 and "unnamed_pairing" not in c.flags
    assert not [f for f in named.flags if f.code == "unnamed_pairing"]
    assert "unnamed_pairing" in check(data).comparisons[0].flags
