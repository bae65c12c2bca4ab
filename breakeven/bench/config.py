"""``breakeven bench``'s settings: the server's root URL and :class:`Config`, what to measure
and how to label it, checked against the bounds of one run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any
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
MAX_REQUEST_RATE = 100_000.0
"""The highest offered request rate [req/s]: gaps of 10 us, beyond what one client keeps."""
MAX_TEMPERATURE = 100.0
"""The highest sampling temperature [-]: far beyond any useful one (OpenAI's API takes up to 2)."""
RATE_LEVEL_SECONDS = 30.0
"""An open-loop level's default requests arrive over about this long [s]."""
RATE_LEVEL_REQUESTS = (8, 1000)
"""An open-loop level's default requests, the fewest and the most."""


@dataclass(frozen=True)
class Load:
    """One level's load.  Closed loop: ``concurrency`` requests in flight, each sent as one
    finishes.  Open loop: ``request_rate`` requests per second sent on a schedule whatever
    the server's progress, at most ``concurrency`` in flight where given (a cap), else none."""

    concurrency: int | None
    """Requests in flight [requests]: the level's (closed loop) or the cap (open loop)."""
    request_rate: float | None = None
    """The offered rate [req/s]; None for a closed-loop level."""

    @property
    def words(self) -> str:
        """The level as messages name it: ``concurrency 8``, ``request rate 2 req/s``."""
        if self.request_rate is None:
            return f"concurrency {self.concurrency}"
        cap = f" (max concurrency {self.concurrency})" if self.concurrency else ""
        return f"request rate {self.request_rate:g} req/s{cap}"

    @property
    def tag(self) -> str:
        """The level in a run id: ``c8``, ``r2``, ``r2-c4``."""
        if self.request_rate is None:
            return f"c{self.concurrency}"
        return f"r{self.request_rate:g}" + (f"-c{self.concurrency}" if self.concurrency else "")


@dataclass
class Config:
    """What to measure and how to label it."""

    url: str
    label: str
    model: str | None = None
    concurrency: Sequence[int] = ()
    """Closed-loop levels [requests in flight]; empty: one level at 1, unless
    ``request_rate`` gives open-loop levels (give one of them)."""
    request_rate: Sequence[float] = ()
    """Open-loop levels [req/s]: each sends its requests on a schedule of gamma gaps."""
    burstiness: float = 1.0
    """The gaps' gamma shape [-]: 1 is Poisson; above 1 more even, below more bursty."""
    seed: int = 0
    """Seeds each open-loop level's schedule: the same seed and flags, the same schedule."""
    max_concurrency: int | None = None
    """Open loop: at most this many requests in flight [requests]; a request waits for a
    slot, and its ttft_ms and e2e_ms count the wait."""
    max_tokens: int = 512
    requests: int | None = None
    """Requests per level; default 4 x concurrency, at least 8 (closed loop), or those of
    about 30 s of arrivals, 8 to 1,000 (open loop)."""
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
    """Generate every request to ``max_tokens``, past the end of text (vLLM's and SGLang's
    ``ignore_eos``): a baseline and a speculative run then decode the same number of tokens.
    False: each request stops where the model ends its text (its tokens are the server's
    usage count), as in service."""
    temperature: float = 0.0
    """The sampling temperature sent with every request [-]: 0 is greedy."""
    top_p: float = 1.0
    """The nucleus sampling mass sent with every request [fraction]: 1 keeps every token."""

    def sampling(self) -> dict[str, Any]:
        """The sampling settings every request is sent with, as rows record them: ``temperature``,
        ``top_p``, ``max_tokens`` and ``ignore_eos`` (``"true"`` or ``"false"``)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "ignore_eos": "true" if self.ignore_eos else "false",
        }

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
        self._check_open_loop()
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
        check_sampling(self.temperature, self.top_p, self.ignore_eos)
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
        """Requests of the closed-loop level at ``concurrency``."""
        return self.requests or max(8, 4 * concurrency)

    def loads(self) -> list[Load]:
        """The levels to measure, in order: one per request rate (open loop), else one per
        concurrency (closed loop; 1 where none is given)."""
        if self.request_rate:
            return [Load(self.max_concurrency, float(r)) for r in self.request_rate]
        return [Load(c) for c in (self.concurrency or (1,))]

    def requests_in(self, load: Load) -> int:
        """Requests of the level ``load``: ``requests``, else a closed-loop level's
        :meth:`requests_at`, else an open-loop level's about :data:`RATE_LEVEL_SECONDS` of
        arrivals, :data:`RATE_LEVEL_REQUESTS` at the fewest and the most."""
        if self.requests or load.request_rate is None:
            return self.requests or self.requests_at(load.concurrency or 1)
        fewest, most = RATE_LEVEL_REQUESTS
        return min(most, max(fewest, math.ceil(RATE_LEVEL_SECONDS * load.request_rate)))

    def _check_open_loop(self) -> None:
        """The open-loop settings: rates, burstiness, seed and cap, and one load axis."""
        if self.request_rate and self.concurrency:
            raise BreakevenError(
                "{0}: give either {0} (open loop) or {1} (closed loop), not both",
                "request_rate",
                "concurrency",
            )
        if isinstance(self.request_rate, (str, int, float)):
            raise invalid_value("request_rate", self.request_rate, "a list of rates [req/s]")
        for r in self.request_rate:
            if not _positive(r, MAX_REQUEST_RATE):
                raise invalid_value(
                    "request_rate",
                    r,
                    f"requests per second above 0 and at most {MAX_REQUEST_RATE:,.0f}",
                )
        if not _positive(self.burstiness, math.inf):
            raise invalid_value(
                "burstiness",
                self.burstiness,
                "a finite number above 0 (the gaps' gamma shape: 1 is Poisson)",
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise invalid_value("seed", self.seed, "a whole number")
        cap = self.max_concurrency
        if cap is not None:
            if not isinstance(cap, int) or not 1 <= cap <= MAX_CONCURRENCY:
                raise invalid_value(
                    "max_concurrency",
                    cap,
                    f"a whole number of requests from 1 to {MAX_CONCURRENCY:,}",
                )
            if not self.request_rate:
                raise BreakevenError(
                    "{0}: caps an open-loop level; give {1} too (closed loop: {2})",
                    "max_concurrency",
                    "request_rate",
                    "concurrency",
                )


def check_sampling(temperature: float, top_p: float, ignore_eos: bool) -> None:
    """Raise for a sampling setting out of range: a temperature from 0 to
    :data:`MAX_TEMPERATURE`, a top_p above 0 and at most 1, ignore_eos true or false."""
    greedy = (
        isinstance(temperature, (int, float))
        and not isinstance(temperature, bool)
        and temperature == 0
    )
    if not (greedy or _positive(temperature, MAX_TEMPERATURE)):
        raise invalid_value(
            "temperature", temperature, f"a number from 0 (greedy) to {MAX_TEMPERATURE:g}"
        )
    if not _positive(top_p, 1.0):
        raise invalid_value("top_p", top_p, "a fraction above 0 and at most 1")
    if not isinstance(ignore_eos, bool):
        raise invalid_value("ignore_eos", ignore_eos, "true or false")


def _positive(value: object, most: float) -> bool:
    """Whether ``value`` is a real number above 0 and at most ``most`` (NaN and inf are not)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= most
    )


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
