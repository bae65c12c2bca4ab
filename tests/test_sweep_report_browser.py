"""The sweep's page (DIR/report.html) as a reader sees it in a 1280 px window (issue 43): no
table is wider than the page and the page never scrolls sideways, however long the names a
real launch records.

The sweep is a real one, of tests/fake_server.py (three k, two loads, two repeats: launches
started, benched and stopped by ``run_sweep``); its rows are then given what a vLLM launch of a
70B model on four GPUs records (a model path, a hardware name, the server's command line and
environment in ``env``, one k's launches with one variable more, so check flags its
baselines) and answered again, as ``sweep --resume`` would.  The answer is made with no width
(``--wide``'s), which the page's text blocks must not take.  The measuring is the browser's
(tests/headless.py).  .ci/run installs Chromium; without it here the test is skipped, except
in CI.
"""

from __future__ import annotations

import csv
import html
import re
import sys
from pathlib import Path

import pytest
from headless import NEEDS_CHROMIUM, chromium, measured
from local_process import free_port

from breakeven.bench.config import Config
from breakeven.core.display import display
from breakeven.sweep.answer import answer_sweep
from breakeven.sweep.plan import plan_sweep
from breakeven.sweep.run import run_sweep

FAKE = Path(__file__).parent / "fake_server.py"
pytestmark = NEEDS_CHROMIUM

MODEL = "/mnt/models/meta-llama/Meta-Llama-3.1-70B-Instruct-FP8-dynamic"
SERVE = (
    f"arg=vllm arg=serve arg={MODEL} --tensor-parallel-size=4 --max-model-len=32768 "
    "--gpu-memory-utilization=0.92 --enable-prefix-caching --enable-chunked-prefill "
    "--max-num-batched-tokens=16384 --served-model-name=llama-3.1-70b-instruct-fp8 "
    "--kv-cache-dtype=fp8_e4m3 --disable-log-requests --port=8000 "
    "CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_P2P_LEVEL=NVL NCCL_IB_DISABLE=1 "
    "VLLM_ATTENTION_BACKEND=FLASHINFER VLLM_USE_V1=1 VLLM_WORKER_MULTIPROC_METHOD=spawn "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
)
"""What a vLLM launch records of its server in ``env``: its command line and environment."""

MEASURE = """<script>
window.addEventListener("load", () => {
  const page = document.documentElement;
  const found = {page: [page.scrollWidth, page.clientWidth], tables: [], blocks: []};
  document.querySelectorAll("table").forEach((t, i) => {
    const box = t.parentElement.getBoundingClientRect();
    const r = t.getBoundingClientRect();
    found.tables.push([i, t.scrollWidth, t.clientWidth, r.right - box.right]);
  });
  document.querySelectorAll("p, pre, li, figure").forEach((b) => {
    if (b.scrollWidth > b.clientWidth + 1) found.blocks.push([b.tagName, b.scrollWidth]);
  });
  const out = document.createElement("div");
  out.id = "measured";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def _as_launched(runs: Path) -> None:
    """The fake sweep's rows, as a vLLM launch of a 70B model on four GPUs records them."""
    with open(runs, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        client = re.sub(r"^.*VLLM_ATTENTION_BACKEND=\S+ ", "", r["env"])  # model=, url=, ...
        r["env"] = f"{SERVE} {client}"
        if r["num_spec_tokens"] == "6":  # a variable the baselines' launches lacked
            r["env"] += " VLLM_FLASHINFER_FORCE_TENSOR_CORES=1"
        r["model"] = MODEL
        r["hardware"] = "NVIDIA H100 80GB HBM3 x4 (TP4, NVLink)"
        r["label"] = r["label"].replace("eagle3-k", "eagle3-llama3.1-70b-instruct-k")
    with open(runs, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture(scope="module")
def sweep_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "sweep"
    serve = (
        "env CUDA_VISIBLE_DEVICES=0,1 VLLM_ATTENTION_BACKEND=FLASH_ATTN "
        f"{sys.executable} {FAKE} --port {{port}} --seconds-per-token 0.002"
    )
    plan = plan_sweep(
        serve,
        "vllm",
        [2, 4, 6],
        method="eagle3",
        draft="/mnt/models/yuhuili/EAGLE3-LLaMA3.1-Instruct-70B",
        concurrency=(1, 4),
        repeats=2,
        ready_timeout_s=30,
        port=free_port(),
    )
    run_sweep(
        plan, str(out), Config(url="http://unused", label="unused", max_tokens=16, requests=2)
    )
    _as_launched(out / "runs.csv")
    with display(width=None):  # --wide: text as wide as its content
        answer = answer_sweep(str(out))
    assert answer.fit is not None and answer.schedule is not None, answer.notes
    assert any(c.flags for c in answer.check.comparisons)  # the flags' paragraphs are there
    return out / "report.html"


def test_the_sweep_page_fits_a_1280_px_window(sweep_page, tmp_path):
    found = measured(sweep_page, MEASURE, 1280, tmp_path / "profile")
    width, window = found["page"]
    assert width <= window, f"the page scrolls sideways: {width} px in {window}"
    assert len(found["tables"]) >= 2  # the runs and the levels
    for i, scrolled, shown, past in found["tables"]:
        assert scrolled <= shown + 1 and past <= 1, f"table {i}: {scrolled} px in {shown}"
    assert found["blocks"] == []  # no paragraph, text block or figure scrolls either
    text = sweep_page.read_text()
    # Nothing is lost: the model, said once above the runs, and each label are on the page.
    assert text.count(MODEL) >= 1 and "eagle3-llama3.1-70b-instruct-k6" in text
    # The fit's and schedule's text blocks are the page's width, not --wide's.
    blocks = re.findall(r"<pre>(.*?)</pre>", text, flags=re.S)
    assert (
        blocks and max(len(line) for b in blocks for line in html.unescape(b).splitlines()) <= 120
    )


def test_the_sweep_page_reads_well_as_drawn(sweep_page, tmp_path):
    """The screenshot a reader would see: kept beside the page (``report.png``) to look at."""
    shot = sweep_page.with_name("report.png")
    chromium(
        "--window-size=1280,4000",
        f"--screenshot={shot}",
        sweep_page.as_uri(),
        profile=tmp_path / "profile",
    )
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    # Everything is drawn inside the page's column: its right margin (the body's 1rem of
    # padding) is blank from top to bottom, where a table run past the page would cross it.
    assert pixels.shape[1] == 1280
    margin = pixels[:, -14:]
    assert (margin == 1.0).all(), "something is drawn in the page's right margin"
