"""The core layer: what every other layer may import and that imports nothing of breakeven's
above it.  Errors (:mod:`~breakeven.core.errors`), the quantities and their units
(:mod:`~breakeven.core.quantities`), the measurement schema (:mod:`~breakeven.core.schema`),
the names the command line offers as choices (:mod:`~breakeven.core.choices`: light, so that
``--help``, which lists them, imports no analysis),
secrets and their masking (:mod:`~breakeven.core.credentials`), launches and their settings
(:mod:`~breakeven.core.provenance`), this host's processes (:mod:`~breakeven.core.processes`:
light, so that a sweep's keeper process starts without the readers' libraries) and the
terminal's width and colours (:mod:`~breakeven.core.display`)."""
