"""One streamed request as ``breakeven bench`` reads it: the server-sent events of its reply,
the text and usage of each chunk, the timing of its chunks (the window read live) and the
request's record, :class:`RequestResult`.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from breakeven.iotools.replies import Drafts, count
from breakeven.iotools.server import bounded_bytes


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
    draft_tokens: int | None = None
    """Tokens the server drafted for the request (llama.cpp's ``timings.draft_n``, vLLM's
    ``metrics.speculative_decoding.num_draft_tokens``)."""
    accepted_tokens: int | None = None
    """Of them, accepted (``timings.draft_n_accepted``, ``num_accepted_draft_tokens``)."""
    num_drafts: int | None = None
    """Its verify cycles that drafted (vLLM's ``num_spec_steps``)."""
    acceptance_histogram: str | None = None
    """Its cycles that accepted 0, 1, ... k drafted tokens, joined by ``;`` (vLLM's
    ``acceptance_histogram``)."""
    num_spec_tokens: int | None = None
    """The server's k, where it says it per request (vLLM's ``num_spec_tokens``)."""
    prompt_tokens: int | None = None
    """The prompt's tokens, where the server's usage says them [tokens]."""
    e2e_ms: float = math.nan
    """From sending the request (its due time, open loop) to its last chunk with text [ms]."""
    start_s: float = math.nan
    """When the request was sent (due, open loop), since its level began [s]."""

    @property
    def context_tokens(self) -> float:
        """The mean tokens in the request's KV cache while it decoded [tokens]: its prompt and
        half its completion (the cache grows by one token a step); NaN without the prompt's
        count."""
        if self.prompt_tokens is None:
            return math.nan
        return self.prompt_tokens + self.completion_tokens / 2

    @property
    def accept_len(self) -> float:
        """The request's own accept_len [tokens/cycle], ``1 + accepted / num_drafts``, where
        the server says both per request; else NaN."""
        if self.num_drafts and self.accepted_tokens is not None:
            return 1 + self.accepted_tokens / self.num_drafts
        return math.nan

    trailing_tokens: int = 0
    """Tokens after its last chunk with text [tokens] (they came after the decode time)."""

    @property
    def decoded_tokens(self) -> float:
        """Tokens between the first chunk and the last with text [tokens]: what the decode
        time streamed."""
        return self.completion_tokens - self.first_chunk_tokens - self.trailing_tokens

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first chunk over the time after it [tok/s]: prefill excluded."""
        decoded = self.decoded_tokens
        if decoded <= 0 or not self.decode_s > 0:
            return math.nan
        return decoded / self.decode_s

    @property
    def burst(self) -> bool:
        """Whether the request's output came in one burst: its decode time under
        :data:`BURST_SHARE` of its time to first token, at a rate over :data:`BURST_TOK_S`.
        Its chunks were held back (a server that sent them late, a proxy that buffered, a
        client that fell behind), so its decode time is not the server's.  (A short fast
        reply after a slow first token is no burst: 7 tokens decoded at 1 ms each after a
        first token of 200 ms are under the share and far under the rate.)
        (Chunks that came together mid-stream do not make a burst: the decode time runs from
        the first chunk to the last, which a late chunk between them does not move; leaving
        such requests out read 5-11% off the server's own rate where keeping them read
        0.1-0.5%.)"""
        decoded = self.decoded_tokens
        return (
            decoded > 0
            and self.decode_s < BURST_SHARE * self.ttft_ms / 1000.0
            and self.decode_s * BURST_TOK_S < decoded
        )

    @property
    def tpot_ms(self) -> float:
        """Mean time per output token after the first [ms]."""
        rate = self.decode_tok_s
        return 1000.0 / rate if rate > 0 else math.nan

    @property
    def itl_ms(self) -> float:
        """Mean gap between streamed chunks [ms]; about accept_len x TPOT under speculation."""
        return statistics.fmean(self.chunk_gaps_ms) if self.chunk_gaps_ms else math.nan


BURST_SHARE = 0.05
"""A request whose decode time is under this share of its time to first token came in one burst
[fraction] (:attr:`RequestResult.burst`): a decode of tens of tokens takes longer than a
twentieth of a prefill on any engine, where a burst's tokens arrive within a millisecond."""

BURST_TOK_S = 5000.0
"""A burst's tokens come faster than this [tok/s per sequence] (:attr:`RequestResult.burst`):
read from a buffer, 13,600-255,000 tok/s on a vLLM CPU server that held whole replies back,
where the fastest engines decode one sequence at 2,000-3,000."""


class _Malformed(Exception):
    """A reply that breaks the protocol: the request fails with this reason."""


def _prompt_tokens(chunk: Any) -> int | None:
    """The prompt's tokens an event's usage gives (None where it gives none)."""
    usage = chunk.get("usage") if isinstance(chunk, dict) else None
    return count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None


def _chunk_text(chunk: Any) -> tuple[str, int | None]:
    """The text of one streamed chunk and the usage's completion tokens (None if absent)."""
    if not isinstance(chunk, dict):
        raise _Malformed(f"a server-sent event that is not a JSON object: {type(chunk).__name__}")
    usage = chunk.get("usage")
    tokens = count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    choices = chunk.get("choices")
    if choices is None:
        return "", tokens
    if not isinstance(choices, list):
        raise _Malformed(f"'choices' is {type(choices).__name__}, expected a list")
    if not choices:
        return "", tokens
    first = choices[0]
    if not isinstance(first, dict):
        raise _Malformed(f"a choice is {type(first).__name__}, expected an object")
    text = first.get("text")
    if not text:
        delta = first.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    return (text if isinstance(text, str) else ""), tokens


class _Lines:
    """A stream's lines as its bytes come, each ended by CR, LF or CRLF (a CR that ends a
    piece waits for the next: it may begin a CRLF)."""

    def __init__(self) -> None:
        self.head: list[bytes] = []  # the line so far
        self.cr = False

    def feed(self, data: bytes) -> list[bytes]:
        """The lines that ``data`` ends."""
        if self.cr:
            data, self.cr = b"\r" + data, False
        if data.endswith(b"\r"):
            data, self.cr = data[:-1], True
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop()
        if lines:
            lines[0] = b"".join([*self.head, lines[0]])
            self.head = []
        if rest:
            self.head.append(rest)
        return lines

    def end(self) -> list[bytes]:
        """The line a CR that ended the stream ended (a line without an end is none)."""
        ended = [b"".join(self.head)] if self.cr else []
        self.head, self.cr = [], False
        return ended


async def _event_data(response: Any) -> AsyncIterator[str]:
    """The data of each server-sent event of a streamed reply as the event ends, read within
    bench's bound on a reply (:func:`~breakeven.iotools.server.bounded_bytes`, which raises
    :class:`ReplyError` past it: an endless line is never held whole).  As the event-stream
    rules say: an event's ``data`` lines joined by LF, ended by a blank line; one without
    data is no event; other fields and comments are not read."""
    lines = _Lines()
    data: list[bytes] = []
    pieces = bounded_bytes(response)
    async with contextlib.aclosing(pieces):
        while True:
            piece = await anext(pieces, None)
            for line in lines.feed(piece) if piece is not None else lines.end():
                if not line:
                    if data:
                        yield b"\n".join(data).decode("utf-8", errors="replace")
                        data = []
                    continue
                name, _, value = line.partition(b":")
                if name == b"data":
                    data.append(value[1:] if value.startswith(b" ") else value)
            if piece is None:
                return


CAUGHT_UP_GAP = 0.1
"""Chunks that came within this share of the request's median gap after the one before had
waited unread: the client (or the server's streaming process) was behind [fraction]."""


def _live_window(gaps: list[float]) -> tuple[int, int]:
    """The chunks (first, last: indexes) between which a request's stream was read as it was
    sent, from the gaps between its chunks with text [ms].

    A stream read late at its start brings its first chunk late and the tokens made meanwhile
    right after it, within :data:`CAUGHT_UP_GAP` of the median gap: the decode time from the
    first chunk is short by the delay (bench read 12% above vLLM's own rate).  The window then
    starts at the last of those chunks, the tokens before it not counted; likewise it ends
    before a final run of such chunks that came after a wait.  Chunks that came together
    mid-stream move neither end.  With fewer than 4 gaps, or no live window, the whole
    stream (a burst is told by :attr:`RequestResult.burst`).
    """
    n = len(gaps)
    if n < 4:
        return 0, n
    quick = [g < CAUGHT_UP_GAP * statistics.median(gaps) for g in gaps]
    first = 0
    while first < n and quick[first]:
        first += 1
    end = n
    while end > first and quick[end - 1]:
        end -= 1
    last = end - 1 if end < n else n  # before a final run that came after a wait
    return (first, last) if last > first else (0, n)


@dataclass
class _Timing:
    """One streamed request's tokens as they arrive: times from ``time.perf_counter`` [s],
    counts [tokens]."""

    start: float
    tokens_seen: int = 0  # the usage's count, or one per chunk without it
    usage_tokens: int | None = None  # the latest usage's completion tokens
    prompt_tokens: int | None = None  # the latest usage's prompt tokens
    times: list[float] = field(default_factory=list)  # when each chunk with text came
    seen: list[int] = field(default_factory=list)  # the tokens streamed up to each of them
    counted: bool = True  # whether every chunk with text came with its usage (a token count)
    drafts: Drafts = field(default_factory=Drafts)

    @property
    def chunks(self) -> int:
        """Chunks with text."""
        return len(self.times)

    def add(self, now: float, text: str, usage: int | None, drafts: Drafts) -> int:
        """Take one event that came at ``now`` [s]; returns the tokens it newly streamed."""
        if usage is not None:
            self.usage_tokens = usage
        if drafts.drafted is not None:
            self.drafts = drafts
        if not text:
            return 0
        if usage is None:
            self.counted = False
        seen = self.usage_tokens if self.usage_tokens is not None else self.tokens_seen + 1
        streamed = max(0, seen - self.tokens_seen)
        self.tokens_seen = seen
        self.times.append(now)
        self.seen.append(seen)
        return streamed

    def result(self, done: bool) -> RequestResult:
        """The request's record: failed if the stream ended before ``[DONE]`` (``done``
        false) or brought no tokens."""
        if not done:
            return RequestResult(False, "the stream ended before [DONE]")
        if not self.times:
            return RequestResult(False, "no tokens came back")
        total = self.usage_tokens if self.usage_tokens is not None else self.tokens_seen
        gaps = [1000.0 * (b - a) for a, b in zip(self.times, self.times[1:], strict=False)]
        # Without a token count in every chunk (llama.cpp streams none), a chunk may hold
        # several tokens: the stream is timed whole, its first chunk taken as the prefill's
        # one token and every token as come by its last chunk.
        first, last = _live_window(gaps) if self.counted else (0, len(gaps))
        seen = self.seen if self.counted else [1] + [total] * len(gaps)
        return RequestResult(
            True,
            ttft_ms=1000.0 * (self.times[0] - self.start),
            e2e_ms=1000.0 * (self.times[-1] - self.start),
            decode_s=self.times[last] - self.times[first],
            completion_tokens=total,
            prompt_tokens=self.prompt_tokens,
            # The first chunk's tokens arrive with the first token (prefill); decode is the
            # rest.  Without per-chunk usage a chunk counts one token: a speculating server
            # streams a verify cycle's tokens together, but its first token comes alone.
            first_chunk_tokens=seen[first],
            # Tokens after the last chunk timed (after the last with text: half a
            # character, a stop string) came after the decode time measured.
            trailing_tokens=max(0, total - seen[last]),
            chunks=self.chunks,
            chunk_gaps_ms=gaps,
            draft_tokens=self.drafts.drafted,
            accepted_tokens=self.drafts.accepted,
            num_drafts=self.drafts.steps,
            acceptance_histogram=self.drafts.histogram,
            num_spec_tokens=self.drafts.k,
        )
