"""bench --prompts with workload categories: the prompts file's layouts (a "prompt" per JSON row,
Spec-Bench's and SPEED-Bench's "turns"), hostile files refused in one line, and each request's
category carried into bench's rows and read back by check's reader."""

import asyncio
import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from cli_checks import run_cli
from fake_server import Behaviour, FakeServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven import BreakevenError
from breakeven.bench.config import Config
from breakeven.bench.prompts import (
    SPEED_BENCH_PLACEHOLDER,
    PromptRow,
    read_prompt_rows,
    read_prompts,
)
from breakeven.bench.rows import _LAUNCH_COLUMNS, BENCH_COLUMNS
from breakeven.bench.session import Bench
from breakeven.iotools.csvfile import read_measurements
from breakeven.jobs.measure import bench_config

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC_BENCH = HERE / "data" / "published" / "spec_bench_question_excerpt.jsonl"
SAMPLE = ROOT / "data" / "prompts_by_category.jsonl"


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def bench(*args):
    return run_cli(["bench", *map(str, args)])


# The reader, on each layout.


def test_plain_lines_and_prompt_rows_read_as_before(tmp_path):
    path = write(tmp_path / "p.txt", 'first prompt\n\n  second, indented\n{"prompt": "third"}\n')
    assert read_prompts(path) == ["first prompt", "  second, indented", "third"]
    assert read_prompt_rows(path) == [
        PromptRow("first prompt", ""),
        PromptRow("  second, indented", ""),
        PromptRow("third", ""),
    ]


def test_a_category_beside_the_prompt_and_rows_without_one_have_none(tmp_path):
    path = write(
        tmp_path / "p.jsonl",
        '{"prompt": "def f(x):", "category": "code"}\n'
        '{"prompt": "hello there"}\n'
        '{"category": "math", "prompt": "2 + 2 = ?"}\n'
        '{"prompt": "no category either", "category": null}\n'
        "a plain line\n",
    )
    assert [tuple(r) for r in read_prompt_rows(path)] == [
        ("def f(x):", "code"),
        ("hello there", ""),
        ("2 + 2 = ?", "math"),
        ("no category either", ""),
        ("a plain line", ""),
    ]
    prompts = read_prompts(path)  # what bench_config and other callers take: a list of str
    assert prompts == [
        "def f(x):",
        "hello there",
        "2 + 2 = ?",
        "no category either",
        "a plain line",
    ]
    assert prompts.categories == ("code", "", "math", "", "")


def test_spec_bench_question_jsonl_sends_the_first_turn_with_its_category():
    rows = read_prompt_rows(str(SPEC_BENCH))
    assert [r.category for r in rows] == ["writing", "math", "coding", "translation", "qa"]
    assert rows[0].prompt.startswith("Compose an engaging travel blog post about a recent trip")
    assert "Hawaii" in rows[0].prompt and "Rewrite" not in rows[0].prompt  # the first turn only
    assert rows[3].prompt.startswith("Translate German to English: Pfandh\u00e4user")
    assert rows[4].prompt == "Who played anna in once upon a time?"


def test_the_speed_bench_layout_as_exported_to_json_lines(tmp_path):
    # SPEED-Bench's fields (huggingface.co/datasets/nvidia/SPEED-Bench, config qualitative):
    # question_id (a string), category, sub_category, turns, source, src_id, difficulty,
    # multiturn; as `datasets`' to_json writes them once prepare_data.py filled the turns in.
    speed = [
        {
            "question_id": "coding_0",
            "category": "coding",
            "sub_category": "python",
            "turns": ["Write a function that merges two sorted lists.", "Now make it lazy."],
            "source": "livecodebench/code_generation_lite",
            "src_id": "abc123",
            "difficulty": "medium",
            "multiturn": True,
        },
        {
            "question_id": "roleplay_3",
            "category": "roleplay",
            "sub_category": None,
            "turns": ["You are a ship's captain in a storm. Speak to your crew."],
            "source": "ZenMoore/RoleBench",
            "src_id": "x_1",
            "difficulty": None,
            "multiturn": False,
        },
    ]
    path = write(tmp_path / "speed.jsonl", "".join(json.dumps(r) + "\n" for r in speed))
    assert [tuple(r) for r in read_prompt_rows(path)] == [
        ("Write a function that merges two sorted lists.", "coding"),
        ("You are a ship's captain in a storm. Speak to your crew.", "roleplay"),
    ]


def test_the_bundled_sample_has_three_or_four_prompts_in_each_of_four_categories():
    counts = Counter(r.category for r in read_prompt_rows(str(SAMPLE)))
    assert set(counts) == {"code", "chat", "math", "writing"}
    assert all(3 <= n <= 4 for n in counts.values()), counts


# Hostile files: one line naming --prompts, the file and line, the value and what was expected.


@pytest.mark.parametrize(
    "body, line, expected",
    [
        ('{"prompt": "ok"}\n{"prompt": "cut\n', 2, r'not JSON \(.*\): "{\\"prompt\\": \\"cut"'),
        ('{"prompt": "a", "category": 7}\n', 1, r'"category" is 7, expected a string'),
        ('{"prompt": "a", "category": ["code"]}\n', 1, r'"category" is \["code"\], expected'),
        ('{"prompt": "a", "category": {"x": 1}}\n', 1, r'"category" is {"x": 1}, expected a str'),
        ('\n{"prompt": 3}\n', 2, r'"prompt" is 3, expected a string'),
        ('{"turns": []}\n', 1, r'"turns" is \[\], expected a list of strings'),
        ('{"turns": [{"role": "user"}]}\n', 1, r'"turns" is \[{"role": "user"}\], expected'),
        ('{"question": "no prompt"}\n', 1, r'{"question": "no prompt"} has no "prompt" or "turns"'),
        (
            json.dumps({"category": "math", "turns": [SPEED_BENCH_PLACEHOLDER + "\n\n{question}"]}),
            1,
            r'"turns" holds SPEED-Bench\'s placeholder ".*", expected the prompt: .*prepare_data',
        ),
        ('{"prompt": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", 1, "JSON nested too deep"),
    ],
)
def test_a_malformed_row_is_one_line_naming_the_flag_file_line_and_value(
    tmp_path, body, line, expected
):
    path = write(tmp_path / "p.jsonl", body)
    with pytest.raises(BreakevenError, match=rf"^prompts: '.*p\.jsonl', line {line}: {expected}"):
        read_prompt_rows(path)
    r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--prompts", path)
    assert r.exit_code == 2
    (said,) = r.output.splitlines()
    assert said.startswith("Error: --prompts: ") and f"p.jsonl', line {line}: " in said


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", "holds no prompts"),
        (b"\n  \n\n", "holds no prompts"),
        (b'{"prompt": "a"}\0\n', r"is binary data \(a NUL byte\); expected text"),
        (b"PAR1\x15\x04\x15\x10" + bytes(range(256)), r"is a Parquet file .*write_ndjson"),
        (b'{"prompt": "caf\xe9"}\n', r"is not UTF-8 text \(byte 15\)"),
    ],
)
def test_an_empty_binary_or_undecodable_file_is_refused_in_one_line(tmp_path, data, expected):
    path = tmp_path / "p.jsonl"
    path.write_bytes(data)
    with pytest.raises(BreakevenError, match=rf"^prompts: '.*p\.jsonl' {expected}"):
        read_prompt_rows(str(path))
    r = bench("--url", "http://127.0.0.1:9", "--label", "t", "--prompts", path)
    assert r.exit_code == 2
    (said,) = r.output.splitlines()
    assert said.startswith("Error: --prompts: ")


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.dictionaries(
                st.sampled_from(["prompt", "turns", "category", "question_id", "x"]),
                _JSONISH,
                max_size=4,
            ).map(json.dumps),
            st.binary(max_size=12).map(lambda b: b.decode("latin-1")),
        ),
        max_size=6,
    )
)
def test_any_file_gives_rows_or_one_breakeven_error(tmp_path, lines):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    try:
        got = read_prompt_rows(str(path))
    except BreakevenError as e:
        message = str(e)
        assert message.startswith("prompts: ") and "\n" not in message, message
        return
    assert got and all(isinstance(p, str) and isinstance(c, str) for p, c in got)


def test_config_categories_must_match_the_prompts():
    with pytest.raises(BreakevenError, match=r"^categories: expected one category string per"):
        Config(url="http://h:1", label="t", prompts=("a", "b"), categories=("code",)).check()
    config = Config(url="http://h:1", label="t", prompts=("a", "b"), categories=("code", ""))
    assert [config.prompt_at(i) for i in range(3)] == [("a", "code"), ("b", ""), ("a", "code")]


# bench: each request's row carries its prompt's category.

CATEGORIES = {"say one": "code", "say two": "chat", "say three": "math", "say four": ""}


def _prompts_file(tmp_path):
    lines = [
        json.dumps({"prompt": p, "category": c} if c else {"prompt": p})
        for p, c in CATEGORIES.items()
    ]
    return write(tmp_path / "prompts.jsonl", "\n".join(lines) + "\n")


@pytest.fixture
def sent(monkeypatch):
    """The prompt of each request, in the order the requests completed (the order their rows
    are written: nothing awaits between a request's end and its row)."""
    prompts = []
    original = Bench.one_request

    async def recording(self, client, prompt, level=None, start=None):
        result = await original(self, client, prompt, level, start)
        prompts.append(prompt)
        return result

    monkeypatch.setattr(Bench, "one_request", recording)
    return prompts


def test_each_row_carries_its_prompts_category_into_the_csv(tmp_path, sent):
    out = tmp_path / "runs.csv"
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = bench(
            "--url",
            server.url,
            "--label",
            "t",
            "--max-tokens",
            6,
            "--requests",
            8,
            "--concurrency",
            1,
            4,
            "--prompts",
            _prompts_file(tmp_path),
            "--out",
            out,
        )
    assert r.exit_code == 0, r.output
    with open(out, newline="") as f:
        assert (
            tuple(next(csv.reader(f))) == BENCH_COLUMNS
            and BENCH_COLUMNS[len(_LAUNCH_COLUMNS)] == "category"
        )
    got = rows(out)
    requests = [row for row in got if row["origin"] == "client"]
    assert len(requests) == len(sent) == 16
    assert [row["category"] for row in requests] == [CATEGORIES[p] for p in sent]
    assert Counter(row["category"] for row in requests) == {"code": 4, "chat": 4, "math": 4, "": 4}
    assert all(row["category"] == "" for row in got if row["origin"] == "server")
    # check's reader (check, fit, compare) keeps the column, a request's category per row.
    data, _ = read_measurements(out)
    client = data[data["origin"] == "client"]
    assert [c if isinstance(c, str) else "" for c in client["category"]] == [
        CATEGORIES[p] for p in sent
    ]
    assert run_cli(["check", str(out)]).exit_code == 0  # the column is welcome


def test_the_python_api_rows_carry_the_category(tmp_path, sent):
    written = []
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        config, _ = bench_config(
            url=server.url,
            label="t",
            concurrency=(2,),
            prompts=_prompts_file(tmp_path),
            requests=6,
            max_tokens=6,
        )
        asyncio.run(Bench(config).run(written.append))
    requests = [row for row in written if row["origin"] == "client"]
    assert [row["category"] for row in requests] == [CATEGORIES[p] for p in sent]
    assert json.loads(json.dumps(requests))[0]["category"] == CATEGORIES[sent[0]]


def test_rows_appended_to_a_bench_csv_of_before_categories_keep_its_columns(tmp_path):
    out = tmp_path / "old.csv"
    out.write_text(",".join(_LAUNCH_COLUMNS) + "\n")
    with FakeServer(Behaviour(seconds_per_token=0.001)) as server:
        r = bench(
            "--url",
            server.url,
            "--label",
            "t",
            "--max-tokens",
            6,
            "--requests",
            2,
            "--prompts",
            _prompts_file(tmp_path),
            "--out",
            out,
        )
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(_LAUNCH_COLUMNS)
    assert all(len(row) == len(_LAUNCH_COLUMNS) for row in rows(out))
