"""Writing files atomically, never over an existing file without being told to, and
appending under a lock.

The no-overwrite rule is atomic: the finished file is linked into place with
``os.link``, which fails when the target exists, so of two writers racing for
one name exactly one wins and the other is told the file exists.  ``--force``
replaces the name: a symbolic link given as the output is replaced, never the file it
points to.

Appending writers (``ingest --out --append``) write through to the file a path names:
a symbolic link's target, a hard link's one file, kept with its mode and owner.  The rows
are staged first beside that file; a new file is then linked into place whole, and an
existing one gets them in place, with ``O_APPEND`` under an exclusive lock on the file
(``flock``), which ``bench --out`` takes too.  Two appenders write one header and every
row.  Before adding, an appender records the file's size in a journal
(``.breakeven.journal-DEV-INO`` beside it); an appender that fails cuts its rows off
again, and one that is killed leaves the journal, from which the next appender cuts the
half-added rows off before it adds its own.  So a file is absent or complete: the rows
of an append are all there or none.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from breakeven.core.errors import BreakevenError, escape_braces
from breakeven.iotools.paths import output_error


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

JOURNAL_PREFIX = ".breakeven.journal-"
"""An append's journal is ``.breakeven.journal-DEV-INO`` beside the file appended to: its size
before the append and after it.  It is never a temporary file (not removed as one)."""


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
        os.replace(tmp, path)  # a symbolic link at path is replaced, never its target
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


def write_text(
    path: str, write: Callable[[object], None], *, force: bool = False, name: str = "out"
) -> None:
    """Write a text file atomically: ``write`` gets the open file.  ``name`` is the argument
    ``path`` came from, named when it exists and ``force`` is not given."""
    with (
        atomic_path(path, force=force, name=name) as tmp,
        open(tmp, "w", encoding="utf-8", newline="") as f,
    ):
        write(f)
        f.flush()
        os.fsync(f.fileno())


class _ReadFailed(Exception):
    """An error raised by what produces the chunks (a reader), carried past the writer's
    handling of its own errors, then raised as it was."""


def _produced(chunks: Iterable[bytes]) -> Iterator[bytes]:
    it = iter(chunks)
    while True:
        try:
            chunk = next(it)
        except StopIteration:
            return
        except OSError as e:
            raise _ReadFailed(e) from e
        yield chunk


def write_bytes(path: str, *parts: Iterable[bytes], force: bool = False, name: str = "out") -> None:
    """Write the chunks of ``parts``, in order, to a file atomically, as they come.

    A write that fails (a full disk) is one :class:`~breakeven.BreakevenError` naming the
    argument ``name`` and ``path``, which is left as it was; what the chunks' producer raises
    passes as it is.
    """
    path = os.fspath(path)
    try:
        with atomic_path(path, force=force, name=name) as tmp, open(tmp, "wb") as f:
            for chunks in parts:
                for chunk in _produced(chunks):
                    f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    except _ReadFailed as e:
        raise e.args[0] from None
    except OSError as e:
        raise output_error(name, path, e) from None


@contextmanager
def file_lock(fd: int) -> Iterator[bool]:
    """An exclusive ``flock`` on the open file ``fd`` (the lock ``bench --out`` takes too);
    yields whether there is one (not on a system without ``flock``)."""
    try:
        import fcntl  # lazy: POSIX only
    except ImportError:  # not POSIX: no lock
        yield False
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield True
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _append_error(name: str, path: str, error: OSError) -> BreakevenError:
    shown = escape_braces(repr(path))
    why = escape_braces(error.strerror or str(error))
    return BreakevenError(
        "{0}: cannot add rows to " + shown + ": " + why + "; the file is as it was", name
    )


def _not_the_header(name: str, path: str) -> BreakevenError:
    shown = escape_braces(repr(path))
    return BreakevenError(
        "{0}: " + shown + " does not start with the header ingest "
        "writes; --append adds rows only to a measurements CSV "
        "of the same columns",
        name,
    )


def _first_line(read: Callable[[int, int], bytes], limit: int) -> bytes:
    return read(limit, 0).split(b"\n", 1)[0].rstrip(b"\r")


def _check_appendable(target: str, path: str, header: bytes, name: str) -> None:
    """Refuse, before any work, a file that is not a regular file or has another header."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return  # a new file
    except OSError as e:
        raise _append_error(name, path, e) from None
    if not stat.S_ISREG(st.st_mode):
        shown = escape_braces(repr(path))
        raise BreakevenError(
            "{0}: " + shown + " is not a regular file (a directory, a named pipe, a "
            "device); expected a measurements CSV to add rows to",
            name,
        )
    if st.st_size == 0:
        return
    try:
        with open(target, "rb") as f:
            first = _first_line(lambda n, _: f.read(n), len(header) + 2)
    except OSError as e:
        raise _append_error(name, path, e) from None
    if first != header.rstrip(b"\r\n"):
        raise _not_the_header(name, path)


def _journal(target: str, fd: int) -> str:
    st = os.fstat(fd)
    return os.path.join(os.path.dirname(target), f"{JOURNAL_PREFIX}{st.st_dev}-{st.st_ino}")


def _recover(journal: str, fd: int) -> None:
    """Under the file's lock: cut off the rows an appender killed while adding them left (its
    journal says the size before and after), and remove its journal."""
    try:
        with open(journal, "rb") as f:
            text = f.read(100)
    except FileNotFoundError:
        return
    sizes = text.split()
    if text.endswith(b"\n") and len(sizes) == 2 and all(s.isdigit() for s in sizes):
        before, after = int(sizes[0]), int(sizes[1])
        if before < os.fstat(fd).st_size < after:  # half added: cut it off
            os.ftruncate(fd, before)
            os.fsync(fd)
    os.unlink(journal)  # a journal cut short: its writer had added nothing yet


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_directory(path: str) -> None:
    try:
        fd = os.open(os.path.dirname(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # a file system that cannot sync a directory
        pass
    finally:
        os.close(fd)


def _add_in_place(target: str, staged: str, header: bytes, path: str, name: str) -> None:
    """Add the staged rows to the end of ``target``, under its lock: with their header if it
    is empty, else after its header is checked (and its last row ended, if it lacks its
    newline).  A failure cuts them off again; a kill leaves the journal :func:`_recover`
    reads."""
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        with file_lock(fd) as locked:
            journal = _journal(target, fd)
            if locked:
                _recover(journal, fd)
            before = os.fstat(fd).st_size
            skip, prefix = 0, b""
            if before:
                first = _first_line(lambda n, at: os.pread(fd, n, at), len(header) + 2)
                if first != header.rstrip(b"\r\n"):
                    raise _not_the_header(name, path)
                skip = len(header)
                if os.pread(fd, 1, before - 1) != b"\n":
                    prefix = b"\n"  # a file whose last row lacks its newline
            rows = os.path.getsize(staged) - skip
            if rows <= 0:
                return  # no rows, and the file has its header
            with open(journal, "wb") as f:
                f.write(f"{before} {before + len(prefix) + rows}\n".encode())
                f.flush()
                os.fsync(f.fileno())
            _sync_directory(journal)
            try:
                _write_all(fd, prefix)
                with open(staged, "rb") as f:
                    f.seek(skip)
                    while chunk := f.read(1 << 20):
                        _write_all(fd, chunk)
                os.fsync(fd)
            except BaseException:  # a full disk, an interrupt: the rows cut off again
                os.ftruncate(fd, before)
                os.fsync(fd)
                os.unlink(journal)
                raise
            os.unlink(journal)
    finally:
        os.close(fd)


def _linked(staged: str, target: str) -> bool:
    """Put the staged file (header and rows) at ``target`` whole if there is no file there;
    whether it was."""
    try:
        os.link(staged, target)  # fails if target exists, atomically
    except OSError:  # it exists, or a file system without hard links: added in place
        return False
    return True


def append_bytes(path: str, header: bytes, chunks: Iterable[bytes], name: str = "out") -> None:
    """Add ``chunks`` (CSV rows) to the CSV at ``path``, or create it with ``header``.

    Written through to the file ``path`` names (a symbolic link's target; a hard link's
    file, which every link then shows), keeping its mode and owner.  The rows are staged
    beside it first; then a new file is linked into place whole, or the rows are added in
    place under the file's lock (see the module's notes): concurrent appenders each add all
    their rows, the header is written once, and a crash or a full disk leaves the file as it
    was.  An existing file must be a regular file starting with ``header``, checked before
    any chunk is read.  A write that fails is one :class:`~breakeven.BreakevenError` naming
    the argument ``name`` and ``path``; what the chunks' producer raises passes as it is.
    """
    path = os.fspath(path)
    target = os.path.realpath(path)  # through a symbolic link: the link stays as it is
    _check_appendable(target, path, header, name)
    try:
        staged = _temporary(target)
    except OSError as e:
        raise _append_error(name, path, e) from None
    try:
        with open(staged, "wb") as f:
            f.write(header)
            for chunk in _produced(chunks):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        if not _linked(staged, target):
            _add_in_place(target, staged, header, path, name)
    except _ReadFailed as e:
        raise e.args[0] from None
    except OSError as e:
        raise _append_error(name, path, e) from None
    finally:
        if os.path.exists(staged):
            os.unlink(staged)
