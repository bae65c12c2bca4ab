"""Engine logs: vLLM's spec-decode and throughput lines, SGLang's ``Decode batch`` lines.

Formats (see the README's "Engine formats" and each engine's source):

- vLLM V1 ``SpecDecoding metrics:`` (``vllm/v1/spec_decode/metrics.py``), per
  logging interval, in every version seen: ``Draft acceptance rate``,
  ``Mean acceptance length``, ``Accepted``/``Drafted`` tokens and throughput,
  ``Per-position acceptance rate``, ``Avg Draft acceptance rate``; and the
  early-2025 ``Speculative metrics: Draft acceptance rate: ..., Number of
  accepted tokens: ..., Number of draft tokens: ...`` without "System efficiency".
- vLLM V0 ``Speculative metrics:`` (``vllm/engine/metrics.py``), counters
  cumulative since server start: emitted as per-interval differences, with
  ``accept_len = emitted / (draft_tokens / k)``.
- vLLM's ``Avg prompt throughput: ..., Avg generation throughput: ...`` line,
  merged into the spec-decode record printed beside it (same timestamp).
- SGLang's scheduler ``Decode batch`` lines, ``.`` or ``,`` after "batch", with
  or without ``accept len``; the first window after idle is flagged, since its
  ``gen throughput`` spans the idle time.

Lines are found by a few fixed markers, scanned in large binary blocks, and
only marked lines are decoded and split into ``key: value`` fields: vLLM's
lines as current versions print them by one pattern each, matched whole
(bounded repetition only, so matching is linear in the line and no input can
make it slow), any other line by a general splitter.  Lines starting with ``#``
are comments (a fixture's note on its source), never records.  A marked line that does not
parse is a problem reported with its line number, never silently dropped.
Memory stays bounded: blocks of :data:`BLOCK_BYTES`, lines of at most
:data:`MAX_LINE_BYTES`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

BLOCK_BYTES = 8 << 20
MAX_LINE_BYTES = 1 << 20

VLLM_V1 = "vllm_v1"
VLLM_V0 = "vllm_v0"
VLLM_THROUGHPUT = "vllm_throughput"
SGLANG_DECODE = "sglang_decode"
SGLANG_PREFILL = "sglang_prefill"  # read only for idle time, never a record
LOG_FORMATS = (VLLM_V1, VLLM_V0, VLLM_THROUGHPUT, SGLANG_DECODE)

# Marker -> what a line holding it is.  Order matters only for lines holding two.
MARKERS = (
    (b"SpecDecoding metrics:", VLLM_V1),
    (b"Speculative metrics:", VLLM_V0),  # V0, or V1's first format: told apart by fields
    (b"Avg generation throughput:", VLLM_THROUGHPUT),
    (b"Decode batch", SGLANG_DECODE),
    (b"Prefill batch", SGLANG_PREFILL),
)


@dataclass
class Problem:
    """A line or file breakeven could not read."""

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


class LineError(ValueError):
    """A marked line that does not parse."""


def iter_blocks(
    path: str, block_bytes: int | None = None
) -> Iterator[tuple[int, int, bytes] | Problem]:
    """Yield ``(first_line_number, offset, complete_lines)`` blocks of ``path``, and
    problems, in file order.

    ``offset`` is where the block starts in the file.  Every block ends with a
    newline (a last line without one gets it), and the next block starts with the
    line after it.  A line longer than :data:`MAX_LINE_BYTES` that does not fit
    in a block is skipped with a :class:`Problem`; binary data (a NUL byte)
    yields the lines before it, then a problem, and ends the file.
    """
    block_bytes = block_bytes or BLOCK_BYTES
    too_long = f"line is longer than {MAX_LINE_BYTES >> 20} MiB; skipped"
    line_no, offset = 1, 0
    with open(path, "rb") as f:
        while True:
            f.seek(offset)
            data = f.read(block_bytes)
            if not data:
                return
            end = data.rfind(b"\n") + 1  # complete lines end here
            while end == 0 and len(data) <= MAX_LINE_BYTES:  # one line longer than a block
                more = f.read(block_bytes)
                if not more:
                    break
                data += more
                end = data.find(b"\n") + 1
            if end == 0 and len(data) > MAX_LINE_BYTES:
                yield Problem(path, line_no, too_long)
                offset += len(data)  # the file is read up to here: find the line's end
                while True:
                    chunk = f.read(block_bytes)
                    if not chunk:
                        return
                    cut = chunk.find(b"\n")
                    if cut >= 0:
                        offset, line_no = offset + cut + 1, line_no + 1
                        break
                    offset += len(chunk)
                continue
            if end == 0:  # the file's last line, without a newline
                data += b"\n"
                end = len(data)
            complete = data if end == len(data) else data[:end]
            nul = complete.find(b"\0")
            if nul >= 0:
                yield from _binary(path, complete, nul, line_no, offset)
                return
            yield line_no, offset, complete
            line_no += complete.count(b"\n")
            offset += end


def _binary(
    path: str, data: bytes, nul: int, line_no: int, offset: int
) -> Iterator[tuple[int, int, bytes] | Problem]:
    """The complete lines before the NUL byte at ``nul``, then the problem."""
    before = data.rfind(b"\n", 0, nul) + 1
    if before:
        yield line_no, offset, data[:before]
    at = line_no + data.count(b"\n", 0, nul)
    hint = " (UTF-16? save the log as UTF-8)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
    yield Problem(path, at, f"binary data (a NUL byte){hint}; expected a text log; stopped reading")


def iter_marked_lines(path: str, problems: list[Problem]) -> Iterator[tuple[int, str, bytes]]:
    """Yield ``(line_number, kind, line_bytes)`` for every marked line of ``path``.

    Problems (binary data, over-long lines) go to ``problems``; binary data
    ends the scan of the file.
    """
    for block in iter_blocks(path):
        if isinstance(block, Problem):
            problems.append(block)
        else:
            yield from _marked_in(block[2], block[0])


def _marked_in(data: bytes, first_line: int) -> Iterator[tuple[int, str, bytes]]:
    """The marked lines of ``data`` (complete lines), in order."""
    hits: dict[int, str] = {}
    for marker, kind in MARKERS:
        pos = data.find(marker)
        while pos >= 0:
            start = data.rfind(b"\n", 0, pos) + 1
            hits.setdefault(start, kind)
            nxt = data.find(b"\n", pos)
            pos = data.find(marker, nxt + 1) if nxt >= 0 else -1
    line_no, counted_to = first_line, 0
    for start in sorted(hits):
        line_no += data.count(b"\n", counted_to, start)
        counted_to = start
        stop = data.find(b"\n", start)
        line = data[start:stop].rstrip(b"\r")
        if not line.lstrip().startswith(b"#"):  # a comment, e.g. a fixture's source note
            yield line_no, hits[start], line


def _fields(text: str) -> dict[str, str]:
    """``key: value, key: value`` into a dict; a piece without ': ' continues the last value."""
    pieces = text.split(", ")
    try:  # the common case: every piece is one key and its value
        return {k.lower(): v for k, v in (p.split(": ", 1) for p in pieces if p)}
    except ValueError:  # a list value (per-position rates) or a stray piece: go piece by piece
        pass
    out: dict[str, str] = {}
    last = None
    for piece in pieces:
        key, sep, value = piece.partition(": ")
        if sep:
            last = key.strip().lower()
            out[last] = value.strip()
        elif last is not None and piece.strip():
            out[last] += ", " + piece.strip()
    return out


# The fields of vLLM's lines as current versions print them, matched whole by one pattern
# each (no nested repetition): what _fields would give for the keys the records use, without
# its general splitting.  Any other line goes to _fields.  FAST_FIELDS = False turns them
# off (tests compare the two).
FAST_FIELDS = True


def v1_fields_pattern(count: str, per_position: bool) -> str:
    """The fields of a current vLLM ``SpecDecoding metrics:`` line, after the marker.  Groups:
    mean acceptance length, accepted and drafted (each ``count``, a group), per-position
    rates (required if ``per_position``, else optional)."""
    rates = r", Per-position acceptance rate: (\d{1,3}\.\d{1,6}(?:, \d{1,3}\.\d{1,6}){0,63})"
    return (
        r"(?:Draft acceptance rate: \d{1,3}\.\d{1,3}%, )?"
        r"(?:Mean acceptance length: (\d{1,4}\.\d{1,4}), )?"
        r"(?:Accepted throughput: \d{1,9}\.\d{1,4} tokens/s, "
        r"Drafted throughput: \d{1,9}\.\d{1,4} tokens/s, )?"
        f"Accepted: {count} tokens, Drafted: {count} tokens"
        + (rates if per_position else f"(?:{rates})?")
        + r"(?:, Avg Draft acceptance rate: \d{1,3}\.\d{1,3}%)?"
    )


def throughput_fields_pattern(decimal: str, count: str) -> str:
    """The fields of a current vLLM throughput line, after ``Avg prompt throughput:``.
    Groups: prompt and generation throughput (each ``decimal``, a group), running,
    ``Waiting`` or ``Pending``, and its count (each ``count``, a group)."""
    return (
        f" {decimal} tokens/s, Avg generation throughput: {decimal} tokens/s, "
        f"Running: {count} reqs, "
        + r"(?:Swapped: \d{1,9} reqs, )?(Waiting|Pending): "
        + f"{count} reqs"
        r"(?:, (?:GPU KV cache usage|CPU KV cache usage|Prefix cache hit rate|External prefix "
        r"cache hit rate|MM cache hit rate): \d{1,3}\.\d{1,3}%){0,8}"
    )


_V1_FIELDS = re.compile(v1_fields_pattern(r"(\d{1,15})", per_position=False))
_THROUGHPUT_FIELDS = re.compile(throughput_fields_pattern(r"(\d{1,9}\.\d{1,4})", r"(\d{1,9})"))


def _fast_v1_fields(rest: str) -> dict[str, str] | None:
    m = _V1_FIELDS.fullmatch(rest) if FAST_FIELDS else None
    if m is None:
        return None
    tau, accepted, drafted, rates = m.groups()
    fields = {"accepted": accepted, "drafted": drafted}
    if tau is not None:
        fields["mean acceptance length"] = tau
    if rates is not None:
        fields["per-position acceptance rate"] = rates
    return fields


def _fast_throughput_fields(rest: str) -> dict[str, str] | None:
    m = _THROUGHPUT_FIELDS.fullmatch(rest) if FAST_FIELDS else None
    if m is None:
        return None
    prompt, gen, running, queue_key, queue = m.groups()
    return {"avg prompt throughput": prompt, "avg generation throughput": gen, "running": running,
            queue_key.lower(): queue}  # fmt: skip


def _number(fields: dict[str, str], key: str) -> float:
    """The leading number of a field ('38.8%' -> 38.8, '150 tokens' -> 150); NaN if absent."""
    text = fields.get(key)
    if text is None:
        return math.nan
    try:
        return float(text)  # most values are bare numbers
    except ValueError:
        pass
    try:
        return float((text.split() or [""])[0].rstrip("%.").rstrip(","))
    except ValueError:
        raise LineError(f"{key} is {text!r}, expected a number") from None


def _rates(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise LineError(f"per-position acceptance rate is {text!r}, expected numbers") from None


def _timestamp(prefix: str) -> str:
    """The time a line was printed, from vLLM's or SGLang's prefix ('' if none)."""
    if prefix.startswith("[") and "]" in prefix:  # SGLang: [2026-02-26 16:41:43 TP0]
        parts = prefix[1 : prefix.index("]")].split()
        return "T".join(parts[:2]) if len(parts) >= 2 and parts[0][:1].isdigit() else ""
    words = prefix.split()  # vLLM: (APIServer pid=1) INFO 05-01 14:24:50 [metrics.py:101]
    for i, w in enumerate(words[:-1]):
        if w in ("INFO", "WARNING", "DEBUG") and len(words) > i + 2:
            return f"{words[i + 1]} {words[i + 2]}"
    return ""


def _record(fmt: str, engine: str, path: str, line: int, stamp: str) -> dict[str, Any]:
    return {"format": fmt, "engine": engine, "timestamp": stamp, "source": f"{path}:{line}",
            "origin": "server"}  # fmt: skip


# What a parsed line is (the first item of :meth:`LogReader.parse`'s tuple), and which
# parts of the reader's state applying it reads.  Applying a line writes exactly the
# parts it reads, whatever their values were: that is what lets a block of a log be
# read without knowing the state at its start (:mod:`breakeven.iotools.logrows`).
IDLE, THROUGHPUT, SPEC, V0_COUNTS, DECODE = "idle", "throughput", "spec", "v0", "decode"
STATE = ("pending", "sglang_idle", "v0_last")
READS = {
    IDLE: (),
    THROUGHPUT: ("pending",),
    SPEC: ("pending",),
    V0_COUNTS: ("pending", "v0_last"),
    DECODE: ("pending", "sglang_idle"),
}


class LogReader:
    """Turns marked lines into records, keeping the state some formats need.

    Reading a line has two steps.  :meth:`parse` depends on the line alone
    and raises :class:`LineError` if it does not parse; :meth:`apply` turns
    the parsed line into records using (and updating) the state:

    - ``pending``: a vLLM throughput record waiting for the spec-decode line
      printed beside it (same timestamp), to be merged with it;
    - ``sglang_idle``: no SGLang decode window yet, or new requests arrived
      after an empty batch, so the next window spans idle time;
    - ``v0_last``: vLLM V0's cumulative counters at its previous line.

    A line that does not parse changes no state.
    """

    def __init__(self, path: str, num_spec_tokens: int | None) -> None:
        self.path = path
        self.k = num_spec_tokens
        self.pending: dict[str, Any] | None = None
        self.sglang_idle = True
        self.v0_last: dict[str, float] | None = None

    def feed(self, line_no: int, kind: str, raw: bytes) -> list[dict[str, Any]]:
        """The records a marked line completes (often one, sometimes none or two)."""
        parsed = self.parse(line_no, kind, raw)
        return self.apply(parsed) if parsed is not None else []

    def parse(self, line_no: int, kind: str, raw: bytes) -> tuple[Any, ...] | None:
        """A marked line as ``(what, ...)``, or None for a line that matters to no record."""
        if kind == SGLANG_PREFILL:
            # Only one thing matters in a prefill line: new requests after an empty batch
            # mean the server was idle, so the next decode window spans idle time.
            if b"#running-req: 0," in raw or raw.rstrip(b", ").endswith(b"#running-req: 0"):
                return (IDLE,)
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LineError(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
        if kind == VLLM_THROUGHPUT:
            return (THROUGHPUT, self._throughput(text, line_no))
        if kind in (VLLM_V1, VLLM_V0):
            return self._vllm_spec(kind, text, line_no)
        return (DECODE, self._sglang_decode(text, line_no))

    def apply(self, parsed: tuple[Any, ...]) -> list[dict[str, Any]]:
        """The records of a parsed line, given the state; updates the state.  Never
        changes ``parsed``, so a parsed line can be applied again elsewhere."""
        what = parsed[0]
        if what == IDLE:
            self.sglang_idle = True
            return []
        if what == THROUGHPUT:
            out = self.flush()
            self.pending = dict(parsed[1])
            return out
        if what == DECODE:
            out = self.flush()
            record = dict(parsed[1])
            record["first_after_idle"] = self.sglang_idle
            self.sglang_idle = False
            _per_sequence(record)
            out.append(record)
            return out
        record = self._v0_delta(parsed[1], parsed[2]) if what == V0_COUNTS else dict(parsed[1])
        out = []
        if self.pending is not None and self.pending["timestamp"] == record["timestamp"]:
            record.update((k, v) for k, v in self.pending.items()
                          if k in ("gen_tok_s", "prompt_tok_s", "running_reqs", "queue_reqs"))  # fmt: skip
            self.pending = None
        else:
            out += self.flush()
        _per_sequence(record)
        out.append(record)
        return out

    def flush(self) -> list[dict[str, Any]]:
        """The pending throughput record, if any, as a record of its own."""
        if self.pending is None:
            return []
        record, self.pending = self.pending, None
        _per_sequence(record)
        return [record]

    def _throughput(self, text: str, line_no: int) -> dict[str, Any]:
        prefix, _, rest = text.partition("Avg prompt throughput:")
        if not rest:
            raise LineError("no 'Avg prompt throughput:' before the generation throughput")
        rest = rest.rstrip(".")
        fields = _fast_throughput_fields(rest) or _fields("avg prompt throughput: " + rest)
        record = _record(VLLM_THROUGHPUT, "vllm", self.path, line_no, _timestamp(prefix))
        record["prompt_tok_s"] = _number(fields, "avg prompt throughput")
        record["gen_tok_s"] = _number(fields, "avg generation throughput")
        record["running_reqs"] = _number(fields, "running")
        record["queue_reqs"] = _number(fields, "waiting" if "waiting" in fields else "pending")
        if math.isnan(record["gen_tok_s"]) or math.isnan(record["running_reqs"]):
            raise LineError("expected 'Avg generation throughput' and 'Running' fields")
        return record

    def _vllm_spec(self, kind: str, text: str, line_no: int) -> tuple[Any, ...]:
        marker = "SpecDecoding metrics:" if kind == VLLM_V1 else "Speculative metrics:"
        prefix, _, rest = text.partition(marker)
        rest = rest.strip().rstrip(",").rstrip(".")
        fields = (_fast_v1_fields(rest) if kind == VLLM_V1 else None) or _fields(rest)
        stamp = _timestamp(prefix)
        if kind == VLLM_V0 and not any(k.startswith("number of emitted") for k in fields):
            # V1's first format: per-interval counts, and no emitted tokens.
            return (SPEC, self._v1(fields, line_no, stamp, first_format=True))
        if kind == VLLM_V1:
            return (SPEC, self._v1(fields, line_no, stamp))
        return self._v0(fields, line_no, stamp)

    def _v1(
        self, fields: dict[str, str], line_no: int, stamp: str, first_format: bool = False
    ) -> dict[str, Any]:
        record = _record(VLLM_V1, "vllm", self.path, line_no, stamp)
        accepted = _number(fields, "number of accepted tokens" if first_format else "accepted")
        drafted = _number(fields, "number of draft tokens" if first_format else "drafted")
        if math.isnan(accepted) or math.isnan(drafted):
            raise LineError("expected accepted and drafted token counts")
        per_position = (
            _rates(fields["per-position acceptance rate"])
            if "per-position acceptance rate" in fields
            else None
        )
        k = len(per_position) if per_position else self.k
        printed_tau = _number(fields, "mean acceptance length")
        record.update(accepted_tokens=accepted, draft_tokens=drafted, num_spec_tokens=k,
                      per_position=per_position)  # fmt: skip
        if k:
            drafts = drafted / k
            record["num_drafts"] = drafts
            record["accept_len"] = 1 + accepted / drafts if drafts > 0 else math.nan
        else:
            record["accept_len"] = printed_tau
        if drafted > 0:
            record["acceptance_rate"] = accepted / drafted
        return record

    def _v0(self, fields: dict[str, str], line_no: int, stamp: str) -> tuple[Any, ...]:
        def count(name: str) -> float:
            for key in (name, name.replace(" tokens", " tokens tokens")):
                if key in fields:
                    return _number(fields, key)
            raise LineError(f"no '{name}' field")

        now = {
            "k": count("number of speculative tokens"),
            "accepted": count("number of accepted tokens"),
            "drafted": count("number of draft tokens"),
            "emitted": count("number of emitted tokens"),
        }
        return (V0_COUNTS, _record(VLLM_V0, "vllm", self.path, line_no, stamp), now)

    def _v0_delta(self, base_record: dict[str, Any], now: dict[str, float]) -> dict[str, Any]:
        """A V0 line's counters as differences from the previous line's."""
        last = self.v0_last
        restarted = last is not None and any(
            now[c] < last[c] for c in ("accepted", "drafted", "emitted")
        )
        base = (
            {"accepted": 0.0, "drafted": 0.0, "emitted": 0.0} if last is None or restarted else last
        )
        self.v0_last = now
        d = {c: now[c] - base[c] for c in ("accepted", "drafted", "emitted")}
        k = int(now["k"])
        record = dict(base_record)
        record.update(num_spec_tokens=k, accepted_tokens=d["accepted"], draft_tokens=d["drafted"],
                      emitted_tokens=d["emitted"])  # fmt: skip
        if last is None or restarted:
            record["note"] = "counters since server start (first line, or after a restart)"
        if k and d["drafted"] > 0:
            drafts = d["drafted"] / k
            record["num_drafts"] = drafts
            record["accept_len"] = d["emitted"] / drafts
            record["acceptance_rate"] = (record["accept_len"] - 1) / k
        return record

    def _sglang_decode(self, text: str, line_no: int) -> dict[str, Any]:
        """A decode line's record, but for what depends on the state (idle time)."""
        prefix, _, rest = text.partition("Decode batch")
        rest = rest.lstrip(".,").strip()
        if rest.startswith("["):  # an iteration number: Decode batch [123],
            rest = rest.split("]", 1)[-1].lstrip(".,").strip()
        fields = _fields(rest.rstrip().rstrip(","))
        record = _record(SGLANG_DECODE, "sglang", self.path, line_no, _timestamp(prefix))
        record["running_reqs"] = _number(fields, "#running-req")
        record["queue_reqs"] = _number(fields, "#queue-req")
        record["gen_tok_s"] = _number(fields, "gen throughput (token/s)")
        record["tokens_in_use"] = _number(fields, "#token")
        if math.isnan(record["running_reqs"]) or math.isnan(record["gen_tok_s"]):
            raise LineError("expected '#running-req' and 'gen throughput (token/s)' fields")
        tau = _number(fields, "accept len")
        record["accept_len"] = tau
        record["num_spec_tokens"] = self.k if not math.isnan(tau) else None
        if not math.isnan(tau) and self.k:
            record["acceptance_rate"] = (tau - 1) / self.k  # "accept rate" changed meaning
        return record


def _per_sequence(record: dict[str, Any]) -> None:
    """Schema columns from an engine line: aggregate and per-sequence decode rates."""
    gen, running = record.get("gen_tok_s", math.nan), record.get("running_reqs", math.nan)
    if record.get("first_after_idle"):
        return  # its throughput spans the idle time before it: not a decode rate
    if not math.isnan(gen) and running and running > 0:
        record["aggregate_tok_s"] = gen
        record["tok_s"] = gen / running
        record["concurrency"] = running


def iter_log(
    path: str | os.PathLike[str], problems: list[Problem], num_spec_tokens: int | None = None
) -> Iterator[dict[str, Any]]:
    """Stream the records of an engine log, one per spec-decode or throughput line, in order.

    Parameters
    ----------
    path : path
        A vLLM or SGLang server log (any mix of lines; unrelated lines are ignored).
    problems : list
        Lines that start like a known format but do not parse are appended here.
    num_spec_tokens : int, optional
        k, for formats that do not print it (SGLang ``Decode batch``, vLLM's
        early V1 formats without per-position rates).

    Yields
    ------
    dict
        Records in the measurement schema's names plus ``format``,
        ``gen_tok_s``, ``running_reqs``, token counts and ``per_position``.
    """
    path = os.fspath(path)
    reader = LogReader(path, num_spec_tokens)
    for line_no, kind, raw in iter_marked_lines(path, problems):
        try:
            yield from reader.feed(line_no, kind, raw)
        except LineError as e:
            problems.append(Problem(path, line_no, f"{kind} line does not parse: {e}"))
    yield from reader.flush()
