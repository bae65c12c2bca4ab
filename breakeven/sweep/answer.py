"""The end of ``breakeven sweep``: its directory read back as an answer.

The sweep's rows (``DIR/runs.csv``) are read by the commands a user would run by hand, in the
order they would run them:

- ``check``: each k at each load against the baselines, with launch-level intervals;
- ``fit``: the cycle's costs and their held-out error (``DIR/fit.json``);
- ``schedule``: where the launches ran at two or more loads and the engine has a schedule
  (vLLM, SGLang), the best k per batch and its config (``DIR/schedule.json``).

From check's verdicts comes the best k at each load: the fastest k whose interval lies above 1
(``faster``), else none (speculation off).  Its flags, in the engine's own form
(:func:`breakeven.render.engine_configs.speculation_args`), are the config to paste.  A step that cannot be
taken (a fit without acceptance counts, one load only) is said, not raised: the verdict stands
without it.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from breakeven.core.errors import BreakevenError, UnreadableInput
from breakeven.core.quantities import number_text, plain_json
from breakeven.iotools.manifest import manifest_path, read_manifest
from breakeven.render.engine_configs import SCHEDULE_ENGINES, speculation_args


@dataclass(frozen=True)
class BestK:
    """The best k at one load: the fastest k measured faster than the baseline (its interval
    above 1), else the fastest measured where no run has an interval (said to be unconfirmed),
    else none."""

    concurrency: float
    """The load [requests in flight] (an open-loop level's cap, else NaN)."""
    num_spec_tokens: int
    """k [tokens]; 0 where no k was measured faster (speculation off)."""
    label: str
    measured_speedup: float
    """Its per-sequence rate over the baseline's [x]; 1 for speculation off."""
    ci_low: float
    ci_high: float
    """Its 95% interval [x] (launch-level where it had two or more launches a side)."""
    flags: str
    """Its speculation flags, as the engine reads them ("" for speculation off)."""
    why: str
    """One sentence: why this k."""
    decided: bool = True
    """False where the data at this load cannot decide (a comparison's verdict is one of
    check's :data:`~breakeven.measurements.flags.DOUBT`): no k is chosen and nothing is pasted."""
    request_rate: float = math.nan
    """An open-loop load's offered rate [req/s] (``--request-rate``); NaN at a concurrency."""
    nodes: tuple[dict[str, Any], ...] = ()
    """On a cluster (``sweep --ray``): each node's speedup of this k, from its own launches
    (``node``, ``measured_speedup``, ``ci_low``, ``ci_high``); the speedup above pools them,
    the node as a block (:mod:`breakeven.measurements.nodes`)."""

    @property
    def load_text(self) -> str:
        """The load in words: ``4 req/s`` or ``concurrency 8``."""
        if self.request_rate > 0:
            return f"{self.request_rate:g} req/s"
        return f"concurrency {self.concurrency:g}"


@dataclass(frozen=True)
class SweepAnswer:
    """check, fit and schedule of a sweep's rows, and the best k at each load."""

    directory: str
    engine: str
    check: Any
    """The :class:`breakeven.measurements.check.CheckResult` of ``DIR/runs.csv``."""
    best: tuple[BestK, ...]
    fit: Any = None
    """The :class:`breakeven.fitting.fit.FitResult`, or None (see ``notes``)."""
    schedule: Any = None
    """The :class:`breakeven.planning.schedule.ScheduleReport`, or None (see ``notes``)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What could not be done, and why."""

    @property
    def files(self) -> dict[str, str]:
        """The artefacts the answer wrote, by name, that exist."""
        names = ("runs.csv", "fit.json", "schedule.json", "schedule.yaml", "report.html")
        paths = {n: os.path.join(self.directory, n) for n in names}
        return {n: p for n, p in paths.items() if os.path.exists(p)}

    def headline(self) -> str:
        """The answer in a few lines: the best k at each load, and the config to paste."""
        if not self.best:
            return (
                "No answer: no speculative launch was measured against a baseline at the same "
                "load (see the launches' errors).\n"
            )
        from breakeven.render.measurements import doubt_line  # lazy: start-up

        said = doubt_line(self.check.to_dict()["comparisons"]) if self.check is not None else ""
        lines = [said.rstrip("\n")] if said else []
        rates = self.check.breakeven_rates if self.check is not None else ()
        lines += [f"Break-even: {r.sentence}." for r in rates]
        for b in self.best:
            lines.append(f"Answer at {b.load_text}: {b.why}")
        if not all(b.decided for b in self.best):
            lines.append(
                "Config to paste: none: the data cannot decide (see check's flags), so no "
                "k, fit or schedule is given."
            )
            from breakeven.render.text import wrap_lines  # lazy: start-up

            return wrap_lines("\n".join(lines) + "\n")
        flags = {b.flags for b in self.best if b.flags}
        scheduled = self.schedule.get("flags") if self.schedule is not None else None
        agrees = scheduled and all(
            b.concurrency > 0 and _scheduled_k(self.schedule, b.concurrency) == b.num_spec_tokens
            for b in self.best
        )
        from breakeven.render.text import command_lines, wrap_lines  # lazy: start-up

        def paste(head: str, config: str | None) -> list[str]:
            if not config:
                return [f"{head}: none (speculation off)."]
            return [f"{head}:", *command_lines(shlex.split(config))]

        if not flags:
            lines.append("Config to paste: none (speculation off).")
        elif agrees:
            lines += paste(f"Config to paste ({self.engine}, by batch)", scheduled)
        elif len({b.flags for b in self.best}) == 1:
            lines += paste(f"Config to paste ({self.engine})", flags.pop())
        else:
            for b in self.best:
                lines += paste(f"Config to paste ({self.engine}) at {b.load_text}", b.flags)
        if scheduled and not agrees:
            lines.append(
                f"The fit's schedule (schedule.json: {_ranges_text(self.schedule)}) differs "
                "from what was measured at these loads: the measurements decide; more "
                "--repeats or loads would tell them apart."
            )
        return wrap_lines("\n".join(lines) + "\n")

    def report(self) -> str:
        """The headline, then check's report, the fit's and the schedule's, then the notes."""
        parts = [self.headline(), self.check.report()]
        if self.fit is not None:
            parts.append(self.fit.report())
        if self.schedule is not None:
            parts.append(self.schedule.report())
        if self.notes:
            from breakeven.render.text import wrap_lines  # lazy: start-up

            parts.append(wrap_lines("".join(f"Note: {n}\n" for n in self.notes)))
        return "\n".join(p.rstrip("\n") + "\n" for p in parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "engine": self.engine,
            "best": [plain_json(asdict(b)) | {"load": b.load_text} for b in self.best],
            "check": self.check.to_dict(),
            "fit": None if self.fit is None else self.fit.to_dict(),
            "schedule": None if self.schedule is None else self.schedule.to_dict(),
            "notes": list(self.notes),
            "files": self.files,
        }


def _scheduled_k(schedule: Any, batch: float) -> int:
    """The k a schedule runs at ``batch`` (its last range's beyond it)."""
    ranges = schedule["ranges"]
    for r in ranges:
        if r["first"] <= batch <= r["last"]:
            return int(r["k"])
    return int(ranges[-1]["k"] if batch > ranges[-1]["last"] else ranges[0]["k"])


def _ranges_text(schedule: Any) -> str:
    """A schedule's k by batch, in words: ``k = 6 at 1-256`` or ``k = 4 at 1-4, 2 at 5-42``."""
    return "k = " + ", ".join(f"{r['k']} at {r['first']}-{r['last']}" for r in schedule["ranges"])


def _speculation(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's speculative config without k: its method and draft model."""
    return {k: v for k, v in (plan.get("speculation") or {}).items() if v}


def launches_of(runs: str) -> dict[tuple[str, float], int]:
    """The launches (server starts: distinct ``launch_id``) of each label and load in a
    measurements CSV, the load as check keys it (an open-loop level ``-(1 + its rate)``,
    :func:`breakeven.measurements.normalise.level_key`)."""
    from breakeven.iotools.csvfile import read_measurements  # lazy: pandas
    from breakeven.measurements.normalise import level_key  # lazy: pandas

    df, _ = read_measurements(runs, columns=("label", "concurrency", "launch_id", "request_rate"))
    df = df[df["launch_id"].notna()]
    rates = df["request_rate"] if "request_rate" in df.columns else math.nan
    df = df.assign(level=level_key(df["concurrency"], rates))
    counts = df.groupby(["label", "level"])["launch_id"].nunique()
    return {(str(label), float(c)): int(n) for (label, c), n in counts.items()}


def schedule_file(engine: str) -> str:
    """The name of the schedule's config in a sweep's directory: TensorRT-LLM's is YAML."""
    return "schedule.yaml" if engine == "trtllm" else "schedule.json"


def _config_paths(plan: dict[str, Any]) -> dict[int, str]:
    """Each k's config file, as the plan's launches name it (their ``files``; none but
    TensorRT-LLM's)."""
    paths = {}
    for launch in plan["launches"]:
        files = launch.get("files") if isinstance(launch, dict) else None
        if isinstance(files, list) and files and isinstance(files[0], (list, tuple)):
            paths[launch["num_spec_tokens"]] = str(files[0][0])
    return paths


def best_k(
    check: Any,
    engine: str,
    base: dict[str, Any],
    launches: dict[tuple[str, float], int] | None = None,
    config_paths: dict[int, str] | None = None,
) -> tuple[BestK, ...]:
    """The best k at each load of ``check``'s comparisons (see the module's text);
    ``launches`` (:func:`launches_of`) names how many launches each side had;
    ``config_paths`` each k's file (TensorRT-LLM's YAML), which its flags name.  A cluster's
    comparisons (one per node) are pooled first, the node as a block (:func:`pooled_by_node`)."""
    from breakeven.measurements.flags import DOUBT  # lazy: pandas
    from breakeven.measurements.normalise import key_request_rate, level_key  # lazy: pandas

    launches = launches or {}
    by_load: dict[float, list[Any]] = {}
    comparisons, nodes = pooled_by_node(check.comparisons)
    for c in comparisons:
        key = float(level_key(c.concurrency, getattr(c, "request_rate", math.nan)))
        by_load.setdefault(key, []).append(c)
    best = []
    for load, comparisons in sorted(by_load.items(), key=lambda x: (x[0] < -1, abs(x[0]))):
        at = {"request_rate": key_request_rate(load)} if load < -1 else {}
        doubted = [c for c in comparisons if c.verdict in DOUBT.values()]
        if doubted:
            said = ", ".join(f"{c.label} {c.verdict}" for c in doubted)
            why = (
                f"no answer: the data cannot decide ({said}; see check's flags), so "
                "nothing is pasted: measure on a quiet host, and add --repeats."
            )
            best.append(
                BestK(_cap(comparisons), 0, "", math.nan, math.nan, math.nan, "", why, False, **at)
            )
            continue
        faster = [c for c in comparisons if c.verdict == "faster"]
        top = max(comparisons, key=lambda c: c.measured_speedup)
        unsure = top.verdict == "no interval" and top.measured_speedup > 1
        if faster or unsure:
            c = max(faster, key=lambda c: c.measured_speedup) if faster else top
            k = int(c.num_spec_tokens)
            flags = shlex.join(speculation_args(engine, k, base, (config_paths or {}).get(k)))
            why = _chosen_why(c, bool(faster), launches, load)
            speedup, low, high = c.measured_speedup, c.ci_low, c.ci_high
            chosen = (k, c.label, speedup, low, high, flags)
        else:
            c = top
            why = (
                f"no k is faster beyond noise (the best, {top.label}, "
                f"{number_text(top.measured_speedup, 2)}x, 95% {number_text(top.ci_low, 2)}-"
                f"{number_text(top.ci_high, 2)}, {top.verdict}): keep speculation off"
                + (
                    ", or narrow the interval with more --repeats."
                    if top.verdict != "slower"
                    else "."
                )
            )
            chosen = (0, "baseline", 1.0, 1.0, 1.0, "")
        pooled = nodes.get(id(c))
        if pooled is not None:
            why += " " + _nodes_text(pooled)
        best.append(BestK(_cap(comparisons), *chosen, why, **at, nodes=_node_rows(pooled)))
    return tuple(best)


def _chosen_why(c: Any, faster: bool, launches: dict[tuple[str, float], int], load: float) -> str:
    """Why the k of comparison ``c`` is the best: faster beyond noise, or fastest measured
    but with no interval; and its flags."""
    k = int(c.num_spec_tokens)
    if faster:
        why = (
            f"k = {k} ({c.label}) is fastest, {number_text(c.measured_speedup, 2)}x the "
            f"baseline (95% {number_text(c.ci_low, 2)}-{number_text(c.ci_high, 2)}, "
            f"{_launches(launches, c.label, load)} against the baseline's "
            f"{_launches(launches, 'baseline', load)})."
        )
    else:
        why = (
            f"k = {k} ({c.label}) measured fastest, {number_text(c.measured_speedup, 2)}x "
            "the baseline, but with no interval (too few requests or launches): "
            "confirm it with more --repeats before trusting it."
        )
    if c.flags:
        why += f" Flagged: {', '.join(c.flags)} (see check's flags)."
    return why


def pooled_by_node(comparisons: Sequence[Any]) -> tuple[list[Any], dict[int, Any]]:
    """check's comparisons with a cluster's per-node comparisons of each k and load pooled
    into one, the node as a block (:func:`breakeven.measurements.nodes.pool_comparisons`): its
    speedup and interval pooled, ``node_drift`` among its flags where the nodes disagree
    beyond noise, and a doubt (too noisy, looks swapped) of any node its verdict.  Also each
    pooled comparison's :class:`~breakeven.measurements.nodes.Pooled`, by ``id``."""
    from breakeven.measurements.flags import DOUBT  # lazy: pandas
    from breakeven.measurements.nodes import node_speedups, pool_comparisons  # lazy: scipy
    from breakeven.measurements.normalise import node_of  # lazy: pandas

    groups = node_speedups(comparisons)
    if not groups:
        return list(comparisons), {}
    out, pooled_of = [], {}
    for group in groups.values():
        pooled = pool_comparisons(group)
        doubts = [c.verdict for c in group if c.verdict in DOUBT.values()]
        flags = set().union(*(set(c.flags) for c in group)) | (
            {"node_drift"} if pooled.drift else set()
        )
        c = replace(
            group[0],
            hardware=node_of(group[0].hardware)[0],
            measured_speedup=pooled.measured_speedup,
            ci_low=pooled.ci_low,
            ci_high=pooled.ci_high,
            verdict=doubts[0] if doubts else pooled.verdict,
            flags=tuple(sorted(flags)),
            runs=sum(x.runs for x in group),
            baseline_runs=sum(x.baseline_runs for x in group),
        )
        out.append(c)
        pooled_of[id(c)] = pooled
    return out, pooled_of


def _nodes_text(pooled: Any) -> str:
    """Each node's speedup in a sentence, and the drift where the nodes disagree."""
    each = ", ".join(f"{s.node} {number_text(s.measured_speedup, 2)}x" for s in pooled.nodes)
    text = f"Pooled over {len(pooled.nodes)} nodes, each its own block ({each})."
    if pooled.drift:
        text += f" node_drift: {pooled.why}; the interval covers the nodes' spread."
    return text


def _node_rows(pooled: Any) -> tuple[dict[str, Any], ...]:
    return () if pooled is None else tuple(pooled.node_rows())


def _cap(comparisons: list[Any]) -> float:
    """A load's concurrency: its comparisons' (an open-loop level's cap; NaN: none)."""
    return float(comparisons[0].concurrency)


def _launches(launches: dict[tuple[str, float], int], label: str, load: float) -> str:
    n = launches.get((label, load))
    return "launches not recorded" if n is None else f"{n} launch{'es' if n != 1 else ''}"


def _plan_of(directory: str) -> dict[str, Any]:
    """The plan a sweep's manifest holds, checked for what the answer reads: its engine, its
    speculation and each launch's k (a hand-edited manifest is one line naming it)."""
    plan = read_manifest(directory)["plan"]
    launches = plan.get("launches")
    if not (
        isinstance(plan.get("engine"), str)
        and isinstance(plan.get("speculation", {}), dict)
        and all(isinstance(v, str) for v in plan.get("speculation", {}).values())
        and isinstance(launches, list)
        and all(
            isinstance(x, dict)
            and isinstance(x.get("num_spec_tokens"), int)
            and not isinstance(x.get("num_spec_tokens"), bool)
            for x in launches
        )
    ):
        raise UnreadableInput(
            f"{manifest_path(directory)} is not a sweep's manifest (its plan's engine, "
            "speculation or launches are not what a sweep writes)"
        )
    return plan


def _schedule(
    plan: dict[str, Any], fit: Any, fit_path: str, directory: str, write: bool, notes: list[str]
) -> Any:
    """The sweep's schedule by batch from its fit (written to ``DIR/schedule.json`` with
    ``write``), or None with why in ``notes``."""
    from breakeven.jobs.schedules import schedule_from_files  # lazy: start-up

    engine, base = plan["engine"], _speculation(plan)
    schedule = None
    if engine not in SCHEDULE_ENGINES:
        notes.append(
            f"no schedule by batch: {engine} runs one k per server (the best k at each load "
            "is above)"
        )
    elif fit is not None:
        if not fit.surfaces and engine == "trtllm" and len(plan.get("concurrency") or ()) > 1:
            notes.append(
                "no schedule by batch: the runs have no accept_len (bench reads no spec-decode "
                "counters from trtllm-serve, whose /metrics is JSON iteration statistics), so "
                "the fit has no cost surface across the loads"
            )
        elif not fit.surfaces:
            notes.append(
                "no schedule by batch: it needs baselines at two or more loads (--concurrency 1,4)"
                + (
                    "; an open-loop level's batch is not fixed, so its request rates give none"
                    if plan.get("request_rate")
                    else ""
                )
            )
        else:
            ks = [launch["num_spec_tokens"] for launch in plan["launches"]]
            try:
                schedule = schedule_from_files(
                    fit_file=fit_path,
                    engine=engine,
                    method=base.get("method"),
                    base_config=base or None,
                    max_batch=max(plan.get("concurrency") or [1]),
                    k_max=max(ks),
                    out=os.path.join(directory, schedule_file(engine)) if write else None,
                    force=True,
                )
            except BreakevenError as e:
                notes.append(f"no schedule: {e}")
    return schedule


def answer_sweep(directory: str, *, write: bool = True, slo: Any = None) -> SweepAnswer:
    """Read a sweep's directory (``DIR/manifest.json``, ``DIR/runs.csv``) back as its answer;
    with ``write``, ``DIR/fit.json``, ``DIR/schedule.json`` and ``DIR/report.html`` are
    written (replaced: they are the sweep's own).  ``slo``
    (:func:`breakeven.measurements.slo.parse_slo`'s text) adds each level's goodput and
    decides the break-even request rate by it."""
    from breakeven.jobs.fits import fit_from_file  # lazy: start-up
    from breakeven.measurements.check import check_file  # lazy: pandas

    plan = _plan_of(directory)
    engine = plan["engine"]
    base = _speculation(plan)
    runs = os.path.join(directory, "runs.csv")
    check = check_file(runs, slo=slo)
    best = best_k(check, engine, base, launches_of(runs), _config_paths(plan))
    notes: list[str] = []
    fit = schedule = None
    fit_path = os.path.join(directory, "fit.json")
    if not all(b.decided for b in best):
        notes.append(
            "no fit and no schedule: the runs cannot decide (check's flags), and costs "
            f"fitted to them would plan from noise (breakeven fit {runs} fits them all the same)"
        )
        if write and os.path.lexists(fit_path):  # the sweep owns DIR: no old fit
            os.remove(fit_path)
    else:
        try:
            fit = fit_from_file(runs, out=fit_path if write else None, force=True)
        except BreakevenError as e:
            notes.append(f"no fit: {e}")
    schedule = _schedule(plan, fit, fit_path, directory, write, notes)
    stale = os.path.join(directory, schedule_file(engine))
    no_config = schedule is None or schedule.get("config") is None
    if write and no_config and os.path.lexists(stale):  # the sweep owns DIR: no old config
        os.remove(stale)
        notes.append(
            f"no config to write: the {schedule_file(engine)} of an earlier answer in the "
            "directory was removed, as it is not this answer's"
        )
    answer = SweepAnswer(
        directory,
        engine,
        check,
        best,
        fit,
        schedule,
        tuple(notes),
    )
    if write:
        from breakeven.render.report import write_sweep_report  # lazy: matplotlib

        write_sweep_report(answer.to_dict(), directory)
    return answer


__all__: Sequence[str] = ("BestK", "SweepAnswer", "answer_sweep", "best_k")
