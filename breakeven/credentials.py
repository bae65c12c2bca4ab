"""Secrets given to ``bench``: an API key, a user and password in ``--url``.

They are used for the requests and never shown: every message, row and
echoed server text passes through a :class:`Redactor`, and a URL is shown with
its password as ``***`` (``http://user:***@host:8000``).  A password is never
put in a request URL at all: it goes in an ``Authorization: Basic`` header,
whose encoded form is redacted too (a proxy may echo request headers).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from breakeven.errors import BreakevenError, escape_braces

MASK = "***"
# scheme://user:password@ ; the password may be empty, the user too.
# The scheme starts where a run of scheme characters starts (the lookbehind): tried at every
# position of a long word, it would rescan the word each time, quadratic in its length.
_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)"
    r"(?P<user>[^/@:?#\s]*):[^/@?#\s]*@"
)
MIN_REDACTED = 3
"""Secrets shorter than this are not searched for in free text (they would mask ordinary
letters); in a URL they are masked wherever they stand."""


def hide_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it shown as ``***``."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)


def split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without its user and password, and ``(user, password)`` where it had them."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


def shown_url(bare: str, auth: tuple[str, str] | None) -> str:
    """A URL without credentials (``bare``), as it may be printed with the ``auth`` it is
    used with: ``http://user:***@host``."""
    if auth is None:
        return bare
    parts = urlsplit(bare)
    userinfo = quote(auth[0], safe="") + f":{MASK}"
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


class Redactor:
    """Removes known secrets from text: ``redact(text)``."""

    def __init__(self, *secrets: str | None, auth: tuple[str, str] | None = None) -> None:
        found = {s for s in secrets if s}
        if auth is not None:
            user, password = auth
            found |= {password, quote(password, safe=""), _basic_token(user, password)}
        self.secrets = sorted((s for s in found if len(s) >= MIN_REDACTED), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
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
