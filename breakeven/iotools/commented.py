"""Comment lines in text inputs, and result tables pasted as comments (issue 44).

A line whose first non-blank character is ``#`` is a comment: the marking leaves it out and
the table readers see it blank, whichever block it falls in.  Fixtures carry their source in a
``#`` header, and scripts comment out what they do not run; neither is engine output.

One kind of comment is read: a ``vllm bench serve`` or SGLang ``bench_serving`` result table
kept in a shell script or a note with every line commented out (``# ====...``), as users
paste results beside the command that printed them.  A comment whose text, without its
``#``, is a table's title line (``==== Serving Benchmark Result ====``, or the
``---- Speculative Decoding ----`` section posted on its own) starts a commented table; the
comment lines after it, to its closing rule (``# ====...``) or the first line that is no
comment, are read as the table with their ``#`` taken off.
"""

from __future__ import annotations

import re

import polars as pl

_PREFIX = r"^[ \t]*#[ \t]*"
"""A comment's start: blanks, ``#``, blanks (what is taken off a commented table's lines)."""

_TITLES = (r"=+ *Serving Benchmark Result *=+", r"-+ *Speculative Decoding *-+")
"""Result-table title lines (:data:`breakeven.iotools.bench_results.TABLE_MARKER` and
``SPEC_SECTION``, with their rules)."""

COMMENTED_TITLE = _PREFIX + "(?:" + "|".join(_TITLES) + r")[ \t]*$"
"""A comment line that is a result table's title line, commented out."""

COMMENT = r"^\s*#"
"""A comment line."""

_COMMENT_LINE = re.compile(COMMENT)
_COMMENT_LINES = re.compile(r"(?m)^[ \t]*#.*$")
_TITLE_LINE = re.compile(COMMENTED_TITLE, re.MULTILINE)
_STRIP = re.compile(_PREFIX)


def kept(text: pl.Expr) -> pl.Expr:
    """Whether a line (``text``) is marked: it is no comment, or it is a commented table's
    title line."""
    return ~text.str.contains(COMMENT) | text.str.contains(COMMENTED_TITLE)


def tables_uncommented(text: str) -> str:
    """``text`` as the table readers see it: every comment line blank, except the lines of a
    commented result table, which lose their ``#`` (see the module).  Lines keep their
    numbers."""
    if _TITLE_LINE.search(text) is None:
        return _COMMENT_LINES.sub("", text)
    out = []
    in_table = False
    for line in text.split("\n"):
        if not _COMMENT_LINE.match(line):
            in_table = False
            out.append(line)
        elif in_table or _TITLE_LINE.match(line):
            body = _STRIP.sub("", line, count=1)
            # A title opens the table; its closing rule (all '=') ends it.
            in_table = not (in_table and body.strip() and set(body.strip()) == {"="})
            out.append(body)
        else:
            out.append("")
    return "\n".join(out)
