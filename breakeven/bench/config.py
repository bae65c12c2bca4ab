"""``breakeven bench``'s settings: the server's root URL and :class:`Config`, what to measure
and how to label it, checked against the bounds of one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from urllib.parse import urlsplit, urlunsplit

from breakeven.bench.prompts import DEFAULT_PROMPTS, PromptRow
from breakeven.core.credentials import MASK, AmbiguousURL, hide_url_passwords, masked_url, split_url
from breakeven.core.errors import BreakevenError, escape_braces, invalid_value
from breakeven.core.provenance import is_secret_key, secret_name
from breakeven.iotools.httpclient import check_url


def server_root(url: str) -> str:
    """The server's root URL from any of ``http://host:8000``, ``.../``, ``.../v1``, ``.../v1/``,
    without a user and password (requests carry those in a header).

    Endpoints are then ``root + "/v1/models"`` and so on: never ``/v1/v1/``.  A URL that no
    request could be made to (:func:`breakeven.iotools.httpclient.check_url`: an IDNA host
    that does not encode, white space, a control character) is refused naming ``url``.
    """
    shown = masked_url(url.strip())
    expected = "an http:// or https:// URL with a host, such as http://localhost:8000"
    try:
        bare, _ = split_url(url.strip())
        parts = urlsplit(bare)
        host = parts.hostname
    except AmbiguousURL as e:  # refused, never guessed: its password is not shown
        raise invalid_value("url", shown, f"{expected} ({e})") from None
    except ValueError:  # an unclosed IPv6 bracket, say
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise invalid_value("url", shown, expected)
    try:
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise invalid_value("url", shown, "a port number between 0 and 65535") from None
    check_url(url, "url")  # a host IDNA or httpx refuses, a control character: one line
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# Bounds of what one run may ask for: beyond them a run is a typing mistake, and would hold
# that many requests' results in memory.
MAX_REQUESTS = 1_000_000
MAX_CONCURRENCY = 10_000
MAX_TOKENS = 1_000_000
MAX_TIMEOUT_S = 86_400.0


@dataclass
class Config:
    """What to measure and how to label it."""

    url: str
    label: str
    model: str | None = None
    concurrency: Sequence[int] = (1,)
    max_tokens: int = 512
    requests: int | None = None  # per level; default 4 x concurrency, at least 8
    prompts: Sequence[str] = DEFAULT_PROMPTS
    categories: Sequence[str] | None = None
    """Each prompt's workload category, in the order of ``prompts`` ('' for none), written in
    each request's row; None: those ``prompts`` carries (:func:`read_prompts`'s
    :class:`Prompts`), else none."""
    chat: bool = False
    api_key: str | None = field(default=None, repr=False)  # never printed, never written
    num_spec_tokens: int | None = None
    spec_topk: int | None = None
    """A tree draft's branches per step [branches], stamped on every row."""
    verify_tokens: int | None = None
    """A tree's tokens per sequence in the verify forward [tokens], stamped on every row."""
    spec_method: str | None = None
    hardware: str | None = None
    env: str | None = None
    """More of the server's launch, as ``K=V`` pairs the client cannot see."""
    server_env_from: str | None = None
    """Where the server's environment is written, when bench cannot read its process: a
    process id, a systemd unit, a docker inspect JSON or a KEY=VALUE file."""
    ready_timeout_s: float = 120.0
    """How long the server may take to become ready (503 while loading, a stalled reply) [s]."""
    connect_timeout_s: float = 5.0
    """How long a connection may take [s]."""
    idle_timeout_s: float = 60.0
    """How long a request may go without a byte from the server [s]."""
    request_timeout_s: float = 600.0
    """How long one request may take in all [s] (a server that trickles bytes)."""
    ignore_eos: bool = True

    def __repr__(self) -> str:
        """The fields, the API key as ``***``, the URL's password as ``***`` (whatever it
        holds: :func:`breakeven.core.credentials.masked_url`) and the value of each ``env`` pair
        named like a secret as ``***``: a traceback or a log that shows a configuration shows
        no secret."""
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key" and value is not None:
                value = MASK
            elif f.name == "url" and isinstance(value, str):
                value = masked_url(value)
            elif f.name == "env" and isinstance(value, str):
                value = _masked_env(value)
            shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def check(self) -> None:
        server_root(self.url)
        for c in self.concurrency:
            if not isinstance(c, int) or not 1 <= c <= MAX_CONCURRENCY:
                raise invalid_value(
                    "concurrency", c, f"a whole number of requests from 1 to {MAX_CONCURRENCY:,}"
                )
        if not isinstance(self.max_tokens, int) or not 2 <= self.max_tokens <= MAX_TOKENS:
            raise invalid_value(
                "max_tokens",
                self.max_tokens,
                f"a whole number of tokens from 2 (so that a decode rate exists) to {MAX_TOKENS:,}",
            )
        if self.requests is not None and not 1 <= self.requests <= MAX_REQUESTS:
            raise invalid_value(
                "requests", self.requests, f"a whole number from 1 to {MAX_REQUESTS:,}"
            )
        for name in ("ready_timeout_s", "connect_timeout_s", "idle_timeout_s", "request_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= MAX_TIMEOUT_S):
                raise invalid_value(name, value, f"seconds above 0 and at most {MAX_TIMEOUT_S:g}")
        if not self.prompts:
            raise BreakevenError("{0}: holds no prompts", "prompts")
        if self.categories is not None and (
            isinstance(self.categories, str)
            or len(self.categories) != len(self.prompts)
            or not all(isinstance(c, str) for c in self.categories)
        ):
            raise BreakevenError(
                "{0}: expected one category string per prompt "
                + escape_braces(f"({len(self.prompts)}), '' for none"),
                "categories",
            )

    def prompt_at(self, i: int) -> PromptRow:
        """The prompt of a level's ``i``-th request (the prompts in turn) and its category."""
        j = i % len(self.prompts)
        categories = self.categories
        if categories is None:
            categories = getattr(self.prompts, "categories", ())
        return PromptRow(self.prompts[j], categories[j] if j < len(categories) else "")

    def requests_at(self, concurrency: int) -> int:
        """Requests of the level at ``concurrency``."""
        return self.requests or max(8, 4 * concurrency)


def _masked_env(env: str) -> str:
    """``--env``'s pairs as a configuration's ``repr`` shows them: the value of one named like a
    secret (:func:`breakeven.core.provenance.is_secret_key`, :func:`~breakeven.core.provenance.secret_name`)
    as ``***``, a URL's password hidden."""
    words = []
    for word in env.split():
        name, eq, _ = word.partition("=")
        secret = eq and (is_secret_key(name) or secret_name(name))
        words.append(f"{name}={MASK}" if secret else word)
    return hide_url_passwords(" ".join(words))
