"""The schedule of k by batch, from a cost curve or a fit file, as the commands make it.

``breakeven schedule`` and ``breakeven plot schedule`` make the same decisions here: the
sweep's cost model and acceptance (:func:`breakeven.jobs.inputs.schedule_cost`), the share of
time at each batch (``--load``), and the engine's config written only where the schedule has
one (:func:`schedule_from_files`); :func:`plan_from_files` is the grid and schedule a picture
is drawn from.

Every problem is a :class:`breakeven.core.errors.BreakevenError` naming the Python arguments;
the command line spells them as its flags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.jobs.inputs import SweepInputs


def read_load_profile(
    load: str | None, *, shape: bool = False
) -> tuple[dict[int, float] | None, str]:
    """The share of time at each batch size (:func:`breakeven.iotools.load.read_load`).

    Parameters
    ----------
    load : str, optional
        A ``batch,share`` CSV, or a log or measurements CSV; None: every batch alike.
    shape : bool
        Name the file's shape in the source ("runs.csv (records)").

    Returns
    -------
    profile : dict or None
        ``{batch: share}``, shares summing to 1 [fraction].
    source : str
        The file, or "uniform".
    """
    if load is None:
        return None, "uniform"
    from breakeven.iotools.load import read_load  # lazy: start-up

    profile, meta = read_load(load)
    return profile, f"{meta['path']} ({meta['shape']})" if shape else meta["path"]


def schedule_from_files(
    *,
    engine: str,
    load: str | None = None,
    out: str | None = None,
    force: bool = False,
    min_gain: float = 0.02,
    max_num_seqs: int | None = None,
    graph_sizes: Sequence[int] | None = None,
    method: str | None = None,
    base_config: dict[str, Any] | None = None,
    require_config: bool = False,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    k_max: int = 16,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    max_batch: int | None = None,
    kv_tokens: int | str | None = None,
    spec_kv_tokens: int | str | None = None,
    draft_memory_gib: float | None = None,
    kv_bytes_per_token: float | str | None = None,
    tokens_per_sequence: int | None = None,
    output_tokens: float | None = None,
) -> dict[str, Any]:
    """What ``breakeven schedule`` prints (:func:`breakeven.planning.schedule.schedule_report`), from
    a cost curve or fit file, and the engine's config written to ``out`` as JSON.

    Parameters
    ----------
    engine : str
        One of :data:`breakeven.render.engine_configs.SCHEDULE_ENGINES`.
    load : str, optional
        A load profile file (see :func:`read_load_profile`).
    out : str, optional
        Also write the engine's config here (refused before any work if it exists,
        unless ``force``, or is one of the inputs, even with ``force``).  Written only
        where the schedule has a config (not where no k pays, nor for SGLang at one k, nor
        where a fit file's runs do not support it: ``refused``).
    force, require_config : bool
        Replace ``out``; with ``out``, raise where there is no config to write, leaving it
        as it was (``schedule --out``: never a success beside a stale file).
    min_gain : float
        Merge neighbouring ranges while a merge gives up less than this [fraction].
    max_num_seqs, graph_sizes, method, base_config
        As :func:`breakeven.planning.schedule.schedule_report` takes them.
    cost_curve, fit, fit_file, fit_surface, context, accept_len, k, alpha, per_position
        The cost model (a ``tokens,ms`` CSV or a fit file's surface, at ``context``
        [tokens]) and acceptance, as :class:`~breakeven.jobs.inputs.SweepInputs` says.
    accept_len_by_k, k_max, draft_ms, draft_step_ms, overhead_ms, topk, verify_tokens
        Acceptance by k, drafting and overhead [ms], a tree's shape: the same.
    max_batch, kv_tokens, spec_kv_tokens, draft_memory_gib, kv_bytes_per_token
        The largest batch swept [sequences], and the KV cache without and with speculation
        (:func:`breakeven.jobs.memory.kv_room_of`): k is 0 past the most sequences it fits.
    tokens_per_sequence, output_tokens : int, optional  [tokens]
        Each sequence's cached tokens (default ``context``); each request's decoded tokens,
        for the ranges in requests per second (:func:`_in_request_rates`).
    """
    inputs = SweepInputs.of(locals())
    if out is not None:
        _refuse_out(out, force, inputs, load)
    data = _schedule_data(
        inputs, load, out, engine, min_gain, max_num_seqs, graph_sizes, method, base_config
    )
    if output_tokens is not None:
        _in_request_rates(data, output_tokens)
    if out is not None:
        _write_config(out, data, force, require_config)
    return data


def _in_request_rates(data: Any, output_tokens: float) -> None:
    """``data`` (a :class:`~breakeven.planning.schedule.ScheduleReport`) given its schedule in
    requests per second: ``request_rates``, and each range's ``rate_from`` and ``rate_to``."""
    rates = data.schedule.in_request_rates(output_tokens)
    data["request_rates"] = rates["request_rates"]
    for row, bounds in zip(data["ranges"], rates["range_rates"], strict=True):
        row.update(bounds)


def _refuse_out(out: str, force: bool, inputs: SweepInputs, load: str | None) -> None:
    """``schedule_from_files``'s ``out``, refused before any work where it is one of the files
    it reads (the cost model, the server logs that give the cache's capacity, then ``load``),
    even with ``force``, or exists, unless ``force``."""
    from breakeven.iotools.atomic import refuse_overwrite  # lazy: start-up
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    read = [(n, getattr(inputs, n)) for n in ("cost_curve", "fit_file")]
    logs = [(n, getattr(inputs, n)) for n in ("kv_tokens", "spec_kv_tokens")]
    read += [(n, v) for n, v in logs if isinstance(v, str)]
    refuse_input_as_output(out, "out", [*read, ("load", load)])
    refuse_overwrite(out, force)


def _schedule_data(
    inputs: SweepInputs,
    load: str | None,
    out: str | None,
    engine: str,
    min_gain: float,
    max_num_seqs: int | None,
    graph_sizes: Sequence[int] | None,
    method: str | None,
    base_config: dict[str, Any] | None,
) -> Any:
    """:func:`breakeven.planning.schedule.schedule_report` of ``inputs``' sweep (checked
    against the fit file's runs where the cost model is its surface), with the notes of where
    its alpha came from and where its surface was moved to, first; ``out`` is where the
    config will be written (None: not written)."""
    from breakeven.planning.schedule import schedule_report  # lazy: start-up

    evidence, context = inputs.evidence()
    curve, sweep, note = inputs.priced()
    profile, source = read_load_profile(load, shape=True)
    data = schedule_report(
        curve,
        engine=engine,
        min_gain=min_gain,
        load=profile,
        load_source=source,
        graph_sizes=graph_sizes,
        method=method,
        base_config=base_config,
        max_num_seqs=max_num_seqs,
        config_path=out,
        evidence=evidence,
        context=context,
        **sweep,
    )
    if note:
        data["notes"].insert(0, note)
    moved = getattr(getattr(curve, "surface", None), "context_note", "")
    if moved:
        data["notes"].insert(0, moved)
    return data


def _write_config(out: str, data: dict[str, Any], force: bool, require_config: bool) -> None:
    """The schedule's engine config written to ``out`` as JSON, where it has one; where it has
    none, ``out`` is left as it was, and with ``require_config`` that is an error
    (:func:`_no_config`)."""
    from breakeven.iotools.outputs import write_document, write_json  # lazy: start-up

    if data["config"] is None:
        if require_config:
            raise _no_config(out, data)
        return
    if data.get("engine") == "trtllm":  # trtllm-serve reads YAML (--extra_llm_api_options)
        from breakeven.render.engine_configs import yaml_text  # lazy: start-up

        write_document(out, yaml_text(data["config"]), force=force)
        return
    write_json(out, data["config"], force=force)


def _no_config(out: str, data: dict[str, Any]) -> BreakevenError:
    """``schedule --out`` when the schedule has no config to write (no k pays, or SGLang at
    one k, which its flags give; or the fit's runs do not support the schedule, ``refused``):
    ``out``, existing or not, is left as it was."""
    if data.get("refused"):
        why = "not pasted: " + "; ".join(data["refused"])
    else:
        why = data["notes"][-1] if data.get("notes") else "the schedule has none"
    why = escape_braces(why)
    if data.get("flags"):
        why += "; without {0}, the flags to launch with are printed"
    shown = escape_braces(repr(out))
    kept = " is left as it was: it is not this schedule's config" if os.path.lexists(out) else ""
    return BreakevenError(
        "{0}: no config to write (" + why + "); " + (shown + kept if kept else "nothing written"),
        "out",
    )


def plan_from_files(
    *,
    engine: str = "vllm",
    load: str | None = None,
    min_gain: float = 0.02,
    graph_sizes: Sequence[int] | None = None,
    cost_curve: str | None = None,
    fit: str | None = None,
    fit_file: str | None = None,
    fit_surface: int | None = None,
    context: int | None = None,
    accept_len: float | None = None,
    k: int | None = None,
    alpha: float | None = None,
    per_position: Sequence[float] | None = None,
    accept_len_by_k: Sequence[float] | Mapping[int, float] | None = None,
    k_max: int = 16,
    draft_ms: float | None = None,
    draft_step_ms: float | None = None,
    overhead_ms: float | None = None,
    topk: int = 1,
    verify_tokens: int | None = None,
    max_batch: int | None = None,
) -> tuple[Any, Any]:
    """:func:`breakeven.planning.schedule.plan` (the speedup grid and the schedule over it), from a cost
    curve or fit file as :func:`schedule_from_files` takes them.

    Parameters
    ----------
    engine : str
        One of :data:`breakeven.render.engine_configs.SCHEDULE_ENGINES`: whose schedule.
    load : str, optional
        A load profile file (see :func:`read_load_profile`).
    min_gain : float
        Merge neighbouring ranges while a merge gives up less than this [fraction].
    graph_sizes : sequence of int, optional
        The server's CUDA-graph batch sizes [sequences], which SGLang rounds a batch up to.
    cost_curve, fit, fit_file, fit_surface, context
        The cost model: a ``tokens,ms`` CSV [ms against tokens per forward], fitted with
        ``fit`` or interpolated, or a fit file's forward surface (which one, and moved to
        ``context`` [tokens]); see :func:`breakeven.jobs.inputs.batch_cost`.
    accept_len, k, alpha, per_position, accept_len_by_k, k_max
        Acceptance at one k [tokens/cycle], or at several k up to ``k_max``: a per-token
        probability, per-position rates [fraction] or accept_len by k [tokens/cycle].
    draft_ms, draft_step_ms, overhead_ms : float, optional
        Drafting per cycle and per draft step, and other per-cycle cost [ms].
    topk, verify_tokens, max_batch : int, optional
        A tree draft's branches per step and tokens verified per sequence [tokens]; the
        largest batch swept [sequences].  (Each as
        :class:`~breakeven.jobs.inputs.SweepInputs` says.)
    """
    from breakeven.planning.schedule import plan  # lazy: start-up

    curve, sweep, _ = SweepInputs.of(locals()).priced()
    profile, source = read_load_profile(load)
    return plan(
        curve,
        engine=engine,
        min_gain=min_gain,
        load=profile,
        load_source=source,
        graph_sizes=graph_sizes,
        **sweep,
    )


__all__: Sequence[str] = (
    "plan_from_files",
    "read_load_profile",
    "schedule_from_files",
)
