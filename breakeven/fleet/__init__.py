"""``breakeven fleet``: is speculation paying on each server, read from Prometheus.

- :mod:`~breakeven.fleet.view`: the series' rows summarised per server (``FleetResult``);
- :mod:`~breakeven.fleet.reads`: each engine's series read chunk by chunk into rows (the HTTP
  API itself is :mod:`breakeven.iotools.query_range`'s).

Imports the planning and prediction families and the layers below.
"""


def __getattr__(name: str) -> object:
    """The names of ``breakeven.fleet`` before issue 39 (``breakeven/fleet.py``), now in :mod:`breakeven.fleet.view`:
    their old paths keep working."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib  # lazy: only an old path needs it

    try:
        return getattr(importlib.import_module("breakeven.fleet.view"), name)
    except AttributeError:
        raise AttributeError(f"module 'breakeven.fleet' has no attribute {name!r}") from None
