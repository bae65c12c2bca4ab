"""``breakeven schedule``: the k for each batch size, as a config each engine takes.

Imports the prediction, fitting and measurements families and the layers below.
"""
