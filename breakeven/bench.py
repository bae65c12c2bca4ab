"""``breakeven bench``: measure decode rates against any OpenAI-compatible server.

Measure the baseline right before the server changes, in the same
environment, and record that environment with every row: the two mistakes of
the case study (a doubled ``/v1`` and a baseline from another launch) are what
this module exists to prevent.

For each request, streamed: time to first token (TTFT), the decode rate with
prefill excluded (``(tokens - 1) / (last token time - first token time)``),
the time per output token (TPOT), the number of streamed chunks and tokens per
chunk (under speculation one chunk carries several tokens), and the server's
usage counts.  For each concurrency level: the per-sequence and aggregate
rates with their spread, and ``accept_len`` from the change of the server's
spec-decode counters on ``/metrics``.  Rows are appended to a measurements CSV
as each request completes, so a crash or Ctrl-C loses nothing measured.

HTTP and server-sent events are handled by httpx and httpx-sse, the ``bench``
extra: ``pip install 'breakeven[bench]'``.
"""

from __future__ import annotations

import asyncio
import csv
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from breakeven.errors import BreakevenError, invalid_value
from breakeven.schema import COLUMN_NAMES

INSTALL_HINT = "breakeven bench needs httpx and httpx-sse: pip install 'breakeven[bench]'"
DEFAULT_PROMPTS = (
    "Explain how speculative decoding speeds up large language model inference.",
    "Write a short story about a lighthouse keeper who collects old maps.",
    "List the steps to profile a distributed training job and find its bottleneck.",
    "Describe the water cycle to a ten-year-old.",
)
# Columns of a bench CSV: the schema's, then what bench measures besides.
BENCH_COLUMNS = (*COLUMN_NAMES, "origin", "tpot_ms", "itl_ms", "ttft_ms", "completion_tokens",
                 "chunks", "tokens_per_chunk", "tok_s_sd", "level_requests")  # fmt: skip
ENV_PREFIXES = ("NCCL_", "CUDA_")


def _require_http() -> Any:
    try:
        import httpx
        import httpx_sse
    except ImportError:
        raise BreakevenError(INSTALL_HINT) from None
    return httpx, httpx_sse


def server_root(url: str) -> str:
    """The server's root URL from any of ``http://host:8000``, ``.../``, ``.../v1``, ``.../v1/``.

    Endpoints are then ``root + "/v1/models"`` and so on: never ``/v1/v1/``.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid_value("url", url, "an http:// or https:// URL with a host, such as "
                            "http://localhost:8000")  # fmt: skip
    try:
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise invalid_value("url", url, "a port number between 0 and 65535") from None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass
class RequestResult:
    """One streamed request."""

    ok: bool
    error: str = ""
    ttft_ms: float = math.nan
    decode_s: float = math.nan
    completion_tokens: int = 0
    first_chunk_tokens: float = 1.0
    chunks: int = 0
    chunk_gaps_ms: list[float] = field(default_factory=list)

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first chunk over the time after it [tok/s]: prefill excluded."""
        decoded = self.completion_tokens - self.first_chunk_tokens
        if decoded <= 0 or not self.decode_s > 0:
            return math.nan
        return decoded / self.decode_s

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first [ms]."""
        rate = self.decode_tok_s
        return 1000.0 / rate if rate > 0 else math.nan

    @property
    def itl_ms(self) -> float:
        """Mean gap between streamed chunks [ms]; about accept_len x TPOT under speculation."""
        return statistics.fmean(self.chunk_gaps_ms) if self.chunk_gaps_ms else math.nan


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
    chat: bool = False
    api_key: str | None = field(default=None, repr=False)  # never printed, never written
    num_spec_tokens: int | None = None
    spec_method: str | None = None
    hardware: str | None = None
    env: str | None = None
    ready_timeout_s: float = 120.0
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 600.0
    ignore_eos: bool = True

    def check(self) -> None:
        server_root(self.url)
        for c in self.concurrency:
            if not isinstance(c, int) or c < 1:
                raise invalid_value("concurrency", c, "a whole number of requests >= 1")
        if self.max_tokens < 2:
            raise invalid_value("max_tokens", self.max_tokens, "at least 2 tokens, so that "
                                "a decode rate exists")  # fmt: skip
        if self.requests is not None and self.requests < 1:
            raise invalid_value("requests", self.requests, "a whole number >= 1")
        if not self.prompts:
            raise BreakevenError("{0}: holds no prompts", "prompts")


def environment(root: str, model: str, version: str | None) -> str:
    """The fingerprint written to every row: NCCL_*/CUDA_* variables, URL, model, version, host."""
    pairs = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)
             and " " not in v]  # fmt: skip
    pairs += [f"url={root}", f"model={model.replace(' ', '_')}", f"host={platform.node()}"]
    if version:
        pairs.append(f"server_version={version}")
    return " ".join(pairs)


def read_prompts(path: str) -> list[str]:
    """Prompts from a file: one per line, or JSON Lines with a "prompt" key."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise BreakevenError("{0}: cannot read " + repr(path).replace("{", "{{") +
                             f" ({e.strerror or e})", "prompts") from None  # fmt: skip
    prompts = []
    for i, line in enumerate(lines, start=1):
        if line.lstrip().startswith("{"):
            try:
                prompts.append(str(json.loads(line)["prompt"]))
            except (ValueError, KeyError, TypeError):
                raise BreakevenError("{0}: " + f"{path}, line {i}: expected a JSON object with a "
                                     "\"prompt\" key, or a plain line", "prompts") from None  # fmt: skip
        else:
            prompts.append(line)
    if not prompts:
        raise BreakevenError(
            "{0}: " + repr(path).replace("{", "{{") + " holds no prompts", "prompts"
        )
    return prompts


class Bench:
    """One benchmark session against one server."""

    def __init__(
        self, config: Config, on_result: Callable[[int, RequestResult], None] | None = None
    ):
        config.check()
        self.config = config
        self.root = server_root(config.url)
        self.on_result = on_result or (lambda level, result: None)
        self.httpx, self.httpx_sse = _require_http()
        self.headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self.model = config.model
        self.version: str | None = None
        self.engine = "openai-compatible"
        self.failures: list[str] = []
        self.started = ""
        self.env = ""

    def _client(self) -> Any:
        timeout = self.httpx.Timeout(self.config.request_timeout_s,
                                     connect=self.config.connect_timeout_s)  # fmt: skip
        limits = self.httpx.Limits(max_connections=max(self.config.concurrency) + 2)
        return self.httpx.AsyncClient(timeout=timeout, headers=self.headers, limits=limits)

    async def probe(self, client: Any) -> None:
        """Wait until the server serves its models; say precisely what is wrong if it never does."""
        url = self.root + "/v1/models"
        deadline = time.monotonic() + self.config.ready_timeout_s
        while True:
            try:
                response = await client.get(url)
            except self.httpx.ConnectError as e:
                reason = str(e) or type(e).__name__
                if "Name or service not known" in reason or "nodename nor servname" in reason \
                        or "getaddrinfo" in reason:  # fmt: skip
                    why = f"the host name does not resolve ({reason})"
                else:
                    why = f"the connection was refused or failed ({reason}): is the server running?"
                raise BreakevenError("{0}: cannot reach " + url + ": " + why, "url") from None
            except self.httpx.TimeoutException:
                raise BreakevenError("{0}: " + url + " did not answer within "
                                     f"{self.config.connect_timeout_s:g} s", "url") from None  # fmt: skip
            if response.status_code == 503 and time.monotonic() < deadline:
                await asyncio.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
                continue
            if response.status_code == 404:
                hint = (" The URL holds /v1 twice: give the server root or one /v1."
                        if "/v1/v1/" in url else
                        " Is this an OpenAI-compatible server, and is the URL's path its root?")  # fmt: skip
                raise BreakevenError("{0}: 404 Not Found for " + url + "." + hint, "url")
            if response.status_code == 503:
                raise BreakevenError("{0}: " + url + " still answers 503 (loading) after "
                                     f"{self.config.ready_timeout_s:g} s", "url")  # fmt: skip
            if response.status_code in (401, 403):
                raise BreakevenError("{0}: " + f"{response.status_code} from {url}: give the "
                                     "API key with --api-key-env", "url")  # fmt: skip
            if response.status_code != 200:
                raise BreakevenError("{0}: " + f"{response.status_code} from {url}", "url")
            break
        served = [m.get("id") for m in response.json().get("data", [])]
        if self.model is None:
            if not served:
                raise BreakevenError("{0}: the server lists no models at " + url, "url")
            self.model = served[0]
        elif self.model not in served:
            raise BreakevenError("{0}: " + f"the server does not serve {self.model!r}; it serves "
                                 f"{', '.join(map(repr, served)) or 'nothing'}", "model")  # fmt: skip
        for path, engine in (("/version", "vllm"), ("/get_server_info", "sglang")):
            try:
                reply = await client.get(self.root + path)
                if reply.status_code == 200:
                    self.version = str(reply.json().get("version"))
                    self.engine = engine
                    break
            except (self.httpx.HTTPError, ValueError, AttributeError):
                continue

    def _payload(self, prompt: str) -> tuple[str, dict[str, Any]]:
        c = self.config
        body: dict[str, Any] = {"model": self.model, "max_tokens": c.max_tokens, "stream": True,
                                "temperature": 0.0,
                                "stream_options": {"include_usage": True,
                                                   "continuous_usage_stats": True}}  # fmt: skip
        if c.ignore_eos:
            body["ignore_eos"] = True
        if c.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            return self.root + "/v1/chat/completions", body
        body["prompt"] = prompt
        return self.root + "/v1/completions", body

    async def one_request(self, client: Any, prompt: str) -> RequestResult:
        """Stream one request and time its tokens."""
        import json

        url, body = self._payload(prompt)
        start = time.perf_counter()
        first = last = None
        tokens_seen = 0
        usage_tokens = first_usage = None
        chunks = 0
        gaps: list[float] = []
        done = False
        try:
            async with self.httpx_sse.aconnect_sse(client, "POST", url, json=body) as source:
                if source.response.status_code != 200:
                    await source.response.aread()
                    return RequestResult(False, f"HTTP {source.response.status_code} from {url}: "
                                         f"{source.response.text[:200]}")  # fmt: skip
                async for event in source.aiter_sse():
                    if event.data.strip() == "[DONE]":
                        done = True
                        break
                    now = time.perf_counter()
                    try:
                        chunk = json.loads(event.data)
                    except ValueError:
                        return RequestResult(
                            False, f"malformed server-sent event: {event.data[:80]!r}"
                        )
                    usage = chunk.get("usage") or {}
                    if usage.get("completion_tokens") is not None:
                        usage_tokens = int(usage["completion_tokens"])
                    choices = chunk.get("choices") or []
                    text = ""
                    if choices:
                        c0 = choices[0]
                        text = c0.get("text") or (c0.get("delta") or {}).get("content") or ""
                    if not text:
                        continue
                    chunks += 1
                    tokens_seen = usage_tokens if usage_tokens is not None else tokens_seen + 1
                    if first is None:
                        first = now
                        first_usage = usage_tokens
                    else:
                        gaps.append(1000.0 * (now - last))
                    last = now
        except self.httpx.HTTPError as e:
            return RequestResult(False, f"{type(e).__name__} mid-stream: {e}")
        if not done:
            return RequestResult(False, "the stream ended before [DONE]")
        if first is None:
            return RequestResult(False, "no tokens came back")
        total = usage_tokens if usage_tokens is not None else tokens_seen
        # The first chunk's tokens arrive with the first token (prefill); decode is the rest.
        # Without per-chunk usage, a chunk is taken to carry the mean number of tokens.
        first_tokens = first_usage if first_usage is not None else total / chunks
        return RequestResult(True, ttft_ms=1000.0 * (first - start), decode_s=last - first,
                             completion_tokens=total, first_chunk_tokens=first_tokens,
                             chunks=chunks, chunk_gaps_ms=gaps)  # fmt: skip

    async def scrape(self, client: Any) -> str | None:
        try:
            response = await client.get(self.root + "/metrics")
        except self.httpx.HTTPError:
            return None
        return response.text if response.status_code == 200 else None

    async def level(self, client: Any, concurrency: int, write: Callable[[dict], None]) -> dict:
        """Run one concurrency level and write a row per completed request.

        Rows carry the level's aggregate rate and accept_len, known only when the
        level ends; if it is interrupted (Ctrl-C, an error), the requests completed
        so far are written without them, so nothing measured is lost.
        """
        c = self.config
        n = c.requests or max(8, 4 * concurrency)
        queue: asyncio.Queue[str] = asyncio.Queue()
        for i in range(n):
            queue.put_nowait(c.prompts[i % len(c.prompts)])
        before = await self.scrape(client)
        results: list[RequestResult] = []
        started = time.perf_counter()

        async def worker() -> None:
            while not queue.empty():
                result = await self.one_request(client, queue.get_nowait())
                results.append(result)
                self.on_result(concurrency, result)
                if not result.ok:
                    self.failures.append(f"concurrency {concurrency}: {result.error}")

        finished = False
        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            finished = True
        finally:
            summary = _summary(concurrency, results, time.perf_counter() - started)
            if finished:
                summary.update(self._acceptance(before, await self.scrape(client)))
            good = [r for r in results if r.ok and not math.isnan(r.decode_tok_s)]
            for i, r in enumerate(good):
                write(self._row(concurrency, i, r, summary))
        return summary

    def _acceptance(self, before: str | None, after: str | None) -> dict[str, Any]:
        if before is None or after is None:
            return {}
        try:
            from breakeven.iotools.prometheus import read_metrics

            records = read_metrics(
                after, before, source="bench", num_spec_tokens=self.config.num_spec_tokens
            )
        except (ImportError, ValueError):
            return {}
        for r in records:
            if r.get("accept_len") is not None and not math.isnan(r["accept_len"]):
                return {"accept_len": r["accept_len"], "acceptance_rate": r.get("acceptance_rate"),
                        "num_spec_tokens": r.get("num_spec_tokens")}  # fmt: skip
        return {}

    def _row(self, concurrency: int, i: int, r: RequestResult, level: dict) -> dict[str, Any]:
        c = self.config
        k = c.num_spec_tokens if c.num_spec_tokens is not None else level.get("num_spec_tokens")
        return {
            "run_id": f"{c.label}-c{concurrency}-{self.started}", "label": c.label,
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "engine": self.engine, "model": self.model,
            "hardware": c.hardware, "concurrency": concurrency, "num_spec_tokens": k,
            "spec_method": c.spec_method, "tok_s": r.decode_tok_s,
            "aggregate_tok_s": level["aggregate_tok_s"], "accept_len": level.get("accept_len"),
            "acceptance_rate": level.get("acceptance_rate"), "env": self.env,
            "source": f"bench {self.root} concurrency {concurrency} request {i + 1}",
            "origin": "client", "tpot_ms": r.tpot_ms, "itl_ms": r.itl_ms, "ttft_ms": r.ttft_ms,
            "completion_tokens": r.completion_tokens, "chunks": r.chunks,
            "tokens_per_chunk": r.completion_tokens / r.chunks if r.chunks else None,
            "tok_s_sd": level["tok_s_sd"], "level_requests": level["requests"],
        }  # fmt: skip

    async def run(self, write: Callable[[dict], None]) -> list[dict]:
        async with self._client() as client:
            await self.probe(client)
            self.started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            self.env = environment(self.root, self.model, self.version)
            if self.config.env:
                self.env += " " + self.config.env
            return [await self.level(client, c, write) for c in self.config.concurrency]


def _summary(concurrency: int, results: list[RequestResult], wall_s: float) -> dict[str, Any]:
    """A level's request counts, mean per-sequence rate, its spread and the aggregate rate."""
    good = [r for r in results if r.ok and not math.isnan(r.decode_tok_s)]
    rates = [r.decode_tok_s for r in good]
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "failed": len(results) - len(good),
        "tok_s": statistics.fmean(rates) if rates else math.nan,
        "tok_s_sd": statistics.stdev(rates) if len(rates) > 1 else math.nan,
        "aggregate_tok_s": sum(r.completion_tokens for r in good) / wall_s
        if wall_s > 0
        else math.nan,
    }


class RowWriter:
    """Appends rows to a measurements CSV, flushing each one: a crash keeps every row written."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.rows = 0
        self.file = None
        if path is None:
            return
        exists = os.path.exists(path) and os.path.getsize(path) > 0
        if exists:
            with open(path, encoding="utf-8", newline="") as f:
                header = next(csv.reader(line for line in f if not line.startswith("#")), [])
            if tuple(header) != BENCH_COLUMNS:
                raise BreakevenError("{0}: " + repr(path).replace("{", "{{") + " has other "
                                     "columns than bench writes; append to a bench CSV or give a "
                                     "new file", "out")  # fmt: skip
        self.file = open(path, "a", encoding="utf-8", newline="")
        self.writer = csv.writer(self.file, lineterminator="\n")
        if not exists:
            self.writer.writerow(BENCH_COLUMNS)

    def __call__(self, row: dict[str, Any]) -> None:
        self.rows += 1
        if self.file is None:
            return
        self.writer.writerow(["" if (v := row.get(col)) is None or (isinstance(v, float) and
                              math.isnan(v)) else v for col in BENCH_COLUMNS])  # fmt: skip
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def run_bench(
    config: Config, out: str | None, on_result: Callable[[int, RequestResult], None] | None = None
) -> tuple[list[dict], list[str], int]:
    """Measure every concurrency level; returns (level summaries, failures, rows written)."""
    bench = Bench(config, on_result)
    writer = RowWriter(out)
    try:
        levels = asyncio.run(bench.run(writer))
    finally:
        writer.close()
    return levels, bench.failures, writer.rows
