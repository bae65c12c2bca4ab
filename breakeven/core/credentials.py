"""Secrets given to ``bench``: an API key, a user and password in ``--url``.

They are used for the requests and never shown: every message, row and
echoed server text passes through a :class:`Redactor` before anything cuts it
(the redactor also masks a secret's start, from :data:`PREFIX_CHARACTERS` characters on:
text cut inside a secret), and a URL is shown with its password as ``***``
(``http://user:***@host:8000``), whatever characters the password holds
(:func:`split_url`).  A password is never put in a request URL at all: it goes in an
``Authorization: Basic`` header, whose encoded form is redacted too (a proxy may echo
request headers).
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from breakeven.core.errors import BreakevenError, escape_braces

MASK = "***"
MIN_REDACTED = 3
"""Secrets shorter than this are not searched for in free text (they would mask ordinary
letters); in a URL they are masked wherever they stand."""
PREFIX_CHARACTERS = 8
"""The start of a secret this long or longer is masked wherever it stands, as the secret is:
text cut inside a secret (by a server that shortens what it echoes, or by a message shortened
before it was redacted) keeps fewer than this many of its characters."""

PIECE_SCAN_CHARACTERS = 1 << 16
"""Text up to this long is also searched for any piece of a secret of
:data:`PREFIX_CHARACTERS` or more, wherever in the secret it comes from: a secret split by
characters a server or a cut inserted (``sk-abc...\\n...xyz``) keeps such pieces after the split.
Longer text gets the linear search for the secret's start only; what is shown of it is cut,
then redacted again (``bench``'s server text), and so searched whole."""

# Where a URL's password may start in free text: scheme://user: .  The scheme starts where a
# run of scheme characters starts (the lookbehind): tried at every position of a long word, it
# would rescan the word each time, quadratic in its length.  The user may hold an @ (an e-mail
# address), never a / ? # or white space.
_URL_USER = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^/:?#\s]*:")
_SPACE = re.compile(r"\s")
# A host (a name, an IPv4 address, or an IPv6 address in brackets) and its port, ending the
# authority: the end of the URL or its path, query or fragment follows.
_HOST_PORT = re.compile(r"(?:\[[^\]\s/?#@\[]*\]|[^\s/?#@:\[\]]+)(?::[0-9]*)?(?=[/?#]|\Z)")


class AmbiguousURL(ValueError):
    """A URL whose user and password cannot be told from its host and path (never holds
    either)."""


def hide_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it shown as ``***``.

    In free text a URL ends at white space: its password runs from the ``:`` after the user
    to the last ``@`` before that, so a password holding ``/``, ``?``, ``#``, ``@`` or ``:``
    is masked whole (a path or query holding an ``@`` is masked with it: more is hidden,
    never less).  Linear in the length of ``text``.
    """
    if "://" not in text:
        return text
    out: list[str] = []
    pos = 0
    while (m := _URL_USER.search(text, pos)) is not None:
        start = m.end()
        space = _SPACE.search(text, start)
        end = space.start() if space is not None else len(text)
        at = text.rfind("@", start, end)
        if at < 0:  # no password in any URL of the rest of this word
            out.append(text[pos:end])
        else:  # a URL later in the word, after its last @, has no password either
            out += (text[pos:start], MASK, text[at:end])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _userinfo_end(rest: str) -> int | None:
    """Where the user and password of a URL end (the index of their ``@`` in ``rest``, the
    URL after ``scheme://``), or None where it has none (:func:`split_url`'s rule)."""
    if "@" not in rest:
        return None
    found = re.search(r"[/?#]", rest)
    plain_end = found.start() if found is not None else len(rest)  # the authority urlsplit reads
    colon = rest.find(":")
    last = None
    at = rest.rfind("@")
    while at >= 0:
        user_end = colon if 0 <= colon < at else at
        if plain_end >= user_end and _HOST_PORT.match(rest, at + 1):
            last = at
            break
        at = rest.rfind("@", 0, at)
    plain = rest[:plain_end]
    if "@" in plain:
        if last is None:
            raise AmbiguousURL("the @ that ends its user and password is followed by no host")
        return last
    if last is None:
        return None
    if _HOST_PORT.fullmatch(plain):
        if ":" in plain:  # host:port/...@host: a password of digits then /, or a path's @?
            raise AmbiguousURL(
                "its user and password cannot be told from a host, port and path holding an "
                "@: write an @ of a path or query as %40, or a / ? # of a password as %2F %3F %23"
            )
        return None  # http://host/path@x: the @ is the path's
    return last


def split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without its user and password, and ``(user, password)`` where it had them.

    The user and password run to the **last** ``@`` of the URL that is followed by a host
    (and port) ending the authority (the end of the URL, or a ``/``, ``?`` or ``#``); the user
    ends at the first ``:`` after ``scheme://`` and holds no ``/``, ``?`` or ``#``; the
    password is everything between, so it may hold any character (``#``, ``/``, ``?``,
    ``@``, ``:``), written as is or percent-encoded.  A URL whose ``@`` is in its path or
    query (``http://host/a@b``) has none.  Both are percent-decoded.

    Raises
    ------
    AmbiguousURL
        A ValueError, where the rule cannot tell them: an ``@`` in the authority with no host
        after it, or ``http://host:port/...@host`` (a password of digits, or a path's ``@``).
        Its message holds neither the user nor the password.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, None
    at = _userinfo_end(rest)
    if at is None:
        return url, None
    user, _, password = rest[:at].partition(":")
    return f"{scheme}://{rest[at + 1 :]}", (unquote(user), unquote(password))


def shown_url(bare: str, auth: tuple[str, str] | None) -> str:
    """A URL without credentials (``bare``), as it may be printed with the ``auth`` it is
    used with: ``http://user:***@host``."""
    if auth is None:
        return bare
    parts = urlsplit(bare)
    userinfo = quote(auth[0], safe="") + f":{MASK}"
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def masked_url(url: str) -> str:
    """``url`` as it may be shown whatever it holds: its password ``***``; where the URL
    cannot be split (:func:`split_url`), everything from the ``:`` after its user to its
    last ``@``, white space included."""
    try:
        bare, auth = split_url(url)
        if auth is not None:
            return shown_url(bare, auth)
    except ValueError:
        pass
    m = _URL_USER.search(url)
    at = url.rfind("@")
    if m is None or at < m.end():
        return url
    return url[: m.end()] + MASK + url[at:]


def _common_prefix(text: str, start: int, secret: str) -> int:
    """How many characters of ``secret`` ``text`` holds from ``start`` on, given at least
    :data:`PREFIX_CHARACTERS` (a binary search: each test is one comparison in C)."""
    if text.startswith(secret, start):
        return len(secret)
    low, high = PREFIX_CHARACTERS, len(secret) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if text.startswith(secret[:mid], start):
            low = mid
        else:
            high = mid - 1
    return low


def _spans(text: str, secret: str, spans: list[tuple[int, int]]) -> None:
    """Add to ``spans`` where ``secret`` stands in ``text``, whole or (from
    :data:`PREFIX_CHARACTERS` on) its start: each from where it starts through the longest
    start of the secret there.  Each start of its first characters is found by ``str.find``
    and extended; one whose secret could not reach past the spans found is skipped, so the
    work is linear in the length of ``text``."""
    n = len(secret)
    if n < PREFIX_CHARACTERS:
        start = text.find(secret)
        while start >= 0:
            spans.append((start, start + n))
            start = text.find(secret, start + n)
        return
    head = secret[:PREFIX_CHARACTERS]
    reached = 0
    start = text.find(head)
    while start >= 0:
        stop = start + _common_prefix(text, start, secret)
        if stop > reached:
            spans.append((start, stop))
            reached = stop
        # A start of the secret inside this one that ends no later adds nothing; one that may
        # end later (a secret that repeats its own start) is still looked for.
        start = text.find(head, max(start + 1, reached - n + 1))


def _base64_forms(data: bytes) -> set[str]:
    """``data`` in Base64 (standard and URL-safe): alone with its padding, and the
    characters that only ``data`` decides at each of the three places it may stand in a
    longer encoded text (after 0, 1 or 2 bytes of a group of three)."""
    forms = {base64.b64encode(data).decode("ascii")}
    for before, first in ((0, 0), (1, 2), (2, 3)):
        total = before + len(data)
        encoded = base64.b64encode(b"\0" * before + data).decode("ascii")
        forms.add(encoded[first : 4 * (total // 3) + total % 3])
    return forms | {f.replace("+", "-").replace("/", "_") for f in forms}


def _text_forms(secret: str) -> set[str]:
    """``secret`` as text may carry it: as is, percent-encoded, escaped in JSON and by
    Python's ``repr``."""
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret, safe=""),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
    }


class Redactor:
    """Removes known secrets from text: ``redact(text)``.

    ``Redactor(*secrets, auth=(user, password))``: each secret (an API key, a bearer token)
    and the password is masked as ``***`` in every form text may carry it (as is,
    percent-encoded, JSON- or repr-escaped, in Base64), and so is the ``Authorization:
    Basic`` token of ``auth`` (``user:password`` in Base64); so is the start of any of them
    from :data:`PREFIX_CHARACTERS` characters on, wherever it stands (text cut inside a
    secret), masked from where it starts through the longest start of the secret there; and,
    in text up to :data:`PIECE_SCAN_CHARACTERS` long, any piece of that many characters or
    more from anywhere in them (a secret split by inserted characters).  Then the password
    of every URL is hidden (:func:`hide_url_passwords`).  Linear in the length of the text.
    Its ``repr`` shows none of them.
    """

    def __init__(self, *secrets: str | None, auth: tuple[str, str] | None = None) -> None:
        plain = {s for s in secrets if s}
        whole: set[str] = set()  # searched for from MIN_REDACTED characters on
        encoded: set[str] = set()  # from PREFIX_CHARACTERS on (short ones match by chance)
        if auth is not None:
            user, password = auth
            if password:
                plain.add(password)
            whole.add(_basic_token(user, password))
            encoded |= _base64_forms(f"{user}:{password}".encode())
        for secret in plain:
            whole |= _text_forms(secret)
            encoded |= _base64_forms(secret.encode())
        forms = {f for f in whole if len(f) >= MIN_REDACTED}
        forms |= {f for f in encoded if len(f) >= PREFIX_CHARACTERS}
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        # Every run of PREFIX_CHARACTERS characters of a form, with where it stands in it.
        self._grams: dict[str, list[tuple[str, int]]] = {}
        n = PREFIX_CHARACTERS
        for form in self._forms:
            for i in range(len(form) - n + 1):
                self._grams.setdefault(form[i : i + n], []).append((form, i))

    def __repr__(self) -> str:
        return f"Redactor({MASK})"

    __str__ = __repr__

    def _pieces(self, text: str, spans: list[tuple[int, int]]) -> None:
        """Add to ``spans`` every piece of a form of :data:`PREFIX_CHARACTERS` characters or
        more in ``text``, from wherever in the form it comes: each run of that many characters
        found, extended both ways as far as the form goes on.  After a piece the search goes
        on from the last run inside it, so a later piece is never skipped and no run is
        looked up twice."""
        n = PREFIX_CHARACTERS
        p, last = 0, len(text) - n
        while p <= last:
            hits = self._grams.get(text[p : p + n])
            if hits is None:
                p += 1
                continue
            start, stop = p, p + n
            for form, i in hits:
                left = 0
                while left < min(i, p) and text[p - left - 1] == form[i - left - 1]:
                    left += 1
                right = 0
                room = min(len(form) - i - n, len(text) - p - n)
                while right < room and text[p + n + right] == form[i + n + right]:
                    right += 1
                start, stop = min(start, p - left), max(stop, p + n + right)
            spans.append((start, stop))
            p = max(p + 1, stop - n + 1)

    def __call__(self, text: str, pieces: bool = True) -> str:
        """``text`` with every secret masked; ``pieces=False``: their starts only (a first
        pass over text that is then made printable, which can join a secret's parts, and
        redacted again)."""
        spans: list[tuple[int, int]] = []
        for form in self._forms:
            _spans(text, form, spans)
        if pieces and len(text) <= PIECE_SCAN_CHARACTERS and self._grams:
            self._pieces(text, spans)
        if spans:
            spans.sort()
            out: list[str] = []
            pos = 0
            for start, stop in spans:
                if stop <= pos:
                    continue
                if start > pos or not out:
                    out += (text[pos:start], MASK)
                pos = max(pos, stop)
            out.append(text[pos:])
            text = "".join(out)
        return hide_url_passwords(text)


def _basic_token(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def clean_api_key(raw: str, variable: str) -> tuple[str, str | None]:
    """The key from the environment variable ``variable``, stripped of surrounding
    whitespace, and a note saying so where it had any (the key itself is never shown).

    Raises BreakevenError (naming ``api_key_env``) for an empty key or one that
    cannot be an HTTP header value.
    """
    key = raw.strip()
    note = None
    if key != raw:
        note = (
            f"--api-key-env: the key in {variable} had white space around it (a CRLF .env "
            "file?); it was stripped"
        )
    if not key:
        raise BreakevenError(
            "{0}: the variable " + escape_braces(variable) + " is empty", "api_key_env"
        )
    if any(not " " <= c <= "~" for c in key):
        raise BreakevenError(
            "{0}: the key in " + escape_braces(variable) + " holds a character an "
            "HTTP header cannot carry (a control character or non-ASCII "
            "text); the key is not shown",
            "api_key_env",
        )
    return key, note
