"""Renderers of ``schedule`` and ``fleet``: the configuration to deploy, and how it does."""

from __future__ import annotations

import json
import shlex

from breakeven.core.quantities import number_text
from breakeven.render.engine_configs import yaml_text
from breakeven.render.optimization import refusal_lines, request_rate_sentence
from breakeven.render.text import (
    Row,
    command_lines,
    display_width,
    fitted,
    grid,
    num,
    preformatted_html,
    printable,
)

_ENGINE_NAMES = {
    "vllm": "vLLM (Dynamic SD: num_speculative_tokens_per_batch_size)",
    "sglang": "SGLang (--speculative-adaptive-config)",
    "vllm-legacy": "older vLLM (disable_by_batch_size)",
    "trtllm": "TensorRT-LLM (speculative_config.draft_len_schedule)",
}


_SCHEDULE_COLUMNS = [
    "batch [sequences]",
    "k [tokens]",
    "speedup [x]",
    "best fixed k [x]",
    "gain [%]",
    "given up [%]",
    "time share [%]",
    "next best k",
    "it gives up [%]",
]


def _interval_lines(r: Row) -> list[str]:
    """Each speculating range's predicted speedups' interval (the lowest low and highest high
    of its batches), where a fit file sized them."""
    by_batch = r.get("by_batch") or []
    if not any("speedup_low" in x for x in by_batch):
        return []
    parts = []
    for x in r["ranges"]:
        inside = [
            b for b in by_batch if x["first"] <= b["batch"] <= x["last"] and "speedup_low" in b
        ]
        if x["k"] and inside:
            low = min(b["speedup_low"] for b in inside)
            high = max(b["speedup_high"] for b in inside)
            parts.append(f"{x['first']}-{x['last']}: {low:.3f}-{high:.3f}x")
    if not parts:
        return []
    return [
        "Intervals of the predicted speedups, from the fit's held-out error (--json: by_batch): "
        + "; ".join(parts)
        + "."
    ]


def schedule_table(r: Row) -> tuple[list[str], list[list[str]]]:
    """The schedule's ranges: the heads and cells of its text table and ``--format``."""
    rows = [
        [
            f"{x['first']}-{x['last']}",
            str(x["k"]),
            num(x["speedup"], ".3f"),
            num(x["best_fixed_speedup"], ".3f"),
            "-" if x["gain"] is None else f"{100 * x['gain']:+.1f}",
            f"{100 * x.get('given_up', 0.0):.2f}",
            f"{100 * x['share']:.1f}",
            "-" if x.get("runner_up") is None else str(x["runner_up"]),
            "-" if x.get("runner_up_regret") is None else f"{100 * x['runner_up_regret']:.2f}",
        ]
        for x in r["ranges"]
    ]
    return list(_SCHEDULE_COLUMNS), rows


def loss_text(x: float) -> str:
    """A share of throughput given up, in words: ``0.25%``, or ``less than 0.01%``."""
    return f"{x:.2%}" if x >= 5e-5 else "less than 0.01%"


def schedule_headline(r: Row) -> str:
    """schedule's answer in one line: k by batch range, and what that gains over the best fixed
    k over the load; the config to paste is at the end of the text."""
    ranges = r["ranges"]
    ks = ", ".join(f"{x['k']} at {x['first']}-{x['last']}" for x in ranges[:4])
    more = f" and {len(ranges) - 4} more ranges" if len(ranges) > 4 else ""
    if len(ranges) == 1 and ranges[0]["k"] == 0:
        return (
            f"Speculation off at every batch ({ranges[0]['first']}-{ranges[0]['last']}): "
            "no k beats plain decoding."
        )
    if len(ranges) == 1:
        return (
            f"k = {ranges[0]['k']} at every batch ({ranges[0]['first']}-{ranges[0]['last']}): "
            f"{number_text(r['speedup'], 3)}x plain decoding; no schedule needed."
        )
    return (
        f"k by batch: {ks}{more}; {r['gain']:+.2%} over the best fixed k "
        f"({r['best_fixed_k']}); config below."
    )


@fitted
def schedule_text(r: Row) -> str:
    """What ``breakeven schedule`` prints (``schedule_report``'s dict): its headline
    (:func:`schedule_headline`), the ranges, what the schedule gains over the best fixed k and
    gives up by merging, and the config to paste; where a fit file's runs do not support the
    schedule, why comes first and no config is pasted (:func:`refusal_lines`)."""
    count = len(r["ranges"])
    how = ""
    if r["engine"] == "vllm-legacy":
        how = (
            f", the best of one k up to a batch and none from it on (the best k by batch "
            f"makes {r['unmerged_ranges']} ranges; this gives up {loss_text(r['merge_loss'])} "
            "of their throughput)"
        )
    elif r["unmerged_ranges"] > count:
        how = (
            f", merged from {r['unmerged_ranges']} ranges of the best k at --min-gain "
            f"{r['min_gain']:.1%}, giving up {loss_text(r['merge_loss'])} of their throughput"
        )
    lines = [
        *refusal_lines(r, "schedule"),
        schedule_headline(r),
        "",
        f"Schedule for {_ENGINE_NAMES[r['engine']]}: {count} range{'s' * (count != 1)} "
        f"of batch sizes {r['ranges'][0]['first']} to {r['max_batch']}{how}.",
    ]
    lines += grid(*schedule_table(r), right=True, optional=["next best k", "it gives up [%]"])
    lines += _interval_lines(r)
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
    if r.get("request_rates"):
        lines += _rate_lines(r)
    lines += [f"Note: {n}." for n in r["notes"]]
    if r.get("refused"):
        lines += ["", "Config to paste: none: the runs do not support this schedule (see above)."]
    if r["flags"]:
        lines += ["", "Launch with:", *command_lines(shlex.split(r["flags"]))]
    if r.get("config_path") and r["config"] is not None:
        held = json.dumps(r["config"])
        if r.get("engine") == "trtllm":  # trtllm-serve reads YAML
            held = yaml_text(r["config"])
        elif len(held) + 2 > (display_width() or len(held) + 2):
            held = json.dumps(r["config"], indent=2)
        lines += [f"with {r['config_path']} holding:", *("  " + x for x in held.splitlines())]
    if r.get("python"):
        lines += [
            "",
            "Or in the LLM API: LLM(model, speculative_config=...) with",
            "  " + r["python"],
        ]
    return "\n".join(lines) + "\n"


def _rate_lines(r: Row) -> list[str]:
    """The schedule in requests per second: the break-even rate, then each range's rates."""
    parts = []
    for x in r["ranges"]:
        what = f"k = {x['k']}" if x["k"] else "off"
        low, high = x.get("rate_from"), x.get("rate_to")
        if low is None or high is None:
            continue
        parts.append(f"{what} from {number_text(low, 3)} to {number_text(high, 3)} req/s")
    lines = [request_rate_sentence(r["request_rates"])]
    if parts:
        lines.append("The ranges in requests per second: " + "; ".join(parts) + ".")
    return lines


def schedule_html(r: Row) -> str:
    """:func:`schedule_text` as HTML, for notebooks."""
    return preformatted_html(schedule_text(r))


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


@fitted
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
            num(i["accept_len"], ".3f"),
            num(i["k"], ".1f"),
            num(i["batch"], ".1f"),
            num(i["tok_s"], ".2f"),
            num(i["aggregate_tok_s"], ".2f"),
        ]
        if costs:
            share, gain = i["share_above_breakeven"], i["schedule_gain"]
            row += [
                num(i["predicted_speedup"], ".3f"),
                num(i["breakeven_batch"], "g"),
                "-" if share is None else f"{100 * share:.1f}",
                "-" if gain is None else f"{100 * gain:+.1f}",
            ]
        rows.append(row)
    sent = [printable(h) for h in r.get("headers", ())]
    sent += [f"{k}={printable(v)}" for k, v in r.get("query_params", {}).items()]
    lines = [
        f"{len(r['instances'])} servers in {printable(r['prometheus'])}"
        + (f" ({', '.join(sent)})" if sent else "")
        + f" from {r['start']} to "
        f"{r['end']} (step {r['step_s']:g} s, {r['rows']} steps with data, "
        f"{r['chunks']} range quer{'y' if r['chunks'] == 1 else 'ies'} per series), worst "
        "first:"
    ]
    lines += grid(heads, rows, right=False)
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


def fleet_html(r: Row) -> str:
    """:func:`fleet_text` as HTML, for notebooks and ``fleet --report``'s page."""
    return preformatted_html(fleet_text(r))
