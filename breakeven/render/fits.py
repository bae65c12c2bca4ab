"""Renderer of ``fit``: per group the fitted cycle coefficients, the forward surfaces across
batch sizes and the tree acceptances, each with the runs it was fitted on."""

from __future__ import annotations

import math

from breakeven.core.quantities import CYCLE_COEFFICIENT_UNITS, SURFACE_TERM_UNITS
from breakeven.render.text import (
    Row,
    fitted,
    grid,
    interval_text,
    k_ranges,
    neighbours_regret,
    num,
    preformatted_html,
    printable,
)

_FIT_COLUMNS = [
    "k [tokens]",
    "accept_len [tokens/cycle]",
    "runs",
    "implied cycle [ms]",
    "fitted cycle [ms]",
    "measured [x]",
    "predicted [x]",
    "interval [x]",
    "held out [x]",
    "regret [%]",
]


def _interval(r: Row) -> str:
    low, high = r.get("predicted_low"), r.get("predicted_high")
    if low is None or high is None:
        return "-"
    return f"{low:.3f}-{high:.3f}"


def _regret(r: Row) -> str:
    regret = r.get("regret")
    return "-" if regret is None else f"{100 * regret:.1f}"


def _by_k_cells(g: Row) -> list[list[str]]:
    """A group's by-k table as cells."""
    return [
        [
            str(r["k"]),
            num(r["accept_len"], ".3f") + (" (predicted)" if r["accept_len_predicted"] else ""),
            str(r["runs"]),
            num(r["implied_cycle_ms"], ".3f"),
            num(r["predicted_cycle_ms"], ".3f"),
            num(r["measured_speedup"], ".3f"),
            num(r["predicted_speedup"], ".3f"),
            _interval(r),
            num(r["held_out_speedup"], ".3f"),
            _regret(r),
        ]
        for r in g["by_k"]
    ]


_FORM_NAMES = {
    "leviathan": "Leviathan's step x (1 + c k)",
    "anchored": "a line anchored at the step",
    "linear": "a line",
    "curved": "a curve a + b k + c k^2",
}


def _form_lines(g: Row) -> list[str]:
    """The cycle form fitted, why, and each form's held-out error."""
    form = g.get("cycle_form")
    if not form:
        return []
    scores = []
    for x in g.get("forms", []):
        rms = x["held_out_rms"]
        scores.append(
            f"{x['form']} {format(rms, '.1%')}"
            if rms is not None
            else f"{x['form']} - ({x['why']})"
        )
    lines = [f"  cycle form: {_FORM_NAMES.get(form, form)}, {g.get('form_reason', '')}"]
    if scores:
        lines.append("  held-out error RMS by form: " + "; ".join(scores))
    return lines


def _where(x: Row) -> str:
    """A group's, surface's, tree's or context fit's model, hardware and method, those it
    has, in words."""
    names = (printable(x["model"]), printable(x["hardware"]), printable(x["spec_method"]))
    return ", ".join(v for v in names if v)


def _best_line(g: Row) -> str:
    """The best k, its interval, what its neighbours give up, and the k it cannot be told
    from."""
    if g["best_k"] is None:
        return "no best k: no speedup known"
    rows = {r["k"]: r for r in g["by_k"]}
    best = rows[g["best_k"]]
    text = f"best k {g['best_k']}: {num(g['best_speedup'], '.3f')}x predicted"
    if best.get("predicted_low") is not None and best.get("predicted_high") is not None:
        text += f" ({best['predicted_low']:.3f}-{best['predicted_high']:.3f})"
    given = neighbours_regret(rows, g["best_k"])
    if given:
        text += "; its neighbours give up " + ", ".join(given)
    close = g.get("close_k") or []
    if close:
        text += "; the runs cannot tell it from k = " + k_ranges(close)
    return text


def fit_table(result: Row) -> tuple[list[str], list[list[str]]]:
    """Every group's by-k table in one, each row with its group (model, hardware, method,
    concurrency): the heads and cells of ``--format markdown|csv``."""
    heads = ["model", "hardware", "method", "concurrency [sequences]", *_FIT_COLUMNS]
    rows = []
    for g in result["groups"]:
        group = [
            printable(g["model"]) or "-",
            printable(g["hardware"]) or "-",
            printable(g["spec_method"]) or "-",
            num(g["concurrency"], "g"),
        ]
        rows += [[*group, *cells] for cells in _by_k_cells(g)]
    return heads, rows


def _level_text(g: Row) -> str:
    """A group's level in words: `` at 4 req/s`` (open loop), `` at concurrency 8``, or ""."""
    if g.get("request_rate") is not None:
        return f" at {g['request_rate']:g} req/s"
    return f" at concurrency {g['concurrency']:g}" if g["concurrency"] is not None else ""


def _best_text(g: Row, named: bool) -> str:
    error = g["held_out_max_rel_error"]
    held = "" if error is None else f", held out {format(error, '.1%')}"
    loss = ", a loss" if g["best_speedup"] is not None and g["best_speedup"] < 1 else ""
    where = f" for {printable(g['model'])}" if named and g["model"] else ""
    at = _level_text(g)
    return f"{g['best_k']}{where}{at} ({num(g['best_speedup'], '.2f')}x{loss}{held})"


def fit_headline(result: Row) -> str:
    """fit's answer in one line: the best k of each group with a speedup (up to two; then how
    many more), its predicted speedup and the held-out error, e.g. ``Best k: 6 at concurrency
    1 (1.86x, held out 9.0%); 6 at concurrency 4 (1.41x, held out 18.0%).``"""
    groups = result["groups"]
    known = [g for g in groups if g["best_k"] is not None]
    if not known:
        if result.get("surfaces"):
            error = result["surfaces"][0]["held_out_max_rel_error"]
            held = "-" if error is None else format(error, ".1%")
            return f"A forward surface across batch sizes, held-out error {held}: see below."
        if groups:
            return (
                f"No best k: {len(groups)} group(s) fitted, none with a baseline to give a "
                "speedup (see below)."
            )
        return "Nothing fitted: see the notes."
    named = len({g["model"] for g in known}) > 1
    first = known[:1] if named else known[:2]  # model names are long: one, then a count
    shown = "; ".join(_best_text(g, named) for g in first)
    more = f"; {len(known) - len(first)} more below" if len(known) > len(first) else ""
    return f"Best k: {shown}{more}."


_CATEGORY_FIT_COLUMNS = [
    "group",
    "category",
    "k",
    "requests",
    "accept_len [tokens/cycle]",
    "95% interval [tokens/cycle]",
    "predicted [x]",
    "interval [x]",
    "verdict",
]


_MIX_FIT_COLUMNS = ["k", "accept_len [tokens/cycle]", "predicted [x]", "interval [x]"]


def _category_fit_lines(result: Row) -> list[str]:
    """Each group's categories at each k (``categories``), the best k of each marked, then a
    mix's speedup at each k (``mix``)."""
    rows = result.get("categories") or []
    if not rows:
        return []
    cells = [
        [
            _where(r) or "runs",
            printable(str(r["category"])),
            f"{r['k']}{' *' if r['best'] else ''}",
            str(r["requests"]),
            num(r["accept_len"], ".3f"),
            interval_text(r["accept_len_low"], r["accept_len_high"]),
            num(r["predicted_speedup"], ".3f"),
            interval_text(r["predicted_low"], r["predicted_high"]),
            r["verdict"],
        ]
        for r in rows
    ]
    lines = [
        "By workload category (each category's accept_len priced with its group's step and "
        "fitted cycle; * its best k):",
        *grid(
            _CATEGORY_FIT_COLUMNS,
            cells,
            right=False,
            optional=("requests", "95% interval [tokens/cycle]"),
            cut=("group", "category"),
        ),
    ]
    mixes: dict[str, list[Row]] = {}
    for m in result.get("mix") or []:
        mixes.setdefault(_where(m) or "runs", []).append(m)
    for where, ms in mixes.items():
        shares = ", ".join(f"{printable(c)} {w:.0%}" for c, w in ms[0]["mix"])
        lines.append(f"{where}, the mix ({shares} of the tokens; * its best k):")
        cells = [
            [
                f"{m['k']}{' *' if m['best'] else ''}",
                num(m["accept_len"], ".3f"),
                num(m["predicted_speedup"], ".3f"),
                interval_text(m["predicted_low"], m["predicted_high"]),
            ]
            for m in ms
        ]
        lines += grid(_MIX_FIT_COLUMNS, cells, right=False)
    return [*lines, ""]


@fitted
def fit_text(result: Row) -> str:
    """What ``breakeven fit`` prints, from ``FitResult.to_dict()``: its headline
    (:func:`fit_headline`), then per group the fitted coefficients with their units, what
    was merged, and the by-k table."""
    lines: list[str] = [fit_headline(result), ""]
    lines += [f"Note: {n}." for n in result["notes"]]
    for g in result["groups"]:
        where = _where(g)
        at = _level_text(g)
        lines += [
            f"{where or 'runs'}{at}: step {num(g['step_ms'], '.3f')} ms, "
            f"draft cost {result['draft_cost']}, residual RMS "
            f"{num(g['residual_rms_ms'], '.3f')} ms"
        ]
        merged = {m.split(" + ")[0]: m for m in g["merged"]}
        for name, value in g["coefficients"].items():
            if any(name in m.split(" + ")[1:] for m in g["merged"]):
                continue  # its value is in the merged term's first
            unit = CYCLE_COEFFICIENT_UNITS.get(name, "ms")
            shown = (
                f"{'undetermined':>10} ({unit})"
                if value is None or math.isnan(value)
                else f"{num(value, '.4f'):>10} {unit}"
            )
            lines.append(f"  {merged.get(name, name):<45} {shown}")
        lines += _form_lines(g)
        lines += grid(
            _FIT_COLUMNS,
            _by_k_cells(g),
            right=True,
            optional=["held out [x]", "regret [%]", "runs", "implied cycle [ms]"],
        )
        error = g["held_out_max_rel_error"]
        lines.append(
            f"  {_best_line(g)}; held-out error at most "
            f"{'-' if error is None else format(error, '.1%')}; accept_len of a k not "
            f"run: the fitted alpha {num(g['alpha'], '.4f')}, positions i.i.d."
        )
        lines += [f"  Note: {n}." for n in g["notes"]]
        lines.append("")
    lines += _category_fit_lines(result)
    for surface in result.get("surfaces", []):
        lines += _surface_lines(surface)
    for tree in result.get("trees", []):
        lines += _tree_lines(tree)
    for context in result.get("contexts", []):
        lines += _context_lines(context)
    lines.append(
        "implied cycle = 1000 x accept_len / tok_s; predicted = accept_len x step_ms / "
        "fitted cycle; interval = predicted +- 1.5 x the form's largest held-out error (at "
        "least 2%), wider beyond the measured k; held out = the same from the fit without "
        "that k's runs; regret = 1 - predicted / the best k's."
    )
    return "\n".join(lines) + "\n"


def fit_html(result: Row) -> str:
    """:func:`fit_text` as HTML, for notebooks."""
    return preformatted_html(fit_text(result))


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


_CONTEXT_COLUMNS = [
    "context [tokens]",
    "k [tokens]",
    "accept_len [tokens/cycle]",
    "measured [x]",
    "predicted [x]",
    "held out [x]",
]


def _context_lines(x: Row) -> list[str]:
    """A context fit: how the step and the cycle grow with the context, and each context
    length's speedups predicted from the others."""
    where = _where(x)
    at = _level_text(x)
    shown = ", ".join(f"{c:.0f}" for c in x["contexts"])
    lines = [
        f"{where or 'runs'}{at} across context lengths {shown} tokens: step(C) = "
        f"{num(x['step_0_ms'], '.3f')} ms + {num(x['step_ms_per_ktok'], '.4f')} ms per 1000 "
        f"tokens of context; cycle(k, C) = cycle_k + ({num(x['step_ms_per_ktok'], '.4f')} + "
        f"{num(x['cycle_ms_per_ktok_per_k'], '.4f')} x k) ms per 1000 tokens"
    ]
    cells = [
        [
            f"{p['context_tokens']:.0f}",
            str(p["k"]),
            num(p["accept_len"], ".3f"),
            num(p["measured_speedup"], ".3f"),
            num(p["predicted_speedup"], ".3f"),
            num(p["held_out_speedup"], ".3f"),
        ]
        for p in x["points"]
    ]
    lines += grid(_CONTEXT_COLUMNS, cells, right=True)
    error = x["held_out_max_rel_error"]
    lines.append(
        "  each context length held out (fitted on the others): error at most "
        f"{'-' if error is None else format(error, '.1%')}."
    )
    return [*lines, ""]


def _tree_lines(x: Row) -> list[str]:
    """A tree acceptance of ``fit``: alpha, rank_decay, and each configuration it was fitted
    on, measured, predicted and held out."""
    where = _where(x)
    lines = [
        f"{where or 'runs'}, tree acceptance: the target's token is the draft's rank-r "
        f"candidate with chance alpha x rank_decay^(r-1); alpha {num(x['alpha'], '.4f')}, "
        f"rank_decay {num(x['rank_decay'], '.4f')} ({x['basis']})"
    ]
    rows = [
        [
            str(r["steps"]),
            str(r["topk"]),
            str(r["verify_tokens"]),
            str(r["runs"]),
            num(r["accept_len"], ".3f"),
            num(r["predicted_accept_len"], ".3f"),
            num(r["held_out_accept_len"], ".3f"),
        ]
        for r in x["runs"]
    ]
    lines += grid(_TREE_COLUMNS, rows, right=True)
    error = x["held_out_max_rel_error"]
    lines.append(
        f"  held-out error at most {'-' if error is None else format(error, '.1%')}; "
        "optimize --tree --fit-file searches trees with it."
    )
    lines += [f"  Note: {n}." for n in x.get("notes", [])]
    return [*lines, ""]


def _surface_lines(x: Row) -> list[str]:
    """A forward surface t(B, q) of ``fit``: its coefficients and each run it was fitted on."""
    where = _where(x)
    moe = x.get("moe")
    routing = (
        f"{moe['experts']} experts, top {moe['top_k']}, {moe['shared']} shared"
        if moe
        else "dense"
        if x.get("roof")
        else "dense (no --experts)"
    )
    batches = ", ".join(str(b) for b in x["batches"])
    roof = x.get("roof")
    form = _roof_form(roof) if roof else "t(B, q) = weights + experts(B*q) + kv*B + compute*B*q"
    lines = [
        f"{where or 'runs'} across batch sizes {batches}: {form}, cycle = t(B, verify "
        f"tokens) + steps*(step + token*B*topk) + spec_seq*B; {routing}; relative "
        f"residual RMS {num(x['residual_rms'], '.1%')}"
    ]
    for name, value in x["coefficients"].items():
        lines.append(f"  {name:<45} {num(value, '.4f'):>10} {SURFACE_TERM_UNITS[name]}")
    lines += [f"  merged: {m}" for m in x["merged"]]
    rows = [
        [
            str(p["batch"]),
            str(p["steps"]),
            str(p["topk"]),
            str(p["verify_tokens"]),
            num(p["accept_len"], ".3f"),
            num(p["measured_speedup"], ".3f"),
            num(p["predicted_speedup"], ".3f"),
            num(p["held_out_speedup"], ".3f"),
        ]
        for p in x["points"]
    ]
    if rows:
        lines += grid(_SURFACE_COLUMNS, rows, right=True)
    error = x["held_out_max_rel_error"]
    lines.append(f"  held-out error at most {'-' if error is None else format(error, '.1%')}.")
    lines.append(_interval_line(x))
    lines += [f"  Note: {n}." for n in x["notes"]]
    return [*lines, ""]


def _roof_form(roof: Row) -> str:
    """The roofline form of a surface, its datasheet times [ms] and fitted scales, in words."""
    memory = num(roof["weights_ms"], ".3f")
    if roof["expert_ms"]:
        memory += f" + {num(roof['expert_ms'], '.4f')}*experts(B*q)"
    if roof["kv_ms"]:
        memory += f" + {num(roof['kv_ms'], '.4f')}*B"
    return (
        "t(B, q) = weights + kv*B + compute*B*q + roof(B, q), roof the soft maximum of memory "
        f"{memory} ms x {num(roof['memory_scale'], '.2f')} and compute "
        f"{num(roof['compute_ms'], '.5f')}*B*q ms x {num(roof['compute_scale'], '.2f')} "
        f"({roof['source']})"
    )


def _interval_line(x: Row) -> str:
    """How a surface's intervals are sized, and how they held on the batch sizes left out."""
    base, rate = x.get("interval_base"), x.get("interval_rate")
    if base is None or rate is None:
        return "  intervals: +- 1.5 x the held-out error, widened beyond the measured batches."
    checks = x.get("held_out_batches") or []
    text = (
        f"  intervals: +- {base:.1%} at a measured speculative batch, {rate:.1%} more per "
        "doubling of batch away from one"
    )
    if not checks:
        return text + " (speculation at one batch size: none left out to check them on)."
    inside = sum(lo - 1e-12 <= e <= hi + 1e-12 for _, e, lo, hi in checks)
    widths = sorted((hi - lo) / 2 for *_, lo, hi in checks)
    n = len(widths)
    median = (widths[(n - 1) // 2] + widths[n // 2]) / 2
    return (
        text + f"; on the speculative batch sizes left out one at a time, {inside} of {n} "
        f"measured speedups inside their interval, median half-width {median:.1%}."
    )
