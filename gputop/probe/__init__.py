"""gputop's probe: inside a training process, how long each step waits for its next batch.

Opt-in. ``import gputop.probe`` starts it (unless ``GPUTOP_PROBE=0``); so do
``gputop run -- CMD ...`` and ``python -m gputop.probe train.py`` without a code change.
It measures PyTorch's DataLoader by itself; a custom loop (JAX, TF, hand-written) says
where it waits and where a step ends::

    import gputop.probe
    for ...:
        with gputop.probe.waiting():
            batch = next(it)
        ...
        gputop.probe.step()

Standard library and gputop.probefile only (see docs/probe.md and gputop.probe.core).
"""

from __future__ import annotations

from gputop.probe.core import Waiting, disable, running, start, step, stop

__all__ = ["disable", "running", "start", "step", "stop", "waiting"]


def waiting() -> Waiting:
    """``with gputop.probe.waiting(): batch = next(it)``: the time inside is waiting for
    data, counted in the step that :func:`step` closes."""
    return Waiting()


start()
