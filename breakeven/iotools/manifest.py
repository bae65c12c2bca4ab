"""A sweep's manifest, ``DIR/manifest.json``: the plan and each launch's outcome, as plain data.

``breakeven sweep`` rewrites it atomically after every launch (:func:`write_manifest`), resumes
from it and answers from it (:func:`read_manifest`).  Its body is
``{"plan": SweepPlan.to_dict(), "sweep": ID, "done": [LaunchOutcome as a dict, ...]}``, where
``ID`` marks the sweep's processes (:data:`breakeven.core.processes.MARK_VARIABLE`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from breakeven.core.errors import UnreadableInput
from breakeven.iotools.atomic import write_text
from breakeven.iotools.jsonsafe import loads_bounded

SWEEP_ID = re.compile(r"[0-9a-f]{0,32}")
"""A sweep's id, as the manifest holds it ("" in a manifest written before ids were)."""
MANIFEST = "manifest.json"
"""The manifest's name in a sweep's directory."""


def manifest_path(directory: str) -> str:
    """``DIR/manifest.json``."""
    return os.path.join(directory, MANIFEST)


def write_manifest(
    directory: str, plan: dict[str, Any], done: Sequence[dict[str, Any]], sweep_id: str = ""
) -> None:
    """Write (replace, atomically) the manifest of the sweep in ``directory``.

    Parameters
    ----------
    directory : str
        The sweep's directory.
    plan : dict
        The plan, as ``SweepPlan.to_dict()``.
    done : sequence of dict
        Each finished launch's outcome, in launch order.
    sweep_id : str
        The sweep's id, which its launches' processes carry.
    """
    body = {"plan": plan, "sweep": sweep_id, "done": list(done)}
    write_text(manifest_path(directory), lambda f: json.dump(body, f, indent=2), force=True)


def read_manifest(directory: str) -> dict[str, Any]:
    """The manifest of the sweep in ``directory``: a dict with ``plan`` and ``done``.

    Raises
    ------
    OSError
        The manifest cannot be opened (a directory that is not a sweep's).
    breakeven.core.errors.UnreadableInput
        It is not JSON, is nested too deep, or is not an object with a ``plan``.
    """
    path = manifest_path(directory)
    with open(path, "rb") as f:
        body = loads_bounded(f.read(), what=path)
    if not isinstance(body, dict) or not isinstance(body.get("plan"), dict):
        raise UnreadableInput(f"{path} is not a sweep's manifest (no plan in it)")
    if not isinstance(body.get("done", []), list):
        raise UnreadableInput(f"{path} is not a sweep's manifest (its done is not a list)")
    if not (isinstance(body.get("sweep", ""), str) and SWEEP_ID.fullmatch(body.get("sweep", ""))):
        raise UnreadableInput(
            f"{path} is not a sweep's manifest (its sweep id is not 1 to 32 hexadecimal digits)"
        )
    return body


__all__ = ["MANIFEST", "manifest_path", "read_manifest", "write_manifest"]
