"""The decisions the commands make before their analysis, through the Python API: fit files,
cost curves and surfaces (breakeven.jobs.inputs), measurements, secrets and compare's runs
(breakeven.jobs.measure), ingest's pipeline (breakeven.iotools.pipeline), JSON --out
(breakeven.iotools.outputs) and the plot commands' inputs (breakeven.jobs.drawing); and every
command-line choice tied to the library constant it offers."""

import importlib
import json
from pathlib import Path

import click
import pytest

import breakeven.fitting.roofs as roofs
from breakeven.cli import cli
from breakeven.core import display
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.iotools.outputs import write_json
from breakeven.iotools.pipeline import JsonArray, ingest_inputs, per_file, write_ingest
from breakeven.jobs.fits import fit_from_file, moe_routing
from breakeven.jobs.inputs import (
    batch_cost,
    batch_from_files,
    optimize_from_files,
    predict_from_files,
    read_curve,
    with_fit_file,
)
from breakeven.jobs.measure import (
    api_key_from_env,
    check_from_file,
    secret_from_env,
    spec_runs,
    with_schedule,
)
from breakeven.jobs.schedules import schedule_from_files
from breakeven.model.surface import MoE
from breakeven.prediction.predict import predict

# Modules by name: breakeven.measurements.check and breakeven.iotools.ingest are also functions' names.
check, compare, costs, deploy, fit, fit_files, ingest, schedule = (
    importlib.import_module(f"breakeven.{name}")
    for name in (
        "measurements.check",
        "measurements.compare",
        "model.costs",
        "render.engine_configs",
        "fitting.fit",
        "fitting.saved",
        "iotools.ingest",
        "planning.schedule",
    )
)
ROOT = Path(__file__).resolve().parents[1]
CURVE = ROOT / "data" / "llama3_8b_decode_curve.csv"
CASE_STUDY = ROOT / "data" / "case_study.csv"
# vLLM issue 20780: Llama-3.1-8B with EAGLE at batch 1 (tests/data/published names its source).
ISSUE_20780 = ROOT / "tests" / "data" / "published" / "vllm_issue20780_llama31_8b_eagle_bs1.csv"
ENGINES = ROOT / "tests" / "data" / "engines"


@pytest.fixture(scope="module")
def fit_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "fit.json"
    fit_from_file(str(ISSUE_20780), out=str(out))
    return str(out)


def test_a_fit_file_is_written_as_its_to_dict_and_never_replaced_without_force(fit_json, tmp_path):
    written = json.loads(Path(fit_json).read_text())
    assert written == fit.fit_file(str(ISSUE_20780)).to_dict()
    with pytest.raises(BreakevenError) as info:
        fit_from_file(str(ISSUE_20780), out=fit_json)
    assert info.value.names == ("out",)
    fit_from_file(str(ISSUE_20780), out=fit_json, force=True)


def test_predict_takes_the_cycle_from_a_fit_group(fit_json):
    group = fit_files.load_fit(fit_json, 1)
    c = {name: group["coefficients"].get(name, 0.0) for name in fit.COEFFICIENTS}
    result = predict_from_files(fit_file=fit_json, fit_group=1, k=3, accept_len=2.29)
    verify = c["verify_base_ms"] + 3 * c["verify_per_token_ms"]
    draft = 3 * c["draft_per_token_ms"] + c["draft_per_cycle_ms"]
    assert result.cycle_ms == pytest.approx(verify + draft + c["overhead_ms"])
    assert result.step_ms == pytest.approx(group["step_ms"])  # the fit's step, none given
    # Without a fit file, the inputs are predict's.
    plain = predict_from_files(baseline_tok_s=62.9, verify_ms=28.7)
    assert plain == predict(baseline_tok_s=62.9, verify_ms=28.7)


def test_a_fit_file_replaces_the_costs_and_says_which_argument_clashes(fit_json):
    with pytest.raises(BreakevenError) as info:
        with_fit_file({"verify_ms": 9.0}, fit_json, 1, form="optimize")
    assert info.value.names == ("fit_file", "verify_ms")
    with pytest.raises(BreakevenError, match="fit_group needs fit_file"):
        with_fit_file({}, None, 2, form="predict")
    kept = with_fit_file({"alpha": 0.5, "step_ms": 7.0}, fit_json, 1, form="optimize")
    assert kept["alpha"] == 0.5 and kept["step_ms"] == 7.0
    assert set(kept) >= {"verify_ms", "draft_step_ms", "draft_ms", "overhead_ms"}


def test_a_cost_curve_is_interpolated_or_fitted_and_fit_needs_a_curve():
    assert read_curve(None) is None
    table = read_curve(str(CURVE))
    assert isinstance(table, costs.TableCost)
    assert isinstance(read_curve(str(CURVE), "knee"), costs.FittedCost)
    with pytest.raises(BreakevenError) as info:
        read_curve(None, "linear", name="cost_curve")
    assert info.value.render() == "fit needs cost_curve: there is no curve to fit"


def test_optimize_from_a_curve_and_the_tree_search_refuses_chain_acceptance():
    # The curve's own plain step, 7.37 ms (a baseline of 100 tok/s, a 10 ms step, beside its
    # 7.4 ms verify of two tokens is refused: issue 38).
    result = optimize_from_files(
        verify_curve=str(CURVE), alpha=0.8, baseline_tok_s=1000 / 7.37, draft_step_ms=0.5
    )
    assert result.best_k >= 1
    with pytest.raises(BreakevenError) as info:
        optimize_from_files(rank_decay=0.1, alpha=0.8, cost_ratio=0.05)
    assert info.value.names == ("rank_decay", "tree")
    with pytest.raises(BreakevenError) as info:
        optimize_from_files(tree=True, per_position=[0.9, 0.8], verify_curve=str(CURVE))
    assert info.value.names == ("per_position", "tree")


def test_a_batch_sweep_prices_one_cost_model():
    with pytest.raises(BreakevenError) as info:
        batch_cost(accept_len=2.0, k=3)
    assert info.value.names == ("cost_curve", "fit_file")
    with pytest.raises(BreakevenError) as info:
        batch_cost(cost_curve=str(CURVE), fit_file="fit.json")
    assert info.value.names == ("fit_file", "cost_curve", "fit")
    with pytest.raises(BreakevenError, match="fit_surface needs fit_file"):
        batch_cost(cost_curve=str(CURVE), fit_surface=1)
    result = batch_from_files(cost_curve=str(CURVE), accept_len=2.1, k=3)
    assert result.to_dict()["speedup_by_batch"][0]["batch"] == 1


def test_moe_routing_goes_together_and_top_k_is_at_most_the_experts():
    assert moe_routing(None, None) is None
    assert moe_routing(128, 8, 1) == MoE(128, 8, 1)
    with pytest.raises(BreakevenError) as info:
        moe_routing(128, None)
    assert info.value.names == ("experts", "top_k")
    with pytest.raises(BreakevenError) as info:
        moe_routing(8, 9)
    assert info.value.render() == "top_k: got 9, expected at most experts (8)"


def test_a_schedule_writes_the_engines_config_and_refuses_an_existing_file(tmp_path):
    out = tmp_path / "config.json"
    inputs = dict(cost_curve=str(CURVE), accept_len_by_k={2: 2.36, 3: 2.79}, draft_step_ms=0.98)
    data = schedule_from_files(engine="vllm", out=str(out), **inputs)
    assert json.loads(out.read_text()) == data["config"]
    with pytest.raises(BreakevenError) as info:
        schedule_from_files(engine="vllm", out=str(out), **inputs)
    assert info.value.names == ("out",)


def test_write_json_is_strict(tmp_path):
    path = tmp_path / "x.json"
    write_json(str(path), {"a": [1, 2.5, None]})
    assert json.loads(path.read_text()) == {"a": [1, 2.5, None]}
    with pytest.raises(ValueError):
        write_json(str(path), {"a": float("nan")}, force=True)


def test_a_value_is_given_once_or_once_per_file():
    assert per_file("label", (), 2) == [None, None]
    assert per_file("label", ("a",), 3) == ["a", "a", "a"]
    assert per_file("label", ("a", "b"), 2) == ["a", "b"]
    with pytest.raises(BreakevenError) as info:
        per_file("spec_topk", (1, 2, 3), 2)
    assert info.value.render() == (
        "spec_topk: given 3 times for 2 files; expected once (for every file) or once per "
        "file, in file order"
    )


def test_ingest_inputs_name_runs_and_stamp_each_file(tmp_path):
    log = ENGINES / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
    inputs = ingest_inputs(
        [f"spec={log}", str(log)], num_spec_tokens=(3,), model=("m1", "m2"), label=("x",)
    )
    assert [i.path for i in inputs] == [str(log), str(log)]
    assert inputs[0].stamp == {"model": "m1", "label": "spec"}
    assert inputs[1].stamp == {"model": "m2", "label": "x"}
    assert [i.num_spec_tokens for i in inputs] == [3, 3]
    with pytest.raises(TypeError):
        ingest_inputs([str(log)], colour=("red",))


def test_ingest_writes_the_csv_and_the_json_of_the_same_records(tmp_path):
    log = ENGINES / "llamacpp_server_pr24536_eagle3_mean_acceptance_length_format.txt"
    pieces = []
    array = JsonArray(pieces.append)
    out = tmp_path / "runs.csv"
    tally, problems = write_ingest(ingest_inputs([str(log)]), out=str(out), json=array)
    array.close()
    records = json.loads("".join(pieces))
    assert problems == [] and tally.records == len(records) > 0
    assert out.read_text().count("\n") == len(records) + 1  # the header and a line per record
    assert records == ingest.ingest([str(log)]).records
    tally, _ = write_ingest(ingest_inputs([str(log)]), out=str(out), append=True)
    assert out.read_text().count("\n") == 2 * len(records) + 1
    with pytest.raises(BreakevenError) as info:
        write_ingest(ingest_inputs([str(log)]), append=True)
    assert info.value.names == ("append", "out", "force")


def test_secrets_come_from_the_environment_and_are_never_shown(monkeypatch):
    monkeypatch.setenv("BE_TOKEN", " s3cret\n")
    assert secret_from_env("BE_TOKEN", "token_env") == "s3cret"
    key, note = api_key_from_env("BE_TOKEN")
    assert key == "s3cret" and "s3cret" not in note
    monkeypatch.delenv("BE_TOKEN")
    with pytest.raises(BreakevenError) as info:
        secret_from_env("BE_TOKEN", "token_env")
    assert info.value.render() == "token_env: the variable BE_TOKEN is not set"
    with pytest.raises(BreakevenError) as info:
        api_key_from_env("BE_TOKEN")
    assert info.value.render() == "api_key_env: the variable BE_TOKEN is not set"


def test_compare_runs_take_what_their_files_do_not_say():
    runs = spec_runs(["a=x.log", "y.log"], num_spec_tokens=(3, 5), spec_method=("eagle3",))
    assert [(r.label, r.num_spec_tokens, r.spec_method) for r in runs] == [
        ("a", 3, "eagle3"),
        ("y", 5, "eagle3"),
    ]
    with pytest.raises(BreakevenError) as info:
        spec_runs(["x.log"], env=("A=1", "B=2"))
    assert info.value.names == ("env",)


def test_check_from_file_is_check_and_adds_a_schedule_only_when_given():
    assert check_from_file(str(CASE_STUDY)).to_dict() == check.check_file(str(CASE_STUDY)).to_dict()
    result = check.check_file(str(CASE_STUDY))
    assert with_schedule(result, None) is result


def test_one_default_tolerance():
    assert DEFAULT_TOLERANCE == 0.05
    for function in (check.check, check.check_file, compare.compare, schedule.against):
        assert function.__kwdefaults__ or function.__defaults__
        defaults = {**(function.__kwdefaults__ or {})}
        if function.__defaults__:
            defaults["tolerance"] = function.__defaults__[-1]
        assert defaults["tolerance"] == DEFAULT_TOLERANCE, function
    for path in (("check",), ("compare",), ("report",), ("plot", "check")):
        command = cli
        for name in path:
            command = command.commands[name]
        (option,) = [p for p in command.params if p.name == "tolerance"]
        assert option.default == DEFAULT_TOLERANCE, path


def _choices(group, path=()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _choices(command, (*path, name))
            continue
        for param in command.params:
            if isinstance(param.type, click.Choice):
                yield (*path, name, param.name), param.type


# Every choice the command line offers, and the library constant it offers.
CHOICES = {
    ("ingest", "format"): ingest.FORMATS,
    ("compare", "fail_if"): compare.FAIL_IF,
    ("fit", "draft_cost"): fit.DRAFT_COSTS,
    ("fit", "cycle_form"): fit.FORM_CHOICES,
    ("fit", "weight_bits"): roofs.WEIGHT_BITS,
    ("schedule", "engine"): deploy.SCHEDULE_ENGINES,
    ("plot", "schedule", "engine"): deploy.SCHEDULE_ENGINES,
    ("sweep", "engine"): deploy.SPECULATION_ENGINES,
    ("optimize", "fit"): costs.FORMS,
    ("batch", "fit"): costs.FORMS,
    ("schedule", "fit"): costs.FORMS,
    ("plot", "k", "fit"): costs.FORMS,
    ("plot", "batch", "fit"): costs.FORMS,
    ("plot", "schedule", "fit"): costs.FORMS,
}
# --format, on every command that prints a result (issue 26).
CHOICES.update(
    {
        (command, "output_format"): display.OUTPUT_FORMATS
        for command in "predict optimize batch moe check compare fit schedule fleet".split()
    }
)


def test_every_choice_is_a_library_constant():
    found = dict(_choices(cli))
    assert set(found) == set(CHOICES)
    for where, choice in found.items():
        assert choice.choices == tuple(CHOICES[where]), where


def test_the_plot_commands_inputs_are_checked_by_name():
    from breakeven.jobs.drawing import LARGEST_POINT, sensitivity_figure, surface_point

    assert surface_point("eagle:2.5:30", 15.0) == (2.5, 2.0, "eagle")
    with pytest.raises(BreakevenError) as info:
        surface_point("eagle:2.5:30", None)
    assert info.value.names == ("points", "baseline_tok_s", "step_ms")
    for text in ("eagle", "eagle:x:30", f"eagle:{2 * LARGEST_POINT}:30", "eagle:2:-1"):
        with pytest.raises(BreakevenError) as info:
            surface_point(text, 15.0)
        assert info.value.names == ("points",)
    with pytest.raises(BreakevenError, match="give one of baseline_tok_s or step_ms"):
        sensitivity_figure(baseline_tok_s=60.0, step_ms=16.0, verify_ms=28.7, accept_len=2.0)
