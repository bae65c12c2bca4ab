"""Writing files atomically, never over an existing file without being told to, and
appending under a lock.

The no-overwrite rule is atomic: the finished file is linked into place with
``os.link``, which fails when the target exists, so of two writers racing for
one name exactly one wins and the other is told the file exists.  Appending
writers (``ingest --out --append``) take an exclusive lock on the file's
directory, then copy, append and rename: a reader never sees half a row, and
two appenders write one header and every row.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from breakeven.errors import BreakevenError, escape_braces


def _exists_error(path: str, name: str) -> BreakevenError:
    shown = escape_braces(repr(path))
    return BreakevenError("{0}: " + shown + " exists; give --force to replace it", name)


def refuse_overwrite(path: str, force: bool, name: str = "out") -> None:
    """Raise, naming the argument ``name``, when ``path`` exists and ``force`` is not given."""
    if os.path.exists(path) and not force:
        raise _exists_error(path, name)


TEMP_PREFIX = ".breakeven-"
"""Temporary files are ``.breakeven-HOST-PID-RANDOM.tmp``, beside the file they become: a
later writer in the same directory removes those whose process (on this host) is gone."""


def _host() -> str:

    return "".join(c if c.isalnum() else "_" for c in socket.gethostname())[:40] or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(directory: str) -> list[str]:
    """Remove the temporary files in ``directory`` left by breakeven processes of this host
    that are gone (killed while writing); returns their names."""
    prefix = f"{TEMP_PREFIX}{_host()}-"
    removed = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed.append(name)
        except OSError:  # another writer removed it first, or it is not ours to remove
            continue
    return removed


def _temporary(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temporaries(directory)
    suffix = os.path.splitext(path)[1]
    fd, tmp = tempfile.mkstemp(
        prefix=f"{TEMP_PREFIX}{_host()}-{os.getpid()}-", suffix=".tmp" + suffix, dir=directory
    )
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # the permissions a new file would get
    return tmp


def _fsync(path: str) -> None:
    """Flush a written file to disk (before it is renamed into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(tmp: str, path: str, force: bool, name: str) -> None:
    """Put ``tmp`` at ``path``: replacing it with ``force``, else only if it does not exist."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if path exists, atomically
    except FileExistsError:
        raise _exists_error(path, name) from None
    except OSError:  # a file system without hard links: the check and the rename are apart
        refuse_overwrite(path, False, name)
        os.replace(tmp, path)
        return
    os.unlink(tmp)


@contextmanager
def atomic_path(path: str, *, force: bool = False, name: str = "out") -> Iterator[str]:
    """A temporary path beside ``path``, put in its place when the block ends without error.

    A crash or an exception leaves ``path`` as it was and removes the
    temporary file.  Without ``force`` an existing ``path`` is never replaced,
    even by a writer that raced this one.
    """
    path = os.fspath(path)
    refuse_overwrite(path, force, name)
    tmp = _temporary(path)
    try:
        yield tmp
        _fsync(tmp)  # whatever wrote it (savefig, say): on disk before it takes the name
        _publish(tmp, path, force, name)
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


@contextmanager
def directory_lock(path: str) -> Iterator[None]:
    """An exclusive lock on the directory of ``path``, shared by every breakeven writer."""
    try:
        import fcntl  # lazy: POSIX only
    except ImportError:  # not POSIX: no lock
        yield
        return
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append_bytes(path: str, header: bytes, chunks: Iterable[bytes], name: str = "out") -> None:
    """Add ``chunks`` (CSV rows) to the CSV at ``path``, or create it with ``header``.

    Under :func:`directory_lock`, the existing file is copied, the rows are
    added to the copy, and the copy replaces it: a crash leaves the old file,
    concurrent appenders each add all their rows, and the header is written
    once.  An existing file must start with ``header``.
    """
    path = os.fspath(path)
    with directory_lock(path):
        exists = os.path.exists(path)
        if exists:
            with open(path, "rb") as f:
                first = f.readline()
            if first.rstrip(b"\r\n") != header.rstrip(b"\r\n"):
                shown = escape_braces(repr(path))
                raise BreakevenError(
                    "{0}: " + shown + " does not start with the header ingest "
                    "writes; --append adds rows only to a measurements CSV "
                    "of the same columns",
                    name,
                )
        tmp = _temporary(path)
        try:
            if exists:
                shutil.copyfile(path, tmp)
            with open(tmp, "ab") as f:
                if not exists:
                    f.write(header)
                elif f.tell() and _last_byte(tmp) != b"\n":
                    f.write(b"\n")  # a file whose last row lacks its newline
                for chunk in chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _last_byte(path: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)
