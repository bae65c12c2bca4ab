"""An open-loop level's arrivals: when each request is due (:func:`arrival_times`, gamma gaps
as ``vllm bench serve`` draws them) and the sending of each on its schedule, whatever the
server's progress (:func:`send_on_schedule`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator


def _gaps(rate: float, requests: int, burstiness: float, seed: int) -> Iterator[float]:
    """The raw gaps [s]: gamma with shape ``burstiness`` and mean ``1 / rate``."""
    draw = random.Random(seed).gammavariate
    scale = 1.0 / (rate * burstiness)
    for _ in range(requests):
        yield draw(burstiness, scale)


def arrival_times(
    rate: float, requests: int, burstiness: float = 1.0, seed: int = 0
) -> Iterator[float]:
    """When each of a level's ``requests`` is due, in seconds since the level began [s].

    The gaps between them (the first's from the level's start) are gamma-distributed with
    shape ``burstiness`` and mean ``1 / rate`` [s], so their coefficient of variation is
    ``1 / sqrt(burstiness)``: 1 gives exponential gaps (a Poisson process), more gives
    evener ones, less burstier.  As ``vllm bench serve`` does (``get_request`` in
    ``vllm/benchmarks/serve.py``), the times are then scaled so that the last is due at
    ``requests / rate`` exactly (a constant factor: the gaps' shape is kept), which takes
    away the 1-2% by which a sum of random gaps misses it.  ``seed`` seeds the draws: the
    same arguments give the same times, on any machine (Python's ``random``).  Nothing is
    held: the gaps are drawn twice, once for their sum.

    Parameters
    ----------
    rate : float
        The offered rate [req/s], above 0.
    requests : int
        The level's requests.
    burstiness : float
        The gaps' gamma shape [-], above 0.
    seed : int
        The schedule's seed.
    """
    total = sum(_gaps(rate, requests, burstiness, seed))
    scale = requests / rate / total if total > 0 else 1.0
    due = 0.0
    for gap in _gaps(rate, requests, burstiness, seed):
        due += gap
        yield due * scale


async def send_on_schedule(
    times: Iterable[float],
    send: Callable[[int, float], Awaitable[None]],
    started: float,
    cap: int | None = None,
) -> None:
    """Call ``send(i, due)`` for each request ``i`` when it is due (``started + times[i]``, on
    ``time.perf_counter``'s clock [s]), whether or not the requests before it have finished:
    the requests in flight grow while the server falls behind.  A request sent late (the
    client busy) goes at once, and those after it keep their times: lateness never
    accumulates.  ``cap``: at most that many in flight; a due request waits for a slot
    (its ``due`` time unchanged).  Returns when every request has finished; cancelled, it
    cancels those in flight and waits for them to close.  Only the requests in flight are
    held, never the schedule.
    """
    slots = asyncio.Semaphore(cap) if cap else None
    pending: set[asyncio.Task[None]] = set()

    async def one(i: int, due: float) -> None:
        if slots is None:
            await send(i, due)
            return
        async with slots:
            await send(i, due)

    try:
        for i, offset in enumerate(times):
            due = started + offset
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            task = asyncio.ensure_future(one(i, due))
            pending.add(task)
            task.add_done_callback(pending.discard)
        while pending:
            await asyncio.gather(*pending)
    finally:
        for task in pending:
            task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.gather(*pending, return_exceptions=True)
