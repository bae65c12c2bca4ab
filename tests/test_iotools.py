"""iotools' own API: runs read as frames, the benchmark-format and /metrics registries, fit files
read as plain data, and the names (read_* opens a file, parse_* takes text)."""

import importlib
import inspect
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import breakeven
from breakeven.core.errors import BreakevenError
from breakeven.fitting.fit import COEFFICIENTS
from breakeven.fitting.saved import load_fit, load_fitted_alpha, load_surface, load_tree
from breakeven.fitting.tree import TreeAcceptance
from breakeven.fleet import view as fleet
from breakeven.iotools import bench_results, fitfile, metrics, prometheus, runs, sources
from breakeven.iotools.ingest import FORMATS, tok_s_meanings
from breakeven.iotools.records import iso_timestamp
from breakeven.model.surface import BatchSurface, MoE
from breakeven.render import engine_configs as deploy

HERE = Path(__file__).resolve().parent
CASE = HERE / "data" / "case_study"
ENGINES = HERE / "data" / "engines"
# The module, not the function breakeven.measurements.compare (a function keeps its name on the package).
compare_module = importlib.import_module("breakeven.measurements.compare")


# Runs.


def test_parse_run_is_one_definition_kept_where_it_was():
    assert breakeven.parse_run is runs.parse_run is compare_module.parse_run
    assert compare_module.RunInput is runs.RunInput
    run = runs.parse_run("base.log.gz+more.log,again.log")
    assert run.label == "base"
    assert run.launches == (("base.log.gz", "more.log"), ("again.log",))


def test_read_run_gives_a_labelled_frame_of_the_columns_asked_for():
    run = runs.parse_run(f"eagle3={CASE / 'sglang_eagle3_k3.log'}")
    frame = runs.read_run(run, columns=("tok_s", "accept_len", "num_spec_tokens", "run_id"))
    assert isinstance(frame, pd.DataFrame) and len(frame) > 0
    asked = {"tok_s", "accept_len", "num_spec_tokens", "run_id"}
    assert set(frame.columns) == asked | {"label", "line"}  # the label stamped, lines kept
    assert isinstance(frame["label"].dtype, pd.CategoricalDtype)
    assert set(frame["label"]) == {"eagle3"} and set(frame["run_id"]) == {"eagle3"}
    assert (frame["line"] > 0).all()  # lines a user can find in the log


def test_read_run_of_a_baseline_takes_k_0_where_the_file_does_not_say():
    run = runs.parse_run(f"base={CASE / 'sglang_baseline.log'}")
    frame = runs.read_run(run, baseline=True)
    assert (pd.to_numeric(frame["num_spec_tokens"]) == 0).all()
    assert runs.is_measurements_csv(str(HERE.parent / "data" / "case_study.csv"))
    assert not runs.is_measurements_csv(str(CASE / "sglang_baseline.log"))


def test_read_run_refuses_a_run_without_a_rate(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    with pytest.raises(BreakevenError, match="holds nothing breakeven reads"):
        runs.read_run(runs.parse_run(str(empty)))


def test_concat_frames_keeps_texts_categorical_and_fills_what_a_frame_lacks():
    a = pd.DataFrame({"label": runs.constant_column("a", 2), "tok_s": [1.0, 2.0]})
    b = pd.DataFrame({"label": runs.constant_column("b", 1), "accept_len": [2.5]})
    joined = runs.concat_frames([a, b])
    assert isinstance(joined["label"].dtype, pd.CategoricalDtype)
    assert list(joined["label"]) == ["a", "a", "b"]
    assert joined["tok_s"].isna().tolist() == [False, False, True]
    assert joined["accept_len"].isna().tolist() == [True, True, False]


# Benchmark result formats.


def test_every_benchmark_format_is_one_entry_that_ingest_offers_and_explains():
    names = [f.name for f in bench_results.BENCH_FORMAT_TABLE]
    assert bench_results.BENCH_FORMATS == tuple(names) and len(set(names)) == len(names)
    meanings = tok_s_meanings()
    for f in bench_results.BENCH_FORMAT_TABLE:
        assert f.name in FORMATS
        assert meanings[f.name] == f.tok_s
        assert (f"{f.name}_table" in meanings) == f.table


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("median_decode_latency",), bench_results.SGLANG_BENCH_ONE_BATCH),
        (("iterLatencyMS", "specDecodingStats"), bench_results.TRTLLM_ITERATION),
        # vLLM's own keys win over the keys SGLang's bench_serving shares.
        (("model_id", "output_throughput", "mean_e2e_latency_ms"), bench_results.VLLM_BENCH_SERVE),
        (
            ("output_throughput", "mean_e2e_latency_ms", "mean_tpot_ms"),
            bench_results.SGLANG_BENCH_SERVING,
        ),
        # Only the keys both tools print: vLLM's, the fallback.
        (("output_throughput", "mean_tpot_ms"), bench_results.VLLM_BENCH_SERVE),
        (("mean_tpot_ms",), None),
    ],
)
def test_a_result_is_recognised_by_the_first_format_whose_keys_it_holds(keys, expected):
    assert bench_results.bench_format(dict.fromkeys(keys, 1.0)) == expected


def test_a_result_maps_to_record_columns_as_its_format_says():
    obj = {"run_name": "r", "batch_size": 8, "median_decode_latency": 0.02}
    record = bench_results.result_record(obj, bench_results.SGLANG_BENCH_ONE_BATCH, "f:1")
    assert record["engine"] == "sglang" and record["label"] == "r"
    assert record["concurrency"] == 8 and record["num_spec_tokens"] == 0
    assert record["step_ms"] == pytest.approx(20.0) and record["tok_s"] == pytest.approx(50.0)
    serving = {"backend": "sglang", "output_throughput": 100.0, "mean_tpot_ms": 10.0}
    serving["accept_length"] = 2.5
    record = bench_results.result_record(serving, bench_results.SGLANG_BENCH_SERVING, "f:1")
    assert record["tok_s"] == pytest.approx(100.0) and record["accept_len"] == 2.5
    assert "lifetime average" in record["note"]


# /metrics names.


def test_fleet_queries_name_only_the_registrys_series():
    assert fleet.FLEET_ENGINES == tuple(metrics.FLEET_METRICS)
    assert deploy.SCHEDULE_ENGINES == ("vllm", "sglang", "vllm-legacy", "trtllm")
    for engine, e in metrics.FLEET_METRICS.items():
        text = " ".join(fleet.queries(engine, "", "1m").values())
        names = set(re.findall(re.escape(e.prefix) + r"[a-z_]+", text))
        assert names and names <= {m.name for m in e.series.values()}, engine


def test_the_registry_gives_counters_and_gauges_with_their_meaning():
    for e in metrics.METRICS.values():
        assert all(m.name.startswith(e.prefix) for m in e.series.values())
        kinds = (metrics.COUNTER, metrics.GAUGE, metrics.HISTOGRAM)
        assert all(m.kind in kinds for m in e.series.values())
        assert all(
            m.name.endswith("_total") == (m.kind == metrics.COUNTER) for m in e.series.values()
        )
        assert all(
            m.name.endswith(("_sum", "_count")) == (m.kind == metrics.HISTOGRAM)
            for m in e.series.values()
        )
        assert all("[" in m.meaning for m in e.series.values())  # a unit
    assert metrics.VLLM.spec_decode == "vllm:spec_decode_num_"
    assert metrics.SGLANG.spec_decode is None
    assert "sglang:spec_accept_length" in metrics.spec_decode_series()
    assert metrics.PREFIXES == ("vllm:", "sglang:", "llamacpp:")


def test_parse_metrics_reads_llamacpp_counters_by_the_registrys_names():
    text = (ENGINES / "llamacpp_metrics__synthetic_from_source_and_reference.prom").read_text()
    assert sources.looks_like_prometheus(text)
    (record,) = prometheus.parse_metrics(text, source="x")
    assert record["engine"] == "llamacpp" and record["tok_s"] > 0


# Fit files.

SURFACE = {
    "model": "m",
    "hardware": "h",
    "spec_method": "eagle",
    "coefficients": {
        "weights_ms": 10.0,
        "expert_ms": 0.1,
        "kv_ms": 0.5,
        "compute_ms": 1.0,
        "draft_step_ms": 0.5,
        "draft_token_ms": 0.0,
        "spec_seq_ms": 0.0,
    },
    "moe": {"experts": 64, "top_k": 8},
    "batches": [1, 64],
}
TREE = {"model": "m", "hardware": "h", "spec_method": "eagle", "alpha": 0.7, "rank_decay": 0.2}
GROUP = {
    "model": "m",
    "hardware": "h",
    "spec_method": "eagle",
    "coefficients": {"verify_base_ms": 20.0},
    "alpha": 0.65,
}


@pytest.fixture
def fit_path(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({"groups": [GROUP], "surfaces": [SURFACE], "trees": [TREE]}))
    return str(path)


def test_fit_files_read_as_plain_data(fit_path):
    surface = fitfile.read_surface(fit_path)
    assert type(surface) is dict and type(surface["moe"]) is dict
    assert surface["moe"] == {"experts": 64, "top_k": 8, "shared": 0}
    assert surface["batches"] == (1, 64)
    tree = fitfile.read_tree(fit_path)
    assert type(tree) is dict and tree["alpha"] == 0.7 and tree["rank_decay"] == 0.2
    assert fitfile.read_fit(fit_path) == GROUP
    like = {"model": "m", "hardware": "h", "spec_method": "eagle"}
    assert fitfile.read_fitted_alpha(fit_path, like) == (0.65, "the fit's alpha of m h eagle")


def test_the_analysis_builds_objects_from_a_fit_file(fit_path):
    tree = load_tree(fit_path)
    assert tree == TreeAcceptance.from_dict(fitfile.read_tree(fit_path))
    assert (tree.alpha, tree.rank_decay, tree.model) == (0.7, 0.2, "m")
    surface = load_surface(fit_path, like=tree)
    assert isinstance(surface, BatchSurface) and surface.moe == MoE(64, 8, 0)
    assert surface.coefficients == SURFACE["coefficients"] and surface.batches == (1, 64)
    assert load_fitted_alpha(fit_path, surface) == (0.65, "the fit's alpha of m h eagle")
    assert load_fit(fit_path) == GROUP


def test_a_coefficient_the_fit_does_not_know_is_refused(tmp_path):
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({"groups": [{"coefficients": {"bogus_ms": 1.0}}]}))
    assert fitfile.read_fit(str(path))["coefficients"] == {"bogus_ms": 1.0}
    assert "bogus_ms" not in COEFFICIENTS
    with pytest.raises(BreakevenError, match="bogus_ms"):
        load_fit(str(path))


# Names.


def test_read_opens_a_file_and_parse_takes_text():
    ingest = importlib.import_module("breakeven.iotools.ingest")  # the package exports a function
    modules = [bench_results, fitfile, ingest, metrics, prometheus, runs, sources]
    for module in modules:
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or not name.startswith(("read_", "parse_")):
                continue
            first = next(iter(inspect.signature(function).parameters))
            if name.startswith("read_"):
                assert first in ("path", "run"), (module.__name__, name, first)
            else:
                assert first in ("text", "after"), (module.__name__, name, first)


def test_iso_timestamp_is_utc_to_the_second():
    assert iso_timestamp(0.4) == "1970-01-01T00:00:00+00:00"


@pytest.mark.parametrize("value", ["+Inf", "NaN", "9" * 400, "1e30"])
def test_a_counter_no_engine_sends_is_left_out(value):
    # Issue 29: a /metrics counter of 400 digits raised OverflowError; +Inf and NaN reached
    # the differences.  Such a sample is left out, as if the series were absent.
    from breakeven.iotools.prometheus import _samples

    text = f'vllm:spec_decode_num_drafts_total{{model_name="m"}} {value}\nvllm:x_total 3\n'
    assert ("vllm:spec_decode_num_drafts_total", (("model_name", "m"),)) not in _samples(text)


@pytest.mark.parametrize("tail", ["1e-", "1.", '"\\u00', "-"])
def test_a_head_cut_inside_a_number_or_an_escape_is_still_json(tail):
    # A vllm bench serve --save-detailed file past 64 KiB whose head ended inside a number's
    # exponent ("...9891e-") was read as text: "holds nothing breakeven reads" (the real vLLM
    # suite, depending on where its generated texts put the cut).
    from breakeven.iotools.sources import JSON_DOCUMENT, detect

    head = ('{"date": "20261203-070350", "itls": [[' + "0.0045, " * 100 + tail).encode()
    assert detect(head) == JSON_DOCUMENT


def test_the_readers_are_imported_where_first_used_and_keep_their_names():
    """``breakeven.iotools`` imports its readers where first used (issue 43: reading a CSV
    needs neither ingest nor polars), and ``ingest`` stays the function after its module
    loads, as the docs' Python API (``breakeven.iotools.ingest``) says."""
    import importlib

    import breakeven.iotools as iotools

    importlib.import_module("breakeven.iotools.ingest")
    assert callable(iotools.ingest) and iotools.ingest.__module__ == "breakeven.iotools.ingest"
    from breakeven.iotools import ingest, read_cost_curve, read_measurements, write_measurements

    assert ingest is iotools.ingest
    assert (
        read_measurements.__module__ == write_measurements.__module__ == "breakeven.iotools.csvfile"
    )
    assert read_cost_curve.__module__ == "breakeven.iotools.curves"
    assert set(iotools.__all__) <= set(dir(iotools))
    with pytest.raises(AttributeError):
        iotools.no_such_reader  # noqa: B018
