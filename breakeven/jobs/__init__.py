"""Each command's job as one library call: what a command decides from its arguments and files
before its analysis (costs from a fit file or a curve, runs from files, a server's settings, a
picture's inputs), as functions a notebook calls too.

- :mod:`~breakeven.jobs.inputs`: predict, optimize and batch from their files;
- :mod:`~breakeven.jobs.fits`: fit from its file;
- :mod:`~breakeven.jobs.schedules`: schedule from its files, and the plan a picture draws;
- :mod:`~breakeven.jobs.checking`: check from its file, each run against a schedule, a fit and
  a traffic mix;
- :mod:`~breakeven.jobs.measure`: compare, report, bench and fleet from files and servers;
- :mod:`~breakeven.jobs.drawing`: the figures of ``breakeven plot``.

Imports every analysis family; only the sweep and the CLI import it.
"""
