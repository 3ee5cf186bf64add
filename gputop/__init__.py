"""gputop: a live terminal dashboard for NVIDIA GPU servers."""

__version__ = "0.1.0"
