"""JSON from a source that may be hostile (a server's answer, a file someone sent), parsed
with its nesting depth checked first, without recursion.

``json.loads`` recurses once per ``[`` or ``{``: ``[[[[...`` a hundred thousand deep
exhausts Python's recursion limit and ends in a ``RecursionError``.  :func:`loads_bounded`
measures the depth before parsing (strings skipped, brackets counted, all of it at C speed)
and refuses a deeper text in one line::

    data = loads_bounded(reply_bytes, max_depth=16, what="the answer")

Every problem is an :class:`breakeven.core.errors.UnreadableInput` whose message starts with
``what``: nested too deep, not UTF-8, not JSON (with its line and column), a number with
more digits than Python converts.  The caller adds the file or flag it came from.  A number
beyond what a double holds (``1e400``, an integer of 400 digits) is read as an infinity of its
sign, which every reader refuses as not finite, as it refuses any other number out of range.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any

from breakeven.core.errors import UnreadableInput

MAX_DEPTH = 64
"""The default deepest nesting read: far deeper than any answer breakeven reads, far below
the recursion limit."""

_STRING = re.compile(rb'"[^"]*"')
_DELETE = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting_depth(text: str | bytes | bytearray) -> int:
    """The deepest nesting of arrays and objects in the JSON ``text``, counted without
    recursion: strings are skipped, every ``[``/``{`` opens a level and every ``]``/``}``
    closes one.  Brackets that do not match are counted as they come, so the depth is never
    less than the one ``json.loads`` would recurse to.

    The text is reduced to its quotes and brackets first (escaped backslashes and quotes
    removed, then every other byte), then its strings are dropped, all at C speed: a 50 MB
    answer takes a small fraction of the time ``json.loads`` does."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DELETE)
    # Two quotes in a row: an empty string, or one string's end and the next one's start with
    # no bracket between; either way no bracket is lost by dropping them (most strings here).
    brackets = _STRING.sub(b"", data.replace(b'""', b""))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


class NestingDepth:
    """:func:`nesting_depth` of a text given a piece at a time (lines, say, each with its line
    end), in constant memory: after the pieces of a text, :attr:`depth` is the whole text's.

    As there, the text is reduced to its quotes and brackets (escapes dropped), quotes that
    follow each other cancel in pairs, and brackets between a quote and the next do not count
    (a string); brackets after a last quote that none closes do.  A piece must not end inside
    an escape (a line end never does); a quote that ends a piece waits for the next, which
    may cancel it."""

    def __init__(self) -> None:
        self.level = 0
        """Brackets opened less closed, outside strings."""
        self.deepest: int | None = None
        self.open = False
        """Whether the text so far ends inside a string."""
        self.open_at = 0
        """The level where the open string began."""
        self.inside = 0
        self.inside_deepest: int | None = None
        """The brackets since the open string began, counted as if none closes it."""
        self.held = b""
        """A quote that ended the last piece, until a bracket comes."""

    def feed(self, piece: bytes) -> None:
        """Count the next piece of the text."""
        reduced = piece.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DELETE)
        reduced = (self.held + reduced).replace(b'""', b"")
        self.held = b'"' if reduced.endswith(b'"') else b""
        segments = reduced[: len(reduced) - len(self.held)].split(b'"')
        first = 0
        if self.open:
            self.inside, self.inside_deepest = _steps(segments[0], self.inside, self.inside_deepest)
            if len(segments) == 1:
                return
            self.open, first = False, 1  # closed: a string, whose brackets do not count
        outside = b"".join(segments[first::2])
        self.level, self.deepest = _steps(outside, self.level, self.deepest)
        if (len(segments) - 1 - first) % 2:  # the piece ends inside a string
            # The quote is a step of 0 where none closes it.
            self.open, self.open_at = True, self.level
            self.inside, self.inside_deepest = _steps(segments[-1], 0, 0)

    @property
    def depth(self) -> int:
        """The deepest nesting of the text so far (:func:`nesting_depth`'s figure)."""
        found = [] if self.deepest is None else [self.deepest]
        opened = self.open != bool(self.held)  # a held quote closes a string, or opens one
        if opened and self.open and self.inside_deepest is not None:
            found.append(self.open_at + self.inside_deepest)
        elif opened:
            found.append(self.level)
        return max(found, default=0)


def _steps(brackets: bytes, level: int, deepest: int | None) -> tuple[int, int | None]:
    """``level`` after ``brackets``, and the deepest level reached (``deepest`` before)."""
    if not brackets:
        return level, deepest
    levels = list(accumulate(map(_STEP.__getitem__, brackets), initial=level))
    top = max(levels[1:])
    return levels[-1], top if deepest is None else max(deepest, top)


# A JSON integer of this many digits may be beyond a double (about 1.8e308, 309 digits); a text
# without such a run of digits is parsed with Python's own int, at C speed.
_LONG_DIGITS = 309
_DIGITS = bytes(ord("0") if 48 <= b <= 57 else ord(" ") for b in range(256))
_CHUNK = 1 << 20
_TOO_LONG = re.compile(r"\d{4301}")


def _has_long_number(data: bytes) -> bool:
    """Whether ``data`` holds a run of :data:`_LONG_DIGITS` digits, looked for a MiB at a time
    (a translated copy of one chunk, at C speed)."""
    run = b"0" * _LONG_DIGITS
    step = _CHUNK - _LONG_DIGITS
    return any(
        run in data[i : i + _CHUNK].translate(_DIGITS)
        for i in range(0, max(len(data) - _LONG_DIGITS, 0) + 1, step)
    )


def _double_or_infinity(text: str) -> int | float:
    """A JSON integer as Python reads it, or, beyond what a double holds, an infinity of its
    sign (as ``1e400`` reads): every reader refuses a number that is not finite."""
    number = int(text)  # past 4,300 digits a ValueError: "a number too long to read"
    return number if -sys.float_info.max <= number <= sys.float_info.max else float(text)


def _parse(text: str, data: bytes) -> Any:
    """``json.loads(text)`` (``data``: its bytes), a number beyond a double an infinity."""
    huge = _double_or_infinity if len(data) >= _LONG_DIGITS and _has_long_number(data) else None
    return json.loads(text, parse_int=huge)


def parse_json(text: str) -> Any:
    """``json.loads(text)`` for a text whose depth the caller has checked
    (:func:`nesting_depth`), with numbers read as :func:`loads_bounded` reads them: one beyond
    what a double holds (``1e400``, an integer of 400 digits) is an infinity of its sign.
    Raises ``json.JSONDecodeError``, with the place of the fault: an integer of more digits
    than Python converts is one (``holds a number too long to read``)."""
    try:
        return _parse(text, text.encode("utf-8", "surrogatepass"))
    except json.JSONDecodeError:
        raise
    except ValueError:  # int()'s limit of 4,300 digits: where the first such number starts
        found = _TOO_LONG.search(text)
        raise json.JSONDecodeError(
            "holds a number too long to read", text, found.start() if found else 0
        ) from None


def loads_bounded(
    text: str | bytes | bytearray, max_depth: int = MAX_DEPTH, what: str = "the JSON"
) -> Any:
    """``json.loads(text)`` when ``text`` is nested at most ``max_depth`` levels deep.

    Parameters
    ----------
    text : str or bytes
        The JSON text; bytes are read as UTF-8.
    max_depth : int
        The deepest nesting of arrays and objects accepted (``{"a": [1]}`` is 2 deep).
    what : str
        What the text is, as a message starts: ``"the answer"``.

    Raises
    ------
    breakeven.core.errors.UnreadableInput
        One line starting with ``what``: nested deeper than ``max_depth``, not UTF-8, not
        JSON, or a number with more digits than Python converts.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    depth = nesting_depth(data)
    if depth > max_depth:
        raise UnreadableInput(
            f"{what} is JSON nested {depth:,} levels deep, more than the {max_depth} read"
        )
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UnreadableInput(
                f"{what} is not UTF-8 text (byte {e.start} is {text[e.start : e.start + 1]!r})"
            ) from None
    try:
        return _parse(text, data)
    except json.JSONDecodeError as e:
        raise UnreadableInput(
            f"{what} is not JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except RecursionError:  # not reached after the depth check; kept as a floor
        raise UnreadableInput(f"{what} is JSON nested too deep to read") from None
    except ValueError as e:  # an integer of more digits than int() converts
        reason = str(e).split(":")[0][:120]
        raise UnreadableInput(f"{what} holds a number too long to read ({reason})") from None


__all__ = ["MAX_DEPTH", "NestingDepth", "loads_bounded", "nesting_depth", "parse_json"]
