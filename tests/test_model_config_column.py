"""A runs file's ``model_config`` column (issue 41): each model's ``config.json`` named in the
runs themselves, relative to the file's folder or absolute, gives ``fit`` the roofline form as
``--model-config`` does; a config that cannot be read, or two configs for one model, is one
line naming the file, its line and the column."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from breakeven.core.errors import BreakevenError
from breakeven.fitting.fit import fit, fit_file
from breakeven.iotools.csvfile import read_measurements
from breakeven.iotools.modelconfig import read_model_config
from tests.cli_checks import run_cli

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "benchmarks" / "data" / "model_configs"
QWEN8B_A30 = ROOT / "benchmarks/data/published_batch/dsparkbench_qwen3_8b_a30_dspark_k7_batch.csv"


def _runs(tmp_path: Path, config: object, name: str = "runs.csv") -> Path:
    """The published Qwen3-8B sweep with speculation at batch 1 only (so the roof is taken),
    each row naming ``config`` (a value per row, or one for all)."""
    data, _ = read_measurements(QWEN8B_A30)
    data = data[(data["num_spec_tokens"] == 0) | (data["concurrency"] == 1)].copy()
    data = data.drop(columns="line")
    data["model_config"] = config
    path = tmp_path / name
    data.to_csv(path, index=False)
    return path


def _cycles(result) -> list[float]:
    (surface,) = result.surfaces
    return [float(surface.cycle_ms(b, 7)) for b in (1, 2, 8, 32)]


def test_a_relative_config_is_read_from_the_runs_folder_as_the_flag_reads_it(tmp_path):
    (tmp_path / "configs").mkdir()
    shutil.copy(CONFIGS / "qwen3-8b.json", tmp_path / "configs" / "qwen3-8b.json")
    runs = _runs(tmp_path, "configs/qwen3-8b.json")
    r = run_cli(["fit", str(runs)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "roofline form (Qwen/Qwen3-8B (BF16)'s config on NVIDIA A30" in text
    by_column = fit_file(str(runs))
    by_flag = fit(
        read_measurements(runs)[0], model_config=read_model_config(str(CONFIGS / "qwen3-8b.json"))
    )
    assert by_column.surfaces[0].roof is not None
    assert _cycles(by_column) == pytest.approx(_cycles(by_flag))


def test_an_absolute_config_and_an_accelerator_flag_go_together(tmp_path):
    runs = _runs(tmp_path, str(CONFIGS / "qwen3-8b.json"))
    r = run_cli(["fit", str(runs), "--accelerator", "H100"])
    assert r.exit_code == 0, r.output
    assert "config on NVIDIA H100" in " ".join(r.output.split())


def test_the_flag_is_taken_over_the_column(tmp_path):
    runs = _runs(tmp_path, "missing.json")
    r = run_cli(["fit", str(runs), "--model-config", str(CONFIGS / "qwen3-8b.json")])
    assert r.exit_code == 0, r.output
    assert "roofline form (the model's config" in " ".join(r.output.split())


def test_an_empty_column_is_no_config(tmp_path):
    runs = _runs(tmp_path, "")
    assert fit_file(str(runs)).surfaces[0].roof is None
    r = run_cli(["fit", str(runs), "--accelerator", "H100"])
    assert r.exit_code == 2, r.output
    assert "--accelerator needs --model-config or a model_config column" in r.output


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("missing.json", "cannot read"),
        ("bad.json", "is not JSON"),
        ("empty.json", "holds a JSON list"),
    ],
)
def test_a_config_that_cannot_be_read_names_the_file_line_and_column(tmp_path, value, said):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "empty.json").write_text("[]")
    runs = _runs(tmp_path, value)
    r = run_cli(["fit", str(runs)])
    assert r.exit_code == 2, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert f"{runs}, line 2, column model_config: " in r.output and said in r.output
    assert "Traceback" not in r.output
    with pytest.raises(ValueError, match="column model_config"):
        fit_file(str(runs))


def test_two_configs_for_one_model_are_refused(tmp_path):
    data, _ = read_measurements(QWEN8B_A30)
    configs = [str(CONFIGS / "qwen3-8b.json")] * len(data)
    configs[3] = str(CONFIGS / "qwen3-32b.json")
    runs = _runs(tmp_path, configs[: len(_kept(data))])
    with pytest.raises(BreakevenError, match=r"line 5, column model_config: .* which line 2 gives"):
        fit_file(str(runs))


def _kept(data: pd.DataFrame) -> pd.DataFrame:
    return data[(data["num_spec_tokens"] == 0) | (data["concurrency"] == 1)]


def test_each_model_gets_its_own_config_and_routing(tmp_path):
    data, _ = read_measurements(QWEN8B_A30)
    data = _kept(data).drop(columns="line")
    other = data.assign(model="Qwen/Qwen3-30B-A3B")
    both = pd.concat([data, other], ignore_index=True)
    both["model_config"] = [str(CONFIGS / "qwen3-8b.json")] * len(data) + [
        str(CONFIGS / "qwen3-30b-a3b.json")
    ] * len(other)
    runs = tmp_path / "both.csv"
    both.to_csv(runs, index=False)
    result = fit_file(str(runs))
    by_model = {s.model: s for s in result.surfaces}
    dense, moe = "Qwen/Qwen3-8B (BF16)", "Qwen/Qwen3-30B-A3B"
    assert set(by_model) == {dense, moe}
    assert by_model[dense].roof.expert_ms == 0 and by_model[moe].roof.expert_ms > 0
    assert by_model[moe].moe is not None and by_model[dense].moe is None
