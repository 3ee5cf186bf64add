"""Recording and replay: ``gputop record`` writes snapshots to segment files,
``gputop replay`` reads them back (see :mod:`gputop.record.store` for the format)."""
