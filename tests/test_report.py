"""breakeven report, and the planning notebook (executed, so it cannot rot)."""

import re
from pathlib import Path

from cli_checks import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_report_is_self_contained_html(tmp_path):
    out = tmp_path / "report"
    r = run_cli(["report", str(ROOT / "data" / "case_study.csv"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "baseline_drift" in page and "re-measure it right before the speculative run" in page
    assert "eagle3-k3" in page and "<svg" in page
    assert "How to read this" in page
    # Nothing outside the file: no external scripts, styles or images.
    assert not re.search(r'(src|href)="(https?:)?//', page)
    again = run_cli(["report", str(ROOT / "data" / "case_study.csv"), "--out", str(out)])
    assert again.exit_code == 2 and "exists; give --force" in again.output


def test_report_on_a_file_path_is_an_error(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("x")
    r = run_cli(["report", str(ROOT / "data" / "case_study.csv"), "--out", str(target)])
    assert r.exit_code == 2 and "is a file" in r.output


def test_planning_notebook_runs(tmp_path):
    import nbclient
    import nbformat

    notebook = nbformat.read(ROOT / "examples" / "planning.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "examples")}},
    )
    client.execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    assert html, "results should render as HTML tables"
    assert any("image/png" in o.get("data", {}) for o in outputs), "the surface should render"
