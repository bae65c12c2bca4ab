"""Files that commands write with ``--out``: JSON (a fit, an engine's schedule config) and
TensorRT-LLM's YAML."""

from __future__ import annotations

import json
from typing import Any

from breakeven.iotools.atomic import write_text
from breakeven.iotools.paths import output_error


def write_json(path: str, data: Any, *, force: bool = False, name: str = "out") -> None:
    """Write ``data`` as indented, strict JSON (no NaN or Infinity) to ``path``, atomically.

    Parameters
    ----------
    path : str
        Where to write; an existing file is replaced only with ``force``.
    data : object
        Plain data: dicts, lists, strings, finite numbers, None.
    force : bool
        Replace ``path`` if it exists.
    name : str
        The argument ``path`` came from, named in errors (it exists without ``force``, a full
        disk, a directory removed).
    """
    write_document(path, json.dumps(data, indent=2, allow_nan=False) + "\n", force=force, name=name)


def write_document(path: str, text: str, *, force: bool = False, name: str = "out") -> None:
    """Write ``text`` to ``path``, atomically (an engine's YAML; :func:`write_json`'s text);
    the arguments as :func:`write_json` takes them."""
    try:
        write_text(path, lambda f: f.write(text), force=force, name=name)
    except OSError as e:
        raise output_error(name, path, e) from None


__all__ = ["write_document", "write_json"]
