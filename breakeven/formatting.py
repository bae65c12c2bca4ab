"""Text and HTML renderings of results.  Pure string building, no I/O."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from breakeven.quantities import LARGEST_FIXED, QUANTITIES, number_text

# Every renderer takes plain rows, a result's ``to_dict()`` (what ``--json`` prints), never the
# result itself: this module imports no analysis module, and text and JSON cannot disagree.
Row = dict[str, Any]

# Sections of the predict table, in order, and why a field can be null.
_SECTIONS = (
    (
        "Inputs",
        (
            "baseline_tok_s",
            "step_ms",
            "verify_ms",
            "draft_ms",
            "overhead_ms",
            "cycle_ms",
            "cost_ratio",
            "k",
            "accept_len",
            "alpha",
        ),
    ),
    ("With speculation", ("speedup", "spec_tok_s")),
    (
        "Break-even",
        (
            "breakeven_accept_len",
            "breakeven_alpha",
            "max_cycle_ms",
            "max_verify_ms",
            "max_draft_ms",
            "max_baseline_tok_s",
        ),
    ),
)
_WHY_NONE = {
    "breakeven_alpha": "none: even alpha = 1 is not enough at this k",
    "max_verify_ms": "none: drafting and overhead alone exceed the budget",
    "max_draft_ms": "none: verify and overhead alone exceed the budget",
}


# Terminal escape sequences (CSI such as colours and screen clears, OSC such as window titles,
# and two-byte ones), then any control character left: C0, DEL, C1 and the bidirectional
# overrides that reorder what a terminal shows.  Each alternative scans a run once: linear.
_CONTROL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_]?)"
    r"|[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: Any) -> str:
    """``text`` as it may be printed: tabs and line breaks as spaces, terminal escape
    sequences and other control characters removed (a CSV cell could clear the screen)."""
    text = str(text)
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda m: " " if m.group() in "\t\n\r\x0b\x0c" else "", text)


def format_value(key: str, value: Any) -> str:
    """``value`` with the decimals its quantity is shown with (JSON keeps full precision)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _WHY_NONE.get(key, "none")
    if isinstance(value, int):
        return str(value)
    return number_text(value, QUANTITIES[key].decimals)


def _rows(p: Row) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """Sections of a prediction's rows: the keys ``to_dict`` has (None: no value satisfies)."""
    sections = []
    target = p.get("target_speedup", 1.0)
    for title, keys in _SECTIONS:
        rows = [_kv_row(key, p[key]) for key in keys if key in p]
        if rows:
            if title == "Break-even" and target != 1.0:
                title = f"Target speedup {target:g}x"
            sections.append((title, rows))
    return sections


def _is_number(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def verdict(p: Row) -> str | None:
    """One sentence: does speculation pay at these measurements (a prediction's dict)?"""
    speedup, tau, needed = (p.get(k) for k in ("speedup", "accept_len", "breakeven_accept_len"))
    if speedup is None or tau is None or needed is None:
        return None
    s = p.get("target_speedup", 1.0)
    goal = "break even" if s == 1.0 else f"reach {s:g}x"
    if speedup > s:
        word = "pays" if s == 1.0 else "reaches the target"
        how = f"accept_len {number_text(tau, 3)} > {number_text(needed, 3)} needed to {goal}"
        return f"Speculation {word}: {number_text(speedup, 3)}x the baseline rate ({how})."
    if speedup == s:
        return f"Speculation breaks exactly even at {number_text(speedup, 3)}x."
    word = "loses" if s == 1.0 else "misses the target"
    how = f"accept_len {number_text(tau, 3)} <= {number_text(needed, 3)} needed to {goal}"
    return f"Speculation {word}: {number_text(speedup, 3)}x the baseline rate ({how})."


def _kv_lines(sections: list[tuple[str, list[tuple[str, str, str, str]]]]) -> list[str]:
    """Sections of ``label  value unit  key`` lines, values aligned."""
    lines: list[str] = []
    width = max((len(r[1]) for _, rows in sections for r in rows), default=0)
    for title, rows in sections:
        lines.append(f"{title}:")
        for label, value, unit, key in rows:
            lines.append(f"  {label:<28}{value:>{width}} {unit:<14}{key}")
        lines.append("")
    return lines


def _kv_row(key: str, value: Any) -> tuple[str, str, str, str]:
    q = QUANTITIES[key]
    return (q.label, format_value(key, value), q.unit if _is_number(value) else "", key)


def prediction_text(p: Row) -> str:
    """The table ``breakeven predict`` prints (from ``Prediction.to_dict()``): label, value,
    unit and JSON key per line."""
    lines = _kv_lines(_rows(p))
    v = verdict(p)
    if v:
        lines += [v, ""]
    if p.get("breakeven_alpha_by_k"):
        lines.append(_alpha_table_title(p))
        lines.append("   k  breakeven_alpha")
        for row in p["breakeven_alpha_by_k"]:
            lines.append(
                f"  {row['k']:>2}  {format_value('breakeven_alpha', row['breakeven_alpha'])}"
            )
    return "\n".join(lines).rstrip() + "\n"


def _alpha_table_title(p: Row) -> str:
    target = p.get("target_speedup", 1.0)
    goal = "to break even" if target == 1.0 else f"for {target:g}x"
    if p.get("cost_ratio") is not None:
        held = f"cycle = k * {p['cost_ratio']:g} + 1 target steps"
    else:
        held = f"cycle/step = {number_text(p['breakeven_accept_len'] / target, 3)} at every k"
    return f"Smallest per-token acceptance alpha {goal}, by k ({held}):"


def prediction_html(p: Row) -> str:
    """The same table as HTML, for notebooks."""
    out = ["<table>", "<tr><th>quantity</th><th>value</th><th>unit</th><th>key</th></tr>"]
    for title, rows in _rows(p):
        out.append(f'<tr><th colspan="4" style="text-align:left">{html.escape(title)}</th></tr>')
        for label, value, unit, key in rows:
            cells = (label, value, unit, key)
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    v = verdict(p)
    if v:
        out.append(f"<p>{html.escape(v)}</p>")
    return "\n".join(out)


def _grid(
    heads: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: bool,
    indent: str = "  ",
    suffixes: Sequence[str] | None = None,
) -> list[str]:
    """Text columns as wide as their widest cell, two spaces apart; ``suffixes`` end the rows."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    just = str.rjust if right else str.ljust

    def line(cells: Sequence[str]) -> str:
        return (indent + "  ".join(just(c, w) for c, w in zip(cells, widths, strict=True))).rstrip()

    return [line(heads)] + [
        line(row) + (suffixes[i] if suffixes else "") for i, row in enumerate(rows)
    ]


def _table(rows: list[dict[str, Any]], columns: list[str], mark: int | None = None) -> list[str]:
    """Columns headed ``key [unit]``, right-aligned; row ``mark`` gets a ``*``."""
    heads = [f"{c} [{QUANTITIES[c].unit}]" if QUANTITIES[c].unit else c for c in columns]
    cells = [[format_value(c, r[c]) for c in columns] for r in rows]
    return _grid(
        heads, cells, right=True, suffixes=[" *" if i == mark else "" for i in range(len(cells))]
    )


def _optimize_columns(r: Row) -> list[str]:
    """Leviathan's normalised form (no ``step_ms``) has no costs in ms."""
    if "step_ms" not in r:
        return ["k", "accept_len", "speedup"]
    return ["k", "accept_len", "verify_ms", "draft_ms", "cycle_ms", "speedup"]


def _optimize_head(r: Row) -> str:
    by_k = r["by_k"]
    if r["best_k"]:
        return (
            f"Best k: {r['best_k']} draft tokens, speedup {number_text(r['speedup'], 3)}x "
            "(best_k, speedup)."
        )
    top = max(by_k, key=lambda o: o["speedup"])
    return (
        f"Do not speculate: no k in 1..{by_k[-1]['k']} beats plain decoding (best_k = 0; the "
        f"closest is {number_text(top['speedup'], 3)}x at k = {top['k']})."
    )


def optimize_text(r: Row) -> str:
    """What ``breakeven optimize`` prints (from ``OptimizeResult.to_dict()``): the verdict,
    then every k considered."""
    lines = [_optimize_head(r)]
    columns = _optimize_columns(r)
    if "step_ms" not in r:
        lines.append("Leviathan's form: verify = 1 target step, drafting = k * c target steps.")
    else:
        lines.append(f"Plain decode step {number_text(r['step_ms'], 3)} ms at batch {r['batch']}.")
    if r.get("note"):
        lines.append(f"Note: {r['note']}.")
    lines.append("")
    mark = next((i for i, o in enumerate(r["by_k"]) if o["k"] == r["best_k"]), None)
    lines += _table(r["by_k"], columns, mark)
    return "\n".join(lines) + "\n"


_TREE_SEARCH_COLUMNS = [
    "steps",
    "topk",
    "verify tokens",
    "accept_len [tokens/cycle]",
    "cycle [ms]",
    "speedup [x]",
]


def _tree_option(o: Row) -> str:
    return (
        f"steps {o['steps']}, topk {o['topk']}, verify tokens {o['verify_tokens']}: "
        f"accept_len {number_text(o['accept_len'], 3)} (modelled), cycle "
        f"{number_text(o['cycle_ms'], 3)} ms, {number_text(o['speedup'], 3)}x"
    )


def tree_search_text(r: Row) -> str:
    """What ``breakeven optimize --tree`` prints (from ``TreeSearch.to_dict()``): the best tree,
    the best chain, the SGLang flags, and the best trees searched."""
    best, chain = r["best_tree"], r["best_chain"]
    lines = [f"Best tree: {_tree_option(best)}."]
    if chain is not None:
        gain = r["gain_over_chain"]
        lines.append(
            f"Best chain (topk 1, k = steps): {_tree_option(chain)}; the tree "
            f"{'gains' if gain >= 0 else 'loses'} {abs(gain):.1%} over it."
        )
    if best["speedup"] <= 1:
        lines.append("No tree beats plain decoding here: do not speculate.")
    lines.append(
        f"SGLang: --speculative-num-steps {best['steps']} --speculative-eagle-topk "
        f"{best['topk']} --speculative-num-draft-tokens {best['verify_tokens']}"
    )
    a = r["acceptance"]
    lines.append(
        f"Plain decode step {number_text(r['step_ms'], 3)} ms at batch {r['batch']}; "
        f"acceptance alpha {number_text(a['alpha'], 4)}, rank_decay "
        f"{number_text(a['rank_decay'], 4)} ({a['basis']}); {r['searched']} trees "
        f"searched (steps <= {r['bounds']['max_steps']}, topk <= "
        f"{r['bounds']['max_topk']}, verify tokens <= "
        f"{r['bounds']['max_verify_tokens']})."
    )
    lines += [f"Note: {n}." for n in r["notes"]]
    lines.append("")
    rows = [
        [
            str(o["steps"]),
            str(o["topk"]),
            str(o["verify_tokens"]),
            number_text(o["accept_len"], 3),
            number_text(o["cycle_ms"], 3),
            number_text(o["speedup"], 3),
        ]
        for o in r["top"]
    ]
    lines += _grid(_TREE_SEARCH_COLUMNS, rows, right=True, indent="")
    return "\n".join(lines) + "\n"


_ENGINE_NAMES = {
    "vllm": "vLLM (Dynamic SD: num_speculative_tokens_per_batch_size)",
    "sglang": "SGLang (--speculative-adaptive-config)",
    "vllm-legacy": "older vLLM (disable_by_batch_size)",
}
_SCHEDULE_COLUMNS = [
    "batch [sequences]",
    "k [tokens]",
    "speedup [x]",
    "best fixed k [x]",
    "gain [%]",
    "time share [%]",
]


def _loss(x: float) -> str:
    return f"{x:.2%}" if x >= 5e-5 else "less than 0.01%"


def schedule_text(r: Row) -> str:
    """What ``breakeven schedule`` prints (``schedule_report``'s dict): the ranges, what the
    schedule gains over the best fixed k and gives up by merging, and the config to paste."""
    count = len(r["ranges"])
    how = ""
    if r["engine"] == "vllm-legacy":
        how = (
            f", the best of one k up to a batch and none from it on (the best k by batch "
            f"makes {r['unmerged_ranges']} ranges; this gives up {_loss(r['merge_loss'])} "
            "of their throughput)"
        )
    elif r["unmerged_ranges"] > count:
        how = (
            f", merged from {r['unmerged_ranges']} ranges of the best k at --min-gain "
            f"{r['min_gain']:.1%}, giving up {_loss(r['merge_loss'])} of their throughput"
        )
    lines = [
        f"Schedule for {_ENGINE_NAMES[r['engine']]}: {count} range{'s' * (count != 1)} "
        f"of batch sizes {r['ranges'][0]['first']} to {r['max_batch']}{how}."
    ]
    rows = [
        [
            f"{x['first']}-{x['last']}",
            str(x["k"]),
            _num(x["speedup"], ".3f"),
            _num(x["best_fixed_speedup"], ".3f"),
            "-" if x["gain"] is None else f"{100 * x['gain']:+.1f}",
            f"{100 * x['share']:.1f}",
        ]
        for x in r["ranges"]
    ]
    lines += _grid(_SCHEDULE_COLUMNS, rows, right=True)
    lines.append(
        f"Over the load ({r['load']}): the schedule {number_text(r['speedup'], 3)}x "
        f"plain decoding's throughput, the best fixed k ({r['best_fixed_k']}) "
        f"{number_text(r['best_fixed_speedup'], 3)}x: {r['gain']:+.2%}; no "
        "speculation is 1."
    )
    b = r["breakeven_batch"]
    lines.append(
        "Break-even batch: "
        + (
            "none: no k beats plain decoding at any batch."
            if b is None
            else f"{b}; some k beats plain decoding up to it."
            if isinstance(b, int)
            else f"{b}; some k still beats plain decoding at batch {r['max_batch']}."
        )
    )
    lines += [f"Note: {n}." for n in r["notes"]]
    if r["flags"]:
        lines += ["", "Launch with:", f"  {r['flags']}"]
    if r.get("config_path") and r["config"] is not None:
        lines += [f"with {r['config_path']} holding:", "  " + json.dumps(r["config"])]
    return "\n".join(lines) + "\n"


_FLEET_COLUMNS = [
    "instance",
    "engine",
    "model",
    "steps",
    "accept_len [tokens/cycle]",
    "k [tokens]",
    "batch [sequences]",
    "tok_s [tok/s]",
    "aggregate [tok/s]",
]


def fleet_text(r: Row) -> str:
    """What ``breakeven fleet`` prints (``FleetResult.to_dict()``): a line per server, worst
    first, then each server's flags."""
    costs = any(i["predicted_speedup"] is not None for i in r["instances"])
    heads = _FLEET_COLUMNS + (
        ["predicted [x]", "break-even batch", "above it [%]", "schedule gain [%]"] if costs else []
    )
    rows = []
    for i in r["instances"]:
        row = [
            printable(i["instance"]),
            i["engine"],
            printable(i["model"] or "-"),
            str(i["points"]),
            _num(i["accept_len"], ".3f"),
            _num(i["k"], ".1f"),
            _num(i["batch"], ".1f"),
            _num(i["tok_s"], ".2f"),
            _num(i["aggregate_tok_s"], ".2f"),
        ]
        if costs:
            share, gain = i["share_above_breakeven"], i["schedule_gain"]
            row += [
                _num(i["predicted_speedup"], ".3f"),
                _num(i["breakeven_batch"], "g"),
                "-" if share is None else f"{100 * share:.1f}",
                "-" if gain is None else f"{100 * gain:+.1f}",
            ]
        rows.append(row)
    lines = [
        f"{len(r['instances'])} servers in {printable(r['prometheus'])} from {r['start']} to "
        f"{r['end']} (step {r['step_s']:g} s, {r['rows']} steps with data, "
        f"{r['chunks']} range quer{'y' if r['chunks'] == 1 else 'ies'} per series), worst "
        "first:"
    ]
    lines += _grid(heads, rows, right=False)
    lines.append(
        "accept_len = 1 + rate(accepted) / rate(drafts), bonus token included; tok_s per "
        "sequence = aggregate / running requests; means over the steps with data."
    )
    flagged = [
        (i, f, n) for i in r["instances"] for f, n in zip(i["flags"], i["notes"], strict=False)
    ]
    lines += ["", f"Flags ({len(flagged)}):" if flagged else "Flags: none."]
    lines += [f"  [{f}] {printable(i['instance'])}: {printable(n)}" for i, f, n in flagged]
    return "\n".join(lines) + "\n"


def _breakeven_batch_sentence(r: Row) -> str:
    b = r["breakeven_batch"]
    if b is None:
        return "Break-even batch: none; speculation never pays within the curve (breakeven_batch = null)."
    if isinstance(b, str):
        last = r["speedup_by_batch"][-1]
        return (
            f"Break-even batch: {b}; speculation still pays {number_text(last['speedup'], 3)}x "
            f"at batch {r['max_batch']}, the largest swept."
        )
    return f"Break-even batch: {b}; speculation pays up to {b} sequences decoded together."


def _sample(points: list[Row], keep: set[int]) -> list[int]:
    """Indices to print: all of a short sweep, else powers of two, the ends and ``keep``."""
    if len(points) <= 40:
        return list(range(len(points)))
    chosen = {0, len(points) - 1}
    chosen |= {i for i, p in enumerate(points) if p["batch"] & (p["batch"] - 1) == 0}
    chosen |= {i for i, p in enumerate(points) if p["batch"] in keep}
    return sorted(chosen)


_BATCH_COLUMNS = ["batch", "k", "step_ms", "cycle_ms", "speedup"]


def batch_text(r: Row) -> str:
    """What ``breakeven batch`` prints (from ``BatchResult.to_dict()``): the break-even batch,
    the schedule, the sweep."""
    lines = [_breakeven_batch_sentence(r)]
    if r.get("best_k_by_batch") is not None:
        ranges = ", ".join(f"[{a}, {b}, {k}]" for a, b, k in r["best_k_by_batch"])
        lines.append(f"Best k by batch, as [first batch, last batch, k] (k = 0: off): [{ranges}]")
    lines.append("")
    b = r["breakeven_batch"]
    keep = {b, b + 1} if isinstance(b, int) else set()
    points = r["speedup_by_batch"]
    shown = _sample(points, keep)
    if len(shown) < len(points):
        lines.append(f"Selected batch sizes of 1..{r['max_batch']} (--json lists them all):")
    lines += _table([points[i] for i in shown], _BATCH_COLUMNS)
    return "\n".join(lines) + "\n"


def moe_text(summary: dict[str, float]) -> str:
    """What ``breakeven moe`` prints."""
    rows = [_kv_row(key, value) for key, value in summary.items()]
    return "\n".join(_kv_lines([("Mixture-of-Experts forward", rows)])).rstrip() + "\n"


def _html_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    heads = "".join(
        f"<th>{html.escape(c)} [{html.escape(QUANTITIES[c].unit)}]</th>" for c in columns
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(format_value(c, r[c]))}</td>" for c in columns)
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{heads}</tr>{body}</table>"


def optimize_html(r: Row) -> str:
    """The by-k table as HTML, for notebooks."""
    return f"<p>{html.escape(_optimize_head(r))}</p>" + _html_table(r["by_k"], _optimize_columns(r))


def batch_html(r: Row) -> str:
    """The batch sweep as HTML, for notebooks."""
    return f"<p>{html.escape(_breakeven_batch_sentence(r))}</p>" + _html_table(
        r["speedup_by_batch"], _BATCH_COLUMNS
    )


def ingest_text(tally: Any, tok_s_meanings: dict[str, str] | None = None) -> str:
    """A summary of ingested records (a :class:`~breakeven.iotools.records.Tally`), with what
    ``tok_s`` means for each record format seen (``tok_s_meanings``, by format)."""
    if not tally.records:
        return "No records.\n"
    heads = [
        "file",
        "format",
        "records",
        "k",
        "mean accept_len [tokens/cycle]",
        "mean tok_s [tok/s]",
        "mean aggregate_tok_s [tok/s]",
    ]
    cells = []
    for (path, fmt), g in tally.groups.items():
        tau, tok, agg = (tally.mean(g, key) for key in ("accept_len", "tok_s", "aggregate_tok_s"))
        cells.append(
            [
                path,
                fmt,
                str(g["records"]),
                ",".join(map(str, sorted(g["k"]))) or "-",
                _num(tau, ".3f"),
                _num(tok, ".2f"),
                _num(agg, ".2f"),
            ]
        )
    lines = _grid(heads, cells, right=False, indent="")
    lines.append("")
    lines.append(
        f"{tally.records} records; --json lists them, --out writes the measurements CSV. "
        "tok_s is per sequence:"
    )
    meanings = tok_s_meanings or {}
    for fmt in tally.formats():
        lines.append(f"  {fmt}: {meanings.get(fmt, 'as the source gives it')}")
    return "\n".join(lines) + "\n"


def _num(value: Any, spec: str) -> str:
    """``value`` formatted by ``spec``; ``-`` when missing, exponent notation when huge."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and not abs(value) < LARGEST_FIXED:
        return number_text(value, 3)
    return format(value, spec)


def _k_text(value: Any) -> str:
    """k as the whole number it is ("-" where the source did not say)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return str(int(value)) if float(value).is_integer() else _num(value, "g")


def _interval_text(low: Any, high: Any) -> str:
    return "-" if low is None else f"{_num(low, '.3f')}-{_num(high, '.3f')}"


def _with_hardware(
    heads: list[str], rows: list[list[str]], hardware: list[Any], after: int
) -> tuple[list[str], list[list[str]]]:
    """A hardware column after column ``after`` where the rows differ in hardware."""
    if len({h or "" for h in hardware}) < 2:
        return heads, rows
    names = [printable(h) or "-" for h in hardware]
    heads = [*heads[: after + 1], "hardware", *heads[after + 1 :]]
    return heads, [[*r[: after + 1], n, *r[after + 1 :]] for r, n in zip(rows, names, strict=True)]


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


def _check_rows(r: Row) -> tuple[list[str], list[list[str]]]:
    """The check table's heads and cells (model names whole; hardware where runs differ)."""
    rows = []
    for c in r["comparisons"]:
        rows.append(
            [
                printable(c["model"]) or "-",
                printable(c["label"]) or "-",
                _k_text(c["num_spec_tokens"]),
                _num(c["tok_s"], ".2f"),
                _num(c["baseline_tok_s"], ".2f"),
                _num(c["measured_speedup"], ".3f"),
                _interval_text(c["ci_low"], c["ci_high"]),
                c["verdict"],
                _num(c["accept_len"], ".3f"),
                _num(c["predicted_speedup"], ".3f"),
                _num(c["residual"], "+.3f"),
                _num(c["implied_cycle_ms"], ".3f"),
                ", ".join(c["flags"]) or "-",
            ]
        )
    hardware = [c["hardware"] for c in r["comparisons"]]
    return _with_hardware(_CHECK_COLUMNS, rows, hardware, after=0)


def _flag_where(f: Row) -> str:
    lines, count = f["lines"], f.get("line_count", len(f["lines"]))
    more = f" and {count - len(lines)} more" if count > len(lines) else ""
    return f" (lines {', '.join(map(str, lines))}{more})" if lines else ""


def check_text(r: Row) -> str:
    """What ``breakeven check`` prints (from ``CheckResult.to_dict()``): comparisons, server
    cross-checks, flags."""
    lines = ["Speculative runs against the baseline of the same model, hardware and concurrency:"]
    heads, rows = _check_rows(r)
    if rows:
        lines += _grid(heads, rows, right=False)
    else:
        lines.append("  none: no row has num_spec_tokens > 0")
    lines.append(
        "measured = tok_s / baseline tok_s (per sequence); predicted = accept_len x "
        "step_ms / cycle_ms; implied cycle = 1000 x accept_len / tok_s."
    )
    if r["server_checks"]:
        lines += ["", "Server log against client benchmark:"]
        for c in r["server_checks"]:
            word = "agree" if c["agree"] else "DISAGREE"
            lines.append(
                f"  {printable(c['run_id'])}: server {_num(c['server_tok_s'], '.2f')} "
                f"tok/s, client {_num(c['client_tok_s'], '.2f')} tok/s "
                f"({_num(c['ratio'], '.3f')}x): {word} within {r['tolerance']:.0%}"
            )
    flags = r["flags"]
    lines += ["", f"Flags ({len(flags)}):" if flags else "Flags: none."]
    lines += [f"  [{f['code']}] {printable(f['message'])}{_flag_where(f)}" for f in flags]
    if "schedule_check" in r:
        lines += _against_lines(r["schedule_check"])
    return "\n".join(lines) + "\n"


def html_table(heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells (already text) as an HTML table; long cells wrap."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def check_html(r: Row, flags: bool = True) -> str:
    """The check table (and, with ``flags``, the flags) as HTML, for notebooks and reports."""
    table = html_table(*_check_rows(r))
    if not flags:
        return table
    items = "".join(
        f"<li><code>{html.escape(f['code'])}</code> {html.escape(printable(f['message']))}</li>"
        for f in r["flags"]
    )
    return f"{table}<ul>{items}</ul>"


def bench_text(levels: list[dict[str, Any]], label: str) -> str:
    """What ``breakeven bench`` prints: one line per concurrency level."""
    heads = [
        "concurrency",
        "requests",
        "failed",
        "tok_s [tok/s]",
        "sd [tok/s]",
        "aggregate_tok_s [tok/s]",
        "accept_len [tokens/cycle]",
    ]
    rows = [
        [
            str(v["concurrency"]),
            str(v["requests"]),
            str(v["failed"]),
            _num(v["tok_s"], ".2f"),
            _num(v["tok_s_sd"], ".2f"),
            _num(v["aggregate_tok_s"], ".2f"),
            _num(v.get("accept_len"), ".3f"),
        ]
        for v in levels
    ]
    if any(v.get("server") for v in levels):  # the server's own counters (llama.cpp)
        heads += ["server tok_s [tok/s]", "server step or cycle [ms]"]
        for row, v in zip(rows, levels, strict=True):
            server = v.get("server") or {}
            ms = server.get("cycle_ms") or server.get("step_ms")
            kind = " (cycle)" if server.get("cycle_ms") else " (step)" if ms else ""
            row += [_num(server.get("tok_s"), ".2f"), _num(ms, ".3f") + kind]
    lines = [
        f"{label}: per-sequence decode rate (tok_s, prefill excluded) and aggregate rate by level",
        *_grid(heads, rows, right=True),
    ]
    return "\n".join(lines) + "\n"


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


def compare_rows(result: Row) -> tuple[list[str], list[list[str]]]:
    """The compare table's heads and cells, one row per speculative run (a hardware column
    where the runs differ in hardware)."""
    rows = []
    for r in result["runs"]:
        rows.append(
            [
                printable(r["label"]),
                _k_text(r["num_spec_tokens"]),
                _num(r["concurrency"], "g"),
                _num(r["tok_s"], ".2f"),
                _num(r["baseline_tok_s"], ".2f"),
                _num(r["measured_speedup"], ".3f"),
                _interval_text(r["ci_low"], r["ci_high"]),
                r["verdict"],
                _num(r["accept_len"], ".3f"),
                _num(r["breakeven_accept_len"], ".3f"),
                _num(r["implied_cycle_ms"], ".3f"),
                _num(r["predicted_speedup"], ".3f"),
                _num(r["residual"], "+.3f"),
                ", ".join(r["flags"]) or "-",
            ]
        )
    hardware = [r.get("hardware") for r in result["runs"]]
    return _with_hardware(_COMPARE_COLUMNS, rows, hardware, after=0)


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


def _against_lines(rows: list[Row]) -> list[str]:
    """Each run against a schedule (``--schedule``): its batch, k, the schedule's k and
    predicted speedup there, and the verdict."""
    lines = ["", "Against the schedule (predicted: its speedup at the run's batch, with its k):"]
    if not rows:
        return [*lines, "  no run with a measured speedup and a concurrency"]
    cells = [
        [
            printable(str(r["label"])),
            str(r["batch"]),
            "-" if r["k"] is None else f"{r['k']:g}",
            "-" if r["schedule_k"] is None else str(r["schedule_k"]),
            _num(r["measured_speedup"], ".3f"),
            "-"
            if r["ci_low"] is None or r["ci_high"] is None
            else f"{r['ci_low']:.3f}-{r['ci_high']:.3f}",
            _num(r["predicted_speedup"], ".3f"),
            r["verdict"],
        ]
        for r in rows
    ]
    lines += _grid(_AGAINST_COLUMNS, cells, right=False)
    lines.append(
        "holds: the prediction is within the interval, widened by the tolerance; off: "
        "it is not; other k: the run used another k than the schedule deploys there."
    )
    return lines


def compare_text(result: Row) -> str:
    """What ``breakeven compare`` prints, from ``CompareResult.to_dict()``: the headlines
    first, then a row per speculative run, check's flags and advice."""
    runs = result["runs"]
    lines = [printable(r["headline"]) + "." for r in runs] or [
        f"No speculative run could be compared with {printable(result['baseline'])}."
    ]
    heads, rows = compare_rows(result)
    if rows:
        lines += ["", *_grid(heads, rows, right=False)]
        lines.append(
            "speedup = tok_s / baseline tok_s (per sequence); implied cycle = 1000 x "
            "accept_len / tok_s; break-even accept_len = cycle_ms / step_ms."
        )
        lines += [f"Interval of {printable(r['label'])}: {r['interval_method']}." for r in runs]
    flags = result["flags"]
    lines += ["", f"Flags ({len(flags)}):" if flags else "Flags: none."]
    lines += [f"  [{f['code']}] {printable(f['message'])}" for f in flags]
    if result["advice"]:
        lines += ["", "Advice:", *(f"  {a}" for a in result["advice"])]
    if "schedule_check" in result:
        lines += _against_lines(result["schedule_check"])
    return "\n".join(lines) + "\n"


_FIT_COLUMNS = [
    "k [tokens]",
    "accept_len [tokens/cycle]",
    "runs",
    "implied cycle [ms]",
    "fitted cycle [ms]",
    "measured [x]",
    "predicted [x]",
    "held out [x]",
]


def fit_text(result: Row) -> str:
    """What ``breakeven fit`` prints, from ``FitResult.to_dict()``: per group, the fitted
    coefficients with their units, what was merged, and the by-k table."""
    from_units = {
        "verify_base_ms": "ms per cycle",
        "verify_per_token_ms": "ms per draft token",
        "draft_per_token_ms": "ms per draft token",
        "draft_per_cycle_ms": "ms per cycle",
        "overhead_ms": "ms per cycle",
    }
    lines: list[str] = [*(f"Note: {n}." for n in result["notes"])]
    for g in result["groups"]:
        where = ", ".join(
            x
            for x in (printable(g["model"]), printable(g["hardware"]), printable(g["spec_method"]))
            if x
        )
        at = f" at concurrency {g['concurrency']:g}" if g["concurrency"] is not None else ""
        lines += [
            f"{where or 'runs'}{at}: step {_num(g['step_ms'], '.3f')} ms, "
            f"draft cost {result['draft_cost']}, residual RMS "
            f"{_num(g['residual_rms_ms'], '.3f')} ms"
        ]
        merged = {m.split(" + ")[0]: m for m in g["merged"]}
        for name, value in g["coefficients"].items():
            if any(name in m.split(" + ")[1:] for m in g["merged"]):
                continue  # its value is in the merged term's first
            lines.append(
                f"  {merged.get(name, name):<45} {_num(value, '.4f'):>10} "
                f"{from_units.get(name, 'ms')}"
            )
        rows = [
            [
                str(r["k"]),
                _num(r["accept_len"], ".3f")
                + (" (predicted)" if r["accept_len_predicted"] else ""),
                str(r["runs"]),
                _num(r["implied_cycle_ms"], ".3f"),
                _num(r["predicted_cycle_ms"], ".3f"),
                _num(r["measured_speedup"], ".3f"),
                _num(r["predicted_speedup"], ".3f"),
                _num(r["held_out_speedup"], ".3f"),
            ]
            for r in g["by_k"]
        ]
        lines += _grid(_FIT_COLUMNS, rows, right=True)
        error = g["held_out_max_rel_error"]
        best = (
            f"best k {g['best_k']}: {_num(g['best_speedup'], '.3f')}x predicted"
            if g["best_k"] is not None
            else "no best k: no speedup known"
        )
        lines.append(
            f"  {best}; held-out error at most "
            f"{'-' if error is None else format(error, '.1%')}; accept_len of a k not "
            f"run: the fitted alpha {_num(g['alpha'], '.4f')}, positions i.i.d."
        )
        lines += [f"  Note: {n}." for n in g["notes"]]
        lines.append("")
    for surface in result.get("surfaces", []):
        lines += _surface_lines(surface)
    for tree in result.get("trees", []):
        lines += _tree_lines(tree)
    lines.append(
        "implied cycle = 1000 x accept_len / tok_s; predicted = accept_len x step_ms / "
        "fitted cycle; held out = the same from the fit without that k's runs."
    )
    return "\n".join(lines) + "\n"


_SURFACE_UNITS = {
    "weights_ms": "ms per forward",
    "expert_ms": "ms per routed expert loaded",
    "kv_ms": "ms per sequence",
    "compute_ms": "ms per token",
    "draft_step_ms": "ms per draft step",
    "draft_token_ms": "ms per draft token",
    "spec_seq_ms": "ms per sequence per cycle",
}
_SURFACE_COLUMNS = [
    "batch [sequences]",
    "steps",
    "topk",
    "verify tokens",
    "accept_len [tokens/cycle]",
    "measured [x]",
    "predicted [x]",
    "held out [x]",
]


_TREE_COLUMNS = [
    "steps",
    "topk",
    "verify tokens",
    "runs",
    "accept_len [tokens/cycle]",
    "predicted [tokens/cycle]",
    "held out [tokens/cycle]",
]


def _tree_lines(x: Row) -> list[str]:
    """A tree acceptance of ``fit``: alpha, rank_decay, and each configuration it was fitted
    on, measured, predicted and held out."""
    where = ", ".join(
        v
        for v in (printable(x["model"]), printable(x["hardware"]), printable(x["spec_method"]))
        if v
    )
    lines = [
        f"{where or 'runs'}, tree acceptance: the target's token is the draft's rank-r "
        f"candidate with chance alpha x rank_decay^(r-1); alpha {_num(x['alpha'], '.4f')}, "
        f"rank_decay {_num(x['rank_decay'], '.4f')} ({x['basis']})"
    ]
    rows = [
        [
            str(r["steps"]),
            str(r["topk"]),
            str(r["verify_tokens"]),
            str(r["runs"]),
            _num(r["accept_len"], ".3f"),
            _num(r["predicted_accept_len"], ".3f"),
            _num(r["held_out_accept_len"], ".3f"),
        ]
        for r in x["runs"]
    ]
    lines += _grid(_TREE_COLUMNS, rows, right=True)
    error = x["held_out_max_rel_error"]
    lines.append(
        f"  held-out error at most {'-' if error is None else format(error, '.1%')}; "
        "optimize --tree --fit-file searches trees with it."
    )
    lines += [f"  Note: {n}." for n in x.get("notes", [])]
    return [*lines, ""]


def _surface_lines(x: Row) -> list[str]:
    """A forward surface t(B, q) of ``fit``: its coefficients and each run it was fitted on."""
    where = ", ".join(
        v
        for v in (printable(x["model"]), printable(x["hardware"]), printable(x["spec_method"]))
        if v
    )
    moe = x.get("moe")
    routing = (
        f"{moe['experts']} experts, top {moe['top_k']}, {moe['shared']} shared"
        if moe
        else "dense (no --experts)"
    )
    batches = ", ".join(str(b) for b in x["batches"])
    lines = [
        f"{where or 'runs'} across batch sizes {batches}: t(B, q) = weights + experts(B*q) "
        f"+ kv*B + compute*B*q, cycle = t(B, verify tokens) + steps*(step + token*B*topk) "
        f"+ spec_seq*B; {routing}; relative "
        f"residual RMS {_num(x['residual_rms'], '.1%')}"
    ]
    for name, value in x["coefficients"].items():
        lines.append(f"  {name:<45} {_num(value, '.4f'):>10} {_SURFACE_UNITS[name]}")
    lines += [f"  merged: {m}" for m in x["merged"]]
    rows = [
        [
            str(p["batch"]),
            str(p["steps"]),
            str(p["topk"]),
            str(p["verify_tokens"]),
            _num(p["accept_len"], ".3f"),
            _num(p["measured_speedup"], ".3f"),
            _num(p["predicted_speedup"], ".3f"),
            _num(p["held_out_speedup"], ".3f"),
        ]
        for p in x["points"]
    ]
    if rows:
        lines += _grid(_SURFACE_COLUMNS, rows, right=True)
    error = x["held_out_max_rel_error"]
    lines.append(f"  held-out error at most {'-' if error is None else format(error, '.1%')}.")
    lines += [f"  Note: {n}." for n in x["notes"]]
    return [*lines, ""]
