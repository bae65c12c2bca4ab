"""One answer from many nodes (``breakeven sweep --ray``): each node's speedup, then pooled.

Each node of a cluster ran the sweep's whole plan on its own, so check pairs a node's runs with
its own baselines only (its hardware carries the node:
:func:`breakeven.measurements.normalise.on_node`) and gives each node's speedup of each k at
each load with an interval from that node's launches.  Here they become one answer, the node
as a block:

- each node's speedup on the log scale, ``y_i = ln(s_i)``, with a standard error from its
  interval, ``se_i = ln(high_i / low_i) / (2 z)``, z the normal quantile (an interval from few
  launches was made with a larger t quantile, so this se is, if anything, too large);
- the nodes agree unless Cochran's ``Q = sum w_i (y_i - y_bar)^2`` (``w_i = 1 / se_i^2``, the
  fixed-effect mean ``y_bar``) is beyond its chi-squared quantile with ``n - 1`` degrees of
  freedom at :data:`~breakeven.measurements.intervals.CONFIDENCE`: then ``node_drift``, and the
  nodes disagreeing are named (each against the nodes' median, beyond noise; with two nodes,
  both);
- the pooled speedup is ``exp(y_bar)``: where the nodes agree, with the fixed-effect interval
  ``y_bar +- z / sqrt(sum w_i)``; where they drift, with DerSimonian and Laird's between-node
  variance added to each node's and a t quantile with ``n - 1`` degrees of freedom, so the
  interval covers node-to-node differences (wide with few nodes, as it should be).

A node faster at everything alike (its baseline too) has the same speedup as the others: that
is hardware, not drift, and is not flagged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy.special import chdtri, ndtri, stdtrit

from breakeven.measurements.intervals import CONFIDENCE, verdict
from breakeven.measurements.normalise import node_of


@dataclass(frozen=True)
class NodeSpeedup:
    """One node's speedup of one k at one load, from its own launches."""

    node: str
    """The node's id (its first 12 characters, as check's hardware names it)."""
    measured_speedup: float
    ci_low: float
    ci_high: float
    fingerprint: str = ""
    """Its launches' settings (:func:`breakeven.core.provenance.fingerprint`)."""


@dataclass(frozen=True)
class Pooled:
    """A speedup pooled over nodes, with the node as a block."""

    measured_speedup: float
    ci_low: float
    ci_high: float
    verdict: str
    """As check's: faster, slower, within noise, no interval."""
    nodes: tuple[NodeSpeedup, ...]
    drift: tuple[str, ...] = ()
    """The nodes whose speedups disagree beyond noise (``node_drift``); empty where they
    agree."""
    why: str = ""
    """The drift in words: each drifting node's speedup, and what differs in its settings."""

    def node_rows(self) -> list[dict[str, Any]]:
        """Each node's speedup as plain data: ``node``, ``measured_speedup``, ``ci_low``,
        ``ci_high``, and ``drift``: whether it is one of the nodes that disagree."""
        return [
            {
                "node": s.node,
                "measured_speedup": s.measured_speedup,
                "ci_low": s.ci_low,
                "ci_high": s.ci_high,
                "drift": s.node in self.drift,
            }
            for s in self.nodes
        ]


def _log_se(s: NodeSpeedup) -> float:
    """A node's standard error on the log scale, from its interval (NaN: none)."""
    if not (s.ci_low > 0 and math.isfinite(s.ci_high) and s.ci_high >= s.ci_low):
        return math.nan
    return math.log(s.ci_high / s.ci_low) / (2 * ndtri((1 + CONFIDENCE) / 2))


def _fixed(ys: Sequence[float], ses: Sequence[float]) -> tuple[float, float, float]:
    """The fixed-effect mean, its standard error and Cochran's Q."""
    ws = [1 / max(se, 1e-12) ** 2 for se in ses]
    mean = sum(w * y for w, y in zip(ws, ys, strict=True)) / sum(ws)
    q = sum(w * (y - mean) ** 2 for w, y in zip(ws, ys, strict=True))
    return mean, math.sqrt(1 / sum(ws)), q


def _drifting(ys: list[float], ses: list[float], names: list[str]) -> tuple[str, ...]:
    """The nodes that disagree with the nodes' median beyond noise (a node's difference from
    it over its error, times sqrt 2 for the median's own); with two nodes, or where no one node
    stands out, all of them."""
    if len(ys) == 2:
        return tuple(names)
    z = ndtri((1 + CONFIDENCE) / 2)
    ordered = sorted(ys)
    middle = len(ys) // 2
    center = ordered[middle] if len(ys) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    out = [n for y, se, n in zip(ys, ses, names, strict=True) if abs(y - center) > z * se * 2**0.5]
    return tuple(out) or tuple(names)


def _settings_text(drifting: Sequence[NodeSpeedup], others: Sequence[NodeSpeedup]) -> str:
    """What differs between the drifting nodes' settings and the others', in words (the
    node's own id, address and hostname left out: they always differ)."""

    def pairs(s: NodeSpeedup) -> set[str]:
        return {p for p in s.fingerprint.split() if not p.startswith("node")}

    if not others:
        others = drifting[1:]
        drifting = drifting[:1]
    mine = set().union(*(pairs(s) for s in drifting))
    theirs = set().union(*(pairs(s) for s in others))
    keys = sorted({p.split("=", 1)[0] for p in mine ^ theirs})
    if not keys:
        return (
            "their recorded settings do not differ: look at what breakeven cannot read "
            "(GPU clocks and throttling, interconnect, driver, the draft model's files)"
        )
    return (
        "their settings differ in "
        + ", ".join(keys[:6])
        + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    )


def pool_nodes(speedups: Sequence[NodeSpeedup]) -> Pooled:
    """One speedup from each node's (see the module's text)."""
    usable = [s for s in speedups if s.measured_speedup > 0 and not math.isnan(_log_se(s))]
    if not usable:
        finite = [s.measured_speedup for s in speedups if s.measured_speedup > 0]
        point = math.exp(sum(map(math.log, finite)) / len(finite)) if finite else math.nan
        return Pooled(point, math.nan, math.nan, "no interval", tuple(speedups))
    ys = [math.log(s.measured_speedup) for s in usable]
    ses = [_log_se(s) for s in usable]
    mean, se, q = _fixed(ys, ses)
    n = len(usable)
    drift: tuple[str, ...] = ()
    why = ""
    if n >= 2 and q > chdtri(n - 1, 1 - CONFIDENCE):
        # DerSimonian-Laird: the between-node variance, added to each node's.
        ws = [1 / max(x, 1e-12) ** 2 for x in ses]
        tau2 = max(0.0, (q - (n - 1)) / (sum(ws) - sum(w * w for w in ws) / sum(ws)))
        mean, se, _ = _fixed(ys, [math.sqrt(x * x + tau2) for x in ses])
        half = stdtrit(n - 1, (1 + CONFIDENCE) / 2) * se
        drift = _drifting(ys, ses, [s.node for s in usable])
        named = [s for s in usable if s.node in drift]
        said = ", ".join(
            f"node {s.node} {s.measured_speedup:.2f}x ({s.ci_low:.2f}-{s.ci_high:.2f})"
            for s in usable
        )
        why = (
            f"the nodes' speedups disagree beyond noise ({said}): "
            f"{_settings_text(named, [s for s in usable if s.node not in drift])}"
        )
    else:
        half = ndtri((1 + CONFIDENCE) / 2) * se
    point, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    return Pooled(point, low, high, verdict(point, low, high), tuple(speedups), drift, why)


def node_speedups(comparisons: Sequence[Any]) -> dict[tuple[str, float, float], list[Any]]:
    """check's comparisons of a cluster's rows grouped by what pools: (label, concurrency,
    request rate), each group's comparisons one per node; empty where no comparison names a
    node (rows off a cluster)."""
    groups: dict[tuple[str, float, float], list[Any]] = {}
    if not any(node_of(c.hardware)[1] for c in comparisons):
        return groups
    for c in comparisons:
        rate = getattr(c, "request_rate", math.nan)
        key = (c.label, float(c.concurrency), -1.0 if math.isnan(rate) else float(rate))
        groups.setdefault(key, []).append(c)
    return groups


def pool_comparisons(comparisons: Sequence[Any]) -> Pooled:
    """One label's comparisons at one load, one per node, pooled (:func:`pool_nodes`)."""
    return pool_nodes(
        [
            NodeSpeedup(
                node_of(c.hardware)[1],
                c.measured_speedup,
                c.ci_low,
                c.ci_high,
                getattr(c, "fingerprint", ""),
            )
            for c in comparisons
        ]
    )


def across_nodes(comparisons: Sequence[Any]) -> list[tuple[dict[str, Any], Sequence[Any]]]:
    """Each k and load of a cluster's comparisons pooled over its nodes, as plain data
    (``label``, ``concurrency``, ``request_rate``, the pooled ``measured_speedup``, ``ci_low``,
    ``ci_high`` and ``verdict``, each node's in ``nodes``, and ``drift`` and ``why``), with the
    comparisons pooled; empty off a cluster."""
    out = []
    for (label, concurrency, rate), group in node_speedups(comparisons).items():
        pooled = pool_comparisons(group)
        row = {
            "label": label,
            "concurrency": concurrency,
            "request_rate": rate if rate >= 0 else math.nan,
            "measured_speedup": pooled.measured_speedup,
            "ci_low": pooled.ci_low,
            "ci_high": pooled.ci_high,
            "verdict": pooled.verdict,
            "nodes": pooled.node_rows(),
            "drift": list(pooled.drift),
            "why": pooled.why,
        }
        out.append((row, group))
    return out


__all__: Sequence[str] = (
    "NodeSpeedup",
    "Pooled",
    "across_nodes",
    "node_speedups",
    "pool_comparisons",
    "pool_nodes",
)
