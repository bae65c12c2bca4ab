"""``breakeven fleet``'s reads from Prometheus' HTTP API (``/api/v1/query_range``).

Prometheus answers at most 11,000 steps per series in one query, so a long range is read in
chunks of at most :data:`CHUNK_STEPS` steps, one after the other, each turned into rows and
forgotten before the next (memory grows with the servers' compact points, not with the
answers).  A bearer token comes from an environment variable and is never printed; a user and
password in the URL go in an ``Authorization: Basic`` header and are shown as ``***``; TLS is
verified.  Every problem is one line: unreachable, a refused query (with its PromQL and
Prometheus' own error), nothing found (with the series looked for).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from breakeven.credentials import Redactor, shown_url, split_url
from breakeven.errors import BreakevenError, escape_braces
from breakeven.fleet import FLEET_ENGINES, Chunk, Collector, FleetResult, queries
from breakeven.iotools.httpclient import require_http
from breakeven.iotools.measurements import write_measurements
from breakeven.iotools.records import iso_timestamp
from breakeven.schema import COLUMN_NAMES

CHUNK_STEPS = 10_000
"""Steps per range query: under Prometheus' limit of 11,000 points per series."""
MAX_STEPS = 10_000_000
"""The most steps a fleet read covers (about 19 years at 60 s); past it, one line."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str, name: str) -> float:
    """``60s``, ``5m``, ``6h``, ``1d``: seconds > 0; else a BreakevenError naming ``name``."""
    m = _DURATION.match(str(text).strip())
    if not m or not float(m.group(1)) > 0:
        raise BreakevenError(
            "{0}: got " + escape_braces(repr(str(text))[:60]) + ", expected a "
            "duration such as 60s, 5m, 6h or 1d",
            name,
        )
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_time(text: str, name: str) -> float:
    """Unix seconds, or an RFC 3339 time (``2026-12-01T12:00:00Z``), as Unix seconds."""

    value = str(text).strip()
    try:
        t = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise BreakevenError(
                "{0}: got " + escape_braces(repr(value)[:60]) + ", expected "
                "Unix seconds or an RFC 3339 time such as "
                "2026-12-01T12:00:00Z",
                name,
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        t = parsed.timestamp()
    if not math.isfinite(t) or not 0 <= t < 1e11:
        raise BreakevenError(
            "{0}: got " + escape_braces(repr(value)[:60]) + ", expected a time after 1970", name
        )
    return t


def time_range(
    start: str | None, end: str | None, since: str | None, step_s: float
) -> tuple[float, float]:
    """(start, end) [Unix s] from ``--start``/``--end`` or ``--since`` (default 1h), checked."""
    if since is not None and start is not None:
        raise BreakevenError("{0} and {1} cannot be given together: give one", "since", "start")
    stop = parse_time(end, "end") if end is not None else time.time()
    first = (
        parse_time(start, "start")
        if start is not None
        else stop - parse_duration(since or "1h", "since")
    )
    if not first < stop:
        raise BreakevenError("{0}: the range ends before it starts", "end" if end else "start")
    if (stop - first) / step_s > MAX_STEPS:
        raise BreakevenError(
            "{0}: " + f"{(stop - first) / step_s:,.0f} steps, more than "
            f"{MAX_STEPS:,} in one read: use a longer --step or a shorter "
            "range",
            "step",
        )
    return first, stop


def chunks(start: float, end: float, step_s: float) -> Iterator[tuple[float, float]]:
    """Consecutive [start, end] pieces of at most :data:`CHUNK_STEPS` steps, on the step grid,
    that do not overlap."""
    t = start
    while t <= end:
        stop = min(end, t + (CHUNK_STEPS - 1) * step_s)
        yield t, stop
        t = stop + step_s


class PrometheusAPI:
    """A Prometheus server's range queries, with its errors as one line each."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 60.0) -> None:

        bare, auth = split_url(url.strip())
        if not re.match(r"^https?://[^/\s]+", bare):
            raise BreakevenError(
                "{0}: got " + escape_braces(repr(bare)[:80]) + ", expected "
                "http://host:9090 or https://...",
                "prometheus",
            )
        self.root = bare.rstrip("/")
        self.shown = shown_url(self.root, auth)
        self.redact = Redactor(token, auth=auth)
        httpx, _ = require_http()
        self.httpx = httpx
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(
            timeout=timeout_s,
            headers=headers,
            verify=True,
            auth=httpx.BasicAuth(*auth) if auth else None,
        )

    def close(self) -> None:
        self.client.close()

    def _fail(self, message: str, name: str = "prometheus") -> BreakevenError:
        return BreakevenError("{0}: " + escape_braces(self.redact(message)), name)

    def query_range(
        self, query: str, start: float, end: float, step_s: float, blame: str = "prometheus"
    ) -> list[dict[str, Any]]:
        """The ``matrix`` result of one range query; a refused query names ``blame`` (the
        flag whose text is in it, such as ``--match``)."""
        url = self.root + "/api/v1/query_range"
        params = {
            "query": query,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step_s:g}",
        }
        try:
            reply = self.client.post(url, data=params)
        except self.httpx.HTTPError as e:
            raise self._fail(
                f"cannot reach {self.shown} ({type(e).__name__}: "
                f"{str(e)[:160]}): is Prometheus running there?"
            ) from None
        try:
            body = reply.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise self._fail(
                f"{self.shown}/api/v1/query_range answered HTTP "
                f"{reply.status_code} without Prometheus' JSON: is this a "
                "Prometheus server?"
            )
        if body.get("status") != "success":
            error = str(body.get("error", ""))[:300]
            raise self._fail(
                f"Prometheus refused the query {query!r} (HTTP {reply.status_code}): {error}", blame
            )
        data = body.get("data") or {}
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise self._fail(f"{self.shown} answered a range query without a matrix result")
        return data["result"]


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
    gets ``queries`` (by engine) at once, then ``rows`` and ``chunks`` as they grow."""

    stats["queries"] = {engine: queries(engine, match, window) for engine in FLEET_ENGINES}
    stats["rows"] = stats["chunks"] = 0
    blame = "match" if match else "prometheus"
    for first, last in chunks(start, end, step_s):
        stats["chunks"] += 1
        steps = round((last - first) / step_s) + 1
        for engine, qs in stats["queries"].items():
            chunk = Chunk(engine, first, step_s, steps)
            for name, q in qs.items():  # each answer read into the chunk, then dropped
                chunk.add(name, api.query_range(q, first, last, step_s, blame))
            for row in chunk.rows(f"prometheus {api.shown} ({engine} series)"):
                stats["rows"] += 1
                yield row


def read_fleet(
    api: PrometheusAPI,
    first: float,
    last: float,
    step_s: float,
    match: str,
    window: str,
    *,
    out: str | None = None,
    force: bool = False,
    surface: Any = None,
    tolerance: float = 0.1,
    max_share_above: float = 0.1,
) -> tuple[Any, dict[str, Any]]:
    """``breakeven fleet``: the summary (a :class:`breakeven.fleet.FleetResult`), its
    rows streamed to ``out`` as they come (atomically), and each server's accept_len over
    time; a BreakevenError naming ``prometheus`` when no engine's series are there."""

    collector, stats = Collector(), {}
    try:
        rows = (
            collector.add(r) for r in iter_fleet(api, first, last, step_s, match, window, stats)
        )
        head = next(rows, None)
        if head is None:
            looked = "; ".join(q["accept_len"] for q in stats["queries"].values())
            raise BreakevenError(
                "{0}: no series of vLLM, SGLang or llama.cpp from "
                + f"{iso_timestamp(first)} to {iso_timestamp(last)}; looked for "
                + escape_braces(looked[:600]),
                "prometheus",
            )
        if out is None:
            for _ in rows:
                pass
        else:
            write_measurements(
                itertools.chain([head], rows), out, force=force, columns=[*COLUMN_NAMES, "origin"]
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
        stats["rows"],
        stats["chunks"],
    )
    return result, collector.series()


__all__ = [
    "CHUNK_STEPS",
    "PrometheusAPI",
    "chunks",
    "iter_fleet",
    "parse_duration",
    "parse_time",
    "read_fleet",
    "time_range",
]
