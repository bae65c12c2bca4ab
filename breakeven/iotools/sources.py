"""Opening what users pass to ingest: files, ``-`` (standard input), pipes, compressed logs.

Compression is told by magic bytes, never by the name: gzip (``1f 8b``), bzip2
(``BZh``) and xz (``fd 37 7a 58 5a 00``), decompressed by the standard library
as a stream.  Text is read in blocks of complete lines (:func:`iter_blocks`),
so memory stays bounded whatever the size; JSON and Prometheus documents are
read whole, up to :data:`MAX_DOCUMENT_BYTES`.

Text is UTF-8; a byte-order mark at its start (after decompression) says otherwise:
UTF-16 (little- or big-endian: what Windows PowerShell's ``>`` writes) is transcoded to
UTF-8 as it streams (:class:`_Transcoded`), and a UTF-8 mark is dropped.  Without a mark,
UTF-16 is not guessed: its NUL bytes stop the reading, with a problem that says so.

What a file holds is told from its content (:func:`detect`): JSON only if it
parses as one JSON document or as JSON Lines, Prometheus text by its engine
metric names, anything else is text, scanned for every line kind and table
breakeven knows.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import fcntl
import gzip
import io
import json
import lzma
import os
import stat
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from queue import Full, Queue
from typing import IO, Any, TypeVar

from breakeven.core.errors import UnreadableInput
from breakeven.iotools.metrics import PREFIXES

T = TypeVar("T")
U = TypeVar("U")

BLOCK_BYTES = 8 << 20  # text is read in blocks of about this many bytes
MAX_LINE_BYTES = 1 << 20  # a line longer than this that does not fit in a block is skipped
MAX_SKIPPED_BYTES = 1 << 30  # an over-long line past this: not a text log, reading stops
MAX_DOCUMENT_BYTES = 256 << 20  # JSON and Prometheus files are read whole
HEAD_BYTES = 1 << 16  # what detection looks at
STDIN = "-"
MAX_CELL_BYTES = 64 << 20
"""The longest CSV cell read (Python's csv module stops at 128 KiB by default)."""
FIFO_WRITER_WAIT_S = 2.0
"""How long a named pipe is waited on for a writer before it is refused: reading a pipe
that no process writes would otherwise wait for ever."""

TEXT, JSON_DOCUMENT, PROMETHEUS = "text", "json", "prometheus"

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
# What reading a damaged stream raises: gzip also lets zlib's own error through.
READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


@dataclass
class Problem:
    """A line or file breakeven could not read."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


class _Chain:
    """A binary stream that gives ``head`` first, then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self.head, self.stream = head, stream

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size < 0:
                out, self.head = self.head + self.stream.read(), b""
                return out
            out, self.head = self.head[:size], self.head[size:]
            if len(out) < size:
                out += self.stream.read(size - len(out))
            return out
        return self.stream.read(size)

    def read1(self, size: int) -> bytes:
        """At most ``size`` bytes, from one read of the stream below (a decompressor's
        ``read1`` returns what it has, where ``read`` would drop it at a fault)."""
        if self.head:
            out, self.head = self.head[:size], self.head[size:]
            return out
        return getattr(self.stream, "read1", self.stream.read)(size)

    def close(self) -> None:
        self.stream.close()


def _read_exactly(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes, reading again where a pipe gives less (stops at the end)."""
    parts, got = [], 0
    while got < size:
        chunk = stream.read(size - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


@dataclass
class Input:
    """An opened input: its name as shown, the decompressed stream, and its first bytes."""

    name: str
    stream: Any
    head: bytes
    compression: str | None
    encoding: str | None = None
    """What a byte-order mark said the text is ("utf-16-le", "utf-16-be", "utf-8-sig"); the
    stream and ``head`` are UTF-8 whatever it says (None: no mark, UTF-8 or not text)."""

    @property
    def threaded(self) -> bool:
        """Whether reading it costs work a thread may do ahead: decompressing, transcoding."""
        return self.compression is not None or self.encoding in _TRANSCODED

    def read_all(self, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
        """The whole (decompressed) content; raises UnreadableInput past ``limit`` bytes."""
        data = _read_exactly(self.stream, limit + 1)
        if len(data) > limit:
            raise UnreadableInput(
                f"is over {limit >> 20} MiB; a JSON or metrics file may hold at "
                f"most {limit >> 20} MiB"
            )
        return data

    def close(self) -> None:
        if self.stream is not None and self.name != STDIN:
            self.stream.close()


def open_input(path: str) -> Input:
    """Open ``path`` (or standard input for ``-``), decompressing by magic bytes.

    Raises UnreadableInput for a directory, an empty input or one that cannot be
    read or decompressed.
    """
    if path == STDIN:
        raw: Any = getattr(sys.stdin.buffer, "raw", sys.stdin.buffer)
    else:
        raw = open_file(path)
    try:
        first = _read_exactly(raw, 8)
        compression = next((name for magic, name in _MAGIC if first.startswith(magic)), None)
        stream: Any = _Chain(first, raw)
        if compression is not None:
            if compression == "gzip":
                stream = gzip.GzipFile(fileobj=stream, mode="rb")
            else:
                stream = (bz2.BZ2File if compression == "bzip2" else lzma.LZMAFile)(stream, "rb")
        head = _read_exactly(stream, HEAD_BYTES)
        stream, head, encoding = _decoded(stream, head)
    except READ_ERRORS as e:
        if path != STDIN:
            raw.close()
        raise UnreadableInput(f"cannot read it ({decompression_error(e)})") from None
    if not head:
        if path != STDIN:
            raw.close()
        raise UnreadableInput("is empty" + (f" ({compression}-compressed)" if compression else ""))
    return Input(path, _Chain(head, stream), head, compression, encoding)


def _decoded(stream: Any, head: bytes) -> tuple[Any, bytes, str | None]:
    """The stream (``head`` read from it already) as UTF-8 text and its new head, and the
    encoding its byte-order mark names: UTF-16 is transcoded as it is read, a UTF-8 mark
    dropped; without a mark, the stream and head as they are."""
    if head.startswith(UTF8_BOM):
        rest = head[len(UTF8_BOM) :]
        return stream, rest or _read_exactly(stream, HEAD_BYTES), "utf-8-sig"
    for bom, encoding in _UTF16_BOMS:
        if head.startswith(bom):
            text = _Transcoded(_Chain(head[len(bom) :], stream), encoding)
            return text, _read_exactly(text, HEAD_BYTES), encoding
    return stream, head, None


_TRANSCODED = {encoding for _, encoding in _UTF16_BOMS}


class _Transcoded:
    """A binary stream of text in ``encoding``, read as UTF-8, a piece at a time (bounded
    memory).  What does not decode (an odd last byte, a lone surrogate) reads as U+FFFD."""

    PIECE = 1 << 20  # bytes read from the stream below at a time

    def __init__(self, stream: Any, encoding: str) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self.buffer = b""
        self.ended = False

    def _more(self, size: int) -> bytes:
        """UTF-8 of the next ``size`` bytes of the stream below (b"" at its end)."""
        while not self.ended:
            raw = getattr(self.stream, "read1", self.stream.read)(size)
            text = self.decoder.decode(raw, final=not raw)
            self.ended = not raw
            if text:
                return text.encode("utf-8", "surrogatepass")
        return b""

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            parts = [self.buffer]
            while piece := self._more(self.PIECE):
                parts.append(piece)
            self.buffer = b""
            return b"".join(parts)
        while len(self.buffer) < size and not self.ended:
            self.buffer += self._more(max(self.PIECE, size - len(self.buffer)))
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def read1(self, size: int) -> bytes:
        """At most ``size`` bytes, from at most one read of the stream below."""
        if not self.buffer:
            self.buffer = self._more(min(size, self.PIECE))
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def close(self) -> None:
        self.stream.close()


def open_file(path: str) -> Any:
    """``path`` opened for reading, unbuffered (large reads go straight into their bytes; a
    buffered reader's are about ten times slower).

    A named pipe is read as a stream, from its writer to the writer's end; one that no
    process writes within :data:`FIFO_WRITER_WAIT_S` is refused (``open`` would wait for
    ever).  Raises UnreadableInput for a directory and for what cannot be opened.
    """
    try:
        info = os.stat(path)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        raise UnreadableInput(f"cannot read it ({getattr(e, 'strerror', None) or e})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UnreadableInput("is a directory; expected a file")
    try:
        if stat.S_ISFIFO(info.st_mode):
            return _open_fifo(path)
        return open(path, "rb", buffering=0)
    except UnreadableInput:
        raise
    except OSError as e:
        raise UnreadableInput(f"cannot read it ({e.strerror or e})") from None


def _open_fifo(path: str) -> Any:
    """A named pipe, opened without waiting, then read as a stream once a writer is there.

    Opened non-blocking, a pipe answers a read with EAGAIN while a writer holds it open with
    nothing written yet, with data once it has written, and with nothing (end of file)
    while no writer has it open: the last is waited out for FIFO_WRITER_WAIT_S.
    """

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    deadline = time.monotonic() + FIFO_WRITER_WAIT_S
    first = b""
    try:
        while True:
            try:
                first = os.read(fd, 1 << 16)
            except BlockingIOError:  # a writer, nothing written yet: a stream
                break
            if first:
                break
            if time.monotonic() >= deadline:
                raise UnreadableInput(
                    f"is a named pipe that no process wrote to within "
                    f"{FIFO_WRITER_WAIT_S:g} s; start its writer first, or pipe "
                    "into standard input (-)"
                )
            time.sleep(min(0.02, FIFO_WRITER_WAIT_S))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    stream = os.fdopen(fd, "rb", buffering=0)
    return _Chain(first, stream) if first else stream


def read_whole(path: str, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """All of ``path`` (not decompressed), a named pipe as :func:`open_file` reads it;
    UnreadableInput past ``limit`` bytes, for a directory and for what cannot be read."""
    stream = open_file(path)
    try:
        data = _read_exactly(stream, limit + 1)
    except OSError as e:
        raise UnreadableInput(f"cannot read it ({e.strerror or e})") from None
    finally:
        stream.close()
    if len(data) > limit:
        raise UnreadableInput(
            f"is over {limit >> 20} MiB, more than breakeven reads from a pipe "
            "or device; save it to a file"
        )
    return data


def rereadable(path: str) -> Any:
    """``path`` itself when it is a regular file, which readers may open as often as they
    like; else (a named pipe, a device) its whole content, read once, as a binary stream.

    Raises UnreadableInput for a directory and for what cannot be opened or read.
    """

    try:
        info = os.stat(path)
    except (OSError, ValueError) as e:
        raise UnreadableInput(f"cannot read it ({getattr(e, 'strerror', None) or e})") from None
    if stat.S_ISREG(info.st_mode):
        return path
    return io.BytesIO(read_whole(path))


def allow_long_cells() -> None:
    """Let Python's csv module read cells of up to :data:`MAX_CELL_BYTES` (by default it
    raises ``field larger than field limit`` past 128 KiB, and a 200 KiB ``env`` cell is
    still a measurement)."""

    if csv.field_size_limit() < MAX_CELL_BYTES:
        csv.field_size_limit(MAX_CELL_BYTES)


def decompression_error(e: BaseException) -> str:
    """What went wrong reading a compressed stream, in a few words."""
    if isinstance(e, EOFError):
        return "the compressed data ends early: a truncated file?"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


def detect(head: bytes) -> str:
    """:data:`JSON_DOCUMENT` (a candidate: the whole file must still parse),
    :data:`PROMETHEUS` or :data:`TEXT`, from the first bytes of a file."""
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped[:1] in ("{", "[") and _may_be_json(stripped):
        return JSON_DOCUMENT
    if looks_like_prometheus(text):
        return PROMETHEUS
    return TEXT


_CUT_SLACK = 16
"""How near the end of a file's head a JSON error still means the head was cut there."""


def _may_be_json(text: str) -> bool:
    """Whether ``text`` (the start of a file) can begin a JSON document or JSON Lines:
    its first value parses, or fails only where the head was cut off."""
    try:
        json.JSONDecoder().raw_decode(text)
    except RecursionError:  # nested past Python's limit: JSON, which its reader then refuses
        return True
    except json.JSONDecodeError as e:
        # Cut off by the head, not wrong: the error is at its end, or it is a string the head
        # ends inside (the error then points at the string's start: a vllm bench serve
        # --save-detailed file past 64 KiB, cut in one of its generated texts).
        # Near its end (the last characters of a cut may be half an escape or half a UTF-8
        # character, read as U+FFFD): the head was cut there.
        return e.pos >= len(text.rstrip()) - _CUT_SLACK or e.msg.startswith("Unterminated string")
    except ValueError:  # a number of more digits than int() converts: JSON its reader refuses
        return True
    return True


def looks_like_prometheus(text: str) -> bool:
    """Whether ``text`` holds engine metrics in the Prometheus text format."""
    for line in text.splitlines()[:200]:
        line = line.strip()
        for prefix in PREFIXES:
            if line.startswith((f"# TYPE {prefix}", f"# HELP {prefix}")):
                return True
            if line.startswith(prefix) and " " in line:
                return True
    return False


@dataclass
class Block:
    """Complete lines of a text input (each line ends with a newline)."""

    data: bytes
    first_line: int = 0
    """The number of its first line: given by its reader, which numbers blocks in order."""
    lines: int | None = None
    """Its number of lines, where its reader has counted them."""


AT_NEXT_LINE = -1
"""The line of a problem :func:`iter_blocks` yields: the line after the blocks before it."""


def iter_blocks(source: Input, block_bytes: int | None = None) -> Iterator[Block | Problem]:
    """Blocks of complete lines, and problems, in order.

    Lines are not numbered here (counting them is the reader's, in order): a
    problem's ``line`` is :data:`AT_NEXT_LINE`, the line after the blocks
    yielded before it.  A line longer than :data:`MAX_LINE_BYTES` that does not
    fit in a block is skipped with a problem, and an empty line takes its place;
    binary data (a NUL byte) yields the lines before it, then a problem, and ends
    the input.  A last line without a newline gets one.  Decompression is done
    in a thread ahead of the caller (zlib, bz2 and lzma release the GIL), so it
    overlaps with the parsing of the last block.
    """
    # Compressed input keeps a chunk in flight besides the block: smaller blocks, same memory.
    size = block_bytes or (max(1, BLOCK_BYTES // 2) if source.threaded else BLOCK_BYTES)
    carry, skipping, skipped = b"", False, 0
    too_long = f"line is longer than {MAX_LINE_BYTES >> 20} MiB; skipped"
    for data in _prefetched(source, size):
        if isinstance(data, Problem):
            yield data
            return
        nul = data.find(b"\0")  # every chunk is looked at: an endless line of NULs too
        if nul >= 0:
            if not skipping:
                yield from _binary(source.name, carry + data, len(carry) + nul)
            else:
                yield Problem(source.name, AT_NEXT_LINE, _BINARY)
            return
        if skipping:  # inside an over-long line: find its end
            cut = data.find(b"\n")
            if cut < 0:
                skipped += len(data)
                if skipped > MAX_SKIPPED_BYTES:  # /dev/urandom less its NULs, say
                    yield Problem(source.name, AT_NEXT_LINE, _NO_LINE_END)
                    return
                continue
            data, skipping, skipped = data[cut + 1 :], False, 0
            yield Block(b"\n")  # in the skipped line's place
        cut = data.rfind(b"\n") + 1  # the block ends after the chunk's last newline
        if cut:  # one copy at most: the carried start of a line, and the chunk up to the cut
            whole = cut == len(data)
            block = b"".join((carry, memoryview(data)[:cut])) if carry or not whole else data
            carry = b"" if whole else data[cut:]
            yield Block(block)
        else:
            carry += data
        if len(carry) > MAX_LINE_BYTES:
            yield Problem(source.name, AT_NEXT_LINE, too_long)
            carry, skipping = b"", True
    if skipping:
        yield Block(b"\n")
    elif carry:
        yield Block(carry + b"\n")


def _prefetched(source: Input, size: int) -> Iterator[bytes | Problem]:
    """Chunks of the stream; compressed ones read (and decompressed) one ahead in a thread."""
    if not source.threaded:  # plain reads are fast: no thread needed
        while True:
            chunk = _read_exactly(source.stream, size)
            if not chunk:
                return
            yield chunk
    yield from ahead(_decompressed(source, size), depth=1)


def _decompressed(source: Input, size: int) -> Iterator[bytes | Problem]:
    """Chunks of a compressed (or transcoded) stream; a fault ends it with a problem, after
    what it read."""
    parts: list[bytes] = []
    try:
        while True:
            parts, got = [], 0
            while got < size:  # in pieces: what came before a fault is kept
                piece = source.stream.read1(min(size - got, 1 << 20))
                if not piece:
                    break
                parts.append(piece)
                got += len(piece)
            chunk = b"".join(parts)
            parts = []
            if not chunk:
                return
            yield chunk
    except READ_ERRORS as e:
        if parts:
            yield b"".join(parts)
        yield Problem(
            source.name,
            None,
            f"cannot read on ({decompression_error(e)}); the lines before were read",
        )


def _binary(path: str, data: bytes, nul: int) -> Iterator[Block | Problem]:
    """The complete lines before the NUL byte at ``nul``, then the problem."""
    before = data.rfind(b"\n", 0, nul) + 1
    if before:
        yield Block(data[:before])
    hint = (
        " (UTF-16 without a byte-order mark? save the log as UTF-8, or as UTF-16 with its mark)"
        if _looks_utf16(data)
        else ""
    )
    yield Problem(path, AT_NEXT_LINE, _BINARY.replace(" (a NUL byte)", f" (a NUL byte){hint}"))


_BINARY = "binary data (a NUL byte); expected a text log; stopped reading"
_NO_LINE_END = (
    f"no line end in {MAX_SKIPPED_BYTES >> 20:,} MiB after an over-long line: not a text log (a "
    "device, or binary data?); stopped reading"
)


def _looks_utf16(data: bytes) -> bool:
    """Whether ``data`` starts like ASCII text in UTF-16 (every other byte NUL), either
    byte order."""
    head = data[:64]
    if len(head) < 8:
        return False
    even, odd = head[0::2], head[1::2]
    return (not even.strip(b"\0") and b"\0" not in odd) or (
        not odd.strip(b"\0") and b"\0" not in even
    )


def mapped(func: Callable[[T], U], items: Iterable[T], workers: int) -> Iterator[tuple[T, U]]:
    """``(item, func(item))`` for each item, in order, with ``func`` run on up to
    ``workers`` items at once in threads (for work that releases the GIL)."""

    if workers <= 1:
        for item in items:
            yield item, func(item)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="breakeven")
    pending: deque[Any] = deque()
    try:
        for item in items:
            pending.append((item, pool.submit(func, item)))
            if len(pending) > workers:  # one waits to start: a worker never idles
                item, future = pending.popleft()
                yield item, future.result()
        while pending:
            item, future = pending.popleft()
            yield item, future.result()
    finally:
        for _, future in pending:
            future.cancel()
        pool.shutdown(wait=False)


def ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """The items of ``items``, produced in a thread up to ``depth`` ahead of the caller.

    What the producer raises is raised here, in order; when the caller stops early
    (an error, Ctrl-C), the producer stops at its next item.  Work that releases the
    GIL (polars, reads, decompression) on both sides then runs at once.
    """
    queue: Queue[Any] = Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        queue.put((item, None), timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put((done, None))
        except BaseException as e:  # handed to the caller, raised there
            queue.put((done, e))

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        while True:
            item, error = queue.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()  # the producer sees it within 0.1 s of its next item, and ends
