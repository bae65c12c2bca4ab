"""The baselines of ``breakeven check``: each configuration's baseline runs, with a
``baseline_drift`` flag where they disagree, what is recorded of their launches, and the baseline a
speculative run is compared with (its own launch's; else a launch with its settings; else
``baseline_unverified`` or ``stale_baseline``, naming what differs)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from breakeven.core.provenance import ENV_SOURCES, age_text, is_environment_key
from breakeven.core.quantities import number_text as _n
from breakeven.measurements.flags import Flag, _at_concurrency, _Findings, _lines, _percent
from breakeven.measurements.intervals import LaunchSpread, sides_and_spreads
from breakeven.measurements.normalise import (
    _group_means,
    _group_numbers,
    _positions,
    _time_text,
    _values_at,
    key_request_rate,
)
from breakeven.model.pooling import group_pooled_rates


@dataclass(frozen=True)
class Baseline:
    """The baseline runs of one model, hardware, concurrency and environment."""

    model: str
    hardware: str
    concurrency: float
    """[sequences] (NaN where the rows do not say)."""
    fingerprint: str
    """The environment (:func:`fingerprint`)."""
    labels: tuple[str, ...]
    """The runs' labels."""
    tok_s: float
    """Mean per-sequence decode rate of its runs [tok/s]."""
    runs: int
    """Runs (a run_id, or a label and environment) averaged."""
    request_rate: float = math.nan
    """The level's offered request rate [req/s] where it is an open-loop level (its
    concurrency is then NaN); NaN for a closed-loop level."""


CONFIG = ["model", "hardware", "concurrency_key"]
"""What a speculative run and its baseline share: model, hardware and concurrency."""


@dataclass
class _Baselines:
    """Baseline rows as arrays, indexed by configuration and by environment."""

    tok_s: Any
    decoded: Any
    """Each row's decoded tokens (NaN: not known), its rate's weight."""
    launch: Any
    step_ms: Any
    fingerprint: Any
    line: Any
    by_config: dict[Any, Any]
    by_env: dict[Any, Any]
    drift: dict[Any, str]
    """Configurations whose baselines disagree, with the flag's sentence."""
    summary: list[Baseline]
    provenance: _Provenance
    """The rows' launches."""
    fingerprints: dict[Any, list[Any]]
    """Each configuration's baseline fingerprints, in file order."""
    shows: Any = None
    """Each row shows speculation (:func:`_shows_speculation`): a swapped pair's sign."""
    accept_len: Any = None
    sides: dict[Any, Any] = field(default_factory=dict)

    def side(self, rows: Any) -> Any:
        """The interval side of these baseline rows (many runs share a configuration's rows:
        each set is estimated once)."""
        return self._estimated(rows)[0]

    def spread(self, rows: Any) -> LaunchSpread:
        """How far the launches of these baseline rows disagree (each set estimated once)."""
        return self._estimated(rows)[1]

    def _estimated(self, rows: Any) -> tuple[Any, LaunchSpread]:
        key = rows.tobytes()
        if key not in self.sides:
            self.estimate([rows])
        return self.sides[key]

    def estimate(self, row_sets: Sequence[Any]) -> None:
        """Estimate the sides of many sets of baseline rows (positions, in file order) in one
        pass (:func:`~breakeven.measurements.intervals.sides_and_spreads`), each set once."""
        new = {}
        for rows in row_sets:
            key = rows.tobytes()
            if key not in self.sides:
                new.setdefault(key, rows)
        if not new:
            return
        at = np.concatenate(list(new.values()))
        number = np.repeat(np.arange(len(new)), [len(rows) for rows in new.values()])
        found = sides_and_spreads(
            self.tok_s[at], self.launch[at], self.decoded[at], number, len(new)
        )
        self.sides.update(zip(new, found, strict=True))


def baselines(df: Any, tolerance: float, findings: _Findings) -> _Baselines:
    """The baseline rows, and a ``baseline_drift`` flag where the runs of a configuration
    disagree by more than the tolerance or ran in different environments.  Drift is between
    runs (a run_id, or a label and environment), not between the requests of one run, whose
    spread the interval accounts for."""

    rows = np.flatnonzero((~df["is_spec"] & df["tok_s"].notna() & ~df["echo"]).to_numpy())
    tok = df["tok_s"].to_numpy(dtype=float)[rows]
    decoded = df["decoded"].to_numpy(dtype=float)[rows]
    line = df["line"].to_numpy()[rows]
    run, run_first = _group_numbers(df, rows, [*CONFIG, "run_id", "label", "fingerprint"])
    run_mean = group_pooled_rates(run, tok, decoded, len(run_first))[0]
    config, config_first = _group_numbers(df, rows, CONFIG)
    env, env_first = _group_numbers(df, rows, [*CONFIG, "fingerprint"])
    run_env, run_config = env[run_first], config[run_first]
    env_mean, env_runs = _group_means(run_env, run_mean, len(env_first))
    config_keys = list(zip(*(_values_at(df[c], rows[config_first]) for c in CONFIG), strict=True))
    env_fp = _values_at(df["fingerprint"], rows[env_first])
    run_label = _values_at(df["label"], rows[run_first])
    summary, envs_by_config = [], {}
    runs_of_env = _positions(run_env, range(len(env_first)))  # each environment's runs, in order
    for e, first in enumerate(env_first):
        m, h, c = config_keys[config[first]]
        summary.append(
            Baseline(
                str(m),
                str(h),
                float(c) if c >= 0 else math.nan,
                str(env_fp[e]),
                tuple(dict.fromkeys(map(str, pd.unique(run_label[runs_of_env[e]])))),
                float(env_mean[e]),
                int(env_runs[e]),
                key_request_rate(c),
            )
        )
        envs_by_config.setdefault((m, h, c), []).append((env_fp[e], float(env_mean[e])))
    by_config = _positions(config, config_keys)
    by_env = _positions(
        env, [(*config_keys[config[f]], env_fp[e]) for e, f in enumerate(env_first)]
    )
    high = np.full(len(config_first), -np.inf)
    low = np.full(len(config_first), np.inf)
    np.maximum.at(high, run_config, run_mean)
    np.minimum.at(low, run_config, run_mean)
    with np.errstate(divide="ignore", invalid="ignore"):  # a rate of 0: unbounded, or 0 / 0
        spreads = high / low - 1
    drift = {}
    for key, spread in zip(config_keys, spreads, strict=True):
        means = envs_by_config[key]
        if len(means) == 1 and not spread > tolerance:
            continue
        parts = [
            f"{_n(m, 2)} tok/s" + (f" ({fp})" if fp else " (no env recorded)") for fp, m in means
        ]
        why = "their environments differ" if len(means) > 1 else "with the same environment"
        drift[key] = (
            f"Baselines for {key[0] or 'this model'} on {key[1] or 'this hardware'} "
            f"{_at_concurrency(key[2])} disagree by {_percent(spread)} ({why}): "
            f"{'; '.join(parts)}. A baseline measured in another launch is not a "
            "baseline: re-measure it right before the speculative run, same "
            "environment."
        )
        at = by_config[key]  # positions in the baseline rows, in file order
        findings.add(Flag("baseline_drift", drift[key], _lines(line[at]), len(at)))
    return _Baselines(
        tok,
        decoded,
        df["launch"].to_numpy()[rows],
        df["step_ms"].to_numpy(dtype=float)[rows],
        _values_at(df["fingerprint"], rows),
        line,
        by_config,
        by_env,
        drift,
        summary,
        _Provenance.of(df, rows),
        {key: [fp for fp, _ in means] for key, means in envs_by_config.items()},
        df["shows_speculation"].to_numpy()[rows],
        df["accept_len"].to_numpy(dtype=float)[rows],
    )


@dataclass(frozen=True)
class _Side:
    """What is recorded of the launches of some rows (a speculative run, or baselines)."""

    launches: Any
    """Their launches (codes of their launch_ids, where recorded; an array)."""
    known: bool
    """Every row's env holds its server's environment."""
    recorded: bool
    """Anything of a launch is recorded (an id, a time, settings)."""
    when: float
    """The earliest launch start, else measurement [s since the epoch]; NaN: no full date."""
    source: str
    """Where the first row's env came from (``env_from``)."""
    fingerprint: str
    texts: Any = field(default=None, compare=False, repr=False)
    """A function giving the first time written at these rows, as written (read only for a
    flag's sentence)."""

    @property
    def when_text(self) -> str:
        return self.texts() if self.texts is not None else ""


@dataclass(frozen=True)
class _Provenance:
    """The launch columns of some rows (``rows``, positions in ``df``), as arrays."""

    df: Any
    rows: Any
    launch_code: Any
    env_known: Any
    recorded: Any
    when: Any
    env_from: Any

    @classmethod
    def of(cls, df: Any, rows: Any) -> _Provenance:
        return cls(
            df,
            rows,
            df["launch_code"].to_numpy()[rows],
            df["env_known"].to_numpy()[rows],
            df["recorded"].to_numpy()[rows],
            df["when"].to_numpy()[rows],
            _values_at(df["env_from"], rows),
        )

    def side(self, at: Any, fp: str) -> _Side:
        """What is recorded of the launches of the rows at ``at`` (positions in ``rows``),
        whose fingerprint is ``fp``."""
        return self.sides(at, np.array([0, len(at)]), [fp])[0]

    def sides(self, order: Any, starts: Any, fps: Sequence[str]) -> list[_Side]:
        """:meth:`side` of each group of rows, ``order[starts[g] : starts[g + 1]]`` (positions
        in ``rows``) of fingerprint ``fps[g]``, at once."""
        groups = len(starts) - 1
        group = np.repeat(np.arange(groups), np.diff(starts))
        codes = self.launch_code[order]
        known = np.bincount(group, weights=~self.env_known[order], minlength=groups) == 0
        recorded = np.bincount(group, weights=self.recorded[order], minlength=groups) > 0
        when = self.when[order]
        timed = ~np.isnan(when)
        earliest = np.full(groups, np.inf)
        np.minimum.at(earliest, group[timed], when[timed])
        earliest[np.bincount(group[timed], minlength=groups) == 0] = math.nan
        launched = codes >= 0
        width = int(codes.max()) + 1 if launched.any() else 1
        pairs = _distinct(group[launched] * width + codes[launched])  # sorted: by group
        bounds = np.searchsorted(pairs // width, np.arange(groups + 1))
        launches = pairs % width
        found = []
        for g, fp in enumerate(fps):
            at = order[starts[g] : starts[g + 1]]
            found.append(
                _Side(
                    launches[bounds[g] : bounds[g + 1]],
                    bool(known[g]),
                    bool(recorded[g]),
                    float(earliest[g]),
                    str(self.env_from[at[0]]) if len(at) else "",
                    fp,
                    lambda at=at: _time_text(self.df, self.rows[at]),
                )
            )
        return found


def _distinct(values: Any) -> Any:
    """The distinct values of non-negative integers, sorted (as ``np.unique``, which hashes
    them first: several times slower): by a table of those present where it is small."""
    if not len(values) or values.max() >= 4 * len(values) + 1024:
        return np.unique(values)
    present = np.zeros(int(values.max()) + 1, dtype=bool)
    present[values] = True
    return np.flatnonzero(present)


def _kind(source: str) -> str:
    """Sources whose settings are named alike: a process's command line reads the same from
    /proc and from a unit's ExecStart."""
    return "process" if source in ("server", "file") else source


def _judge(spec: _Side, base: _Side) -> tuple[str, list[str], list[str]]:
    """``fair``, ``unverified`` or ``stale``, and the settings only the baseline's launch had
    and only the speculative run's launch has.  Settings are compared where both sides know
    them: variables only where both know the server's environment; arguments and served
    configuration only where both were read alike (a log's and a process's name them
    differently)."""
    a, b = set(spec.fingerprint.split()), set(base.fingerprint.split())
    if _kind(spec.source) != _kind(base.source):
        a, b = ({p for p in x if is_environment_key(p)} for x in (a, b))
    both = spec.known and base.known
    if not both:
        a, b = ({p for p in x if not is_environment_key(p)} for x in (a, b))
        if not a or not b:
            return "unverified", [], []
    if a != b:
        return "stale", sorted(b - a), sorted(a - b)
    return ("fair" if both else "unverified"), [], []


def _pick_baseline(
    key: tuple[Any, ...],
    spec: _Side,
    lines: tuple[int, ...],
    published: bool,
    base: _Baselines,
    findings: _Findings,
) -> tuple[Any, set[str], str]:
    """The baseline rows a run is compared with (positions in ``base``), the codes raised,
    and why the baseline's launch is stale or unverified (a clause; empty when fair).

    By preference: the baselines of the run's own launch; else those of launches whose
    settings equal the run's launch's, less speculation, where both are known (fair); else
    those whose settings cannot be told apart (``baseline_unverified``, said where anything
    of a launch is recorded); else all of the configuration's (``stale_baseline``, naming
    what differs)."""

    model, hardware, conc, _, _, label, _ = key
    config = (model, hardware, conc)
    none = np.array([], dtype=int)
    codes = {"baseline_drift"} if config in base.drift else set()
    candidates = base.by_config.get(config, none)
    where = f"{label or 'A speculative run'} (line {lines[0]})"
    if published:
        return none, codes, ""  # the source's own speedup needs no baseline row
    if not len(candidates):
        findings.add(_missing_baseline(where, config, lines, base))
        return none, codes | {"baseline_missing"}, ""
    if len(spec.launches):
        ours = np.isin(base.provenance.launch_code[candidates], spec.launches, kind="table")
        if ours.any():
            return candidates[ours], codes, ""
    judged = _judged_baselines(spec, config, base)
    if judged["fair"]:
        return np.sort(np.concatenate([at for at, *_ in judged["fair"]])), codes, ""
    if judged["unverified"]:
        chosen = np.sort(np.concatenate([at for at, *_ in judged["unverified"]]))
        _, side, _, _ = judged["unverified"][0]
        if not (spec.recorded or side.recorded):
            return chosen, codes, ""  # nothing of either launch is recorded: nothing to say
        cause = _unverified_cause(spec, side)
        findings.add(
            Flag(
                "baseline_unverified",
                f"{where}: {cause}. {_sources(spec, side)} Re-measure the baseline right "
                "before the speculative run, or record both launches' environment: bench "
                "reads it from the server's own process on its host, or from "
                "--server-env-from.",
                lines + _lines(base.line[chosen]),
            )
        )
        return chosen, codes | {"baseline_unverified"}, cause
    _, side, only_base, only_spec = judged["stale"][0]
    cause = _stale_cause(spec, side, only_base, only_spec)
    findings.add(
        Flag(
            "stale_baseline",
            f"{where} is compared with a baseline from another launch with other settings: "
            f"{cause}. Its speedup is not trustworthy: re-measure the baseline in a launch "
            "with the speculative run's settings (speculation off), or restore the settings. "
            + _sources(spec, side),
            lines + _lines(base.line[candidates]),
        )
    )
    return candidates, codes | {"stale_baseline"}, cause


def _missing_baseline(
    where: str, config: tuple[Any, ...], lines: tuple[int, ...], base: _Baselines
) -> Flag:
    """The ``baseline_missing`` flag of a run (``where``: its label and first line) that no
    baseline of its ``config`` (model, hardware, concurrency) was measured for, naming the
    configurations the baselines are of."""
    model, hardware, conc = config
    there = sorted(
        {
            f"{b.model or 'an unnamed model'} on {b.hardware or 'unnamed hardware'} "
            f"{_at_concurrency(-1 if math.isnan(b.concurrency) else b.concurrency)}"
            for b in base.summary
        }
    )
    return Flag(
        "baseline_missing",
        f"{where}: no baseline of {model or 'this model'} on "
        f"{hardware or 'this hardware'} {_at_concurrency(conc)}"
        + (f" (the baselines are of {'; '.join(there[:3])})" if there else "")
        + ". Measure one, in the same launch environment, before enabling "
        "speculation.",
        lines,
    )


def _judged_baselines(
    spec: _Side, config: tuple[Any, ...], base: _Baselines
) -> dict[str, list[tuple[Any, _Side, list[str], list[str]]]]:
    """The baselines of ``config`` in each environment, in file order, by how they compare
    with the speculative run's launch (:func:`_judge`): ``fair``, ``unverified`` or ``stale``,
    each with its rows (positions in ``base``), what is recorded of its launches, and the
    settings only the baseline's launch had and only the run's has."""
    provenance = base.provenance
    judged = {"fair": [], "unverified": [], "stale": []}
    for base_fp in base.fingerprints.get(config, []):
        at = base.by_env[(*config, base_fp)]
        side = provenance.side(at, str(base_fp))
        verdict_, only_base, only_spec = _judge(spec, side)
        judged[verdict_].append((at, side, only_base, only_spec))
    return judged


def _time_of(side: _Side) -> str:
    """' (2026-02-26 16:41)' (as written, to the minute), or nothing."""
    text = side.when_text.replace("T", " ")[:16]
    return f" ({text})" if text else ""


def _source_of(side: _Side) -> str:
    if side.source == "" and not side.fingerprint:
        return "nothing (no env recorded)"
    return ENV_SOURCES.get(side.source, side.source)


def _sources(spec: _Side, base: _Side) -> str:
    """Where each side's settings came from, as a sentence."""
    if _source_of(spec) == _source_of(base):
        if _source_of(base).startswith("nothing"):
            return "Neither launch's settings are recorded (no env)."
        return f"Both launches' settings came from {_source_of(base)}."
    return (
        f"The baseline's settings came from {_source_of(base)}; the speculative run's from "
        f"{_source_of(spec)}."
    )


def _stale_cause(spec: _Side, base: _Side, only_base: list[str], only_spec: list[str]) -> str:
    had = " ".join(only_base) if only_base else "none of the speculative run's settings below"
    has = " ".join(only_spec) if only_spec else "none of them"
    return (
        f"the baseline's launch{_time_of(base)} had {had}; the speculative run's launch"
        f"{_time_of(spec)} has {has}"
    )


def _unverified_cause(spec: _Side, base: _Side) -> str:
    if not (math.isnan(spec.when) or math.isnan(base.when)):
        gap = spec.when - base.when
        order = "earlier" if gap >= 0 else "later"
        dates = f"{_time_of(base)[2:-1]}; the run {_time_of(spec)[2:-1]}"
        age = f" {age_text(gap)} {order} ({dates})"
        if abs(gap) < 1:  # one date, to the precision given: no order between them
            age = f" dated as the run ({dates}: no order between them at that precision)"
    elif base.when_text or spec.when_text:
        age = (
            f" (the baseline {base.when_text or 'undated'}, the run {spec.when_text or 'undated'}"
            ": no full date, so no age)"
        )
    else:
        age = " (neither is dated)"
    return (
        f"the baseline came from another launch{age}, and nothing shows whether that launch "
        "was configured the same way"
    )
