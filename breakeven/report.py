"""``breakeven report``: a self-contained HTML page of a check, for planning documents.

The page holds the check table, every flag with its sentence, and the figures
inline as SVG, so it can be mailed or attached without its folder.
"""

from __future__ import annotations

import html
import io
import math
import os
from datetime import datetime, timezone
from typing import Any

from breakeven.quantities import number_text

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; }
td:first-child, td:nth-child(2), th:first-child { text-align: left; }
code { background: #f3f3f3; padding: 0 0.2rem; }
.flag { margin: 0.4rem 0; }
figure { display: inline-block; margin: 0 1rem 1rem 0; }
"""


def _svg(ax: Any) -> str:
    buffer = io.StringIO()
    ax.figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def report_html(result: Any, title: str, source: str) -> str:
    """The report page for a :class:`~breakeven.check.CheckResult`."""
    from breakeven import plot
    from breakeven.formatting import check_html, printable

    figures = []
    if any(not (math.isnan(c.measured_speedup) or math.isnan(c.predicted_speedup))
           for c in result.comparisons):  # fmt: skip
        figures.append(("Measured against predicted speedup", plot.measured_vs_predicted(result)))
    # Runs without a point, or one beyond what a surface can show (absurd rates), are left off.
    largest = plot.LARGEST_AXIS / 1.2
    points = [(x, y, c.label) for c in result.comparisons
              for x, y in [(c.accept_len, c.cycle_ms * c.baseline_tok_s / 1000.0)]
              if 0 < x <= largest and 0 < y <= largest]  # fmt: skip
    if points:
        x_high = max(4.0, *(1.2 * x for x, _, _ in points))
        y_high = max(4.0, *(1.2 * y for _, y, _ in points))
        figures.append(("Where each run sits on the speedup surface",
                        plot.surface(accept_len=(1.0, x_high), cycle_over_step=(1.0, y_high),
                                     points=points)))  # fmt: skip
    flags = (
        "".join(
            f'<p class="flag"><code>{html.escape(f.code)}</code> {html.escape(printable(f.message))}</p>'
            for f in result.flags
        )
        or "<p>No flags: baselines agree and predictions match within the tolerance.</p>"
    )
    servers = "".join(
        f"<li>{html.escape(printable(c.run_id))}: server {number_text(c.server_tok_s, 2)} tok/s, "
        f"client {number_text(c.client_tok_s, 2)} tok/s ({number_text(c.ratio, 3)}x), "
        f"{'agree' if c.agree else 'disagree'}</li>"
        for c in result.server_checks
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Does speculative decoding pay off in these measurements? Made by <code>breakeven report</code>
from <code>{html.escape(printable(source))}</code> on {stamp}.</p>
<h2>How to read this</h2>
<p>Each speculative run is compared with the baseline runs (no speculation) of the same model,
hardware and concurrency, preferring a baseline measured in the same environment.
<b>measured</b> is the speculative per-sequence decode rate over the baseline's (tok/s over tok/s);
above 1 speculation pays. <b>predicted</b> is what the cycle model expects from the run's mean
acceptance length (tokens per cycle, bonus token included) and cycle time:
accept_len &times; step_ms / cycle_ms. <b>implied cycle</b> is the cycle time the measured rate
implies, 1000 &times; accept_len / tok_s [ms]. The 95% interval comes from repeated runs
(bootstrap); "within noise" means it holds 1. Tolerance: {result.tolerance:.0%}.</p>
<h2>Flags</h2>
{flags}
<h2>Runs</h2>
{check_html(result.to_dict(), flags=False)}
{"<h2>Server log against client benchmark</h2><ul>" + servers + "</ul>" if servers else ""}
<h2>Figures</h2>
{
        "".join(
            f"<figure>{_svg(ax)}<figcaption>{html.escape(t)}</figcaption></figure>"
            for t, ax in figures
        )
        or "<p>No run has both a measured and a predicted speedup, or an acceptance length and a cycle "
        "time to place on the speedup surface.</p>"
    }
</body></html>
"""


def write_report(measurements: str, out_dir: str, *, tolerance: float = 0.05,
                 force: bool = False) -> str:  # fmt: skip
    """Check ``measurements`` and write ``out_dir/report.html`` atomically; returns its path."""
    from breakeven.check import check_file
    from breakeven.iotools.atomic import refuse_overwrite, write_text
    from breakeven.iotools.paths import check_output_path, output_error

    check_output_path(out_dir, "out", directory=True)
    path = os.path.join(out_dir, "report.html")
    refuse_overwrite(path, force)
    result = check_file(measurements, tolerance)
    page = report_html(result, "Speculative decoding: measured against predicted", measurements)
    try:
        os.makedirs(out_dir, exist_ok=True)
        write_text(path, lambda f: f.write(page), force=force)
    except OSError as e:  # after the checks: a full disk, a directory removed meanwhile
        raise output_error("out", out_dir, e) from None
    return path
