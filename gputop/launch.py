"""The ``gputop`` command's first line: the cyclic collector is held before anything is
imported (:func:`gputop.gcpolicy.hold`), then :func:`gputop.cli.entry` runs."""

from __future__ import annotations

from gputop import gcpolicy


def entry() -> int:
    """``gputop`` and ``python -m gputop``."""
    gcpolicy.hold()
    from gputop.cli import entry as cli_entry  # the imports come after the hold

    return cli_entry()
