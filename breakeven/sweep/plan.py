"""``breakeven sweep``'s plan: the launches of one experiment, in the order they run.

A sweep measures a plain server (k = 0, the baseline) and the same server speculating with each
k, at each load, ``repeats`` times.  Each (repeat, k) is a launch of its own: a server start, so
that repeats are launches and an interval covers launch-to-launch variation.  Launches are
interleaved (baseline, k = 2, k = 4, baseline, k = 2, ...), never all baselines first: a drift
of the machine over the sweep then falls on every configuration alike.

The serve command is the plain one; each launch adds its engine's own speculation flags
(:func:`breakeven.render.engine_configs.speculation_args`).  ``{port}`` in it is the launch's port.

This module plans and estimates; it starts nothing.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from breakeven.bench.config import check_sampling
from breakeven.core.errors import BreakevenError, invalid_value
from breakeven.core.provenance import masked_argv
from breakeven.render.engine_configs import (
    SPECULATION_ENGINES,
    speculation_args,
    trtllm_options_text,
)

MAX_READY_S = 86_400.0
"""The longest a launch may take to become ready [s]: a day."""
METHOD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A drafting method's name: it labels the launches' rows and names their logs."""
MAX_LAUNCHES = 1000
"""More launches than this is a typing mistake (a sweep of 1,000 server starts)."""


@dataclass(frozen=True)
class SweepLaunch:
    """One planned server start."""

    index: int
    """Its place in the sweep, from 1."""
    repeat: int
    """Which repeat of its configuration, from 1."""
    num_spec_tokens: int
    """k [tokens]; 0 for the baseline."""
    label: str
    """Its rows' label: ``baseline`` or ``{method}-k{k}``."""
    argv: tuple[str, ...]
    """The command that starts it, ``{port}`` filled in."""
    files: tuple[tuple[str, str], ...] = ()
    """The files it reads, written before it starts: (path, text) each (TensorRT-LLM's
    ``--extra_llm_api_options`` YAML, in the sweep's directory)."""


@dataclass(frozen=True)
class SweepPlan:
    """Every launch of a sweep, in order, and what it costs at most."""

    engine: str
    launches: tuple[SweepLaunch, ...]
    concurrency: tuple[int, ...]
    """The load levels each launch runs [requests in flight]."""
    requests: tuple[int, ...]
    """Requests at each level."""
    max_tokens: int
    """Tokens per request [tokens]."""
    ready_timeout_s: float
    """The longest a launch may take to become ready [s]."""
    port: int = 8000
    """The port ``{port}`` stands for in the serve command."""
    speculation: dict[str, str] = field(default_factory=dict)
    """The speculative config without k: its ``method`` and draft ``model``."""
    request_rate: tuple[float, ...] = ()
    """Open-loop levels instead [req/s] (``bench --request-rate``): then ``concurrency`` is
    empty, and each level's requests arrive on a schedule whatever the server's progress."""
    burstiness: float = 1.0
    """The open-loop gaps' gamma shape [-] (1: Poisson)."""
    seed: int = 0
    """Seeds the open-loop schedules: every launch gets the same one."""
    max_concurrency: int | None = None
    """At most this many requests in flight at an open-loop level [requests]."""
    ignore_eos: bool = True
    """Every request generated to ``max_tokens`` (bench's default), else stopped where the
    model ends it (``--no-ignore-eos``)."""
    temperature: float = 0.0
    """The sampling temperature every request is sent with [-]."""
    top_p: float = 1.0
    """The nucleus sampling mass every request is sent with [fraction]."""

    @property
    def requests_per_launch(self) -> int:
        return sum(self.requests)

    @property
    def levels_text(self) -> str:
        """The load levels in words: ``concurrency 1, 4`` or ``request rate 2, 4 req/s``."""
        if self.request_rate:
            cap = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
            rates = ", ".join(f"{r:g}" for r in self.request_rate)
            return f"request rate {rates} req/s{cap}"
        return f"concurrency {', '.join(map(str, self.concurrency))}"

    def start_bound_s(self) -> float:
        """The longest the starts may take in all [s]: each launch up to the ready timeout."""
        return len(self.launches) * self.ready_timeout_s

    def measure_s(self, tok_s: float) -> float:
        """The measurement's time [s] at a per-sequence rate ``tok_s`` [tok/s]: each level's
        requests in waves of its concurrency, each request ``max_tokens`` long; an open-loop
        level's arrivals, then its last request's decode."""
        if self.request_rate:
            arriving = sum(n / r for n, r in zip(self.requests, self.request_rate, strict=True))
            last = len(self.request_rate) * self.max_tokens / tok_s
            return len(self.launches) * (arriving + last)
        waves = sum(math.ceil(r / c) for r, c in zip(self.requests, self.concurrency, strict=True))
        return len(self.launches) * waves * self.max_tokens / tok_s

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data, each serve command's secrets masked (``--api-key ***``):
        what ``--plan --json`` prints and the manifest holds."""
        return (
            {
                "engine": self.engine,
                "launches": [
                    {**asdict(launch), "argv": masked_argv(launch.argv)} for launch in self.launches
                ],
                "concurrency": list(self.concurrency),
                "requests": list(self.requests),
                "max_tokens": self.max_tokens,
                "ready_timeout_s": self.ready_timeout_s,
                "port": self.port,
                "speculation": dict(self.speculation),
                "start_bound_s": self.start_bound_s(),
            }
            | self._open_loop()
            | self._sampling()
        )

    def _sampling(self) -> dict[str, Any]:
        """The sampling settings other than bench's defaults (a plan, and its manifest, at
        the defaults holds none of them: a sweep begun before they existed resumes)."""
        given = {
            "ignore_eos": self.ignore_eos,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        defaults = {"ignore_eos": True, "temperature": 0.0, "top_p": 1.0}
        return {key: value for key, value in given.items() if value != defaults[key]}

    def _open_loop(self) -> dict[str, Any]:
        """The open-loop settings, where the levels are request rates (a closed-loop sweep's
        plan, and its manifest, hold none of them)."""
        if not self.request_rate:
            return {}
        return {
            "request_rate": list(self.request_rate),
            "burstiness": self.burstiness,
            "seed": self.seed,
            "max_concurrency": self.max_concurrency,
        }

    def _launch_lines(self) -> list[str]:
        """The order of the launches, the serve command once, and what each configuration
        adds to it (as shell lines to paste, within the display's width)."""
        from breakeven.render.text import command_lines  # lazy: start-up

        order = [f"{launch.label}" for launch in self.launches]
        lines = [f"  {', '.join(order)}"]
        shown = [tuple(masked_argv(x.argv)) for x in self.launches]  # never a token
        base = next(
            (a for a, x in zip(shown, self.launches, strict=True) if x.num_spec_tokens == 0), None
        )
        if base is None:
            return lines + [line for a in shown for line in command_lines(a, "    ")]
        lines += ["Each launch runs the serve command", *command_lines(base, "    ")]
        lines.append("with, for each configuration:")
        seen: set[str] = set()
        for launch, argv in zip(self.launches, shown, strict=True):
            if launch.label in seen:
                continue
            seen.add(launch.label)
            added = argv[len(base) :] if argv[: len(base)] == base else argv
            lines.append(f"  {launch.label}:" + ("" if added else " nothing added"))
            if added:
                lines += command_lines(added, "    ")
            for path, text in launch.files:  # written as the launch starts
                lines += [f"    {path} holding:", *("      " + x for x in text.splitlines())]
        return lines

    def report(self, tok_s: float = 20.0) -> str:
        """The launches in order, and the time they take: the starts at most, the
        measurement at ``tok_s`` [tok/s per sequence] (a slow large model's rate)."""
        lines = [
            f"{len(self.launches)} launches of {self.engine} (each runs {self.levels_text}: "
            f"{self.requests_per_launch} requests of "
            f"{'' if self.ignore_eos else 'at most '}{self.max_tokens} tokens), in this order:"
        ]
        lines += self._launch_lines()
        starts = self.start_bound_s()
        measure = self.measure_s(tok_s)
        lines.append(
            f"Time: starts at most {duration_text(starts)} ({len(self.launches)} x --ready-timeout "
            f"{self.ready_timeout_s:g} s), measuring about {duration_text(measure)} at {tok_s:g} tok/s "
            f"per sequence: at most {duration_text(starts + measure)} in all."
        )
        repeats = max(launch.repeat for launch in self.launches)
        if repeats < 3:
            lines.append(
                f"Note: {repeats} launch(es) of each configuration; an interval across launches "
                "has few degrees of freedom and comes out wide (--repeats 3 or more)."
            )
        from breakeven.render.text import wrap_lines  # lazy: start-up

        return wrap_lines("\n".join(lines) + "\n")


def duration_text(seconds: float) -> str:
    """A duration in the unit a person reads it in: s, min or h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def serve_argv(serve: str, port: int) -> list[str]:
    """The serve command as arguments, ``{port}`` filled in (a command that names no
    ``{port}`` keeps its own)."""
    try:
        words = shlex.split(serve)
    except ValueError as e:
        raise invalid_value("serve", serve, f"a command line ({e})") from None
    if not words:
        raise invalid_value("serve", serve, "the command that starts the server")
    return [w.replace("{port}", str(port)) for w in words]


def _draft_lengths(num_spec_tokens: Sequence[int]) -> list[int]:
    """The k to measure [tokens], each once in the order given, the baseline (k = 0) first if
    it is not given."""
    ks = list(dict.fromkeys(int(k) for k in num_spec_tokens))
    if any(k < 0 for k in ks):
        raise invalid_value("num_spec_tokens", ks, "draft tokens of 0 (the baseline) or more")
    if 0 not in ks:
        ks.insert(0, 0)
    if len(ks) < 2:
        raise BreakevenError(
            "{0}: got only the baseline (k = 0); give at least one k above 0", "num_spec_tokens"
        )
    return ks


def _check_sizes(
    per_repeat: int,
    repeats: int,
    ready_timeout_s: float,
    max_tokens: int,
    requests: int | None,
    port: int,
) -> None:
    """Raise for a count, time or port out of range (``per_repeat``: the launches of a repeat)."""
    if not (isinstance(repeats, int) and repeats >= 1):
        raise invalid_value("repeats", repeats, "a whole number of launches, at least 1")
    if per_repeat * repeats > MAX_LAUNCHES:
        raise invalid_value(
            "repeats",
            repeats,
            f"at most {MAX_LAUNCHES} launches in all ({per_repeat} k per repeat)",
        )
    if not (isinstance(ready_timeout_s, (int, float)) and 0 < ready_timeout_s <= MAX_READY_S):
        raise invalid_value(
            "ready_timeout_s", ready_timeout_s, f"seconds above 0, at most {MAX_READY_S:g}"
        )
    if not (isinstance(max_tokens, int) and 2 <= max_tokens <= 1_000_000):
        raise invalid_value(
            "max_tokens", max_tokens, "a whole number of tokens from 2 to 1,000,000"
        )
    if requests is not None and not (isinstance(requests, int) and 1 <= requests <= 1_000_000):
        raise invalid_value("requests", requests, "a whole number from 1 to 1,000,000")
    if not (isinstance(port, int) and 1 <= port <= 65535):
        raise invalid_value("port", port, "a port number from 1 to 65535")


def _levels(concurrency: Sequence[int]) -> tuple[int, ...]:
    """The load levels [requests in flight], each 1 or more."""
    levels = tuple(int(c) for c in concurrency)
    if not levels or any(c < 1 for c in levels):
        raise invalid_value("concurrency", list(concurrency), "load levels of 1 or more")
    return levels


def _launches(
    engine: str,
    argv: list[str],
    ks: list[int],
    repeats: int,
    name: str,
    base: dict[str, str],
    config_dir: str,
) -> list[SweepLaunch]:
    """Every launch, interleaved: for each repeat, each k in order, its command the serve
    command ``argv`` and the engine's flags for k and ``base``, labelled with ``name``;
    TensorRT-LLM's YAML for k goes in ``config_dir/configs/{label}.yaml``."""
    launches = []
    for repeat in range(1, repeats + 1):
        for k in ks:
            label = "baseline" if k == 0 else f"{name}-k{k}"
            files: tuple[tuple[str, str], ...] = ()
            path = None
            if engine == "trtllm" and k > 0:
                path = os.path.join(config_dir, "configs", f"{label}.yaml")
                files = ((path, trtllm_options_text(k, base)),)
            flags = speculation_args(engine, k, base, path)
            launches.append(
                SweepLaunch(len(launches) + 1, repeat, k, label, (*argv, *flags), files)
            )
    return launches


def plan_sweep(
    serve: str,
    engine: str,
    num_spec_tokens: Sequence[int],
    *,
    method: str | None = None,
    draft: str | None = None,
    concurrency: Sequence[int] | None = None,
    repeats: int = 1,
    requests: int | None = None,
    max_tokens: int = 256,
    ready_timeout_s: float = 600.0,
    port: int = 8000,
    request_rate: Sequence[float] = (),
    burstiness: float | None = None,
    seed: int | None = None,
    max_concurrency: int | None = None,
    config_dir: str = ".",
    ignore_eos: bool = True,
    temperature: float = 0.0,
    top_p: float = 1.0,
) -> SweepPlan:
    """The launches of a sweep, interleaved: for each repeat, every k in the order given
    (k = 0, the baseline, first if it is not given: a sweep without a baseline has no
    answer).

    Parameters
    ----------
    serve : str
        The plain server command; ``{port}`` stands for ``port``.
    engine : str
        One of :data:`breakeven.render.engine_configs.SPECULATION_ENGINES`: whose flags to add.
    num_spec_tokens : sequence of int
        The k to measure [tokens]; 0 is the baseline.
    method, draft : str, optional
        The drafting method (``eagle3``, ``draft_model``, ``ngram``, ...) and the draft
        model's path, for the engine's flags.
    concurrency : sequence of int, optional
        The load levels of every launch [requests in flight] (default 1).
    request_rate, burstiness, seed, max_concurrency
        Open-loop levels instead [req/s], as ``bench`` takes them
        (:class:`breakeven.bench.config.Config`): the gaps' gamma shape, the schedule's seed
        and the cap on requests in flight.
    repeats : int
        Launches of each configuration (``max_tokens``: tokens per request).
    requests : int, optional
        Requests per level (default: 4 x concurrency, at least 8, as bench).
    ready_timeout_s, config_dir
        The longest a launch may take to become ready [s]; the sweep's directory, where
        TensorRT-LLM's launches' YAML goes (``configs/``, each written as its launch starts).
    ignore_eos, temperature, top_p
        The sampling settings every request is sent with, as bench takes them (default: to
        ``max_tokens``, greedy).
    """
    _check_engine(engine, method)
    ks = _draft_lengths(num_spec_tokens)
    _check_sizes(len(ks), repeats, ready_timeout_s, max_tokens, requests, port)
    check_sampling(temperature, top_p, ignore_eos)
    levels, loads, burstiness, seed = _loads(
        concurrency, request_rate, burstiness, seed, max_concurrency, requests
    )
    base = {key: value for key, value in (("method", method), ("model", draft)) if value}
    name, argv = (method or "spec").lower(), serve_argv(serve, port)
    _refuse_own_options(engine, serve, argv)
    launches = _launches(engine, argv, ks, repeats, name, base, config_dir)
    return SweepPlan(
        engine,
        tuple(launches),
        levels,
        loads,
        max_tokens,
        ready_timeout_s,
        port,
        base,
        tuple(float(r) for r in request_rate),
        burstiness,
        seed,
        max_concurrency,
        *(ignore_eos, float(temperature), float(top_p)),
    )


def _check_engine(engine: str, method: str | None) -> None:
    """Raise for an engine the sweep cannot launch, or a method that is not a method's name."""
    if engine not in SPECULATION_ENGINES:
        raise invalid_value("engine", engine, f"one of {', '.join(SPECULATION_ENGINES)}")
    if method is not None and not METHOD_NAME.fullmatch(method):
        raise invalid_value(
            "method",
            method,
            "a drafting method's name (eagle3, draft_model, ngram, mtp: letters, digits, "
            "'_', '-' and '.'); a draft model's path or id goes in --draft",
        )


def _refuse_own_options(engine: str, serve: str, argv: list[str]) -> None:
    """A trtllm-serve command with an options file of its own: the sweep adds its own, and
    trtllm-serve reads one (the last given), so the command's would be dropped unseen."""
    own = [w for w in argv if w.split("=", 1)[0] in ("--extra_llm_api_options", "--config")]
    if engine == "trtllm" and own:
        raise invalid_value(
            "serve",
            serve,
            f"a trtllm-serve command without {own[0].split('=', 1)[0]}: the sweep gives each "
            "speculative launch an --extra_llm_api_options file of its own (put the options "
            "in flags)",
        )


def _loads(
    concurrency: Sequence[int] | None,
    request_rate: Sequence[float],
    burstiness: float | None,
    seed: int | None,
    max_concurrency: int | None,
    requests: int | None,
) -> tuple[tuple[int, ...], tuple[int, ...], float, int]:
    """The closed-loop levels (none for an open-loop sweep), each level's requests as bench
    counts them, and the open-loop burstiness and seed (1 and 0 unless given); the load
    settings checked as bench checks them (one line naming the setting: a rate or burstiness
    not above 0, both load axes, a setting of the open loop without rates)."""
    given = {"burstiness": burstiness, "seed": seed, "max_concurrency": max_concurrency}
    if not request_rate:
        shaping = [name for name, value in given.items() if value is not None]
        if shaping:
            raise BreakevenError(
                "{0}: shapes an open-loop level; give {1} too (closed loop: {2})",
                shaping[0],
                "request_rate",
                "concurrency",
            )
        levels = _levels(concurrency or (1,))
        return levels, tuple(requests or max(8, 4 * c) for c in levels), 1.0, 0
    burstiness, seed = 1.0 if burstiness is None else float(burstiness), seed or 0
    from breakeven.bench.config import Config  # lazy: pandas, for the open loop only

    config = Config(
        url="http://127.0.0.1",
        label="sweep",
        concurrency=tuple(concurrency or ()),
        request_rate=tuple(request_rate),
        burstiness=burstiness,
        seed=seed,
        max_concurrency=max_concurrency,
        requests=requests,
    )
    config.check()
    return (), tuple(config.requests_in(load) for load in config.loads()), burstiness, seed


__all__: Sequence[str] = (
    "SweepLaunch",
    "SweepPlan",
    "duration_text",
    "plan_sweep",
    "serve_argv",
)
