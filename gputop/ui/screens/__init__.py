"""Secondary screens, imported lazily (PEP 562): the detail screen pulls in plotext."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputop.ui.screens.detail import DetailScreen
    from gputop.ui.screens.help import HelpScreen
    from gputop.ui.screens.kill import KillScreen

__all__ = ["DetailScreen", "HelpScreen", "KillScreen"]

_MODULES = {"DetailScreen": "detail", "HelpScreen": "help", "KillScreen": "kill"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        module = importlib.import_module(f"gputop.ui.screens.{_MODULES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
