"""All file reading.  Readers are called ``read_*`` and return ``(data, metadata)``.

Column names are renamed to breakeven's canonical ones.  A problem with a file
is a :class:`~breakeven.BreakevenError` naming the file and the line.
"""

from breakeven.iotools.curves import read_cost_curve

__all__ = ["read_cost_curve"]
