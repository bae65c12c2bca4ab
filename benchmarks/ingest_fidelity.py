"""How many held-out samples of real engine output ``ingest`` reads right.

The samples (benchmarks/data/ingest_heldout/, pasted in public GitHub issues and
pull requests; no test reads them) and what a reader should get from each
(expected.json, derived by hand from the printed numbers) stay fixed; the code
under test is whichever ``breakeven`` is first on the path, so an older checkout
can be measured too::

    PYTHONPATH=/path/to/checkout python benchmarks/ingest_fidelity.py

Only ``breakeven.iotools.ingest.ingest([path], num_spec_tokens=..., year=...)`` and
its ``.records`` / ``.problems`` are used. A sample is read right when ingest raises
nothing, reports no problem, and its records match the expectations (numbers
within a relative tolerance of 1e-3).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "ingest_heldout"


def _close(got, want, rel):
    if want is None:
        return got is None
    if got is None:
        return False
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(float(got), float(want), rel_tol=rel, abs_tol=0.0)
    return got == want


def _fmt(v):
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def check(name, spec, rel):
    """None if read right, else a short text saying what differs or failed."""
    from breakeven.iotools.ingest import ingest

    kwargs = dict(spec.get("ingest_args", {}))
    try:
        result = ingest([str(HERE / name)], **kwargs)
        records = list(result.records)
        problems = list(result.problems)
    except Exception as e:  # any failure of the reader counts as one
        return f"failed: {type(e).__name__}: {e}"
    if problems:
        return "failed: problems: " + "; ".join(str(p) for p in problems[:3])
    diffs = []
    with_al = [r for r in records if r.get("accept_len") is not None]
    if "count_accept_len" in spec and len(with_al) != spec["count_accept_len"]:
        diffs.append(f"{len(with_al)} records with accept_len, expected {spec['count_accept_len']}")
    chosen = with_al if spec["select"] == "accept_len" else records
    label = "records with accept_len" if spec["select"] == "accept_len" else "records"
    if len(chosen) != spec["count"]:
        diffs.append(f"{len(chosen)} {label}, expected {spec['count']}")
    for i, want in enumerate(spec.get("records", [])):
        if i >= len(chosen):
            break
        for key, value in want.items():
            got = chosen[i].get(key)
            if not _close(got, value, rel):
                diffs.append(f"{label}[{i}].{key} = {_fmt(got)}, expected {_fmt(value)}")
    return ("wrong: " + "; ".join(diffs)) if diffs else None


def main() -> int:
    expected = json.loads((HERE / "expected.json").read_text())
    rel = expected.get("tolerance_rel", 1e-3)
    samples = expected["samples"]
    import breakeven

    print(f"breakeven from {Path(breakeven.__file__).resolve().parent}")
    right = 0
    for name, spec in samples.items():
        verdict = check(name, spec, rel)
        if verdict is None:
            right += 1
            print(f"ok      {name}")
        else:
            print(f"{verdict.split(':', 1)[0]:<7} {name}: {verdict.split(':', 1)[1].strip()}")
    print(f"{right} of {len(samples)} read right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
