"""The HTTP client breakeven talks to servers with (``bench``: the engine; ``fleet``: a
Prometheus server): httpx, and httpx-sse for streamed completions, both optional (the
``bench`` extra); and :func:`check_url`, which says in one line why a URL given on the
command line cannot be requested, before any request."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from breakeven.core.credentials import AmbiguousURL, Redactor, masked_url, split_url
from breakeven.core.errors import BreakevenError, escape_braces, shorten

INSTALL_HINT = (
    "breakeven bench needs httpx and httpx-sse: pip install '.[bench]' in breakeven's folder"
)

_URL_EXPECTED = (
    "an http:// or https:// URL with a host and at most a port from 0 to 65535, such as "
    "http://host:9090"
)


def require_http() -> tuple[Any, Any]:
    """The modules ``httpx`` and ``httpx_sse``; a BreakevenError saying what to install when
    they are not."""
    try:
        import httpx  # lazy: an optional extra, and costly to import
        import httpx_sse  # lazy: an optional extra
    except ImportError:
        raise BreakevenError(INSTALL_HINT) from None
    return httpx, httpx_sse


def check_url(url: str, name: str) -> str:
    """``url`` without surrounding white space, when an HTTP client can request it.

    After its user and password (:func:`breakeven.core.credentials.split_url`: they may hold
    any character), it must be ``http://`` or ``https://`` with a host (a name that IDNA
    encodes, an IPv4 address or a bracketed IPv6 one), at most a port from 0 to 65535 and
    no ``#`` (a fragment, which no server sees); and no character of it may be white space
    or a control character.  Checked before any request: httpx and the socket layer refuse
    such URLs with exceptions of their own (``InvalidURL``, ``IDNAError``,
    ``UnicodeError``), none of them an ``httpx.HTTPError``.

    Raises
    ------
    BreakevenError
        One line naming ``name``: what is wrong, with the URL shown with its password as
        ``***`` (:func:`breakeven.core.credentials.masked_url`).
    """
    text = str(url).strip()
    shown = escape_braces(shorten(repr(masked_url(text)), 100))

    def refuse(why: str) -> BreakevenError:
        return BreakevenError("{0}: got " + shown + ", " + escape_braces(why), name)

    if any(c.isspace() or not c.isprintable() for c in text):
        raise refuse(
            "which holds white space or a control character (write a space in a password as "
            f"%20); expected {_URL_EXPECTED}"
        )
    try:
        bare, auth = split_url(text)
    except AmbiguousURL as e:  # its message holds neither the user nor the password
        raise refuse(f"whose user and password cannot be told apart from its host: {e}") from None
    if "#" in bare:
        raise refuse(f"which holds a '#' after its host; expected {_URL_EXPECTED}")
    try:
        parts = urlsplit(bare)
        host = parts.hostname
        parts.port  # noqa: B018 (a port that is not one raises here)
    except ValueError:  # an unclosed or invalid IPv6 bracket, a port not a number
        raise refuse(f"expected {_URL_EXPECTED}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise refuse(f"expected {_URL_EXPECTED}")
    if not parts.netloc.startswith("["):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            try:
                host.encode("idna")
            except UnicodeError:
                raise refuse(
                    "whose host is not a name IDNA encodes (an empty label, a label of "
                    "more than 63 characters, or a character no host name holds); "
                    f"expected {_URL_EXPECTED}"
                ) from None
    try:
        import httpx  # lazy: an optional extra; without it no request is made anyway
    except ImportError:
        return text
    try:
        httpx.Request("GET", bare).url.host  # noqa: B018 (the host's IDNA checks run here)
    except Exception as e:  # httpx.InvalidURL, idna.IDNAError: neither is an HTTPError
        why = Redactor(auth=auth)(str(e))[:120]
        raise refuse(f"which httpx cannot request ({why}); expected {_URL_EXPECTED}") from None
    return text


__all__ = ["INSTALL_HINT", "check_url", "require_http"]
