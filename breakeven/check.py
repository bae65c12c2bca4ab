"""Check measured speedups against the model, and catch stale or drifting baselines.

Each speculative run (``num_spec_tokens > 0``) is paired with the baseline runs
(``num_spec_tokens == 0``) of the same model, hardware and concurrency.  Rows
that share a label, k, method and environment fingerprint are repeats of one
run.  For each pairing: the measured speedup (speculative over baseline mean
``tok_s``) with a bootstrap confidence interval, the speedup the cycle model
predicts from the run's ``accept_len`` and cycle cost, their residual, and the
cycle cost the measurement implies, ``1000 * accept_len / tok_s``.

The environment fingerprint is the ``env`` column's ``key=value`` pairs less
those that only configure speculation (keys holding "spec", "draft",
"eagle", "medusa", "mtp" or "ngram").  Two runs with different fingerprints ran
in different environments: the case study's NCCL variables, lost on restart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from breakeven.errors import BreakevenError

DEFAULT_TOLERANCE = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_MAX_ROWS = 200  # above this many rows a side, the normal approximation is used
CONFIDENCE = 0.95
_SPEC_KEY_WORDS = ("spec", "draft", "eagle", "medusa", "mtp", "ngram")

# Stable codes, and what each means.
FLAGS = {
    "baseline_drift": "baselines of the same model, hardware and concurrency disagree",
    "baseline_missing": "no baseline run of the same model, hardware and concurrency",
    "stale_baseline": "the baseline ran in another environment than the speculative run",
    "prediction_mismatch": "the measured speedup differs from the predicted one by more than "
    "the tolerance",
    "accept_len_out_of_range": "accept_len is outside [1, k + 1]",
    "itl_per_chunk": "tok_s was computed from ITL, not TPOT",
    "server_client_mismatch": "the server's own throughput and the client benchmark disagree",
}


def fingerprint(env: Any) -> str:
    """The ``env`` pairs that describe the environment, sorted; speculation settings dropped."""
    if env is None or (isinstance(env, float) and math.isnan(env)):
        return ""
    pairs = []
    for item in str(env).split():
        key = item.split("=", 1)[0].lower().lstrip("-")
        if not any(word in key for word in _SPEC_KEY_WORDS):
            pairs.append(item)
    return " ".join(sorted(pairs))


def _env_difference(a: str, b: str) -> str:
    """'K=V only here; K=V only there' between two fingerprints."""
    left, right = set(a.split()), set(b.split())
    parts = []
    if left - right:
        parts.append("here " + " ".join(sorted(left - right)))
    if right - left:
        parts.append("there " + " ".join(sorted(right - left)))
    return "; ".join(parts) or "none"


@dataclass(frozen=True)
class Flag:
    """One finding: a stable code, a sentence, and the file lines it concerns."""

    code: str
    """One of :data:`FLAGS`."""
    message: str
    """What was found and what to do, in a sentence."""
    lines: tuple[int, ...] = ()
    """Lines of the measurements file the finding is about."""


@dataclass(frozen=True)
class Comparison:
    """One speculative run against its baseline."""

    label: str
    """The speculative run's label."""
    model: str
    """Target model."""
    hardware: str
    """GPUs and interconnect."""
    concurrency: float
    """Requests decoded together [sequences]."""
    num_spec_tokens: float
    """k [tokens] (NaN when the source did not say)."""
    spec_method: str
    """Drafting method."""
    runs: int
    """Speculative rows with a tok_s (or a published speedup)."""
    baseline_runs: int
    """Baseline rows compared with."""
    tok_s: float
    """Mean per-sequence decode rate with speculation [tok/s]."""
    baseline_tok_s: float
    """Mean per-sequence decode rate of the baseline [tok/s]."""
    measured_speedup: float
    """tok_s / baseline_tok_s [x]."""
    ci_low: float
    """Lower end of the 95% confidence interval of measured_speedup [x]."""
    ci_high: float
    """Upper end of the 95% confidence interval of measured_speedup [x]."""
    verdict: str
    """'faster', 'slower', 'within noise' (the interval holds 1) or 'single run'."""
    accept_len: float
    """Mean accept_len of the speculative rows [tokens/cycle]."""
    cycle_ms: float
    """Cycle cost from the rows: cycle_ms, or verify_ms + draft_ms [ms]."""
    predicted_speedup: float
    """accept_len * step_ms / cycle_ms, step from the baseline [x]."""
    residual: float
    """measured_speedup - predicted_speedup [x]."""
    implied_cycle_ms: float
    """1000 * accept_len / tok_s: the cycle the measurement implies [ms]."""
    flags: tuple[str, ...]
    """Codes of the flags that concern this comparison."""
    lines: tuple[int, ...]
    """Lines of the speculative rows."""
    baseline_lines: tuple[int, ...]
    """Lines of the baseline rows compared with."""


@dataclass(frozen=True)
class ServerCheck:
    """A run measured both by the client benchmark and in the server's own log."""

    run_id: str
    """The run."""
    server_tok_s: float
    """Mean per-sequence rate from the server's lines [tok/s]."""
    client_tok_s: float
    """Mean per-sequence rate from the client benchmark [tok/s]."""
    ratio: float
    """server_tok_s / client_tok_s [x]."""
    agree: bool
    """Whether the ratio is within the tolerance of 1."""


@dataclass(frozen=True)
class CheckResult:
    """Every comparison, and every flag with its sentence."""

    comparisons: tuple[Comparison, ...]
    """One per speculative run."""
    flags: tuple[Flag, ...]
    """Findings, most serious first."""
    tolerance: float
    """Relative tolerance used for drift, mismatch and noise [fraction]."""
    server_checks: tuple[ServerCheck, ...] = ()
    """Runs whose server log and client benchmark were compared."""

    def to_dict(self) -> dict[str, Any]:
        """``comparisons``, ``flags`` (each ``{code, message, lines}``) and ``tolerance``."""

        def clean(value: Any) -> Any:
            if isinstance(value, float) and math.isnan(value):
                return None
            if isinstance(value, tuple):
                return list(value)
            return value

        return {
            "comparisons": [{k: clean(v) for k, v in asdict(c).items()} for c in self.comparisons],
            "flags": [{"code": f.code, "message": f.message, "lines": list(f.lines)}
                      for f in self.flags],
            "server_checks": [asdict(c) for c in self.server_checks],
            "tolerance": self.tolerance,
        }  # fmt: skip

    def to_frame(self) -> Any:
        """The comparisons as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([asdict(c) for c in self.comparisons])

    def _repr_html_(self) -> str:
        from breakeven.formatting import check_html

        return check_html(self)


def _mean(values: Any) -> float:
    return float(values.mean()) if len(values) else math.nan


def _interval(spec: Any, base: Any, seed: int) -> tuple[float, float]:
    """95% interval of mean(spec) / mean(base): bootstrap, or the normal approximation."""
    import numpy as np

    n_s, n_b = len(spec), len(base)
    if n_s == 0 or n_b == 0 or (n_s < 2 and n_b < 2):
        return math.nan, math.nan
    if max(n_s, n_b) > BOOTSTRAP_MAX_ROWS:  # delta method on a ratio of means
        m_s, m_b = spec.mean(), base.mean()
        var_s = spec.var(ddof=1) / n_s if n_s > 1 else 0.0
        var_b = base.var(ddof=1) / n_b if n_b > 1 else 0.0
        ratio = m_s / m_b
        se = ratio * math.sqrt(var_s / m_s**2 + var_b / m_b**2)
        return ratio - 1.96 * se, ratio + 1.96 * se
    rng = np.random.default_rng(seed)
    s = spec[rng.integers(0, n_s, (BOOTSTRAP_RESAMPLES, n_s))].mean(axis=1)
    b = base[rng.integers(0, n_b, (BOOTSTRAP_RESAMPLES, n_b))].mean(axis=1)
    low, high = np.quantile(s / b, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return float(low), float(high)


def _verdict(speedup: float, low: float, high: float, tolerance: float) -> str:
    if math.isnan(speedup):
        return "not measured"
    if math.isnan(low):
        return "single run"
    if low <= 1.0 <= high:
        return "within noise"
    return "faster" if low > 1.0 else "slower"


def check(data: Any, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """Pair speculative runs with baselines; compare measured and predicted speedups; flag.

    Parameters
    ----------
    data : pandas.DataFrame
        Rows in the measurement schema, as :func:`breakeven.iotools.read_measurements`
        returns them (a ``line`` column, when present, names rows in flags).
    tolerance : float
        Relative tolerance for baseline drift, prediction mismatch and
        server/client agreement (default 0.05).
    """
    import numpy as np
    import pandas as pd

    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 1):
        raise BreakevenError("{0}: got " + f"{tolerance!r}, expected a fraction in (0, 1)",
                             "tolerance")  # fmt: skip
    df = data.copy()
    if "line" not in df.columns:
        df["line"] = np.arange(2, len(df) + 2)
    for column in ("model", "hardware", "spec_method", "label", "env", "run_id", "origin"):
        if column not in df.columns:
            df[column] = ""
        df[column] = df[column].fillna("").astype(str)
    for column in ("concurrency", "num_spec_tokens", "tok_s", "accept_len", "cycle_ms",
                   "verify_ms", "draft_ms", "step_ms", "tpot_ms", "itl_ms", "speedup"):  # fmt: skip
        if column not in df.columns:
            df[column] = np.nan
        df[column] = pd.to_numeric(df[column], errors="coerce")
    k = df["num_spec_tokens"]
    spec_signs = df["accept_len"].notna() | (df["spec_method"] != "")
    df["is_spec"] = (k > 0) | (k.isna() & spec_signs)
    df["fingerprint"] = df["env"].map(fingerprint)
    df["config"] = list(zip(df["model"], df["hardware"], df["concurrency"].fillna(-1.0),
                            strict=True))  # fmt: skip

    flags: list[Flag] = []
    row_flags: dict[int, set[str]] = {}

    # Acceptance out of range (rows).
    spec = df[df["is_spec"]]
    tau, kk = spec["accept_len"], spec["num_spec_tokens"]
    bad = spec[(tau < 1) | (tau > kk + 1 + 0.005)]
    for _, row in bad.iterrows():
        kind = (
            "below 1" if row["accept_len"] < 1 else f"above k + 1 = {row['num_spec_tokens'] + 1:g}"
        )
        flags.append(Flag("accept_len_out_of_range",
                          f"Line {row['line']}: accept_len {row['accept_len']:g} is {kind}; "
                          "a cycle emits 1 to k + 1 tokens (bonus included). Check that the "
                          "source counts the bonus token and that k is right.",
                          (int(row["line"]),)))  # fmt: skip
        row_flags.setdefault(int(row["line"]), set()).add("accept_len_out_of_range")

    # ITL used where TPOT was needed.
    chunky = spec[spec["itl_ms"].notna() & spec["tok_s"].notna()]
    from_itl = (chunky["tok_s"] * chunky["itl_ms"] / 1000.0 - 1).abs() <= 0.02
    several = (chunky["itl_ms"] > 1.2 * chunky["tpot_ms"]) | (
        chunky["tpot_ms"].isna() & (chunky["accept_len"] > 1.2)
    )
    for _, row in chunky[from_itl & several].iterrows():
        flags.append(Flag("itl_per_chunk",
                          f"Line {row['line']}: tok_s {row['tok_s']:.2f} equals 1000 / itl_ms; "
                          "under speculation a streamed chunk carries about accept_len tokens, "
                          "so this undercounts the decode rate. Use 1000 / tpot_ms.",
                          (int(row["line"]),)))  # fmt: skip
        row_flags.setdefault(int(row["line"]), set()).add("itl_per_chunk")

    # Server log against client benchmark, within a run.
    server_checks: list[ServerCheck] = []
    runs = df[(df["run_id"] != "") & df["tok_s"].notna()]
    for run_id, group in runs.groupby("run_id", sort=False):
        server = group[group["origin"] == "server"]["tok_s"]
        client = group[group["origin"] == "client"]["tok_s"]
        if len(server) and len(client):
            ratio = server.mean() / client.mean()
            agree = bool(abs(ratio - 1) <= tolerance)
            server_checks.append(ServerCheck(str(run_id), float(server.mean()),
                                             float(client.mean()), float(ratio), agree))  # fmt: skip
            if not agree:
                lines = tuple(int(x) for x in group["line"])
                flags.append(Flag("server_client_mismatch",
                                  f"Run {run_id}: the server logged {server.mean():.2f} tok/s per "
                                  f"sequence, the client measured {client.mean():.2f} "
                                  f"({ratio:.3f}x). One of them is not measuring the same decode: "
                                  "check prefill exclusion, concurrency and ITL vs TPOT.", lines))  # fmt: skip
                for line in lines:
                    row_flags.setdefault(line, set()).add("server_client_mismatch")

    # Baselines: drift within each configuration.
    base = df[~df["is_spec"] & df["tok_s"].notna()]
    # A client row and the server's log of the same run are one measurement: prefer the client.
    base = base[~((base["origin"] == "server") & base["run_id"].isin(
        base.loc[base["origin"] != "server", "run_id"]) & (base["run_id"] != ""))]  # fmt: skip
    drift_configs: dict[Any, str] = {}
    for config, group in base.groupby("config", sort=False):
        by_env = group.groupby("fingerprint", sort=False)["tok_s"]
        means = by_env.mean()
        spread = group["tok_s"].max() / group["tok_s"].min() - 1
        if len(means) > 1 or spread > tolerance:
            parts = [f"{m:.2f} tok/s" + (f" ({fp})" if fp else " (no env recorded)")
                     for fp, m in means.items()]  # fmt: skip
            why = "their environments differ" if len(means) > 1 else "with the same environment"
            message = (f"Baselines for {config[0] or 'this model'} on {config[1] or 'this hardware'}"
                       f" at concurrency {config[2]:g} disagree by {spread:.1%} ({why}): "
                       f"{'; '.join(parts)}. A baseline measured in another launch is not a "
                       "baseline: re-measure it right before the speculative run, same "
                       "environment.")  # fmt: skip
            lines = tuple(int(x) for x in group["line"])
            flags.append(Flag("baseline_drift", message, lines))
            drift_configs[config] = message

    comparisons: list[Comparison] = []
    keys = ["config", "num_spec_tokens", "spec_method", "label", "fingerprint"]
    spec_runs = spec.assign(fingerprint=df.loc[spec.index, "fingerprint"],
                            config=df.loc[spec.index, "config"])  # fmt: skip
    spec_runs = spec_runs[~((spec_runs["origin"] == "server") & spec_runs["run_id"].isin(
        spec_runs.loc[spec_runs["origin"] != "server", "run_id"]) & (spec_runs["run_id"] != ""))]  # fmt: skip
    for n, ((config, k_value, method, label, fp), group) in enumerate(
        spec_runs.groupby(keys, sort=False, dropna=False)
    ):
        codes: set[str] = set()
        lines = tuple(int(x) for x in group["line"])
        for line in lines:
            codes |= row_flags.get(line, set())
        candidates = base[base["config"] == config]
        same_env = candidates[candidates["fingerprint"] == fp]
        chosen = same_env if len(same_env) else candidates
        published = group["speedup"].dropna().to_numpy(dtype=float)
        own_speedup = len(published) > 0 and group["tok_s"].isna().all()
        if config in drift_configs:
            codes.add("baseline_drift")
        if own_speedup:
            chosen = candidates.iloc[0:0]  # the source's own speedup needs no baseline row
        elif not len(candidates):
            codes.add("baseline_missing")
            flags.append(Flag("baseline_missing",
                              f"{label or 'A speculative run'} (line {lines[0]}): no baseline of "
                              f"{config[0] or 'this model'} on {config[1] or 'this hardware'} at "
                              f"concurrency {config[2]:g}. Measure one, in the same launch "
                              "environment, before enabling speculation.", lines))  # fmt: skip
        elif not len(same_env):
            codes.add("stale_baseline")
            other = chosen["fingerprint"].iloc[0]
            flags.append(Flag("stale_baseline",
                              f"{label or 'A speculative run'} (line {lines[0]}) is compared with a "
                              f"baseline from another environment (env differs: "
                              f"{_env_difference(fp, other)}). Its speedup is not trustworthy: "
                              "re-measure the baseline with the same environment.",
                              lines + tuple(int(x) for x in chosen["line"])))  # fmt: skip

        spec_tok = group["tok_s"].dropna().to_numpy(dtype=float)
        base_tok = chosen["tok_s"].to_numpy(dtype=float)
        s_mean, b_mean = _mean(spec_tok), _mean(base_tok)
        measured = s_mean / b_mean if len(spec_tok) and len(base_tok) else math.nan
        low, high = _interval(spec_tok, base_tok, seed=n)
        if own_speedup:
            measured, low, high = _mean(published), math.nan, math.nan
        tau = _mean(group["accept_len"].dropna())
        cycle = _mean(group["cycle_ms"].dropna())
        if math.isnan(cycle):
            verify = _mean(group["verify_ms"].dropna())
            draft = _mean(group["draft_ms"].dropna())
            cycle = verify + (0.0 if math.isnan(draft) else draft)
        step = _mean(chosen["step_ms"].dropna()) if len(chosen) else math.nan
        if math.isnan(step) and b_mean > 0:
            step = 1000.0 / b_mean
        predicted = tau * step / cycle if cycle > 0 else math.nan
        residual = measured - predicted
        if not math.isnan(residual) and abs(measured / predicted - 1) > tolerance:
            codes.add("prediction_mismatch")
            flags.append(Flag("prediction_mismatch",
                              f"{label or 'A speculative run'} (line {lines[0]}): measured "
                              f"{measured:.3f}x, the cycle model predicts {predicted:.3f}x from "
                              f"accept_len {tau:.3f}, step {step:.3f} ms and cycle {cycle:.3f} ms."
                              f" The measured run implies a {1000 * tau / s_mean:.3f} ms cycle: "
                              "check the cycle profile and the baseline.", lines))  # fmt: skip
        comparisons.append(Comparison(
            label=label, model=config[0], hardware=config[1],
            concurrency=float(config[2]) if config[2] >= 0 else math.nan,
            num_spec_tokens=float(k_value), spec_method=method,
            runs=len(published) if own_speedup else len(spec_tok),
            baseline_runs=len(base_tok), tok_s=s_mean, baseline_tok_s=b_mean,
            measured_speedup=measured, ci_low=low, ci_high=high,
            verdict=_verdict(measured, low, high, tolerance), accept_len=tau,
            cycle_ms=cycle if cycle > 0 else math.nan, predicted_speedup=predicted,
            residual=residual, implied_cycle_ms=1000.0 * tau / s_mean if s_mean > 0 else math.nan,
            flags=tuple(sorted(codes)), lines=lines,
            baseline_lines=tuple(int(x) for x in chosen["line"]),
        ))  # fmt: skip
    order = list(FLAGS)
    flags.sort(key=lambda f: order.index(f.code))
    return CheckResult(tuple(comparisons), tuple(flags), float(tolerance), tuple(server_checks))


def check_file(path: str, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    """:func:`check` on a measurements CSV."""
    from breakeven.iotools.measurements import read_measurements

    data, _ = read_measurements(path)
    return check(data, tolerance)


__all__: Sequence[str] = ("FLAGS", "CheckResult", "Comparison", "Flag", "ServerCheck", "check",
                          "check_file", "fingerprint")  # fmt: skip
