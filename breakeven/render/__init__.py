"""Text and HTML renderings of results: pure string building from plain rows, no I/O.

Every renderer takes a result's ``to_dict()`` (what ``--json`` prints), never the result
itself, and imports nothing above the core layer, so text and JSON cannot disagree.  A
result calls its renderer from ``report()`` and ``_repr_html_()``.  One module per family of
results:

- :mod:`~breakeven.render.text`: what every renderer shares (printable text, numbers,
  aligned columns, HTML tables);
- :mod:`~breakeven.render.prediction`: ``predict``, ``moe`` and sensitivity;
- :mod:`~breakeven.render.optimization`: ``optimize``, ``optimize --tree`` and ``batch``;
- :mod:`~breakeven.render.measurements`: ``check``, ``compare``, ``bench``, ``ingest`` and
  speedup intervals;
- :mod:`~breakeven.render.fits`: ``fit``;
- :mod:`~breakeven.render.deployment`: ``schedule`` and ``fleet``.

Beside them, the renderings that are not text: :mod:`~breakeven.render.plot` (pictures) and
:mod:`~breakeven.render.labels` (their points' labels), the only modules that import matplotlib,
:mod:`~breakeven.render.report` (self-contained HTML pages) and
:mod:`~breakeven.render.engine_configs` (a schedule as each engine takes it: the config to paste).
The layer imports only :mod:`breakeven.core`, :mod:`breakeven.model` and
:mod:`breakeven.iotools`; it never runs an analysis.

The public renderers are re-exported here, each module imported when one of its names is
first used: ``breakeven predict --json`` loads none of them (benchmarks/cli_startup.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_RENDERERS = {
    "batch_html": "optimization",
    "batch_table": "optimization",
    "batch_text": "optimization",
    "bench_text": "measurements",
    "check_headline": "measurements",
    "check_html": "measurements",
    "check_table": "measurements",
    "check_text": "measurements",
    "compare_html": "measurements",
    "compare_rows": "measurements",
    "compare_table": "measurements",
    "compare_text": "measurements",
    "doubt_line": "measurements",
    "csv_table": "text",
    "fit_html": "fits",
    "fit_table": "fits",
    "fit_text": "fits",
    "fleet_html": "deployment",
    "fleet_text": "deployment",
    "format_value": "text",
    "html_table": "text",
    "ingest_text": "measurements",
    "markdown_table": "text",
    "moe_html": "prediction",
    "moe_text": "prediction",
    "optimize_html": "optimization",
    "optimize_table": "optimization",
    "optimize_text": "optimization",
    "prediction_html": "prediction",
    "prediction_text": "prediction",
    "preformatted_html": "text",
    "printable": "text",
    "schedule_html": "deployment",
    "schedule_table": "deployment",
    "schedule_text": "deployment",
    "sensitivity_html": "prediction",
    "sensitivity_text": "prediction",
    "speedup_interval_html": "measurements",
    "speedup_interval_text": "measurements",
    "tree_search_html": "optimization",
    "tree_search_text": "optimization",
    "verdict": "prediction",
}
"""Each public renderer and the module of this package that defines it."""

if TYPE_CHECKING:
    from breakeven.render.deployment import (
        fleet_html,
        fleet_text,
        schedule_html,
        schedule_table,
        schedule_text,
    )
    from breakeven.render.fits import (
        fit_html,
        fit_table,
        fit_text,
    )
    from breakeven.render.measurements import (
        bench_text,
        check_headline,
        check_html,
        check_table,
        check_text,
        compare_html,
        compare_rows,
        compare_table,
        compare_text,
        doubt_line,
        ingest_text,
        speedup_interval_html,
        speedup_interval_text,
    )
    from breakeven.render.optimization import (
        batch_html,
        batch_table,
        batch_text,
        optimize_html,
        optimize_table,
        optimize_text,
        tree_search_html,
        tree_search_text,
    )
    from breakeven.render.prediction import (
        moe_html,
        moe_text,
        prediction_html,
        prediction_text,
        sensitivity_html,
        sensitivity_text,
        verdict,
    )
    from breakeven.render.text import (
        csv_table,
        format_value,
        html_table,
        markdown_table,
        preformatted_html,
        printable,
    )


def __getattr__(name: str) -> object:
    if name in _RENDERERS:
        module = importlib.import_module(f"breakeven.render.{_RENDERERS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'breakeven.render' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_RENDERERS])


__all__ = [
    "batch_html",
    "batch_table",
    "batch_text",
    "bench_text",
    "check_headline",
    "check_html",
    "check_table",
    "check_text",
    "compare_html",
    "compare_rows",
    "compare_table",
    "compare_text",
    "csv_table",
    "doubt_line",
    "fit_html",
    "fit_table",
    "fit_text",
    "fleet_html",
    "fleet_text",
    "format_value",
    "html_table",
    "ingest_text",
    "markdown_table",
    "moe_html",
    "moe_text",
    "optimize_html",
    "optimize_table",
    "optimize_text",
    "prediction_html",
    "prediction_text",
    "preformatted_html",
    "printable",
    "schedule_html",
    "schedule_table",
    "schedule_text",
    "sensitivity_html",
    "sensitivity_text",
    "speedup_interval_html",
    "speedup_interval_text",
    "tree_search_html",
    "tree_search_text",
    "verdict",
]
