"""The docs site as a reader sees it (issue 43): built with mkdocs, drawn by headless Chromium
at 1280 and 1024 px wide, no code block scrolls sideways (a 100-column console block fits at
1280 px; a longer line wraps inside its block), so no verdict is clipped.  The measuring is the
browser's: a script added to each built page writes every overflowing block's widths into the
DOM, which ``--dump-dom`` prints.  .ci/run installs Chromium; without it here the test is
skipped, except in CI, where a missing browser fails it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from headless import NEEDS_CHROMIUM, measured

ROOT = Path(__file__).resolve().parent.parent
pytestmark = NEEDS_CHROMIUM

MEASURE = """<script>
window.addEventListener("load", () => {
  const found = {scrolls: [], wraps: [], measured: 0};
  document.querySelectorAll("pre > code").forEach((code, i) => {
    const pre = code.parentElement;
    const widest = Math.max(...code.textContent.split("\\n").map((l) => l.length));
    if (code.scrollWidth > code.clientWidth + 1 || pre.scrollWidth > pre.clientWidth + 1) {
      found.scrolls.push([i, code.scrollWidth, code.clientWidth, widest]);
    }
    if (widest <= 100) {  // the CLI's width: drawn unwrapped, it must still fit
      code.style.whiteSpace = "pre";
      if (code.scrollWidth > code.clientWidth + 1) found.wraps.push([i, widest]);
      code.style.whiteSpace = "";
      found.measured += 1;
    }
  });
  const out = document.createElement("div");
  out.id = "measured";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""
PAGES = (
    "tutorial",
    "how-to/plan",
    "how-to/capacity",
    "how-to/compare",
    "how-to/vllm",
    "reference/cli",
)
"""Pages with the widest console blocks, and the CLI reference (every command's help)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    return out


def _overflowing(page: Path, width: int, profile: Path) -> dict:
    return measured(page, MEASURE, width, profile)


@pytest.mark.parametrize("width", [1280, 1024])
@pytest.mark.parametrize("name", PAGES)
def test_no_code_block_scrolls_sideways(site, tmp_path, name, width):
    found = _overflowing(site / name / "index.html", width, tmp_path / "profile")
    assert found["scrolls"] == [], (name, width)


@pytest.mark.parametrize("name", PAGES)
def test_a_100_column_block_fits_unwrapped_at_1280_px(site, tmp_path, name):
    found = _overflowing(site / name / "index.html", 1280, tmp_path / "profile")
    assert found["measured"] > 0
    assert found["wraps"] == [], name
