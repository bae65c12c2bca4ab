"""Renderers of ``optimize``, ``optimize --tree`` and ``batch``: the best k, the best tree and
the break-even batch, each with the table it was chosen from."""

from __future__ import annotations

import html

from breakeven.core.quantities import QUANTITIES, STEPS_BETWEEN, number_text
from breakeven.render.text import (
    Row,
    fitted,
    format_value,
    grid,
    html_table,
    k_ranges,
    neighbours_regret,
    quantity_html_table,
    table,
)


def refusal_lines(r: Row, what: str) -> list[str]:
    """Why a plan from a fit file is not pasted (``refused``: the fit's runs do not support
    it, :func:`breakeven.fitting.saved.within_evidence`), as the first lines of its text; none
    where it is supported."""
    refused = r.get("refused")
    if not refused:
        return []
    source = (r.get("evidence") or {}).get("source") or "the fit file"
    return [
        f"Not pasted: the runs of {source} do not support this {what}:",
        *(f"  - {x}." for x in refused),
        "",
    ]


def _refusal_html(r: Row, what: str) -> str:
    lines = refusal_lines(r, what)
    return "".join(f"<p>{html.escape(x.strip())}</p>" for x in lines if x)


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


@fitted
def optimize_text(r: Row) -> str:
    """What ``breakeven optimize`` prints (from ``OptimizeResult.to_dict()``): the verdict,
    then every k considered; first, where a fit file's runs do not support the best k, why
    (:func:`refusal_lines`)."""
    lines = [*refusal_lines(r, "k"), _optimize_head(r)]
    columns = _optimize_columns(r)
    if "step_ms" not in r:
        lines.append("Leviathan's form: verify = 1 target step, drafting = k * c target steps.")
    else:
        lines.append(f"Plain decode step {number_text(r['step_ms'], 3)} ms at batch {r['batch']}.")
    if r.get("note"):
        lines.append(f"Note: {r['note']}.")
    lines += _how_sure(r)
    lines.append("")
    mark = next((i for i, o in enumerate(r["by_k"]) if o["k"] == r["best_k"]), None)
    lines += table(r["by_k"], columns, mark)
    return "\n".join(lines) + "\n"


def _how_sure(r: Row) -> list[str]:
    """What the best k's neighbours give up (regret), and, where a fit file sized the
    intervals, the best k's interval and the k it cannot be told from."""
    rows = {o["k"]: o for o in r["by_k"]}
    best = rows.get(r["best_k"])
    if best is None:
        return []
    given = neighbours_regret(rows, r["best_k"])
    lines = [f"Its neighbours give up {', '.join(given)} (regret)."] if given else []
    if best.get("speedup_low") is not None and best.get("speedup_high") is not None:
        close = r.get("close_k") or []
        told = (
            f"; the fit cannot tell k = {k_ranges(close)} from it"
            if close
            else "; every other k is outside it"
        )
        lines.append(
            f"Interval from the fit file's held-out error: {number_text(best['speedup_low'], 3)}"
            f"-{number_text(best['speedup_high'], 3)}x{told}."
        )
    return lines


def optimize_html(r: Row) -> str:
    """The by-k table as HTML, for notebooks."""
    head = f"<p>{html.escape(_optimize_head(r))}</p>"
    return _refusal_html(r, "k") + head + quantity_html_table(r["by_k"], _optimize_columns(r))


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


def _tree_rows(r: Row) -> list[list[str]]:
    """The best trees searched, as cells."""
    return [
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


@fitted
def tree_search_text(r: Row) -> str:
    """What ``breakeven optimize --tree`` prints (from ``TreeSearch.to_dict()``): the best tree,
    the best chain, the SGLang flags, and the best trees searched."""
    best, chain = r["best_tree"], r["best_chain"]
    lines = [*refusal_lines(r, "tree"), f"Best tree: {_tree_option(best)}."]
    if chain is not None:
        gain = r["gain_over_chain"]
        lines.append(
            f"Best chain (topk 1, k = steps): {_tree_option(chain)}; the tree "
            f"{'gains' if gain >= 0 else 'loses'} {abs(gain):.1%} over it."
        )
    if best["speedup"] <= 1:
        lines.append("No tree beats plain decoding here: do not speculate.")
    if r.get("refused"):
        lines.append("SGLang flags to paste: none (see above).")
    else:
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
    lines += grid(_TREE_SEARCH_COLUMNS, _tree_rows(r), right=True, indent="")
    return "\n".join(lines) + "\n"


def tree_search_html(r: Row) -> str:
    """The best tree and the best trees searched as HTML, for notebooks."""
    return (
        _refusal_html(r, "tree") + f"<p>Best tree: {html.escape(_tree_option(r['best_tree']))}.</p>"
    ) + html_table(_TREE_SEARCH_COLUMNS, _tree_rows(r))


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
    if b == r.get("max_batch_spec"):
        return (
            f"Break-even batch: {b}; speculation pays up to {b} sequences decoded together, "
            "the most the KV cache holds with the draft: past it speculation has no room."
        )
    return f"Break-even batch: {b}; speculation pays up to {b} sequences decoded together."


def request_rate_sentence(rates: Row) -> str:
    """The break-even request rate in words, with what each side serves in the sweep."""
    rate, n = rates["breakeven_request_rate"], f"{rates['output_tokens']:g}"
    served = (
        f"in the batches swept the plain server serves up to "
        f"{number_text(rates['plain_capacity_rps'], 3)} req/s, speculating up to "
        f"{number_text(rates['spec_capacity_rps'], 3)}"
    )
    head = f"In requests per second ({n} tokens decoded each, by Little's law over decoding): "
    if rate is None:
        return head + f"speculation pays at no rate; {served}."
    if isinstance(rate, str):
        return head + f"speculation pays at every rate served, {rate}; {served}."
    return (
        head + f"speculation pays up to {number_text(rate, 3)} req/s; above it, turn it off; "
        f"{served}."
    )


def _sample(points: list[Row], keep: set[int]) -> list[int]:
    """Indices to print: all of a short sweep, else powers of two, the ends and ``keep``."""
    if len(points) <= 40:
        return list(range(len(points)))
    chosen = {0, len(points) - 1}
    chosen |= {i for i, p in enumerate(points) if p["batch"] & (p["batch"] - 1) == 0}
    chosen |= {i for i, p in enumerate(points) if p["batch"] in keep}
    return sorted(chosen)


_BATCH_COLUMNS = ["batch", "k", "step_ms", "cycle_ms", "speedup"]
NO_ROOM = "no room"
"""A batch's speedup where the draft's sequences do not fit the KV cache: speculation cannot
run there (``max_batch_spec``)."""


def _batch_rows(r: Row) -> list[Row]:
    """The sweep's points as shown: a batch past ``max_batch_spec`` has :data:`NO_ROOM` for
    its speedup (null in ``--json``)."""
    spec = r.get("max_batch_spec")
    if spec is None:
        return r["speedup_by_batch"]
    return [
        p | {"speedup": NO_ROOM} if p["speedup"] is None and p["batch"] > spec else p
        for p in r["speedup_by_batch"]
    ]


@fitted
def batch_text(r: Row) -> str:
    """What ``breakeven batch`` prints (from ``BatchResult.to_dict()``): the break-even batch,
    the schedule, the sweep; first, where a fit file's runs do not support its best k by
    batch, why, and then that schedule is not given (:func:`refusal_lines`)."""
    lines = [*refusal_lines(r, "sweep's best k by batch"), _breakeven_batch_sentence(r)]
    if r.get("best_k_by_batch") is not None and r.get("refused"):
        lines.append("Best k by batch: not given, as the runs do not support it (see above).")
    elif r.get("best_k_by_batch") is not None:
        ranges = ", ".join(f"[{a}, {b}, {k}]" for a, b, k in r["best_k_by_batch"])
        lines.append(f"Best k by batch, as [first batch, last batch, k] (k = 0: off): [{ranges}]")
    if r.get("request_rates"):
        lines.append(request_rate_sentence(r["request_rates"]))
    if r.get("acceptance"):
        lines.append(f"Acceptance from the fit: {r['acceptance'].removeprefix('acceptance: ')}.")
    lines += [f"{n[:1].upper()}{n[1:]}." for n in r.get("notes") or ()]
    if r.get("measured_steps"):
        at = ", ".join(map(str, r["measured_steps"]))
        lines.append(
            f"The plain step at batch {at} is the measured baseline's (the fit file's); "
            f"{STEPS_BETWEEN}."
        )
    lines.append("")
    b = r["breakeven_batch"]
    keep = {b, b + 1} if isinstance(b, int) else set()
    points = _batch_rows(r)
    shown = _sample(points, keep)
    if len(shown) < len(points):
        lines.append(f"Selected batch sizes of 1..{r['max_batch']} (--json lists them all):")
    columns = _BATCH_COLUMNS
    if any("speedup_low" in p for p in points):
        columns = [*columns, "speedup_low", "speedup_high"]
        lines.insert(
            -1,
            "Intervals: +- 1.5 x the surface's largest held-out error (at least 2%), wider "
            "with each doubling of batch beyond the speculative runs', and over both readings "
            "of speculation's own cost where they ran at one batch size.",
        )
    lines += table([points[i] for i in shown], columns)
    return "\n".join(lines) + "\n"


def batch_html(r: Row) -> str:
    """The batch sweep as HTML, for notebooks."""
    head = f"<p>{html.escape(_breakeven_batch_sentence(r))}</p>"
    return (
        _refusal_html(r, "sweep's best k by batch")
        + head
        + quantity_html_table(_batch_rows(r), _BATCH_COLUMNS)
    )


def _quantity_table(rows: list[Row], columns: list[str]) -> tuple[list[str], list[list[str]]]:
    heads = [f"{c} [{QUANTITIES[c].unit}]" if QUANTITIES[c].unit else c for c in columns]
    return heads, [[format_value(c, row[c]) for c in columns] for row in rows]


def optimize_table(r: Row) -> tuple[list[str], list[list[str]]]:
    """optimize's by-k table: the heads and cells of ``--format markdown|csv``."""
    return _quantity_table(r["by_k"], _optimize_columns(r))


def batch_table(r: Row) -> tuple[list[str], list[list[str]]]:
    """batch's speedup at every batch size swept (text shows a selection): the heads and
    cells of ``--format markdown|csv``."""
    return _quantity_table(_batch_rows(r), _BATCH_COLUMNS)
