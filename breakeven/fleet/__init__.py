"""``breakeven fleet``: is speculation paying on each server, read from Prometheus.

- :mod:`~breakeven.fleet.view`: the series' rows summarised per server (``FleetResult``);
- :mod:`~breakeven.fleet.reads`: the reads from Prometheus' range API, chunk by chunk.

Imports the planning and prediction families and the layers below.
"""
