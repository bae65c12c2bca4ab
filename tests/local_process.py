"""A server process for the tests: started on 127.0.0.1, waited for until it answers (bounded
in time), and always stopped, killed if it must be."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(
    args: Sequence[str],
    log: Path,
    ready: Callable[[], bool],
    name: str,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen]:
    """``args`` run with its output appended to ``log`` (and ``env`` added to this process's
    environment: the server's own, not the client's), once ``ready()`` is true (an OSError
    from it means not yet); an exit or :data:`START_TIMEOUT_S` first is a RuntimeError."""
    environ = {**os.environ, **(env or {})}
    with open(log, "ab") as out:
        process = subprocess.Popen(
            list(args),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environ,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {process.returncode}: "
                    f"{log.read_text(errors='replace')[-2000:]}"
                )
            try:
                if ready():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready within {START_TIMEOUT_S:g} s")
            time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
