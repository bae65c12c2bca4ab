"""Engine logs' launch lines: every row after one carries its launch (``launch_id``, cited as
``<file>:<line>`` like ``source``), ``launched_at``, its settings as ``env`` (secrets as
``***``) and ``env_from`` ``log``; a restart starts another launch; ``--year`` dates them."""

import json
from pathlib import Path

from cli_checks import run_cli

from breakeven.iotools import sources
from breakeven.iotools.ingest import ingest
from breakeven.iotools.runs import parse_run, read_run

DATA = Path(__file__).parent / "data" / "engines"
VLLM = DATA / "vllm_cpu_v0320_server_draft_model_k3.txt"  # a real vLLM 0.32 CPU server log
VLLM_NGRAM = DATA / "vllm_cpu_v0320_server_ngram_k3.txt"
LLAMACPP = DATA / "llamacpp_server_lv4_launch_lines_this_suite.txt"


def line_of(path, literal):
    """The number of the first line of ``path`` holding ``literal``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if literal in line:
            return number
    raise AssertionError(f"{literal!r} not in {path}")


def joined(tmp_path, *paths):
    """Real logs one after another in one file, as a process manager appending a restarted
    server's output to one log writes them (no line is changed)."""
    out = tmp_path / "server.log"
    out.write_text("".join(p.read_text() for p in paths))
    return out


class TestVllm:
    def test_rows_carry_non_default_args_and_the_engine_version_as_one_launch(self):
        rs = ingest([VLLM]).records
        args = line_of(VLLM, "non-default args:")
        assert rs and {r["launch_id"] for r in rs} == {f"{VLLM}:{args}"}
        assert {r["launched_at"] for r in rs} == {"12-02 00:34:15"}  # no year printed
        assert {r["env_from"] for r in rs} == {"log"}
        (env,) = {r["env"] for r in rs}
        pairs = env.split()
        assert "port=57457" in pairs and "max_model_len=1024" in pairs
        assert 'served_model_name=["tiny"]' in pairs  # a list: JSON without spaces
        assert "speculative_config.method=draft_model" in pairs  # a nested dict: flattened
        assert "speculative_config.num_speculative_tokens=3" in pairs
        assert pairs[-1] == "version=0.32.0"  # from the engine config line, folded in

    def test_a_restart_is_a_second_launch(self, tmp_path):
        log = joined(tmp_path, VLLM, VLLM_NGRAM)
        rs = ingest([log]).records
        first = line_of(VLLM, "non-default args:")
        second = len(VLLM.read_text().splitlines()) + line_of(VLLM_NGRAM, "non-default args:")
        launches = [r["launch_id"] for r in rs]
        assert set(launches) == {f"{log}:{first}", f"{log}:{second}"}
        assert launches == sorted(launches, key=lambda x: int(x.rsplit(":", 1)[1]))
        methods = {r["launch_id"]: r["env"] for r in rs}
        assert "speculative_config.method=draft_model" in methods[f"{log}:{first}"].split()
        assert "speculative_config.method=ngram" in methods[f"{log}:{second}"].split()
        assert {r["launched_at"] for r in rs} == {"12-02 00:34:15", "12-02 00:37:07"}

    def test_blocks_of_a_few_lines_give_the_same_launches(self, tmp_path, monkeypatch):
        log = joined(tmp_path, VLLM, VLLM_NGRAM)
        whole = [(r["source"], r["launch_id"], r["env"]) for r in ingest([log]).records]
        monkeypatch.setattr(sources, "BLOCK_BYTES", 300)
        small = [(r["source"], r["launch_id"], r["env"]) for r in ingest([log]).records]
        assert small == whole

    def test_rows_before_any_launch_line_have_none(self, tmp_path):
        text = VLLM.read_text().splitlines(keepends=True)
        args = line_of(VLLM, "non-default args:")
        engine = line_of(VLLM, "with config:")
        # The same log without its two launch lines.
        log = tmp_path / "no_launch.log"
        log.write_text("".join(t for i, t in enumerate(text, 1) if i not in (args, engine)))
        rs = ingest([log]).records
        assert rs and all(
            r["launch_id"] is None and r["env"] is None and r["env_from"] is None for r in rs
        )

    def test_secrets_never_reach_the_output(self, tmp_path):
        # CONSTRUCTED: the real non-default args line of VLLM with secrets added in the shape
        # vLLM before its redaction printed them ('api_key': a list, vllm/entrypoints/
        # serve/utils/api_utils.py log_non_default_args; a URL with a password).
        lines = VLLM.read_text().splitlines(keepends=True)
        args = line_of(VLLM, "non-default args:") - 1
        lines[args] = lines[args].replace(
            "'port': 57457,",
            "'port': 57457, 'api_key': ['sk-x'], 'hf_token': 'hf_secret1', "
            "'kv_events_config': {'endpoint': 'tcp://user:pw-secret2@10.0.0.1:5557'},",
        )
        log = tmp_path / "server.log"
        log.write_text("".join(lines))
        out = tmp_path / "runs.csv"
        result = run_cli(["ingest", str(log), "--out", str(out)])
        assert result.exit_code == 0, result.output
        as_json = run_cli(["ingest", str(log), "--json"])
        assert as_json.exit_code == 0, as_json.output
        for text in (out.read_text(), as_json.stdout, result.output):
            assert "sk-x" not in text and "hf_secret1" not in text and "pw-secret2" not in text
        env = json.loads(as_json.stdout)[0]["env"].split()
        assert "api_key=***" in env and "hf_token=***" in env
        assert "kv_events_config.endpoint=tcp://user:***@10.0.0.1:5557" in env

    def test_user_env_replaces_the_log_s(self):
        rs = ingest([VLLM], stamp={"env": "NCCL_P2P_DISABLE=1"}).records
        assert {(r["env"], r["env_from"]) for r in rs} == {("NCCL_P2P_DISABLE=1", None)}
        assert {r["launch_id"] for r in rs} == {f"{VLLM}:{line_of(VLLM, 'non-default args:')}"}


class TestYear:
    def test_year_makes_dates_iso(self):
        rs = ingest([VLLM], year=2026).records
        assert rs[0]["timestamp"] == "2026-12-02T00:35:14"
        assert {r["launched_at"] for r in rs} == {"2026-12-02T00:34:15"}

    def test_cli_year(self):
        result = run_cli(["ingest", str(VLLM), "--year", "2026", "--json"])
        assert result.exit_code == 0, result.output
        rs = json.loads(result.stdout)
        assert {r["launched_at"] for r in rs} == {"2026-12-02T00:34:15"}
        assert all(r["timestamp"].startswith("2026-12-02T") for r in rs)

    def test_bad_year_is_one_line_exit_2(self):
        for command in (
            ["ingest", str(VLLM), "--year", "1800"],
            ["compare", str(VLLM), str(VLLM_NGRAM), "--year", "2101"],
            ["ingest", str(VLLM), "--year", "soon"],
        ):
            result = run_cli(command)
            assert result.exit_code == 2, result.output
            (line,) = result.output.strip().splitlines()
            assert "--year" in line

    def test_library_refuses_a_bad_year(self):
        import pytest

        from breakeven.core.errors import BreakevenError

        with pytest.raises(BreakevenError, match="year"):
            ingest([VLLM], year=3000)

    def test_compare_reads_runs_with_the_year(self):
        from dataclasses import replace

        # A real vLLM 0.23 log whose windows give a decode rate (compare needs one).
        p2p = DATA / "vllm_engine_config__p2pbench_qwen36_mtp3_v0230.txt"
        data = read_run(replace(parse_run(str(p2p)), year=2026))
        assert set(data["launched_at"].astype(str)) == {"2026-06-16T20:45:51"}
        assert all(str(t).startswith("2026-06-16T") for t in data["timestamp"])
        assert set(data["launch_id"].astype(str)) == {f"{p2p}:{line_of(p2p, 'non-default')}"}


class TestLlamacpp:
    def test_build_and_threads_from_the_launch_lines(self):
        rs, problems = ingest([LLAMACPP]).records, ingest([LLAMACPP]).problems
        assert not problems and len(rs) == 2
        build = line_of(LLAMACPP, "common_params_print_info: build")
        assert {r["launch_id"] for r in rs} == {f"{LLAMACPP}:{build}"}
        assert {r["env"] for r in rs} == {"build=0 commit=unknown n_threads=1 n_threads_batch=1"}
        assert {r["env_from"] for r in rs} == {"log"}
        assert {r["launched_at"] for r in rs} == {None}  # time since start: no date
        assert all("127.0.0.1" not in r["env"] and "38475" not in r["env"] for r in rs)

    def test_a_restart_is_a_second_launch(self, tmp_path):
        log = joined(tmp_path, LLAMACPP, LLAMACPP)
        rs = ingest([log]).records
        build = line_of(LLAMACPP, "common_params_print_info: build")
        size = len(LLAMACPP.read_text().splitlines())
        assert [r["launch_id"] for r in rs] == [f"{log}:{build}"] * 2 + [
            f"{log}:{size + build}"
        ] * 2

    def test_older_build_line_and_listening_line(self, tmp_path):
        # CONSTRUCTED from the older formats: "build: %d (%s) with %s for %s" (common_init,
        # common/common.cpp), "system_info: n_threads = %d (n_threads_batch = %d) / %d | ..."
        # and "main: server is listening on http://..." (tools/server/server.cpp), before the
        # real print_timing lines of LLAMACPP.
        timing = [t for t in LLAMACPP.read_text().splitlines(keepends=True) if "print_timing" in t]
        log = tmp_path / "old.log"
        log.write_text(
            "build: 6432 (abc1234) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n"
            "system_info: n_threads = 2 (n_threads_batch = 2) / 4 | CPU : SSE3 = 1 | AVX = 1 |\n"
            "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
            + "".join(timing)
        )
        rs = ingest([log]).records
        assert rs and {(r["launch_id"], r["env"]) for r in rs} == {
            (f"{log}:1", "build=6432 commit=abc1234 n_threads=2 n_threads_batch=2")
        }
