"""``breakeven sweep``: the whole experiment, from a serve command to a verdict and a config.

- :mod:`~breakeven.sweep.plan`: the launches and loads to measure (``--plan``);
- :mod:`~breakeven.sweep.run`: the servers launched, benched and stopped, one after another;
- :mod:`~breakeven.sweep.keeper`: the process that holds each launch's processes and ends them
  all, whatever happens to the sweep;
- :mod:`~breakeven.sweep.answer`: a sweep's directory read back as its answer.

Imports the jobs and every family below; only the CLI imports it.
"""


def __getattr__(name: str) -> object:
    """The names of ``breakeven.sweep`` before issue 39 (``breakeven/sweep.py``), now in :mod:`breakeven.sweep.plan`:
    their old paths keep working."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib  # lazy: only an old path needs it

    try:
        return getattr(importlib.import_module("breakeven.sweep.plan"), name)
    except AttributeError:
        raise AttributeError(f"module 'breakeven.sweep' has no attribute {name!r}") from None
