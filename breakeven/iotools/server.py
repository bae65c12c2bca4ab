"""What a server says of its launch: its process on this host, a file naming its environment,
and its endpoints.

- **Its process**, where it runs on this host: the process listening on the URL's port is
  found from ``/proc/net/tcp`` and ``/proc/net/tcp6`` (a listening socket's inode) and the
  ``/proc/PID/fd`` links that name that socket.  Its ``cmdline`` gives its arguments, its
  ``environ`` its environment (only :data:`breakeven.core.provenance.ENV_PREFIXES`, never a
  secret), its ``stat`` its start time (clock ticks after boot, ``btime`` of ``/proc/stat``).
  Another user's process cannot be read: the reason is said, and ``--server-env-from``
  named.
- **A file** (``--server-env-from``): a process id, a systemd unit (``Environment=``,
  ``EnvironmentFile=`` and ``ExecStart=`` lines), a ``docker inspect`` JSON
  (``Config.Env``, ``Config.Cmd``/``Args``, ``State.StartedAt``) or a ``KEY=VALUE`` file.
- **Its endpoints** (read by ``bench``): vLLM's ``/version`` and, on ``/metrics``,
  ``process_start_time_seconds`` (the API server's start, a launch's identity) and
  ``vllm:cache_config_info``'s settings (:data:`VLLM_CACHE_SETTINGS`: the derived sizes, such
  as ``num_gpu_blocks``, change with a draft model's memory and are left out); SGLang's
  ``/get_server_info`` (:data:`SGLANG_SETTINGS` and ``version``); llama.cpp's ``/props``
  (``build_info``, ``model_path``, ``total_slots``, ``default_generation_settings.n_ctx``).

Its replies, and a streamed completion's, are read within a bound (:func:`bounded_bytes`):
decoded a step at a time (gzip, deflate) and read no further past :data:`MAX_REPLY_BYTES`, or
past :data:`MAX_REPLY_RATIO` times the bytes sent, so a compressed bomb costs a bounded read.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import socket
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from breakeven.core.errors import BreakevenError, UnreadableInput, escape_braces
from breakeven.core.provenance import (
    is_environment_key,
    one_word,
    secret_free,
    server_arguments,
    server_environment,
)
from breakeven.iotools.jsonsafe import loads_bounded
from breakeven.iotools.sources import read_whole

VLLM_CACHE_SETTINGS = (
    "block_size",
    "cache_dtype",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "prefix_caching_hash_algo",
    "kv_cache_memory_bytes",
    "num_gpu_blocks_override",
    "kv_offloading_backend",
    "kv_offloading_size",
    "swap_space",
    "cpu_offload_gb",
    "calculate_kv_scales",
)
"""The labels of ``vllm:cache_config_info`` a launch sets (a flag or a variable); the others
are derived at start-up, some from the memory a draft model takes."""
SGLANG_SETTINGS = (
    "model_path",
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "context_length",
    "enable_dp_attention",
    "disable_radix_cache",
    "enable_torch_compile",
)
"""The settings of SGLang's ``/get_server_info`` a launch sets and speculation leaves alone.
The reply also holds settings SGLang adjusts when speculation is on (``mem_fraction_static``,
``cuda_graph_max_bs``, ``chunked_prefill_size``), sizes derived at start-up
(``max_total_num_tokens``), per-launch values (``random_seed``, ports) and the API keys: none
of those is read."""
_MAX_FILE = 4 << 20


@dataclass(frozen=True)
class ServerLaunch:
    """What is known of one server launch."""

    pairs: tuple[str, ...] = ()
    """Its settings as ``key=value`` pairs: arguments, environment variables, served
    configuration (secrets never among them)."""
    env_from: str = "client"
    """Where they came from: ``server``, ``file``, ``endpoints`` or ``client``
    (:data:`breakeven.core.provenance.ENV_SOURCES`)."""
    started: float | None = None
    """When the launch started [s since the epoch], where known."""
    where: str = ""
    """Where they were read, in words (``pid 1234 on this host``)."""
    note: str = ""
    """Why the server's own environment could not be read, where it could not."""


# --- the process on this host -------------------------------------------------------------


def is_local_host(host: str) -> bool:
    """Whether ``host`` is this machine: a loopback name or address, or an address this
    machine can bind (only a local address can be bound)."""
    if host in ("localhost", "0.0.0.0", "::"):
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, address in infos:
        ip = address[0]
        try:
            if ipaddress.ip_address(ip.split("%")[0]).is_loopback:
                return True
        except ValueError:
            continue
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((ip, 0))
                return True
        except OSError:
            continue
    return False


def _listening_inodes(port: int, proc: str) -> set[str]:
    inodes = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            with open(os.path.join(proc, table), encoding="ascii") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
                continue
            try:
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
            except (IndexError, ValueError):
                continue
    return inodes


def listening_process(port: int, proc: str = "/proc") -> int | None:
    """The process id holding a socket that listens on ``port`` on this host, or None (no
    such socket, or its process is another user's)."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in sorted(pids, key=int):
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in wanted:
                    return int(pid)
            except OSError:
                continue
    return None


def _start_time(pid: int, proc: str) -> float | None:
    """A process's start [s since the epoch]: field 22 of its ``stat`` (clock ticks after
    boot) plus the boot time (``btime`` in ``/proc/stat``)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8", errors="replace") as f:
            stat = f.read()
        with open(os.path.join(proc, "stat"), encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _nul_separated(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in data.split(b"\0") if part]


def read_process(pid: int, proc: str = "/proc") -> ServerLaunch:
    """A process's launch: its arguments, its environment (the listed prefixes only), its
    start.  Raises :class:`UnreadableInput` when it is gone or another user's."""
    argv = _nul_separated(os.path.join(proc, str(pid), "cmdline"))
    environ = _nul_separated(os.path.join(proc, str(pid), "environ"))
    if argv is None or environ is None:
        raise UnreadableInput(
            f"process {pid}: its command line or environment cannot be read (gone, or "
            "another user's: run breakeven as that user, or name a file with "
            "--server-env-from)"
        )
    variables = dict(item.split("=", 1) for item in environ if "=" in item)
    pairs = (*server_arguments(argv), *server_environment(variables))
    return ServerLaunch(
        tuple(pairs), "server", _start_time(pid, proc), f"pid {pid} on this host (/proc)"
    )


def local_server(host: str, port: int, proc: str = "/proc") -> ServerLaunch | None:
    """The launch of the server listening on ``host:port``, where that is this machine and
    its process can be read; else None, or a launch of nothing with a note saying why."""
    if not is_local_host(host) or not os.path.isdir(os.path.join(proc, "net")):
        return None
    pid = listening_process(port, proc)
    if pid is None:
        if _listening_inodes(port, proc):
            return ServerLaunch(
                note=f"the process listening on port {port} is another user's: its "
                "environment cannot be read (name it with --server-env-from)"
            )
        return None
    try:
        launch = read_process(pid, proc)
    except UnreadableInput as e:
        return ServerLaunch(note=str(e))
    comm = _nul_separated(os.path.join(proc, str(pid), "comm")) or [""]
    if comm[0].strip() in ("docker-proxy", "rootlesskit", "slirp4netns", "kubectl"):
        return ServerLaunch(
            note=f"port {port} is forwarded by {comm[0].strip()} (pid {pid}), not served by the "
            "server itself: name its environment with --server-env-from (docker inspect's "
            "JSON, say)"
        )
    return launch


# --- a file the user names -----------------------------------------------------------------


def _key_values(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments skipped)."""
    found = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].strip()
        key, eq, value = line.partition("=")
        if eq and key.strip():
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found[key.strip()] = value
    return found


def _unit(text: str, shown: str) -> tuple[dict[str, str], list[str]]:
    """A systemd unit's environment (``Environment=`` and ``EnvironmentFile=``) and its
    ``ExecStart=`` command line."""
    environ: dict[str, str] = {}
    argv: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq:
            continue
        if key == "Environment":
            try:
                words = shlex.split(value)
            except ValueError as e:  # an unclosed quote: systemd refuses the line too
                raise UnreadableInput(
                    f"{shown}, line {number}: Environment= does not parse ({e}); expected "
                    'KEY=VALUE words, each quoted whole or not at all ("A=1 2" B=3)'
                ) from None
            for word in words:
                name, eq2, val = word.partition("=")
                if eq2:
                    environ[name] = val
        elif key == "EnvironmentFile":
            path = value.strip()
            optional = path.startswith("-")
            path = path.lstrip("-")
            try:
                environ.update(_key_values(read_whole(path, _MAX_FILE).decode("utf-8", "replace")))
            except UnreadableInput as e:
                if not optional:
                    raise UnreadableInput(
                        f"{shown}: its EnvironmentFile {path!r} cannot be read ({e})"
                    ) from None
        elif key == "ExecStart":
            command = value.strip().lstrip("@-:+!")
            try:
                argv = shlex.split(command)
            except ValueError:
                argv = command.split()
    return environ, argv


_DOCKER_SHAPE = (
    "expected docker inspect's JSON: a list of one container (or the container), an object "
    "whose Config holds Env, a list of KEY=VALUE texts, and Entrypoint and Cmd, lists of "
    "texts or null"
)


def _texts(value: Any) -> bool:
    """Whether ``value`` is a list of texts (a docker inspect ``Env``, ``Cmd``)."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _docker(body: Any, shown: str) -> tuple[dict[str, str], list[str], float | None]:
    """``docker inspect``'s JSON (a list of one container, or the container): its
    ``Config.Env``, its command, and ``State.StartedAt``; any other shape raises
    :class:`UnreadableInput` naming the part that is not docker's."""
    if isinstance(body, list) and len(body) > 1 and all(isinstance(b, dict) for b in body):
        raise UnreadableInput(
            f"{shown} holds {len(body)} containers; expected one (docker inspect NAME > FILE)"
        )
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    config = body.get("Config") if isinstance(body, dict) else None
    if not isinstance(config, dict):
        raise UnreadableInput(f"{shown} is JSON without a container's Config; {_DOCKER_SHAPE}")
    env = config.get("Env")
    words = [config.get("Entrypoint") or [], config.get("Cmd") or []]
    if not _texts(env) or not all(map(_texts, words)):
        part = "Config.Env" if not _texts(env) else "Config.Entrypoint or Config.Cmd"
        raise UnreadableInput(f"{shown} has a {part} of another shape; {_DOCKER_SHAPE}")
    environ = dict(e.split("=", 1) for e in env if "=" in e)
    argv = [*words[0], *words[1]]
    started = None
    state = body.get("State")
    if isinstance(state, dict) and isinstance(state.get("StartedAt"), str):
        text = state["StartedAt"].replace("Z", "+00:00")
        if "." in text:  # nanoseconds: Python reads microseconds
            head, _, tail = text.partition(".")
            digits = "".join(c for c in tail if c.isdigit())
            zone = tail[len(digits) :]
            text = f"{head}.{digits[:6]}{zone}"
        try:
            started = datetime.fromisoformat(text).timestamp()
        except (ValueError, OverflowError):
            started = None
    return environ, ["docker", *argv], started


# JSON's start: an object, or an array of a value (a unit file's first line, ``[Unit]``, is none).
_JSON_START = re.compile(r'\s*(?:\{|\[\s*(?:[\[\]{}"\d-]|true|false|null))')


def read_server_env(source: str) -> ServerLaunch:
    """``--server-env-from``: a process id, a systemd unit, a ``docker inspect`` JSON or a
    ``KEY=VALUE`` file.  Raises :class:`BreakevenError` naming the option when it cannot be
    read or holds nothing of a server's launch."""
    shown = escape_braces(repr(source))
    if source.strip().isdigit():
        try:
            return read_process(int(source))
        except UnreadableInput as e:
            raise BreakevenError("{0}: " + escape_braces(str(e)), "server_env_from") from None
    try:
        text = read_whole(source, _MAX_FILE).decode("utf-8", "replace")
    except UnreadableInput as e:
        raise BreakevenError(
            "{0}: " + f"{shown}: " + escape_braces(str(e)), "server_env_from"
        ) from None
    started = None
    named = repr(source)  # in an UnreadableInput's text, which is escaped as a whole below
    try:
        if _JSON_START.match(text):  # docker inspect's JSON, or refused as not its shape
            environ, argv, started = _docker(loads_bounded(text, what=named), named)
            kind = "docker inspect JSON"
        elif "[Service]" in text or any(
            line.strip().startswith(("Environment=", "ExecStart=", "EnvironmentFile="))
            for line in text.splitlines()
        ):
            environ, argv = _unit(text, named)
            kind = "systemd unit"
        else:
            environ, argv = _key_values(text), []
            kind = "KEY=VALUE file"
    except UnreadableInput as e:
        raise BreakevenError("{0}: " + escape_braces(str(e)), "server_env_from") from None
    if not environ and not argv:
        raise BreakevenError(
            "{0}: "
            + f"{shown} holds no KEY=VALUE line, Environment= or ExecStart= line, or docker "
            "inspect Config: expected a systemd unit, docker inspect's JSON or a KEY=VALUE file",
            "server_env_from",
        )
    pairs = (*(server_arguments(argv) if argv else ()), *server_environment(environ))
    return ServerLaunch(tuple(pairs), "file", started, f"{kind} {source}")


# --- the endpoints --------------------------------------------------------------------------


MAX_VALUE_CHARS = 200
"""A served setting's value is cut to this many characters (a hostile server's megabytes
would be written on every row)."""


def _word(value: Any, redact: Callable[[str], str] | None = None) -> str:
    """A served value as one ``env`` word, redacted (``redact``) before it is cut to
    :data:`MAX_VALUE_CHARS`: cut first, a secret echoed in it could keep too little of
    itself to be found."""
    text = json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else value
    text = str(text)
    word = one_word(redact(text) if redact is not None else text)
    return word if len(word) <= MAX_VALUE_CHARS else word[: MAX_VALUE_CHARS - 3] + "..."


def endpoint_pairs(
    engine: str,
    body: Mapping[str, Any] | None,
    metrics: Mapping[str, Any] | None = None,
    redact: Callable[[str], str] | None = None,
) -> list[str]:
    """The launch settings an engine serves, as pairs: llama.cpp's ``/props``, SGLang's
    ``/get_server_info`` (``body``), vLLM's ``vllm:cache_config_info`` labels (``metrics``:
    label name to value); each value redacted by ``redact`` (a
    :class:`breakeven.core.credentials.Redactor`) before it is cut."""
    pairs: list[str] = []
    if engine == "llamacpp" and body:
        for key in ("build_info", "model_path", "total_slots"):
            if isinstance(body.get(key), (str, int, float)):
                pairs.append(f"{key}={_word(body[key], redact)}")
        settings = body.get("default_generation_settings")
        if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
            pairs.append(f"n_ctx={settings['n_ctx']}")
    elif engine == "sglang" and body:
        args = body.get("server_args") if isinstance(body.get("server_args"), dict) else body
        for key in SGLANG_SETTINGS:
            if isinstance(args.get(key), (str, int, float, bool)):
                pairs.append(f"{key}={_word(args[key], redact)}")
    elif engine == "vllm" and metrics:
        for key in VLLM_CACHE_SETTINGS:
            if key in metrics:
                pairs.append(f"cache_config.{key}={_word(metrics[key], redact)}")
    return secret_free(pairs)


def user_pairs(text: str | None) -> list[str]:
    """``--env``'s pairs, with any variable holding a secret's name dropped."""
    return secret_free((text or "").split())


def started_iso(started: float | None) -> str:
    """A launch's start as ``launched_at`` writes it: ISO 8601 UTC, to the second."""
    if started is None:
        return ""
    moment = datetime.fromtimestamp(int(started), tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def only_environment(pairs: Sequence[str]) -> list[str]:
    """The environment variables among ``pairs``."""
    return [p for p in pairs if is_environment_key(p)]


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
PROCESS_START = "process_start_time_seconds"
"""The standard process collector's gauge (vLLM's API server exports it): a launch's start."""
VLLM_CACHE_INFO = "vllm:cache_config_info"


def launch_metrics(text: str | None) -> tuple[float | None, dict[str, str]]:
    """From ``/metrics`` text: the process's start [s since the epoch] and the labels of
    ``vllm:cache_config_info`` (empty where absent)."""
    started, labels = None, {}
    for line in (text or "").splitlines():
        if line.startswith(PROCESS_START + " "):
            try:
                started = float(line.split()[1])
            except (IndexError, ValueError):
                started = None
        elif line.startswith(VLLM_CACHE_INFO + "{") and not labels:
            labels = dict(_LABEL.findall(line[len(VLLM_CACHE_INFO) :].rsplit("}", 1)[0]))
    return started, labels


MAX_REPLY_BYTES = 64 << 20
"""The most one reply of a server may decode to [bytes]: a long completion's stream (a 50 MB
event) is read whole; a compressed bomb is not (300 KB of gzip decoded to 300 MB, and read
whole cost bench 663 MB)."""
MAX_REPLY_RATIO = 1000
"""The most a reply past its first :data:`RATIO_FROM` decoded bytes may grow by decoding [x]
(server text compresses 5-50x; zeros 1032x, gzip's and deflate's most)."""
RATIO_FROM = 1 << 20
"""The decoded bytes [bytes] from which :data:`MAX_REPLY_RATIO` holds."""
ACCEPT_ENCODING = "gzip, deflate"
"""The encodings asked for (``Accept-Encoding``): those :func:`bounded_bytes` decodes."""
_STEP = 1 << 16  # the most one step of decoding makes [bytes]


class ReplyError(ValueError):
    """A reply read no further (:func:`bounded_bytes`); the message is the reason, one line."""


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


class _Inflate:
    """One gzip or deflate layer of a reply, decoded at most ``_STEP`` bytes at a time."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.obj = zlib.decompressobj(zlib.MAX_WBITS | 16)
        # deflate's first two bytes, until they tell zlib's wrapping (RFC 1950: a header whose
        # method is 8, a multiple of 31) from raw deflate, which some servers send
        self.start: bytes | None = b"" if encoding == "deflate" else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.start is not None:
            data = self.start + data
            if len(data) < 2:
                self.start = data
                return
            self.start = None
            wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self.obj = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        while not self.obj.eof:  # after its end: what follows is not read (as httpx does)
            try:
                out = self.obj.decompress(data, _STEP)
            except zlib.error as e:
                raise ReplyError(f"a {self.encoding} reply that does not decode ({e})") from None
            data = self.obj.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < _STEP:  # a full step may leave output pending
                return


def _layers(header: str) -> list[_Inflate]:
    """The decoders of a ``Content-Encoding``, the last applied first."""
    layers = []
    for name in reversed([e.strip().lower() for e in header.split(",")]):
        if name in ("", "identity"):
            continue
        if name not in ("gzip", "x-gzip", "deflate"):
            raise ReplyError(
                f"a reply encoded as {name[:40]!r}, which bench does not decode "
                f"(it asks for {ACCEPT_ENCODING})"
            )
        layers.append(_Inflate(name))
    return layers


def _decoded(layers: Sequence[_Inflate], data: bytes) -> Iterator[bytes]:
    if not layers:
        yield data
        return
    for piece in layers[0].feed(data):
        yield from _decoded(layers[1:], piece)


async def bounded_bytes(
    response: Any, limit: int = MAX_REPLY_BYTES, ratio: float = MAX_REPLY_RATIO
) -> AsyncIterator[bytes]:
    """A streamed httpx reply's body as it comes, decoded (gzip, deflate) a step of at most
    64 KiB at a time and counted; raises :class:`ReplyError` (nothing more is read) once it
    decodes past ``limit`` bytes, or, past :data:`RATIO_FROM`, past ``ratio`` times the bytes
    sent.

    Its raw bytes are read and decoded here, not by httpx, whose decoder turns each chunk it
    reads whole (64 KiB of a gzip bomb into 66 MB at once)."""
    layers = _layers(response.headers.get("content-encoding", ""))
    sent = decoded = 0
    async for raw in response.aiter_raw():
        sent += len(raw)
        for piece in _decoded(layers, raw):
            decoded += len(piece)
            if decoded > limit:
                raise ReplyError(
                    f"the reply decoded to more than {_mib(limit)} (bench's limit on a "
                    "reply): read no further"
                )
            if decoded > RATIO_FROM and decoded > ratio * sent:
                raise ReplyError(
                    f"the reply decoded to more than {ratio:g}x the bytes sent (bench's limit "
                    f"on a compressed reply past {_mib(RATIO_FROM)}): read no further"
                )
            yield piece


async def read_bounded(response: Any, limit: int = MAX_REPLY_BYTES) -> bytes:
    """A streamed httpx reply's whole body, decoded within :func:`bounded_bytes`'s bounds."""
    return b"".join([piece async for piece in bounded_bytes(response, limit)])


async def read_head(response: Any, size: int) -> bytes:
    """The first ``size`` decoded bytes of a streamed httpx reply (all of a shorter one): the
    rest is not read."""
    parts: list[bytes] = []
    got = 0
    async for piece in bounded_bytes(response):
        parts.append(piece[: size - got])
        got += len(parts[-1])
        if got >= size:
            break
    return b"".join(parts)


__all__: Sequence[str] = (
    "ACCEPT_ENCODING",
    "MAX_REPLY_BYTES",
    "MAX_REPLY_RATIO",
    "RATIO_FROM",
    "ReplyError",
    "ServerLaunch",
    "bounded_bytes",
    "endpoint_pairs",
    "is_local_host",
    "launch_metrics",
    "listening_process",
    "local_server",
    "read_bounded",
    "read_head",
    "read_process",
    "read_server_env",
    "started_iso",
)
