"""NVIDIA AIPerf's results: ``aiperf profile``'s exports and console summary, and
``aiperf speed-bench-report``'s per-category matrix.

What AIPerf's figures are (``src/aiperf/metrics/types/``):

- ``inter_token_latency`` is each request's ``(request_latency - time_to_first_token) /
  (output_sequence_length - 1)``: a time per output token (vLLM's TPOT), not the gap between
  streamed chunks, which is ``inter_chunk_latency``.  So ``tok_s = 1000 / inter_token_latency``
  (per sequence, as :mod:`breakeven.iotools.bench_results` reads TPOT), ``itl_ms`` is
  ``inter_chunk_latency``, and ``output_token_throughput`` (every request's tokens over the
  run) is ``aggregate_tok_s``.
- Speculative decoding (``spec_decode_metrics.py``, from vLLM's per-request
  ``metrics.speculative_decoding``): ``spec_decode_acceptance_length`` is a request's
  ``1 + accepted / verify steps``, bonus token included, and its ``avg`` is a mean of those
  per-request ratios: not read as accept_len.  ``spec_decode_token_weighted_acceptance_length``
  is ``1 + sum(accepted) / sum(steps)`` over the run, the pooled figure; accept_len is pooled
  here from the totals (``total_accepted_draft_tokens``, ``total_spec_decode_steps``,
  ``total_draft_tokens``) where they are given, else is that figure.
- ``speed-bench-report`` pools each category the same way (``1 + accepted / steps`` over its
  requests, or over the server's counters); its ``Overall`` column is the categories' mean (a
  mean of ratios) and is not read.
"""

from __future__ import annotations

import csv
import math
import re
from typing import Any

from breakeven.core.choices import AIPERF_PROFILE, AIPERF_RECORDS
from breakeven.core.errors import shorten
from breakeven.iotools.records import PLACEHOLDERS, iso_timestamp

PROFILE = AIPERF_PROFILE
"""``profile_export_aiperf.json``: a run's summary (also its console table and its CSV)."""
PROFILE_CSV = PROFILE + "_csv"
RECORDS = AIPERF_RECORDS
"""``profile_export.jsonl``: a record per request."""
REPORT = "aiperf_speed_bench_report"
"""``speed_bench_report.csv`` (and ``+ "_table"``, its console table)."""

TOK_S = "1000 / AIPerf's mean inter-token latency ((latency - TTFT) / (output tokens - 1))"
RECORDS_TOK_S = "each request's (output tokens - 1) / (latency - TTFT), a record per request"

POOLED = (
    "accept_len: AIPerf's token-weighted acceptance length, 1 + accepted / verify steps over "
    "the run (its per-request mean is not used)"
)
MEAN_ONLY = (
    "AIPerf printed only its per-request mean acceptance length (a mean of ratios): accept_len "
    "left empty"
)
REPORT_NOTE = (
    "aiperf speed-bench-report: each category pooled over its verify steps; its Overall (a "
    "mean of the categories) is not read"
)
CSV_METRIC = (
    "speed_bench_report.csv does not name its metric: read as the default, acceptance length"
)


class BadValue(ValueError):
    """An AIPerf result that lacks what it must hold, or holds a value of the wrong kind."""


def _number(value: Any, what: str) -> float:
    """A number of a result (NaN where absent or a placeholder such as ``N/A``)."""
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        if text.lower() in PLACEHOLDERS:
            return math.nan
        try:
            value = float(text)
        except ValueError:
            raise BadValue(f"{what} is {_shown(value)}, expected a number") from None
    if not isinstance(value, (int, float)):
        raise BadValue(f"{what} is {_shown(value)}, expected a number")
    return float(value) if math.isfinite(value) else math.nan


_LAST_NS = 253402300800e9
"""The start of the year 10000 [ns since the Unix epoch]: the last time a timestamp shows."""

_TO_MS = {None: 1.0, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "ns": 1e-6}


def _stat(obj: dict[str, Any], tag: str, key: str = "avg", ms: bool = False) -> float:
    """A metric's ``key`` (a summary's ``avg``, a request's ``value``), in ms where ``ms``."""
    entry = obj.get(tag)
    if entry is None:
        return math.nan
    if not isinstance(entry, dict):
        raise BadValue(f"{tag} is {_shown(entry)}, expected an object with {key} and unit")
    value = entry.get(key)
    if isinstance(value, list):  # a request's inter_chunk_latency: its gaps
        gaps = [_number(v, tag) for v in value]
        value = sum(gaps) / len(gaps) if gaps else None
    value = _number(value, f"{tag}.{key}")
    if not ms:
        return value
    unit = entry.get("unit")
    if not (unit is None or isinstance(unit, str)) or unit not in _TO_MS:
        raise BadValue(f"{tag} is in {_shown(unit)}, expected ms, s, us or ns")
    return value * _TO_MS[unit]


def _shown(value: Any) -> str:
    """A value of a result as a message shows it: its repr, shortened."""
    return shorten(repr(value))


# Summary: profile_export_aiperf.json, and the console table and CSV read into its shape.


def summary_columns(obj: dict[str, Any]) -> dict[str, Any]:
    """A run's record columns from AIPerf's summary (each metric ``{"unit", "avg", ...}``)."""
    isl, osl = _stat(obj, "input_sequence_length"), _stat(obj, "output_sequence_length")
    start = obj.get("start_time")
    record: dict[str, Any] = {
        "itl_ms": _stat(obj, "inter_chunk_latency", ms=True),
        "ttft_ms": _stat(obj, "time_to_first_token", ms=True),
        "aggregate_tok_s": _stat(obj, "output_token_throughput"),
        "context_tokens": isl + osl / 2,
        "concurrency": _concurrency(obj),
        "model": _model(obj),
        "timestamp": start if isinstance(start, str) else None,
    }
    tpot = _stat(obj, "inter_token_latency", ms=True)
    if tpot <= 0:
        raise BadValue(f"inter_token_latency is {tpot:g} ms, expected a time > 0")
    if tpot > 0:
        record.update(tpot_ms=tpot, tok_s=1000.0 / tpot)
    record.update(_run_acceptance(obj))
    return record


def _run_acceptance(obj: dict[str, Any]) -> dict[str, Any]:
    """accept_len pooled from the run's totals, else AIPerf's token-weighted figure."""
    steps, accepted, drafted = (
        _stat(obj, tag)
        for tag in ("total_spec_decode_steps", "total_accepted_draft_tokens", "total_draft_tokens")
    )
    pooled = _stat(obj, "spec_decode_token_weighted_acceptance_length")
    rate = _stat(obj, "spec_decode_overall_draft_acceptance_rate") / 100.0
    out: dict[str, Any] = {}
    if steps > 0 and accepted >= 0:  # NaN (not given) compares False
        pooled = 1.0 + accepted / steps
        out.update(num_drafts=steps, accepted_tokens=accepted)
    if drafted > 0 and accepted >= 0:
        rate = accepted / drafted
        out["draft_tokens"] = drafted
    if math.isnan(pooled):
        if not math.isnan(_stat(obj, "spec_decode_acceptance_length")):
            out["note"] = MEAN_ONLY
        return out
    k = round(drafted / steps) if steps > 0 and drafted > 0 else _k_of(pooled, rate)
    out.update(accept_len=pooled, acceptance_rate=rate, num_spec_tokens=k, note=POOLED)
    return out


def _k_of(accept_len: float, rate: float) -> int | None:
    """k from two pooled figures of one run: ``(accept_len - 1) / rate`` is drafted tokens per
    verify step; None unless it is a whole number, as printed to two decimals allows."""
    if not rate > 0:
        return None
    k = (accept_len - 1.0) / rate
    return round(k) if round(k) >= 1 and abs(k - round(k)) < 0.1 else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _concurrency(obj: dict[str, Any]) -> float:
    """The client's concurrency: the profiling phases' (one value), else the command's."""
    config = _dict(obj.get("input_config"))
    phases, loadgen = _list(config.get("phases")), _dict(config.get("loadgen"))
    given = [
        p.get("concurrency")
        for p in [*phases, loadgen]
        if isinstance(p, dict) and "warmup" not in f"{p.get('name')} {p.get('type')}"
    ]
    said = {c for c in given if isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0}
    if len(said) == 1:
        return float(said.pop())
    found = re.search(r"--concurrency[= ]'?(\d+)", _command(obj))
    return float(found.group(1)) if found else math.nan


def _model(obj: dict[str, Any]) -> str | None:
    config = _dict(obj.get("input_config"))
    items = _list(_dict(config.get("models")).get("items"))
    names = [i.get("name") for i in items if isinstance(i, dict)]
    names += _list(config.get("model_names"))
    found = re.search(r"--model[= ]'?([^' ]+)", _command(obj))
    names += [found.group(1)] if found else []
    return next((n for n in names if isinstance(n, str) and n), None)


def _command(obj: dict[str, Any]) -> str:
    command = _dict(obj.get("run_info")).get("cli_command")
    return command if isinstance(command, str) else ""


# Requests: profile_export.jsonl.


def request_columns(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A request's record columns from its ``profile_export.jsonl`` line; None for a warmup
    or failed request (AIPerf leaves them out of every figure too)."""
    meta, metrics = obj.get("metadata"), obj.get("metrics")
    if not isinstance(meta, dict) or not isinstance(metrics, dict):
        raise BadValue("expected a metadata and a metrics object")
    if obj.get("error") or "warmup" in (meta.get("benchmark_phase"), meta.get("phase_kind")):
        return None
    osl = _stat(metrics, "output_sequence_length", "value")
    latency = _stat(metrics, "request_latency", "value", ms=True)
    ttft = _stat(metrics, "time_to_first_token", "value", ms=True)
    start = _number(meta.get("request_start_ns"), "request_start_ns")
    if start >= _LAST_NS:  # NaN (not given) passes
        raise BadValue(
            f"request_start_ns is {_shown(meta.get('request_start_ns'))}, expected a time "
            "[ns since 1970] before the year 10000"
        )
    category = meta.get("source_kind")
    record: dict[str, Any] = {
        "completion_tokens": osl,
        "ttft_ms": ttft,
        "itl_ms": _stat(metrics, "inter_chunk_latency", "value", ms=True),
        "context_tokens": _stat(metrics, "input_sequence_length", "value") + osl / 2,
        "category": category if isinstance(category, str) and category else None,
        "timestamp": iso_timestamp(start / 1e9) if start > 0 else None,
    }
    if osl > 1 and latency > ttft >= 0:  # the first token is the prefill's
        record.update(
            tok_s=1000.0 * (osl - 1) / (latency - ttft), tpot_ms=(latency - ttft) / (osl - 1)
        )
    record.update(_request_acceptance(obj, metrics))
    return record


def _request_acceptance(obj: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """A request's counts: its metrics', else its ``spec_decode_acceptance`` record's."""
    spec = _dict(obj.get("spec_decode_acceptance"))

    def count(tag: str, key: str) -> float:
        value = _stat(metrics, tag, "value")
        return _number(spec.get(key), key) if math.isnan(value) else value

    steps = count("spec_decode_steps", "num_spec_steps")
    accepted = count("spec_decode_accepted_draft_tokens", "num_accepted_draft_tokens")
    drafted = count("spec_decode_draft_tokens", "num_draft_tokens")
    if not steps > 0 or not accepted >= 0:
        return {}  # no verify step (or no speculation): no acceptance
    k = spec.get("num_spec_tokens")
    if not isinstance(k, int) or isinstance(k, bool):
        k = round(drafted / steps) if drafted > 0 else None
    engine = spec.get("engine")
    return {
        "accept_len": 1.0 + accepted / steps,
        "acceptance_rate": accepted / drafted if drafted > 0 else math.nan,
        "num_drafts": steps,
        "accepted_tokens": accepted,
        "draft_tokens": drafted,
        "num_spec_tokens": k,
        "engine": engine if isinstance(engine, str) else None,
    }


# Printed tables: the console summary, the CSV export, speed-bench-report's matrix.

TITLE = "NVIDIA AIPerf"
REPORT_TITLES = {
    "Acceptance Length Report": "accept_len",
    "Acceptance Rate Report": "acceptance_rate",
    "Throughput Report (tokens/sec)": "aggregate_tok_s",
}
CSV_HEADER = "Metric,avg,"
REPORT_CSV_END = ",Overall"
MARKERS = (TITLE, *REPORT_TITLES, CSV_HEADER, REPORT_CSV_END)
"""Literals that start one of AIPerf's printed tables."""
CUT = "an AIPerf table without its bottom border (cut off?): the rows above are read"

# Printed names (lower case, unit left off) of the metrics the summary's reader uses.
_TAGS = {
    name: name.replace(" ", "_").replace("-", "_")
    for name in (
        "inter token latency",
        "inter chunk latency",
        "time to first token",
        "output token throughput",
        "input sequence length",
        "output sequence length",
        "total spec decode steps",
        "total accepted draft tokens",
        "total draft tokens",
    )
}
_TAGS.update(
    {
        "acceptance length": "spec_decode_acceptance_length",
        "token-weighted acceptance length": "spec_decode_token_weighted_acceptance_length",
        "overall draft acceptance rate": "spec_decode_overall_draft_acceptance_rate",
    }
)
_UNIT = re.compile(r"^(.*\S)\s*\(([^()]*)\)$")
_Found = tuple[list[dict[str, Any]], list[tuple[int, str]], int, bool]


def table_records(
    text: str, first_line: int = 1, final: bool = True
) -> tuple[list[dict[str, Any]], list[tuple[int, str]], int | None]:
    """AIPerf's printed tables in ``text`` (its line 1 is ``first_line``): records (``_line``
    their line), problems ``(line, message)``, and the first line of a table ``text`` may end
    inside (None when ``final``: the input's end closes it)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text's last newline: the next block may go on with the table
    records: list[dict[str, Any]] = []
    problems: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        read = _reader(lines, i, final)
        if read is None:
            i += 1
            continue
        found, trouble, end, closed = read(lines, i)
        if not closed and not final:
            return records, problems, first_line + i
        records += [dict(r, _line=first_line + r["_line"]) for r in found]
        problems += [(first_line + at, message) for at, message in trouble]
        i = max(end, i + 1)
    return records, problems, None


def _reader(lines: list[str], i: int, final: bool = True) -> Any:
    """What starts at line ``i``: the reader of its table, or None."""
    text = lines[i].strip()
    # A title the text ends at may still open a table (the next block holds it), unless the
    # input ends there: then it is a title without a table, never a table cut off.
    last = i + 1 == len(lines)
    opens = (last and not final) or (not last and lines[i + 1].lstrip().startswith("┏"))
    if text.startswith(TITLE) and opens:
        return _console
    if text.endswith(tuple(REPORT_TITLES)) and opens:
        return _report
    if text.startswith(CSV_HEADER):
        return _csv_summary
    if text.startswith("Model,") and text.endswith(REPORT_CSV_END):
        return _report_csv
    return None


def _grid(
    lines: list[str], i: int
) -> tuple[list[str], list[tuple[int, str, list[str]]], int | None]:
    """A Rich table whose top border follows the title at line ``i``: its header cells, its
    rows ``(line, label, cells)`` (a label Rich wrapped onto more lines joined), and the line
    after its bottom border (None: not in ``lines``)."""
    header: list[str] = []
    rows: list[tuple[int, str, list[str]]] = []
    for j in range(i + 1, len(lines)):
        text = lines[j].strip()
        if text.startswith("└"):
            return header, rows, j + 1
        if text.startswith("┃"):
            cells = [c.strip() for c in text.strip("┃").split("┃")]
            header = (
                [f"{a} {b}".strip() for a, b in zip(header, cells, strict=False)]
                if header
                else cells
            )
        elif text.startswith("│"):
            label, *cells = (c.strip() for c in text.strip("│").split("│"))
            if rows and not any(cells):
                at, said, values = rows[-1]
                rows[-1] = (at, f"{said} {label}".strip(), values)
            else:
                rows.append((j, label, cells))
    return header, rows, None


def _console(lines: list[str], i: int) -> _Found:
    """``aiperf profile``'s console summary from its first table's title: its tables (one
    run's, until a metric repeats) and its ``CLI Command:`` (Rich wrapped onto more lines, up
    to a blank line), up to ``Benchmark Duration:`` or a line of none of them."""
    said: dict[str, tuple[str, str | None, int]] = {}  # printed name: (avg, unit, line)
    command: list[str] = []
    j, in_command = i, False
    while j < len(lines):
        text = lines[j].strip()
        if text.startswith("Benchmark Duration:"):
            return (*_summary_of(said, PROFILE + "_table", i, " ".join(command)), j + 1, True)
        if in_command:
            in_command = bool(text)
            command.append(text)
        elif text.startswith(TITLE) and _reader(lines, j, final=False) is _console:
            header, rows, end = _grid(lines, j)
            table = _console_rows(header, rows)
            if end is None:  # cut off, or the rest is in the next block
                said.update(table)
                found, trouble = _summary_of(said, PROFILE + "_table", i, " ".join(command))
                return found, [(j, CUT), *trouble], len(lines), False
            if said.keys() & table.keys():
                break  # the next run's summary
            said.update(table)
            j = end
            continue
        elif text.startswith("CLI Command:"):
            command.append(text[len("CLI Command:") :])
            in_command = True
        elif text and not text.startswith("Accepted drafts per step"):
            break
        j += 1
    return (*_summary_of(said, PROFILE + "_table", i, " ".join(command)), j, j < len(lines))


def _console_rows(header: list[str], rows: list[tuple[int, str, list[str]]]) -> dict[str, Any]:
    column = header.index("avg") - 1 if "avg" in header[1:] else 0
    out = {}
    for at, label, cells in rows:
        name, unit = _name_unit(label)
        out[name] = (cells[column] if column < len(cells) else "", unit, at)
    return out


def _name_unit(label: str) -> tuple[str, str | None]:
    """``Time to First Token (ms)`` -> (``time to first token``, ``ms``)."""
    found = _UNIT.match(label.strip())
    name, unit = found.groups() if found else (label.strip(), None)
    return name.lower(), unit


def _summary_of(
    said: dict[str, tuple[str, str | None, int]], fmt: str, i: int, command: str = ""
) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """A printed summary's values (and its command line) as the JSON summary's, read by
    :func:`summary_columns`: its record, none where it holds no value that reader uses."""
    obj: dict[str, Any] = {
        _TAGS[n]: {"avg": v, "unit": u} for n, (v, u, _) in said.items() if n in _TAGS
    }
    if not obj:
        return [], []
    obj["run_info"] = {"cli_command": command}
    try:
        columns = summary_columns(obj)
    except BadValue as e:
        lines = [at for n, (_, _, at) in said.items() if n in _TAGS and _TAGS[n] in str(e)]
        return [], [(lines[0] if lines else i, f"AIPerf summary does not parse: {e}")]
    return [{"format": fmt, "origin": "client", "engine": None, "_line": i, **columns}], []


def _csv_summary(lines: list[str], i: int) -> _Found:
    """``profile_export_aiperf.csv``: its per-request statistics (``Metric,avg,...``) and run
    values (``Metric,Value``), each section after a blank line; up to another section."""
    said: dict[str, tuple[str, str | None, int]] = {}
    column, j, blank = 1, i, False
    while j < len(lines):
        text = lines[j].strip()
        cells = next(csv.reader([text])) if text else []
        if blank and cells and cells[0] != "Metric":
            break  # GPU telemetry, server metrics: not the summary's
        if cells and cells[0] == "Metric":
            column = cells.index("avg") if "avg" in cells else 1
        elif len(cells) > column:
            name, unit = _name_unit(cells[0])
            said[name] = (cells[column], unit, j)
        blank = not text
        j += 1
    return (*_summary_of(said, PROFILE_CSV, i), j, j < len(lines))


def _report(lines: list[str], i: int) -> _Found:
    """``speed-bench-report``'s console matrix: a model per row, a category per column."""
    column = next(c for title, c in REPORT_TITLES.items() if lines[i].strip().endswith(title))
    header, rows, end = _grid(lines, i)
    found, problems = _matrix(header, [(at, [label, *cells]) for at, label, cells in rows], column)
    if end is None:  # cut off, or the rest is in the next block
        return found, [(i, CUT), *problems], len(lines), False
    return found, problems, end, True


def _report_csv(lines: list[str], i: int) -> _Found:
    """``speed_bench_report.csv``: ``Model,<categories>,Overall`` and a row per model."""
    header = next(csv.reader([lines[i].strip()]))
    rows, j = [], i + 1
    while j < len(lines) and lines[j].strip():
        rows.append((j, next(csv.reader([lines[j].strip()]))))
        j += 1
    numbers = []  # the cells that are numbers (the others are problems of their rows)
    for cell in (c for _, cells in rows for c in cells[1:-1]):
        try:
            numbers += [n] if not math.isnan(n := _number(cell, "")) else []
        except BadValue:
            pass
    if numbers and all(0 <= n <= 1 for n in numbers) and min(numbers) < 1:
        column = "acceptance_rate"
    elif all(1 <= n <= 32 for n in numbers):
        column = "accept_len"
    else:
        message = "values outside 1..32 (acceptance length) and 0..1 (rate): not read"
        return [], [(i, f"speed_bench_report.csv: {message}")], j, j < len(lines)
    found, problems = _matrix(header, rows, column)
    for record in found:
        record.update(
            format=REPORT,
            note=f"{REPORT_NOTE}; {CSV_METRIC}" if column == "accept_len" else REPORT_NOTE,
        )
    return found, problems, j, j < len(lines)


def _matrix(
    header: list[str], rows: list[tuple[int, list[str]]], column: str
) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """A record per model and category of a report's matrix (``Overall`` left out)."""
    categories = header[1:-1] if header[-1:] == ["Overall"] else header[1:]
    records, problems = [], []
    for at, (model, *cells) in rows:
        if len(cells) != len(header) - 1:
            problems.append(
                (at, f"{len(cells)} values, expected {len(header) - 1} ({', '.join(header[1:])})")
            )
            continue
        for category, cell in zip(categories, cells, strict=False):
            try:
                value = _number(cell, f"the {category} cell")
            except BadValue as e:
                problems.append((at, str(e)))
                continue
            if not math.isnan(value):
                records.append(
                    {
                        "format": REPORT + "_table",
                        "origin": "client",
                        "engine": None,
                        "model": model.strip(),
                        "category": category,
                        column: value,
                        "note": REPORT_NOTE,
                        "_line": at,
                    }
                )
    return records, problems
