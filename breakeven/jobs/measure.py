"""Measurements resolved from arguments, files and the environment, as the commands do it.

What ``breakeven check``, ``compare``, ``fleet`` and ``bench`` decide before and around
their analysis, for a notebook as much as for the command line: each run against a
schedule (``--schedule``), a flag given once or once per file, compare's speculative runs
with what their files may not say, a fleet read from Prometheus with its time range and
a bearer token from the environment, and bench's configuration with its API key.

Every problem is a :class:`breakeven.core.errors.BreakevenError` naming the Python arguments;
the command line spells them as its flags.  Secrets are read here and never shown.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from breakeven.bench.config import Config
from breakeven.bench.prompts import DEFAULT_PROMPTS, read_prompts
from breakeven.core.credentials import clean_api_key
from breakeven.core.errors import BreakevenError, escape_braces, invalid_value, shorten
from breakeven.core.headers import parse_headers
from breakeven.core.provenance import parse_time
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.fitting.saved import load_surface
from breakeven.fleet.reads import read_fleet
from breakeven.fleet.view import check_match
from breakeven.iotools.atomic import refuse_overwrite
from breakeven.iotools.ingest import check_year
from breakeven.iotools.paths import refuse_input_as_output
from breakeven.iotools.pipeline import per_file
from breakeven.iotools.query_range import (
    PrometheusAPI,
    parse_duration,
    thanos_params,
    time_range,
)
from breakeven.iotools.runs import sweep_runs
from breakeven.iotools.server import read_server_env
from breakeven.jobs.checking import check_from_file, with_fit, with_mix, with_schedule
from breakeven.measurements.check import check_file
from breakeven.measurements.compare import CompareResult, RunInput, compare, parse_run
from breakeven.measurements.plausibility import speedup_bound
from breakeven.render.report import check_report_dir, write_report


def report_from_file(
    measurements: str, out_dir: str, *, tolerance: float = DEFAULT_TOLERANCE, force: bool = False
) -> str:
    """``breakeven report``: check a measurements CSV and write its page.

    The directory is checked before the work (refused where ``out_dir/report.html`` is
    ``measurements``, even with ``force``), then the check's page goes to
    ``out_dir/report.html`` atomically.

    Parameters
    ----------
    measurements : str
        Path of a measurements CSV (the schema of ``breakeven ingest --out``).
    out_dir : str
        Directory of the page (created if missing).
    tolerance : float
        Relative tolerance of the check [fraction].
    force : bool
        Replace an existing ``report.html``.

    Returns
    -------
    str
        The path of the page written.
    """
    refuse_input_as_output(
        os.path.join(out_dir, "report.html"), "out", [("MEASUREMENTS", measurements)]
    )
    check_report_dir(out_dir, force)
    result = check_file(measurements, tolerance)
    return write_report(result, out_dir, source=measurements, force=force)


def spec_runs(
    specs: Sequence[str],
    *,
    num_spec_tokens: Sequence[int] = (),
    spec_topk: Sequence[int] = (),
    verify_tokens: Sequence[int] = (),
    spec_method: Sequence[str] = (),
    env: Sequence[str] = (),
) -> list[RunInput]:
    """compare's speculative runs (:func:`breakeven.measurements.compare.parse_run`), each with what its files
    may not say, given once for all runs or once per run
    (:func:`breakeven.iotools.pipeline.per_file`)."""
    runs = [parse_run(s) for s in specs]
    given = {
        "num_spec_tokens": num_spec_tokens,
        "spec_method": spec_method,
        "env": env,
        "spec_topk": spec_topk,
        "verify_tokens": verify_tokens,
    }
    columns = {name: per_file(name, values, len(runs)) for name, values in given.items()}
    return [
        replace(run, **{name: column[i] for name, column in columns.items()})
        for i, run in enumerate(runs)
    ]


def typed_run(
    label: str,
    tok_s: float,
    at: str | None = None,
    env: str | None = None,
    accept_len: float | None = None,
    *,
    prefix: str,
) -> RunInput:
    """A run typed in (``compare --baseline-tok-s 90 --baseline-at 2026-02-02``): one row,
    its rate [tok/s], when it was measured (ISO 8601), the settings of its launch and, for a
    speculative run, its accept_len [tokens/cycle].  A bad date names its flag
    (``prefix`` + ``_at``)."""
    if not (math.isfinite(tok_s) and tok_s > 0):
        raise invalid_value(f"{prefix}_tok_s", tok_s, "a decode rate above 0 [tok/s]")
    if accept_len is not None and not (math.isfinite(accept_len) and accept_len >= 1):
        raise invalid_value(
            "accept_len", accept_len, "a mean acceptance length of at least 1 [tokens/cycle]"
        )
    if at is not None and parse_time(at) is None:
        raise invalid_value(
            f"{prefix}_at", at, "an ISO 8601 date or time, such as 2026-02-02 or 2026-02-26T16:41"
        )
    given = {
        "tok_s": float(tok_s),
        "timestamp": at,
        "env": env,
        "accept_len": accept_len,
        "source": f"typed: --{prefix.replace('_', '-')}-tok-s {tok_s:g}"
        + (f" --{prefix.replace('_', '-')}-at {at}" if at else ""),
    }
    return RunInput(label, (), typed=tuple((k, v) for k, v in given.items() if v is not None))


def compare_from_files(
    baseline: str | None,
    specs: Sequence[str],
    *,
    baseline_tok_s: float | None = None,
    baseline_at: str | None = None,
    baseline_env: str | None = None,
    spec_tok_s: float | None = None,
    spec_at: str | None = None,
    accept_len: float | None = None,
    num_spec_tokens: Sequence[int] = (),
    spec_topk: Sequence[int] = (),
    verify_tokens: Sequence[int] = (),
    spec_method: Sequence[str] = (),
    env: Sequence[str] = (),
    schedule_file: str | None = None,
    fit_file: str | None = None,
    mix: str | dict[str, float] | None = None,
    year: int | None = None,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    cycle_ms: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    slo: str | None = None,
) -> CompareResult:
    """:func:`breakeven.measurements.compare.compare` of runs given as text (``[LABEL=]PATH[+PATH][,...]``).

    Parameters
    ----------
    baseline : str
        The baseline run.
    specs : sequence of str
        The speculative runs.
    num_spec_tokens, spec_topk, verify_tokens, spec_method, env
        What the runs' files may not say; see :func:`spec_runs`.
    schedule_file : str, optional
        Each run against this schedule too; see :func:`with_schedule`.
    fit_file : str, optional
        Each run against this fit's prediction too; see :func:`with_fit`.
    mix : str or dict, optional
        Each run's speedup over this traffic mix; see :func:`with_mix`.
    baseline_tok_s, baseline_at, baseline_env
        A baseline typed in instead of ``baseline`` (its rate [tok/s], date, settings);
        ``baseline`` is then a speculative run's file, if given.
    spec_tok_s, spec_at, accept_len
        A speculative run typed in (its rate [tok/s], date, accept_len [tokens/cycle]), its
        settings in ``env`` and its k in ``num_spec_tokens``.
    year : int, optional
        The year of dates the runs' logs print without one (1970 to 2100).
    verify_ms, draft_ms, cycle_ms : float, optional
        The speculative cycle's costs [ms], for a predicted speedup: ``verify_ms`` (and
        ``draft_ms``), or ``cycle_ms``.
    tolerance : float
        Relative tolerance, as :func:`breakeven.measurements.check.check`'s [fraction].
    slo : str, optional
        A service-level objective (:func:`breakeven.measurements.slo.parse_slo`).
    """
    check_year(year)
    files = _run_files(baseline, specs)
    base, files = _baseline_run(files, baseline_tok_s, baseline_at, baseline_env)
    _refuse_dates_without_rates(baseline_at, baseline_tok_s, spec_at, spec_tok_s)
    typed = _typed_spec(files, spec_tok_s, spec_at, accept_len, env)
    runs = spec_runs(
        files,
        num_spec_tokens=num_spec_tokens,
        spec_topk=spec_topk,
        verify_tokens=verify_tokens,
        spec_method=spec_method,
        env=env if files else (),
    )
    if typed is not None:
        runs.append(_spec_at_k(typed, num_spec_tokens, spec_method, baseline_tok_s, spec_tok_s))
    base = replace(base, year=year)
    runs = [replace(run, year=year) for run in runs]
    costs = {"verify_ms": verify_ms, "draft_ms": draft_ms, "cycle_ms": cycle_ms}
    compared = compare(base, runs, **costs, tolerance=tolerance, slo=slo)
    result = with_fit(with_schedule(compared, schedule_file), fit_file)
    return with_mix(result, mix)


def _run_files(baseline: str | None, specs: Sequence[str]) -> list[str]:
    """compare's BASELINE and SPEC texts, in order; a sweep's directory given alone, its runs
    (:func:`breakeven.iotools.runs.sweep_runs`)."""
    files = [baseline, *specs] if baseline is not None else list(specs)
    if len(files) == 1 and os.path.isdir(files[0]):  # a sweep's directory
        files = sweep_runs(files[0])
    return files


def _baseline_run(
    files: list[str],
    baseline_tok_s: float | None,
    baseline_at: str | None,
    baseline_env: str | None,
) -> tuple[RunInput, list[str]]:
    """The baseline, typed in or the first of ``files`` (with ``baseline_env``), and the files
    left for the speculative runs."""
    if baseline_tok_s is not None:
        base = typed_run("baseline", baseline_tok_s, baseline_at, baseline_env, prefix="baseline")
    elif files:
        base = parse_run(files[0])
        files = files[1:]
        if baseline_env is not None:
            base = replace(base, env=baseline_env)
    else:
        raise BreakevenError(
            "BASELINE: give a baseline file, or type one in with {0}", "baseline_tok_s"
        )
    return base, files


def _refuse_dates_without_rates(
    baseline_at: str | None,
    baseline_tok_s: float | None,
    spec_at: str | None,
    spec_tok_s: float | None,
) -> None:
    """``baseline_at`` and ``spec_at`` refused without the typed-in rate each dates."""
    for name, value in (("baseline_at", baseline_at), ("spec_at", spec_at)):
        if (
            value is not None
            and {"baseline_at": baseline_tok_s, "spec_at": spec_tok_s}[name] is None
        ):
            raise BreakevenError(
                "{0}: dates a typed-in rate; give it with {1}",
                name,
                name.replace("_at", "_tok_s"),
            )


def _typed_spec(
    files: Sequence[str],
    spec_tok_s: float | None,
    spec_at: str | None,
    accept_len: float | None,
    env: Sequence[str],
) -> RunInput | None:
    """The speculative run typed in (``env`` its settings where it is the only run), or None;
    refused where ``accept_len`` is given without its rate, or where there is no speculative
    run at all (neither ``files`` nor one typed in)."""
    typed = None
    if spec_tok_s is not None:
        env_typed = env[0] if len(env) == 1 and not files else None
        typed = typed_run("spec", spec_tok_s, spec_at, env_typed, accept_len, prefix="spec")
    elif accept_len is not None:
        raise BreakevenError(
            "{0}: goes with {1} (a typed-in speculative run)", "accept_len", "spec_tok_s"
        )
    if not files and typed is None:
        raise BreakevenError(
            "SPEC: give a speculative run's file, or type one in with {0}", "spec_tok_s"
        )
    return typed


def _spec_at_k(
    typed: RunInput,
    num_spec_tokens: Sequence[int],
    spec_method: Sequence[str],
    baseline_tok_s: float | None,
    spec_tok_s: float | None,
) -> RunInput:
    """The typed-in speculative run at the last k and method given, refused where it and a
    typed-in baseline are rates no cycle at that k gives (:func:`_refuse_impossible_typed`)."""
    k = num_spec_tokens[-1] if num_spec_tokens else None
    if baseline_tok_s is not None:
        _refuse_impossible_typed(baseline_tok_s, spec_tok_s, k)
    return replace(typed, num_spec_tokens=k, spec_method=(spec_method or [None])[-1])


def _refuse_impossible_typed(baseline_tok_s: float, spec_tok_s: Any, k: int | None) -> None:
    """Two typed-in rates whose ratio is above k + 1 (beyond the tolerance): no cycle gives
    that (it emits at most k + 1 tokens in at least one plain step's time), so one of them is
    not a per-sequence rate, or not in tok/s."""
    if k is None or not k > 0 or not baseline_tok_s > 0:
        return
    ratio = spec_tok_s / baseline_tok_s
    if ratio > speedup_bound(k):
        raise BreakevenError(
            "{0}: "
            + f"{spec_tok_s:g} tok/s is {ratio:.2f}x "
            + "{1}"
            + f" {baseline_tok_s:g} tok/s, above k + 1 = {k + 1}, which no cycle can give; "
            "expected per-sequence rates: an aggregate rate of all sequences (tok/s at "
            "concurrency > 1) is about the concurrency times one sequence's",
            "spec_tok_s",
            "baseline_tok_s",
        )


def secret_from_env(variable: str, name: str) -> str:
    """The stripped value of the environment variable ``variable`` (a bearer token).

    Parameters
    ----------
    variable : str
        The variable's name.
    name : str
        The argument ``variable`` came from, named in errors.
    """
    token = os.environ.get(variable)
    if not token:
        raise BreakevenError(
            "{0}: the variable " + escape_braces(shorten(variable)) + " is not set", name
        )
    return token.strip()


def api_key_from_env(variable: str) -> tuple[str, str | None]:
    """An API key from the environment variable ``variable``
    (:func:`breakeven.core.credentials.clean_api_key`), and a note where it was cleaned.

    Errors name ``api_key_env``; the key itself is never shown.
    """
    key = os.environ.get(variable)
    if key is None:
        shown = variable if variable.isidentifier() else shorten(repr(variable))
        raise BreakevenError(
            "{0}: the variable " + escape_braces(shown) + " is not set", "api_key_env"
        )
    return clean_api_key(key, variable)


def bench_config(
    *,
    url: str,
    label: str,
    concurrency: Sequence[int] | None = None,
    request_rate: Sequence[float] | None = None,
    burstiness: float = 1.0,
    seed: int = 0,
    max_concurrency: int | None = None,
    model: str | None = None,
    max_tokens: int = 512,
    requests: int | None = None,
    prompts: str | None = None,
    categories: Sequence[str] | None = None,
    chat: bool = False,
    api_key_env: str | None = None,
    num_spec_tokens: int | None = None,
    spec_topk: int | None = None,
    verify_tokens: int | None = None,
    spec_method: str | None = None,
    hardware: str | None = None,
    env: str | None = None,
    server_env_from: str | None = None,
    ready_timeout_s: float = 120.0,
    connect_timeout_s: float = 5.0,
    idle_timeout_s: float = 60.0,
    request_timeout_s: float = 600.0,
    ignore_eos: bool = True,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> tuple[Config, str | None]:
    """``breakeven bench``'s :class:`breakeven.bench.config.Config`, checked, and a note of what
    was done to the API key, to tell the user (never the key).

    Parameters
    ----------
    url, label, model : str
        The server (``http://host:8000[/v1]``), the run's name, the model (default: its first).
    concurrency : sequence of int, optional
        Closed-loop levels [requests in flight] (default: one, at 1).
    request_rate : sequence of float, optional
        Open-loop levels instead [req/s] (give one of ``concurrency`` and ``request_rate``).
    burstiness, seed, max_concurrency : float, int, int
        An open-loop level's gaps' gamma shape [-] (1: Poisson), its schedule's seed, and
        its cap on requests in flight (default none).
    max_tokens, requests : int
        Tokens per request [tokens]; requests per level (default 4 x concurrency, at least 8;
        open loop, about 30 s of arrivals, 8 to 1,000).
    prompts, categories : str, sequence of str, optional
        A prompts file (:func:`~breakeven.bench.prompts.read_prompts`; default: built-in
        ones), and each prompt's workload category (default: the file's).
    chat, ignore_eos : bool
        Ask ``/v1/chat/completions``; generate every request to ``max_tokens`` (the default,
        so that a baseline and a speculative run decode the same tokens), else let each stop
        where the model ends it (its rows count the tokens the server says it generated).
    temperature, top_p : float
        The sampling settings sent with every request [-, fraction] (default 0 and 1:
        greedy), recorded in every row.
    api_key_env : str, optional
        The environment variable holding the API key (see :func:`api_key_from_env`).
    num_spec_tokens, spec_topk, verify_tokens : int, optional
        k [draft tokens/cycle], a tree's branches per step, its tokens verified per sequence.
    spec_method, hardware, env, server_env_from : str, optional
        Stamped on every row; ``server_env_from`` is refused now if unreadable.
    ready_timeout_s, connect_timeout_s, idle_timeout_s, request_timeout_s : float
        The longest wait for readiness, a connection, a byte, a whole request [s].
    """
    arguments = dict(locals())  # the settings that go to Config as they are
    api_key, note = api_key_from_env(api_key_env) if api_key_env is not None else (None, None)
    texts = read_prompts(prompts) if prompts else DEFAULT_PROMPTS
    if server_env_from:
        read_server_env(server_env_from)  # refused now, before any request
    as_given = {f.name: arguments[f.name] for f in fields(Config) if f.name in arguments}
    loads = {
        "concurrency": tuple(concurrency) if concurrency is not None else (),
        "request_rate": tuple(request_rate) if request_rate is not None else (),
    }
    config = Config(**{**as_given, **loads, "prompts": texts, "api_key": api_key})
    config.check()
    return config, note


def fleet_from_prometheus(
    prometheus: str,
    *,
    start: str | None = None,
    end: str | None = None,
    since: str | None = None,
    step: str = "60s",
    window: str | None = None,
    match: str = "",
    fit_file: str | None = None,
    fit_surface: int | None = None,
    tolerance: float = 0.1,
    max_share_above: float = 0.1,
    token_env: str | None = None,
    header: Sequence[str] = (),
    dedup: bool | None = None,
    partial_response: bool | None = None,
    trtllm_stats: tuple[str, ...] = (),
    out: str | None = None,
    force: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """Every engine server a Prometheus keeps, read and summarised
    (:func:`breakeven.fleet.reads.read_fleet`).

    Parameters
    ----------
    prometheus : str
        The Prometheus server, ``http://host:9090``.
    start, end, since : str, optional
        Unix seconds or RFC 3339; ``end`` defaults to now; ``since`` instead of ``start``:
        this long before ``end`` (``6h``; default 1h).
    step : str
        Resolution of the range queries (``60s``).
    window : str, optional
        ``rate()`` window (default: twice the step, at least 60 s).
    match : str
        A label matcher every series is selected with (``{job="vllm"}``).
    fit_file, fit_surface
        A fit file's forward surface (see :func:`breakeven.fitting.saved.load_surface`):
        predicted speedup at the load each server saw.
    tolerance : float
        ``acceptance_drop``: accept_len fell by more than this fraction.
    max_share_above : float
        ``above_breakeven``: more than this share of the time above the break-even batch.
    token_env, header, dedup, partial_response
        How Prometheus is asked (:func:`prometheus_api`): a bearer token's variable, headers,
        Thanos' parameters.
    trtllm_stats : tuple of str
        trtllm-serve servers read once each (:func:`breakeven.fleet.reads.read_trtllm_stats`).
    out, force
        Also write every server's steps as a measurements CSV to ``out`` (refused before any
        work if it exists, unless ``force``, or is ``fit_file``, even with ``force``).

    Returns
    -------
    (summary, series) : tuple
        :class:`breakeven.fleet.view.FleetResult`, and each server's accept_len over time.
    """
    refuse_input_as_output(out, "out", [("fit_file", fit_file)])
    step_s = parse_duration(step, "step")
    first, last = time_range(start, end, since, step_s)
    rate_window = _rate_window(window, step_s)
    matcher = check_match(match)
    surface = _fleet_surface(fit_file, fit_surface)
    if out is not None:
        refuse_overwrite(out, force)
    return read_fleet(
        prometheus_api(prometheus, token_env, header, dedup, partial_response),
        first,
        last,
        step_s,
        matcher,
        rate_window,
        trtllm_stats=tuple(trtllm_stats),
        out=out,
        force=force,
        surface=surface,
        tolerance=tolerance,
        max_share_above=max_share_above,
    )


def prometheus_api(
    prometheus: str,
    token_env: str | None = None,
    header: Sequence[str] = (),
    dedup: bool | None = None,
    partial_response: bool | None = None,
) -> PrometheusAPI:
    """The client of the Prometheus at ``prometheus`` (a base path such as ``/prometheus``
    kept), checked before any request.

    Parameters
    ----------
    prometheus : str
        The server's URL: ``http://host:9090``, ``http://mimir:8080/prometheus``.
    token_env : str, optional
        The environment variable holding a bearer token (never shown).
    header : sequence of str
        ``NAME: VALUE`` headers sent with every query (``X-Scope-OrgID: team`` for Mimir or
        Cortex; :func:`breakeven.core.headers.parse_headers`); their values are never shown.
    dedup, partial_response : bool, optional
        Thanos' query parameters of those names, sent only when given (True or False).
    """
    token = secret_from_env(token_env, "token_env") if token_env is not None else None
    headers = parse_headers(header)
    params = thanos_params(dedup=dedup, partial_response=partial_response)
    return PrometheusAPI(prometheus, token, headers=headers, query_params=params)


def _rate_window(window: str | None, step_s: float) -> str:
    """``rate()``'s window: ``window``, checked, or by default twice the step [s], at least
    60 s."""
    rate_window = window or f"{max(60, int(2 * step_s))}s"
    parse_duration(rate_window, "window")
    return rate_window


def _fleet_surface(fit_file: str | None, fit_surface: int | None) -> Any:
    """The forward surface of ``fit_file`` (:func:`breakeven.fitting.saved.load_surface`) the
    fleet is priced on, or None without a fit file; ``fit_surface`` needs ``fit_file``."""
    if fit_file is not None:
        return load_surface(fit_file, fit_surface)
    if fit_surface is not None:
        raise BreakevenError("{0} needs {1}", "fit_surface", "fit_file")
    return None


__all__: Sequence[str] = (
    "api_key_from_env",
    "bench_config",
    "check_from_file",
    "compare_from_files",
    "fleet_from_prometheus",
    "prometheus_api",
    "report_from_file",
    "secret_from_env",
    "spec_runs",
    "with_fit",
    "with_mix",
    "with_schedule",
)
