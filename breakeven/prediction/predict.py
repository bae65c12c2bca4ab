"""``predict``: every quantity a set of measurements determines, as one result object."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from breakeven import model, render
from breakeven.core.errors import BreakevenError, escape_braces, invalid_value
from breakeven.core.quantities import QUANTITIES, plain_json
from breakeven.measurements.plausibility import TypedFlag, impossible_speedup, typed_times
from breakeven.model import _xp
from breakeven.model.acceptance import accept_len_from_alpha, accept_len_from_per_position
from breakeven.model.acceptance import alpha_from_accept_len as _alpha_from_accept_len

ALPHA_TABLE_KS = tuple(range(1, 9))


@dataclass(frozen=True)
class Prediction:
    # The docstring is written below from breakeven.core.quantities, one entry per field.
    baseline_tok_s: float | None = None
    step_ms: float | None = None
    verify_ms: float | None = None
    draft_ms: float | None = None
    overhead_ms: float | None = None
    cycle_ms: float | None = None
    cost_ratio: float | None = None
    accept_len: float | None = None
    alpha: float | None = None
    k: int | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    spec_tok_s: float | None = None
    target_speedup: float = 1.0
    breakeven_accept_len: float | None = None
    breakeven_alpha: float | None = None
    max_cycle_ms: float | None = None
    max_verify_ms: float | None = None
    max_draft_ms: float | None = None
    max_baseline_tok_s: float | None = None
    breakeven_alpha_by_k: tuple[tuple[int, float], ...] | None = None
    flags: tuple[TypedFlag, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The determined quantities, for ``--json``.

        A key is present only when the inputs determine it.  NaN (a solve no
        value satisfies) becomes ``None``, which JSON prints as ``null``; an
        infinity (an overflow of absurd inputs) is kept, for the caller to refuse.
        ``flags``, a list of ``{code, message}``, is present only when an input is flagged.
        """
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name == "flags" and not value):
                continue
            if f.name == "breakeven_alpha_by_k":
                value = [{"k": k, "breakeven_alpha": a} for k, a in value]
            if f.name == "flags":
                value = [flag._asdict() for flag in value]
            out[f.name] = plain_json(value, keep_infinite=True)
        return out

    def to_frame(self) -> Any:
        """The determined quantities as a pandas DataFrame: one row each, with its unit."""
        import pandas as pd  # lazy: start-up

        rows = [
            (key, value, QUANTITIES[key].unit)
            for key, value in self.to_dict().items()
            if key not in ("breakeven_alpha_by_k", "flags")
        ]
        return pd.DataFrame(rows, columns=["quantity", "value", "unit"]).set_index("quantity")

    def report(self) -> str:
        """The table ``breakeven predict`` prints: label, value, unit and JSON key per line,
        then the verdict."""
        return render.prediction_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.prediction_html(self.to_dict())

    def plot(self, ax: Any = None) -> Any:
        """The speedup surface over (accept_len, cycle/step) with its break-even line, this
        prediction marked where it has an accept_len and a cycle; returns the axes."""
        from breakeven.render import plot  # lazy: matplotlib

        return plot.prediction_surface(self.to_dict(), ax)


Prediction.__doc__ = (
    "What a set of speculative-decoding measurements implies.\n\n"
    "Every field is None unless the inputs determine it; a float NaN means a\n"
    "break-even solve that no value satisfies.\n\nAttributes\n----------\n"
    + "".join(
        f"{f.name} : [{QUANTITIES[f.name].unit or '-'}]\n    {QUANTITIES[f.name].definition}.\n"
        for f in fields(Prediction)
        if f.name in QUANTITIES
    )
    + "flags : tuple of breakeven.measurements.plausibility.TypedFlag\n    Inputs that are possible but "
    "suspicious (a cycle shorter than a plain step, two times a hundred times apart), each a "
    "code and a sentence; impossible ones are refused.\n"
)


def _beyond(names: tuple[str, ...], shown: str, what: str) -> BreakevenError:
    """Inputs whose derived cost a double cannot hold (1e308 over 0.5), named with their
    values as given: ``got inf`` of a flag given 1e308 would mislead."""
    return BreakevenError(
        _listed([f"{{{i}}}" for i in range(len(names))])
        + ": got "
        + escape_braces(shown)
        + ", "
        + what
        + " beyond what a double holds; expected values of a realistic size",
        *names,
    )


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _finite_or_raise(value: float, names: tuple[str, ...], shown: str, what: str) -> float:
    if not math.isfinite(value) or value == 0:
        raise _beyond(names, shown, what)
    return value


def _conflict(first: str, second: str) -> BreakevenError:
    return BreakevenError("{0} and {1} cannot be given together: give one of them", first, second)


def _check_conflicts(**inputs: Any) -> None:
    """Raise for two inputs that describe the same thing."""
    exclusive = [
        ("baseline_tok_s", ("step_ms",)),
        ("cycle_ms", ("verify_ms", "draft_ms", "overhead_ms")),
        ("cost_ratio", ("cycle_ms", "verify_ms", "draft_ms", "overhead_ms")),
        ("accept_len", ("alpha",)),
        ("per_position", ("accept_len", "alpha")),
    ]
    for first, others in exclusive:
        if inputs[first] is None:
            continue
        for other in others:
            if inputs[other] is not None:
                raise _conflict(first, other)


class _Costs(NamedTuple):
    """The cycle's costs as resolved, each None unless given or derived."""

    verify_ms: float | None  # [ms]
    draft_ms: float | None  # [ms]
    overhead_ms: float | None  # [ms]
    cycle_ms: float | None  # [ms]
    cost_ratio: float | None  # [-], Leviathan's c


def _check_scalars(given: dict[str, Any]) -> None:
    """Raise for an input that is not one number: predict takes one case, not arrays."""
    for name, value in given.items():
        if _xp.namespace(value) is not _xp.SCALAR:
            raise invalid_value(
                name,
                type(value).__name__,
                "a number (predict takes one case; the functions of breakeven.model take arrays)",
            )


def _baseline(
    baseline_tok_s: float | None, step_ms: float | None
) -> tuple[float | None, float | None]:
    """The baseline as a rate [tok/s] and a step [ms], either one given; (None, None) if neither.

    Raises
    ------
    BreakevenError
        For an invalid value, or one whose reciprocal a double cannot hold.
    """
    if baseline_tok_s is not None:
        step_ms = model.step_ms_from_baseline(baseline_tok_s)
        baseline_tok_s = float(baseline_tok_s)
        _finite_or_raise(
            step_ms, ("baseline_tok_s",), repr(baseline_tok_s), "a step of 1000 / it ms"
        )
    elif step_ms is not None:
        baseline_tok_s = model.baseline_tok_s_from_step(step_ms)
        step_ms = float(step_ms)
        _finite_or_raise(baseline_tok_s, ("step_ms",), repr(step_ms), "a rate of 1000 / it tok/s")
    return baseline_tok_s, step_ms


def _acceptance(
    accept_len: float | None,
    alpha: float | None,
    k: int | None,
    per_position: Sequence[float] | None,
) -> tuple[float | None, float | None, int | None]:
    """Acceptance as ``(accept_len [tokens/cycle], alpha [-], k [tokens])``, each None unless
    given or derived: ``per_position`` sets k and accept_len, ``alpha`` with k gives accept_len,
    accept_len with k gives alpha.

    Raises
    ------
    BreakevenError
        For an invalid value, a k that disagrees with ``per_position``, or alpha without k.
    """
    if per_position is not None:
        accept_len = accept_len_from_per_position(per_position)
        n = len(list(per_position))
        if k is not None and k != n:
            raise BreakevenError(
                "{0}: got " + f"{k}, but {{1}} holds {n} rates: give k = {n} or leave it out",
                "k",
                "per_position",
            )
        k = n
    if alpha is not None:
        if k is None:
            raise BreakevenError("{0} needs {1}: tau(alpha, k) depends on k", "alpha", "k")
        accept_len = accept_len_from_alpha(alpha, k)
        alpha = float(alpha)
    elif accept_len is not None:
        accept_len = float(_xp.accept_len(_xp.SCALAR, "accept_len", accept_len, k))
        if k is not None:
            alpha = _alpha_from_accept_len(accept_len, k)
    return accept_len, alpha, k


def _leviathan_costs(
    cost_ratio: float, k: int | None, step_ms: float | None, step_name: str
) -> tuple[_Costs, float]:
    """Costs in Leviathan's form, a cycle of ``k * c + 1`` target steps, and cycle/step [-].

    The costs in ms are known only with a step (``step_ms`` [ms], given as ``step_name``).
    """
    if k is None:
        raise BreakevenError("{0} needs {1}: the cycle costs k * c + 1 steps", "cost_ratio", "k")
    cost_ratio = float(_xp.nonnegative(_xp.SCALAR, "cost_ratio", cost_ratio, "target steps"))
    cycle_over_step = _finite_or_raise(
        k * cost_ratio + 1,
        ("cost_ratio", "k"),
        f"{cost_ratio!r} and {k}",
        "a cycle of k * c + 1 steps",
    )
    if step_ms is None:
        return _Costs(None, None, None, None, cost_ratio), cycle_over_step
    cycle_ms = _finite_or_raise(
        cycle_over_step * step_ms,
        ("cost_ratio", step_name),
        f"{cost_ratio!r} and a step of {step_ms!r} ms",
        "a cycle of (k * c + 1) * step_ms ms",
    )
    return _Costs(step_ms, k * cost_ratio * step_ms, 0.0, cycle_ms, cost_ratio), cycle_over_step


def _measured_costs(verify_ms: float, draft_ms: float | None, overhead_ms: float | None) -> _Costs:
    """The cycle [ms] as verify + draft + overhead [ms]; draft and overhead default to 0."""
    draft_ms = 0.0 if draft_ms is None else draft_ms
    overhead_ms = 0.0 if overhead_ms is None else overhead_ms
    cycle_ms = model.cycle_ms(verify_ms, draft_ms, overhead_ms)
    verify_ms, draft_ms, overhead_ms = float(verify_ms), float(draft_ms), float(overhead_ms)
    _finite_or_raise(
        cycle_ms,
        ("verify_ms", "draft_ms", "overhead_ms"),
        f"{verify_ms!r} + {draft_ms!r} + {overhead_ms!r} ms",
        "a cycle",
    )
    return _Costs(verify_ms, draft_ms, overhead_ms, cycle_ms, None)


def _costs(
    given: dict[str, Any], k: int | None, step_ms: float | None
) -> tuple[_Costs, float | None]:
    """The cycle's costs from the ``given`` inputs, and cycle/step [-] (None unless both are
    known), with k [tokens] and the baseline step [ms] already resolved.

    ``cost_ratio`` (Leviathan's form) knows cycle/step without a step; otherwise it is
    ``cycle_ms / step_ms``, the cycle measured or summed from verify, draft and overhead [ms].
    """
    step_name = "step_ms" if given["baseline_tok_s"] is None else "baseline_tok_s"
    cycle_over_step = None
    if given["cost_ratio"] is not None:
        costs, cycle_over_step = _leviathan_costs(given["cost_ratio"], k, step_ms, step_name)
    elif given["verify_ms"] is not None:
        costs = _measured_costs(given["verify_ms"], given["draft_ms"], given["overhead_ms"])
    else:
        cycle_ms = given["cycle_ms"]
        if cycle_ms is not None:
            cycle_ms = float(_xp.positive(_xp.SCALAR, "cycle_ms", cycle_ms, "ms"))
        costs = _Costs(None, given["draft_ms"], given["overhead_ms"], cycle_ms, None)
    for name, value in (("draft_ms", costs.draft_ms), ("overhead_ms", costs.overhead_ms)):
        if value is not None:
            _xp.nonnegative(_xp.SCALAR, name, value, "ms")
    if cycle_over_step is None and costs.cycle_ms is not None and step_ms is not None:
        cycle_name = "cycle_ms" if given["cycle_ms"] is not None else "verify_ms"
        cycle_over_step = _finite_or_raise(
            costs.cycle_ms / step_ms,
            (cycle_name, step_name),
            f"a cycle of {costs.cycle_ms!r} ms over a step of {step_ms!r} ms",
            "a ratio",
        )
    return costs, cycle_over_step


def _breakevens(
    cycle_over_step: float,
    k: int | None,
    cost_ratio: float | None,
    target: float,
    alpha_table_ks: Iterable[int],
) -> dict[str, Any]:
    """The break-even solves for a cycle of ``cycle_over_step`` steps [-] and a target speedup
    [x]: accept_len [tokens/cycle], alpha at k, and alpha for each k of ``alpha_table_ks``."""
    out: dict[str, Any] = {}
    out["breakeven_accept_len"] = model.breakeven_accept_len(cycle_over_step, 1.0, target)
    if k is not None:
        out["breakeven_alpha"] = model.breakeven_alpha(out["breakeven_accept_len"], k)
    out["breakeven_alpha_by_k"] = tuple(
        (kk, model.breakeven_alpha(model.breakeven_accept_len(ratio, 1.0, target), kk))
        for kk in alpha_table_ks
        for ratio in [cycle_over_step if cost_ratio is None else kk * cost_ratio + 1]
    )
    return out


def _at_accept_len(
    accept_len: float,
    costs: _Costs,
    cycle_over_step: float | None,
    step_ms: float | None,
    cycle_measured: bool,
    target: float,
) -> dict[str, Any]:
    """What an accept_len [tokens/cycle] gives with the known costs [ms]: the speedup [x], the
    speculative rate [tok/s], and the ceilings on the baseline and on each cost for ``target``."""
    out: dict[str, Any] = {}
    if cycle_over_step is not None:
        out["speedup"] = model.speedup(accept_len, 1.0, cycle_over_step)
    if costs.cycle_ms is not None:
        out["spec_tok_s"] = model.spec_tok_s(accept_len, costs.cycle_ms)
        out["max_baseline_tok_s"] = model.max_baseline_tok_s(accept_len, costs.cycle_ms, target)
    if step_ms is not None:
        out["max_cycle_ms"] = model.max_cycle_ms(accept_len, step_ms, target)
        if not cycle_measured:
            out["max_verify_ms"] = model.max_verify_ms(
                accept_len, step_ms, costs.draft_ms or 0.0, costs.overhead_ms or 0.0, target
            )
        if costs.verify_ms is not None:
            out["max_draft_ms"] = model.max_draft_ms(
                accept_len, step_ms, costs.verify_ms, costs.overhead_ms or 0.0, target
            )
    return out


def _nothing_to_compute() -> BreakevenError:
    return BreakevenError(
        "nothing to compute: give a baseline ({0} or {1}), the cycle cost ({2} or {3}) "
        "and the acceptance ({4}, or {5} with {6})",
        "baseline_tok_s",
        "step_ms",
        "verify_ms",
        "cycle_ms",
        "accept_len",
        "alpha",
        "k",
    )


def predict(
    *,
    baseline_tok_s: float | None = None,
    step_ms: float | None = None,
    verify_ms: float | None = None,
    draft_ms: float | None = None,
    overhead_ms: float | None = None,
    cycle_ms: float | None = None,
    accept_len: float | None = None,
    alpha: float | None = None,
    k: int | None = None,
    per_position: Sequence[float] | None = None,
    cost_ratio: float | None = None,
    target_speedup: float = 1.0,
    alpha_table_ks: Iterable[int] = ALPHA_TABLE_KS,
) -> Prediction:
    """Every quantity the given measurements determine; missing inputs are simply left out.

    Parameters
    ----------
    baseline_tok_s : float, optional  [tok/s]
        Per-sequence decode rate without speculation.  Or give ``step_ms``.
    step_ms : float, optional  [ms]
        Baseline decode step, ``1000 / baseline_tok_s``.
    verify_ms, draft_ms, overhead_ms : float, optional  [ms]
        Cycle costs; ``draft_ms`` is all drafting in a cycle.  Draft and
        overhead default to 0 when ``verify_ms`` is given.
    cycle_ms : float, optional  [ms]
        A measured cycle time, instead of the three costs.
    accept_len : float, optional  [tokens/cycle]
        Mean tokens per cycle, bonus included.  Or ``alpha`` with ``k``, or
        ``per_position``.
    alpha : float, optional
        Per-token acceptance probability; needs ``k``.
    k : int, optional
        Draft tokens per cycle.
    per_position : sequence of float, optional
        Per-position acceptance rates; sets ``k`` and ``accept_len``.
    cost_ratio : float, optional
        Leviathan's ``c`` (draft step / target step, verify = one target step);
        needs ``k``, excludes the measured costs.
    target_speedup : float
        The speedup each break-even solve aims for.
    alpha_table_ks : iterable of int
        The k values of ``breakeven_alpha_by_k``.

    Raises
    ------
    BreakevenError
        For an invalid or conflicting input, or when nothing can be computed.
    """
    given = dict(
        baseline_tok_s=baseline_tok_s,
        step_ms=step_ms,
        verify_ms=verify_ms,
        draft_ms=draft_ms,
        overhead_ms=overhead_ms,
        cycle_ms=cycle_ms,
        cost_ratio=cost_ratio,
        accept_len=accept_len,
        alpha=alpha,
        k=k,
        target_speedup=target_speedup,
    )
    _check_scalars(given)
    _check_conflicts(**given, per_position=per_position)
    target = _xp.positive(_xp.SCALAR, "target_speedup", target_speedup, "x")
    if k is not None:
        k = int(_xp.draft_tokens(_xp.SCALAR, "k", k))
    return _prediction(given, target, k, per_position, alpha_table_ks)


def _prediction(
    given: dict[str, Any],
    target: float,
    k: int | None,
    per_position: Sequence[float] | None,
    alpha_table_ks: Iterable[int],
) -> Prediction:
    """:func:`predict`'s result from its ``given`` inputs, once they are checked: the target
    speedup [x] and k [tokens] already resolved.

    Raises
    ------
    BreakevenError
        For an invalid input, or when nothing can be computed.
    """
    baseline_tok_s, step_ms = _baseline(given["baseline_tok_s"], given["step_ms"])
    accept_len, alpha, k = _acceptance(given["accept_len"], given["alpha"], k, per_position)
    costs, cycle_over_step = _costs(given, k, step_ms)
    out: dict[str, Any] = {}
    if cycle_over_step is not None:
        out |= _breakevens(cycle_over_step, k, costs.cost_ratio, target, alpha_table_ks)
    if accept_len is not None:
        cycle_measured = given["cycle_ms"] is not None
        out |= _at_accept_len(accept_len, costs, cycle_over_step, step_ms, cycle_measured, target)
    # Something is derived when a baseline converts, costs add up, or acceptance converts.
    if not (out or baseline_tok_s is not None or costs.verify_ms is not None or alpha is not None):
        raise _nothing_to_compute()
    flags = _plausible(given, baseline_tok_s, step_ms, costs, k, accept_len, out.get("speedup"))
    return Prediction(
        baseline_tok_s=baseline_tok_s,
        step_ms=step_ms,
        **costs._asdict(),
        accept_len=accept_len,
        alpha=alpha,
        k=k,
        target_speedup=target,
        **out,
        flags=tuple(flags),
    )


def _plausible(
    given: dict[str, Any],
    baseline_tok_s: float | None,
    step_ms: float | None,
    costs: _Costs,
    k: int | None,
    accept_len: float | None,
    speedup: float | None,
) -> list[TypedFlag]:
    """The flags of the typed costs against the plain step [ms]
    (:func:`breakeven.measurements.plausibility.typed_times`).

    Raises
    ------
    BreakevenError
        For a cycle or verify forward typed in seconds, or a speedup above k + 1 [x].
    """
    if step_ms is None or given["cost_ratio"] is not None:
        return []  # Leviathan's cycle, k * c + 1 steps, is never shorter than a step
    step_name = "step_ms" if given["baseline_tok_s"] is None else "baseline_tok_s"
    cycle_name = "cycle_ms" if given["cycle_ms"] is not None else "verify_ms"
    typed = [
        (cycle_name, costs.cycle_ms if cycle_name == "cycle_ms" else costs.verify_ms),
        ("draft_ms", given["draft_ms"]),
        ("overhead_ms", given["overhead_ms"]),
    ]
    flags = typed_times(step_ms, step_name, typed, baseline_tok_s)
    if k is not None and accept_len is not None and speedup is not None and costs.cycle_ms:
        refusal = impossible_speedup(
            speedup, k, accept_len, costs.cycle_ms, step_ms, (cycle_name, step_name)
        )
        if refusal is not None:
            raise refusal
    return flags
