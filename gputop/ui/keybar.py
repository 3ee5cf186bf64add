"""gputop's footer: the top screen's keys on one line, drawn by one widget.

It shows what Textual's ``Footer`` shows, in its order, words and colours (one key per
action, groups, disabled keys dimmed, ``compact``, the command palette's key docked at the
right), but as one line of text: ``Footer`` makes a widget per key, each with its own
styles, message queue and caches, for what is one line (bench/README.md §5: its RSS).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.color import Color
from textual.strip import Strip
from textual.widget import Widget

from gputop.ui.lines import let_go_of_lines

if TYPE_CHECKING:
    from textual.screen import Screen


@dataclass(frozen=True)
class ShownKey:
    """One key as the bar shows it; a click on it presses ``key``."""

    key: str  # Textual's key name, as the binding has it
    display: str  # as drawn (App.get_key_display)
    description: str  # "" for a key of a group: the group's label says what they do
    action: str
    enabled: bool = True  # False: drawn dimmed, a click rings the bell
    tooltip: str = ""


@dataclass(frozen=True)
class KeyGroup:
    """Keys of one binding group, drawn without descriptions and followed by its label."""

    keys: tuple[ShownKey, ...]
    description: str
    compact: bool


class Placed(NamedTuple):
    """Where a key is drawn in the bar at its width."""

    key: ShownKey
    x: int  # first column, from the bar's left
    width: int  # columns drawn
    whole: bool  # False: cut at the right (the keys did not fit)


class _Piece(NamedTuple):
    text: str
    kind: str  # key, description, label, item (a key's padding), gap, rule
    owner: int  # the key it belongs to, by its place in ``KeyBar.shown``; -1 for none


#: A laid-out box: left margin, pieces, right margin (margins of neighbours collapse,
#: as in Textual's horizontal layout).
_Box = tuple[int, list[_Piece], int]

_PALETTE_RULE = "▏"  # Textual's "vkey" border on the palette key's left


def _row(boxes: Sequence[_Box]) -> list[_Piece]:
    out: list[_Piece] = []
    right = 0
    for n, (left, pieces, next_right) in enumerate(boxes):
        gap = left if n == 0 else max(right, left)
        if gap:
            out.append(_Piece(" " * gap, "gap", -1))
        out += pieces
        right = next_right
    if boxes and right:
        out.append(_Piece(" " * right, "gap", -1))
    return out


def _width(pieces: Iterable[_Piece]) -> int:
    return sum(cell_len(p.text) for p in pieces)


def _crop(pieces: Iterable[_Piece], start: int, end: int) -> list[_Piece]:
    """The pieces' cells from column ``start`` to ``end``."""
    out: list[_Piece] = []
    x = 0
    for piece in pieces:
        w = cell_len(piece.text)
        a, b = max(start, x), min(end, x + w)
        if a < b:
            text = piece.text
            if (a, b) != (x, x + w):
                text = Strip([Segment(text)]).crop(a - x, b - x).text
            out.append(piece._replace(text=text))
        x += w
    return out


class KeyBar(Widget, can_focus=False):
    """The keys of the screen it is on: ``Screen.active_bindings`` whose binding shows.

    Follows the screen's ``bindings_updated_signal`` (focus and a ``refresh_bindings``),
    with or without the app's focus (Textual's ``Footer`` waits for focus to come back).
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "keybar--key",
        "keybar--description",
        "keybar--item",
        "keybar--hover",
        "keybar--rule",
    }
    # Textual's Footer and FooterKey colours: the theme's footer variables.
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyBar > .keybar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .keybar--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    KeyBar > .keybar--item {
        background: $footer-item-background;
    }
    KeyBar > .keybar--hover {
        color: $footer-key-foreground;
        background: $block-hover-background;
    }
    KeyBar > .keybar--rule {
        color: $foreground 20%;
    }
    """

    def __init__(
        self,
        *,
        id: str | None = None,
        classes: str | None = None,
        compact: bool = False,
        show_command_palette: bool = True,
    ) -> None:
        super().__init__(id=id, classes=classes)
        let_go_of_lines(self)
        self._compact = compact
        self._show_palette = show_command_palette
        self._entries: tuple[ShownKey | KeyGroup, ...] = ()
        self._palette: ShownKey | None = None
        self._hover = -1
        self._strip: Strip | None = None
        self._row: tuple[list[_Piece], list[_Piece]] | None = None
        self._pieces: list[_Piece] | None = None
        self._update_pending = False
        self._pieces_width = -1
        self._styles: dict[tuple[str, bool, bool], Style] = {}

    # What is shown

    @property
    def compact(self) -> bool:
        """Less space around the keys (Textual's ``Footer.compact``)."""
        return self._compact

    @compact.setter
    def compact(self, compact: bool) -> None:
        if compact != self._compact:
            self._compact = compact
            self._changed()

    @property
    def show_command_palette(self) -> bool:
        """Whether the command palette's key is drawn at the right."""
        return self._show_palette

    @show_command_palette.setter
    def show_command_palette(self, show: bool) -> None:
        if show != self._show_palette:
            self._show_palette = show
            self._changed()

    @property
    def shown(self) -> tuple[ShownKey, ...]:
        """The keys the bar draws, left to right, the palette's key last (a key the width
        cuts off is still here: :attr:`placed` says where each one is)."""
        return tuple(self._keys())

    @property
    def placed(self) -> tuple[Placed, ...]:
        """Each key drawn at the bar's width and its columns; a key with no column left
        (cut at the right) is left out."""
        width = self.size.width
        full: dict[int, int] = {}
        row, palette = self._natural()
        for piece in row + palette:
            if piece.owner >= 0:
                full[piece.owner] = full.get(piece.owner, 0) + cell_len(piece.text)
        spans: dict[int, list[int]] = {}
        x = 0
        for piece in self._layout(width):
            w = cell_len(piece.text)
            if piece.owner >= 0 and w:
                span = spans.setdefault(piece.owner, [x, 0])
                span[1] += w
            x += w
        keys = self.shown
        return tuple(
            Placed(keys[i], start, w, w == full[i]) for i, (start, w) in sorted(spans.items())
        )

    def _keys(self) -> Iterator[ShownKey]:
        for entry in self._entries:
            if isinstance(entry, KeyGroup):
                yield from entry.keys
            else:
                yield entry
        if self._palette is not None and self._show_palette:
            yield self._palette

    # Following the screen's bindings

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen and not self._update_pending:
            # After the refresh, as Footer: the focus a change brings is settled by then.
            self._update_pending = True
            self.call_after_refresh(self.update_keys)

    def update_keys(self) -> None:
        """Read the screen's active bindings now (as ``Footer.compose`` does)."""
        self._update_pending = False
        if not self.is_attached:
            return
        app = self.app
        active = self.screen.active_bindings
        by_action: dict[str, list[tuple[Binding, bool, str]]] = {}
        for _, binding, enabled, tooltip in active.values():
            if binding.show:
                by_action.setdefault(binding.action, []).append((binding, enabled, tooltip))
        entries: list[ShownKey | KeyGroup] = []
        # Footer.compose: runs of actions whose first binding has the same group.
        for group, run in groupby(by_action.values(), key=lambda multi: multi[0][0].group):
            firsts = [multi[0] for multi in run]
            if group is not None and len(firsts) > 1:
                # Drawn without descriptions, the group's label after them; the tooltip
                # says each key's own words.
                keys = tuple(
                    ShownKey(
                        b.key, app.get_key_display(b), "", b.action, enabled, tip or b.description
                    )
                    for b, enabled, tip in firsts
                )
                entries.append(KeyGroup(keys, group.description, group.compact))
            else:
                entries += [
                    ShownKey(b.key, app.get_key_display(b), b.description, b.action, enabled, tip)
                    for b, enabled, tip in firsts
                ]
        palette: ShownKey | None = None
        if app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, _ = found
                palette = ShownKey(
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    binding.tooltip or binding.description,
                )
        new = (tuple(entries), palette)
        if new != (self._entries, self._palette):
            self._entries, self._palette = new
            self._changed()

    def _changed(self) -> None:
        self._row = None
        self._pieces = None
        self._strip = None
        self._hover = -1
        self.refresh()

    # Layout: Footer's CSS as boxes

    def _key_box(self, key: ShownKey, index: int, *, in_group: KeyGroup | None) -> _Box:
        compact = self._compact
        if in_group is not None:  # FooterKey.-grouped: the key alone
            margin = 0 if in_group.compact else 1
            return (margin, [_Piece(key.display, "key", index)], margin)
        if not key.description:
            return (0, [_Piece(key.display, "key", index)], 1 if compact else 0)
        if compact:
            pieces = [
                _Piece(key.display, "key", index),
                _Piece(f" {key.description}", "description", index),
            ]
            return (0, pieces, 1)
        pieces = [
            _Piece(f" {key.display} ", "key", index),
            _Piece(f"{key.description} ", "description", index),
        ]
        return (0, pieces, 0)

    def _palette_pieces(self, index: int) -> list[_Piece]:
        """The palette's key: always Footer's compact style, a rule on its left."""
        key = self._palette
        if key is None or not self._show_palette:
            return []
        pieces = [_Piece(_PALETTE_RULE, "rule", index), _Piece(key.display, "key", index)]
        if key.description:
            pieces.append(_Piece(f" {key.description}", "description", index))
        if not self._compact:
            pieces.append(_Piece(" ", "item", index))
        return _row([(0, pieces, 1 if self._compact else 0)])

    def _natural(self) -> tuple[list[_Piece], list[_Piece]]:
        """The keys' row as wide as it is, and the palette's key (docked at the right)."""
        if self._row is not None:
            return self._row
        boxes: list[_Box] = []
        index = 0
        for entry in self._entries:
            if isinstance(entry, KeyGroup):
                inner: list[_Box] = []
                for key in entry.keys:
                    inner.append(self._key_box(key, index, in_group=entry))
                    index += 1
                pieces = _row(inner)
                if entry.compact:  # KeyGroup.-compact: padding-left 1, margin-right 1
                    boxes.append((0, [_Piece(" ", "gap", -1), *pieces], 1))
                else:
                    boxes.append((0, pieces, 0))
                label = [_Piece(entry.description, "label", -1)]
                boxes.append((0, label, 0 if self._compact else 1))
            else:
                boxes.append(self._key_box(entry, index, in_group=None))
                index += 1
        self._row = (_row(boxes), self._palette_pieces(index))
        return self._row

    def _layout(self, width: int) -> list[_Piece]:
        """The line's pieces at ``width``: the keys cut at the right, then the palette."""
        if self._pieces is not None and self._pieces_width == width:
            return self._pieces
        row, palette = self._natural()
        room = width - _width(palette)
        if room < 0:  # narrower than the palette's key: its right end shows
            pieces = _crop(palette, -room, width - room)
        else:
            pieces = _crop(row, 0, room)
            used = _width(pieces)
            if used < room:
                pieces.append(_Piece(" " * (room - used), "gap", -1))
            pieces += palette
        self._pieces, self._pieces_width = pieces, width
        return pieces

    def _index_at(self, x: int) -> int:
        at = 0
        for piece in self._layout(self.size.width):
            at += cell_len(piece.text)
            if x < at:
                return piece.owner
        return -1

    # Drawing

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0:
            return Strip.blank(width, self.rich_style)
        strip = self._strip
        if strip is None or strip.cell_length != width:
            keys = self.shown
            segments = [
                Segment(p.text, self._style(p.kind, p.owner, keys)) for p in self._layout(width)
            ]
            # Joined where the style runs on, as Textual's compositor draws a blank run.
            strip = self._strip = Strip(Segment.simplify(segments), width)
        return strip

    def _style(self, kind: str, index: int, keys: Sequence[ShownKey]) -> Style:
        enabled = index < 0 or keys[index].enabled
        hovered = index >= 0 and index == self._hover
        cache_key = (kind, enabled, hovered)
        style = self._styles.get(cache_key)
        if style is None:
            style = self._styles[cache_key] = self._make_style(kind, enabled, hovered)
        return style

    def _make_style(self, kind: str, enabled: bool, hovered: bool) -> Style:
        """As Textual styles a FooterKey's part: each layer's background over the one
        below, the nearest colour, text styles added (``DOMNode.rich_style``)."""
        background = self.background_colors[1]
        if kind == "gap":
            return Style(bgcolor=background.rich_color if background.a else None)
        if kind == "label":  # FooterLabel: on the bar itself
            layers = ["keybar--description"]
        else:  # inside a key: its item (or hover) background first
            layers = ["keybar--hover" if hovered else "keybar--item"]
            if kind in ("key", "description"):
                layers.append(f"keybar--{kind}")
        color = Color(255, 255, 255, 0)
        text = Style(dim=True) if not enabled and kind in ("key", "description") else Style()
        for name in layers:
            styles = self.get_component_styles(name)
            if styles.has_rule("background"):
                background += styles.background
            if styles.has_rule("color"):
                color = styles.color
            text += styles.text_style
        if kind == "item":
            return Style(bgcolor=background.rich_color if background.a else None)
        if kind == "rule":  # a border: its colour over the bar's background, not the key's
            rule = self.background_colors[1] + self.get_component_styles("keybar--rule").color
            return Style.from_color(rule.rich_color, background.rich_color)
        return text + Style.from_color(
            (background + color).rich_color if (background.a or color.a) else None,
            background.rich_color if background.a else None,
        )

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strip = None

    # The mouse: a click presses the key (Footer's FooterKey); the key under it is lit

    def on_mouse_down(self, event: events.MouseDown) -> None:
        index = self._index_at(event.x)
        if index < 0:
            return
        key = self.shown[index]
        if key.enabled:
            self.app.simulate_key(key.key)
        else:
            self.app.bell()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self._index_at(event.x))

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(-1)

    def _set_hover(self, index: int) -> None:
        if index == self._hover:
            return
        self._hover = index
        self._strip = None
        self.refresh()
        tooltip = self.shown[index].tooltip if index >= 0 else ""
        self.tooltip = tooltip or None
        self.styles.pointer = "pointer" if index >= 0 else "default"  # FooterKey:hover's
