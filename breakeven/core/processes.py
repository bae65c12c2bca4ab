"""This host's processes as ``/proc`` shows them: each one's parent and state, the tree under
a process, and the processes whose environment carries a mark.

``breakeven sweep`` marks every process of a launch with :data:`MARK_VARIABLE` in its
environment (inherited by every descendant, whatever it does: a double fork, ``setsid``), and
finds them again here: to stop a launch's whole tree, and, on ``--resume``, what an earlier run
left.  Only this user's processes can be read; another's are never listed.  Where there is no
``/proc`` (macOS), every function answers "none": the keeper then falls back on process groups.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

PROC = "/proc"
MARK_VARIABLE = "BREAKEVEN_SWEEP_LAUNCH"
"""The environment variable marking a launch's processes: ``SWEEP_ID:INDEX``."""
GONE_STATES = frozenset("ZXx")
"""States of a process that has ended (a zombie waits only for its parent to read its code)."""


def has_process_table(proc: str = PROC) -> bool:
    """Whether this host shows its processes under ``proc``."""
    return os.path.isfile(os.path.join(proc, "self", "stat"))


def _stat(pid: str, proc: str) -> tuple[int, str] | None:
    """A process's parent and state, from ``/proc/PID/stat`` (its name, in parentheses, may
    hold spaces and parentheses: the fields after the last ``)`` are read)."""
    try:
        with open(os.path.join(proc, pid, "stat"), "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    if len(fields) < 2 or not fields[1].lstrip("-").isdigit():
        return None
    return int(fields[1]), fields[0]


def process_table(proc: str = PROC) -> dict[int, tuple[int, str]]:
    """Every process this host shows: its id, its parent's and its state (``R``, ``S``, ``Z``)."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return {}
    table = {}
    for pid in pids:
        stat = _stat(pid, proc)
        if stat is not None:
            table[int(pid)] = stat
    return table


def descendants(root: int, table: dict[int, tuple[int, str]]) -> list[int]:
    """The processes under ``root`` (not ``root`` itself) that have not ended, nearest first."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    seen = {root}
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        if table[pid][1] not in GONE_STATES:
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _mark(pid: str, proc: str) -> str | None:
    """The value of :data:`MARK_VARIABLE` in a process's environment, or None."""
    key = MARK_VARIABLE.encode() + b"="
    try:
        with open(os.path.join(proc, pid, "environ"), "rb") as f:
            environ = f.read(1 << 20)
    except OSError:  # another user's, or gone
        return None
    for item in environ.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode("utf-8", "replace")
    return None


def marked(mark: str, proc: str = PROC, among: Iterable[int] | None = None) -> list[int]:
    """The processes (of ``among``, else all) that have not ended and whose
    :data:`MARK_VARIABLE` is ``mark`` or starts with ``mark:`` (a launch's ``SWEEP_ID:INDEX``;
    a sweep's ``SWEEP_ID`` finds every launch of it)."""
    table = process_table(proc)
    pids = table if among is None else [p for p in among if p in table]
    return sorted(
        pid
        for pid in pids
        if table[pid][1] not in GONE_STATES
        and pid != os.getpid()
        and (value := _mark(str(pid), proc)) is not None
        and (value == mark or value.startswith(mark + ":"))
    )


def command_name(pid: int, proc: str = PROC) -> str:
    """A process's name (``/proc/PID/comm``: at most 15 characters), printable; "" if unknown."""
    try:
        with open(os.path.join(proc, str(pid), "comm"), "rb") as f:
            name = f.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return "".join(c if c.isprintable() else "?" for c in name)


def named(pids: Iterable[int], proc: str = PROC, most: int = 5) -> str:
    """Processes as ``pid 12 (vllm), pid 13 (python3)``, the first ``most`` of them."""
    pids = list(pids)
    shown = [
        f"pid {pid}" + (f" ({name})" if (name := command_name(pid, proc)) else "") for pid in pids
    ]
    more = f" and {len(pids) - most} more" if len(pids) > most else ""
    return ", ".join(shown[:most]) + more


__all__ = [
    "MARK_VARIABLE",
    "PROC",
    "command_name",
    "descendants",
    "has_process_table",
    "marked",
    "named",
    "process_table",
]
