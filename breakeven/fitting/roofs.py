"""The datasheet floor under each forward of the runs (:class:`breakeven.model.roof.Roof`), from
the model's ``config.json`` and the accelerator the runs name: what makes ``fit``'s surface
across batch sizes a roofline (:mod:`breakeven.model.surface`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from breakeven.core.choices import WEIGHT_BITS
from breakeven.core.errors import BreakevenError, escape_braces, shorten
from breakeven.model.roof import Roof
from breakeven.model.roofline import ACCELERATORS, accelerator_of, roofline_prior


def accelerator_named(name: str) -> Any:
    """The accelerator and device count ``name`` gives (``H100``, ``8x MI300X``, as
    :func:`breakeven.model.roofline.accelerator_of` reads runs' hardware); one line naming
    ``accelerator`` and the known names where it is none of them."""
    found = accelerator_of(name)
    if found is None:
        known = ", ".join(sorted(ACCELERATORS))
        raise BreakevenError(
            "{0}: got "
            + escape_braces(shorten(repr(name)))
            + ", expected an accelerator breakeven knows the datasheet of ("
            + escape_braces(known)
            + "), with a count such as 8x",
            "accelerator",
        )
    return found


def roof_source(
    shape: Any, accelerator: str | None = None, label: str = "the model's config"
) -> Callable[[str, str, float], Roof | None]:
    """What :func:`breakeven.fitting.surfaces.surfaces` asks for each surface: the roof of
    ``shape`` (a :class:`breakeven.model.roofline.ModelShape`) on the runs' ``hardware`` as
    :func:`~breakeven.model.roofline.accelerator_of` reads it, or on ``accelerator`` where
    given (for every surface); None where the hardware is not one breakeven knows.
    ``context_tokens`` [tokens] (NaN: not given) sizes each sequence's KV cache."""
    fixed = accelerator_named(accelerator) if accelerator is not None else None

    def roof_for(model: str, hardware: str, context_tokens: float) -> Roof | None:
        found = fixed or accelerator_of(hardware)
        if found is None:
            return None
        chip, devices = found
        context = context_tokens if math.isfinite(context_tokens) and context_tokens > 0 else 0
        prior = roofline_prior(shape, chip, devices, context)
        peak = (
            f"{prior.peak_tflops:.0f} TFLOPs {prior.peak_dtype}"
            if prior.peak_tflops
            else "no peak (memory only)"
        )
        where = f"{devices}x {chip.name}" if devices > 1 else chip.name
        link = link_gbs(chip.name, hardware) if devices > 1 else math.inf
        return Roof(
            prior.weights_ms,
            prior.expert_ms,
            prior.kv_ms_per_sequence,
            prior.compute_ms_per_token or 0.0,
            source=f"{label} on {where}: {prior.bandwidth_gbs:.0f} GB/s, {peak}"
            + (f", {link:.0f} GB/s links" if devices > 1 else ""),
            link_ms=allreduce_bytes(shape, devices) / (link * 1e9) * 1e3 if devices > 1 else 0.0,
        )

    return roof_for


def roofs_by_model(
    shapes: Mapping[str, Any], accelerator: str | None = None
) -> Callable[[str, str, float], Roof | None]:
    """:func:`roof_source` with each model's own shape (``shapes``: model -> its
    :class:`~breakeven.model.roofline.ModelShape`, as a runs file's ``model_config`` column
    gives them); None for a model without one."""
    sources = {
        model: roof_source(shape, accelerator, label=f"{model}'s config")
        for model, shape in shapes.items()
    }

    def roof_for(model: str, hardware: str, context_tokens: float) -> Roof | None:
        source = sources.get(model)
        return source(model, hardware, context_tokens) if source is not None else None

    return roof_for


PCIE_GBS = 25.0
"""A PCIe Gen4 x16 link's achieved bandwidth [GB/s] (32 raw): what tensor parallelism's
all-reduces move over between cards without NVLink."""
FAST_LINK_GBS = 150.0
"""A conservative achieved all-reduce bandwidth per device over NVLink or Infinity Fabric
(SXM and OAM modules) [GB/s]."""
_PCIE_CARDS = ("pcie", "a30", "a10", "l4", "l40", "t4", "rtx", "radeon", "geforce")


def link_gbs(accelerator: str, hardware: str) -> float:
    """The nominal link bandwidth between the devices of a tensor-parallel group [GB/s]:
    :data:`PCIE_GBS` for PCIe cards (or hardware that says PCIe), else :data:`FAST_LINK_GBS`."""
    text = f"{accelerator} {hardware}".lower()
    pcie = any(word in text for word in _PCIE_CARDS) and "nvlink" not in hardware.lower()
    return PCIE_GBS if pcie else FAST_LINK_GBS


def allreduce_bytes(shape: Any, devices: int) -> float:
    """What one token's tensor-parallel all-reduces move per device [bytes]: two a layer
    (after attention and after the MLP) of ``hidden_size`` 16-bit activations, a ring moving
    2 (N - 1) / N of them."""
    return 2 * shape.num_layers * shape.hidden_size * 2.0 * 2 * (devices - 1) / devices


def with_weight_bits(shape: Any, bits: int | None) -> Any:
    """``shape`` with its transformer weights at ``bits`` bits (a quantized checkpoint of a
    base config; the LM head stays as it is); ``shape`` itself where ``bits`` is None."""
    if bits is None:
        return shape
    return replace(shape, weight_bytes=bits / 8)


__all__: Sequence[str] = (
    "FAST_LINK_GBS",
    "PCIE_GBS",
    "WEIGHT_BITS",
    "accelerator_named",
    "allreduce_bytes",
    "link_gbs",
    "roof_source",
    "roofs_by_model",
    "with_weight_bits",
)
