"""A model's Hugging Face ``config.json`` read as a :class:`~breakeven.model.roofline.ModelShape`
(the roofline prior's model side).  Every problem is one line naming the file and what is wrong
in it."""

from __future__ import annotations

import os
from typing import Any

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.sources import read_whole
from breakeven.model.roofline import ModelShape, model_shape


def read_model_config(path: str, kv_bytes: float = 2.0, flag: str = "model_config") -> ModelShape:
    """The :class:`~breakeven.model.roofline.ModelShape` of the ``config.json`` at ``path``.

    Parameters
    ----------
    path : str
        A Hugging Face ``config.json`` (a multimodal one is read through its
        ``text_config``).
    kv_bytes : float
        Bytes per cached key or value element (2: 16-bit; 1: an fp8 KV cache).
    flag : str
        The argument the errors name (``fit --model-config``, ``batch --kv-bytes-per-token``).

    Raises
    ------
    breakeven.core.errors.BreakevenError
        One line naming ``flag`` and the file: unreadable, not JSON, nested too deep, not an
        object, or a shape :func:`~breakeven.model.roofline.model_shape` refuses (no
        ``hidden_size`` or ``num_hidden_layers``, a count that is not a positive integer,
        experts with no ``num_experts_per_tok``...).
    """
    shown = escape_braces(repr(str(path)))
    try:
        text = read_whole(path)
    except (UnreadableInput, OSError) as e:
        raise BreakevenError(
            "{0}: cannot read " + shown + ": " + escape_braces(str(e)), flag
        ) from None
    try:
        config = loads_bounded(text, what="its text")
    except ValueError as e:
        raise BreakevenError(
            "{0}: " + shown + " is not JSON (" + escape_braces(str(e)) + "); "
            "expected a Hugging Face config.json",
            flag,
        ) from None
    if not isinstance(config, dict):
        raise BreakevenError(
            "{0}: "
            + shown
            + f" holds a JSON {type(config).__name__}; expected the object of a config.json",
            flag,
        )
    try:
        return model_shape(config, kv_bytes=kv_bytes)
    except BreakevenError as e:
        raise BreakevenError("{0}: " + shown + ": " + escape_braces(e.render()), flag) from None


MODEL_CONFIG_COLUMN = "model_config"
"""A measurements CSV's column naming each row's model ``config.json``."""


def model_configs_of(data: Any, path: str, kv_bytes: float = 2.0) -> dict[str, ModelShape]:
    """Each model's shape from the ``model_config`` column of ``data`` (the rows of the
    measurements CSV at ``path``, with their ``line`` column): a config path relative to the
    CSV's folder, or absolute; rows with the column empty name none.  Empty where the column
    is absent or empty.

    Raises
    ------
    breakeven.core.errors.BreakevenError
        Naming the CSV, the line and the column: a config that cannot be read as
        :func:`read_model_config` reads one, or a model given two different configs."""
    if MODEL_CONFIG_COLUMN not in data.columns:
        return {}
    folder = os.path.dirname(os.path.abspath(path)) if isinstance(path, str) else os.getcwd()
    named: dict[str, tuple[str, int]] = {}
    shapes: dict[str, ModelShape] = {}
    models = data["model"] if "model" in data.columns else [""] * len(data)
    lines = data["line"] if "line" in data.columns else range(2, len(data) + 2)
    for model, given, line in zip(models, data[MODEL_CONFIG_COLUMN], lines, strict=True):
        if not isinstance(given, str) or not given.strip():
            continue
        model, given = model if isinstance(model, str) else "", given.strip()
        where = f"{path}, line {int(line)}, column {MODEL_CONFIG_COLUMN}"
        if model in named:
            if named[model][0] != given:
                raise BreakevenError(
                    escape_braces(
                        f"{where}: {given!r} for model {model!r}, which line "
                        f"{named[model][1]} gives {named[model][0]!r}; expected one config.json "
                        "per model"
                    )
                )
            continue
        named[model] = (given, int(line))
        full = given if os.path.isabs(given) else os.path.join(folder, given)
        try:
            shapes[model] = read_model_config(full, kv_bytes, flag=MODEL_CONFIG_COLUMN)
        except BreakevenError as e:
            said = e.render().removeprefix(MODEL_CONFIG_COLUMN + ": ")
            raise BreakevenError(escape_braces(f"{where}: {said}")) from None
    return shapes
