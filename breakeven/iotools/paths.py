"""Output paths checked before anything is computed or written: one line naming the flag.

Every writer (``ingest --out``, ``plot ... --out``, ``report --out``, ``bench --out``) calls
:func:`check_output_path` first, so a path that cannot be written is refused at once, in one
line naming the flag and the path, instead of failing after the work (or with a traceback).
Every command with inputs calls :func:`refuse_input_as_output` too: an output that is one of
its inputs (the same file, through links) is refused, even with ``--force``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from breakeven.core.errors import BreakevenError, escape_braces


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


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file: the same device and inode where both exist (through
    symbolic links, and across hard links), else the same path once links are resolved."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one does not exist (yet), or a NUL in a path
        pass
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _is_argument_name(what: str) -> bool:
    """Whether an input is named by a Python argument name (``fit_file``: a placeholder,
    spelled as its flag), not an argument's metavar (``RUNS.csv``, ``FILE``: shown as it is)."""
    return what.isidentifier() and not what.isupper()


def refuse_input_as_output(
    output: str | os.PathLike[str] | None,
    name: str,
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    *,
    force: str | None = "force",
) -> None:
    """Raise a :class:`~breakeven.BreakevenError` naming argument ``name`` when the file
    ``output`` is one of ``inputs`` (:func:`same_file`): an output never replaces, or adds
    to, a file its command reads, even with ``force``.

    ``inputs`` are ``(argument, path)`` pairs; the argument is a Python argument name
    (``fit_file``, shown as its flag) or, for a positional argument, its metavar in
    capitals (``RUNS.csv``, ``FILE``), shown as it is.  A path that is None, empty or ``-``
    (standard input) is skipped, and so is ``output`` None.  ``force`` is the argument that
    replaces an output, said not to help (None: the command has none).  Called before any
    work.
    """
    if output is None:
        return
    output = os.fspath(output)
    for what, path in inputs:
        if path is None:
            continue
        path = os.fspath(path)
        if path in ("", "-") or not same_file(output, path):
            continue
        names = [name]
        if _is_argument_name(what):
            names.append(what)
            input_text = "{1}"
        else:
            input_text = escape_braces(what)
        if path != output:
            input_text += " (" + escape_braces(repr(path)) + ")"
        even = ""
        if force is not None:
            even = ", even with {" + str(len(names)) + "}"
            names.append(force)
        raise BreakevenError(
            "{0}: "
            + escape_braces(repr(output))
            + " is the input "
            + input_text
            + "; an output never replaces or adds to a file the command reads"
            + even
            + ": give another path",
            *names,
        )


@contextmanager
def written_as(name: str, path: str | os.PathLike[str], writer_name: str = "out") -> Iterator[None]:
    """Errors of a writer called for argument ``name``: a
    :class:`~breakeven.BreakevenError` that names ``writer_name`` (the writer's own argument:
    ``out`` for :mod:`breakeven.render.report`'s, ``path`` for
    :func:`breakeven.iotools.csvfile.write_measurements`) names ``name`` instead, and an
    ``OSError`` (a full disk) is :func:`output_error` for ``name`` and ``path``."""
    try:
        yield
    except BreakevenError as e:
        if writer_name not in e.names:
            raise
        names = [name if n == writer_name else n for n in e.names]
        raise BreakevenError(e.template, *names) from None
    except OSError as e:
        raise output_error(name, os.fspath(path), e) from None
