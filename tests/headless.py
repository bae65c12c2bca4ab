"""Headless Chromium for the tests that look at pages as a reader does (the report, the docs
site): where it is, and the mark that skips a test without it.  .ci/run installs Debian's
chromium; in CI a missing browser fails the tests instead of skipping them."""

from __future__ import annotations

import os
import shutil

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
