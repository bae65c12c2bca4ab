"""The one exception hierarchy of breakeven.

Every error caused by a user's input is a :class:`BreakevenError`, a
``ValueError``.  Its message names the argument(s) at fault, the value given and
what was expected.  The message is a template over the argument names, so the
command line can say ``--verify-ms`` where the Python API says ``verify_ms`` and
otherwise print the very same text.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class BreakevenError(ValueError):
    """Bad input to breakeven: one line naming the argument, its value and what was expected.

    Parameters
    ----------
    template : str
        Message with ``{0}``, ``{1}``, ... where the argument names go.  Values
        must already be formatted into it.
    *names : str
        The Python argument names (``verify_ms``) the placeholders stand for.
    """

    def __init__(self, template: str, *names: str) -> None:
        self.template = template
        self.names = names
        super().__init__(self.render())

    def render(self, spell: Callable[[str], str] = str) -> str:
        """The message, with each argument name passed through ``spell``: ``{0}``, ``{1}``
        ... replaced, ``{{`` and ``}}`` as one brace, and any other brace kept as it stands
        (a value that reached the template unescaped prints as written, never raises)."""

        def part(m: re.Match[str]) -> str:
            if m[1] is None:
                return m[0][0]
            index = int(m[1])
            return spell(self.names[index]) if index < len(self.names) else m[0]

        return _FIELD.sub(part, self.template)


_FIELD = re.compile(r"\{\{|\}\}|\{(\d+)\}")
"""What a template replaces: an escaped brace, or an argument's place."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, ``docker stop``, ``systemctl stop``), taken as Ctrl-C is: what is
    under way stops where it is, what was written is kept.  A KeyboardInterrupt, so that every
    ``except KeyboardInterrupt`` that cleans up after Ctrl-C cleans up after it too; the command
    line exits 143 for it (130 for Ctrl-C)."""


class UnreadableInput(BreakevenError):
    """An input that cannot be opened or read: a directory, an empty or corrupt file, a pipe
    no process writes to.  Its message says why and names no file; the reader that knows
    which file and flag it was adds them."""

    def __init__(self, reason: str) -> None:
        super().__init__(escape_braces(reason))


def invalid_value(name: str, value: object, expected: str) -> BreakevenError:
    """The standard message: ``name: got VALUE, expected EXPECTED``."""
    shown = repr(value) if isinstance(value, str) else str(value)
    return BreakevenError(
        "{0}: got " + escape_braces(shorten(shown)) + ", expected " + escape_braces(expected), name
    )


SHOWN_CHARACTERS = 60
"""Values longer than this are shown cut, with their length, in messages."""


def shorten(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """``text``, or its start and end around ``...`` with its length when it is longer than
    ``limit`` (a 400-digit number, a 5000-character argument)."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2 - 5, 1)
    return f"{text[:keep]}...{text[-keep:]} ({len(text)} characters)"


def escape_braces(text: str) -> str:
    """``text`` as a literal part of a :class:`BreakevenError` template (its braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")
