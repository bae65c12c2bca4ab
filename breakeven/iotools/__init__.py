"""All file reading.  Readers return plain data: frames, dicts, tuples; never analysis objects.

Names say what a function takes, as in pvlib: ``read_*`` opens a file (it takes
a path, or a run's paths) and ``parse_*`` takes text already read (or a value
given on the command line, such as ``parse_run``'s ``LABEL=FILE``).  Readers
of tables return ``(data, metadata)``.  Column names are renamed to
breakeven's canonical ones.  A problem with a file is a
:class:`~breakeven.BreakevenError` naming the file and the line.

What a format is, is said once: each engine's log lines in
:mod:`breakeven.iotools.engines`, each benchmark tool's JSON results in
:data:`breakeven.iotools.bench_results.BENCH_FORMAT_TABLE`, each engine's
``/metrics`` series in :mod:`breakeven.iotools.metrics`.

Each name is imported where first used, as the package's own are (:mod:`breakeven`): reading a
measurements CSV (``breakeven check``) needs neither ingest nor polars.
"""

from breakeven import lazy_names

# Name -> defining module.
_LAZY = {
    "ingest": "breakeven.iotools.ingest",
    "read_cost_curve": "breakeven.iotools.curves",
    "read_measurements": "breakeven.iotools.csvfile",
    "write_measurements": "breakeven.iotools.csvfile",
}

__all__ = ["ingest", "read_cost_curve", "read_measurements", "write_measurements"]


lazy_names(__name__, _LAZY)  # ingest stays the function when its module loads
