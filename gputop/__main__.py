"""``python -m gputop``."""

from gputop.cli import entry

raise SystemExit(entry())
