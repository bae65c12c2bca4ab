"""One module per engine: what its log lines mean, each line kind defined once.

Each module defines ``ENGINE``, a :class:`~breakeven.iotools.lines.Engine`:
its line kinds (marker, fields) and its ``sequence`` function, for what
depends on more than one line.  Adding an engine's log format is adding a
module here (found by :func:`engines`) and its fixtures in
``tests/data/engines/``.  A module without ``ENGINE`` holds part of an engine's
reading (``llama_runs``: llama.cpp's command-line programs).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any


def engines() -> list[Any]:
    """Every engine module's ``ENGINE``, in module-name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        engine = getattr(module, "ENGINE", None)
        if engine is not None:
            found.append(engine)
    return found
