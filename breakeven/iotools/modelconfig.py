"""A model's Hugging Face ``config.json`` read as a :class:`~breakeven.model.roofline.ModelShape`
(the roofline prior's model side).  Every problem is one line naming the file and what is wrong
in it."""

from __future__ import annotations

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
