"""``breakeven fit``: the cycle's cost against k (and batch), fitted to measured runs.

- :mod:`~breakeven.fitting.fit`: the fit by k, its held-out errors and predictions;
- :mod:`~breakeven.fitting.surfaces`: the cost surfaces across batch sizes and tree acceptances;
- :mod:`~breakeven.fitting.tree`: tree drafts' acceptance, its fit and the tree search;
- :mod:`~breakeven.fitting.saved`: a fit file as the other commands read it, and the evidence
  behind it (what a plan may paste);
- :mod:`~breakeven.fitting.holdout`: held-out protocols over a whole k sweep.

Imports the measurements family and the layers below.
"""
