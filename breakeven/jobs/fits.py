"""A fit of a measurements file, as ``breakeven fit`` makes it: a Mixture-of-Experts model's
routing checked, and the fit written to a file only where it may be.

Every problem is a :class:`breakeven.core.errors.BreakevenError` naming the Python arguments;
the command line spells them as its flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from breakeven.core.errors import BreakevenError


def moe_routing(experts: int | None, top_k: int | None, shared: int = 0) -> Any:
    """A Mixture-of-Experts model's routing (:class:`breakeven.model.surface.MoE`), or None.

    Parameters
    ----------
    experts : int, optional
        Routed experts per layer; given with ``top_k`` or not at all.
    top_k : int, optional
        Routed experts per token, at most ``experts``.
    shared : int
        Shared experts, always active.
    """
    if (experts is None) != (top_k is None):
        raise BreakevenError(
            "{0} and {1} go together: the model's expert routing", "experts", "top_k"
        )
    if experts is None:
        return None
    if top_k > experts:
        raise BreakevenError(
            "{0}: got " + str(top_k) + ", expected at most {1} (" + str(experts) + ")",
            "top_k",
            "experts",
        )
    from breakeven.model.surface import MoE  # lazy: start-up

    return MoE(experts, top_k, shared)


def _shape(model_config: str | None, accelerator: str | None, weight_bits: int | None) -> Any:
    """The model's shape from ``model_config`` at ``weight_bits`` (None without a config),
    ``accelerator`` checked; ``weight_bits`` refused without a config (``accelerator`` is
    refused later where the runs' file has no ``model_config`` column either)."""
    if model_config is None:
        if weight_bits is not None:
            raise BreakevenError(
                "{0} needs {1}: the datasheet floor needs the model's shape as well",
                "weight_bits",
                "model_config",
            )
        return None  # a model_config column may still name each model's (fit_file)
    from breakeven.fitting.roofs import accelerator_named, with_weight_bits  # lazy: start-up
    from breakeven.iotools.modelconfig import read_model_config  # lazy: start-up

    shape = with_weight_bits(read_model_config(model_config), weight_bits)
    if accelerator is not None:
        accelerator_named(accelerator)
    return shape


def fit_from_file(
    runs: str,
    *,
    draft_cost: str = "per-token",
    predict_k: Sequence[int] = (),
    experts: int | None = None,
    top_k: int | None = None,
    shared: int = 0,
    out: str | None = None,
    force: bool = False,
    cycle_form: str = "auto",
    mix: Any = None,
    model_config: str | None = None,
    accelerator: str | None = None,
    weight_bits: int | None = None,
) -> Any:
    """:func:`breakeven.fitting.fit.fit_file`, written to ``out`` as JSON (what its ``to_dict()`` is).

    Parameters
    ----------
    runs : str
        A measurements CSV.
    draft_cost : str
        One of :data:`breakeven.fitting.fit.DRAFT_COSTS`.
    predict_k : sequence of int
        Also predict these k.
    cycle_form : str
        'auto' or one of :data:`breakeven.fitting.fit.CYCLE_FORMS`.
    experts, top_k, shared
        A Mixture-of-Experts model's routing (see :func:`moe_routing`).
    mix : str or mapping, optional
        A traffic mix (``code=0.6,chat=0.3``): its speedup at each k, and its best k.
    model_config : str, optional
        The model's Hugging Face ``config.json``: with the runs' accelerator (their
        ``hardware``, or ``accelerator``), the surface across batch sizes may take the
        roofline form (:func:`breakeven.fitting.fit.fit`).
    accelerator : str, optional
        The runs' accelerator and count (``8x H100``), instead of their ``hardware`` column.
    weight_bits : int, optional
        Bits per weight of the checkpoint run (4 for AWQ/GPTQ/NVFP4), where the config is its
        base model's.
    out : str, optional
        Also write the fit here (refused before any work if it exists, unless ``force``,
        or is ``runs``, even with ``force``).
    force : bool
        Replace ``out``.

    Returns
    -------
    FitResult
    """
    from breakeven.fitting.fit import fit_file  # lazy: start-up
    from breakeven.iotools.atomic import refuse_overwrite  # lazy: start-up
    from breakeven.iotools.outputs import write_json  # lazy: start-up
    from breakeven.iotools.paths import refuse_input_as_output  # lazy: start-up

    moe = moe_routing(experts, top_k, shared)
    shape = _shape(model_config, accelerator, weight_bits)
    if out is not None:
        refuse_input_as_output(out, "out", [("RUNS.csv", runs)])
        refuse_overwrite(out, force)
    result = fit_file(
        runs,
        draft_cost=draft_cost,
        predict_k=predict_k,
        moe=moe,
        cycle_form=cycle_form,
        mix=mix,
        model_config=shape,
        accelerator=accelerator,
    )
    if out is not None:
        write_json(out, result.to_dict(), force=force)
    return result


__all__: Sequence[str] = ("fit_from_file", "moe_routing")
