"""The dashboard's keys as data: bindings, footer, help, palette and ``[keys]`` derive from it.

No Textual here: the config file's ``[keys]`` is checked against this table at start.
"""

from __future__ import annotations

import dataclasses
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Key:
    """One key binding: the keys, the action, and how the help screen and footer show it."""

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
    # htop's habits work too: F10 quits, F1 and h help, F9 kills, u filters by user.
    Key("q,f10", "quit", "Quit", "q"),
    Key("question_mark,f1,h", "help", "Help", "?"),
    Key("j", "jobs", "Jobs", "j", main=True),
    # Priority: the keys typed (or pasted) right after it must reach the box.
    Key("slash", "filter", "Filter", "/", priority=True, main=True),
    Key("s", "sort", "Sort", "s", main=True),
    Key("r", "reverse", "Reverse sort", "r", show=False, main=True),
    Key("p", "pause", "Pause", "p"),
    Key("enter", "detail", "Detail", "Enter", main=True),
    Key("k,f9", "kill", "Kill", "k", main=True),
    Key("u", "user_filter", "Filter to this user", "u", show=False, main=True),
    # The selected process in detail (htop's and nvitop's `e` shows a process's environment).
    Key("e", "process", "Process detail", "e", show=False, main=True),
    # Shown in `?` and the palette, not the footer: the footer must fit 80 columns.
    Key("space", "tag", "Tag", "Space", show=False, main=True),
    Key("a", "all_gpus", "All GPUs", "a", show=False, main=True),
    # GPUs 10 and up, and several at once ("0,2-3"): the digits reach one of 0-9.
    Key("g", "choose_gpus", "Choose GPUs", "g", show=False, main=True),
    # Room for processes: cycles LAYOUTS (btop toggles its boxes; one key is fewer to learn).
    Key("c", "layout", "Layout", "c", main=True),
    Key("plus,equals_sign", "interval(1)", "Slower refresh", "+", show=False, name="slower"),
    Key("minus", "interval(-1)", "Faster refresh", "-", show=False, name="faster"),
    Key("escape", "clear_filter", "Clear filter", "Esc", show=False, main=True),
)

#: Keys no action may take: GPU choice, quit, suspend, palette, moving in the table.
_MOVES = ("tab", "up", "down", "left", "right", "pageup", "pagedown")
RESERVED = frozenset([*"0123456789", "ctrl+c", "ctrl+z", "ctrl+p", *_MOVES])


#: Textual's names of the keys that type no character (textual.keys.Keys, unmodified).
NAMED_KEYS = frozenset(
    [
        *("escape", "enter", "tab", "space", "backspace", "insert", "delete"),
        *("up", "down", "left", "right", "home", "end", "pageup", "pagedown"),
        *(f"f{n}" for n in range(1, 25)),
    ]
)
#: Textual's name of each printable ASCII character that is not a letter or a digit (a
#: binding may give either; tests/cli/test_config.py checks them against Textual's).
CHARACTER_NAMES: dict[str, str] = dict(
    zip(
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        [
            "exclamation_mark",
            "quotation_mark",
            "number_sign",
            "dollar_sign",
            "percent_sign",
            "ampersand",
            "apostrophe",
            "left_parenthesis",
            "right_parenthesis",
            "asterisk",
            "plus",
            "comma",
            "minus",
            "full_stop",
            "slash",
            "colon",
            "semicolon",
            "less_than_sign",
            "equals_sign",
            "greater_than_sign",
            "question_mark",
            "at",
            "left_square_bracket",
            "backslash",
            "right_square_bracket",
            "circumflex_accent",
            "underscore",
            "grave_accent",
            "left_curly_bracket",
            "vertical_line",
            "right_curly_bracket",
            "tilde",
        ],
        strict=True,
    )
)


# Textual turns key names into characters and back with ``unicodedata.lookup`` and
# ``unicodedata.name`` (``textual.keys``: the keys of every focused widget's ancestors on
# each footer refresh, a footer label, each typed punctuation key). Each call pages in
# part of Unicode's name database (a shared library's data, mapped a fault-around at a
# time): about 0.8 MiB resident for a dozen of gputop's keys, kept for the whole run. The
# names Textual forms from a key are all known below, so the UI hands Textual
# :class:`UnicodeNames` instead; anything else still goes to ``unicodedata``.
# tests/ui/test_keynames.py checks each answer against ``unicodedata`` itself.

#: Unicode's name of each printable ASCII character that is not a letter or a digit.
UNICODE_NAMES: Final[dict[str, str]] = dict(
    zip(
        " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        [
            "SPACE",
            "EXCLAMATION MARK",
            "QUOTATION MARK",
            "NUMBER SIGN",
            "DOLLAR SIGN",
            "PERCENT SIGN",
            "AMPERSAND",
            "APOSTROPHE",
            "LEFT PARENTHESIS",
            "RIGHT PARENTHESIS",
            "ASTERISK",
            "PLUS SIGN",
            "COMMA",
            "HYPHEN-MINUS",
            "FULL STOP",
            "SOLIDUS",
            "COLON",
            "SEMICOLON",
            "LESS-THAN SIGN",
            "EQUALS SIGN",
            "GREATER-THAN SIGN",
            "QUESTION MARK",
            "COMMERCIAL AT",
            "LEFT SQUARE BRACKET",
            "REVERSE SOLIDUS",
            "RIGHT SQUARE BRACKET",
            "CIRCUMFLEX ACCENT",
            "LOW LINE",
            "GRAVE ACCENT",
            "LEFT CURLY BRACKET",
            "VERTICAL LINE",
            "RIGHT CURLY BRACKET",
            "TILDE",
        ],
        strict=True,
    )
)
#: The names of control characters that ``unicodedata.lookup`` accepts (Unicode's name
#: aliases) among the names Textual forms from its key names.
ALIASES: Final[dict[str, str]] = {
    "TAB": "\t",
    "ESCAPE": "\x1b",
    "BACKSPACE": "\b",
    "DELETE": "\x7f",
}
#: name -> character, for every name Textual looks up for a key: upper case (the
#: lookup ignores case).
CHARACTERS: Final[dict[str, str]] = {
    **{name: char for char, name in UNICODE_NAMES.items()},
    **ALIASES,
}
#: The names Textual may look up for a key that are no character's name: each key name
#: as it is and with spaces for underscores (``format_key``, ``key_to_character``), and
#: each letter and digit (``format_key`` of a key such as ctrl+p).
NOT_NAMES: Final[frozenset[str]] = (
    frozenset(
        {
            form.upper()
            for key in (*NAMED_KEYS, *CHARACTER_NAMES.values())
            for form in (key, key.replace("_", " "))
        }
        | set(string.ascii_uppercase + string.digits)
    )
    - CHARACTERS.keys()
)
#: The characters no name belongs to (ASCII's control characters) and that a key may be.
UNNAMED: Final[frozenset[str]] = frozenset([*map(chr, range(32)), "\x7f"])

_NO_DEFAULT: Final = object()


class UnicodeNames:
    """Stands in for ``unicodedata`` in ``textual.keys``: the two functions it calls."""

    @staticmethod
    def lookup(name: str) -> str:
        key = name.upper() if name.isascii() else ""
        if key in CHARACTERS:
            return CHARACTERS[key]
        if key in NOT_NAMES:
            raise KeyError(f"undefined character name '{name}'")
        return unicodedata.lookup(name)

    @staticmethod
    def name(char: str, default: object = _NO_DEFAULT, /) -> object:
        if char in UNICODE_NAMES:
            return UNICODE_NAMES[char]
        if char in UNNAMED:
            if default is _NO_DEFAULT:
                raise ValueError("no such name")
            return default
        if default is _NO_DEFAULT:
            return unicodedata.name(char)
        return unicodedata.name(char, default)


#: What may come before a key, each once, in this order ("ctrl+shift+up").
MODIFIERS = ("ctrl", "shift", "alt")


def canonical_key(key: str) -> str | None:
    """``key`` as Textual names it ("?" -> "question_mark"), or None when no key press
    produces it. A key: a printable ASCII character (alone: Textual names it itself), a
    letter or digit, or one of :data:`NAMED_KEYS` or :data:`CHARACTER_NAMES`' names,
    after modifiers from :data:`MODIFIERS`."""
    head, plus, base = ("", "", key) if key == "+" else key.rpartition("+")
    mods = head.split("+") if plus else []
    order = [MODIFIERS.index(m) if m in MODIFIERS else -1 for m in mods]
    if -1 in order or order != sorted(set(order)):
        return None
    if len(base) == 1 and base.isascii() and base.isalnum():
        name = base
    elif len(base) == 1 and not mods and base in CHARACTER_NAMES:
        name = CHARACTER_NAMES[base]  # Textual's bindings name a lone character themselves
    elif base in NAMED_KEYS or base in CHARACTER_NAMES.values():
        name = base
    else:
        return None
    return "+".join([*mods, name])


def remapped(overrides: Mapping[str, str], keys: tuple[Key, ...] = KEYS) -> tuple[Key, ...]:
    """``keys`` with ``[keys]`` applied (action name -> key, already checked)."""
    return tuple(
        dataclasses.replace(k, keys=overrides[k.id], display=overrides[k.id])
        if k.id in overrides
        else k
        for k in keys
    )
