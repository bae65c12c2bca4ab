"""Measured runs: is speculation paying, and can the data say so?

- :mod:`~breakeven.measurements.check`: ``breakeven check``, every speculative run against its
  baseline, with flags for data that cannot decide; its steps in
  :mod:`~breakeven.measurements.normalise` (the rows as one frame),
  :mod:`~breakeven.measurements.baselines` (the baselines, and the one a run is compared with),
  :mod:`~breakeven.measurements.pairing` (each run against its baseline) and
  :mod:`~breakeven.measurements.flags` (the data-quality flags);
- :mod:`~breakeven.measurements.compare`: ``breakeven compare``, two runs side by side;
- :mod:`~breakeven.measurements.intervals`: speedup intervals, the launch the unit of repetition;
- :mod:`~breakeven.measurements.workload`: acceptance and speedup by request category, and mixes;
- :mod:`~breakeven.measurements.positions`: acceptance by draft position;
- :mod:`~breakeven.measurements.plausibility`: runs and typed costs no engine could produce.

Imports core, model, iotools and render; no other analysis family.
"""
