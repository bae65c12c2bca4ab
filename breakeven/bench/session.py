"""``breakeven bench``: measure decode rates against any OpenAI-compatible server.

Measure the baseline right before the server changes, in the same
environment, and record that environment with every row: the two mistakes of
the case study (a doubled ``/v1`` and a baseline from another launch) are what
this module exists to prevent.

For each request, streamed: time to first token (TTFT), the decode rate with
prefill excluded (``(tokens - 1) / (last token time - first token time)``),
the time per output token (TPOT), the number of streamed chunks and tokens per
chunk (under speculation one chunk carries several tokens), and the server's
usage counts.  For each level (a concurrency, closed loop, or a request rate,
open loop): the per-sequence and aggregate rates with their spread, the load
and latencies, and ``accept_len`` from the change of the server's spec-decode
counters on ``/metrics``.  Rows are appended to a measurements CSV
as each request completes, so a crash or Ctrl-C loses nothing measured.

HTTP and server-sent events are handled by httpx and httpx-sse, the ``bench``
extra: ``pip install '.[bench]'`` in breakeven's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from breakeven.bench.arrivals import arrival_times, send_on_schedule
from breakeven.bench.config import Config, Load, server_root
from breakeven.bench.levels import _acceptance, _burst_warning, _Level, _load_summary, _summary
from breakeven.bench.rows import RowWriter, environment, request_row, server_row
from breakeven.bench.stream import (
    RequestResult,
    _chunk_text,
    _event_data,
    _Malformed,
    _prompt_tokens,
    _Timing,
)
from breakeven.core.credentials import Redactor, shown_url, split_url
from breakeven.core.errors import BreakevenError, Terminated, escape_braces
from breakeven.core.quantities import DEFAULT_TOLERANCE
from breakeven.iotools.httpclient import require_http
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.metrics import spec_decode_series
from breakeven.iotools.prometheus import parse_metrics
from breakeven.iotools.replies import Drafts, reply_drafts
from breakeven.iotools.server import (
    ACCEPT_ENCODING,
    ReplyError,
    ServerLaunch,
    endpoint_pairs,
    launch_metrics,
    local_server,
    read_bounded,
    read_head,
    read_server_env,
    started_iso,
    user_pairs,
)
from breakeven.render import printable


def _printable(text: str, limit: int, redact: Redactor) -> str:
    """Server text as it may be shown: redacted (``redact``, a :class:`Redactor`) before
    anything is cut, then printable (:func:`breakeven.render.printable`) and redacted
    again (a secret with control characters inside), at most ``limit`` long.  (Cut first, an
    echoed key kept 26 of its 43 characters: too few for the redactor to find the key.)"""
    text = redact(printable(redact(text, pieces=False)[: 4 * limit]))
    return text[:limit] + ("..." if len(text) > limit else "")


INTERRUPTED_SCRAPE_S = 3.0
"""How long a stopped level waits for its last ``/metrics`` scrape [s]."""


class Bench:
    """One benchmark session against one server."""

    def __init__(
        self, config: Config, on_result: Callable[[int, RequestResult], None] | None = None
    ):
        config.check()
        self.config = config
        self.root = server_root(config.url)
        _, auth = split_url(config.url.strip())
        if auth is not None and config.api_key:
            raise BreakevenError(
                "{0}: holds a user and password, and an API key is given too: "
                "a request carries one Authorization header; give one of them",
                "url",
            )
        self.auth = auth
        self.shown_root = shown_url(self.root, auth)
        self.redact = Redactor(config.api_key, auth=auth)
        self.on_result = on_result or (lambda level, result: None)
        self.httpx, self.httpx_sse = require_http()
        self.headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self.model = config.model
        self.version: str | None = None
        self.engine = "openai-compatible"
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.told = 0  # the warnings a level's summary has carried (before the first: none)
        self.loading = False  # the last /v1/models reply was 503
        self.started = ""
        self.env = ""
        self.served: dict[str, Any] | None = None  # /props or /get_server_info
        self.launch = ServerLaunch()
        self.launch_id = ""
        self.launched_at = ""

    def _client(self) -> Any:
        c = self.config
        timeout = self.httpx.Timeout(
            connect=c.connect_timeout_s,
            read=c.idle_timeout_s,
            write=c.idle_timeout_s,
            pool=c.request_timeout_s,
        )
        # Open loop without a cap: as many connections as requests in flight (the pool would
        # hold requests back, closing the loop).
        most = [load.concurrency for load in c.loads()]
        limits = self.httpx.Limits(
            max_connections=None if None in most else max(m or 1 for m in most) + 2
        )
        auth = self.httpx.BasicAuth(*self.auth) if self.auth else None
        # Only the encodings read within bench's bound on a reply (bounded_bytes): a server's
        # gzip is decoded a step at a time, never whole.
        headers = {**self.headers, "Accept-Encoding": ACCEPT_ENCODING}
        return self.httpx.AsyncClient(timeout=timeout, headers=headers, limits=limits, auth=auth)

    async def _get(self, client: Any, path: str) -> Any:
        """``GET`` of the server's ``path``, its body read within bench's bound on a reply
        (:func:`~breakeven.iotools.server.read_bounded`; past it, :class:`ReplyError`): a
        reply whose ``text`` and ``json()`` are its decoded body's."""
        async with client.stream("GET", self.root + path) as response:
            body = await read_bounded(response)
        headers = [
            (key, value)
            for key, value in response.headers.multi_items()
            if key.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return self.httpx.Response(
            response.status_code, headers=headers, content=body, request=response.request
        )

    def _error(self, message: str, name: str = "url") -> BreakevenError:
        """A readiness error: redacted, one line, naming ``name``."""
        text = escape_braces(self.redact(message))
        return BreakevenError("{0}: " + text, name)

    def _timeout_reason(self, e: BaseException) -> str:
        c = self.config
        if isinstance(e, self.httpx.ConnectTimeout):
            return f"no connection within {c.connect_timeout_s:g} s (--connect-timeout)"
        if isinstance(e, self.httpx.PoolTimeout):
            return f"no free connection within {c.request_timeout_s:g} s (--request-timeout)"
        return f"the server sent nothing for {c.idle_timeout_s:g} s (--idle-timeout)"

    async def probe(self, client: Any) -> None:
        """Wait until the server serves its models; say precisely what is wrong if it never does.

        The whole wait, a stalled reply included, is bounded by ``ready_timeout_s``.
        """
        c = self.config
        url = self.shown_root + "/v1/models"
        try:
            response = await asyncio.wait_for(self._models(client), c.ready_timeout_s)
        except asyncio.TimeoutError:
            if self.loading:
                raise self._error(
                    f"{url} still answers 503 (loading) after "
                    f"{c.ready_timeout_s:g} s (--ready-timeout)"
                ) from None
            raise self._error(
                f"{url} sent no reply within {c.ready_timeout_s:g} s (--ready-timeout)"
            ) from None
        served = self._served(response, url)
        if self.model is None:
            if not served:
                raise self._error(f"the server lists no models at {url}")
            self.model = served[0]
        elif self.model not in served:
            listed = ", ".join(repr(self.redact(s)) for s in served) or "nothing"
            raise self._error(
                f"the server does not serve {self.model!r}; it serves {listed}", "model"
            )
        await self._identify(client)

    async def _models(self, client: Any) -> Any:
        """The first reply of ``/v1/models`` that is not 503 (loading)."""
        url = self.shown_root + "/v1/models"
        while True:
            try:
                response = await self._get(client, "/v1/models")
            except ReplyError as e:
                raise self._error(f"{url}: {e}") from None
            except self.httpx.ConnectError as e:
                reason = str(e) or type(e).__name__
                if (
                    "Name or service not known" in reason
                    or "nodename nor servname" in reason
                    or "getaddrinfo" in reason
                ):
                    why = f"the host name does not resolve ({reason})"
                else:
                    why = f"the connection was refused or failed ({reason}): is the server running?"
                raise self._error(f"cannot reach {url}: {why}") from None
            except self.httpx.TimeoutException as e:
                raise self._error(f"{url}: {self._timeout_reason(e)}") from None
            except self.httpx.HTTPError as e:  # a reset, a broken reply
                raise self._error(
                    f"{url}: the connection failed while reading the reply "
                    f"({type(e).__name__}: {_printable(str(e), 120, self.redact)})"
                ) from None
            self.loading = response.status_code == 503
            if self.loading:
                await asyncio.sleep(0.5)
                continue
            return response

    def _served(self, response: Any, url: str) -> list[str]:
        """The model ids a ``/v1/models`` reply lists."""
        status = response.status_code
        if status == 404:
            hint = (
                " The URL holds /v1 twice: give the server root or one /v1."
                if "/v1/v1/" in url
                else " Is this an OpenAI-compatible server, and is the URL's path its root?"
            )
            raise self._error(f"404 Not Found for {url}.{hint}")
        if status in (401, 403):
            raise self._error(f"{status} from {url}: give the API key with --api-key-env")
        if status != 200:
            raise self._error(f"{status} from {url}: {_printable(response.text, 200, self.redact)}")
        try:
            body = loads_bounded(response.content, what="the answer")
        except ValueError:
            raise self._error(
                f"{url} answered with a body that is not JSON "
                f"({_printable(response.text, 80, self.redact)!r}): is this an "
                "OpenAI-compatible server?"
            ) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._error(
                f'{url} answered JSON without a list of models under "data" (a '
                f"{type(body).__name__}): is this an OpenAI-compatible server?"
            )
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    async def _identify(self, client: Any) -> None:
        """The engine and its version, where the server says (a few seconds at most):
        llama.cpp's ``/props`` (``build_info``), vLLM's ``/version``, SGLang's
        ``/get_server_info`` (``version``)."""
        for path, engine, key in (
            ("/props", "llamacpp", "build_info"),
            ("/version", "vllm", "version"),
            ("/get_server_info", "sglang", "version"),
        ):
            try:
                reply = await asyncio.wait_for(
                    self._get(client, path), min(5.0, self.config.request_timeout_s)
                )
                body = loads_bounded(reply.content) if reply.status_code == 200 else None
            except (self.httpx.HTTPError, ValueError, asyncio.TimeoutError):
                continue
            if isinstance(body, dict) and isinstance(body.get(key), (str, int, float)):
                self.version = _printable(str(body[key]), 40, self.redact).replace(" ", "_")
                self.engine = engine
                self.served = body
                break

    async def _find_launch(self, client: Any) -> None:
        """The server's launch: its settings (from its own process on this host, else the
        file named by ``server_env_from``, else what its endpoints serve), its start and so
        its identity (``launch_id``: the server's address and start, to the second)."""
        metrics = await self.scrape(client)
        started, cache = launch_metrics(metrics)
        served = endpoint_pairs(self.engine, self.served, cache, self.redact)
        parts = urlsplit(self.root)
        if self.config.server_env_from:
            launch = read_server_env(self.config.server_env_from)
        else:
            launch = local_server(parts.hostname or "", parts.port or _default_port(parts.scheme))
        if launch is None or not launch.pairs:
            note = launch.note if launch is not None else ""
            launch = ServerLaunch(env_from="endpoints", where=f"{self.shown_root}", note=note)
        launch = ServerLaunch(
            (*launch.pairs, *served, *user_pairs(self.config.env)),
            launch.env_from,
            launch.started if launch.started is not None else started,
            launch.where,
            launch.note,
        )
        self.launch = launch
        self.launched_at = started_iso(launch.started)
        pid = launch.where.split()[1] if launch.where.startswith("pid ") else ""
        # A launch's start to the second, and its process where known: two launches on one
        # port a second apart (a fast test server) are still two.
        ident = f"{parts.netloc}@{self.launched_at}" + (f"#{pid}" if pid else "")
        self.launch_id = ident if self.launched_at else ""
        if launch.note:
            self.warn(launch.note)

    def launch_summary(self) -> dict[str, Any]:
        """The server's launch as the rows record it, and where its fingerprint came from."""
        return {
            "launch_id": self.launch_id or None,
            "launched_at": self.launched_at or None,
            "env_from": self.launch.env_from,
            "read_from": self.launch.where,
            "settings": len(self.launch.pairs),
            "sampling": self.config.sampling(),
        }

    def _payload(self, prompt: str) -> tuple[str, dict[str, Any]]:
        c = self.config
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": c.max_tokens,
            "stream": True,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if c.ignore_eos:
            body["ignore_eos"] = True
        if self.engine == "sglang":
            # SGLang sends a request's draft counts (sglext.spec_tokens_details, read by
            # reply_drafts) only when asked (python/sglang/srt/entrypoints/openai/protocol.py,
            # return_spec_tokens_details on CompletionRequest and ChatCompletionRequest);
            # an SGLang without the field ignores it (pydantic's default).  Not sent to other
            # servers: trtllm-serve refuses unknown fields (OpenAIBaseModel extra="forbid").
            # (return_meta_info would not do: python/sglang/srt/entrypoints/openai/
            # serving_chat.py refuses it with stream=true.)
            body["return_spec_tokens_details"] = True
        if c.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            return "/v1/chat/completions", body
        body["prompt"] = prompt
        return "/v1/completions", body

    async def one_request(
        self, client: Any, prompt: str, level: _Level | None = None, start: float | None = None
    ) -> RequestResult:
        """Stream one request and time its tokens from ``start`` (``time.perf_counter``; default
        now: an open-loop request is timed from when it was due); any fault is a failed
        request with a reason (redacted), never an exception.  ``request_timeout_s`` bounds
        the whole request."""
        try:
            return await asyncio.wait_for(
                self._stream(client, prompt, level, start), self.config.request_timeout_s
            )
        except asyncio.TimeoutError:
            return RequestResult(
                False,
                f"the request took longer than "
                f"{self.config.request_timeout_s:g} s (--request-timeout)",
            )

    async def _stream(
        self, client: Any, prompt: str, level: _Level | None, start: float | None = None
    ) -> RequestResult:
        """One request, streamed and timed; a fault is a failed request with its reason."""
        path, body = self._payload(prompt)
        url = self.shown_root + path
        timing = _Timing(time.perf_counter() if start is None else start)
        try:
            async with self.httpx_sse.aconnect_sse(
                client, "POST", self.root + path, json=body
            ) as source:
                if source.response.status_code != 200:
                    return await self._refused(source.response, url)
                try:
                    done = await self._read_events(source.response, timing, level)
                except (_Malformed, ReplyError) as e:
                    return RequestResult(False, str(e))
        except self.httpx.TimeoutException as e:
            return RequestResult(False, self._timeout_reason(e))
        except (self.httpx.HTTPError, self.httpx_sse.SSEError) as e:
            reason = _printable(str(e), 200, self.redact)
            return RequestResult(False, f"{type(e).__name__} mid-stream: {reason}")
        return timing.result(done)

    async def _refused(self, response: Any, url: str) -> RequestResult:
        """The failed request of a reply other than 200, with its body (redacted, shortened)."""
        try:  # its beginning only: 64 KiB, of which 200 characters are shown
            head = await read_head(response, 1 << 16)
        except ReplyError as e:
            return RequestResult(False, f"HTTP {response.status_code} from {url}: {e}")
        body = head.decode(response.encoding or "utf-8", errors="replace")
        text = _printable(body, 200, self.redact)
        return RequestResult(False, f"HTTP {response.status_code} from {url}: {text}")

    async def _read_events(self, response: Any, timing: _Timing, level: _Level | None) -> bool:
        """Time the stream's events until ``[DONE]``; returns whether it came.  Each token
        streamed counts in ``level``; raises :class:`_Malformed` for an event off the protocol,
        :class:`ReplyError` for a stream past bench's bound on a reply (:func:`_event_data`)."""
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "text/event-stream":
            shown = _printable(kind, 80, self.redact)
            raise _Malformed(f"a reply of Content-Type {shown!r}, not text/event-stream")
        async with contextlib.aclosing(_event_data(response)) as events:
            async for data in events:
                if data.strip() == "[DONE]":
                    return True
                now = time.perf_counter()
                text, usage, drafted, prompt = self._event(data)
                if prompt is not None:
                    timing.prompt_tokens = prompt
                streamed = timing.add(now, text, usage, drafted)
                if level is not None:
                    level.streamed += streamed
        return False

    def _event(self, data: str) -> tuple[str, int | None, Drafts, int | None]:
        """One server-sent event's text, its usage's completion tokens, what it says of the
        request's drafts (:func:`~breakeven.iotools.replies.reply_drafts`) and its usage's prompt tokens."""
        try:
            chunk = loads_bounded(data, what="the event")
            text, usage = _chunk_text(chunk)
            drafted = reply_drafts(chunk)
        except ValueError:  # UnreadableInput too: not JSON, nested too deep
            shown = _printable(data, 80, self.redact)
            raise _Malformed(f"malformed server-sent event: {shown!r}") from None
        return text, usage, drafted, _prompt_tokens(chunk)

    async def scrape(self, client: Any) -> str | None:
        """The server's ``/metrics`` text, or None (absent, failing, not in time, or past
        bench's bound on a reply: then a warning says so)."""
        try:
            response = await asyncio.wait_for(
                self._get(client, "/metrics"), min(10.0, self.config.request_timeout_s)
            )
        except (self.httpx.HTTPError, asyncio.TimeoutError):
            return None
        except ReplyError as e:
            self.warn(
                f"{self.shown_root}/metrics: {e}; accept_len and the server's own rates are "
                "left empty"
            )
            return None
        return response.text if response.status_code == 200 else None

    async def level(self, client: Any, load: Load | int, write: Callable[[dict], None]) -> dict:
        """Run one level (``load``: a :class:`Load`, or a concurrency), writing each request's
        row as it completes, then the level's server row (its counters' change over the level).

        A closed-loop level keeps its concurrency's requests in flight, each sent as one
        finishes; an open-loop level sends each request when its schedule says
        (:func:`~breakeven.bench.arrivals.send_on_schedule`), whatever the server's progress.
        ``/metrics`` is read only before and after the level, never while its requests
        stream: a vLLM server builds ``/metrics`` in the process that streams the replies,
        and a scrape between requests held the next request's first token back (first tokens
        of 1.7-3.1 s, then bursts, on this suite's CPU server), so the client measured the
        scrape.  A row's level columns (aggregate_tok_s, tok_s_sd, level_requests) describe
        the level from its start to that row's completion; its accept_len is the request's
        own where the server says it per request, else empty: the level's is the server
        row's.  An interruption (Ctrl-C, SIGTERM) loses only the requests in flight: the
        server row of the level so far is written first (one scrape, at most a few seconds).
        """
        load = load if isinstance(load, Load) else Load(load)
        warned = self.told  # and those said before the first level (its launch, its scrape)
        before = await self.scrape(client)
        level = _Level(load, time.perf_counter(), before)
        try:
            await self._drive(client, level, write)
        except asyncio.CancelledError:
            # Stopped: the level's counters so far, read once (briefly), are not lost.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                after = await asyncio.wait_for(self.scrape(client), INTERRUPTED_SCRAPE_S)
                self._close_level(level, after, write)
            raise
        summary = self._close_level(level, await self.scrape(client), write)
        self._warn_no_counters(load.words, level.before, summary.pop("_after"), summary)
        if summary["bursts"]:
            self.warn(_burst_warning(load.words, summary))
        behind = _behind_schedule(load, summary.get("arrival_rate"))
        if behind:
            self.warn(behind)
        summary["launch"] = self.launch_summary()
        if len(self.warnings) > warned:
            summary["warnings"] = self.warnings[warned:]
        self.told = len(self.warnings)
        return summary

    async def _drive(self, client: Any, level: _Level, write: Callable[[dict], None]) -> None:
        """Send the level's requests, closed loop or on its schedule (open loop), and record
        each as it finishes (:meth:`_record`)."""
        c, load = self.config, level.load
        n = c.requests_in(load)
        speculating = level.speculating

        async def measure(i: int, due: float | None = None) -> None:
            prompt, category = c.prompt_at(i)
            sent = level.sending()
            start = sent if due is None else due  # open loop: timed from when it was due
            result = await self.one_request(client, prompt, level, start)
            level.done(result, start)
            self._record(level, result, category, speculating, write)

        if load.request_rate is not None:
            times = arrival_times(load.request_rate, n, c.burstiness, c.seed)
            await send_on_schedule(times, measure, level.started, load.concurrency)
            return
        queued = iter(range(n))  # prompts are taken as requests start: nothing grows with n

        async def worker() -> None:
            for i in queued:
                await measure(i)

        await asyncio.gather(*(worker() for _ in range(load.concurrency or 1)))

    def _record(
        self,
        level: _Level,
        result: RequestResult,
        category: str,
        speculating: bool,
        write: Callable[[dict], None],
    ) -> None:
        """A finished request: told to ``on_result``, its row written (a failure noted)."""
        load = level.load
        self.on_result(load.request_rate or load.concurrency or 0, result)
        if not result.ok:
            self.failures.append(f"{load.words}: {self.redact(result.error)}")
        elif not math.isnan(result.decode_tok_s):
            summary = _summary(level)
            write(request_row(self, load, level.written, result, summary, category, speculating))
            level.written += 1

    def _close_level(
        self, level: _Level, after: str | None, write: Callable[[dict], None]
    ) -> dict[str, Any]:
        """The level's summary with its counters' change since its start (``after``, a
        scrape), and its server row written where the counters tell something."""
        summary = _summary(level)
        summary.update(_load_summary(level))
        summary.update(self._acceptance(level.before, after))
        server = self._server_view(level.before, after, summary["requests"] - summary["failed"])
        if server:
            summary["server"] = server
            write(server_row(self, level.load, summary, server))
            self._warn_disagreement(level.load.words, summary["tok_s"], server.get("tok_s"))
        summary["_after"] = after
        return summary

    def _records(
        self, before: str | None, after: str | None, requests: int | None = None
    ) -> list[dict[str, Any]]:
        """The change of the server's counters over a level (:mod:`breakeven.iotools.prometheus`)."""
        if before is None or after is None:
            return []
        try:
            return parse_metrics(
                after,
                before,
                source="bench",
                num_spec_tokens=self.config.num_spec_tokens,
                requests=requests,
            )
        except ImportError:
            self.warn(
                "reading /metrics needs prometheus_client: pip install '.[bench]' in breakeven's folder; "
                "accept_len and the server's own rates are left empty"
            )
        except ValueError:
            self.warn(
                f"{self.shown_root}/metrics is not Prometheus text: accept_len and the "
                "server's own rates are left empty"
            )
        return []

    def _acceptance(self, before: str | None, after: str | None) -> dict[str, Any]:
        return _acceptance(self._records(before, after))

    def _server_view(self, before: str | None, after: str | None, requests: int) -> dict[str, Any]:
        """The level as the server's counters saw it over its ``requests`` (those that
        finished): its own rate and step or cycle where they tell them (llama.cpp's
        generation time, vLLM's decode-time histograms), and its acceptance, pooled over the
        whole level.  Empty where they tell neither."""
        keys = (
            "tok_s",
            "step_ms",
            "cycle_ms",
            "accept_len",
            "acceptance_rate",
            "num_spec_tokens",
            "num_drafts",
            "draft_tokens",
            "accepted_tokens",
        )
        for r in self._records(before, after, requests):
            timed = r.get("tok_s") is not None and (r.get("step_ms") or r.get("cycle_ms"))
            accepted = r.get("accept_len") is not None and not math.isnan(r["accept_len"])
            if timed or accepted:
                return {key: r.get(key) for key in keys if r.get(key) is not None}
        return {}

    def _warn_disagreement(self, words: str, client: float, server: Any) -> None:
        """A warning where the level's per-sequence rate and the server's own differ by more
        than :data:`~breakeven.core.quantities.DEFAULT_TOLERANCE`: one of them did not measure
        decoding (a client that fell behind its streams, or requests of others)."""
        if not isinstance(server, float) or not (client > 0 and server > 0):
            return
        if abs(client / server - 1) > DEFAULT_TOLERANCE:
            self.warn(
                f"at {words} the client measured {client:.4g} tok/s per "
                f"sequence and the server's counters {server:.4g} ({client / server - 1:+.0%}): "
                "other requests on the server, or a client that fell behind its streams?"
            )

    def warn(self, message: str) -> None:
        """One warning line for the command to print (each said once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def _warn_no_counters(
        self, words: str, before: str | None, after: str | None, summary: dict[str, Any]
    ) -> None:
        """Why a level given ``-k`` has no accept_len, as it is: ``/metrics`` answered nothing,
        has no spec-decode series, or has them and they did not move (nothing was drafted
        at this level: ngram drafts only where a prompt repeats itself)."""
        k = self.config.num_spec_tokens
        if not k or summary.get("accept_len") is not None:
            return
        where = f"{self.shown_root}/metrics"
        series = spec_decode_series()
        # llama-server shows them only when started so; another engine's flags differ.
        hint = (
            " (llama-server needs --metrics and --spec-type)"
            if self.engine in ("llamacpp", "openai-compatible")
            else ""
        )
        if before is None or after is None:
            why = "answers nothing"
        elif any(name.rstrip("*") in after for name in series):
            why = (
                "has spec-decode counters that did not move (nothing was drafted: is a draft set?)"
            )
            hint = ""
        else:
            why = f"shows no spec-decode counters ({', '.join(series)})"
        self.warn(f"-k {k} was given, but {where} {why}: accept_len is left empty at {words}{hint}")

    async def run(self, write: Callable[[dict], None]) -> list[dict]:
        async with self._client() as client:
            await self.probe(client)
            self.started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            await self._find_launch(client)
            self.env = environment(
                self.shown_root, self.model, self.version, self.launch, self.config
            )
            return [await self.level(client, load, write) for load in self.config.loads()]


ARRIVAL_TOLERANCE = 0.1
"""An open-loop level whose achieved arrival rate falls this share short of its offered rate
is said to have fallen behind its schedule [fraction]."""


def _behind_schedule(load: Load, achieved: Any) -> str:
    """A warning where an open-loop level sent its requests more slowly than it offered them:
    they waited for a slot (``--max-concurrency``), or the client could not keep up."""
    offered = load.request_rate
    if offered is None or not isinstance(achieved, float) or math.isnan(achieved):
        return ""
    if achieved >= (1 - ARRIVAL_TOLERANCE) * offered:
        return ""
    why = (
        "requests waited for a slot (--max-concurrency): the server kept fewer in flight than "
        "the rate asks"
        if load.concurrency
        else "the client could not keep up (a busy machine?): its requests went late"
    )
    return (
        f"at {load.words} the requests were sent at {achieved:.4g} req/s, "
        f"{1 - achieved / offered:.0%} short of the rate offered: {why}"
    )


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


async def _until_terminated(run: Any) -> Any:
    """``await run``, cancelled at its next await on SIGTERM (then :class:`Terminated`): a row
    being written is never cut."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run)
    terminated = []

    def on_sigterm() -> None:
        terminated.append(True)
        task.cancel()

    previous = signal.getsignal(signal.SIGTERM)
    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
        return await task
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            raise Terminated() from None
        raise
    finally:
        # remove_signal_handler sets SIGTERM to its default (death, with no message and no
        # cleanup); the handler that was there (the command line's, a sweep's) is put back.
        loop.remove_signal_handler(signal.SIGTERM)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run_bench(
    config: Config, out: str | None, on_result: Callable[[int, RequestResult], None] | None = None
) -> tuple[list[dict], list[str], int]:
    """Measure every level; returns (level summaries, failures, rows written).

    Rows are appended to ``out`` as requests complete.  SIGTERM (``timeout``,
    ``docker stop``) is handled like Ctrl-C: the run stops at once and
    :class:`Terminated` (a KeyboardInterrupt) is raised; every row written is kept.
    """
    bench = Bench(config, on_result)
    writer = RowWriter(out)
    try:
        levels = asyncio.run(_until_terminated(bench.run(writer)))
    finally:
        writer.close()
    return levels, bench.failures, writer.rows
