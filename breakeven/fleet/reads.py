"""``breakeven fleet``'s reads: each engine's series from Prometheus' range API
(:class:`breakeven.iotools.query_range.PrometheusAPI`), chunk by chunk, into the fleet's rows.

A long range is read in chunks of at most :data:`~breakeven.iotools.query_range.CHUNK_STEPS`
steps, one after the other, each turned into rows and forgotten before the next (memory grows
with the servers' compact points, not with the answers).  A sample whose value is NaN is a gap;
one that is infinite or beyond :data:`breakeven.fleet.view.MAX_VALUE` in size is ignored, and
the result's notes say how many.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from breakeven.core.errors import (
    BreakevenError,
    escape_braces,
)
from breakeven.core.schema import COLUMN_NAMES
from breakeven.fleet.view import FLEET_ENGINES, MAX_VALUE, Chunk, Collector, FleetResult, queries
from breakeven.iotools.csvfile import write_measurements
from breakeven.iotools.paths import written_as
from breakeven.iotools.query_range import (
    PrometheusAPI,
    chunks,
)
from breakeven.iotools.records import iso_timestamp
from breakeven.iotools.trtllm_stats import pool_iteration_stats


def iter_fleet(
    api: PrometheusAPI,
    start: float,
    end: float,
    step_s: float,
    match: str,
    window: str,
    stats: dict[str, Any],
) -> Iterator[dict[str, Any]]:
    """Every engine's rows over ``start..end``, chunk by chunk, as they are made; ``stats``
    gets ``queries`` (by engine) at once, then ``rows``, ``chunks`` and ``ignored`` (samples
    infinite or out of range) as they grow."""

    stats["queries"] = {engine: queries(engine, match, window) for engine in FLEET_ENGINES}
    stats["rows"] = stats["chunks"] = stats["ignored"] = 0
    blame = "match" if match else "prometheus"
    for first, last in chunks(start, end, step_s):
        stats["chunks"] += 1
        steps = round((last - first) / step_s) + 1
        for engine, qs in stats["queries"].items():
            chunk = Chunk(engine, first, step_s, steps)
            for name, q in qs.items():  # each answer read into the chunk, then dropped
                chunk.add(name, api.query_range(q, first, last, step_s, blame))
            stats["ignored"] += chunk.ignored
            for row in chunk.rows(f"prometheus {api.shown} ({engine} series)"):
                stats["rows"] += 1
                yield row


def read_trtllm_stats(urls: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row a trtllm-serve of ``urls`` (``--trtllm-stats``): the iterations its
    ``/metrics`` held, pooled (:func:`breakeven.iotools.trtllm_stats.pool_iteration_stats`),
    at the time of the read; and notes on what a read could not give."""
    rows, notes = [], []
    for url in urls:
        api = PrometheusAPI(url, flag="trtllm_stats", server="trtllm-serve")
        try:
            answer = api.get_json("/metrics")
        finally:
            api.close()
        where = f"{api.shown}/metrics"
        totals = pool_iteration_stats(answer, where, "trtllm_stats")
        if totals.skipped:
            notes.append(
                f"{where}: {totals.skipped:,} iteration(s) left out (not an object, or a field "
                "absent, not a number or negative)"
            )
        if totals.restarted:
            notes.append(f"{where}: the server restarted between the iterations read")
        if not totals.iterations:
            notes.append(
                f"{where} held no iteration stats: none since the last read (a read takes them), "
                "enable_iter_perf_stats is off, or return_perf_metrics' own collector took them "
                "(read its Prometheus series then)"
            )
            continue
        t = time.time()
        instance = urlsplit(api.root).netloc
        k = totals.k
        rows.append(
            {
                "run_id": f"{instance}|",
                "label": instance,
                "engine": "trtllm",
                "model": None,
                "timestamp": iso_timestamp(t),
                "concurrency": totals.batch if totals.batch > 0 else None,
                "num_spec_tokens": round(k) if k > 0 else None,
                "tok_s": _finite(totals.tok_s),
                "aggregate_tok_s": _finite(totals.aggregate_tok_s),
                "accept_len": _finite(totals.accept_len),
                "origin": "server",
                "source": f"trtllm-serve {where}: {totals.iterations:,} iterations "
                f"at {iso_timestamp(t)}",
                "time": t,
            }
        )
    return rows, notes


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def read_fleet(
    api: PrometheusAPI,
    first: float,
    last: float,
    step_s: float,
    match: str,
    window: str,
    *,
    trtllm_stats: Sequence[str] = (),
    out: str | None = None,
    force: bool = False,
    surface: Any = None,
    tolerance: float = 0.1,
    max_share_above: float = 0.1,
) -> tuple[Any, dict[str, Any]]:
    """``breakeven fleet``: the summary (a :class:`breakeven.fleet.view.FleetResult`), its
    rows streamed to ``out`` as they come (atomically), and each server's accept_len over
    time; a BreakevenError naming ``prometheus`` when no engine's series are there."""

    collector, stats = Collector(), {}
    try:
        extra, extra_notes = read_trtllm_stats(trtllm_stats)
        rows = (
            collector.add(r)
            for r in itertools.chain(
                extra, iter_fleet(api, first, last, step_s, match, window, stats)
            )
        )
        head = next(rows, None)
        if head is None:
            looked = "; ".join(q["accept_len"] for q in stats["queries"].values())
            raise BreakevenError(
                "{0}: no series of vLLM, SGLang, llama.cpp or TensorRT-LLM from "
                + f"{iso_timestamp(first)} to {iso_timestamp(last)}; looked for "
                + escape_braces(looked[:600])
                + "".join(f"; {escape_braces(note)}" for note in extra_notes),
                "prometheus",
            )
        if out is None:
            for _ in rows:
                pass
        else:
            with written_as("out", out, writer_name="path"):  # a full disk names --out
                write_measurements(
                    itertools.chain([head], rows),
                    out,
                    force=force,
                    columns=[*COLUMN_NAMES, "origin"],
                )
    finally:
        api.close()
    instances = collector.instances(
        tolerance=tolerance, max_share_above=max_share_above, cost=surface
    )
    result = FleetResult(
        tuple(instances),
        api.shown,
        iso_timestamp(first),
        iso_timestamp(last),
        step_s,
        stats["queries"],
        stats["rows"] + len(extra),
        stats["chunks"],
        notes=(*_notes(stats), *api.warning_notes(), *extra_notes),
        headers=tuple(h.shown for h in api.headers),
        query_params=dict(api.query_params),
    )
    return result, collector.series()


def _notes(stats: dict[str, Any]) -> tuple[str, ...]:
    ignored = stats.get("ignored", 0)
    if not ignored:
        return ()
    return (
        f"{ignored:,} sample{'s' if ignored != 1 else ''} infinite or larger than "
        f"{MAX_VALUE:g} in size, which no engine's rate or gauge reaches, "
        f"{'were' if ignored != 1 else 'was'} ignored (gaps)",
    )


__all__ = ["iter_fleet", "read_fleet", "read_trtllm_stats"]
