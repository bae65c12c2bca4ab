"""HTTP request headers a user adds (``fleet --header 'X-Scope-OrgID: team'``), checked and
shown with their values masked.

A multi-tenant Prometheus (Grafana Mimir, Cortex, a Thanos behind a tenancy proxy) picks the
tenant from a header; some proxies want a key in one.  A header's value is treated as a secret:
it is sent, never shown (``X-Scope-OrgID: ***``), and masked in a server's own text as a token
is (:class:`breakeven.core.credentials.Redactor`).  A header that would change how the request
is framed or sent (``Host``, ``Content-Length``, the hop-by-hop ones, ``Accept-Encoding``, whose
answers the bounded reader decompresses) is refused, and so is ``Authorization``: the bearer
token comes from ``--token-env`` and a user and password from the URL, so that one request
never carries two of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from breakeven.core.credentials import MASK
from breakeven.core.errors import BreakevenError, escape_braces, shorten

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name: an RFC 9110 token."""

REFUSED = {
    "authorization": "the bearer token comes from --token-env and a user and password from "
    "the URL (user:password@host), never from --header",
    "proxy-authorization": "it is a proxy's, sent hop by hop",
    "host": "the host is the URL's",
    "content-length": "it frames the request, which breakeven writes",
    "content-type": "it says how the request is written, which breakeven decides",
    "transfer-encoding": "it frames the request, which breakeven writes",
    "content-encoding": "it says how the request is written, which breakeven decides",
    "accept-encoding": "breakeven asks for the encodings its bounded reader decompresses",
    "connection": "it is hop by hop",
    "keep-alive": "it is hop by hop",
    "proxy-connection": "it is hop by hop",
    "te": "it is hop by hop",
    "trailer": "it frames the request, which breakeven writes",
    "upgrade": "it is hop by hop",
    "expect": "it changes how the request is sent",
}
"""Header names (lower case) ``--header`` refuses, and why."""

EXPECTED = "'NAME: VALUE', such as 'X-Scope-OrgID: team'"


@dataclass(frozen=True)
class Header:
    """One header sent with every request; its value is a secret (never in ``repr``)."""

    name: str
    """The header's name, as given (an RFC 9110 token)."""
    value: str
    """Its value, without the white space around it; never shown."""

    def __repr__(self) -> str:
        return f"Header({self.name!r}: {MASK})"

    __str__ = __repr__

    @property
    def shown(self) -> str:
        """The header as it may be printed: ``X-Scope-OrgID: ***``."""
        return f"{self.name}: {MASK}"


def parse_header(text: str, flag: str = "header") -> Header:
    """``NAME: VALUE`` as a :class:`Header`, checked; else a BreakevenError naming ``flag`` that
    never shows the value (nor the text, where no ``:`` tells the name from the value)."""
    text = str(text)
    name, colon, value = text.partition(":")
    if not colon:
        raise BreakevenError(
            "{0}: got a header without ':' (not shown: it may hold its value), expected "
            + escape_braces(EXPECTED),
            flag,
        )
    name, value = name.strip(" \t"), value.strip(" \t")
    if not name:
        raise BreakevenError("{0}: got a header with no name, expected " + EXPECTED, flag)
    if not _TOKEN.fullmatch(name):
        raise BreakevenError(
            "{0}: got the header name "
            + escape_braces(shorten(repr(name)))
            + ", which is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~, with no "
            "space, control character or non-ASCII text); expected " + escape_braces(EXPECTED),
            flag,
        )
    why = REFUSED.get(name.lower())
    if why is not None:
        raise BreakevenError(
            "{0}: the header " + escape_braces(repr(name)) + " is not sent from here: " + why,
            flag,
        )
    if not value:
        raise BreakevenError(
            "{0}: the header "
            + escape_braces(repr(name))
            + " has an empty value, expected "
            + escape_braces(EXPECTED),
            flag,
        )
    if any(not " " <= c <= "~" for c in value):
        raise BreakevenError(
            "{0}: the value of the header "
            + escape_braces(repr(name))
            + " holds a character an HTTP header cannot carry (a line break, a tab, another "
            "control character or non-ASCII text); the value is not shown",
            flag,
        )
    return Header(name, value)


def parse_headers(texts: Iterable[str], flag: str = "header") -> tuple[Header, ...]:
    """Every ``--header`` (:func:`parse_header`), a name given twice refused (in any case)."""
    headers: list[Header] = []
    seen: set[str] = set()
    for text in texts:
        header = parse_header(text, flag)
        key = header.name.lower()
        if key in seen:
            raise BreakevenError(
                "{0}: the header "
                + escape_braces(repr(header.name))
                + " is given twice; give it once, with the value the server expects (Mimir "
                "reads several tenants as 'X-Scope-OrgID: a|b')",
                flag,
            )
        seen.add(key)
        headers.append(header)
    return tuple(headers)


__all__ = ["EXPECTED", "REFUSED", "Header", "parse_header", "parse_headers"]
