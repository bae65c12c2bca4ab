"""Prometheus' HTTP API (``/api/v1/query_range``), as ``breakeven fleet`` reads it: plain rows of samples.

Prometheus answers at most 11,000 steps per series in one query, so a long range is read in
chunks of at most :data:`CHUNK_STEPS` steps (:func:`chunks`).  A bearer token comes from an
environment variable and is never printed; a user and password in the URL go in an
``Authorization: Basic`` header and are shown as ``***``; TLS is verified.  Every problem is
one line: unreachable, a refused query (with its PromQL and Prometheus' own error, secrets
masked), nothing found.

A Prometheus server (or what answers in its place) is not trusted: each request ends within
``--timeout`` and the whole read within ``--deadline`` however slowly bytes come; an answer
is read up to :data:`MAX_ANSWER_BYTES` (compressed, decompressed, and growing at most
:data:`MAX_EXPANSION` times when decompressed), its JSON nesting is checked before it is
parsed, and its shape against the HTTP API's documented one (:func:`matrix_result`).
"""

from __future__ import annotations

import math
import re
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from breakeven.core.credentials import Redactor, masked_url, shown_url, split_url
from breakeven.core.display import printable
from breakeven.core.errors import (
    BreakevenError,
    UnreadableInput,
    escape_braces,
    invalid_value,
    shorten,
)
from breakeven.core.headers import Header
from breakeven.iotools.httpclient import check_url, require_http
from breakeven.iotools.jsonsafe import loads_bounded

CHUNK_STEPS = 10_000
"""Steps per range query: under Prometheus' limit of 11,000 points per series."""


MAX_STEPS = 10_000_000
"""The most steps a fleet read covers (about 19 years at 60 s); past it, one line."""


DEFAULT_TIMEOUT_S = 60.0
"""The longest one range query may take in all, by default [s] (``--timeout``)."""


MAX_WAIT_S = 7 * 86400.0
"""The longest ``--timeout`` or ``--deadline`` accepted [s]."""


MAX_ANSWER_BYTES = 64 << 20
"""The largest answer read, compressed and decompressed [bytes]: 64 MiB, some 3 million
samples, where a full chunk of one series is 10,000."""


MAX_EXPANSION = 100.0
"""How much a compressed answer may grow when decompressed [x]: Prometheus' JSON grows
some 5 to 20 times; a compression bomb, up to 1,000 times (gzip's most)."""


EXPANSION_FLOOR = 1 << 20
"""Decompressed bytes below which :data:`MAX_EXPANSION` is not applied [bytes]."""


DECODE_PIECE = 1 << 20
"""Decompressed at most this much at a time [bytes], so that the limits apply as it grows."""


MAX_DEPTH = 16
"""The deepest JSON nesting read (a range query's answer is 6 deep)."""


MAX_SHOWN = 300
"""The most characters of a server's own text (an error) a message shows."""


MAX_WARNINGS = 10
"""The most distinct warnings of a server's answers kept (Thanos' partial responses): the
rest are counted."""


REFUSED_STATUS = (401, 403)
"""HTTP statuses that say the request lacks its tenant or credentials (Mimir and Cortex
answer 401 "no org id" without ``X-Scope-OrgID``)."""


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")


_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str, name: str) -> float:
    """``60s``, ``5m``, ``6h``, ``1d``: seconds > 0; else a BreakevenError naming ``name``."""
    m = _DURATION.match(str(text).strip())
    if not m or not float(m.group(1)) > 0:
        raise BreakevenError(
            "{0}: got " + escape_braces(repr(str(text))[:60]) + ", expected a "
            "duration such as 60s, 5m, 6h or 1d",
            name,
        )
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_time(text: str, name: str) -> float:
    """Unix seconds, or an RFC 3339 time (``2026-12-01T12:00:00Z``), as Unix seconds."""

    value = str(text).strip()
    try:
        t = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise BreakevenError(
                "{0}: got " + escape_braces(repr(value)[:60]) + ", expected "
                "Unix seconds or an RFC 3339 time such as "
                "2026-12-01T12:00:00Z",
                name,
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        t = parsed.timestamp()
    if not math.isfinite(t) or not 0 <= t < 1e11:
        raise BreakevenError(
            "{0}: got " + escape_braces(repr(value)[:60]) + ", expected a time after 1970", name
        )
    return t


def time_range(
    start: str | None, end: str | None, since: str | None, step_s: float
) -> tuple[float, float]:
    """(start, end) [Unix s] from ``--start``/``--end`` or ``--since`` (default 1h), checked."""
    if since is not None and start is not None:
        raise BreakevenError("{0} and {1} cannot be given together: give one", "since", "start")
    stop = parse_time(end, "end") if end is not None else time.time()
    first = (
        parse_time(start, "start")
        if start is not None
        else stop - parse_duration(since or "1h", "since")
    )
    if not first < stop:
        raise BreakevenError("{0}: the range ends before it starts", "end" if end else "start")
    if (stop - first) / step_s > MAX_STEPS:
        raise BreakevenError(
            "{0}: " + f"{(stop - first) / step_s:,.0f} steps, more than "
            f"{MAX_STEPS:,} in one read: use a longer --step or a shorter "
            "range",
            "step",
        )
    return first, stop


def chunks(start: float, end: float, step_s: float) -> Iterator[tuple[float, float]]:
    """Consecutive [start, end] pieces of at most :data:`CHUNK_STEPS` steps, on the step grid,
    that do not overlap."""
    t = start
    while t <= end:
        stop = min(end, t + (CHUNK_STEPS - 1) * step_s)
        yield t, stop
        t = stop + step_s


@dataclass(frozen=True)
class Limits:
    """What one fleet read may cost: in time, each request and the whole read; in memory,
    each answer."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    """The longest one range query may take in all, its answer read [s] (``--timeout``)."""
    deadline_s: float | None = None
    """The longest the whole read may take, every range query of it [s] (``--deadline``);
    None: no limit but each query's."""
    max_bytes: int = MAX_ANSWER_BYTES
    """The largest answer read, compressed and decompressed [bytes]."""
    max_expansion: float = MAX_EXPANSION
    """The most a compressed answer may grow when decompressed, past its first
    :data:`EXPANSION_FLOOR` bytes [x]."""

    def check(self) -> Limits:
        """These limits, or a BreakevenError naming ``timeout`` or ``deadline``."""
        for name, value in (("timeout", self.timeout_s), ("deadline", self.deadline_s)):
            if value is None and name == "deadline":
                continue
            if not (isinstance(value, (int, float)) and 0 < value <= MAX_WAIT_S):
                raise invalid_value(name, value, f"seconds above 0 and at most {MAX_WAIT_S:g}")
        if not (self.max_bytes >= 1 and self.max_expansion >= 1):
            raise BreakevenError("the limits of a fleet read must be at least 1")
        return self


_LIMITS: ContextVar[Limits | None] = ContextVar("breakeven_fleet_limits", default=None)


class _Kept(Enum):
    """A :func:`limits` argument not given: that limit stays as it was."""

    KEPT = "kept"


@contextmanager
def limits(
    *,
    timeout_s: float | _Kept = _Kept.KEPT,
    deadline_s: float | _Kept | None = _Kept.KEPT,
    max_bytes: int | _Kept = _Kept.KEPT,
    max_expansion: float | _Kept = _Kept.KEPT,
) -> Iterator[Limits]:
    """Within the ``with`` block, a :class:`PrometheusAPI` made without ``limits=`` reads
    under these (fields of :class:`Limits`; those not given as they were)::

        with limits(timeout_s=10, deadline_s=120):
            result, series = fleet_from_prometheus("http://prom:9090", since="6h")

    Parameters
    ----------
    timeout_s : float
        The longest one range query may take in all, its answer read [s].
    deadline_s : float or None
        The longest the whole read may take [s]; None: no limit but each query's.
    max_bytes : int
        The largest answer read, compressed and decompressed [bytes].
    max_expansion : float
        The most a compressed answer may grow when decompressed [x].
    """
    given = {
        "timeout_s": timeout_s,
        "deadline_s": deadline_s,
        "max_bytes": max_bytes,
        "max_expansion": max_expansion,
    }
    changes = {name: value for name, value in given.items() if value is not _Kept.KEPT}
    chosen = replace(_LIMITS.get() or Limits(), **changes).check()
    token = _LIMITS.set(chosen)
    try:
        yield chosen
    finally:
        _LIMITS.reset(token)


class MalformedAnswer(ValueError):
    """An answer that is not the one the HTTP API documents; its message says how, as it
    follows "answered a range query with"."""


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


_SPECIAL = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


MAX_VALUE_CHARACTERS = 400
"""A sample value written longer than this is not parsed: it is out of range (ignored)."""


def _sample_value(text: str) -> float:
    """A sample's value string as a float: ``"1.5"``, ``"NaN"``, ``"+Inf"``; written with
    more than :data:`MAX_VALUE_CHARACTERS` characters, inf (out of range: ignored)."""
    if text.lower() in _SPECIAL:
        return float(text)
    if len(text) > MAX_VALUE_CHARACTERS:
        return math.inf
    if not _NUMBER.fullmatch(text):
        raise MalformedAnswer(
            f"a sample value {shorten(repr(text))}, where Prometheus writes a number as a "
            'string ("1.5", "NaN", "+Inf")'
        )
    return float(text)


def matrix_result(answer: Any) -> list[dict[str, Any]]:
    """The series of a successful range query's answer, checked against the shape the HTTP
    API documents::

        {"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"<label>": "<value>", ...}, "values": [[<unix time>, "<value>"], ...]},
            ...]}}

    Each series comes back as ``{"metric": labels, "values": [(time, value), ...]}`` with
    the times and values as floats (``"NaN"`` and ``"+Inf"`` as they are; a value written
    with more than :data:`MAX_VALUE_CHARACTERS` characters as inf).  A series without
    ``values`` (one of native histograms) has none.

    Raises
    ------
    MalformedAnswer
        Where the answer deviates: a member missing or of another type, a result that is not
        a matrix (a vector, a scalar, a string), labels that are not strings, a sample that
        is not ``[time, "value"]``, a time that is not Unix seconds (finite, from 1970 on), a
        value that is not a number written as a string.
    """
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, dict):
        raise MalformedAnswer('no "data" object')
    kind = data.get("resultType")
    if kind != "matrix":
        raise MalformedAnswer(
            f'a result of type {shorten(repr(kind), 40)}, where a range query\'s is "matrix"'
        )
    result = data.get("result")
    if not isinstance(result, list):
        raise MalformedAnswer('a "result" that is not a list of series')
    out = []
    for n, series in enumerate(result, 1):
        where = f"series {n} of {len(result)}"
        if not isinstance(series, dict):
            raise MalformedAnswer(f"{where} not an object")
        labels = series.get("metric", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise MalformedAnswer(f'{where} with a "metric" that is not an object of label strings')
        values = series.get("values", [])
        if not isinstance(values, list):
            raise MalformedAnswer(f'{where} with "values" that are not a list')
        samples = []
        for sample in values:
            if not (isinstance(sample, list) and len(sample) == 2):
                raise MalformedAnswer(
                    f'{where} with a sample {shorten(repr(sample))} that is not [time, "value"]'
                )
            t, value = sample
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 1e11:
                raise MalformedAnswer(
                    f"{where} with a sample time {shorten(repr(t))} that is not Unix seconds"
                )
            if not isinstance(value, str):
                raise MalformedAnswer(
                    f"{where} with a sample value {shorten(repr(value))} that is not a string "
                    '(Prometheus writes "1.5", "NaN", "+Inf")'
                )
            samples.append((float(t), _sample_value(value)))
        out.append({"metric": labels, "values": samples})
    return out


def thanos_params(*, dedup: bool | None, partial_response: bool | None) -> dict[str, str]:
    """Thanos' query parameters ``dedup`` and ``partial_response`` (``true`` or ``false``), each
    only where given: a plain Prometheus ignores them, but none is sent unasked."""
    given = {"dedup": dedup, "partial_response": partial_response}
    return {name: "true" if on else "false" for name, on in given.items() if on is not None}


class PrometheusAPI:
    """A Prometheus server's range queries, with its errors as one line each.

    Every answer is bounded before it is believed: its size (``limits.max_bytes``,
    compressed and decompressed, with a bound on how much it may grow when decompressed),
    its nesting (:func:`breakeven.iotools.jsonsafe.loads_bounded`), its shape
    (:func:`matrix_result`), and its time: each request ends within ``limits.timeout_s``
    in all (a server that sends a byte a second too), and the whole read within
    ``limits.deadline_s``.  ``limits`` defaults to those of the enclosing :func:`limits`
    block (60 s a request, no deadline, 64 MiB an answer).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float | None = None,
        *,
        limits: Limits | None = None,
        flag: str = "prometheus",
        server: str = "Prometheus",
        headers: Sequence[Header] = (),
        query_params: Mapping[str, str] | None = None,
    ) -> None:
        self.flag, self.server = flag, server
        """The flag the URL came from, and what serves it, for messages."""
        self.headers = tuple(headers)
        """Headers sent with every request (``--header``); their values are secrets."""
        self.query_params = dict(query_params or {})
        """Parameters added to every query (Thanos' ``dedup`` and ``partial_response``)."""
        self.warnings: dict[str, int] = {}
        """The distinct warnings of the answers (at most :data:`MAX_WARNINGS`), masked, with
        how many answers carried each; :attr:`more_warnings` counts the rest."""
        self.more_warnings = 0
        chosen = limits or _LIMITS.get() or Limits()
        if timeout_s is not None:
            chosen = replace(chosen, timeout_s=timeout_s)
        self.limits = chosen.check()
        text = check_url(url, flag)
        bare, auth = split_url(text)
        if urlsplit(bare).query:
            raise BreakevenError(
                "{0}: got " + escape_braces(shorten(repr(masked_url(text)), 100)) + ", which "
                "holds a query (?...); expected the server's URL, such as http://host:9090",
                flag,
            )
        if token and any(not " " <= c <= "~" for c in token):
            raise BreakevenError(
                "{0}: the token holds a character an HTTP header cannot carry (a control "
                "character or non-ASCII text); the token is not shown",
                "token_env",
            )
        self.root = bare.rstrip("/")
        self.shown = shown_url(self.root, auth)
        self.redact = Redactor(token, *(h.value for h in self.headers), auth=auth)
        httpx, _ = require_http()
        self.httpx = httpx
        sent = {h.name: h.value for h in self.headers}
        sent["Accept-Encoding"] = "gzip, deflate"  # what _read decompresses, nothing else
        if token:
            sent["Authorization"] = f"Bearer {token}"
        self.client = httpx.Client(
            timeout=self.limits.timeout_s,
            headers=sent,
            verify=True,
            auth=httpx.BasicAuth(*auth) if auth else None,
        )
        self.started = time.monotonic()
        self.bytes_received = 0
        """Bytes of every answer as they came [bytes] (compressed where they were)."""
        self.bytes_decoded = 0
        """Bytes of every answer once decompressed, as far as they were [bytes]."""

    def __repr__(self) -> str:
        shown = ", ".join(h.shown for h in self.headers)
        return f"PrometheusAPI({self.shown!r}, headers=[{shown}])"

    def close(self) -> None:
        try:
            self.client.close()
        except (self.httpx.HTTPError, OSError, RuntimeError):  # a request given up on, still open
            pass

    def _fail(self, message: str, name: str | None = None) -> BreakevenError:
        return BreakevenError("{0}: " + escape_braces(self.redact(message)), name or self.flag)

    def _quoted(self, text: str, limit: int = MAX_SHOWN) -> str:
        """Text a server sent, as a message may show it: secrets masked in the whole text
        first, then one line, then cut."""
        return shorten(printable(self.redact(text)), limit)

    def _too_slow(self, which: str) -> BreakevenError:
        lim = self.limits
        if which == "deadline":
            return BreakevenError(
                "{0}: the read from "
                + escape_braces(self.redact(self.shown))
                + f" was not done after {lim.deadline_s:g} s; give a longer {{0}}, a shorter "
                "range or a longer --step",
                "deadline",
            )
        return BreakevenError(
            "{0}: "
            + escape_braces(self.redact(self.shown))
            + f" did not answer a {'range query' if self.flag == 'prometheus' else 'request'} "
            f"in full within {lim.timeout_s:g} s (a slow or stalled server, or one that sends "
            "its answer a few bytes at a time); give a longer {0} or a longer --step",
            "timeout",
        )

    def _too_big(self, what: str) -> BreakevenError:
        return self._fail(
            f"{self.shown} sent an answer of more than {self.limits.max_bytes:,} bytes "
            f"{what} (the most read; {MAX_ANSWER_BYTES >> 20} MiB by default): give a shorter "
            "range, a longer --step or a narrower --match"
        )

    def query_range(
        self, query: str, start: float, end: float, step_s: float, blame: str = "prometheus"
    ) -> list[dict[str, Any]]:
        """The ``matrix`` result of one range query (:func:`matrix_result`: checked, its
        samples as floats); a refused query names ``blame`` (the flag whose text is in it,
        such as ``--match``) where Prometheus says the query is bad."""
        params = {
            "query": query,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step_s:g}",
            **self.query_params,
        }
        where = f"{self.shown}/api/v1/query_range"
        status, body = self._post(self.root + "/api/v1/query_range", params)
        try:
            answer = loads_bounded(body, MAX_DEPTH, what="its body")
        except UnreadableInput as e:
            if status in REFUSED_STATUS:  # a tenancy proxy's text (Prometheus never sends one)
                text = bytes(body[:4096]).decode("utf-8", "replace")
                raise self._refused(where, status, text) from None
            raise self._fail(
                f"{where} answered HTTP {status}, and {e}: is this a Prometheus server?"
            ) from None
        del body
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            if status in REFUSED_STATUS:
                raise self._refused(where, status, repr(answer))
            raise self._fail(
                f"{where} answered HTTP {status} without Prometheus' JSON (an object whose "
                '"status" is "success" or "error"): is this a Prometheus server?'
            )
        if answer["status"] == "error":
            raise self._refused_query(query, status, answer, blame)
        try:
            result = matrix_result(answer)
        except MalformedAnswer as e:
            raise self._fail(f"{where} answered a range query with {e}") from None
        self._keep_warnings(answer.get("warnings"))
        return result

    def _keep_warnings(self, warnings: Any) -> None:
        """Keep the ``warnings`` of a successful answer (Thanos' partial responses: a store
        that did not answer), masked and cut, for the notes."""
        if not isinstance(warnings, list):
            return
        for warning in warnings[:100]:
            text = self._quoted(warning if isinstance(warning, str) else repr(warning), 200)
            if text in self.warnings:
                self.warnings[text] += 1
            elif len(self.warnings) < MAX_WARNINGS:
                self.warnings[text] = 1
            else:
                self.more_warnings += 1

    def warning_notes(self) -> tuple[str, ...]:
        """The answers' warnings as notes, one a distinct warning."""
        notes = tuple(
            f"{self.shown} warned, in {n:,} answer{'s' if n != 1 else ''}: {text} (the "
            "series may be partial)"
            for text, n in self.warnings.items()
        )
        if self.more_warnings:
            notes += (f"{self.shown} gave {self.more_warnings:,} more warnings, not shown",)
        return notes

    def _refused_query(
        self, query: str, status: int, answer: dict[str, Any], blame: str
    ) -> BreakevenError:
        """Prometheus' error answer as one line, naming ``blame`` where the query is bad; a
        401 or 403 says what a multi-tenant server needs (:meth:`_refused`'s advice)."""
        kind, error = answer.get("errorType"), answer.get("error")
        kind_text = f", {self._quoted(kind, 40)}" if isinstance(kind, str) and kind else ""
        text = self._quoted(error) if isinstance(error, str) else "(no error text)"
        message = f"Prometheus refused the query {query!r} (HTTP {status}{kind_text}): {text}"
        if status not in REFUSED_STATUS:
            return self._fail(message, blame if kind == "bad_data" else self.flag)
        if self.headers:
            given = ", ".join(h.shown for h in self.headers)
            return self._fail(f"{message}; with the headers given ({given})", "header")
        return self._fail(f"{message}; a tenant may be needed: --header 'X-Scope-OrgID: TENANT'")

    def _refused(self, where: str, status: int, body: str) -> BreakevenError:
        """A 401 or 403 that is not Prometheus' JSON: a tenant or credentials are missing or
        refused (the server's text masked and cut)."""
        text = self._quoted(body, 160) or "(no text)"
        if self.headers:
            given = ", ".join(h.shown for h in self.headers)
            return self._fail(
                f"{where} answered HTTP {status} ({text}) to the headers given ({given}): "
                "is the tenant or key right?",
                "header",
            )
        return self._fail(
            f"{where} answered HTTP {status} ({text}): a multi-tenant Prometheus (Mimir, "
            "Cortex) needs its tenant, --header 'X-Scope-OrgID: TENANT'; one behind a proxy "
            "a token (--token-env) or a user and password in the URL"
        )

    def get_json(self, path: str) -> Any:
        """The JSON a GET of ``path`` answers (checked as every answer is: its time, its size
        and its nesting); a status other than 200 or a body that is not JSON is one line
        naming :attr:`flag`."""
        where = f"{self.shown}{path}"
        status, body = self._post(self.root + path, None, "GET")
        try:
            answer = loads_bounded(body, MAX_DEPTH, what="its body")
        except UnreadableInput as e:
            raise self._fail(f"{where} answered HTTP {status}, and {e}") from None
        if status != 200:
            raise self._fail(f"{where} answered HTTP {status}: {self._quoted(repr(answer), 160)}")
        return answer

    def _post(
        self, url: str, params: dict[str, str] | None, method: str = "POST"
    ) -> tuple[int, bytearray]:
        """The HTTP status and the body of one POST (or GET), read within the time left.

        The request runs on a worker thread that the caller waits for at most the time left
        (``timeout_s``, or less where the deadline comes first): a server that trickles its
        headers a byte at a time defeats every per-read timeout, never this wait.  A worker
        given up on stops at its next piece of the answer, or its next read's timeout."""
        lim = self.limits
        wait, which = lim.timeout_s, "timeout"
        if lim.deadline_s is not None:
            left = self.started + lim.deadline_s - time.monotonic()
            if left <= 0:
                raise self._too_slow("deadline")
            if left < wait:
                wait, which = left, "deadline"
        end_at = time.monotonic() + wait
        cancel = threading.Event()
        outcome: list[Any] = []

        def work() -> None:
            try:
                outcome.append(self._exchange(url, params, wait, end_at, which, cancel, method))
            except BaseException as e:  # handed to the waiting caller, never printed here
                outcome.append(e)

        worker = threading.Thread(target=work, name="breakeven-prometheus", daemon=True)
        worker.start()
        worker.join(wait)
        if worker.is_alive():
            cancel.set()
            raise self._too_slow(which)
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def _exchange(
        self,
        url: str,
        params: dict[str, str] | None,
        wait: float,
        end_at: float,
        which: str,
        cancel: threading.Event,
        method: str = "POST",
    ) -> tuple[int, bytearray]:
        httpx = self.httpx
        answered = False
        try:
            with self.client.stream(method, url, data=params, timeout=wait) as reply:
                answered = True
                return reply.status_code, self._read(reply, end_at, which, cancel)
        except BreakevenError:
            raise
        except httpx.TimeoutException:
            raise self._too_slow(which) from None
        except (httpx.HTTPError, httpx.InvalidURL, OSError, UnicodeError) as e:
            why = f"{type(e).__name__}: {self._quoted(str(e), 160)}"
            if answered:
                raise self._fail(
                    f"the connection to {self.shown} failed while its answer was read ({why})"
                ) from None
            raise self._fail(
                f"cannot reach {self.shown} ({why}): is {self.server} running there?"
            ) from None

    def _read(self, reply: Any, end_at: float, which: str, cancel: threading.Event) -> bytearray:
        """The body of ``reply``, decompressed, read piece by piece while the time and the
        size limits allow."""
        lim = self.limits
        encoding = reply.headers.get("content-encoding", "")
        layers = [e.strip().lower() for e in encoding.split(",")]
        layers = [e for e in layers if e and e != "identity"]
        if len(layers) > 1 or (layers and layers[0] not in ("gzip", "x-gzip", "deflate")):
            raise self._fail(
                f"{self.shown} answered in an encoding breakeven does not read "
                f"(Content-Encoding: {self._quoted(encoding, 60)}); expected gzip, deflate "
                "or none"
            )
        declared = reply.headers.get("content-length", "").strip()
        if declared.isascii() and declared.isdigit() and int(declared[:16]) > lim.max_bytes:
            raise self._too_big("(its Content-Length)")
        inflate = None
        if layers:
            inflate = zlib.decompressobj(zlib.MAX_WBITS | (32 if "gzip" in layers[0] else 0))
        out = bytearray()
        received = 0
        for piece in reply.iter_raw():
            if cancel.is_set() or time.monotonic() > end_at:
                raise self._too_slow(which)
            received += len(piece)
            self.bytes_received += len(piece)
            if received > lim.max_bytes:
                raise self._too_big("as it came" if inflate else "")
            if inflate is None:
                out += piece
                self.bytes_decoded += len(piece)
                continue
            data = piece
            while data:
                try:
                    more = inflate.decompress(data, min(lim.max_bytes - len(out) + 1, DECODE_PIECE))
                except zlib.error as e:
                    raise self._fail(
                        f"{self.shown} sent a {layers[0]} answer that does not decompress ({e})"
                    ) from None
                out += more
                self.bytes_decoded += len(more)
                if len(out) > lim.max_bytes:
                    raise self._too_big("decompressed")
                if len(out) > EXPANSION_FLOOR and len(out) > lim.max_expansion * received:
                    raise self._fail(
                        f"{self.shown} sent a {layers[0]} answer that grows more than "
                        f"{lim.max_expansion:g} times when decompressed ({received:,} bytes "
                        f"gave {len(out):,} and more): a compression bomb? Not read further"
                    )
                if not more and inflate.unconsumed_tail == data:
                    break
                data = inflate.unconsumed_tail
        return out


__all__ = [
    "CHUNK_STEPS",
    "DEFAULT_TIMEOUT_S",
    "MAX_ANSWER_BYTES",
    "Limits",
    "MalformedAnswer",
    "PrometheusAPI",
    "chunks",
    "limits",
    "matrix_result",
    "parse_duration",
    "parse_time",
    "thanos_params",
    "time_range",
]
