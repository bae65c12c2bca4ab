"""What speculation would give, from costs and acceptance typed or fitted.

- :mod:`~breakeven.prediction.predict`: ``breakeven predict``, one case;
- :mod:`~breakeven.prediction.sensitivity`: what each input's error moves;
- :mod:`~breakeven.prediction.optimize`: the best k (``optimize``);
- :mod:`~breakeven.prediction.tree`: the best tree draft (``optimize --tree``);
- :mod:`~breakeven.prediction.moe`: what a Mixture-of-Experts forward loads (``moe``).

Imports the measurements and fitting families and the layers below.
"""
