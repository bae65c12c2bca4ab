"""The core layer: what every other layer may import and that imports nothing of breakeven's
above it.  Errors (:mod:`~breakeven.core.errors`), the quantities and their units
(:mod:`~breakeven.core.quantities`), the measurement schema (:mod:`~breakeven.core.schema`),
secrets and their masking (:mod:`~breakeven.core.credentials`), launches and their settings
(:mod:`~breakeven.core.provenance`) and the terminal's width and colours
(:mod:`~breakeven.core.display`)."""
