"""The compare report as a person sees it: rendered by headless Chromium, not parsed by us.

Chromium draws the page to a PNG; the test reads its pixels (matplotlib's PNG reader): the
headline band at the top is in the win colour, and the figure's speedup colours (the RdBu
surface, inline SVG) are drawn below it.  Chromium's DOM after loading (``--dump-dom``) has the
headline as the body's first text and the surface as an <svg>.  .ci/run installs Chromium
(Debian's ``chromium``); on a machine without it the test is skipped, except in CI, where a
missing browser fails it.
"""

from pathlib import Path

import numpy as np
from cli_checks import run_cli
from headless import NEEDS_CHROMIUM, chromium

HERE = Path(__file__).resolve().parent
pytestmark = NEEDS_CHROMIUM


def long_log(path, rates, accept_len=None):
    """An SGLang decode log of one window a second."""
    spec = f"accept len: {accept_len:.2f}, accept rate: 0.40, " if accept_len else ""
    path.write_text(
        "".join(
            f"[2026-02-26 10:{i // 60:02d}:{i % 60:02d} TP0] Decode batch, #running-req: 1, "
            f"#token: {100 + 40 * i}, token usage: 0.00, {spec}cuda graph: True, gen throughput "
            f"(token/s): {r:.2f}, #queue-req: 0\n"
            for i, r in enumerate(rates)
        )
    )
    return path


def test_the_report_renders_its_headline_first_and_its_figures(tmp_path):
    rng = np.random.default_rng(11)
    base = long_log(tmp_path / "base.log", 62.9 + rng.normal(0, 0.8, 64))
    spec = long_log(tmp_path / "spec.log", 75.9 + rng.normal(0, 0.8, 64), accept_len=2.1)
    report = tmp_path / "report"
    r = run_cli(
        [
            "compare",
            f"baseline={base}",
            f"eagle3-k3={spec}",
            "-k",
            "3",
            "--verify-ms",
            "28.7",
            "--draft-ms",
            "1.2",
            "--report",
            str(report),
        ],
    )
    assert r.exit_code == 0, r.output
    page = report / "report.html"
    url = page.as_uri()

    dom = chromium("--dump-dom", url, profile=tmp_path / "profile").stdout
    body = dom[dom.index("<body") :]
    headline = "eagle3-k3 is 1.21x faster than baseline"
    assert body.index(headline) < body.index("<h2") < body.index("<svg")
    assert body.count("<svg") == 2  # the surface and measured against predicted

    shot = tmp_path / "shot.png"
    chromium("--window-size=1280,2400", f"--screenshot={shot}", url, profile=tmp_path / "profile")
    from matplotlib.image import imread

    pixels = (imread(shot)[..., :3] * 255).round()
    # The headline's band, in the win colour (#e6f4ea), fills the top of the page.
    win = np.all(np.abs(pixels - [0xE6, 0xF4, 0xEA]) <= 2, axis=-1)
    rows = np.flatnonzero(win.mean(axis=1) > 0.5)
    assert len(rows) and rows[0] < 120, "no win-coloured headline band at the top"
    # Below it, the surface's colours: deep red (loses) and deep blue (pays) of RdBu.
    below = pixels[rows[-1] + 1 :]
    red = np.all(np.abs(below - [180, 30, 45]) <= 40, axis=-1).sum()
    blue = np.all(np.abs(below - [40, 100, 170]) <= 40, axis=-1).sum()
    assert red > 500 and blue > 500, (red, blue)
