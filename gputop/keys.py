"""The dashboard's keys as data: bindings, footer, help, palette and ``[keys]`` derive from it.

No Textual here: the config file's ``[keys]`` is checked against this table at start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key names, comma separated
    action: str
    description: str
    display: str  # as the help screen and footer show it
    show: bool = True
    # Checked by the app before the key goes to the focused widget (see "slash").
    priority: bool = False
    name: str = ""  # its name in [keys]; "" = the action's
    # Acts on the main screen's table, filter or GPU choice: off while another screen is on top.
    main: bool = False

    @property
    def id(self) -> str:
        return self.name or self.action


#: Every key of the main screen.
KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", "q"),
    Key("question_mark", "help", "Help", "?"),
    Key("j", "jobs", "Jobs", "j", main=True),
    # Priority: the keys typed (or pasted) right after it must reach the box.
    Key("slash", "filter", "Filter", "/", priority=True, main=True),
    Key("s", "sort", "Sort", "s", main=True),
    Key("r", "reverse", "Reverse sort", "r", show=False, main=True),
    Key("p", "pause", "Pause", "p"),
    Key("enter", "detail", "Detail", "Enter", main=True),
    Key("k", "kill", "Kill", "k", main=True),
    # Shown in `?` and the palette, not the footer: the footer must fit 80 columns.
    Key("space", "tag", "Tag", "Space", show=False, main=True),
    Key("a", "all_gpus", "All GPUs", "a", show=False, main=True),
    Key("plus,equals_sign", "interval(1)", "Slower refresh", "+", show=False, name="slower"),
    Key("minus", "interval(-1)", "Faster refresh", "-", show=False, name="faster"),
    Key("escape", "clear_filter", "Clear filter", "Esc", show=False, main=True),
)

#: Keys no action may take: GPU choice, quit, suspend, palette, moving in the table.
_MOVES = ("tab", "up", "down", "left", "right", "pageup", "pagedown")
RESERVED = frozenset([*"0123456789", "ctrl+c", "ctrl+z", "ctrl+p", *_MOVES])


def remapped(overrides: Mapping[str, str], keys: tuple[Key, ...] = KEYS) -> tuple[Key, ...]:
    """``keys`` with ``[keys]`` applied (action name -> key, already checked)."""
    return tuple(
        dataclasses.replace(k, keys=overrides[k.id], display=overrides[k.id])
        if k.id in overrides
        else k
        for k in keys
    )
