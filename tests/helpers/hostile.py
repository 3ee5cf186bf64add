"""Numbers no GPU or host reports, put where numbers go: in a snapshot (no check in
between, for the renderers) or in a stream line's JSON (for the checks)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from collections.abc import Sequence
from typing import Any

from gputop.model import Snapshot

HOSTILE: tuple[Any, ...] = (
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    1e20,
    10**400,
    2**64,
    2**63 - 1,
    -1,
    -(2**63),
    0,
    1e-320,
)


def poison_snapshot(
    snapshot: Snapshot, rng: random.Random, values: Sequence[Any] = HOSTILE, share: float = 0.35
) -> Snapshot:
    """``snapshot`` with about ``share`` of its numbers (the time too) replaced."""

    def walk(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            changes = {}
            for f in dataclasses.fields(obj):
                old = getattr(obj, f.name)
                new = walk(old)
                if new is not old:
                    changes[f.name] = new
            return dataclasses.replace(obj, **changes) if changes else obj
        if isinstance(obj, tuple):
            return tuple(walk(v) for v in obj)
        if type(obj) in (int, float) and rng.random() < share:
            return rng.choice(values)
        return obj

    poisoned: Snapshot = walk(snapshot)
    if type(poisoned.time) is int:
        # A snapshot's time is a float by the time any source (or a checked decoder) hands
        # it on: a huge int there is a state nothing reaches, so its float stands in.
        try:
            poisoned = dataclasses.replace(poisoned, time=float(poisoned.time))
        except OverflowError:
            poisoned = dataclasses.replace(poisoned, time=math.inf)
    return poisoned


def poison_line(data: dict[str, Any], rng: random.Random, count: int = 6) -> str:
    """A stream line of ``data`` with ``count`` of its numbers replaced (JSON's NaN and
    Infinity included, as Python's json writes and reads them)."""
    leaves: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, dict | list):
                walk(value)
            elif type(value) in (int, float):
                leaves.append((node, key))

    copy = _copy(data)
    walk(copy)
    for node, key in rng.sample(leaves, min(count, len(leaves))):
        node[key] = rng.choice(HOSTILE)
    return json.dumps(copy)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


#: What a screen must never show: a NaN or an infinity, or a number of 13 digits and more
#: (bytes are shown with units; a pid has at most 10 digits).
NONSENSE = re.compile(r"\b(?:nan|inf|infinity)\b|\d{13,}", re.IGNORECASE)
