"""Text of each level's latencies, goodput and SLO attainment, and of the break-even request
rate (``check --slo`` and ``compare --slo``), from a result's ``to_dict()``."""

from __future__ import annotations

import html
from typing import Any

from breakeven.render.text import Row, grid, html_table, num, printable

_LEVEL_COLUMNS = [
    "label",
    "side",
    "level",
    "requests",
    "goodput [req/s]",
    "95% CI [req/s]",
    "attainment",
    "SLO",
    "TPOT p50/p90/p99 [ms]",
    "TTFT p50/p90/p99 [ms]",
]

_OPTIONAL = ("95% CI [req/s]", "TTFT p50/p90/p99 [ms]")


def breakeven_rate_lines(result: Row) -> list[str]:
    """Each run's break-even request rate, in words (``breakeven_rates``), one line each."""
    return [printable(r["sentence"]) for r in result.get("breakeven_rates") or []]


def across_nodes_lines(result: Row) -> list[str]:
    """A cluster's runs pooled over its nodes (``across_nodes``): each k at each load, its
    pooled speedup and interval, each node's speedup, and why they drift where they do."""
    rows = result.get("across_nodes") or []
    if not rows:
        return []
    lines = ["", "Across the cluster's nodes (each node its own block, then pooled):"]
    for r in rows:
        at = (
            f"{num(r['request_rate'], 'g')} req/s"
            if (r.get("request_rate") or 0) > 0
            else f"concurrency {num(r['concurrency'], 'g')}"
        )
        each = ", ".join(
            f"{printable(n['node'])} {num(n['measured_speedup'], '.2f')}x" for n in r["nodes"]
        )
        lines.append(
            f"  {printable(r['label'])} at {at}: {num(r['measured_speedup'], '.2f')}x (95% "
            f"{num(r['ci_low'], '.2f')}-{num(r['ci_high'], '.2f')}), {r['verdict']}; nodes {each}"
        )
        if r.get("why"):
            lines.append(f"    node_drift: {printable(r['why'])}")
    return lines


def level_lines(result: Row) -> list[str]:
    """The levels' table (``levels``), the SLO applied, its note where it could not be, and
    how the figures were computed."""
    lines = []
    if result.get("slo_note"):
        lines += ["", f"Note: {printable(result['slo_note'])}."]
    rows = result.get("levels") or []
    if not rows:
        return lines
    slo = result.get("slo")
    heads = _LEVEL_COLUMNS if slo else [h for h in _LEVEL_COLUMNS if not _slo_only(h)]
    cells = [_cells(r, bool(slo)) for r in rows]
    title = f"By level, under the SLO {printable(slo)}:" if slo else "By level:"
    lines += ["", title, *grid(heads, cells, right=False, optional=_OPTIONAL, cut=("label",))]
    lines.append(
        "Percentiles over the level's requests (numpy's linear method, as vllm bench serve)"
        + (
            "; goodput = requests meeting every per-request bound / the level's duration "
            "(first start to last completion), attainment = their share of the completed "
            "requests, each the mean of the launches'."
            if slo
            else "."
        )
    )
    return lines


def levels_html(result: Row) -> str:
    """The break-even request rates and the levels' table as HTML, for the report pages
    (``compare --report``, sweep's page); "" where the result has neither."""
    rates = "".join(
        f"<p>Break-even: {html.escape(line)}.</p>" for line in breakeven_rate_lines(result)
    )
    rows = result.get("levels") or []
    if not rows:
        return rates
    slo = result.get("slo")
    heads = _LEVEL_COLUMNS if slo else [h for h in _LEVEL_COLUMNS if not _slo_only(h)]
    title = f"By level, under the SLO {printable(slo)}" if slo else "By level"
    table = html_table(heads, [_cells(r, bool(slo)) for r in rows])
    return f"{rates}<h2>{html.escape(title)}</h2>{table}"


def _slo_only(head: str) -> bool:
    return head.split(" ")[0] in ("goodput", "95%", "attainment", "SLO")


def _level(r: Row) -> str:
    rate, conc = r.get("request_rate"), r.get("concurrency")
    if rate is not None:
        return f"{rate:g} req/s" + (f" (cap {conc:g})" if conc is not None else "")
    return f"concurrency {conc:g}" if conc is not None else "-"


def _triple(r: Row, metric: str) -> str:
    values = [r.get(f"{metric}_p{p}") for p in (50, 90, 99)]
    return "-" if values[0] is None else "/".join(num(v, ".1f") for v in values)


def _cells(r: Row, slo: bool) -> list[str]:
    cells = [printable(str(r["label"])), r["side"], _level(r), str(r["requests"])]
    if slo:
        low, high = r.get("goodput_low"), r.get("goodput_high")
        cells += [
            num(r.get("goodput_rps"), ".3f"),
            "-" if low is None else f"{num(low, '.3f')}-{num(high, '.3f')}",
            num(r.get("slo_attainment"), ".1%"),
            _met(r),
        ]
    return [*cells, _triple(r, "tpot_ms"), _triple(r, "ttft_ms")]


def _met(r: Row) -> str:
    met: Any = r.get("slo_met")
    if met is None:
        return "-"
    return "met" if met else "missed: " + "; ".join(r.get("slo_missed") or [])
