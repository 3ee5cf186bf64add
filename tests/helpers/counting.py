"""Counting calls in tests (work skipped is counted, never timed)."""

from __future__ import annotations

from typing import Any

import pytest


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """Wrap ``owner.name`` so that each call is counted (in the returned one-item list)."""
    real = getattr(owner, name)
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return count
