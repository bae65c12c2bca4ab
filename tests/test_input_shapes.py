"""Issue 40: a file of the wrong shape is bad input, never an internal error.

Each input below gave an internal error (exit 3) or was read as something it is not; each is now
one line naming the flag and the file (and line), exit 2, or read as what it says:

- a number beyond a double (``1e400``, an integer of 400 digits) in a fit file or a schedule
  file (every JSON read through ``iotools.jsonsafe`` reads it as an infinity of its sign, which
  each reader refuses as not finite);
- a fit file, a schedule file and AIPerf's exports with any part of another type (a list where
  a text belongs, an object where a number belongs: hypothesis over a real file's parts);
- ``--server-env-from`` with a unit file whose ``Environment=`` leaves a quote open, or JSON
  that is not docker inspect's;
- ``--mix`` shares whose sum overflows (they are a mix: ``1e308,1e308`` is half and half).

``BREAKEVEN_FUZZ_SHAPES=N`` runs N examples of each fuzz (default 25).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from pathlib import Path

import pytest
from cli_checks import one_line_exit_2, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.core.errors import UnreadableInput
from breakeven.iotools.jsonsafe import loads_bounded, parse_json

HERE = Path(__file__).resolve().parent
PUBLISHED = HERE / "data" / "published"
ENGINES = HERE / "data" / "engines"
SPECFORGE = PUBLISHED / "specforge_issue339_qwen3_30b_a3b_eagle3_batch.csv"
CURVE = HERE.parent / "data" / "llama3_8b_decode_curve.csv"
AIPERF_SUMMARY = ENGINES / "aiperf_anud18_qwen3vl_30b_c1_summary_json.json"
AIPERF_RECORDS = ENGINES / "aiperf_anud18_qwen3vl_30b_c1_records_excerpt.jsonl"

EXAMPLES = int(os.environ.get("BREAKEVEN_FUZZ_SHAPES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Numbers beyond a double, as JSON writes them.
HUGE = ["1e400", "-1e400", "9" * 400, "-" + "9" * 400, "1" + "0" * 400 + ".5", "9" * 4300]
# What may stand where a part of a file belongs: each JSON type, and numbers beyond a double.
OTHER = ['["a", "b"]', '{"a": 1}', '"x"', "null", "true", "-1", "[]", "{}", *HUGE[:3]]


# --- the number reader ---------------------------------------------------------------------


@pytest.mark.parametrize("text", HUGE)
def test_a_number_beyond_a_double_reads_as_an_infinity_of_its_sign(text):
    expected = -math.inf if text.startswith("-") else math.inf
    assert loads_bounded(f'{{"x": {text}}}')["x"] == expected
    assert parse_json(f"[{text}]") == [expected]
    # Numbers a double holds read as before: an integer stays an integer.
    assert loads_bounded(f"[{'9' * 300}, 1e300]") == [int("9" * 300), 1e300]


def test_an_integer_past_pythons_4300_digits_is_refused_with_its_place():
    with pytest.raises(UnreadableInput, match="holds a number too long to read"):
        loads_bounded("[" + "9" * 5000 + "]")
    with pytest.raises(json.JSONDecodeError, match="number too long to read") as e:
        parse_json('{"a": ' + "9" * 5000 + "}")
    assert e.value.pos == 6


# --- fit and schedule files ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fit_json(tmp_path_factory):
    """A real fit file with groups, a forward surface (a MoE's) and a tree acceptance."""
    out = tmp_path_factory.mktemp("fit") / "fit.json"
    r = run_cli(["fit", SPECFORGE, "--experts", 128, "--top-k", 8, "--out", out])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["groups"] and data["surfaces"] and data["trees"]
    return data


@pytest.fixture(scope="module")
def schedule_json(tmp_path_factory):
    r = run_cli(
        [
            *("schedule", "--cost-curve", CURVE, "--accept-len-by-k", "2:2.36,3:2.79"),
            *("--draft-step-ms", "0.98", "--engine", "vllm", "--json"),
        ]
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _with(data, path, text):
    """``data`` as JSON text with the part at ``path`` written as ``text`` (raw JSON)."""
    marked = copy.deepcopy(data)
    part = marked
    for key in path[:-1]:
        part = part[key]
    part[path[-1]] = "__PART__"
    return json.dumps(marked).replace('"__PART__"', text)


def _parts(data, path=()):
    """Every part of a JSON value (the first two items of each list), as its path."""
    if path:
        yield path
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data[:2])
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        yield from _parts(value, (*path, key))


def _fit_commands(fit):
    return {
        "predict": ["predict", "--fit-file", fit, "--fit-group", 1, "-k", 3, "--accept-len", 2],
        "optimize": [
            *("optimize", "--fit-file", fit, "--fit-group", 1),
            *("--accept-len-by-k", "1.6,1.9,2.05"),
        ],
        "optimize --tree": ["optimize", "--tree", "--fit-file", fit],
        "batch": ["batch", "--fit-file", fit, "--accept-len", 2.55, "-k", 4, "--max-batch", 64],
        "schedule": ["schedule", "--fit-file", fit, "--engine", "sglang"],
        "check": ["check", SPECFORGE, "--fit-file", fit],
    }


# Where a fit file's number is read, and the commands that read it there.
FIT_NUMBERS = [
    (("groups", 0, "coefficients", "verify_base_ms"), ["predict", "optimize", "check"]),
    (("surfaces", 0, "coefficients", "weights_ms"), ["optimize --tree", "batch", "schedule"]),
    (("surfaces", 0, "moe", "experts"), ["optimize --tree", "batch", "schedule"]),
    (("surfaces", 0, "baseline_steps", 0, 0), ["optimize --tree", "batch", "schedule"]),
    (("trees", 0, "alpha"), ["optimize --tree"]),
]


@pytest.mark.parametrize("number", ["1e400", "9" * 400, "-" + "9" * 400])
@pytest.mark.parametrize(("path", "commands"), FIT_NUMBERS, ids=lambda p: "/".join(map(str, p)))
def test_a_fit_file_number_beyond_a_double_is_one_line(fit_json, tmp_path, path, commands, number):
    fit = tmp_path / "fit.json"
    fit.write_text(_with(fit_json, path, number))
    for name in commands:
        r = run_cli(_fit_commands(fit)[name])
        one_line_exit_2(r, "--fit-file", "'" + str(fit) + "'")


@pytest.mark.parametrize("number", ["1e400", "9" * 400, "-1e400"])
@pytest.mark.parametrize("key", ["batch", "k", "speedup"])
def test_a_schedule_file_number_beyond_a_double_is_one_line(schedule_json, tmp_path, key, number):
    schedule = tmp_path / "schedule.json"
    schedule.write_text(_with(schedule_json, ("by_batch", 0, key), number))
    r = run_cli(["check", HERE.parent / "data" / "case_study.csv", "--schedule", schedule])
    one_line_exit_2(r, "--schedule", "by_batch row")


def _refused_in_one_line_or_read(r, flag):
    """Exit 0 (the part is one the command does not need) or 2 with one line naming
    ``flag``; never an internal error, never a traceback."""
    assert r.exit_code in (0, 1, 2), r.output
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if r.exit_code == 2:
        one_line_exit_2(r, flag)


@FUZZ
@given(data=st.data())
def test_any_part_of_a_fit_file_of_another_type_is_one_line(fit_json, tmp_path, data):
    """Hypothesis over every part of a real fit file (groups, surfaces, trees), each written as
    another JSON type or a number beyond a double, read by each command that reads fit files."""
    path = data.draw(st.sampled_from(list(_parts(fit_json))), label="part")
    text = data.draw(st.sampled_from(OTHER), label="written as")
    name = data.draw(st.sampled_from(sorted(_fit_commands("F"))), label="command")
    fit = tmp_path / "fit.json"
    fit.write_text(_with(fit_json, path, text))
    _refused_in_one_line_or_read(run_cli(_fit_commands(fit)[name]), "--fit-file")


@pytest.mark.parametrize("text", ['["a", "b"]', "null", '"x"'])
def test_a_tree_plan_from_a_surface_without_a_held_out_error_is_not_pasted(
    fit_json, tmp_path, text
):
    """Found by the fuzz above: a surface's held_out_max_rel_error of another type is no error
    (NaN), which --json wrote as NaN and then refused as an "overflow" naming no flag.  It is
    null, and the tree is not pasted: nothing measured how far the fit is off."""
    fit = tmp_path / "fit.json"
    fit.write_text(_with(fit_json, ("surfaces", 0, "held_out_max_rel_error"), text))
    r = run_cli(["optimize", "--tree", "--fit-file", fit, "--json"])
    assert r.exit_code == 0, r.output
    answer = json.loads(r.stdout)
    assert answer["evidence"]["held_out_error"] is None and answer["pasted"] is False


@FUZZ
@given(data=st.data())
def test_any_part_of_a_schedule_file_of_another_type_is_one_line(schedule_json, tmp_path, data):
    path = data.draw(st.sampled_from(list(_parts(schedule_json))), label="part")
    text = data.draw(st.sampled_from(OTHER), label="written as")
    schedule = tmp_path / "schedule.json"
    schedule.write_text(_with(schedule_json, path, text))
    r = run_cli(["check", HERE.parent / "data" / "case_study.csv", "--schedule", schedule])
    _refused_in_one_line_or_read(r, "--schedule")


# --- AIPerf's exports ----------------------------------------------------------------------


def _problems_name_the_file(r, name, jsonl):
    """ingest's answer to a file of another shape: read (exit 0), or exit 2 with each problem
    one line naming the file (and its line, for JSON Lines); never an internal error."""
    assert r.exit_code in (0, 2), r.output
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if r.exit_code == 2:
        problems = [line for line in r.stderr.splitlines() if line.startswith("Problem: ")]
        assert problems, r.output
        where = re.escape(name) + (r", line \d+: " if jsonl else r"(, line \d+)?: ")
        assert all(re.match("Problem: " + where, line) for line in problems), r.output


@FUZZ
@given(data=st.data())
def test_an_aiperf_summary_with_a_part_of_another_type_is_one_line(tmp_path, data):
    """profile_export_aiperf.json (a real one), one part written as another JSON type."""
    summary = json.loads(AIPERF_SUMMARY.read_text())
    path = data.draw(st.sampled_from(list(_parts(summary))), label="part")
    text = data.draw(st.sampled_from(OTHER), label="written as")
    export = tmp_path / "profile_export_aiperf.json"
    export.write_text(_with(summary, path, text))
    _problems_name_the_file(run_cli(["ingest", export, "--json"]), str(export), jsonl=False)


@FUZZ
@given(data=st.data())
def test_an_aiperf_records_line_with_a_part_of_another_type_is_one_line(tmp_path, data):
    """profile_export.jsonl (a real one), one part of one request written as another type."""
    records = [json.loads(line) for line in AIPERF_RECORDS.read_text().splitlines() if line]
    which = data.draw(st.integers(0, len(records) - 1), label="request")
    path = data.draw(st.sampled_from(list(_parts(records[which]))), label="part")
    text = data.draw(st.sampled_from(OTHER), label="written as")
    lines = [json.dumps(x) for x in records]
    lines[which] = _with(records[which], path, text)
    export = tmp_path / "profile_export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    _problems_name_the_file(run_cli(["ingest", export, "--json"]), str(export), jsonl=True)


@pytest.mark.parametrize(
    ("path", "text", "message"),
    [
        (("metrics", "request_latency", "unit"), '["ms"]', "request_latency is in ['ms']"),
        (("metrics", "time_to_first_token", "unit"), '{"a": 1}', "time_to_first_token is in"),
        (("metadata", "request_start_ns"), "1" + "0" * 30, "request_start_ns is 1000"),
        (("metrics", "output_sequence_length", "value"), '{"a": 1}', "expected a number"),
    ],
)
def test_an_aiperf_record_of_another_type_names_the_file_and_line(tmp_path, path, text, message):
    records = [json.loads(line) for line in AIPERF_RECORDS.read_text().splitlines() if line]
    lines = [json.dumps(x) for x in records]
    lines[1] = _with(records[1], path, text)
    export = tmp_path / "profile_export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    r = run_cli(["ingest", export, "--json"])
    assert r.exit_code == 2, r.output
    (problem,) = [line for line in r.stderr.splitlines() if line.startswith("Problem: ")]
    assert problem.startswith(f"Problem: {export}, line 2: ") and message in problem, problem


def test_an_aiperf_summary_with_a_list_for_its_concurrency_is_read(tmp_path):
    """input_config's phases say the concurrency; a list there is not one, and the command
    line's is read instead (it gave an internal error: a list is not hashable)."""
    summary = json.loads(AIPERF_SUMMARY.read_text())
    export = tmp_path / "profile_export_aiperf.json"
    export.write_text(_with(summary, ("input_config", "phases", 0, "concurrency"), "[1, 2]"))
    r = run_cli(["ingest", export, "--json"])
    assert r.exit_code == 0, r.output


# --- --server-env-from ---------------------------------------------------------------------

UNIT = "[Unit]\nDescription=vLLM\n[Service]\nEnvironment={}\nExecStart=/usr/bin/vllm serve m\n"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("unclosed.service", UNIT.format('"NCCL_PROTO=LL NCCL_ALGO=Ring'), "line 4: Environment="),
        ("single.service", UNIT.format("'A=1 B=2"), "No closing quotation"),
        ("strings.json", '["a", "b"]', "without a container's Config"),
        ("no_env.json", '[{"Config": {"Cmd": ["vllm", "serve"]}}]', "Config.Env of another"),
        ("env_text.json", '{"Config": {"Env": "NCCL_PROTO=LL"}}', "Config.Env of another"),
        ("env_numbers.json", '{"Config": {"Env": [1, {"a": 1}]}}', "Config.Env of another"),
        ("cmd_object.json", '{"Config": {"Env": [], "Cmd": {"a": 1}}}', "Config.Cmd"),
        ("config_text.json", '{"Config": "x"}', "without a container's Config"),
        ("two.json", '[{"Config": {"Env": []}}, {"Config": {"Env": []}}]', "holds 2 containers"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested 100,000 levels deep"),
        ("huge.json", '{"Config": {"Env": ["A=1"], "Cmd": [1e400]}}', "Config.Cmd"),
    ],
)
@pytest.mark.parametrize("command", ["bench", "sweep"])
def test_a_server_env_from_of_another_shape_is_one_line(tmp_path, command, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    if command == "bench":
        args = ["bench", "--url", "http://127.0.0.1:9", "--label", "x"]
    else:
        args = ["sweep", "--serve", "serve --port {port}", "--engine", "vllm", "-k", 2]
        args += ["--out", tmp_path / "sweep"]
    r = run_cli([*args, "--server-env-from", path])
    one_line_exit_2(r, "--server-env-from", repr(str(path)), message)


def test_a_unit_and_docker_inspect_of_the_right_shape_are_still_read(tmp_path):
    """The shapes refused above are not the ones a unit or docker inspect writes."""
    from breakeven.iotools.server import read_server_env

    unit = tmp_path / "vllm.service"
    unit.write_text(UNIT.format('"NCCL_PROTO=LL" NCCL_ALGO=Ring'))
    assert {"NCCL_PROTO=LL", "NCCL_ALGO=Ring"} <= set(read_server_env(str(unit)).pairs)
    docker = tmp_path / "inspect.json"
    docker.write_text('[{"Config": {"Env": ["NCCL_PROTO=LL"], "Cmd": null}}]')
    assert "NCCL_PROTO=LL" in read_server_env(str(docker)).pairs


# --- --mix ---------------------------------------------------------------------------------


def test_mix_shares_whose_sum_overflows_are_a_mix(tmp_path):
    """1e308 and 1e308 sum to inf, which made every share 0 and then divided by zero (an
    internal error); shares are scaled by the largest first, so they are half and half."""
    from test_workload import _requests

    path = tmp_path / "runs.csv"
    _requests().to_csv(path, index=False)
    for command in (["check", path], ["compare", f"base={path}", f"eagle3={path}"], ["fit", path]):
        huge = run_cli([*command, "--mix", "code=1e308,chat=1e308", "--json"])
        plain = run_cli([*command, "--mix", "code=1,chat=1", "--json"])
        assert huge.exit_code == 0, huge.output
        assert json.loads(huge.stdout)["mix"] == json.loads(plain.stdout)["mix"]
