"""The fleet view: is speculation paying on each server, at the load it sees?  Read from the
Prometheus that already keeps every server's metrics (``breakeven fleet``).

The series read, by engine, are named in :mod:`breakeven.iotools.metrics` (vLLM V1's
spec-decode counters, generated tokens and running requests; SGLang's gauges; llama.cpp's
spec-decode counters and its requests' generation time; TensorRT-LLM's per-position
spec-decode counters, its finished requests' tokens and decode time, and its running requests).

Over each step, ``accept_len = 1 + rate(accepted) / rate(drafts)`` (bonus token included, as
everywhere in breakeven; SGLang's gauge counts it too), ``k = rate(draft tokens) /
rate(drafts)``, the aggregate rate is ``rate(generated)`` (SGLang: its gauge) [tok/s], the
batch is the running requests, and the per-sequence rate is aggregate / batch (llama.cpp:
``rate(tokens) / rate(seconds)``; TensorRT-LLM: ``(rate(tokens) - rate(requests)) /
rate(decode seconds)`` of the requests that finished, where it has them).  TensorRT-LLM's
drafts are its drafted tokens at position 0 (one a cycle that drafted).  Counter resets are ``rate()``'s job; a step without data
is a gap, never a zero.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from breakeven import render
from breakeven.core.errors import BreakevenError
from breakeven.core.quantities import MAX_K, STEPS_BETWEEN, plain_json
from breakeven.iotools.metrics import FLEET_METRICS
from breakeven.iotools.records import iso_timestamp
from breakeven.model import _speedup
from breakeven.model.acceptance import alpha_from_accept_len
from breakeven.model.surface import SurfaceCost
from breakeven.planning.batch import speedup_grid
from breakeven.planning.schedule import batch_weights, schedule_from_grid

FLEET_ENGINES = tuple(FLEET_METRICS)
"""The engines whose series fleet reads (their names:
:data:`breakeven.iotools.metrics.FLEET_METRICS`)."""


def _selector(name: str, match: str, select: str = "") -> str:
    """``name`` with the label matcher ``match`` (``{...}`` or empty) and the series' own
    ``select`` (a matcher without braces, or empty) joined."""
    if not select:
        return f"{name}{match}" if match else name
    inner = match[1:-1].strip().rstrip(",").strip() if match else ""
    return f"{name}{{{inner}, {select}}}" if inner else f"{name}{{{select}}}"


def queries(engine: str, match: str, window: str) -> dict[str, str]:
    """PromQL for each quantity of ``engine`` (see the module): ``accept_len``, ``k``,
    ``aggregate_tok_s``, ``running`` and, where it differs from aggregate / running,
    ``tok_s``; ``match`` is a label matcher such as ``{job="vllm"}`` (or empty)."""
    e = FLEET_METRICS[engine]
    by = "sum by (" + ", ".join(e.group) + ")"

    def rate(key: str) -> str:
        m = e.series[key]
        return f"{by} (rate({_selector(m.name, match, m.select)}[{window}]))"

    out = {"running": f"{by} ({_selector(e.name('running'), match)})"}
    if engine == "sglang":
        out["accept_len"] = (
            f"avg by ({', '.join(e.group)}) ({_selector(e.name('accept_len'), match)})"
        )
        out["aggregate_tok_s"] = f"{by} ({_selector(e.name('throughput'), match)})"
        return out
    out["accept_len"] = f"1 + {rate('accepted')} / {rate('drafts')}"
    out["k"] = f"{rate('draft_tokens')} / {rate('drafts')}"
    out["aggregate_tok_s"] = rate("generated")
    if engine == "llamacpp":
        out["tok_s"] = f"{rate('generated')} / {rate('seconds')}"
    elif engine == "trtllm":  # a request's first token is the prefill's
        out["tok_s"] = f"({rate('generated')} - {rate('requests')}) / {rate('decode_seconds')}"
    return out


def check_match(match: str) -> str:
    """``match`` as the label matcher it must be: empty, or ``{...}``."""
    text = match.strip()
    if text and not (text.startswith("{") and text.endswith("}")):
        raise BreakevenError(
            "{0}: got "
            + repr(match)[:80].replace("{", "{{").replace("}", "}}")
            + ", expected a label matcher such as '{{job=\"vllm\"}}'",
            "match",
        )
    return "" if text in ("", "{}") else text


_QUANTITIES = ("accept_len", "k", "aggregate_tok_s", "running", "tok_s")


MAX_VALUE = 1e12
"""The largest size of a sample's value believed [any unit]: no engine's rate, gauge or
accept_len comes near it, and values below it cannot overflow the means and products the
summary takes.  A value infinite or beyond it is ignored (a gap), and counted."""


class Chunk:
    """One range query's steps of every server of one engine, filled query by query
    (:meth:`add`: each answer is read into a server's steps with data and dropped), then
    turned into rows (:meth:`rows`).  Memory grows with the samples given, never with the
    steps of the range times the servers."""

    def __init__(self, engine: str, start: float, step_s: float, steps: int) -> None:
        self.engine, self.start, self.step_s, self.steps = engine, start, step_s, steps
        self.values: dict[tuple[str, str], dict[int, list[float]]] = {}
        self.ignored = 0
        """Samples infinite or beyond :data:`MAX_VALUE` in size, not kept."""

    def add(self, name: str, result: Sequence[dict[str, Any]]) -> None:
        """Prometheus' ``matrix`` result of quantity ``name`` (:data:`_QUANTITIES`): samples
        ``[time, value]``, the value a number or its string; NaN is a gap, a value infinite
        or beyond :data:`MAX_VALUE` in size is ignored (counted in :attr:`ignored`)."""

        column = _QUANTITIES.index(name)
        for series in result:
            labels = series.get("metric") or {}
            key = (str(labels.get("instance", "")), str(labels.get("model_name", "")))
            steps = self.values.setdefault(key, {})
            for t, value in series.get("values") or ():
                i = round((float(t) - self.start) / self.step_s)
                if not 0 <= i < self.steps:
                    continue
                v = float(value)
                if v != v:  # NaN: no data at this step (0 / 0 on an idle server)
                    continue
                if not -MAX_VALUE <= v <= MAX_VALUE:
                    self.ignored += 1
                    continue
                row = steps.get(i)
                if row is None:
                    row = steps[i] = [math.nan] * len(_QUANTITIES)
                row[column] = v

    def rows(self, source: str) -> Iterator[dict[str, Any]]:
        """Measurement rows (``origin=server``): one per server and step with an accept_len or
        a rate; a step without data is no row."""

        for (instance, model), steps in self.values.items():
            for i in sorted(steps):
                tau, k, aggregate, running, tok_s = steps[i]
                busy = running > 0
                if tok_s != tok_s and busy:
                    tok_s = aggregate / running
                    if not -MAX_VALUE <= tok_s <= MAX_VALUE:  # over a running count near 0
                        tok_s = math.nan
                if tau != tau and tok_s != tok_s:
                    continue
                t = self.start + i * self.step_s
                yield {
                    "run_id": f"{instance}|{model}",
                    "label": instance,
                    "engine": self.engine,
                    "model": model or None,
                    "timestamp": iso_timestamp(t),
                    "concurrency": running if busy else None,
                    "num_spec_tokens": round(k) if k > 0 else None,
                    "tok_s": _number(tok_s),
                    "aggregate_tok_s": _number(aggregate),
                    "accept_len": _number(tau),
                    "origin": "server",
                    "source": f"{source} instance {instance} at {iso_timestamp(t)}",
                    "time": t,
                }


def _number(x: Any) -> float | None:
    return None if x != x else float(x)


def rows_of(
    engine: str,
    results: Mapping[str, Sequence[dict[str, Any]]],
    source: str,
    start: float,
    step_s: float,
    steps: int,
) -> Iterator[dict[str, Any]]:
    """The rows of one chunk's answers at once (:class:`Chunk`)."""
    chunk = Chunk(engine, start, step_s, steps)
    for name, result in results.items():
        chunk.add(name, result)
    return chunk.rows(source)


@dataclass(frozen=True)
class Instance:
    """One server over the range."""

    engine: str
    instance: str
    model: str
    points: int
    """Steps with data [steps]."""
    accept_len: float
    """Mean accept_len over the steps [tokens/cycle] (NaN: no speculation seen)."""
    k: float
    """Mean draft tokens per cycle [tokens] (NaN where not told)."""
    batch: float
    """Mean running requests [sequences]."""
    tok_s: float
    """Mean per-sequence decode rate [tok/s]."""
    aggregate_tok_s: float
    """Mean aggregate decode rate [tok/s]."""
    first: str
    last: str
    predicted_speedup: float = math.nan
    """With a cost model: the mean over the steps of accept_len * t(B, 1) / cycle(B, k) at the
    step's batch B and accept_len [x]."""
    breakeven_batch: float = math.nan
    """With a cost model: the largest batch where speculation at this accept_len and k still
    pays [sequences]."""
    share_above_breakeven: float = math.nan
    """Share of the steps whose batch is above the break-even batch [fraction]."""
    schedule_gain: float = math.nan
    """With a cost model: the throughput the best schedule of k by batch would have added to
    the fixed k the server ran, at the load it saw [fraction]."""
    flags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _drop(times: Sequence[float], taus: Sequence[float], tolerance: float) -> float | None:
    """When accept_len fell by more than ``tolerance`` against its first fifth and stayed
    there: the first step ``i`` from the first fifth on where both the median of the
    ``max(3, n // 20)`` steps from ``i`` and the median of every step from ``i`` on are low
    (None: there is none).

    Linear in the steps: a median is below ``low`` when more than half the values are, or,
    where exactly half of an even number are, when the largest of those and the smallest of
    the others average below it; counts come from prefix sums, the largest and smallest
    from monotonic queues over the window and from suffix scans."""
    n = len(taus)
    if n < 10:
        return None
    baseline = statistics.median(taus[: max(2, n // 5)])
    low = baseline * (1 - tolerance)
    width = max(3, n // 20)
    first, last = n // 5, n - width
    if first > last:
        return None
    below = list(itertools.accumulate((x < low for x in taus), initial=0))
    # The largest value below low and the smallest at or above it, in taus[i:].
    tail_high, tail_low = [-math.inf] * (n + 1), [math.inf] * (n + 1)
    for j in range(n - 1, first - 1, -1):
        x = taus[j]
        tail_high[j] = max(tail_high[j + 1], x) if x < low else tail_high[j + 1]
        tail_low[j] = tail_low[j + 1] if x < low else min(tail_low[j + 1], x)
    highs: deque[int] = deque()  # indices of the window's values below low, decreasing
    lows: deque[int] = deque()  # indices of its values at or above low, increasing

    def enter(j: int) -> None:
        x = taus[j]
        if x < low:
            while highs and taus[highs[-1]] <= x:
                highs.pop()
            highs.append(j)
        else:
            while lows and taus[lows[-1]] >= x:
                lows.pop()
            lows.append(j)

    for j in range(first, first + width):
        enter(j)
    for i in range(first, last + 1):
        if i > first:
            for queue in (highs, lows):
                if queue and queue[0] < i:
                    queue.popleft()
            enter(i + width - 1)
        window = _median_below(
            below[i + width] - below[i],
            width,
            taus[highs[0]] if highs else -math.inf,
            taus[lows[0]] if lows else math.inf,
            low,
        )
        if window and _median_below(below[n] - below[i], n - i, tail_high[i], tail_low[i], low):
            return times[i]
    return None


def _median_below(count: int, size: int, high: float, low_side: float, low: float) -> bool:
    """Whether the median of ``size`` values is below ``low``, given ``count`` of them below
    it, the largest of those (``high``) and the smallest of the others (``low_side``): as
    :func:`statistics.median` computes it (the mean of the middle two of an even number)."""
    half = size // 2
    if size % 2 or count != half:
        return count > half
    return (high + low_side) / 2 < low


class Collector:
    """Each server's steps, as rows stream by (:meth:`add`), for :meth:`instances`: a tuple a
    step (time [s], accept_len, k, batch, tok_s, aggregate_tok_s), compact, since a day of 100
    servers at 60 s is 144,000 of them."""

    def __init__(self) -> None:
        self.meta: dict[str, tuple[str, str, str]] = {}
        self.points: dict[str, list[tuple[Any, ...]]] = {}

    def add(self, row: dict[str, Any]) -> dict[str, Any]:
        key = row["run_id"]
        if key not in self.meta:
            self.meta[key] = (row["engine"], row["label"], row["model"] or "")
            self.points[key] = []
        self.points[key].append(
            (
                row["time"],
                row["accept_len"],
                row["num_spec_tokens"],
                row["concurrency"],
                row["tok_s"],
                row["aggregate_tok_s"],
            )
        )
        return row

    def series(self, most: int = 400) -> dict[str, tuple[list[float], list[float]]]:
        """Each server's accept_len over time (times [Unix s], values), at most ``most``
        points a server (every n-th step), for a picture."""
        out = {}
        for key, points in self.points.items():
            spec = sorted((p[0], p[1]) for p in points if p[1] is not None)
            every = max(1, math.ceil(len(spec) / most))
            label = self.meta[key][1] + (f" {self.meta[key][2]}" if self.meta[key][2] else "")
            out[label] = ([t for t, _ in spec[::every]], [v for _, v in spec[::every]])
        return out

    def instances(
        self, *, tolerance: float = 0.1, max_share_above: float = 0.1, cost: Any = None
    ) -> list[Instance]:
        """Each server's figures (:class:`Instance`), worst first: by predicted speedup where
        a cost model (``cost``: a :class:`breakeven.model.surface.BatchSurface`) is given, else by
        accept_len; flags ``acceptance_drop`` and ``above_breakeven``."""
        out = []
        for key, points in self.points.items():
            points.sort(key=lambda p: p[0])
            out.append(_instance(self.meta[key], points, tolerance, max_share_above, cost))
        return sorted(out, key=lambda i: (_rank(i), i.instance))


def summarize(
    rows: Iterable[dict[str, Any]],
    *,
    tolerance: float = 0.1,
    max_share_above: float = 0.1,
    cost: Any = None,
) -> list[Instance]:
    """:meth:`Collector.instances` of ``rows``.

    Parameters
    ----------
    rows : iterable of dict
        Rows in the measurement schema, each a server's step (:meth:`Collector.add`).
    tolerance : float
        ``acceptance_drop``: accept_len fell by more than this fraction [fraction].
    max_share_above : float
        ``above_breakeven``: more than this share of the time above the break-even batch
        [fraction].
    cost : breakeven.model.surface.BatchSurface, optional
        A fitted forward surface: each server's predicted speedup at the load it saw.
    """
    collector = Collector()
    for r in rows:
        collector.add(r)
    return collector.instances(tolerance=tolerance, max_share_above=max_share_above, cost=cost)


def _rank(i: Instance) -> float:
    value = i.predicted_speedup if math.isfinite(i.predicted_speedup) else i.accept_len
    return value if math.isfinite(value) else math.inf


def _mean(values: Iterable[Any]) -> float:
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.fmean(xs) if xs else math.nan


def _instance(
    meta: tuple[str, str, str],
    points: list[tuple[Any, ...]],
    tolerance: float,
    max_share_above: float,
    cost: Any,
) -> Instance:
    engine, label, model = meta
    spec = [p for p in points if p[1] is not None]
    flags, notes = [], []
    dropped = _drop([p[0] for p in spec], [p[1] for p in spec], tolerance)
    if dropped is not None:
        flags.append("acceptance_drop")
        notes.append(
            f"accept_len fell by more than {tolerance:.0%} from {iso_timestamp(dropped)} on"
        )
    figures: dict[str, float] = {}
    if cost is not None and spec:
        figures = _against_cost(spec, cost)
        if cost.baseline_steps:
            at = ", ".join(str(b) for b, _ in cost.baseline_steps)
            notes.append(
                f"the plain step at batch {at} is the fit's measured baseline; " + STEPS_BETWEEN
            )
        if figures["share_above_breakeven"] > max_share_above:
            flags.append("above_breakeven")
            notes.append(
                f"{figures['share_above_breakeven']:.0%} of the time above the "
                f"break-even batch {figures['breakeven_batch']:g}"
            )
    columns = list(zip(*points, strict=True))
    return Instance(
        engine,
        label,
        model,
        len(points),
        *(_mean(c) for c in columns[1:]),
        iso_timestamp(points[0][0]),
        iso_timestamp(points[-1][0]),
        **figures,
        flags=tuple(flags),
        notes=tuple(notes),
    )


def _against_cost(spec: list[tuple[Any, ...]], surface: Any) -> dict[str, float]:
    """Predicted speedup at each step's batch and accept_len, and the share of steps above
    the break-even batch at the mean accept_len and k."""

    k = max(1, round(_mean(p[2] for p in spec))) if math.isfinite(_mean(p[2] for p in spec)) else 1
    speedups = [
        float(_speedup(p[1], surface.step_ms(p[3] or 1.0)[0], surface.cycle_ms(p[3] or 1.0, k)))
        for p in spec
    ]
    tau = _mean(p[1] for p in spec)
    breakeven = 0.0
    for b in range(1, 4097):
        if float(_speedup(tau, surface.step_ms(b)[0], surface.cycle_ms(b, k))) >= 1:
            breakeven = float(b)
        elif b > breakeven + 64:
            break
    above = [p for p in spec if (p[3] or 0) > breakeven]
    return {
        "predicted_speedup": _mean(speedups),
        "breakeven_batch": breakeven,
        "share_above_breakeven": len(above) / len(spec),
        "schedule_gain": _schedule_gain(spec, surface, tau, k),
    }


def _schedule_gain(spec: list[tuple[Any, ...]], surface: Any, tau: float, k: int) -> float:
    """What the best schedule of k by batch (:mod:`breakeven.planning.schedule`, every change of k kept)
    would have made over the fixed k the server ran, at the load it saw [fraction]: acceptance
    at other k from the alpha of its accept_len at k (i.i.d. positions)."""

    if not 1 <= tau <= k + 1 or k > MAX_K:
        return math.nan
    batches = [max(1, round(p[3] or 1.0)) for p in spec]
    load = {b: n / len(batches) for b, n in Counter(batches).items()}
    curve = SurfaceCost(surface)
    grid = speedup_grid(
        curve,
        alpha=float(alpha_from_accept_len(tau, k)),
        draft=curve.draft,
        k_max=max(8, k),
        max_batch=min(max(batches), 4096),
    )
    plan = schedule_from_grid(grid, min_gain=0.0, load=load)
    weights = batch_weights(grid, load)
    column = grid.ks.index(k)
    fixed = sum(
        w * (grid.speedup[i][column] if grid.speedup[i][column] == grid.speedup[i][column] else 0.0)
        for i, w in enumerate(weights)
    )
    scheduled = sum(w * speedup for w, (_, _, speedup) in zip(weights, plan.by_batch, strict=True))
    return scheduled / fixed - 1 if fixed > 0 else math.nan


@dataclass(frozen=True)
class FleetResult:
    """Every server the queries found, worst first."""

    instances: tuple[Instance, ...]
    prometheus: str
    start: str
    end: str
    step_s: float
    queries: dict[str, dict[str, str]]
    """The PromQL of each engine's quantities."""
    rows: int
    chunks: int
    """Range queries per series (Prometheus answers at most 11,000 steps a query)."""
    notes: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    """The headers sent with every query (``--header``), their values shown as ``***``."""
    query_params: dict[str, str] = field(default_factory=dict)
    """Parameters added to every query (Thanos' ``dedup`` and ``partial_response``)."""

    def to_dict(self) -> dict[str, Any]:
        """The servers (worst first) and where they were read from, as plain data; a number
        that is not finite is None."""
        return plain_json(
            {
                "prometheus": self.prometheus,
                "start": self.start,
                "end": self.end,
                "step_s": self.step_s,
                "rows": self.rows,
                "chunks": self.chunks,
                "instances": [asdict(i) for i in self.instances],
                "queries": self.queries,
                "notes": list(self.notes),
                "headers": list(self.headers),
                "query_params": dict(self.query_params),
            }
        )

    def report(self) -> str:
        """What ``breakeven fleet`` prints: a line per server, worst first, then each
        server's flags."""
        return render.fleet_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.fleet_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """Each server's share of time above its break-even batch (``fleet --report``'s
        second figure); returns the axes.  Raises :class:`breakeven.render.plot.NothingToDraw`
        without a cost model (``surface``)."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.fleet_above(self.to_dict()["instances"], ax)


__all__: Sequence[str] = (
    "FLEET_ENGINES",
    "MAX_VALUE",
    "Chunk",
    "Collector",
    "FleetResult",
    "Instance",
    "check_match",
    "queries",
    "rows_of",
    "summarize",
)
