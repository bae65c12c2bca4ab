"""Self-contained HTML reports for planning documents: ``breakeven report`` (of a check) and
``breakeven compare --report`` (of a comparison).

A page leads with the answer: a compare report's first line is each run's headline verdict,
coloured by win, loss or within noise.  It holds the table, every flag with its sentence, and
the figures inline as SVG, so it can be mailed or attached without its folder.  A figure with
nothing to show is left out, with a sentence saying what is missing.  Pages are built from
results (or their ``to_dict()`` rows), like every renderer: the caller runs the analysis.
"""

from __future__ import annotations

import html
import io
import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from breakeven.core.display import display
from breakeven.core.quantities import number_text
from breakeven.iotools.atomic import refuse_overwrite, write_text
from breakeven.iotools.paths import check_output_path, output_error
from breakeven.render import (
    check_headline,
    check_html,
    compare_rows,
    doubt_line,
    fit_html,
    fleet_html,
    html_table,
    printable,
    schedule_html,
)
from breakeven.render.levels import levels_html

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; overflow-wrap: break-word; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; display: block;
        max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td { max-width: 18rem; }
.n { text-align: right; }
td.n { white-space: nowrap; }
pre { overflow-x: auto; }
code { background: #f3f3f3; padding: 0 0.2rem; }
.flag { margin: 0.4rem 0; }
.headline { font-size: 1.25rem; font-weight: 600; margin: 0.3rem 0; padding: 0.5rem 0.8rem;
            border-left: 0.4rem solid; }
.win { background: #e6f4ea; border-color: #1e8e3e; }
.loss { background: #fce8e6; border-color: #d93025; }
.noise { background: #f1f3f4; border-color: #80868b; }
.missing { color: #555; font-style: italic; }
figure { display: inline-block; margin: 0 1rem 1rem 0; }
"""

PAGE_COLUMNS = 120
"""The width of a page's text blocks (the sweep's fit and schedule reports) [columns], whatever
the terminal's: 120 monospace characters fit a 1024 px window."""

VERDICT_CLASS = {"faster": "win", "slower": "loss", "within noise": "noise", "no interval": "noise"}
"""The colour class of each verdict: a win, a loss, or within noise (no interval: not known
to be either)."""


def _svg(ax: Any) -> str:
    buffer = io.StringIO()
    ax.figure.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _figures(drawings: list[tuple[str, Callable[[Any], Any]]]) -> str:
    """Each figure inline, or, where there is nothing to show, the sentence saying what is
    missing in its place."""
    from breakeven.render import plot  # lazy: matplotlib

    parts = []
    for title, draw in drawings:
        try:
            ax = draw(plot)
        except plot.NothingToDraw as e:
            parts.append(
                f'<p class="missing">{html.escape(title)}: left out, {html.escape(str(e))}.</p>'
            )
            continue
        parts.append(f"<figure>{_svg(ax)}<figcaption>{html.escape(title)}</figcaption></figure>")
    return "".join(parts)


def _flags_html(flags: list[dict[str, Any]], none: str) -> str:
    return (
        "".join(
            f'<p class="flag"><code>{html.escape(f["code"])}</code> '
            f"{html.escape(printable(f['message']))}</p>"
            for f in flags
        )
        or f"<p>{html.escape(none)}</p>"
    )


def _page(title: str, body: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head><body>
{body}
</body></html>
"""


def _made_by(command: str, sources: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<p>Made by <code>{html.escape(command)}</code> from "
        f"{html.escape(printable(sources))} on {stamp}.</p>"
    )


_HOW_TO_READ = """<h2>How to read this</h2>
<p>Each speculative run is compared with the baseline runs (no speculation) of the same model,
hardware and concurrency, preferring a baseline measured in the same environment.
The <b>speedup</b> is the speculative per-sequence decode rate over the baseline's (tok/s over
tok/s); above 1 speculation pays. <b>predicted</b> is what the cycle model expects from the run's
mean acceptance length (tokens per cycle, bonus token included) and the cycle time given:
accept_len &times; step_ms / cycle_ms; the <b>break-even accept_len</b> is cycle_ms / step_ms.
<b>implied cycle</b> is the cycle time the measured rate implies, 1000 &times; accept_len / tok_s
[ms]. The 95% interval's unit of repetition is the launch (a server start, one bench run): within
one launch it comes from batch means over the launch's decode windows or requests, which leave
launch-to-launch variation out; across launches, from the launches' means. "within noise" means it
holds 1. Tolerance: {tolerance:.0%}.</p>
<p>On the speedup surface, a filled point is a measured run at its implied cycle over the
baseline's step (where it reads its measured speedup); a hollow one is the same run at the cycle
given (the prediction); a grey one is the run against another baseline of the same deployment,
drawn where the baselines drifted or the one compared with ran in another environment. A point
whose label would cover another label is left unlabelled (the legend counts them, the fastest runs
labelled first); the runs table has every run's numbers.</p>"""


CHECK_TITLE = "Speculative decoding: measured against predicted"
"""The title of ``breakeven report``'s page."""


def _data(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else result.to_dict()


def check_page(result: Any, source: str, title: str = CHECK_TITLE) -> str:
    """The report page of a :class:`~breakeven.measurements.check.CheckResult` (or its ``to_dict()``) of
    the measurements ``source`` names."""
    data = _data(result)
    servers = "".join(
        f"<li>{html.escape(printable(c['run_id']))}: server {number_text(c['server_tok_s'], 2)} "
        f"tok/s, client {number_text(c['client_tok_s'], 2)} tok/s "
        f"({number_text(c['ratio'], 3)}x), {'agree' if c['agree'] else 'disagree'}</li>"
        for c in data["server_checks"]
    )
    figures = _figures(
        [
            ("Measured against predicted speedup", lambda p: p.measured_vs_predicted(data)),
            ("Where each run sits on the speedup surface", lambda p: p.runs_surface(data)),
        ]
    )
    body = f"""<h1>{html.escape(title)}</h1>
<p class="headline {_check_class(data)}">{html.escape(printable(check_headline(data)))}</p>
{_made_by("breakeven report", source)}
<h2>Flags</h2>
{_flags_html(data["flags"], "No flags: baselines agree and predictions match within the tolerance.")}
<h2>Runs</h2>
{check_html(data, flags=False)}
{levels_html(data)}
{_categories_html(data)}
{"<h2>Server log against client benchmark</h2><ul>" + servers + "</ul>" if servers else ""}
<h2>Figures</h2>
{figures}
{_HOW_TO_READ.format(tolerance=data["tolerance"])}"""
    return _page(title, body)


def _check_class(data: dict[str, Any]) -> str:
    """A check's colour: a win where every run is faster, a loss where any is slower, else
    noise."""
    verdicts = {c["verdict"] for c in data["comparisons"]}
    if verdicts == {"faster"}:
        return "win"
    return "loss" if "slower" in verdicts else "noise"


SWEEP_TITLE = "Speculative decoding: the sweep's answer"
"""The title of ``breakeven sweep``'s page."""


def sweep_page(data: dict[str, Any]) -> str:
    """The report page of a sweep (a :class:`~breakeven.sweep.answer.SweepAnswer`'s
    ``to_dict()``): the best k at each load and the config to paste first, coloured as
    compare's headlines, then check's runs and flags, the fit, the schedule and the notes."""
    check = data["check"]
    doubt = "".join(
        f'<p class="headline noise">{html.escape(line)}</p>'
        for line in doubt_line(check["comparisons"]).splitlines()
    )
    rates = "".join(
        f"<p>Break-even: {html.escape(printable(r['sentence']))}.</p>"
        for r in check.get("breakeven_rates") or ()
    )
    best = (
        doubt
        + rates
        + "".join(
            f'<p class="headline {"win" if b["num_spec_tokens"] else "noise"}">'
            f"{html.escape(b['load'][:1].upper() + b['load'][1:])}: "
            f"{html.escape(printable(b['why']))}</p>"
            + (
                f"<p>Flags ({html.escape(data['engine'])}): "
                f"<code>{html.escape(printable(b['flags']))}</code></p>"
                if b["flags"]
                else ""
            )
            for b in data["best"]
        )
    )
    schedule = data.get("schedule")
    with display(width=PAGE_COLUMNS):  # the terminal's width (or --wide's none) is not the page's
        fitted = fit_html(data["fit"]) if data.get("fit") else None
        scheduled = schedule_html(schedule) if schedule else None
    figures = _figures(
        [
            ("Measured against predicted speedup", lambda p: p.measured_vs_predicted(check)),
            ("Where each run sits on the speedup surface", lambda p: p.runs_surface(check)),
        ]
    )
    notes = "".join(f"<li>{html.escape(printable(n))}</li>" for n in data["notes"])
    body = f"""<h1>{SWEEP_TITLE}</h1>
{best}
{_made_by("breakeven sweep", os.path.join(data["directory"], "runs.csv"))}
<h2>Flags</h2>
{_flags_html(check["flags"], "No flags: baselines agree and predictions match within the tolerance.")}
<h2>Runs</h2>
{check_html(check, flags=False)}
{levels_html({**check, "breakeven_rates": []})}
<h2>Fitted costs</h2>
{fitted or '<p class="missing">No fit (see the notes).</p>'}
<h2>Schedule by batch</h2>
{scheduled or '<p class="missing">No schedule (see the notes).</p>'}
{"<h2>Notes</h2><ul>" + notes + "</ul>" if notes else ""}
<h2>Figures</h2>
{figures}
{_HOW_TO_READ.format(tolerance=check["tolerance"])}"""
    return _page(SWEEP_TITLE, body)


def write_sweep_report(data: dict[str, Any], directory: str) -> str:
    """The sweep's page in ``directory/report.html``, atomically (the sweep's own: replaced
    when the answer is made again); returns its path."""
    return _write_page(directory, True, lambda: sweep_page(data))


def _categories_html(data: dict[str, Any]) -> str:
    """The category matrix: a row per workload category, a column per run, each cell the
    speedup with its interval and accept_len, coloured as its verdict; then each mix's
    answer.  Empty where no row has a category."""
    rows = data.get("categories") or []
    if not rows:
        return ""
    runs = list(dict.fromkeys(str(r["label"]) for r in rows))
    cats = list(dict.fromkeys(str(r["category"]) for r in rows))
    at = {(str(r["label"]), str(r["category"])): r for r in rows}

    def cell(r: dict[str, Any] | None) -> str:
        if r is None:
            return '<td class="missing">-</td>'
        low, high = r["ci_low"], r["ci_high"]
        ranged = f" ({number_text(low, 3)}-{number_text(high, 3)})" if low is not None else ""
        return (
            f'<td class="{VERDICT_CLASS.get(r["verdict"], "noise")}">'
            f"{number_text(r['speedup'], 3)}x{ranged}<br>accept_len "
            f"{number_text(r['accept_len'], 3)}, {html.escape(r['verdict'])}</td>"
        )

    head = "".join(f"<th>{html.escape(printable(x))}</th>" for x in runs)
    body = "".join(
        f"<tr><td>{html.escape(printable(c))}</td>"
        + "".join(cell(at.get((x, c))) for x in runs)
        + "</tr>"
        for c in cats
    )
    mixes = "".join(
        f"<li>{html.escape(printable(str(m['label'])))}: {number_text(m['speedup'], 3)}x over "
        + html.escape(", ".join(f"{printable(c)} {w:.0%}" for c, w in m["mix"]))
        + (
            f"; speculation stops paying above {m['breakeven_share']:.0%} of the tokens in "
            + html.escape(", ".join(printable(c) for c, _ in m["losing"]))
            if m["breakeven_share"] is not None
            else ""
        )
        + "</li>"
        for m in data.get("mix") or []
    )
    return f"<h2>By workload category</h2><table><tr><th>category</th>{head}</tr>{body}</table>" + (
        f"<ul>{mixes}</ul>" if mixes else ""
    )


def compare_page(result: Any) -> str:
    """The report page of a :class:`~breakeven.measurements.compare.CompareResult` (or its ``to_dict()``):
    the headline verdict of each run first, coloured, then the table, flags, advice and
    figures."""
    data = _data(result)
    headlines = "".join(
        f'<p class="headline {VERDICT_CLASS.get(r["verdict"], "noise")}">'
        f"{html.escape(printable(r['headline']))}.</p>"
        + (
            f'<p class="why">{html.escape(printable(r["launch_note"][:1].upper() + r["launch_note"][1:]))}.</p>'
            if r.get("launch_note")
            else ""
        )
        for r in data["runs"]
    ) or (
        f'<p class="headline noise">No speculative run could be compared with '
        f"{html.escape(printable(data['baseline']))}: see the flags.</p>"
    )
    intervals = "".join(
        f"<li>{html.escape(printable(r['label']))}: {html.escape(r['interval_covers'])}; "
        f"{html.escape(r['interval_method'])}</li>"
        for r in data["runs"]
    )
    advice = "".join(f"<li>{html.escape(a)}</li>" for a in data["advice"])
    sources = "; ".join(
        f"{label} = {' + '.join(paths)}" for label, paths in data["sources"].items()
    )
    figures = _figures(
        [
            ("Where each run sits on the speedup surface", lambda p: p.runs_surface(data)),
            ("Measured against predicted speedup", lambda p: p.measured_vs_predicted(data)),
        ]
    )
    title = "; ".join(printable(r["headline"]) for r in data["runs"][:1]) or "breakeven compare"
    body = f"""<header>{headlines}</header>
{_made_by("breakeven compare", sources)}
<h2>Runs against {html.escape(printable(data["baseline"]))}</h2>
{html_table(*compare_rows(data)) if data["runs"] else ""}
{"<p>How each interval was estimated:</p><ul>" + intervals + "</ul>" if intervals else ""}
{levels_html(data)}
{_categories_html(data)}
<h2>Flags</h2>
{_flags_html(data["flags"], "No flags: baselines agree and predictions match within the tolerance.")}
{"<h2>Advice</h2><ul>" + advice + "</ul>" if advice else ""}
<h2>Figures</h2>
{figures}
{_HOW_TO_READ.format(tolerance=data["tolerance"])}"""
    return _page(title, body)


def _write_page(out_dir: str, force: bool, make: Callable[[], str]) -> str:
    """``out_dir/report.html``, atomically, never over a file without ``force``; the page is
    made only after the path is known to be writable."""
    path = check_report_dir(out_dir, force)
    page = make()
    try:
        os.makedirs(out_dir, exist_ok=True)
        write_text(path, lambda f: f.write(page), force=force)
    except OSError as e:  # after the checks: a full disk, a directory removed meanwhile
        raise output_error("out", out_dir, e) from None
    return path


def check_report_dir(out_dir: str, force: bool, name: str = "out") -> str:
    """The report's path in ``out_dir``, refused (naming ``name``) when the directory cannot
    be written or the report exists and ``force`` is not given."""
    check_output_path(out_dir, name, directory=True)
    path = os.path.join(out_dir, "report.html")
    refuse_overwrite(path, force, name)
    return path


def write_report(result: Any, out_dir: str, *, source: str, force: bool = False) -> str:
    """``breakeven report``'s page of a check (a :class:`~breakeven.measurements.check.CheckResult` or its
    ``to_dict()``) of the measurements ``source`` names, in ``out_dir/report.html``
    atomically; returns its path."""
    return _write_page(out_dir, force, lambda: check_page(result, source))


def write_compare_report(result: Any, out_dir: str, *, force: bool = False) -> str:
    """``compare``'s report page in ``out_dir/report.html`` atomically; returns its path."""
    return _write_page(out_dir, force, lambda: compare_page(result))


def fleet_page(result: Any, series: dict[str, Any]) -> str:
    """``fleet --report``'s page of a :class:`~breakeven.fleet.view.FleetResult` (or its
    ``to_dict()``) and each server's accept_len over time (``series``): the servers worst
    first (flagged ones in red), their flags, accept_len over time per server and the time
    each spent above its break-even batch."""
    result = _data(result)
    instances = result["instances"]
    flagged = sum(1 for i in instances if i["flags"])
    headline = (
        f"{len(instances)} servers, {flagged} flagged"
        if flagged
        else f"{len(instances)} servers, none flagged"
    )
    table = fleet_html(result)
    flags = [
        {"code": f, "message": f"{i['instance']}: {n}"}
        for i in instances
        for f, n in zip(i["flags"], i["notes"], strict=False)
    ]
    body = (
        f'<p class="headline {"loss" if flagged else "win"}">{html.escape(headline)}</p>'
        f"{_made_by('breakeven fleet', result['prometheus'])}<h2>Servers</h2>{table}"
        f"<h2>Flags</h2>{_flags_html(flags, 'No flags.')}<h2>Figures</h2>"
        + _figures(
            [
                ("accept_len over time, per server", lambda p: p.fleet_acceptance(series)),
                ("time above the break-even batch", lambda p: p.fleet_above(instances)),
            ]
        )
    )
    return _page("Speculative decoding across the fleet", body)


def write_fleet_report(
    result: Any, series: dict[str, Any], out_dir: str, *, force: bool = False
) -> str:
    """``fleet``'s report page in ``out_dir/report.html`` atomically; returns its path."""
    return _write_page(out_dir, force, lambda: fleet_page(result, series))
