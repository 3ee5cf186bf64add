"""The process table: rows keyed by (gpu, pid), fixed column widths, cheap refreshes.

Per refresh (TEXTUAL_NOTES): nothing changed -> no work; a few rows changed in place ->
``update_cell`` for the changed cells; otherwise (order changed, most rows churned) ->
``clear()`` + ``add_row`` and the cursor goes back to the same (gpu, pid).
Cells are ``rich.text.Text`` objects: untrusted text is never parsed as markup.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from gputop.ui.views import ProcRow, column_widths, fit, visible_columns

Cell = tuple[str, str]  # (text as shown, style key)
RowCells = tuple[Cell, ...]


class ProcessTable(DataTable[Text]):
    DEFAULT_CSS = """
    ProcessTable {
        height: 1fr;
        width: 1fr;
        scrollbar-size-vertical: 1;
    }
    """

    # Enter belongs to the app (detail screen), not to DataTable's "select".
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "app.detail", "Detail", key_display="Enter"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id,
            cursor_type="row",
            cell_padding=0,
            zebra_stripes=False,
            show_row_labels=False,
        )
        self._columns_key: tuple[object, ...] | None = None
        self._widths: dict[str, int] = {}
        self._compact = False
        self._order: list[str] = []
        self._cells: dict[str, RowCells] = {}
        self.rows_by_key: dict[str, ProcRow] = {}
        self.last_update = "none"  # "skip" | "cells" | "rebuild": what the last show() did
        self._styles: dict[str, Style] = {}

    # --- columns --------------------------------------------------------------------------

    def configure(self, width: int, *, compact: bool, sort_key: str, reverse: bool) -> None:
        """(Re)build the columns when the width, layout or sort column changed."""
        key = (width, compact, sort_key, reverse)
        if key == self._columns_key:
            return
        self._columns_key = key
        self._compact = compact
        # -1: the vertical scrollbar.
        self._widths = column_widths(max(20, width - 1), compact)
        self.clear(columns=True)
        self._order = []
        self._cells = {}
        for i, col in enumerate(visible_columns(compact)):
            w = self._widths[col.key]
            text = fit(col.label, w, ">" if col.right else "<")
            gap = "" if i == 0 else " "
            if col.key == sort_key:  # the arrow takes the gap before the label
                text = text.strip()
                text = ("▼" if reverse else "▲") + text
                text = fit(text, w + 1, ">" if col.right else "<")
                gap = ""
            self.add_column(Text(gap + text, style="bold"), width=w + (i > 0), key=col.key)

    # --- rows -----------------------------------------------------------------------------

    @property
    def cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        row = min(max(self.cursor_row, 0), self.row_count - 1)
        value = self.ordered_rows[row].key.value
        return value

    @property
    def cursor_proc(self) -> ProcRow | None:
        key = self.cursor_key
        return None if key is None else self.rows_by_key.get(key)

    def _row_cells(self, row: ProcRow, tagged: bool) -> RowCells:
        cells: list[Cell] = []
        base = "tag" if tagged else "dim" if row.visible is False else ""
        for col in visible_columns(self._compact):
            if col.key == "tag":
                cells.append(("*" if tagged else " ", "tag" if tagged else ""))
                continue
            w = self._widths[col.key]
            text = " " + fit(
                row.cell_text(col.key, compact=self._compact), w, ">" if col.right else "<"
            )
            style = base
            if col.key == "command" and row.kind == "holder":
                style = "holder"
            elif col.key == "command" and row.visible is False:
                style = "dim"
            cells.append((text, style))
        return tuple(cells)

    def _refresh_styles(self) -> None:
        variables = self.app.theme_variables
        warning = variables.get("warning")
        accent = variables.get("accent")
        self._styles = {
            "": Style(),
            "dim": Style(dim=True),
            "tag": Style(bold=True, color=accent) if accent else Style(bold=True),
            "holder": Style(color=warning) if warning else Style(italic=True),
        }

    def _text(self, cell: Cell) -> Text:
        text, style = cell
        return Text(text, style=self._styles.get(style, Style()), no_wrap=True, end="")

    def show(self, rows: Sequence[ProcRow], tagged: Collection[str] = ()) -> str:
        """Show ``rows`` in this order; returns what it did: "skip", "cells" or "rebuild"."""
        if not self._styles:
            self._refresh_styles()
        order = [r.key for r in rows]
        cells = {r.key: self._row_cells(r, r.key in tagged) for r in rows}
        self.rows_by_key = {r.key: r for r in rows}
        if order == self._order and self.row_count == len(order):
            changed = [k for k in order if cells[k] != self._cells.get(k)]
            if not changed:
                self.last_update = "skip"
                return self.last_update
            if len(changed) <= max(2, len(order) // 4):
                keys = [c.key for c in visible_columns(self._compact)]
                for k in changed:
                    old = self._cells[k]
                    for col_key, before, after in zip(keys, old, cells[k], strict=True):
                        if before != after:
                            self.update_cell(k, col_key, self._text(after))
                self._cells = cells
                self.last_update = "cells"
                return self.last_update
        self._rebuild(order, cells)
        self.last_update = "rebuild"
        return self.last_update

    def _rebuild(self, order: list[str], cells: dict[str, RowCells]) -> None:
        cursor_key = self.cursor_key
        old_row = self.cursor_row
        scroll_y = self.scroll_y
        self.clear()
        for k in order:
            self.add_row(*(self._text(c) for c in cells[k]), key=k)
        self._order = order
        self._cells = cells
        if not order:
            return
        if cursor_key is not None and cursor_key in cells:
            row = order.index(cursor_key)
        else:
            row = min(max(old_row, 0), len(order) - 1)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)
        self.move_cursor(row=row, animate=False)

    def restyle(self) -> None:
        """The theme changed: rebuild the cell styles on the next refresh."""
        self._styles = {}
        self._order = []
