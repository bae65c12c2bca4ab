"""Writing files atomically, and never over an existing file without being told to."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from breakeven.errors import BreakevenError


def refuse_overwrite(path: str, force: bool, name: str = "out") -> None:
    """Raise, naming the argument ``name``, when ``path`` exists and ``force`` is not given."""
    if os.path.exists(path) and not force:
        shown = repr(path).replace("{", "{{").replace("}", "}}")
        raise BreakevenError("{0}: " + shown + " exists; give --force to replace it", name)


@contextmanager
def atomic_path(path: str, *, force: bool = False, name: str = "out") -> Iterator[str]:
    """A temporary path beside ``path``, renamed onto it when the block ends without error.

    A crash or an exception leaves ``path`` as it was and removes the
    temporary file.  The result gets the permissions a new file would get.
    """
    path = os.fspath(path)
    refuse_overwrite(path, force, name)
    directory = os.path.dirname(os.path.abspath(path))
    suffix = os.path.splitext(path)[1]
    fd, tmp = tempfile.mkstemp(prefix=".breakeven-", suffix=suffix, dir=directory)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str, write: Callable[[object], None], *, force: bool = False) -> None:
    """Write a text file atomically: ``write`` gets the open file."""
    with atomic_path(path, force=force) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def write_bytes(path: str, *parts: Iterable[bytes], force: bool = False) -> None:
    """Write the chunks of ``parts``, in order, to a file atomically, as they come."""
    with atomic_path(path, force=force) as tmp, open(tmp, "wb") as f:
        for chunks in parts:
            for chunk in chunks:
                f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
