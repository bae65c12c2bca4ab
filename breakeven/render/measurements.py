"""Renderers of measurements: ``check``, ``compare``, ``bench`` and ``ingest``."""

from __future__ import annotations

import html
import math
from typing import Any

from breakeven.render.levels import across_nodes_lines, breakeven_rate_lines, level_lines
from breakeven.render.text import (
    VERDICT_ROLES,
    Row,
    fitted,
    grid,
    html_table,
    interval_text,
    k_text,
    num,
    paint,
    printable,
    shared_columns,
    with_hardware,
)

_CHECK_COLUMNS = [
    "model",
    "label",
    "k [tokens]",
    "tok_s [tok/s]",
    "baseline [tok/s]",
    "measured [x]",
    "95% CI [x]",
    "verdict",
    "accept_len [tokens/cycle]",
    "predicted [x]",
    "residual [x]",
    "implied cycle [ms]",
    "flags",
]


_CHECK_OPTIONAL = (
    "implied cycle [ms]",
    "residual [x]",
    "predicted [x]",
    "accept_len [tokens/cycle]",
    "tok_s [tok/s]",
    "baseline [tok/s]",
    "hardware",
)
"""The check table's columns a narrow terminal leaves out, the first first (``--json`` and
``--wide`` give them all; a cluster's hardware, which names its node, is kept)."""

_NAMES = ("model", "hardware", "label", "run", "file")
"""Columns of names, which a narrow terminal shortens (marked ``~``) before it drops columns."""


def _check_rows(r: Row) -> tuple[list[str], list[list[str]]]:
    """The check table's heads and cells (model names whole; hardware where runs differ)."""
    rows = []
    for c in r["comparisons"]:
        rows.append(
            [
                printable(c["model"]) or "-",
                printable(c["label"]) or "-",
                k_text(c["num_spec_tokens"]),
                num(c["tok_s"], ".2f"),
                num(c["baseline_tok_s"], ".2f"),
                num(c["measured_speedup"], ".3f"),
                interval_text(c["ci_low"], c["ci_high"]),
                c["verdict"],
                num(c["accept_len"], ".3f"),
                num(c["predicted_speedup"], ".3f"),
                num(c["residual"], "+.3f"),
                num(c["implied_cycle_ms"], ".3f"),
                ", ".join(c["flags"]) or "-",
            ]
        )
    heads = _CHECK_COLUMNS
    loads = [num(c["concurrency"], "g") for c in r["comparisons"]]
    if len(set(loads)) > 1:  # a sweep's loads: otherwise its rows read alike
        heads = [*heads[:2], "concurrency [sequences]", *heads[2:]]
        rows = [[*row[:2], load, *row[2:]] for row, load in zip(rows, loads, strict=True)]
    rates = [num(c.get("request_rate"), "g") for c in r["comparisons"]]
    if len(set(rates)) > 1:  # open-loop levels: each its request rate
        heads = [*heads[:2], "rate [req/s]", *heads[2:]]
        rows = [[*row[:2], rate, *row[2:]] for row, rate in zip(rows, rates, strict=True)]
    hardware = [c["hardware"] for c in r["comparisons"]]
    return with_hardware(heads, rows, hardware, after=0)


def _flag_where(f: Row) -> str:
    lines, count = f["lines"], f.get("line_count", len(f["lines"]))
    more = f" and {count - len(lines)} more" if count > len(lines) else ""
    return f" (lines {', '.join(map(str, lines))}{more})" if lines else ""


VERDICT_ORDER = (
    "faster",
    "slower",
    "within noise",
    "no interval",
    "not measured",
    "too noisy",
    "looks swapped",
    "implausible",
)
"""The verdicts of a speculative run against its baseline, in the order a headline counts
them."""


def check_headline(r: Row) -> str:
    """check's answer in one line: how many runs pay, lose or are within noise, and the flags'
    codes, e.g. ``3 speculative runs: 2 faster, 1 within noise; flags: baseline_drift (1)``."""
    comparisons = r["comparisons"]
    if not comparisons:
        return (
            "No speculative run to compare: no row has num_spec_tokens > 0 and a rate (tok_s, "
            "a speedup or a cycle's time); rows with acceptance only are fit's."
        )
    counts: dict[str, int] = dict.fromkeys(VERDICT_ORDER, 0)
    for c in comparisons:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    codes: dict[str, int] = {}
    for f in r["flags"]:
        codes[f["code"]] = codes.get(f["code"], 0) + 1
    flags = ", ".join(f"{code} ({n})" for code, n in codes.items()) or "none"
    runs = f"{len(comparisons)} speculative run{'s' if len(comparisons) != 1 else ''}"
    return doubt_line(comparisons) + f"{runs}: {said}; flags: {flags}."


def doubt_line(comparisons: list[Row]) -> str:
    """The data-quality verdict that comes before any speedup, with its line break, where
    some run's data cannot decide (check's ``DOUBT`` verdicts); else empty."""
    said = []
    noisy = [c for c in comparisons if c["verdict"] == "too noisy"]
    if noisy:
        worst = max((c.get("launch_spread") or math.nan for c in noisy), key=_finite)
        said.append(
            f"Too noisy to decide: launches of one configuration disagree up to "
            f"{num(worst, '.2f')}x (launches_disagree), so no speedup below is an answer; "
            "measure on a quiet host and add --repeats."
        )
    if any(c["verdict"] == "looks swapped" for c in comparisons):
        said.append(
            "The baseline and the speculative run look swapped (swapped_pair): the "
            "baseline shows speculation and the speculative run none."
        )
    if any(c["verdict"] == "implausible" for c in comparisons):
        said.append(
            "A measured speedup is above k + 1, which no cycle can give "
            "(speedup_above_bound): a rate is not per sequence or not of this load."
        )
    return "".join(s + "\n" for s in said)


def _finite(x: float) -> float:
    return x if x == x else -math.inf


@fitted
def check_text(r: Row) -> str:
    """What ``breakeven check`` prints (from ``CheckResult.to_dict()``): its headline
    (:func:`check_headline`), then comparisons, server cross-checks, flags."""
    lines = [
        check_headline(r),
        *breakeven_rate_lines(r),
        "",
        "Speculative runs against the baseline of the same model, hardware and concurrency:",
    ]
    heads, rows = _check_rows(r)
    if rows:
        keep = -1 if r.get("across_nodes") else None  # hardware names a cluster's node: kept
        lines += grid(heads, rows, right=False, optional=_CHECK_OPTIONAL[:keep], cut=_NAMES)
    else:
        lines.append("  none: no row has num_spec_tokens > 0 and a rate")
    lines.append(
        "measured = tok_s / baseline tok_s (per sequence); predicted = accept_len x "
        "step_ms / cycle_ms; implied cycle = 1000 x accept_len / tok_s."
    )
    lines += across_nodes_lines(r)
    if r["server_checks"]:
        lines += ["", "Server log against client benchmark:"]
        for c in r["server_checks"]:
            word = "agree" if c["agree"] else "DISAGREE"
            lines.append(
                f"  {printable(c['run_id'])}: server {num(c['server_tok_s'], '.2f')} "
                f"tok/s, client {num(c['client_tok_s'], '.2f')} tok/s "
                f"({num(c['ratio'], '.3f')}x): {word} within {r['tolerance']:.0%}"
            )
    flags = r["flags"]
    lines += ["", f"Flags ({len(flags)}):" if flags else "Flags: none."]
    lines += [f"  [{f['code']}] {printable(f['message'])}{_flag_where(f)}" for f in flags]
    lines += level_lines(r)
    lines += _category_lines(r)
    lines += _position_lines(r)
    if "schedule_check" in r:
        lines += _against_lines(r["schedule_check"])
    if "fit_check" in r:
        lines += _against_lines(r["fit_check"], fit=True)
    return "\n".join(lines) + "\n"


def check_html(r: Row, flags: bool = True) -> str:
    """The check table (and, with ``flags``, the flags) as HTML, for notebooks and reports;
    a model every run shares is said once above the table (:func:`shared_columns`)."""
    heads, rows, shared = shared_columns(*_check_rows(r), names=("model",))
    said = "; ".join(f"{h} <code>{html.escape(v)}</code>" for h, v in shared)
    table = (f"<p>Every run: {said}.</p>" if said else "") + html_table(heads, rows)
    if not flags:
        return table
    items = "".join(
        f"<li><code>{html.escape(f['code'])}</code> {html.escape(printable(f['message']))}</li>"
        for f in r["flags"]
    )
    return f"{table}<ul>{items}</ul>"


_COMPARE_COLUMNS = [
    "run",
    "k [tokens]",
    "concurrency [sequences]",
    "tok_s [tok/s]",
    "baseline [tok/s]",
    "speedup [x]",
    "95% interval [x]",
    "verdict",
    "accept_len [tokens/cycle]",
    "break-even accept_len [tokens/cycle]",
    "implied cycle [ms]",
    "predicted [x]",
    "residual [x]",
    "flags",
]


_COMPARE_OPTIONAL = (
    "implied cycle [ms]",
    "residual [x]",
    "predicted [x]",
    "break-even accept_len [tokens/cycle]",
    "accept_len [tokens/cycle]",
    "tok_s [tok/s]",
    "baseline [tok/s]",
    "hardware",
)
"""The compare table's columns a narrow terminal leaves out, the first first."""


def compare_rows(result: Row) -> tuple[list[str], list[list[str]]]:
    """The compare table's heads and cells, one row per speculative run (a hardware column
    where the runs differ in hardware)."""
    rows = []
    for r in result["runs"]:
        rows.append(
            [
                printable(r["label"]),
                k_text(r["num_spec_tokens"]),
                num(r["concurrency"], "g"),
                num(r["tok_s"], ".2f"),
                num(r["baseline_tok_s"], ".2f"),
                num(r["measured_speedup"], ".3f"),
                interval_text(r["ci_low"], r["ci_high"]),
                r["verdict"],
                num(r["accept_len"], ".3f"),
                num(r["breakeven_accept_len"], ".3f"),
                num(r["implied_cycle_ms"], ".3f"),
                num(r["predicted_speedup"], ".3f"),
                num(r["residual"], "+.3f"),
                ", ".join(r["flags"]) or "-",
            ]
        )
    heads = _COMPARE_COLUMNS
    if any(r.get("request_rate") is not None for r in result["runs"]):  # open-loop levels
        heads = [*heads[:2], "rate [req/s]", *heads[2:]]
        rates = [num(r.get("request_rate"), "g") for r in result["runs"]]
        rows = [[*row[:2], rate, *row[2:]] for row, rate in zip(rows, rates, strict=True)]
    hardware = [r.get("hardware") for r in result["runs"]]
    return with_hardware(heads, rows, hardware, after=0)


_AGAINST_COLUMNS = [
    "run",
    "batch [sequences]",
    "k [tokens]",
    "schedule's k [tokens]",
    "measured [x]",
    "95% interval [x]",
    "predicted [x]",
    "verdict",
]

_AGAINST_FIT_COLUMNS = [
    "run",
    "batch [sequences]",
    "k [tokens]",
    "measured [x]",
    "95% interval [x]",
    "predicted [x]",
    "residual [x]",
    "verdict",
]


def predicted_text(r: Row) -> str:
    """A prediction with its interval where it has one: ``1.120 (1.080-1.160)`` [x]."""
    text = num(r["predicted_speedup"], ".3f")
    if r.get("predicted_low") is None or r.get("predicted_high") is None:
        return text
    return f"{text} ({interval_text(r['predicted_low'], r['predicted_high'])})"


def _against_lines(rows: list[Row], fit: bool = False) -> list[str]:
    """Each run against a schedule (``--schedule``: its batch, k, the schedule's k and
    predicted speedup there) or a fit (``--fit-file``: the speedup the fit predicts at its
    k, and the residual), with the verdict."""
    title = (
        "Against the fit (predicted: the run's accept_len x the baseline's step / the cycle "
        "the fit gives at its k, with the fit's interval):"
        if fit
        else "Against the schedule (predicted: its speedup at the run's batch, with its k):"
    )
    lines = ["", title]
    if not rows:
        return [*lines, "  no run with a measured speedup and a concurrency"]
    cells = [
        [
            printable(str(r["label"])),
            num(r["batch"], "g"),
            "-" if r["k"] is None else f"{r['k']:g}",
            *([] if fit else ["-" if r["schedule_k"] is None else str(r["schedule_k"])]),
            num(r["measured_speedup"], ".3f"),
            interval_text(r["ci_low"], r["ci_high"]),
            predicted_text(r),
            *([num(r["residual"], "+.3f")] if fit else []),
            r["verdict"],
        ]
        for r in rows
    ]
    heads = _AGAINST_FIT_COLUMNS if fit else _AGAINST_COLUMNS
    optional = ("residual [x]",) if fit else ("predicted [x]",)
    lines += grid(heads, cells, right=False, optional=optional, cut=_NAMES)
    lines.append(
        "holds: the run's interval overlaps the prediction's (where a prediction has none, "
        "the tolerance stands in for it); off: it does not; "
        + (
            "no fit: the fit file has no group for the run, or the run no k or accept_len."
            if fit
            else "other k: the run used another k than the schedule deploys there."
        )
    )
    return lines


_CATEGORY_COLUMNS = [
    "run",
    "category",
    "requests",
    "accept_len [tokens/cycle]",
    "95% interval [tokens/cycle]",
    "acceptance [fraction]",
    "speedup [x]",
    "95% interval [x]",
    "verdict",
]
LEVEL_NOTE = (
    "(level): the run's accept_len over the whole level, from the server's counters (its "
    "requests gave no counts of their own): the same for every category, with no interval."
)
"""What a category's accept_len marked ``(level)`` is (``acceptance_from`` 'level')."""


def _from_level(row: Row) -> bool:
    """Whether a category row's accept_len is its run's level value, not its requests'."""
    return row.get("acceptance_from") == "level"


def _category_lines(result: Row) -> list[str]:
    """Each run's rows by workload category (``categories``), then its speedup over the mix
    given (``mix``), the categories that lose, and the break-even mix."""
    rows = result.get("categories") or []
    if not rows:
        return []
    cells = [
        [
            printable(str(r["label"])),
            printable(str(r["category"])),
            f"{r['requests']} / {r['baseline_requests']}",
            num(r["accept_len"], ".3f") + (" (level)" if _from_level(r) else ""),
            interval_text(r["accept_len_low"], r["accept_len_high"]),
            num(r.get("acceptance_rate"), ".3f"),
            num(r["speedup"], ".3f"),
            interval_text(r["ci_low"], r["ci_high"]),
            r["verdict"],
        ]
        for r in rows
    ]
    heads = _CATEGORY_COLUMNS
    if all(r.get("acceptance_rate") is None for r in rows):  # no request gave its drafts
        at = heads.index("acceptance [fraction]")
        heads = heads[:at] + heads[at + 1 :]
        cells = [c[:at] + c[at + 1 :] for c in cells]
    lines = ["", "By workload category (speculative / baseline requests of the category):"]
    lines += grid(heads, cells, right=False, optional=("acceptance [fraction]",), cut=_NAMES)
    if any(_from_level(r) for r in rows):
        lines.append(LEVEL_NOTE)
    for m in result.get("mix") or []:
        shares = ", ".join(f"{printable(c)} {w:.0%}" for c, w in m["mix"])
        lines.append(
            f"{printable(str(m['label']))} over the mix ({shares} of the tokens): "
            f"{num(m['speedup'], '.3f')}x ({interval_text(m['low'], m['high'])}, every "
            "category at its interval's end)."
        )
        if m["losing"]:
            lost = ", ".join(f"{printable(c)} ({s:.3f}x)" for c, s in m["losing"])
            lines.append(f"  Loses on {lost}.")
        share = m["breakeven_share"]
        if share is not None:
            lines.append(
                f"  Speculation stops paying when the losing categories are above {share:.0%} "
                "of the tokens (each side in the mix's proportions)."
            )
        elif not m["losing"]:
            lines.append("  No category loses: it pays at any mix of these.")
    return lines


_POSITION_COLUMNS = [
    "run",
    "k",
    "cycles",
    "a_1 ... a_k [fraction]",
    "accept_len at k = 1, 2, ... [tokens/cycle]",
]


def _position_lines(result: Row) -> list[str]:
    """Each run's acceptance by draft position (``positions``), its accept_len at every
    smaller k, and the command that prices them."""
    rows = result.get("positions") or []
    if not rows:
        return []
    cells = [
        [
            printable(str(r["label"])),
            str(r["k"]),
            num(r["cycles"], ",.0f"),
            ", ".join(f"{a:.3f}" for a in r["per_position"]),
            ", ".join(f"{t:.2f}" for t in r["accept_len_by_k"]),
        ]
        for r in rows
    ]
    first = rows[0]["per_position"]
    return [
        "",
        "By draft position (pooled from counts; a smaller k cuts the same drafts, so its "
        "accept_len is 1 + a_1 + ... + a_k):",
        *grid(_POSITION_COLUMNS, cells, right=False, optional=(), cut=_NAMES),
        "Price every k with its costs (a fit file from breakeven fit --out):",
        "  breakeven optimize --per-position "
        + ",".join(f"{a:.3f}" for a in first)
        + " --fit-file FIT.json",
    ]


def _headline_lines(r: Row) -> list[str]:
    """A run's headline, then, where its baseline's launch was flagged, why."""
    note = r.get("launch_note")
    why = [f"  {printable(note[:1].upper() + note[1:])}."] if note else []
    return [paint(printable(r["headline"]) + ".", VERDICT_ROLES.get(r["verdict"])), *why]


@fitted
def compare_text(result: Row) -> str:
    """What ``breakeven compare`` prints, from ``CompareResult.to_dict()``: the headlines
    first, then a row per speculative run, check's flags and advice."""
    runs = result["runs"]
    lines = breakeven_rate_lines(result)
    lines += [line for r in runs for line in _headline_lines(r)] or [
        f"No speculative run could be compared with {printable(result['baseline'])}."
    ]
    heads, rows = compare_rows(result)
    if rows:
        lines += ["", *grid(heads, rows, right=False, optional=_COMPARE_OPTIONAL, cut=_NAMES)]
        lines.append(
            "speedup = tok_s / baseline tok_s (per sequence); implied cycle = 1000 x "
            "accept_len / tok_s; break-even accept_len = cycle_ms / step_ms."
        )
        lines += [
            f"Interval of {printable(r['label'])}: {r['interval_covers']}; {r['interval_method']}."
            for r in runs
        ]
    flags = result["flags"]
    lines += ["", f"Flags ({len(flags)}):" if flags else "Flags: none."]
    lines += [f"  [{f['code']}] {printable(f['message'])}" for f in flags]
    if result["advice"]:
        lines += ["", "Advice:", *(f"  {a}" for a in result["advice"])]
    lines += level_lines(result)
    lines += _category_lines(result)
    lines += _position_lines(result)
    if "schedule_check" in result:
        lines += _against_lines(result["schedule_check"])
    if "fit_check" in result:
        lines += _against_lines(result["fit_check"], fit=True)
    return "\n".join(lines) + "\n"


def compare_html(result: Row) -> str:
    """The headlines, the compare table and the flags as HTML, for notebooks (``breakeven
    compare --report`` writes the whole page: :func:`breakeven.render.report.compare_page`)."""
    headlines = "".join(
        f"<p><b>{html.escape(printable(r['headline']))}.</b></p>" for r in result["runs"]
    )
    if not headlines:
        headlines = (
            f"<p>No speculative run could be compared with "
            f"{html.escape(printable(result['baseline']))}.</p>"
        )
    table = html_table(*compare_rows(result)) if result["runs"] else ""
    items = "".join(
        f"<li><code>{html.escape(f['code'])}</code> {html.escape(printable(f['message']))}</li>"
        for f in result["flags"]
    )
    return f"{headlines}{table}<ul>{items}</ul>"


def _speedup_interval_line(r: Row) -> str:
    if r["ci_low"] is None or r["ci_high"] is None:
        where = "no interval"
    else:
        where = f"95% interval {interval_text(r['ci_low'], r['ci_high'])}"
    return (
        f"Speedup {num(r['speedup'], '.3f')}x, {where} ({printable(r['interval_covers'])}; "
        f"{printable(r['interval_method'])})."
    )


@fitted
def speedup_interval_text(r: Row) -> str:
    """A speedup and its 95% interval [x], what it covers and how it was estimated (from
    ``SpeedupInterval.to_dict()``)."""
    return _speedup_interval_line(r) + "\n"


def speedup_interval_html(r: Row) -> str:
    """The same as HTML, for notebooks."""
    return f"<p>{html.escape(_speedup_interval_line(r))}</p>"


def bench_headline(levels: list[dict[str, Any]], label: str) -> str:
    """bench's answer in one line: the per-sequence rate at each level, and accept_len where
    the server counted it, e.g. ``baseline: 62.90 tok/s per sequence at concurrency 1, 51.20
    at 4.``  A level whose every request came in one burst has no client rate: the server's
    own counters' is given in its place, and said to be theirs."""
    rated = [_level_rate(v) for v in levels]
    rates = [text for text, _ in rated]
    loads = [_load(v) for v in levels]
    axis = "request rate" if levels and levels[0].get("request_rate") is not None else "concurrency"
    said = ", ".join(
        f"{r} tok/s per sequence at {axis} {c}" if i == 0 else f"{r} at {c}"
        for i, (r, c) in enumerate(zip(rates, loads, strict=True))
    )
    taus = [num(v.get("accept_len"), ".2f") for v in levels if v.get("accept_len") is not None]
    accepted = f"; accept_len {', '.join(taus)}" if taus else ""
    held = any(server for _, server in rated)
    why = " (server's: every request came in one burst, which the client cannot time)"
    return f"{printable(label)}: {said}{accepted}{why if held else ''}."


def _load(level: dict[str, Any]) -> str:
    """A level's load as bench's text names it: its concurrency, or its request rate
    (``2 req/s``, with its cap: ``2 req/s (max 4)``)."""
    rate = level.get("request_rate")
    if rate is None:
        return f"{level['concurrency']}"
    cap = level.get("concurrency")
    return f"{rate:g} req/s" + (f" (max {cap})" if cap else "")


def _latency_lines(levels: list[dict[str, Any]]) -> list[str]:
    """bench's load and latency table: each level's offered and achieved request rates, its
    completed requests per second, its mean and most requests in flight, and the p50, p90
    and p99 of its ttft_ms, tpot_ms and e2e_ms."""
    heads = [
        "load",
        "offered [req/s]",
        "achieved [req/s]",
        "completed [req/s]",
        "in flight (mean, max)",
        "ttft p50/p90/p99 [ms]",
        "tpot p50/p90/p99 [ms]",
        "e2e p50/p90/p99 [ms]",
    ]
    rows = []
    for v in levels:
        row = [
            _load(v),
            num(v.get("request_rate"), ".3g"),
            num(v.get("arrival_rate"), ".3g"),
            num(v.get("request_throughput"), ".3g"),
            f"{num(v.get('mean_in_flight'), '.2f')}, {v.get('max_in_flight', '-')}",
        ]
        for name in ("ttft", "tpot", "e2e"):
            row.append("/".join(num(v.get(f"{name}_{p}_ms"), ".1f") for p in ("p50", "p90", "p99")))
        rows.append(row)
    return [
        "",
        "Load and latency by level (achieved: requests sent over the time to the last send; "
        "in flight: e2e summed over the level's duration, Little's law):",
        *grid(heads, rows, right=True),
    ]


def _level_rate(level: dict[str, Any]) -> tuple[str, bool]:
    """A level's per-sequence rate as the headline says it, the client's, else the server's
    (marked), and whether it is the server's."""
    client = level.get("tok_s")
    server = (level.get("server") or {}).get("tok_s")
    if isinstance(client, float) and not math.isnan(client):
        return f"{client:.2f}", False
    if isinstance(server, float) and server > 0:
        return f"{server:.2f} (server's)", True
    return "-", False


@fitted
def bench_text(levels: list[dict[str, Any]], label: str) -> str:
    """What ``breakeven bench`` prints: one line per concurrency level."""
    heads = [
        "request rate" if levels and levels[0].get("request_rate") is not None else "concurrency",
        "requests",
        "failed",
        "bursts",
        "tok_s [tok/s]",
        "median [tok/s]",
        "IQR [tok/s]",
        "aggregate_tok_s [tok/s]",
        "accept_len [tokens/cycle]",
    ]
    rows = [
        [
            _load(v),
            str(v["requests"]),
            str(v["failed"]),
            str(v.get("bursts", 0)),
            num(v["tok_s"], ".2f"),
            num(v.get("tok_s_median"), ".2f"),
            num(v.get("tok_s_iqr"), ".2f"),
            num(v["aggregate_tok_s"], ".2f"),
            num(v.get("accept_len"), ".3f"),
        ]
        for v in levels
    ]
    if any(v.get("server") for v in levels):  # the server's own counters (llama.cpp)
        heads += ["server tok_s [tok/s]", "server step or cycle [ms]"]
        for row, v in zip(rows, levels, strict=True):
            server = v.get("server") or {}
            ms = server.get("cycle_ms") or server.get("step_ms")
            kind = " (cycle)" if server.get("cycle_ms") else " (step)" if ms else ""
            row += [num(server.get("tok_s"), ".2f"), num(ms, ".3f") + kind]
    lines = [
        bench_headline(levels, label),
        "",
        "Per-sequence decode rate by level (tok_s: the decoded tokens over the decode time, "
        "summed over requests; prefill and bursts excluded), the requests' median and "
        "interquartile range, and the aggregate rate:",
        *grid(heads, rows, right=True),
    ]
    if any("duration_s" in v for v in levels):
        lines += _latency_lines(levels)
    return "\n".join(lines) + "\n"


MAX_NOTES = 5
"""The records' notes ingest's summary says, the most: --json gives every record's."""
MAX_SUMMARY_LINES = 40
"""The lines (runs and concurrencies) ingest's summary shows, the most: --json gives the rest."""


@fitted
def ingest_text(tally: Any, tok_s_meanings: dict[str, str] | None = None) -> str:
    """A summary of ingested records, one line per file, format, run and concurrency (a
    :class:`~breakeven.iotools.pipeline.RunTally`; a plain
    :class:`~breakeven.iotools.records.Tally` gives one per file and format), with what
    ``tok_s`` means for each record format seen (``tok_s_meanings``, by format)."""
    if not tally.records:
        return "No records.\n"
    files = len({key[0] for key in tally.groups})
    formats = ", ".join(dict.fromkeys(key[1] for key in tally.groups))
    categories = any(len(key) > 5 and key[5] for key in tally.groups)
    heads = [
        "file",
        "run",
        "concurrency",
        *(["category"] if categories else []),
        "format",
        "records",
        "k",
        "launches",
        "accept_len [tokens/cycle]",
        "tok_s [tok/s]",
        "tok_s from",
        "mean aggregate_tok_s [tok/s]",
    ]
    cells = _ingest_cells(tally, categories)
    shown = cells[:MAX_SUMMARY_LINES]
    lines = [
        f"{tally.records} record{'s' * (tally.records != 1)} from {files} "
        f"file{'s' * (files != 1)} ({formats}), by file, "
        + ("run, concurrency and category:" if categories else "run and concurrency:"),
        "",
    ]
    lines += grid(
        heads,
        shown,
        right=False,
        indent="",
        optional=("mean aggregate_tok_s [tok/s]", "launches", "format", "k", "tok_s from"),
        cut=("file", "run"),
    )
    if len(cells) > len(shown):
        lines.append(
            f"And {len(cells) - len(shown)} more runs or concurrencies: --json lists every record."
        )
    lines.append("")
    lines.append(
        "Every record: --json lists them, --out writes the measurements CSV. Each line is one "
        + (
            "file, run (label / run_id), concurrency and workload category"
            if categories
            else "file, run (label / run_id) and concurrency"
        )
        + ": nothing is pooled across them. accept_len "
        "is pooled from counts, 1 + sum(accepted) / sum(drafts), where the records give their "
        "drafts; tok_s is a ratio of sums, decoded tokens over their time (tok_s from: "
        "tokens/time), where the records give their tokens, else the mean of their rates "
        "(mean of N rates). tok_s is per sequence:"
    )
    lines += _ingest_note_lines(tally, tok_s_meanings)
    return "\n".join(lines) + "\n"


def _ingest_cells(tally: Any, categories: bool) -> list[list[str]]:
    """The cells of :func:`ingest_text`'s table, one row a group of the tally (``categories``:
    with the workload category's column)."""
    basis = getattr(tally, "rate_basis", None)
    cells = []
    for key, g in tally.groups.items():
        path, fmt, run_id, label, concurrency, category = (*key, None, None, None, None)[:6]
        tau, tok, agg = (tally.mean(g, m) for m in ("accept_len", "tok_s", "aggregate_tok_s"))
        run = " / ".join(str(part) for part in (label, run_id) if part) or "-"
        cells.append(
            [
                path,
                run,
                num(concurrency, "g"),
                *([printable(category or "-")] if categories else []),
                fmt,
                str(g["records"]),
                ",".join(map(str, sorted(g["k"]))) or "-",
                str(len(g["launches"])) if g["launches"] else "-",
                num(tau, ".3f"),
                num(tok, ".2f"),
                basis(g) if basis is not None else "-",
                num(agg, ".2f"),
            ]
        )
    return cells


def _ingest_note_lines(tally: Any, tok_s_meanings: dict[str, str] | None) -> list[str]:
    """The lines under :func:`ingest_text`'s explanation: what ``tok_s`` means for each record
    format seen, the records' notes and the files whose dates have no year."""
    lines: list[str] = []
    meanings = tok_s_meanings or {}
    for fmt in tally.formats():
        lines.append(f"  {fmt}: {meanings.get(fmt, 'as the source gives it')}")
    notes = list(tally.notes().items())
    for note, n in notes[:MAX_NOTES]:
        lines.append(f"Note ({n} record{'s' * (n != 1)}): {note}.")
    if len(notes) > MAX_NOTES:
        lines.append(f"And {len(notes) - MAX_NOTES} more notes: --json gives each record's.")
    yearless = [key[0] for key, g in tally.groups.items() if g["yearless"]]
    if yearless:
        lines.append(
            f"Dates without a year in {', '.join(dict.fromkeys(yearless))}: kept as printed, so "
            "check tells no launch's age from them; give --year YYYY to date them."
        )
    return lines


def check_table(r: Row) -> tuple[list[str], list[list[str]]]:
    """check's table, every column: the heads and cells of ``--format markdown|csv``."""
    return _check_rows(r)


def compare_table(r: Row) -> tuple[list[str], list[list[str]]]:
    """compare's table, every column: the heads and cells of ``--format markdown|csv``."""
    return compare_rows(r)
