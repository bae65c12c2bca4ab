"""Engine logs straight to measurement CSV rows, fast: the engine of ``breakeven ingest --out``.

The rows are exactly those of :func:`breakeven.iotools.logs.iter_log`'s
records, completed (:func:`~breakeven.iotools.records.complete`) and written by
:func:`~breakeven.iotools.records.csv_rows`; the tests compare the bytes.  Two
things make it fast.

**Canonical SGLang decode lines are written column-wise.**  A server's log is
mostly ``Decode batch`` lines of one shape.  One regular expression per block
finds those whose every value is a plain number (:data:`CANONICAL_DECODE`; no
nested repetition, so matching is linear in the line).  It captures each number
in the form Python's ``repr`` would print it, counts as integers of at most 15
digits (``37`` is written ``37.0``) and decimals of at most 15 significant
digits without trailing zeros (``2.50`` is written ``2.5``), so the printed
text goes to the CSV without a round trip through float; only the per-sequence
rate is computed, by one division per line.  Any other decode line, and every
other kind of line, takes the general path.

**Blocks are read in parallel.**  A block of the log is read without knowing
the reader's state at its start (a vLLM throughput record waiting for its
spec-decode line, SGLang idle time, vLLM V0's last counters;
:class:`~breakeven.iotools.logs.LogReader`).  A line whose record depends on
state the block has not yet determined is sent back parsed, with the part of
the state the block did determine, and the parent applies it in order with the
true state.  Applying a line writes every part of the state it reads, so after
it the block knows that part again.  Blocks go to worker processes, a few at a
time, so memory stays bounded.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate, compress, islice, repeat
from operator import itemgetter, truediv
from typing import Any

from breakeven.iotools import logs
from breakeven.iotools.logs import (
    READS,
    SGLANG_DECODE,
    SGLANG_PREFILL,
    STATE,
    VLLM_THROUGHPUT,
    VLLM_V1,
    LineError,
    LogReader,
    Problem,
    iter_blocks,
)
from breakeven.iotools.records import Tally, complete, csv_rows

# Canonical decode lines.  The pattern starts with a literal, which the regex engine finds
# fast; a match must also start a line (checked apart).
# An integer count whose repr as a float is the text and ".0".
_COUNT = rb"(0|[1-9]\d{0,14})"
# A decimal captured as repr prints its float: no leading or trailing zeros, at most
# 15 significant digits, at least 0.0001 (repr switches to exponents below).
_DECIMAL = rb"((?:0|[1-9]\d{0,10})\.(?:\d{0,3}[1-9]|0))0*"
_RATIO = rb"\d{1,6}\.\d{1,6}"


def _decode_pattern(line: bytes | None = None) -> bytes:
    """The canonical decode pattern; given a canonical line, the same pattern narrowed to
    lines of that line's shape (its tags, fields and ending), which matches faster.  Every
    narrowed pattern matches a subset of the lines the general one does, with the same
    groups."""
    accept = rb"accept len: " + _DECIMAL + b", "
    rate = rb"accept rate: " + _RATIO + b", "
    largest = rb"largest-len: \d{1,15}, "
    if line is None:
        tags, sep, cuda, tail = (
            rb"(?: [A-Z]{2}\d{1,4})*",
            b"[.,]",
            rb"(?:cuda graph: (?:True|False), )?",
            rb"(?:, ?)?\r?",
        )
        accept, rate, largest = (
            b"(?:" + accept + b")?",
            b"(?:" + rate + b")?",
            b"(?:" + largest + b")?",
        )
    else:
        tags = re.escape(line[20 : line.index(b"]")])
        after = line.index(b"Decode batch") + 12
        sep = re.escape(line[after : after + 1])
        at = line.find(b"cuda graph: ")
        cuda = re.escape(line[at:].partition(b", ")[0] + b", ") if at >= 0 else b""
        tail = re.escape(line.rpartition(b"#queue-req: ")[2].lstrip(b"0123456789"))
        accept = accept if b"accept len: " in line else b"(?:" + accept + b")?"  # keeps the group
        rate = rate if b"accept rate: " in line else b""
        largest = largest if b"largest-len: " in line else b""
    return (
        rb"\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)" + tags + rb"\] Decode batch" + sep
        + rb" #running-req: ([1-9]\d{0,14}), #token: " + _COUNT + rb", token usage: " + _RATIO
        + b", " + accept + rate + cuda + rb"gen throughput \(token/s\): " + _DECIMAL + b", "
        + largest + rb"#queue-req: " + _COUNT + tail + b"$"
    )  # fmt: skip


CANONICAL_DECODE = re.compile(_decode_pattern(), re.MULTILINE)
_NARROWED: dict[bytes, re.Pattern[bytes]] = {}  # narrowed patterns by pattern text


def _decode_matches(data: bytes, decode_lines: int) -> list[re.Match[bytes]]:
    """The canonical decode lines of ``data``, a block holding ``decode_lines`` of them."""

    def at_line_start(pattern: re.Pattern[bytes]) -> list[re.Match[bytes]]:
        return [m for m in pattern.finditer(data) if not m.start() or data[m.start() - 1] == 10]

    first = data.find(b"Decode batch")
    start = data.rfind(b"\n", 0, first) + 1
    line = data[start : data.find(b"\n", first)]
    if CANONICAL_DECODE.fullmatch(line) is not None:  # try the narrowed pattern of its shape
        text = _decode_pattern(line)
        narrowed = _NARROWED.get(text)
        if narrowed is None:
            if len(_NARROWED) > 64:
                _NARROWED.clear()
            narrowed = _NARROWED[text] = re.compile(text, re.MULTILINE)
        matches = at_line_start(narrowed)
        if len(matches) == decode_lines:
            return matches
    return at_line_start(CANONICAL_DECODE)


_UNKNOWN = object()  # a part of the reader's state a block has not determined
_PHANTOM = {"pending": None, "sglang_idle": True, "v0_last": None}  # any value will do
_IN_FLIGHT_PER_WORKER = 2  # blocks handed to each worker ahead of the parent


class _FloatCache(dict):  # type: ignore[type-arg]
    """float(text), remembered: for values with few distinct texts (request counts, accept len)."""

    def __missing__(self, text: bytes) -> float:
        if len(self) > 4096:
            self.clear()
        value = self[text] = float(text)
        return value


_FLOATS = _FloatCache()


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


@dataclass
class BlockResult:
    """What a block of the log gives: CSV bytes, parsed lines for the parent to apply
    (with the state the block knew), and problems, in order; the state at the block's
    end, as far as the block determined it; and its records' tally."""

    segments: list[Any]
    end_state: dict[str, Any]
    tally: Tally


_MARK = r"~(\w+)~"  # a field of a template (in text breakeven writes, never in a log)
# How templates write each field: computed floats as repr, counts as float text; %s else.
_SPEC = {"tok_s": "%r", "line": "%d", "k": "%d", "drafts": "%r", "tau": "%r", "rate": "%r",
         "running": "%s.0", "queue": "%s.0", "tokens": "%s.0", "accepted": "%s.0",
         "drafted": "%s.0"}  # fmt: skip
_K_MARK = 987654321123  # stands for k in a template


def _template(record: dict[str, Any], stamp: dict[str, Any]) -> tuple[bytes, tuple[str, ...]]:
    """A record whose values are marks (``~name~``) as a bytes %-template, built by the
    general path, and the marks' names in the order the template takes their values."""
    text = csv_rows([complete(record, stamp)]).decode("utf-8").replace("%", "%%")
    text = text.replace(f",{_K_MARK},", ",~k~,")  # k must be an int to pass complete()
    order = tuple(re.findall(_MARK, text))
    text = re.sub(_MARK, lambda m: _SPEC.get(m.group(1), "%s"), text)
    return text.encode("utf-8"), order


class _Templates:
    """CSV rows of canonical decode lines, as bytes %-templates built by the general path,
    each with the names of its fields in order."""

    def __init__(self, path: str, k: int | None, stamp: dict[str, Any]) -> None:
        self.k = k
        self.with_tau = self._template(path, stamp, tau=True)
        self.without_tau = self._template(path, stamp, tau=False)

    def _template(
        self, path: str, stamp: dict[str, Any], tau: bool
    ) -> tuple[bytes, tuple[str, ...]]:
        record = {
            "format": SGLANG_DECODE, "engine": "sglang", "origin": "server",
            "timestamp": "~date~T~time~", "source": f"{path}:~line~",
            "running_reqs": "~running~", "concurrency": "~running~", "queue_reqs": "~queue~",
            "tokens_in_use": "~tokens~", "gen_tok_s": "~gen~", "aggregate_tok_s": "~gen~",
            "tok_s": "~tok_s~", "first_after_idle": False,
            "accept_len": "~accept_len~" if tau else None,
            "num_spec_tokens": self.k if tau else None,
            "acceptance_rate": "~rate~" if tau and self.k else None,
        }  # fmt: skip
        return _template(record, stamp)


# vLLM's throughput and spec-decode lines as current versions print them, whole, with the
# numbers captured as repr prints them (see _COUNT and _DECIMAL).  Other lines, and these
# lines when the block does not know the waiting throughput record, take the general path.
_VLLM_PREFIX = (
    rb"(?:\(\w{1,40} pid=\d{1,9}\) )?INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]{1,60}:\d{1,6}\] "
)
VLLM_THROUGHPUT_LINE = re.compile(
    _VLLM_PREFIX
    + rb"(?:Engine \d{1,4}: )?Avg prompt throughput:"
    + logs.throughput_fields_pattern(_DECIMAL.decode(), _COUNT.decode()).encode()
    + rb"\.?\r?"
)
VLLM_V1_LINE = re.compile(
    _VLLM_PREFIX
    + rb"SpecDecoding metrics: "
    + logs.v1_fields_pattern(_COUNT.decode(), per_position=True).encode()
    + rb"[,.]? ?\r?"
)


class _VllmRows:
    """CSV rows of canonical vLLM throughput and spec-decode records, by template."""

    def __init__(self, path: str, stamp: dict[str, Any]) -> None:
        base = {"engine": "vllm", "origin": "server", "timestamp": "~ts~",
                "source": f"{path}:~line~"}  # fmt: skip
        rates = {"gen_tok_s": "~gen~", "prompt_tok_s": "~prompt~", "running_reqs": "~running~",
                 "queue_reqs": "~queue~", "aggregate_tok_s": "~gen~", "tok_s": "~tok_s~",
                 "concurrency": "~running~"}  # fmt: skip
        spec = {"accepted_tokens": "~accepted~", "draft_tokens": "~drafted~",
                "num_spec_tokens": _K_MARK, "per_position": "~per_position~",
                "num_drafts": "~drafts~", "accept_len": "~tau~", "acceptance_rate": "~rate~"}  # fmt: skip
        self.throughput = self._template({"format": VLLM_THROUGHPUT, **base, **rates}, stamp)
        self.spec = self._template({"format": VLLM_V1, **base, **spec}, stamp)
        self.merged = self._template({"format": VLLM_V1, **base, **spec, **rates}, stamp)
        self.cells: dict[bytes, tuple[bytes, int]] = {}  # per-position text -> CSV cell, k

    @staticmethod
    def _template(record: dict[str, Any], stamp: dict[str, Any]) -> Any:
        """The template, and a function from a dict of its fields' values to its arguments."""
        template, order = _template(record, stamp)
        return template, itemgetter(*order)

    def per_position(self, text: bytes) -> tuple[bytes, int]:
        """The CSV cell of a per-position rate list as csv writes a list, and its length."""
        cell = self.cells.get(text)
        if cell is None:
            rates = [float(x) for x in text.split(b", ")]
            shown = str(rates).encode()
            if len(self.cells) > 4096:
                self.cells.clear()
            cell = self.cells[text] = (b'"' + shown + b'"' if b"," in shown else shown, len(rates))
        return cell


@dataclass
class Context:
    """What reading a block needs besides the block: the file, k, the user's stamp."""

    path: str
    num_spec_tokens: int | None
    stamp: dict[str, Any]

    def __post_init__(self) -> None:
        # Columns a user's text could make special ('~' marks a template's fields) turn the
        # column-wise path off; the general path then writes every row.
        texts = [self.path, *(str(v) for v in self.stamp.values() if v is not None)]
        plain = not any("~" in t for t in texts)
        self.templates = _Templates(self.path, self.num_spec_tokens, self.stamp) if plain else None
        self.vllm = _VllmRows(self.path, self.stamp) if plain else None


def read_block(ctx: Context, first_line: int, data: bytes) -> BlockResult:
    """Read one block of complete lines whose first line is number ``first_line``."""
    # Reading a block allocates many objects and creates no reference cycles: the cyclic
    # garbage collector would only slow it down (by about a tenth).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _Block(ctx, first_line, data).read()
    finally:
        if enabled:
            gc.enable()


class _Block:
    def __init__(self, ctx: Context, first_line: int, data: bytes) -> None:
        self.ctx = ctx
        self.data = data
        self.first_line = first_line
        self.reader = LogReader(ctx.path, ctx.num_spec_tokens)
        for part in STATE:
            setattr(self.reader, part, _UNKNOWN)
        self.segments: list[Any] = []
        self.rows: list[bytes] = []  # CSV bytes waiting to become a segment
        self.done: list[dict[str, Any]] = []  # complete records waiting to become CSV bytes
        self.tally = Tally()
        self.fast_pending: tuple[dict[str, Any], dict[str, Any]] | None = None

    def read(self) -> BlockResult:
        data = self.data
        matches: list[re.Match[bytes]] = []
        decode_lines = data.count(b"Decode batch")
        if self.ctx.templates is not None and decode_lines:
            matches = _decode_matches(data, decode_lines)
        starts = list(map(re.Match.start, matches))
        events = _events(data, starts, decode_lines)
        count = data.count
        counts = map(count, repeat(b"\n"), [0, *starts[:-1]], starts)
        lines = list(islice(accumulate(counts, initial=self.first_line), 1, None))
        self._columns(matches, lines)
        i = 0
        at, at_line = 0, self.first_line  # the last line numbered: where it starts, its number
        for start, kind in events:
            j = bisect_left(starts, start, i)
            if j > i:
                self._run(matches, lines, i, j)
                if starts[j - 1] > at:
                    at, at_line = starts[j - 1], lines[j - 1]
            at_line += count(b"\n", at, start)
            at = start
            i = j
            self._event(start, kind, at_line)
        if i < len(matches):
            self._run(matches, lines, i, len(matches))
        self._flush_rows()
        self._tally_columns()
        end = {
            part: _copy(v) for part in STATE if (v := getattr(self.reader, part)) is not _UNKNOWN
        }
        return BlockResult(self.segments, end, self.tally)

    def _line(self, start: int) -> bytes:
        return self.data[start : self.data.find(b"\n", start)].rstrip(b"\r")

    def _event(self, start: int, kind: str, line_no: int) -> None:
        line = self._line(start)
        if line.lstrip().startswith(b"#"):  # a comment, e.g. a fixture's source note
            return
        if (kind in (VLLM_THROUGHPUT, VLLM_V1) and self.ctx.vllm is not None
                and self.reader.pending is not _UNKNOWN and self._vllm(kind, line, line_no)):  # fmt: skip
            return
        try:
            parsed = self.reader.parse(line_no, kind, line)
        except LineError as e:
            self._flush_rows()
            self.segments.append(
                Problem(self.ctx.path, line_no, f"{kind} line does not parse: {e}")
            )
            return
        if parsed is not None:
            self._apply(parsed)

    def _vllm(self, kind: str, line: bytes, line_no: int) -> bool:
        """A canonical vLLM line, by template: True if it was one (and is done)."""
        reader, rows = self.reader, self.ctx.vllm
        assert rows is not None
        if kind == VLLM_THROUGHPUT:
            m = VLLM_THROUGHPUT_LINE.fullmatch(line)
            if m is None:
                return False
            stamp, prompt, gen, running, _, queue = m.groups()
            self._flush_pending()
            reader.pending = {
                "format": VLLM_THROUGHPUT, "engine": "vllm", "timestamp": stamp.decode(),
                "source": f"{self.ctx.path}:{line_no}", "origin": "server",
                "prompt_tok_s": float(prompt), "gen_tok_s": float(gen),
                "running_reqs": _FLOATS[running], "queue_reqs": _FLOATS[queue],
            }  # fmt: skip
            self.fast_pending = (reader.pending, {"ts": stamp, "line": line_no, "prompt": prompt,
                                                  "gen": gen, "running": running, "queue": queue})  # fmt: skip
            return True
        m = VLLM_V1_LINE.fullmatch(line)
        if m is None:
            return False
        stamp, _, accepted, drafted, rates = m.groups()
        pending = reader.pending
        merge = pending is not None and pending["timestamp"] == stamp.decode()
        if (merge and not self._ours(pending)) or drafted == b"0":
            return False  # the general path: a record it made, or no drafts
        accepted_f, drafted_f = float(accepted), float(drafted)
        cell, k = rows.per_position(rates)
        drafts = drafted_f / k
        tau = 1 + accepted_f / drafts
        values = {"ts": stamp, "line": line_no, "accepted": accepted, "drafted": drafted, "k": k,
                  "per_position": cell, "drafts": drafts, "tau": tau,
                  "rate": accepted_f / drafted_f}  # fmt: skip
        if merge:
            assert pending is not None and self.fast_pending is not None
            tok_s = pending["gen_tok_s"] / pending["running_reqs"]
            values.update(self.fast_pending[1], ts=stamp, line=line_no, tok_s=tok_s)
            reader.pending = None
            template, sums, ns = rows.merged, (tau, tok_s, pending["gen_tok_s"]), (1, 1, 1)
        else:
            self._flush_pending()
            template, sums, ns = rows.spec, (tau, 0.0, 0.0), (1, 0, 0)
        self._write_records()
        self.rows.append(template[0] % template[1](values))
        self.tally.add(self.ctx.path, VLLM_V1, 1, k, sums, ns)
        return True

    def _ours(self, pending: Any) -> bool:
        """Whether ``pending`` is a throughput record :meth:`_vllm` made, with requests
        running (its row then comes from a template)."""
        fast = self.fast_pending
        return fast is not None and fast[0] is pending and fast[1]["running"] != b"0"

    def _flush_pending(self) -> None:
        """Write the waiting throughput record, if any, as a record of its own."""
        pending = self.reader.pending
        if pending is None:
            return
        if not self._ours(pending):
            self._records(self.reader.flush())
            return
        assert self.fast_pending is not None and self.ctx.vllm is not None
        tok_s = pending["gen_tok_s"] / pending["running_reqs"]
        template = self.ctx.vllm.throughput
        self._write_records()
        self.rows.append(template[0] % template[1]({**self.fast_pending[1], "tok_s": tok_s}))
        self.tally.add(self.ctx.path, VLLM_THROUGHPUT, 1, None, (0.0, tok_s, pending["gen_tok_s"]),
                       (0, 1, 1))  # fmt: skip
        self.reader.pending = None

    def _apply(self, parsed: tuple[Any, ...]) -> None:
        reader = self.reader
        reads = READS[parsed[0]]
        unknown = [part for part in reads if getattr(reader, part) is _UNKNOWN]
        if not unknown:
            self._records(reader.apply(parsed))
            return
        self._flush_rows()
        known = {part: _copy(getattr(reader, part)) for part in reads if part not in unknown}
        self.segments.append((parsed, known))
        for part in unknown:
            setattr(reader, part, _PHANTOM[part])
        reader.apply(parsed)  # for the state it leaves; the parent writes its records

    def _records(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            r = complete(r, self.ctx.stamp)
            self.tally.count(r)
            self.done.append(r)

    def _write_records(self) -> None:
        if self.done:
            self.rows.append(csv_rows(self.done))
            self.done = []

    def _flush_rows(self) -> None:
        self._write_records()
        if self.rows:
            self.segments.append(b"".join(self.rows))
            self.rows = []

    def _columns(self, matches: list[re.Match[bytes]], lines: list[int]) -> None:
        """The CSV rows of all canonical decode lines of the block, computed column-wise,
        for :meth:`_run` to take in order; None if they mix lines with and without accept
        len (then each takes the general path)."""
        self.fast_rows: list[bytes] | None = None
        self.general: list[int] = []  # canonical lines that took the general path instead
        if not matches:
            return
        t = self.ctx.templates
        date, time, running, tokens, tau, gen, queue = zip(*map(re.Match.groups, matches),
                                                           strict=True)  # fmt: skip
        gen_f = list(map(float, gen))
        tok_s = list(map(truediv, gen_f, map(_FLOATS.__getitem__, running)))
        n = len(matches)
        columns = {"date": date, "time": time, "running": running, "tokens": tokens, "gen": gen,
                   "queue": queue, "tok_s": tok_s, "line": lines}  # fmt: skip
        if None not in tau:
            tau_f: list[float] | None = list(map(_FLOATS.__getitem__, tau))
            columns["accept_len"] = tau
            if t.k:
                columns["rate"] = [(x - 1) / t.k for x in tau_f]
            template, order = t.with_tau
        elif tau.count(None) == n:
            tau_f = None
            template, order = t.without_tau
        else:
            return
        self.fast_rows = list(map(template.__mod__, zip(*map(columns.__getitem__, order),
                                                        strict=True)))  # fmt: skip
        self.columns = (tau_f, tok_s, gen_f)

    def _tally_columns(self) -> None:
        """Count the rows :meth:`_run` took from :meth:`_columns`."""
        if self.fast_rows is None:
            return
        taken = None
        if self.general:
            general = set(self.general)
            taken = [i not in general for i in range(len(self.fast_rows))]
        tau_f, tok_s, gen_f = (c if c is None or taken is None else list(compress(c, taken))
                               for c in self.columns)  # fmt: skip
        n = len(tok_s)
        if not n:
            return
        if tau_f is not None:
            sums, ns, k = (sum(tau_f), sum(tok_s), sum(gen_f)), (n, n, n), self.ctx.templates.k
        else:
            sums, ns, k = (0.0, sum(tok_s), sum(gen_f)), (0, n, n), None
        self.tally.add(self.ctx.path, SGLANG_DECODE, n, k, sums, ns)

    def _run(self, matches: list[re.Match[bytes]], lines: list[int], i: int, j: int) -> None:
        """Canonical decode lines ``i`` to ``j`` of the block, with no other marked line
        between them."""
        reader = self.reader
        if self.fast_rows is None:  # accept len in some lines only: rare
            for m, line_no in zip(matches[i:j], lines[i:j], strict=True):
                self._apply(reader.parse(line_no, SGLANG_DECODE, self._line(m.start())))
            return
        if reader.pending is not _UNKNOWN and reader.sglang_idle is False:
            self._flush_pending()  # a decode line flushes a waiting throughput record
        else:
            # The first line may follow idle time, or flush a record the block cannot know
            # of: it takes the general path (and after it, neither holds).
            parsed = reader.parse(lines[i], SGLANG_DECODE, self._line(matches[i].start()))
            self._apply(parsed)
            self.general.append(i)
            i += 1
            if i == j:
                return
        self._write_records()
        self.rows.append(b"".join(self.fast_rows[i:j]))


def _events(data: bytes, canonical: list[int], decode_lines: int) -> list[tuple[int, str]]:
    """Start and kind of the marked lines of ``data`` that are not canonical decode lines.

    A line's kind is that of the first of :data:`logs.MARKERS` it holds.  Prefill
    lines matter only when they report an empty batch, so only those are looked for.
    """
    found: dict[int, int] = {}  # line start -> rank of the first marker found in it
    skip: set[int] = set()
    for rank, (marker, kind) in enumerate(logs.MARKERS):
        if kind == SGLANG_PREFILL:
            continue
        if kind == SGLANG_DECODE:
            if decode_lines == len(canonical):
                continue  # every decode line is canonical
            skip = set(canonical)
        pos = data.find(marker)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            if start not in skip:
                found.setdefault(start, rank)
            nxt = data.find(b"\n", pos)
            pos = data.find(marker, nxt + 1) if nxt >= 0 else -1
    canonical_set = None
    kinds = [kind for _, kind in logs.MARKERS]
    prefill = kinds.index(SGLANG_PREFILL)
    pos = data.find(b"#running-req: 0")  # an empty batch, in a prefill line or another
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        nxt = data.find(b"\n", pos)
        if start not in found and b"Prefill batch" in data[start:nxt]:
            if canonical_set is None:
                canonical_set = set(canonical)
            if start not in canonical_set:
                found[start] = prefill
        pos = data.find(b"#running-req: 0", nxt + 1) if nxt >= 0 else -1
    return [(start, kinds[rank]) for start, rank in sorted(found.items())]


# Blocks handed to worker processes are smaller than those read in one process: the last
# blocks of a file then leave a worker idle for less time.
POOL_BLOCK_BYTES = 2 << 20


def workers_for(size: int, block_bytes: int, most: int = 4) -> int:
    """How many worker processes a log of ``size`` bytes is worth: one per available CPU
    (at most ``most``), when there are at least 4 blocks; else 1 (read in this process)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, most)) if size >= 4 * block_bytes else 1


_CONTEXT: Context | None = None


def _start_worker(ctx: Context) -> None:
    global _CONTEXT
    _CONTEXT = ctx


def _work(first_line: int, offset: int, size: int) -> BlockResult:
    """Read a block in a worker: from the file itself, so only its place crosses the pipe."""
    assert _CONTEXT is not None
    with open(_CONTEXT.path, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) < size or data[-1:] != b"\n":
        # The last line of a file without a final newline (which may have grown since):
        # the parent read it as ending there.
        data = data[: size - 1] + b"\n"
    return read_block(_CONTEXT, first_line, data)


def _block_results(ctx: Context, workers: int, block_bytes: int | None) -> Iterator[Any]:
    """Problems and block results of ``ctx.path``, in file order."""
    pool = None
    if workers > 1:
        try:
            pool = multiprocessing.get_context().Pool(workers, _start_worker, (ctx,))
        except (OSError, ImportError):  # no process pools here (no POSIX semaphores, say)
            pool = None  # the same rows, read in this process
    blocks = iter_blocks(ctx.path, block_bytes or (POOL_BLOCK_BYTES if pool else None))
    if pool is None:
        for item in blocks:
            yield item if isinstance(item, Problem) else read_block(ctx, item[0], item[2])
        return
    with pool:
        waiting: deque[Any] = deque()
        in_flight = 0
        for item in blocks:
            if isinstance(item, Problem):
                waiting.append(item)
                continue
            first_line, offset, data = item
            waiting.append(pool.apply_async(_work, (first_line, offset, len(data))))
            in_flight += 1
            while in_flight >= workers * _IN_FLIGHT_PER_WORKER or (
                waiting and isinstance(waiting[0], Problem)
            ):
                head = waiting.popleft()
                if not isinstance(head, Problem):
                    head = head.get()
                    in_flight -= 1
                yield head
        while waiting:
            head = waiting.popleft()
            yield head if isinstance(head, Problem) else head.get()


def iter_log_rows(
    path: str | os.PathLike[str],
    problems: list[Problem],
    tally: Tally,
    *,
    num_spec_tokens: int | None = None,
    stamp: dict[str, Any] | None = None,
    workers: int | None = None,
    max_workers: int = 4,
    block_bytes: int | None = None,
) -> Iterator[bytes]:
    """The measurement CSV rows (UTF-8, no header) of an engine log, in order.

    Parameters are those of :func:`breakeven.iotools.logs.iter_log`, and:

    tally : Tally
        Counts the records.
    stamp : dict, optional
        Values for every record where the log gives none (see
        :func:`~breakeven.iotools.records.complete`).
    workers : int, optional
        Worker processes; 1 reads in this process.  Default: :func:`workers_for`, with
        at most ``max_workers``.
    block_bytes : int, optional
        Size of the blocks the log is read in (default :data:`logs.BLOCK_BYTES`, or
        :data:`POOL_BLOCK_BYTES` with workers).
    """
    path = os.fspath(path)
    ctx = Context(path, num_spec_tokens, dict(stamp or {}))
    size = block_bytes or logs.BLOCK_BYTES
    if workers is None:
        workers = workers_for(os.path.getsize(path), size, max_workers)
    reader = LogReader(path, num_spec_tokens)
    for item in _block_results(ctx, workers, block_bytes):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        for segment in item.segments:
            if isinstance(segment, bytes):
                yield segment
            elif isinstance(segment, Problem):
                problems.append(segment)
            else:
                parsed, known = segment
                for part, value in known.items():
                    setattr(reader, part, _copy(value))
                yield from _rows(reader.apply(parsed), ctx.stamp, tally)
        for part, value in item.end_state.items():
            setattr(reader, part, _copy(value))
        tally.merge(item.tally)
    yield from _rows(reader.flush(), ctx.stamp, tally)


def _rows(records: list[dict[str, Any]], stamp: dict[str, Any], tally: Tally) -> Iterator[bytes]:
    if records:
        done = [complete(r, stamp) for r in records]
        for r in done:
            tally.count(r)
        yield csv_rows(done)
