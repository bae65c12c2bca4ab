"""A server launch and its fingerprint: what makes a baseline fair.

A *launch* is one server process start, with one configuration and one environment.  A
baseline is fair when it comes from the speculative run's launch, or from another launch
whose configuration and environment differ only in the speculation settings.  The
*fingerprint* of a launch is its settings as ``key=value`` pairs (the ``env`` column): the
server's command-line arguments, the environment variables it was started with (only those
under :data:`ENV_PREFIXES`), and what its endpoints serve (version, cache configuration),
less the speculation settings (:func:`is_spec_key`) and less what the client chose, the URL
and port it reached the server at (:func:`is_client_key`).

Secrets never enter a fingerprint: an environment variable whose name holds one of
:data:`SECRET_NAME_PARTS` is dropped, and the value of an argument such as ``--api-key`` is
written as ``***`` (:func:`server_arguments`).  Every other variable is never read at all:
it may hold a secret under a name no list foresees.

This module is pure (no I/O): reading a process, a unit file or an endpoint is
:mod:`breakeven.iotools.server`'s job.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from breakeven.core.credentials import MASK, hide_url_passwords

ENV_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "SGLANG_", "LLAMA_ARG_", "OMP_", "TORCH_")
"""The environment variables of a server that are read, and only those: the ones that tune
collectives (``NCCL_*``), devices (``CUDA_*``), the engines (``VLLM_*``, ``SGLANG_*``,
``LLAMA_ARG_*``) and threads (``OMP_*``, ``TORCH_*``)."""
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
"""A variable whose name holds one of these is dropped, even under :data:`ENV_PREFIXES`
(``VLLM_API_KEY`` is a vLLM variable)."""
SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "credential",
        "credentials",
    }
)
"""A setting whose name holds one of these words (split at ``-``, ``_``, ``.`` and spaces)
has a secret value, written ``***``: ``--api-key``, ``hf_token``, ``db-password``
(``tokens``, as in ``--max-num-batched-tokens``, is not one)."""
ENV_SOURCES = {
    "server": "the server's own process (its command line and environment, read on its host)",
    "file": "a file the user named (--server-env-from: a unit, docker inspect or KEY=VALUE "
    "file) and the server's endpoints",
    "endpoints": "only what the server serves (version and configuration): not its environment",
    "log": "the engine log's launch lines (its arguments): not its environment",
    "client": "only the client's side: nothing of the server's launch",
    "": "as typed in the file",
}
"""Where a row's ``env`` came from (its ``env_from``), in words."""
ENVIRONMENT_KNOWN = frozenset({"server", "file", ""})
"""``env_from`` values whose ``env`` includes the server's environment variables (typed
rows are taken as written, when they hold anything)."""
_SPEC_KEY_WORDS = ("spec", "draft", "eagle", "medusa", "mtp", "ngram", "lookahead")
_SPEC_SHORT_FLAGS = frozenset({"md", "cd", "ngld", "td", "tbd", "devd", "ctkd", "ctvd"})
"""llama-server's short flags of the draft model (``-md`` for ``--model-draft``, ``-cd``,
``-ngld``, ``-td``, ``-tbd``, ``-devd``, ``-ctkd``, ``-ctvd``: its context, layers, threads,
devices and cache types), in ``common/arg.cpp``."""
_SPEC_FILE_FLAGS = frozenset({"extra_llm_api_options"})
"""trtllm-serve's options file, which ``sweep --engine trtllm`` adds to a speculative launch
holding its ``speculative_config`` alone (TensorRT-LLM takes speculation from no flag)."""
_CLIENT_KEYS = frozenset({"url", "port", "host", "client_host", "llama_arg_port", "llama_arg_host"})
SAMPLING_PREFIX = "sampling_"
"""What begins the key of a sampling setting bench writes in ``env`` (``sampling_temperature=0``,
``sampling_ignore_eos=true``): the client's choice, left out of a fingerprint, and compared on
its own (``compare``'s ``sampling_differs``)."""
_INLINE_SECRET = re.compile(
    r"(--?(?:[A-Za-z0-9]+[-_.])*(?:"
    + "|".join(sorted(SECRET_WORDS, key=len, reverse=True))
    + r")(?:[-_.][A-Za-z0-9]+)*)[= ]+([^\s'\"]+)",
    re.IGNORECASE,
)
"""A secret flag (a word of :data:`SECRET_WORDS` among its parts, as :func:`is_secret_key`
splits them) and its value inside text that is not a command line (a quote left open)."""
_DATE = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(?:\.\d+)?)?)?"
    r"(Z|[+-]\d\d:?\d\d)?$"
)


def key_of(item: str) -> str:
    """The key of a ``key=value`` pair, as the filters compare it: lower case, without
    leading dashes, ``-`` read as ``_`` (``--spec-draft-model`` -> ``spec_draft_model``)."""
    return item.split("=", 1)[0].lower().lstrip("-").replace("-", "_")


def is_spec_key(item: str) -> bool:
    """Whether a pair configures speculation only (its key holds "spec", "draft", "eagle",
    "medusa", "mtp", "ngram" or "lookahead", or it is trtllm-serve's
    ``--extra_llm_api_options``): a baseline and a speculative run may differ in it and still
    be a fair pair."""
    key = key_of(item)
    return key in _SPEC_FILE_FLAGS or (
        key in _SPEC_SHORT_FLAGS or any(word in key for word in _SPEC_KEY_WORDS)
    )


def is_client_key(item: str) -> bool:
    """Whether a pair is what the client chose: the URL, host and port it reached the server
    at, and the machine it ran on.  Two servers launched alike on two ports are a fair
    A/B, so these are kept for provenance and left out of a fingerprint; so are the sampling
    settings bench sent (:data:`SAMPLING_PREFIX`), which ``compare`` compares on their own."""
    key = key_of(item)
    return key in _CLIENT_KEYS or key.startswith(SAMPLING_PREFIX)


def is_environment_key(item: str) -> bool:
    """Whether a pair is an environment variable (its key under :data:`ENV_PREFIXES`)."""
    return item.split("=", 1)[0].startswith(ENV_PREFIXES)


def fingerprint(env: Any) -> str:
    """The pairs of ``env`` that describe the server's launch, sorted: speculation settings
    and what the client chose dropped, and a password in a URL shown as ``***``."""
    if env is None or (isinstance(env, float) and math.isnan(env)):
        return ""
    pairs = [item for item in str(env).split() if not (is_client_key(item) or is_spec_key(item))]
    return hide_url_passwords(" ".join(sorted(pairs)))


def secret_name(name: str) -> bool:
    """Whether an environment variable's name holds a secret's (:data:`SECRET_NAME_PARTS`)."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def server_environment(environ: Mapping[str, str]) -> list[str]:
    """The ``NAME=value`` pairs of a server's environment that a fingerprint holds: names
    under :data:`ENV_PREFIXES`, less those holding a secret's name; whitespace in a value
    written as ``_`` (pairs are separated by spaces)."""
    return sorted(
        f"{name}={one_word(value)}"
        for name, value in environ.items()
        if name.startswith(ENV_PREFIXES) and not secret_name(name)
    )


def is_secret_key(key: str) -> bool:
    """Whether a setting's name is a secret's (:data:`SECRET_WORDS`)."""
    return any(word in SECRET_WORDS for word in re.split(r"[-_.\s]+", key.lower()))


def one_word(value: str) -> str:
    """A value as one ``env`` word: whitespace as ``_``, a URL's password hidden, ``""`` when
    empty."""
    return hide_url_passwords(re.sub(r"\s+", "_", value.strip())) or '""'


def server_arguments(argv: Sequence[str]) -> list[str]:
    """A server's command line as pairs, in order: ``--flag=value`` (a flag followed by a
    value, or written with ``=``), ``--flag`` (a switch), ``arg=value`` (a positional word,
    such as ``serve`` or the model).  The program itself (``argv[0]``) is left out; the value
    of a flag whose name is a secret's (``--api-key``, ``--hf-token``) is ``***``."""
    pairs: list[str] = []
    words = list(argv[1:])
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("-") and len(word) > 1 and not _is_number(word):
            flag, eq, value = word.partition("=")
            if not eq and i < len(words) and not _looks_like_flag(words[i]):
                value, eq = words[i], "="
                i += 1
            if eq:
                shown = MASK if is_secret_key(flag) else one_word(value)
                pairs.append(f"{flag}={shown}")
            else:
                pairs.append(flag)
        else:
            pairs.append(f"arg={one_word(word)}")
    return pairs


def secret_values(argv: Sequence[str]) -> list[str]:
    """The values of a command line's secret settings: a flag named like a secret
    (``--api-key X``, ``--hf-token=X``) and a variable assignment named like one
    (``HF_TOKEN=X``, as ``env`` takes it), also inside a word holding a whole command
    (``sh -c '... --api-key X'``)."""
    found: list[str] = []
    words = list(argv)
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if " " in word.strip() or "\t" in word:
            try:
                found += secret_values(shlex.split(word))
            except ValueError:
                found += [m.group(2) for m in _INLINE_SECRET.finditer(word)]
            continue
        if word.startswith("-") and is_secret_key(name):
            if eq:
                found.append(value)
            elif i + 1 < len(words) and not _looks_like_flag(words[i + 1]):
                found.append(words[i + 1])
        elif eq and not word.startswith("-") and (secret_name(name) or is_secret_key(name)):
            found.append(value)
    return [v for v in found if v]


def masked_argv(argv: Sequence[str]) -> list[str]:
    """A command line to show or store: each secret value (:func:`secret_values`) as ``***``
    wherever it stands, and a URL's password hidden; the words stay where they were."""
    secrets = sorted(set(secret_values(argv)), key=len, reverse=True)
    shown = []
    for word in argv:
        for secret in secrets:
            if len(secret) >= 3 or word.endswith("=" + secret) or word == secret:
                word = word.replace(secret, MASK)
        shown.append(hide_url_passwords(word))
    return shown


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _looks_like_flag(word: str) -> bool:
    return word.startswith("-") and len(word) > 1 and not _is_number(word)


def secret_free(pairs: Iterable[str]) -> list[str]:
    """Pairs from a file, a server's endpoint or a user: an environment variable holding a
    secret's name dropped, the value of a setting named like a secret (``api_key``,
    ``--hf-token``) written ``***``, and a URL's password hidden."""
    kept = []
    for item in pairs:
        name, eq, _ = item.partition("=")
        if is_environment_key(item) and secret_name(name):
            continue
        if eq and is_secret_key(name):
            item = f"{name}={MASK}"
        kept.append(hide_url_passwords(item))
    return kept


def parse_time(text: Any) -> datetime | None:
    """An ISO 8601 date or time (``2026-02-02``, ``2026-02-26T16:41``, with seconds, a
    fraction, ``Z`` or an offset) as an aware datetime (UTC where no zone is written);
    None for anything else (an empty cell, a date printed without its year)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    match = _DATE.match(str(text).strip())
    if not match:
        return None
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace(" ", "T"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def age_text(seconds: float) -> str:
    """A duration in the unit a person reads it in: ``40 s``, ``12 minutes``, ``5 hours``,
    ``24 days``."""
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} hours"
    return f"{int(seconds // 86400)} days"  # whole days: dates 24 days apart are "24 days"


def launch_text(launch: Mapping[str, Any]) -> str:
    """bench's line on the server's launch (a level summary's ``launch``)."""
    source = launch.get("env_from") or ""
    ident = launch.get("launch_id") or "not known (the server does not say when it started)"
    said = f"{ident}; {launch.get('settings', 0)} settings from {ENV_SOURCES.get(source, source)}"
    if source in ("server", "file") and launch.get("read_from"):
        said += f", read from {launch['read_from']}"
    if source not in ENVIRONMENT_KNOWN:
        said += (
            ". check cannot tell whether another launch had the same environment: run bench on "
            "the server's host as its user, or give --server-env-from"
        )
    if launch.get("sampling"):
        said += f". Requests sent with {sampling_text(launch['sampling'])}"
    return said + "."


def sampling_text(sampling: Mapping[str, Any]) -> str:
    """Sampling settings in words, in their order: ``temperature 0, top_p 1, max_tokens 512,
    ignore_eos true`` (a number as ``:g`` writes it)."""
    shown = (f"{v:g}" if isinstance(v, float) else str(v) for v in sampling.values())
    return ", ".join(f"{key} {value}" for key, value in zip(sampling, shown, strict=True))


__all__: Sequence[str] = (
    "ENVIRONMENT_KNOWN",
    "ENV_PREFIXES",
    "ENV_SOURCES",
    "SAMPLING_PREFIX",
    "SECRET_NAME_PARTS",
    "age_text",
    "fingerprint",
    "is_client_key",
    "is_secret_key",
    "is_spec_key",
    "launch_text",
    "one_word",
    "parse_time",
    "sampling_text",
    "secret_free",
    "server_arguments",
    "server_environment",
)
