"""All file reading.  Readers are called ``read_*`` and return ``(data, metadata)``.

Column names are renamed to breakeven's canonical ones.  A problem with a file
is a :class:`~breakeven.BreakevenError` naming the file and the line.
"""

from breakeven.iotools.curves import read_cost_curve
from breakeven.iotools.ingest import ingest
from breakeven.iotools.measurements import read_measurements, write_measurements

__all__ = ["ingest", "read_cost_curve", "read_measurements", "write_measurements"]
