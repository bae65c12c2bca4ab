"""``breakeven sweep``: the whole experiment, from a serve command to a verdict and a config.

- :mod:`~breakeven.sweep.plan`: the launches and loads to measure (``--plan``);
- :mod:`~breakeven.sweep.run`: the servers launched, benched and stopped, one after another;
- :mod:`~breakeven.sweep.answer`: a sweep's directory read back as its answer.

Imports the jobs and every family below; only the CLI imports it.
"""
