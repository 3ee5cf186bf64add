"""``python -m gputop``."""

from gputop.launch import entry

raise SystemExit(entry())
