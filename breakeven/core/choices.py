"""The names the command line offers as choices, each defined once, here.

``--help`` lists every choice of a command, so the module that defines them is imported to
print it: this one imports nothing, and ``breakeven fit --help`` does not import the
analysis (numpy, pandas, scipy) to list ``--cycle-form``'s forms.  The modules that use
the names import them from here and keep them as their own (``breakeven.fitting.fit.
DRAFT_COSTS`` is this module's :data:`DRAFT_COSTS`), so the Python API is unchanged.
"""

from __future__ import annotations

DRAFT_COSTS = ("per-token", "per-cycle")
"""How drafting grows with k: one draft step per token, or one pass per cycle."""

CYCLE_FORMS = ("leviathan", "anchored", "linear", "curved")
"""The forms of the cycle against k that ``fit`` chooses among, simplest first: Leviathan's
``step * (1 + c k)`` (one slope; the constant is the plain step), the line anchored at the plain
step (the step taken as a cycle at k = 0), the free line (the constant and slope fitted), and a
curve ``a + b k + c k**2`` (a power cap makes a convex cycle, some engines a concave one)."""

FORM_CHOICES = ("auto", *CYCLE_FORMS)
"""``--cycle-form``: 'auto' (the form of least held-out error) or one of :data:`CYCLE_FORMS`."""

COST_FORMS = ("linear", "knee")
"""The forms a measured verify-cost curve is fitted in (``--fit``;
:data:`breakeven.model.costs.FORMS`)."""

WEIGHT_BITS = ("4", "8", "16")
"""The bits per weight ``fit --weight-bits`` takes: a 4-bit (AWQ, GPTQ, NVFP4), 8-bit (FP8,
INT8) or 16-bit checkpoint of the config's model."""

FAIL_IF = ("slower", "not-faster", "flagged")
"""Conditions ``--fail-if`` gates on (exit code 1 when one holds)."""

# The formats ``ingest --format`` names.
SGLANG_BENCH_ONE_BATCH = "sglang_bench_one_batch"
TRTLLM_ITERATION = "trtllm_iteration_stats"
AIPERF_PROFILE = "aiperf_profile"
"""``profile_export_aiperf.json``: a run's summary (also its console table and its CSV)."""
AIPERF_RECORDS = "aiperf_records"
"""``profile_export.jsonl``: a record per request."""
OPENAI_REPLY = "openai_reply"
VLLM_BENCH_SERVE = "vllm_bench_serve"
SGLANG_BENCH_SERVING = "sglang_bench_serving"

BENCH_FORMATS = (
    SGLANG_BENCH_ONE_BATCH,
    TRTLLM_ITERATION,
    AIPERF_PROFILE,
    AIPERF_RECORDS,
    OPENAI_REPLY,
    VLLM_BENCH_SERVE,
    SGLANG_BENCH_SERVING,
)
"""The benchmark result formats, in the order :data:`breakeven.iotools.bench_results.
BENCH_FORMAT_TABLE` recognises them (its entries are named by these; a test keeps the two in
step)."""

TEXT_LOG = "log"
"""A text input: engine logs, and benchmark tables printed among them."""
BENCH_TABLE = "bench_table"
"""A text input that holds printed benchmark result tables: read as text, as :data:`TEXT_LOG`."""
PROMETHEUS = "prometheus"
"""Prometheus text of an engine's ``/metrics``."""

INGEST_FORMATS = ("auto", TEXT_LOG, BENCH_TABLE, *BENCH_FORMATS, PROMETHEUS)
"""``ingest --format``: 'auto' (told from the content) or one of these
(:data:`breakeven.iotools.ingest.FORMATS`)."""

__all__ = [
    "AIPERF_PROFILE",
    "AIPERF_RECORDS",
    "BENCH_FORMATS",
    "BENCH_TABLE",
    "COST_FORMS",
    "CYCLE_FORMS",
    "DRAFT_COSTS",
    "FAIL_IF",
    "FORM_CHOICES",
    "INGEST_FORMATS",
    "OPENAI_REPLY",
    "PROMETHEUS",
    "SGLANG_BENCH_ONE_BATCH",
    "SGLANG_BENCH_SERVING",
    "TEXT_LOG",
    "TRTLLM_ITERATION",
    "VLLM_BENCH_SERVE",
    "WEIGHT_BITS",
]
