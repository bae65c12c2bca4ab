"""Prometheus text exposition from an engine's ``/metrics``: one scrape, or the difference of two.

The series read are named in :mod:`breakeven.iotools.metrics`.  vLLM V1's spec-decode
counters (``vllm:spec_decode_num_*``, by ``model_name`` and ``engine``; the accepted tokens
also by ``position``): over a run, the difference of a scrape after it and one before it
gives ``accept_len = 1 + d(accepted) / d(drafts)``.  vLLM V0 had an ``emitted`` counter
(``accept_len = emitted / (draft_tokens / k)``, k given by the user).  SGLang's gauges
(acceptance length, generation throughput, running requests) are read as they are.

llama.cpp (``--metrics``) has vLLM V1's spec-decode counters after its own prefix, and the
tokens its requests generated and their generation time.  Their change gives the server's
own per-sequence rate (``tok_s``) and its decode step (``step_ms``, seconds per token) or,
when it drafted, its cycle (``cycle_ms``, seconds per verify cycle).  vLLM V1 gives the same
from its histograms' sums and counts (``vllm:request_generation_tokens``,
``vllm:request_decode_time_seconds``, ``vllm:inter_token_latency_seconds``): the finished
requests' decoded tokens over their decode time, and a decoding request's time per engine
step, which is a step without speculation and a verify cycle with it.  A baseline scrape,
without spec-decode counters, gives them too.

The exposition format is parsed by ``prometheus_client`` (the ``metrics``
extra: ``pip install '.[metrics]'`` in breakeven's folder).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from breakeven.core.choices import PROMETHEUS
from breakeven.iotools.metrics import COUNTER, HISTOGRAM, LLAMACPP, SGLANG, VLLM

INSTALL_HINT = (
    "reading Prometheus text needs prometheus_client: pip install '.[metrics]' in breakeven's "
    "folder"
)

_SPEC_DECODE = ("drafts", "draft_tokens", "accepted", "accepted_per_pos")
# llama.cpp's spec-decode counters are vLLM V1's under its prefix: read as vLLM's.
_LLAMACPP_AS_VLLM = {LLAMACPP.name(q): VLLM.name(q) for q in _SPEC_DECODE}
_VLLM_AS_LLAMACPP = {v: k for k, v in _LLAMACPP_AS_VLLM.items()}
_LLAMACPP_TIMES = frozenset(LLAMACPP.name(q) for q in ("generated", "seconds"))
_READ = frozenset(m.name for engine in (VLLM, SGLANG) for m in engine.series.values())
_VLLM_TIMES = ("request_tokens", "requests", "decode_seconds", "iteration_seconds", "iterations")


_WANTED = _READ | frozenset(_LLAMACPP_AS_VLLM) | _LLAMACPP_TIMES
# Counters, and histograms' sums and counts: cumulative, differenced over a run.
_CUMULATIVE = frozenset(
    m.name
    for engine in (VLLM, SGLANG, LLAMACPP)
    for m in engine.series.values()
    if m.kind in (COUNTER, HISTOGRAM)
)
# A sample line of a series read: its name (longest first), its labels, white space, a value.
_WANTED_LINE = re.compile(
    "^(?:"
    + "|".join(re.escape(n) for n in sorted(_WANTED, key=len, reverse=True))
    + r")(?:\{[^\n]*\})?[ \t][^\n]*$",
    re.M,
)
# A line that is neither a comment, nor blank, nor a sample: the text is not an exposition.
_NOT_EXPOSITION = re.compile(
    r"^(?!#|[ \t]*$|[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^\n]*\})?[ \t]+\S)", re.M
)


def _relevant(text: str) -> str:
    """The sample lines of the series breakeven reads, found in one scan of ``text``.

    A vLLM ``/metrics`` runs to thousands of histogram lines; parsing all of them took
    0.2-0.4 s a scrape on a loaded machine, in the event loop ``bench`` measures with.  Its
    few counters are found in milliseconds.  A text with a line that is neither a comment
    nor a sample is refused (ValueError), as the parser would refuse it.
    """
    bad = _NOT_EXPOSITION.search(text)
    if bad is not None:
        line = text.count("\n", 0, bad.start()) + 1
        raise ValueError(f"not Prometheus text exposition (line {line})")
    return "".join(match.group(0) + "\n" for match in _WANTED_LINE.finditer(text))


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = _relevant(text)
    try:
        from prometheus_client.parser import (
            text_string_to_metric_families,  # lazy: optional dependency (the metrics and bench extras)
        )
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            try:
                value = float(s.value)
            except OverflowError:  # a whole number of hundreds of digits
                continue
            if math.isfinite(value) and abs(value) <= MAX_SAMPLE:  # else no engine sent it
                out[(s.name, tuple(sorted(s.labels.items())))] = value
    return out


MAX_SAMPLE = 1e18
"""A sample beyond this (or NaN, or infinite) is left out, as if the series were absent: no
engine's counter or gauge gets there, and its differences would overflow or mean nothing."""


def parse_metrics(
    after: str,
    before: str | None = None,
    *,
    source: str,
    num_spec_tokens: int | None = None,
    requests: int | None = None,
) -> list[dict[str, Any]]:
    """Records from one scrape (``after``), or from the change since ``before``.

    One record per (model, engine) label set that reports spec-decode or
    SGLang metrics.  Counters are differenced when ``before`` is given;
    gauges are read from ``after``.

    ``requests``, the requests that finished between the scrapes where the caller knows them
    (``bench`` does), makes llama.cpp's rate and step those of decoding: its generation time
    runs from each request's first token, which its token count includes, so the decoded
    tokens are the generated less one a request.  Without it they stand as the counters
    give them, high by one token a request (1.6% at 64 tokens a request).

    Raises
    ------
    ValueError
        When the text does not parse as Prometheus exposition.
    """
    groups = _groups(_samples(after), _samples(before) if before is not None else {})
    records = []
    for labels, m in groups.items():
        record = _record(dict(labels), m, source, num_spec_tokens, requests)
        if record is None:
            continue
        if before is not None:
            record["note"] = "; ".join(
                filter(None, [record.get("note"), "difference of two scrapes"])
            )
        records.append(record)
    return records


def _groups(now: dict[Any, float], then: dict[Any, float]) -> dict[Any, dict[str, Any]]:
    """The engine samples by label set (less ``position``): counters as the change since
    ``then``, gauges as they are, per-position counters under ``per_pos``."""
    groups: dict[tuple[tuple[str, str], ...], dict[str, Any]] = defaultdict(dict)
    for (name, labels), value in now.items():
        if name in _LLAMACPP_AS_VLLM:  # vLLM V1's names after the prefix
            name = _LLAMACPP_AS_VLLM[name]
            labels = (*labels, ("__engine", "llamacpp"))
        elif name in _LLAMACPP_TIMES:
            labels = (*labels, ("__engine", "llamacpp"))
        base = dict(labels)
        position = base.pop("position", None)
        key = tuple(sorted(base.items()))
        original = (
            (_VLLM_AS_LLAMACPP.get(name, name), labels[:-1])
            if "__engine" in base
            else (name, labels)
        )
        delta = value - then.get(original, 0.0) if name in _CUMULATIVE else value
        if position is not None:
            groups[key].setdefault("per_pos", {})[int(position)] = delta
        else:
            groups[key][name] = delta
    return groups


def _record(
    label: dict[str, str],
    m: dict[str, Any],
    source: str,
    num_spec_tokens: int | None,
    requests: int | None = None,
) -> dict[str, Any] | None:
    """The record of one label set's samples, or None if they hold nothing breakeven reads."""
    record: dict[str, Any] = {
        "format": PROMETHEUS,
        "source": source,
        "origin": "server",
        "model": label.get("model_name"),
    }
    engine = label.get("__engine", "vllm")
    drafts = m.get(VLLM.name("drafts"), math.nan)
    drafted = m.get(VLLM.name("draft_tokens"), math.nan)
    accepted = m.get(VLLM.name("accepted"), math.nan)
    emitted = m.get(VLLM.name("emitted"), math.nan)
    predicted = m.get(LLAMACPP.name("generated"), math.nan)
    seconds = m.get(LLAMACPP.name("seconds"), math.nan)
    decoded = predicted - requests if requests and predicted > requests else predicted
    if predicted > 0 and seconds > 0:  # llama.cpp: generation time of the requests
        record["tok_s"] = decoded / seconds
        # The server's own decode step, or cycle when it drafted: its generation time over
        # the tokens, or over the verify cycles (per sequence: each request's own time).
        if drafts > 0:
            record["cycle_ms"] = 1000.0 * seconds / drafts
        else:
            record["step_ms"] = 1000.0 * seconds / decoded
    if engine == "vllm":
        _vllm_times(m, drafts, record)
    if not math.isnan(drafts):  # vLLM V1, and llama.cpp (the same counters)
        record["engine"] = engine
        per_pos = m.get("per_pos", {})
        k = _k(per_pos, drafted, drafts, accepted, record)
        record.update(
            num_drafts=drafts, draft_tokens=drafted, accepted_tokens=accepted, num_spec_tokens=k
        )
        if drafts > 0:
            record["accept_len"] = 1 + accepted / drafts
            record["per_position"] = [per_pos[i] / drafts for i in sorted(per_pos)] or None
        if drafted > 0:
            record["acceptance_rate"] = accepted / drafted
    elif not math.isnan(emitted):  # vLLM V0
        record["engine"] = "vllm"
        k = num_spec_tokens
        record.update(
            draft_tokens=drafted,
            accepted_tokens=accepted,
            emitted_tokens=emitted,
            num_spec_tokens=k,
        )
        if k and drafted > 0:
            record["accept_len"] = emitted / (drafted / k)
            record["acceptance_rate"] = (record["accept_len"] - 1) / k
    elif SGLANG.name("accept_len") in m or SGLANG.name("throughput") in m:
        record["engine"] = "sglang"
        record["accept_len"] = m.get(SGLANG.name("accept_len"), math.nan)
        record["gen_tok_s"] = m.get(SGLANG.name("throughput"), math.nan)
        running = m.get(SGLANG.name("running"), math.nan)
        record["running_reqs"] = running
        if running and running > 0 and not math.isnan(record["gen_tok_s"]):
            record.update(
                aggregate_tok_s=record["gen_tok_s"],
                concurrency=running,
                tok_s=record["gen_tok_s"] / running,
            )
        record["num_spec_tokens"] = num_spec_tokens
    elif "tok_s" in record:  # a server that never speculated: its rate and step
        record["engine"] = engine
    else:
        return None
    return record


def _vllm_times(m: dict[str, Any], drafts: float, record: dict[str, Any]) -> None:
    """vLLM's own per-sequence rate (``tok_s``) and step (``step_ms``) or, where it drafted,
    verify cycle (``cycle_ms``), from its timing histograms, into ``record`` where they tell.

    The rate is the finished requests' decoded tokens (each request's first token is the
    prefill's) over their decode time, a ratio of sums; the step or cycle is a decoding
    request's time per engine step, summed over steps, over the steps.  An engine step of a
    speculating server is a verify cycle, drafted or not (ngram drafts nothing where the
    prompt does not repeat): ``cycle_ms`` is the time per step of every kind.
    """
    tokens, requests = (m.get(VLLM.name(q), math.nan) for q in ("request_tokens", "requests"))
    decode_s = m.get(VLLM.name("decode_seconds"), math.nan)
    steps_s, steps = (m.get(VLLM.name(q), math.nan) for q in ("iteration_seconds", "iterations"))
    decoded = tokens - requests
    if decoded > 0 and decode_s > 0:
        record["tok_s"] = decoded / decode_s
    if steps > 0 and steps_s > 0:
        record["cycle_ms" if drafts > 0 else "step_ms"] = 1000.0 * steps_s / steps


def _k(
    per_pos: dict[int, float],
    drafted: float,
    drafts: float,
    accepted: float,
    record: dict[str, Any],
) -> int | None:
    """k: the number of per-position series, unless they account for fewer accepted tokens
    than the total (a trimmed scrape, a position missing): then drafted / drafts."""
    ratio = drafted / drafts if drafts else math.nan
    from_counts = round(ratio) if math.isfinite(ratio) else None  # a counter may be missing
    if not per_pos:
        return from_counts
    if sum(per_pos.values()) < accepted - 0.5 and from_counts is not None:
        record["note"] = (
            f"the {len(per_pos)} per-position series sum to "
            f"{sum(per_pos.values()):g} < {accepted:g} accepted tokens (a trimmed "
            "scrape?): k from drafted / drafts"
        )
        return from_counts
    return len(per_pos)
