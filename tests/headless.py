"""Headless Chromium for the tests that look at pages as a reader does (the report, the docs
site): where it is, and the mark that skips a test without it.  .ci/run installs Debian's
chromium; in CI a missing browser fails the tests instead of skipping them."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)
if CHROMIUM is None and os.environ.get("CI"):
    pytest.fail(
        "headless Chromium is missing in CI: .ci/run installs Debian's chromium", pytrace=False
    )
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed here (apt-get install chromium; .ci/run "
    "installs it)",
)
"""A test's (or a module's ``pytestmark``) skip where no Chromium is installed."""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    """Headless Chromium run with ``args`` (a window size, ``--dump-dom`` or
    ``--screenshot=PATH``, then the page's URL), its profile in ``profile``."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def measured(page: Path, script: str, width: int, profile: Path) -> Any:
    """What ``script`` (a ``<script>`` that, once the page has loaded, writes JSON into a
    ``<div id="measured">`` it adds) found in ``page`` drawn ``width`` px wide: the measuring
    is the browser's, read back through ``--dump-dom``."""
    copy = page.with_name(page.stem + "-measured.html")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"))
    dom = chromium(
        f"--window-size={width},900",
        "--virtual-time-budget=5000",
        "--dump-dom",
        copy.as_uri(),
        profile=profile,
    ).stdout
    found = re.search(r'<div id="measured">(.*?)</div>', dom)
    assert found, f"the measuring script did not run on {page}"
    return json.loads(html.unescape(found[1]))
