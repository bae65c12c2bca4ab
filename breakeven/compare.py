"""``breakeven compare``: from a baseline run and speculative runs to a verdict, in one step.

Each run is anything ``ingest`` reads (logs, plain or compressed; bench JSON
or printed tables; ``/metrics`` scrapes) or a measurements CSV, or several
files of one run joined with ``+``.  The runs are read, labelled, put side by
side and checked (:func:`breakeven.check.check`: pairing, flags, prediction
from the costs given); each speedup then gets an interval whose unit of
repetition is the launch (:mod:`breakeven.intervals`), and a headline in words.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from breakeven.errors import BreakevenError, escape_braces
from breakeven.intervals import ADVICE_ONE_LAUNCH, MIN_VALUES, verdict
from breakeven.quantities import DEFAULT_TOLERANCE

FAIL_IF = ("slower", "not-faster", "flagged")
"""Conditions ``--fail-if`` gates on (exit code 1 when one holds)."""


@dataclass(frozen=True)
class RunInput:
    """One run given to compare: its name, its files, and what they may not say."""

    label: str
    paths: tuple[str, ...]
    """Its files; the files of one launch are joined with ``+``, launches with ``,``."""
    num_spec_tokens: int | None = None
    spec_method: str | None = None
    env: str | None = None
    launches: tuple[tuple[str, ...], ...] = ()
    spec_topk: int | None = None
    """A tree draft's branches per step (None: what the files say)."""
    verify_tokens: int | None = None
    """A tree's tokens per sequence in the verify forward (None: what the files say)."""
    """The files of each launch (default: all of ``paths``, one launch)."""


def parse_run(text: str, name: str = "runs") -> RunInput:
    """``[LABEL=]LAUNCH[,LAUNCH...]`` where a launch is ``PATH[+PATH...]``, its files (the
    label is by default the first file's stem)."""
    label, sep, rest = text.partition("=")
    if not sep or os.path.exists(text):
        label, rest = "", text
    launches = tuple(
        files for part in rest.split(",") if (files := tuple(p for p in part.split("+") if p))
    )
    paths = tuple(p for files in launches for p in files)
    if not paths:
        shown = escape_braces(repr(text))
        raise BreakevenError("{0}: got " + shown + ", expected PATH, PATH+PATH or LABEL=PATH", name)
    if not label:
        base = os.path.basename(paths[0])
        for suffix in (".gz", ".bz2", ".xz"):
            base = base.removesuffix(suffix)
        label = os.path.splitext(base)[0] or base
    return RunInput(label, paths, launches=launches)


@dataclass(frozen=True)
class RunComparison:
    """One speculative run against the baseline (at one concurrency)."""

    label: str
    """The speculative run."""
    baseline: str
    """The baseline run."""
    model: str
    """Target model ("" where the sources do not say)."""
    hardware: str
    """GPUs and interconnect ("" where the sources do not say)."""
    fingerprint: str
    """The run's environment (:func:`breakeven.check.fingerprint`)."""
    concurrency: float
    """Requests decoded together [sequences] (NaN where the sources do not say)."""
    num_spec_tokens: float
    """k [tokens]."""
    tok_s: float
    """Mean per-sequence decode rate with speculation [tok/s]."""
    baseline_tok_s: float
    """Mean per-sequence decode rate of the baseline [tok/s]."""
    measured_speedup: float
    """tok_s / baseline_tok_s [x]."""
    ci_low: float
    """Lower end of the 95% interval of measured_speedup [x]."""
    ci_high: float
    """Upper end [x]."""
    interval_covers: str
    """What the interval covers: within one launch, or across N launches."""
    interval_method: str
    """How each side's error was estimated (batch means, launches)."""
    verdict: str
    """'faster', 'slower', 'within noise' (the interval holds 1) or 'no interval'."""
    accept_len: float
    """Mean accept_len of the speculative rows [tokens/cycle]."""
    breakeven_accept_len: float
    """accept_len at which this cycle breaks even: cycle_ms / step_ms [tokens/cycle]."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s: the cycle the measurement implies [ms]."""
    cycle_ms: float
    """The cycle cost given (verify + draft, or the cycle) [ms]."""
    predicted_speedup: float
    """accept_len * step_ms / cycle_ms, from the costs given [x]."""
    residual: float
    """measured_speedup - predicted_speedup [x]."""
    flags: tuple[str, ...]
    """Codes of check's flags about this run."""
    headline: str
    """The answer in one sentence."""


@dataclass(frozen=True)
class CompareResult:
    """Every speculative run against the baseline, check's flags, and advice."""

    baseline: str
    runs: tuple[RunComparison, ...]
    flags: tuple[Any, ...]
    """check's flags (code, message, lines of the combined rows)."""
    advice: tuple[str, ...] = ()
    tolerance: float = DEFAULT_TOLERANCE
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each run's files."""
    baselines: tuple[Any, ...] = ()
    """check's baselines (:class:`breakeven.check.Baseline`): each configuration and
    environment's baseline runs, which a report places every run against."""

    @property
    def headlines(self) -> tuple[str, ...]:
        return tuple(r.headline for r in self.runs)

    def failed(self, condition: str | None) -> bool:
        """Whether ``condition`` (one of :data:`FAIL_IF`) holds."""
        if condition is None:
            return False
        if condition == "slower":
            return any(r.verdict == "slower" for r in self.runs)
        if condition == "not-faster":
            return not self.runs or any(r.verdict != "faster" for r in self.runs)
        if condition == "flagged":
            return bool(self.flags)
        raise BreakevenError(
            "{0}: got " + repr(condition) + f", expected one of {FAIL_IF}", "fail_if"
        )

    def to_dict(self) -> dict[str, Any]:
        def clean(value: Any) -> Any:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            return list(value) if isinstance(value, tuple) else value

        return {
            "baseline": self.baseline,
            "runs": [{k: clean(v) for k, v in asdict(r).items()} for r in self.runs],
            "flags": [{"code": f.code, "message": f.message} for f in self.flags],
            "advice": list(self.advice),
            "tolerance": self.tolerance,
            "sources": {k: list(v) for k, v in self.sources.items()},
            "baselines": [{k: clean(v) for k, v in asdict(b).items()} for b in self.baselines],
        }


def _is_measurements_csv(path: str) -> bool:
    """Whether ``path`` is a measurements CSV (its first line that is not a comment names the
    schema's columns), rather than something ``ingest`` reads."""
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a pipe is read once, by ingest
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    for line in head.splitlines():
        if line.startswith(b"#") or not line.strip():
            continue
        names = line.decode("utf-8", errors="replace").split(",")
        return "tok_s" in names and "num_spec_tokens" in names
    return False


def load_run(run: RunInput, baseline: bool = False) -> Any:
    """The rows of one run, as a pandas DataFrame in the measurement schema, labelled.

    Rows without a ``run_id`` are one launch, named by the label; a baseline's rows
    of unknown k have k = 0.
    """
    import pandas as pd
    import polars as pl

    from breakeven.iotools.ingest import Input, iter_frames
    from breakeven.iotools.measurements import read_measurements
    from breakeven.iotools.records import frame_of

    frames = []
    for path, launch in _launches(run):
        if _is_measurements_csv(path):
            # A CSV may hold several runs: the baseline takes its baseline rows, a SPEC its
            # speculative rows (k unknown: both).
            frame, _ = read_measurements(path)  # its line column: the file's lines
            k = pd.to_numeric(frame["num_spec_tokens"], errors="coerce")
            frame = frame[~(k > 0)] if baseline else frame[~(k == 0)]
        else:
            stamp = {
                "label": run.label,
                "spec_method": run.spec_method,
                "env": run.env,
                "spec_topk": run.spec_topk,
                "verify_tokens": run.verify_tokens,
            }
            problems: list[Any] = []
            read = Input(
                path, {k: v for k, v in stamp.items() if v is not None}, run.num_spec_tokens
            )
            # Each frame narrowed to what check reads as it comes: a 1 GiB log's records
            # are never held whole.
            narrow = [_narrow(f) for f in iter_frames([read], problems)]
            if problems:
                first = escape_braces(str(problems[0]))
                more = len(problems) - 1
                raise BreakevenError(first + (f" (and {more} more problems)" if more else ""))
            frame = _columns(pl.concat(narrow) if narrow else _narrow(frame_of([])))
            frame["run_id"] = (
                _filled(frame["run_id"], launch)
                if "run_id" in frame.columns
                else _constant(launch, len(frame))
            )
        frames.append(frame)
    data = _concat(frames)
    data["label"] = _constant(run.label, len(data))
    for column, value in (("spec_method", run.spec_method), ("env", run.env)):
        if value is not None:
            data[column] = _constant(value, len(data))
    for column, value in (("spec_topk", run.spec_topk), ("verify_tokens", run.verify_tokens)):
        if value is not None:
            data[column] = float(value)
    if run.num_spec_tokens is not None:
        data["num_spec_tokens"] = float(run.num_spec_tokens)
    elif baseline:
        data["num_spec_tokens"] = pd.to_numeric(data["num_spec_tokens"]).fillna(0)
    data["run_id"] = (
        _filled(data["run_id"], run.label)
        if "run_id" in data.columns
        else _constant(run.label, len(data))
    )
    measured = pd.to_numeric(data["tok_s"], errors="coerce").notna()
    if "speedup" in data.columns:  # a published speedup
        measured |= pd.to_numeric(data["speedup"], errors="coerce").notna()
    if not measured.any():
        shown = escape_braces(" + ".join(run.paths))
        raise BreakevenError(shown + " holds no decode rate (tok_s) to compare")
    return data


def _narrow(records: Any) -> Any:
    """Of ingest's records (a polars frame), the columns check reads, and ``line``: each
    record's line in its file, so that flags name lines a user can find.  Not ``source``: a
    text per record, and every row of a run here has the run_id check's launches come from."""
    import polars as pl

    from breakeven.check import COLUMNS_USED

    line = pl.col("source").str.extract(r":(\d+)$", 1).cast(pl.Int64, strict=False)
    # Columns no record fills are left out (check reads a missing column as empty): a log
    # fills a handful, and each column kept is converted and copied on the way to check.
    empty = {
        c
        for c, n in zip(records.columns, records.null_count().row(0), strict=True)
        if n == records.height
    } - {"tok_s", "num_spec_tokens"}
    wanted = [c for c in COLUMNS_USED if c in records.columns and c not in empty | {"source"}]
    return records.select(*wanted, line.alias("line"))


def _columns(picked: Any) -> Any:
    """Narrowed records (:func:`_narrow`) as a pandas DataFrame, texts as categoricals."""
    import pandas as pd
    import polars as pl

    columns = {}
    for name in picked.columns:
        column = picked[name]
        if column.dtype == pl.String:  # texts repeat: codes and categories, no str per row
            categories = column.drop_nulls().unique().sort().to_list()
            codes = column.cast(pl.Enum(categories)).to_physical()
            physical = codes.cast(pl.Int64).fill_null(-1).to_numpy()
            columns[name] = pd.Categorical.from_codes(physical, categories)
        else:
            columns[name] = column.to_numpy()
    return pd.DataFrame(columns, copy=False)  # no consolidation: one block per column


def _constant(value: str, rows: int) -> Any:
    """A categorical column holding ``value`` on every row, from codes (no list of texts)."""
    import numpy as np
    import pandas as pd

    return pd.Categorical.from_codes(np.zeros(rows, dtype=np.int8), [value])


def _filled(column: Any, value: str) -> Any:
    """A text column with ``value`` where it is missing or empty (categories kept)."""
    import pandas as pd

    values = column if isinstance(column.dtype, pd.CategoricalDtype) else column.astype("category")
    if value not in values.cat.categories:
        values = values.cat.add_categories([value])
    values = values.fillna(value)
    if "" in values.cat.categories:
        values = values.where(values != "", value)
    return values


def _concat(frames: list[Any]) -> Any:
    """Frames one below the other, text columns staying categorical.  Each column is joined
    once, from its parts' arrays (a column a frame lacks is empty there): no frame is copied
    whole first."""
    import numpy as np
    import pandas as pd

    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    columns = list(dict.fromkeys(c for f in frames for c in f.columns))
    out = {}
    for c in columns:
        parts = [f[c] if c in f.columns else None for f in frames]
        if all(p is None or _is_text(p) for p in parts) and any(p is not None for p in parts):
            out[c] = _join_text(parts, [len(f) for f in frames])
            continue
        arrays = []
        for p, f in zip(parts, frames, strict=True):
            if p is None:
                arrays.append(np.full(len(f), np.nan))
            elif _is_text(p):  # text where the other parts hold numbers: as a column of objects
                arrays.append(p.astype(object).to_numpy())
            else:
                arrays.append(p.to_numpy())
        kinds = {a.dtype.kind for a in arrays}
        joined = np.concatenate(
            arrays if kinds <= set("iuf") or len(kinds) == 1 else [a.astype(object) for a in arrays]
        )
        out[c] = joined
    return pd.DataFrame(out, copy=False)  # no consolidation: one block per column


def _is_text(column: Any) -> bool:
    import pandas as pd

    return (
        isinstance(column.dtype, pd.CategoricalDtype)
        or column.dtype == object
        or pd.api.types.is_string_dtype(column.dtype)
    )


def _join_text(parts: list[Any], rows: list[int]) -> Any:
    """Text parts as one categorical: every part's categories, as str, each part's codes
    remapped onto them (a missing part: missing values)."""
    import numpy as np
    import pandas as pd

    categories: list[str] = []
    for p in parts:
        if p is None:
            continue
        values = (
            p.cat.categories if isinstance(p.dtype, pd.CategoricalDtype) else p.dropna().unique()
        )
        categories += [str(v) for v in values]
    dtype = pd.CategoricalDtype(list(dict.fromkeys(categories)))
    codes = []
    for p, n in zip(parts, rows, strict=True):
        if p is None:
            codes.append(np.full(n, -1, dtype=np.int64))
        elif isinstance(p.dtype, pd.CategoricalDtype):
            if not all(isinstance(v, str) for v in p.cat.categories):
                p = p.cat.rename_categories([str(v) for v in p.cat.categories])
            recoded = pd.Categorical(p).set_categories(dtype.categories)
            codes.append(np.asarray(recoded.codes, dtype=np.int64))
        else:
            codes.append(np.asarray(p.astype(object).astype(dtype).cat.codes, dtype=np.int64))
    return pd.Categorical.from_codes(np.concatenate(codes), dtype=dtype)


def _launches(run: RunInput) -> list[tuple[str, str]]:
    """Each file of ``run`` with the name of its launch (``LABEL``, or ``LABEL#2``...)."""
    groups = run.launches or (run.paths,)
    out = []
    for i, files in enumerate(groups, start=1):
        launch = run.label if len(groups) == 1 else f"{run.label}#{i}"
        out += [(path, launch) for path in files]
    return out


def _headline(
    label: str,
    baseline: str,
    speedup: float,
    low: float,
    high: float,
    verdict: str,
    covers: str,
    where: str,
    flags: Sequence[str],
) -> str:
    """The answer in one sentence; then, when check flagged the run, what it found."""
    from breakeven.check import FLAGS

    said = _said(label, baseline, speedup, low, high, verdict, covers, where)
    if not flags:
        return said
    return said + "; flagged: " + "; ".join(f"{FLAGS[c]} ({c})" for c in flags)


def _said(
    label: str,
    baseline: str,
    speedup: float,
    low: float,
    high: float,
    verdict: str,
    covers: str,
    where: str,
) -> str:
    interval = f"95% interval {low:.2f}-{high:.2f}; {covers}"
    if math.isnan(speedup):
        return f"{label}{where}: no speedup could be measured against {baseline}"
    if verdict == "faster":
        return f"{label} is {speedup:.2f}x faster than {baseline}{where} ({interval})"
    if verdict == "slower":
        return f"{label} is slower than {baseline}{where}: {speedup:.2f}x ({interval})"
    if verdict == "within noise":
        return (
            f"{label} is not measurably different from {baseline}{where}: {speedup:.2f}x "
            f"({interval}, which holds 1)"
        )
    return (
        f"{label} measured {speedup:.2f}x against {baseline}{where} (no interval: too few "
        f"values in a launch; see interval_method)"
    )


def compare(
    baseline: RunInput,
    specs: Sequence[RunInput],
    *,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    cycle_ms: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> CompareResult:
    """Each speculative run in ``specs`` against ``baseline``.

    Parameters
    ----------
    verify_ms, draft_ms, cycle_ms : float, optional
        The speculative cycle's costs [ms], for a predicted speedup and the
        break-even accept_len: ``verify_ms`` (and ``draft_ms``), or ``cycle_ms``.
    tolerance : float
        As :func:`breakeven.check.check`'s.
    """
    from breakeven.check import check

    cycle = _cycle_given(verify_ms, draft_ms, cycle_ms)
    labels = [baseline.label, *(s.label for s in specs)]
    if len(set(labels)) != len(labels):
        raise BreakevenError(
            "{0}: two runs are named alike (" + ", ".join(labels) + "); name them with LABEL=PATH",
            "runs",
        )
    result = check(_rows(baseline, specs, cycle), tolerance)
    runs = [
        _run(c, interval, baseline.label, cycle, _several(result, c.label))
        for c, interval in zip(result.comparisons, result.intervals, strict=True)
        if c.label in labels[1:]
    ]
    return CompareResult(
        baseline.label,
        tuple(runs),
        result.flags,
        _advice(runs, specs),
        tolerance,
        {r.label: r.paths for r in (baseline, *specs)},
        result.baselines,
    )


def _cycle_given(
    verify_ms: float | None, draft_ms: float | None, cycle_ms: float | None
) -> float | None:
    """The cycle the costs given make [ms] (None: no costs given)."""
    from breakeven.model import cycle_ms as cycle_of

    if cycle_ms is not None and verify_ms is not None:
        raise BreakevenError(
            "{0} and {1}: give one (the cycle, or its parts)", "cycle_ms", "verify_ms"
        )
    if draft_ms is not None and verify_ms is None:
        raise BreakevenError(
            "{0}: needs {1} (the cycle is verify + draft)", "draft_ms", "verify_ms"
        )
    if cycle_ms is not None:
        return cycle_ms
    return float(cycle_of(verify_ms, draft_ms or 0.0)) if verify_ms is not None else None


def _rows(baseline: RunInput, specs: Sequence[RunInput], cycle: float | None) -> Any:
    """Every run's rows, one below the other, for check: the cycle given on each speculative
    row with a rate, and a line number on every row."""
    import pandas as pd

    base_rows = load_run(baseline, baseline=True)
    spec_rows = []
    for spec in specs:
        rows = load_run(spec)
        if cycle is not None:  # on the rows with a rate: a row without one is not a run
            given = rows["cycle_ms"] if "cycle_ms" in rows.columns else math.nan
            rows["cycle_ms"] = pd.Series(given, index=rows.index, dtype=float).where(
                pd.to_numeric(rows["tok_s"]).isna(), cycle
            )
        spec_rows.append(rows)
    _share_identity(base_rows, spec_rows)
    data = _concat([base_rows, *spec_rows])
    numbered = pd.to_numeric(data["line"], errors="coerce")
    data["line"] = numbered.fillna(pd.Series(range(2, len(data) + 2))).astype(int)
    return data


def _run(c: Any, interval: Any, baseline: str, cycle: float | None, several: bool) -> RunComparison:
    """One of check's comparisons as compare's row, with its headline."""
    from breakeven.model import _step_ms, breakeven_accept_len

    step = float(_step_ms(c.baseline_tok_s)) if c.baseline_tok_s > 0 else math.nan
    breakeven = (
        float(breakeven_accept_len(cycle, step)) if cycle is not None and step > 0 else math.nan
    )
    where = (
        f" at concurrency {c.concurrency:g}" if several and not math.isnan(c.concurrency) else ""
    )
    speedup = interval.speedup if not math.isnan(interval.speedup) else c.measured_speedup
    said = verdict(speedup, interval.low, interval.high)
    return RunComparison(
        label=c.label,
        baseline=baseline,
        model=c.model,
        hardware=c.hardware,
        fingerprint=c.fingerprint,
        concurrency=c.concurrency,
        num_spec_tokens=c.num_spec_tokens,
        tok_s=c.tok_s,
        baseline_tok_s=c.baseline_tok_s,
        measured_speedup=speedup,
        ci_low=interval.low,
        ci_high=interval.high,
        interval_covers=interval.covers,
        interval_method=interval.method,
        verdict=said,
        accept_len=c.accept_len,
        breakeven_accept_len=breakeven,
        implied_cycle_ms=c.implied_cycle_ms,
        cycle_ms=c.cycle_ms,
        predicted_speedup=c.predicted_speedup,
        residual=c.residual,
        flags=c.flags,
        headline=_headline(
            c.label,
            baseline,
            speedup,
            interval.low,
            interval.high,
            said,
            interval.covers,
            where,
            c.flags,
        ),
    )


def _advice(runs: list[RunComparison], specs: Sequence[RunInput]) -> tuple[str, ...]:
    advice = []
    if any("within one launch" in r.interval_covers for r in runs):
        advice.append(ADVICE_ONE_LAUNCH.capitalize() + ".")
    if any(r.verdict == "no interval" for r in runs):
        advice.append(
            f"Record more decode windows or requests: an interval needs at least "
            f"{MIN_VALUES} per launch."
        )
    missing = [s.label for s in specs if s.label not in {r.label for r in runs}]
    if missing:
        advice.append(
            f"No comparison for {', '.join(missing)}: see the flags (a baseline at "
            "the same model, hardware and concurrency is needed)."
        )
    return tuple(advice)


def _share_identity(base: Any, specs: list[Any]) -> None:
    """The runs given together are of one deployment: where a side does not say its model or
    hardware and the other says one, it is taken as that (check pairs by them)."""
    for column in ("model", "hardware"):
        sides = [base, *specs]
        said = [
            {str(v) for v in frame[column].dropna().unique()} - {""}
            if column in frame.columns
            else set()
            for frame in sides
        ]
        known = set().union(*said)
        if len(known) != 1:
            continue
        (value,) = known
        for frame, values in zip(sides, said, strict=True):
            if not values:
                frame[column] = _constant(value, len(frame))


def _several(result: Any, label: str) -> bool:
    return sum(1 for c in result.comparisons if c.label == label) > 1
