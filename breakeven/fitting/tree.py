"""Tree drafts: how many tokens a tree of S steps, T branches and N verify tokens accepts.

A tree draft (SGLang's and EAGLE-2's ``--speculative-num-steps S
--speculative-eagle-topk T --speculative-num-draft-tokens N``) drafts S steps.
Each step expands the T best nodes of the last one by their T most likely next
tokens, and the N - 1 best nodes of all those drafted (by their path's
probability) go to the verify forward with the last emitted token: N tokens per
sequence.  A chain is T = 1 and N = S + 1, the k = S of the rest of breakeven.

The acceptance model
--------------------
At every depth the target's next token is the draft's rank-r candidate (r = 1
.. T) with probability ``q_r = alpha * rank_decay**(r - 1)``, independently of
depth: ``alpha`` is the chain's i.i.d. per-token acceptance (Leviathan et al.),
and ``rank_decay`` says how much less likely each further candidate is.  At most
one child of a node is the target's token, so the chance that a node is on the
accepted path is the product of its candidates' ``q`` down from the root, and
accept_len (bonus token included, as everywhere in breakeven) is 1 plus the sum
of that chance over the N - 1 nodes verified.  The nodes are picked as the
engine picks them: the T best of each step are expanded, the N - 1 best of all
are verified (SGLang's ``organize_draft_results``).

The candidates' chances add up to at most 1 (one of them, or none, is the target's
token) at every topk only where ``rank_decay <= 1 - alpha``: that bound, the chances
``alpha (1 - alpha)**(r - 1)`` of candidates that each miss independently, is the most
the model allows, and the default where no tree was run.  Measured
trees accept far less than it says (AngelSlim#163: 3.03 tokens at S=7, T=10,
N=64 where independent candidates give 4.12), and :func:`fit_tree_acceptance`
fits ``rank_decay`` to the runs instead (3.00 there).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from breakeven import render
from breakeven.core.errors import BreakevenError

MAX_TREE_TOPK = 64
"""The most branches per step breakeven models [branches]."""


def pool_size(steps: int, topk: int) -> int:
    """Nodes a tree of ``steps`` steps and ``topk`` branches drafts: ``topk`` at the first
    step and ``topk**2`` at each later one (``steps`` for a chain).  ``verify_tokens - 1``
    can be at most this."""
    return steps if topk == 1 else topk + (steps - 1) * topk * topk


def check_tree(
    steps: Any,
    topk: Any,
    verify_tokens: Any,
    names: Sequence[str] = ("steps", "topk", "verify_tokens"),
) -> tuple[int, int, int]:
    """``(steps, topk, verify_tokens)`` as whole numbers a tree can have, else a
    :class:`BreakevenError` naming the argument.  ``verify_tokens`` None is the chain's
    ``steps + 1``."""
    out = []
    given = (steps, topk, 2 if verify_tokens is None else verify_tokens)
    for name, value, high in zip(names, given, (4096, MAX_TREE_TOPK, 1 << 20), strict=True):
        whole = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value == int(value)
        )
        if not (whole and 1 <= value <= high):
            raise BreakevenError(
                "{0}: got " + repr(value) + f", expected a whole number from 1 to {high}", name
            )
        out.append(int(value))
    s, t, n = out
    if verify_tokens is None:
        n = s + 1
    most = pool_size(s, t) + 1
    if not 2 <= n <= most:
        raise BreakevenError(
            "{0}: got " + str(n) + f", expected 2 to {most}: a tree of {s} "
            f"steps and {t} branches drafts {most - 1} nodes, and the verify "
            "forward takes them with the last token",
            names[2],
        )
    return s, t, n


def check_acceptance(alpha: Any, rank_decay: Any) -> None:
    """A :class:`BreakevenError` unless ``0 <= alpha <= 1`` and ``0 <= rank_decay <= 1 -
    alpha`` (the candidates' chances add up to at most 1)."""
    for name, value in (("alpha", alpha), ("rank_decay", rank_decay)):
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 <= value <= 1):
            raise BreakevenError(
                "{0}: got " + repr(value) + ", expected a probability in [0, 1]", name
            )
    if rank_decay > 1 - alpha + 1e-9:
        raise BreakevenError(
            "{0}: got " + f"{rank_decay!r}, expected at most 1 - alpha = "
            f"{1 - alpha:.6g}: the chances of the candidates, alpha x "
            "rank_decay^(r-1), add up to at most 1",
            "rank_decay",
        )


def _candidates(alpha: float, rank_decay: float, topk: int) -> list[float]:
    return [alpha * rank_decay**r for r in range(topk)]


def node_chances(alpha: float, rank_decay: float, steps: int, topk: int) -> list[float]:
    """The chance that each drafted node is on the accepted path, best first: the nodes the
    engine drafts, ``pool_size(steps, topk)`` of them."""
    q = _candidates(alpha, rank_decay, topk)
    frontier, pool = [1.0], []
    for _ in range(steps):
        children = heapq.nlargest(len(frontier) * topk, (p * c for p in frontier for c in q))
        pool.extend(children)
        frontier = children[:topk]
    pool.sort(reverse=True)
    return pool


def tree_accept_len(
    alpha: float, rank_decay: float, steps: int, topk: int = 1, verify_tokens: int | None = None
) -> float:
    """Mean accept_len of a tree draft [tokens/cycle], bonus token included (see the module).

    ``alpha`` is in [0, 1] and ``rank_decay`` in [0, 1 - alpha]; ``verify_tokens`` defaults to the chain's
    ``steps + 1``.  At ``topk = 1`` this is Leviathan's ``(1 - alpha**(S+1)) / (1 - alpha)``.
    """
    check_acceptance(alpha, rank_decay)
    s, t, n = check_tree(steps, topk, verify_tokens)
    decay = min(float(rank_decay), 1.0 - float(alpha))  # within the rounding allowance
    return 1.0 + math.fsum(node_chances(float(alpha), decay, s, t)[: n - 1])


@dataclass(frozen=True)
class TreeRun:
    """One drafted configuration: its measured accept_len and the model's."""

    steps: int
    topk: int
    verify_tokens: int
    accept_len: float
    """Measured, the mean over its runs [tokens/cycle]."""
    runs: int
    predicted_accept_len: float
    """From alpha and rank_decay fitted to every configuration [tokens/cycle]."""
    held_out_accept_len: float
    """From the fit without this configuration [tokens/cycle] (NaN: too few left)."""


@dataclass(frozen=True)
class TreeAcceptance:
    """Fitted tree acceptance of one model, hardware and drafting method."""

    alpha: float
    """Chance that the draft's best candidate is the target's token [probability]."""
    rank_decay: float
    """Each further candidate's chance over the one before it [fraction]."""
    basis: str
    """How the two were found, in words."""
    runs: tuple[TreeRun, ...] = ()
    held_out_max_rel_error: float = math.nan
    """Largest |held_out_accept_len / accept_len - 1| [fraction] (NaN: none held out)."""
    model: str = ""
    hardware: str = ""
    spec_method: str = ""
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TreeAcceptance:
        """A tree acceptance as a fit file holds it (:func:`breakeven.iotools.fitfile.read_tree`):
        ``alpha`` [probability], ``rank_decay`` [fraction], ``basis``, ``model``, ``hardware``
        and ``spec_method``; the fit's runs are not kept."""
        return cls(
            float(data["alpha"]),
            float(data["rank_decay"]),
            str(data.get("basis", "")),
            model=str(data.get("model", "")),
            hardware=str(data.get("hardware", "")),
            spec_method=str(data.get("spec_method", "")),
        )

    def accept_len(self, steps: int, topk: int = 1, verify_tokens: int | None = None) -> float:
        """Predicted accept_len [tokens/cycle] (:func:`tree_accept_len`)."""
        return tree_accept_len(self.alpha, self.rank_decay, steps, topk, verify_tokens)


def _solve(
    configs: Sequence[tuple[int, int, int, float]], start: Sequence[float] | None = None
) -> tuple[float, float, bool, list[float]]:
    """(alpha, rank_decay, decay fitted?, the solver's x) by bounded least squares on log
    accept_len, from the best point of a coarse grid and from ``start`` (a solver's x)."""

    trees = [c for c in configs if c[1] > 1]
    fit_decay = len(trees) >= 1 and len(configs) >= 2

    def residuals(x: Any) -> Any:  # x: alpha, and rank_decay as a share of its bound 1 - alpha
        a = float(x[0])
        r = float(x[1]) * (1.0 - a) if fit_decay else 1.0 - a
        return np.array(
            [math.log(tree_accept_len(a, r, s, t, n)) - math.log(tau) for s, t, n, tau in configs]
        )

    # The loss is only piecewise smooth (which nodes are verified changes with the two), so
    # the solver starts from the best point of a coarse grid.
    grid = [(a, f) for a in np.linspace(0.05, 0.95, 10) for f in np.linspace(0.05, 0.95, 10)]
    if not fit_decay:
        grid = [(a,) for a in np.linspace(0.05, 0.95, 19)]
    starts = [list(min(grid, key=lambda g: float(np.sum(residuals(g) ** 2))))]
    if start is not None and len(start) == (2 if fit_decay else 1):
        starts.append([min(max(float(v), 1e-6), 1 - 1e-6) for v in start])
    bounds = ([0.0, 0.0], [1.0, 1.0]) if fit_decay else ([0.0], [1.0])
    # The lower of the solutions from each start (local minima are where verified nodes swap).
    x = min(
        (least_squares(residuals, x0, bounds=bounds, method="trf") for x0 in starts),
        key=lambda r: float(r.cost),
    ).x
    alpha = float(x[0])
    decay = float(x[1]) * (1.0 - alpha) if fit_decay else 1.0 - alpha
    return alpha, decay, fit_decay, [float(v) for v in x]


def fit_tree_acceptance(
    configs: Sequence[tuple[int, int, int, float, int]], **labels: str
) -> TreeAcceptance:
    """Fit ``alpha`` and ``rank_decay`` to measured configurations ``(steps, topk,
    verify_tokens, accept_len, runs)``: both where a tree (topk > 1) and one more
    configuration were run, else ``alpha`` alone with ``rank_decay = 1 - alpha``
    (independent candidates, said in ``basis``).  Each configuration is also predicted
    from the fit without it (leave-one-out)."""
    rows = [(*check_tree(s, t, n), float(tau), int(runs)) for s, t, n, tau, runs in configs]
    for s, _, _, tau, _ in rows:
        if not (isinstance(tau, float) and 1.0 <= tau <= s + 1 + 1e-9):
            raise BreakevenError(
                "{0}: got " + repr(tau) + f", expected 1 to {s + 1} (steps + 1) tokens per cycle",
                "accept_len",
            )
    if not rows:
        raise BreakevenError("{0}: got no configuration with an accept_len", "configs")
    alpha, decay, fitted, x = _solve([r[:4] for r in rows])
    runs = []
    for i, (s, t, n, tau, count) in enumerate(rows):
        rest = rows[:i] + rows[i + 1 :]
        held = math.nan
        if rest:
            a, d, _, _ = _solve([r[:4] for r in rest], start=x)
            held = tree_accept_len(a, d, s, t, n)
        runs.append(TreeRun(s, t, n, tau, count, tree_accept_len(alpha, decay, s, t, n), held))
    errors = [
        abs(r.held_out_accept_len / r.accept_len - 1)
        for r in runs
        if math.isfinite(r.held_out_accept_len)
    ]
    basis = (
        f"alpha and rank_decay fitted to {len(rows)} configurations"
        if fitted
        else f"alpha fitted to {len(rows)} configuration{'s' * (len(rows) != 1)}; rank_decay "
        "= 1 - alpha (independent candidates), assumed: no tree with another "
        "configuration was run"
    )
    return TreeAcceptance(alpha, decay, basis, tuple(runs), max(errors, default=math.nan), **labels)


@dataclass(frozen=True)
class TreeOption:
    """One tree searched: its predicted accept_len, cycle and speedup."""

    steps: int
    topk: int
    verify_tokens: int
    accept_len: float
    """Predicted [tokens/cycle]."""
    cycle_ms: float
    """[ms]"""
    speedup: float
    """accept_len * step_ms / cycle_ms [x]."""


@dataclass(frozen=True)
class TreeSearch:
    """The trees of a search, best first, and the best chain among them."""

    step_ms: float
    """The plain decode step the speedups are over [ms]."""
    options: tuple[TreeOption, ...]
    """Every tree searched, highest speedup first; of trees that verify the same nodes at the
    same cost, only the one with the fewest branches and steps."""
    best_chain: TreeOption | None
    """The best topk = 1 tree (a chain of k = steps)."""
    acceptance: TreeAcceptance
    bounds: dict[str, int]
    """max_steps, max_topk, max_verify_tokens."""
    notes: tuple[str, ...] = ()
    batch: int = 1
    """Sequences decoded together [sequences]."""
    evidence: Any = None
    """What the fit file's runs measured (:class:`breakeven.fitting.saved.Evidence`), where the
    costs came from one; None otherwise."""
    refused: tuple[str, ...] = ()
    """Why the best tree's flags are not pasted: the fit's runs do not support its speedup
    (:func:`breakeven.fitting.saved.within_evidence`); empty where they do."""

    @property
    def best(self) -> TreeOption:
        return self.options[0]

    def to_dict(self, top: int = 10) -> dict[str, Any]:

        best = self.best
        return {
            "step_ms": self.step_ms,
            "batch": self.batch,
            "best_tree": asdict(best),
            "best_chain": asdict(self.best_chain) if self.best_chain else None,
            "gain_over_chain": (
                best.speedup / self.best_chain.speedup - 1 if self.best_chain else None
            ),
            "acceptance": {
                "alpha": self.acceptance.alpha,
                "rank_decay": self.acceptance.rank_decay,
                "basis": self.acceptance.basis,
            },
            "bounds": dict(self.bounds),
            "searched": len(self.options),
            "top": [asdict(o) for o in self.options[:top]],
            "notes": list(self.notes),
            **(
                {
                    "pasted": not self.refused,
                    "refused": list(self.refused),
                    "evidence": self.evidence.to_dict(),  # strict JSON: NaN is None
                }
                if self.evidence is not None
                else {}
            ),
        }

    def report(self) -> str:
        """What ``breakeven optimize --tree`` prints: the best tree, the best chain, the
        SGLang flags and the ten best trees searched."""
        return render.tree_search_text(self.to_dict())

    def _repr_html_(self) -> str:
        return render.tree_search_html(self.to_dict())


def _check_search(step_ms: Any, max_steps: Any, max_topk: Any, max_verify_tokens: Any) -> None:
    """A :class:`BreakevenError` naming the first of the search's inputs out of range."""
    for name, value, high in (
        ("max_steps", max_steps, 64),
        ("max_topk", max_topk, MAX_TREE_TOPK),
        ("max_verify_tokens", max_verify_tokens, 4096),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise BreakevenError(
                "{0}: got " + repr(value) + f", expected a whole number from 1 to {high}", name
            )
    if not (isinstance(step_ms, (int, float)) and step_ms > 0 and math.isfinite(step_ms)):
        raise BreakevenError(
            "{0}: got " + repr(step_ms) + ", expected a positive time in ms", "step_ms"
        )
    if max_verify_tokens < 2:
        raise BreakevenError(
            "{0}: got 1, expected at least 2: a verify takes the last token and one drafted",
            "max_verify_tokens",
        )


def _bound_notes(best: TreeOption, bounds: dict[str, int]) -> list[str]:
    """Where the best tree sits on a bound of the search: say so."""
    notes = []
    for name in ("steps", "topk", "verify_tokens"):
        bound = bounds[f"max_{name}"]
        if getattr(best, name) == bound and bound > 1:
            notes.append(
                f"the best tree's {name} is the largest searched ({bound}): raise "
                f"--max-{name.replace('_', '-')} to look further"
            )
    return notes


def search_trees(
    step_ms: float,
    cycle_ms: Any,
    acceptance: TreeAcceptance,
    *,
    max_steps: int = 8,
    max_topk: int = 8,
    max_verify_tokens: int = 64,
) -> TreeSearch:
    """Every tree with ``steps <= max_steps``, ``topk <= max_topk`` and ``verify_tokens <=
    max_verify_tokens`` that the engine can run (a chain's verify_tokens is steps + 1; a
    tree verifies at most the nodes it drafts), priced with ``cycle_ms(steps, topk,
    verify_tokens)`` [ms] against the plain decode step ``step_ms`` [ms].  A tree whose
    ``cycle_ms`` is None (beyond the cost model) is left out, and counted in the notes."""
    _check_search(step_ms, max_steps, max_topk, max_verify_tokens)
    options, skipped = [], 0
    for s in range(1, max_steps + 1):
        for t in range(1, max_topk + 1):
            chances = node_chances(acceptance.alpha, acceptance.rank_decay, s, t)
            sums = [1.0]
            for c in chances:
                sums.append(sums[-1] + c)
            verify = [s + 1] if t == 1 else range(2, min(max_verify_tokens, len(chances) + 1) + 1)
            for n in verify:
                if n > max_verify_tokens:
                    continue
                cycle = cycle_ms(s, t, n)
                if cycle is None:
                    skipped += 1
                    continue
                cycle = float(cycle)
                if not (cycle > 0 and math.isfinite(cycle)):
                    raise BreakevenError(
                        "{0}: the cycle at steps " + f"{s}, topk {t}, verify "
                        f"tokens {n} is {cycle!r} ms, expected a positive time",
                        "cycle_ms",
                    )
                tau = sums[n - 1]
                options.append(TreeOption(s, t, n, tau, cycle, tau * step_ms / cycle))
    if not options:
        raise BreakevenError(
            "{0}: got " + str(max_verify_tokens) + ", which leaves no tree the cost model covers",
            "max_verify_tokens",
        )
    options.sort(key=lambda o: (-o.speedup, o.verify_tokens, o.topk, o.steps))
    # More branches or steps that verify the same nodes at the same cost are the same tree,
    # dearer to run (memory, graphs): keep the smallest.
    seen: set[tuple[int, float, float]] = set()
    distinct = []
    for o in options:
        key = (o.verify_tokens, round(o.accept_len, 12), round(o.cycle_ms, 9))
        if key not in seen:
            seen.add(key)
            distinct.append(o)
    options = distinct
    chains = [o for o in options if o.topk == 1]
    bounds = {"max_steps": max_steps, "max_topk": max_topk, "max_verify_tokens": max_verify_tokens}
    notes = (
        [f"{skipped} trees verify more tokens than the cost model covers: left out"]
        if skipped
        else []
    )
    notes += _bound_notes(options[0], bounds)
    return TreeSearch(
        float(step_ms),
        tuple(options),
        chains[0] if chains else None,
        acceptance,
        bounds,
        tuple(notes),
    )


__all__: Sequence[str] = (
    "MAX_TREE_TOPK",
    "TreeAcceptance",
    "TreeOption",
    "TreeRun",
    "TreeSearch",
    "check_acceptance",
    "check_tree",
    "fit_tree_acceptance",
    "node_chances",
    "pool_size",
    "search_trees",
    "tree_accept_len",
)
