"""Output paths checked before anything is computed or written: one line naming the flag.

Every writer (``ingest --out``, ``plot ... --out``, ``report --out``, ``bench --out``) calls
:func:`check_output_path` first, so a path that cannot be written is refused at once, in one
line naming the flag and the path, instead of failing after the work (or with a traceback).
"""

from __future__ import annotations

import os
import tempfile

from breakeven.errors import BreakevenError, escape_braces


def _refuse(name: str, path: str, why: str) -> BreakevenError:
    shown = escape_braces(repr(path))
    return BreakevenError("{0}: cannot write " + shown + ": " + escape_braces(why), name)


def _probe(directory: str) -> str | None:
    """Why a file cannot be created in ``directory`` (None: it can).  The probe is an unnamed
    temporary file (``O_TMPFILE`` where the system has it), so nothing is left behind."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_output_path(
    path: str | os.PathLike[str], name: str = "out", *, directory: bool = False
) -> str:
    """Raise a :class:`~breakeven.BreakevenError` naming argument ``name`` unless a file (or,
    with ``directory``, a directory that is created if missing) can be written at ``path``.

    Refused: an empty path; for a file, a path that is a directory or names none (``dir/``);
    for a directory, a path that is a file; a parent that does not exist (a directory is
    created with its missing parents, so its nearest existing ancestor counts) or is not a
    directory; a place where no file can be created (no permission, a read-only file system,
    ``/proc``).  An existing file is not refused here: whether to replace it is ``--force``'s.
    Returns ``path`` as a string.
    """
    path = os.fspath(path)
    why = _why_not(path, directory)
    if why is not None:
        raise _refuse(name, path, why)
    return path


def _why_not(path: str, directory: bool) -> str | None:
    if not path:
        return "the path is empty; expected a " + ("directory" if directory else "file name")
    if "\0" in path:
        return "a path cannot hold a NUL character"
    if directory:
        if os.path.exists(path) and not os.path.isdir(path):
            return "it is a file; expected a directory"
        parent = os.path.abspath(path)
        while not os.path.exists(parent):  # created with its parents: the nearest that exists
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            return f"{parent} is a file, not a directory"
    else:
        if os.path.isdir(path):
            return "it is a directory; expected a file name"
        if path.endswith(("/", os.sep)):
            return "it names a directory, not a file"
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.exists(parent):
            return f"the directory {parent} does not exist"
        if not os.path.isdir(parent):
            return f"{parent} is not a directory"
    why = _probe(parent)
    return None if why is None else f"no file can be created in {parent} ({why})"


def output_error(name: str, path: str, error: OSError) -> BreakevenError:
    """The one line for a write that failed after :func:`check_output_path` (a full disk, a
    directory removed meanwhile), naming argument ``name``."""
    return _refuse(name, path, error.strerror or str(error))
