"""The process table: rows keyed by (gpu, pid), fixed column widths, cheap refreshes.

Per refresh (TEXTUAL_NOTES): nothing changed -> no work; the same rows in the same order
-> ``update_cell`` for the changed cells only; otherwise (rows came, went or reordered)
-> ``clear()`` + ``add_row`` and the cursor goes back to the same (gpu, pid).
Cells are ``rich.text.Text`` objects: untrusted text is never parsed as markup.

Rendering: DataTable renders every cell through Rich's console (``Padding`` + ``Styled``,
about 0.1 ms a cell) and any ``update_cell`` throws away the whole table's render cache,
so a 16-row table cost ~10 ms of CPU per tick (py-spy, 200x50). Every cell here is
already cut to its column's exact width with one style and no spans, so
:meth:`ProcessTable._render_cell` turns it into one ``Segment`` with the style Rich would
have computed; anything else (the header, a wide character) goes the normal way.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

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
            # Same rows, same order: cells in place, even when every row changed (TIME
            # ticks every second). A rebuild would re-measure every cell on idle.
            if changed:
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

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """One body cell as one segment: what DataTable's own path computes, without
        Rich's console (see the module docstring). Falls back for anything else."""
        if row_index < 0 or column_index < 0 or self.fixed_rows or self.fixed_columns:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        try:
            row_key = self._row_locations.get_key(row_index)
            column_key = self._column_locations.get_key(column_index)
            cell = self._data[row_key][column_key]
        except KeyError:
            cell = None
        if (
            not isinstance(cell, Text)
            or cell.spans
            or not isinstance(cell.style, Style)
            or self.rows[row_key].height != 1
            or cell_len(cell.plain) != width
            or "\n" in cell.plain
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        component_style, post_style = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            self.show_cursor,
            self._show_hover_cursor,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        meta = Style.from_meta({"row": row_index, "column": column_index})
        style = base_style + meta + component_style + cell.style + post_style
        return [[Segment(cell.plain, style)]]

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable measures every cell of every new row on idle (~90 ms for a 1,024-row
        rebuild at 200x50) to size auto-width columns and auto-height rows. Here every
        column has a fixed width and every row is one line: only the virtual size matters."""
        width = sum(column.get_render_width(self) for column in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)

    def restyle(self) -> None:
        """The theme changed: rebuild the cell styles on the next refresh."""
        self._styles = {}
        self._order = []
