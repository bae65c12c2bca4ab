"""Prometheus text exposition from an engine's ``/metrics``: one scrape, or the difference of two.

vLLM V1 counters (``_total``; labels ``model_name``, ``engine``):
``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens``,
``vllm:spec_decode_num_accepted_tokens`` and ``..._per_pos`` (label
``position``).  Over a run, the difference of a scrape after it and one
before it gives ``accept_len = 1 + d(accepted) / d(drafts)``.  vLLM V0 had
``..._num_emitted_tokens_total`` (``accept_len = emitted / (draft_tokens / k)``,
k given by the user).  SGLang's gauges ``sglang:spec_accept_length``,
``sglang:gen_throughput`` and ``sglang:num_running_reqs`` are read as they are.

llama.cpp (``llamacpp:``, ``--metrics``) has vLLM V1's spec-decode counters after its prefix,
and ``tokens_predicted_total`` and ``tokens_predicted_seconds_total``: the generation time of
every request.  Their change gives the server's own per-sequence rate (``tok_s``) and its
decode step (``step_ms``, seconds per token) or, when it drafted, its cycle (``cycle_ms``,
seconds per verify cycle).

The exposition format is parsed by ``prometheus_client`` (the ``metrics``
extra: ``pip install 'breakeven[metrics]'``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

PROMETHEUS = "prometheus"
INSTALL_HINT = "reading Prometheus text needs prometheus_client: pip install 'breakeven[metrics]'"

_V1 = "vllm:spec_decode_num_"
_LLAMACPP = "llamacpp:"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def read_metrics(
    after: str, before: str | None = None, *, source: str, num_spec_tokens: int | None = None
) -> list[dict[str, Any]]:
    """Records from one scrape (``after``), or from the change since ``before``.

    One record per (model, engine) label set that reports spec-decode or
    SGLang metrics.  Counters are differenced when ``before`` is given;
    gauges are read from ``after``.

    Raises
    ------
    ValueError
        When the text does not parse as Prometheus exposition.
    """
    groups = _groups(_samples(after), _samples(before) if before is not None else {})
    records = []
    for labels, m in groups.items():
        record = _record(dict(labels), m, source, num_spec_tokens)
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
        if name.startswith(_LLAMACPP + "spec_decode_num_"):  # vLLM V1's names after the prefix
            name = name.replace(_LLAMACPP, "vllm:", 1)
            labels = (*labels, ("__engine", "llamacpp"))
        elif name.startswith(_LLAMACPP + "tokens_predicted"):
            labels = (*labels, ("__engine", "llamacpp"))
        elif not name.startswith(("vllm:spec_decode", "sglang:", "vllm:generation_tokens")):
            continue
        base = dict(labels)
        position = base.pop("position", None)
        key = tuple(sorted(base.items()))
        original = (
            (name.replace("vllm:", _LLAMACPP, 1), labels[:-1])
            if "__engine" in base
            else (name, labels)
        )
        delta = value - then.get(original, 0.0) if name.endswith("_total") else value
        if position is not None:
            groups[key].setdefault("per_pos", {})[int(position)] = delta
        else:
            groups[key][name] = delta
    return groups


def _record(
    label: dict[str, str], m: dict[str, Any], source: str, num_spec_tokens: int | None
) -> dict[str, Any] | None:
    """The record of one label set's samples, or None if they hold nothing breakeven reads."""
    record: dict[str, Any] = {
        "format": PROMETHEUS,
        "source": source,
        "origin": "server",
        "model": label.get("model_name"),
    }
    engine = label.get("__engine", "vllm")
    drafts = m.get(_V1 + "drafts_total", math.nan)
    drafted = m.get(_V1 + "draft_tokens_total", math.nan)
    accepted = m.get(_V1 + "accepted_tokens_total", math.nan)
    emitted = m.get(_V1 + "emitted_tokens_total", math.nan)
    predicted = m.get(_LLAMACPP + "tokens_predicted_total", math.nan)
    seconds = m.get(_LLAMACPP + "tokens_predicted_seconds_total", math.nan)
    if predicted > 0 and seconds > 0:  # llama.cpp: generation time of the requests
        record["tok_s"] = predicted / seconds
        # The server's own decode step, or cycle when it drafted: its generation time over
        # the tokens, or over the verify cycles (per sequence: each request's own time).
        if drafts > 0:
            record["cycle_ms"] = 1000.0 * seconds / drafts
        else:
            record["step_ms"] = 1000.0 * seconds / predicted
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
    elif "sglang:spec_accept_length" in m or "sglang:gen_throughput" in m:
        record["engine"] = "sglang"
        record["accept_len"] = m.get("sglang:spec_accept_length", math.nan)
        record["gen_tok_s"] = m.get("sglang:gen_throughput", math.nan)
        running = m.get("sglang:num_running_reqs", math.nan)
        record["running_reqs"] = running
        if running and running > 0 and not math.isnan(record["gen_tok_s"]):
            record.update(
                aggregate_tok_s=record["gen_tok_s"],
                concurrency=running,
                tok_s=record["gen_tok_s"] / running,
            )
        record["num_spec_tokens"] = num_spec_tokens
    elif engine == "llamacpp" and "tok_s" in record:  # a server that never speculated
        record["engine"] = "llamacpp"
    else:
        return None
    return record


def _k(
    per_pos: dict[int, float],
    drafted: float,
    drafts: float,
    accepted: float,
    record: dict[str, Any],
) -> int | None:
    """k: the number of per-position series, unless they account for fewer accepted tokens
    than the total (a trimmed scrape, a position missing): then drafted / drafts."""
    from_counts = round(drafted / drafts) if drafts else None
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
