"""What to run at each load: speculation's gain against batch size, and the k for each.

- :mod:`~breakeven.planning.batch`: the speedup by batch size and the break-even batch
  (``breakeven batch``);
- :mod:`~breakeven.planning.schedule`: ``breakeven schedule``, the k for each batch size, as a
  config each engine takes.

Imports the prediction, fitting and measurements families and the layers below.
"""
