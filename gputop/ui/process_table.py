"""The process table: rows keyed by (gpu, pid), fixed column widths, cheap refreshes.

``_render_line_in_row`` (a private DataTable method, checked by
tests/ui/test_ui_table_render.py) builds rows from the cached cells.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.geometry import Region, Size
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from gputop.cells import cell_width, fit
from gputop.ui.lines import let_go_of_lines
from gputop.ui.roles import rich_styles
from gputop.views.process_view import (
    Column,
    ProcRow,
    column_widths,
    time_text,
    visible_columns,
)

Cell = tuple[str, str]  # (text as shown, style key)
RowCells = tuple[Cell, ...]
#: A row, tagged, what it shows but its age (``_shown_but_time``), its TIME text.
Made = tuple[ProcRow, bool, tuple[object, ...], str]

#: A row's fields but its age: two rows alike in these and in their TIME text show the
#: same cells (every field, so that a field a cell comes to show is never missed).
_shown_but_time = attrgetter(*(f.name for f in fields(ProcRow) if f.name != "elapsed"))


class ShownCell:
    """A cell as DataTable holds it: the table's cell and its styles, made a Rich ``Text``
    only when DataTable itself draws or measures it (``__rich__``). The fast path draws
    rows from the cells, so a ``Text`` kept for every cell (with its second copy of the
    text) was memory for a path seldom taken: a few hundred bytes a process (issue 32 §5)."""

    __slots__ = ("cell", "styles")

    def __init__(self, cell: Cell, styles: dict[str, Style]) -> None:
        self.cell = cell
        self.styles = styles

    @property
    def plain(self) -> str:
        return self.cell[0]

    @property
    def style(self) -> Style:
        return self.styles.get(self.cell[1], Style())

    def __rich__(self) -> Text:
        return Text(self.cell[0], style=self.style, no_wrap=True, end="")


class ProcessTable(DataTable[ShownCell]):
    # The vertical scrollbar is drawn in the rows' last column (``_bar``), not by Textual's
    # ScrollBar widget: the compositor cut every line beside that widget in two, in each
    # layer under it (the screen, the main area, the table), and kept the pieces with the
    # line (issue 32 §5). Its look is Textual's: ``ScrollBarRender`` draws it.
    DEFAULT_CSS = """
    ProcessTable { height: 1fr; width: 1fr; scrollbar-size-vertical: 0; }
    """

    # Enter belongs to the app (detail screen), not to DataTable's "select".
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "app.detail", "Detail", key_display="Enter", id="gputop.detail")
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, cursor_type="row", cell_padding=0, zebra_stripes=False, show_row_labels=False
        )
        let_go_of_lines(self)
        # (width, compact, sort key, reverse, owners, probes) the columns and labels are for.
        self._columns_key: tuple[int, bool, str, bool, bool, bool] | None = None
        self._widths: dict[str, int] = {}
        self._table_width = 0  # the columns' total width, as DataTable renders them
        self._compact = False
        self._owners = False  # the OWNER column is shown (a row has an owner)
        self._probes = False  # the PROBE column is shown (a row's process has a probe)
        self._order: list[str] = []
        self._cells: dict[str, RowCells] = {}
        # Row key -> the row its cells in _cells were made from (or kept for), tagged, and
        # what the row shows but its age, and its TIME text (see _cells_of): the same row
        # object (the app makes a snapshot's rows once) keeps its cells until the columns
        # change.
        self._made: dict[str, Made] = {}
        self.rows_by_key: dict[str, ProcRow] = {}
        self.last_update = "none"  # "skip" | "cells" | "rebuild": what the last show() did
        self._styles: dict[str, Style] = {}
        # Each cell shown, held once however many rows and ticks show it (see _share).
        self._shared: dict[Cell, ShownCell] = {}
        # Rendered body rows by their cells and state: they survive DataTable's flushes.
        self._fast_rows: dict[tuple[object, ...], tuple[SegmentLines, SegmentLines]] = {}
        # Finished strips of fast rows: id(segments) -> (segments, width, scrollbar segment,
        # strip).
        self._row_strips: dict[int, tuple[SegmentLines, int, Segment | None, Strip]] = {}
        self._frame_style: Style | None = None
        self._frame_width: int | None = None
        self._in_frame = False  # inside render_lines: the style looked up is kept for it
        # The scrollbar's segment for each line, and what they were drawn for.
        self._bar_key: tuple[object, ...] | None = None
        self._bar_lines: list[Segment] = []
        self._frame_bar: list[Segment] | None = None
        self._marks: dict[tuple[Segment, Style], Segment] = {}  # _bar's, on a style

    def configure(self, width: int, *, compact: bool, sort_key: str, reverse: bool) -> None:
        """(Re)build the columns when the width or layout changed; a new sort column or
        direction only relabels the headers (the rows stay: see ``show``)."""
        key = (width, compact, sort_key, reverse, self._owners, self._probes)
        if key == self._columns_key:
            return
        before = self._columns_key
        same_columns = before is not None and (before[:2], before[4:]) == (key[:2], key[4:])
        self._columns_key = key
        if same_columns:
            for col_key, label in self._labels(sort_key, reverse).items():
                self.columns[ColumnKey(col_key)].label = label
            self._update_count += 1  # the header line is cached like the rows
            self.refresh()
            return
        self._compact = compact
        # -1: the vertical scrollbar (``_bar``).
        self._widths = column_widths(max(20, width - 1), compact, self._owners, self._probes)
        self.clear(columns=True)
        self._order = []
        self._cells = {}
        self._made = {}
        for i, (col_key, label) in enumerate(self._labels(sort_key, reverse).items()):
            self.add_column(label, width=self._widths[col_key] + (i > 0), key=col_key)
        self._table_width = sum(c.get_render_width(self) for c in self.ordered_columns)

    def _labels(self, sort_key: str, reverse: bool) -> dict[str, Text]:
        """Column key -> header label; the sort column's name is followed by ▲ (or ▼
        reversed) and drawn in reverse video, so the arrow never reads as the next
        column's ("PID▼USER")."""
        labels: dict[str, Text] = {}
        for i, col in enumerate(visible_columns(self._compact, self._owners, self._probes)):
            w = self._widths[col.key]
            text = fit(col.label, w, col.align)
            gap = "" if i == 0 else " "
            if col.key != sort_key:
                labels[col.key] = Text(gap + text, style="bold")
                continue
            named = col.label.strip() + ("▼" if reverse else "▲")
            # A name as wide as its column takes the gap before it.
            room = w if cell_width(named) <= w or not gap else w + 1
            if room > w:
                gap = ""
            labels[col.key] = Text(gap) + Text(fit(named, room, col.align), style="bold reverse")
        return labels

    @property
    def cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        row = min(max(self.cursor_row, 0), self.row_count - 1)
        return self.ordered_rows[row].key.value

    @property
    def cursor_proc(self) -> ProcRow | None:
        key = self.cursor_key
        return None if key is None else self.rows_by_key.get(key)

    def _row_cells(self, row: ProcRow, tagged: bool, cols: Sequence[Column]) -> RowCells:
        """``cols``: ``visible_columns`` now, resolved once per update, not once per row."""
        cells: list[Cell] = []
        base = "tag" if tagged else "dim" if row.visible is False else ""
        share = self._share
        for col in cols:
            if col.key == "tag":
                cells.append(share(("*" if tagged else " ", "tag" if tagged else "")))
                continue
            w = self._widths[col.key]
            shown = row.cell_text(col.key, compact=self._compact)
            text = " " + fit(shown, w, col.align)
            style = base
            if col.key == "command" and row.kind == "holder":
                style = "holder"
            elif col.key == "command" and row.visible is False:
                style = "dim"
            cells.append(share((text, style)))
        return tuple(cells)

    def _cells_of(
        self, row: ProcRow, tagged: bool, cols: Sequence[Column]
    ) -> tuple[RowCells, Made]:
        """The row's cells, and what they were made from (or kept for)."""
        key = row.key
        made, cells = self._made.get(key), self._cells.get(key)
        if made is not None and made[0] is row and made[1] == tagged and cells is not None:
            return cells, made
        now: Made = (row, tagged, _shown_but_time(row), time_text(row.elapsed))
        # The next tick's row of the same process, alike but for its age: the same cells
        # while its TIME reads the same (idle ticks make no cells). What the last row
        # showed was kept with it: each row's fields and TIME are read once a tick.
        if made is not None and cells is not None and made[1:] == now[1:]:
            return cells, now
        return self._row_cells(row, tagged, cols), now

    def _share(self, cell: Cell) -> Cell:
        """The one held cell equal to ``cell``: many rows show the same GPU, user, type,
        state or n/a, and a row's next cells repeat most of its last, so each was a tuple
        and a string of its own, and a ``ShownCell`` in DataTable's data (issue 32 §5)."""
        held = self._shared.get(cell)
        if held is None:
            held = self._shared[cell] = ShownCell(cell, self._styles)
        return held.cell

    def _text(self, cell: Cell) -> ShownCell:
        held = self._shared.get(cell)
        return ShownCell(cell, self._styles) if held is None else held

    def show(self, rows: Sequence[ProcRow], tagged: Collection[str] = ()) -> str:
        """Show ``rows`` in this order; returns what it did: "skip", "cells", "reorder"
        (the same rows moved, changed cells updated) or "rebuild"."""
        if not self._styles:
            self._styles = rich_styles(self.app.theme_variables)
            self._shared = {}  # each held ShownCell has the old styles
        owners = any(r.owner for r in rows)
        probes = any(r.probe is not None for r in rows)
        if (owners, probes) != (self._owners, self._probes) and self._columns_key is not None:
            # OWNER or PROBE comes or goes: the columns are built again
            self._owners, self._probes = owners, probes
            width, compact, sort_key, reverse = self._columns_key[:4]
            self.configure(width, compact=compact, sort_key=sort_key, reverse=reverse)
        order = [r.key for r in rows]
        cols = visible_columns(self._compact, self._owners, self._probes)
        made: dict[str, Made] = {}
        cells: dict[str, RowCells] = {}
        for r in rows:
            cells[r.key], made[r.key] = self._cells_of(r, r.key in tagged, cols)
        self._made = made
        self.rows_by_key = {r.key: r for r in rows}
        reordered = (
            order != self._order and self.row_count == len(order) and set(order) == set(self._order)
        )
        if reordered:
            self._reorder(order)  # the same rows in another order: cheaper than a rebuild
        if order == self._order and self.row_count == len(order):
            changed = [k for k in order if cells[k] != self._cells.get(k)]
            if changed:
                # Cells in place even when every row changed: a rebuild re-measures them all.
                self._update_cells(changed, cells)
            self.last_update = "reorder" if reordered else "cells" if changed else "skip"
        else:
            self._rebuild(order, cells)
            self.last_update = "rebuild"
        if self.last_update != "skip":
            self._drop_unshown()
        return self.last_update

    def _drop_unshown(self) -> None:
        """Rendered rows whose cells are no longer shown are dropped: a row's cells change
        with its values, so until the room check cleared them the caches held several
        generations of every row drawn (their text, segments and strips; issue 32 §5)."""
        shown = set(self._cells.values())
        self._drop_unshared(shown)
        fast = {k: v for k, v in self._fast_rows.items() if k[0] == "header" or k[0] in shown}
        self._fast_rows = fast
        kept = {id(rendered[1]) for rendered in fast.values()}
        self._row_strips = {k: v for k, v in self._row_strips.items() if k in kept}

    def _drop_unshared(self, shown: set[RowCells]) -> None:
        """Shared cells no row shows any more are let go once they outnumber the shown
        ones (a cell's text changes with its value): what is held follows the rows."""
        n = sum(len(cells) for cells in shown)
        if len(self._shared) <= 2 * n + 64:
            return
        shared = self._shared
        self._shared = {c: held for cells in shown for c in cells if (held := shared.get(c))}

    def _update_cells(self, changed: list[str], cells: dict[str, RowCells]) -> None:
        """What ``update_cell`` does to the data, but repainting only the changed rows
        (``update_cell`` repaints the whole table for each cell)."""
        keys = [
            ColumnKey(c.key) for c in visible_columns(self._compact, self._owners, self._probes)
        ]
        data, held = self._data, self._cells
        for k in changed:
            row = data[RowKey(k)]
            merged: list[Cell] = []
            for col_key, before, after in zip(keys, held[k], cells[k], strict=True):
                if before != after:
                    row[col_key] = self._text(after)
                    before = after
                merged.append(before)
            cells[k] = tuple(merged)
        # Equal cells kept as DataTable holds them: one copy of each cell's text.
        for k in cells.keys() - set(changed):
            cells[k] = held[k]
        self._cells = cells
        self._update_count += 1  # what update_cell does: DataTable's caches start over
        # Every row is one line high; each run of changed rows is one region.
        locations = self._row_locations
        indexes = sorted(i for k in changed if (i := locations.get(RowKey(k))) is not None)
        top = self.header_height if self.show_header else 0
        width = max(self.size.width, self._table_width)
        window = self.window_region
        start = prev = -2
        for i in (*indexes, -2):  # -2: a sentinel that ends the last run
            if i != prev + 1:
                if start >= 0:
                    region = Region(0, top + start, width, prev - start + 1)
                    if window.overlaps(region):
                        self.refresh(region.translate(-self.scroll_offset))
                start = i
            prev = i

    def _reorder(self, order: list[str]) -> None:
        """``DataTable.sort`` by our order; the cursor stays on the same process."""
        cursor_key = self.cursor_key
        self._row_locations = TwoWayDict({RowKey(k): i for i, k in enumerate(order)})
        self._order = order
        self._update_count += 1  # DataTable's row caches start over
        self.refresh()
        if cursor_key is not None:
            self.move_cursor(row=order.index(cursor_key), animate=False)

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

    def render_lines(self, crop: Region) -> list[Strip]:
        # ``rich_style`` walks the DOM: once per frame, not once per line, and not at all
        # in a frame that draws none of the table's lines (Textual renders every widget
        # beside a changed one from its cache).
        self._in_frame = True
        self._frame_bar = self._bar()
        try:
            return super().render_lines(crop)
        finally:
            self._in_frame = False
            self._frame_style = None
            self._frame_width = None
            self._frame_bar = None

    def _bar(self) -> list[Segment] | None:
        """The vertical scrollbar, one segment per line, as Textual's ScrollBar draws it
        when the mouse is not on it; None while every row fits."""
        height, virtual = self.size.height, self.virtual_size.height
        if height <= 0 or virtual <= height:
            return None
        styles = self.styles
        back, color = styles.scrollbar_background, styles.scrollbar_color
        key = (height, virtual, self.scroll_y, back, color)
        if key != self._bar_key:
            if back.a < 1:
                back = self.background_colors[0] + back
            color = back + color
            bar = ScrollBarRender.render_bar(
                size=height,
                virtual_size=virtual,
                window_size=height,
                position=self.scroll_y,
                thickness=1,
                vertical=True,
                # Rich colours, as ScrollBarRender is given them by Textual's ScrollBar
                back_color=back.rich_color,
                bar_color=color.rich_color,
            )
            # Without the ScrollBar's mouse actions: a click there is a click on the table.
            self._marks = {}
            self._bar_lines = [
                Segment(seg.text, None if seg.style is None else seg.style.clear_meta_and_links())
                for seg in bar.segments
            ]
            self._bar_key = key
        return self._bar_lines

    def _mark(self, y: int, base_style: Style | None) -> Segment | None:
        """Line ``y``'s scrollbar segment on the table's style, as Textual draws its
        ScrollBar on the table's (None: no scrollbar)."""
        bar = self._frame_bar if self._in_frame else self._bar()
        if bar is None or not 0 <= y < len(bar):
            return None
        seg = bar[y]
        base = self.rich_style if base_style is None else base_style
        key = (seg, base)
        held = self._marks.get(key)
        if held is None:
            held = self._marks[key] = Segment(seg.text, base + seg.style)
        return held

    @staticmethod
    def _marked(
        segments: list[Segment], mark: Segment, width: int, style: Style | None = None
    ) -> Strip:
        """``segments`` as a line ``width`` cells wide whose last cell is the scrollbar's
        ``mark`` (``style``: of the padding, where the line is shorter)."""
        return Strip([*Segment.adjust_line_length(segments, width - 1, style), mark], width)

    def _with_mark(self, strip: Strip, mark: Segment | None, width: int) -> Strip:
        """``strip`` with its last cell given to the scrollbar."""
        return strip if mark is None else self._marked(list(strip), mark, width)

    def _base_style(self) -> Style | None:
        """The table's Rich style, looked up once in a frame (None: outside a frame)."""
        if not self._in_frame:
            return None
        if self._frame_style is None:
            self._frame_style = self.rich_style
            self._frame_width = self.size.width  # a property that computes regions
        return self._frame_style

    def _width_now(self) -> int:
        width = self._frame_width
        return self.size.width if width is None else width

    def render_line(self, y: int) -> Strip:
        """DataTable.render_line with the frame's style (see ``render_lines``)."""
        base_style = self._base_style()
        mark = self._mark(y, base_style)
        if base_style is None or self.fixed_rows:
            return self._with_mark(super().render_line(y), mark, self._width_now())
        scroll_x, scroll_y = self.scroll_offset
        if y >= (self.header_height if self.show_header else 0):
            y += scroll_y
        return self._render_line(y, scroll_x, scroll_x + self._width_now(), base_style, mark)

    def _render_line(
        self, y: int, x1: int, x2: int, base_style: Style, mark: Segment | None = None
    ) -> Strip:
        """A fast-path row as one strip, kept as long as its segments and its scrollbar
        segment are; scrolled sideways or with fixed columns: the DataTable way."""
        width = self._width_now()
        if x1 != 0 or x2 != width or self.fixed_columns:
            return self._with_mark(super()._render_line(y, x1, x2, base_style), mark, width)
        try:
            row_key, line_no = self._get_offsets(y)
        except LookupError:
            return self._with_mark(Strip.blank(width, base_style), mark, width)
        fixed, scrollable = self._render_line_in_row(
            row_key,
            line_no,
            base_style,
            cursor_location=self.cursor_coordinate,
            hover_location=self.hover_coordinate,
        )
        if fixed or len(scrollable) != 1:
            return self._with_mark(super()._render_line(y, x1, x2, base_style), mark, width)
        key = id(scrollable)
        hit = self._row_strips.get(key)
        if hit is not None and hit[0] is scrollable and hit[1] == width and hit[2] is mark:
            return hit[3]
        if mark is None:
            strip = Strip(scrollable[0]).adjust_cell_length(width, base_style)
        else:
            strip = self._marked(scrollable[0], mark, width, base_style)
        if len(self._row_strips) > 4 * len(self._cells) + 64:
            self._row_strips.clear()
        self._row_strips[key] = (scrollable, width, mark, strip)
        return strip

    def _render_line_in_row(
        self,
        row_key: RowKey,
        line_no: int,
        base_style: Style,
        cursor_location: Coordinate,
        hover_location: Coordinate,
    ) -> tuple[SegmentLines, SegmentLines]:
        """One body row as a few segments, cached by its cells: as DataTable draws it, but
        same-style cells merge and clicks name column 0; anything else goes DataTable's way."""

        def datatable() -> tuple[SegmentLines, SegmentLines]:
            return super(ProcessTable, self)._render_line_in_row(
                row_key, line_no, base_style, cursor_location, hover_location
            )

        if (
            line_no != 0
            or self.cursor_type != "row"
            or self.fixed_rows
            or self.fixed_columns
            or self.zebra_stripes
            or (self.show_row_labels and self._labelled_row_exists)
        ):
            return datatable()
        if row_key is self._header_row_key:
            # The header changes only with the columns: DataTable's rendering, cached.
            header_key = (
                "header",
                self._columns_key,
                self._width_now(),
                base_style,
                hover_location.row == -1,
                self.show_cursor,
                self._show_hover_cursor,
                self._pseudo_class_state,
            )
            header = self._fast_rows.get(header_key)
            if header is None:
                header = datatable()
                self._fast_rows[header_key] = header
            return header
        cells = None if row_key.value is None else self._cells.get(row_key.value)
        row_index = self._row_locations.get(row_key)
        if cells is None or row_index is None:
            return datatable()
        cursor = cursor_location.row == row_index
        hover = hover_location.row == row_index
        show_cursor = self.show_cursor
        show_hover = self._show_hover_cursor
        width = self._width_now()
        key = (
            cells,
            row_index,
            width,
            base_style,
            cursor,
            hover,
            show_cursor,
            show_hover,
            self._pseudo_class_state,
        )
        cached = self._fast_rows.get(key)
        if cached is not None:
            return cached
        table_width = self._table_width
        if sum(cell_len(text) for text, _ in cells) != table_width:
            return datatable()
        component, post = self._get_styles_to_render_cell(
            False,
            False,
            False,
            hover,
            cursor,
            show_cursor,
            show_hover,
            self.cursor_foreground_priority == "css",
            self.cursor_background_priority == "css",
        )
        pre = base_style + Style.from_meta({"row": row_index, "column": 0}) + component
        segments: list[Segment] = []
        run: list[str] = []
        run_style: str | None = None
        for text, style_key in (*cells, ("", "\0")):  # a sentinel flushes the last run
            if style_key != run_style and run:
                assert run_style is not None
                cell_style = self._styles.get(run_style, Style())
                segments.append(Segment("".join(run), pre + cell_style + post))
                run = []
            run_style = style_key
            run.append(text)
        extend, _ = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, show_cursor, show_hover, False, False
        )
        extend = (
            base_style
            + extend
            + Style.from_meta({"row": row_index, "column": 0, "out_of_bounds": True})
        )
        segments.append(Segment(" " * max(0, width - table_width), extend))
        rendered: tuple[SegmentLines, SegmentLines] = ([], [segments])
        if len(self._fast_rows) > 4 * len(self._cells) + 64:
            self._fast_rows.clear()
        self._fast_rows[key] = rendered
        return rendered

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._fast_rows.clear()
        self._row_strips.clear()

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Fixed widths and one-line rows: only the virtual size, not DataTable's
        measuring of every new cell."""
        width = sum(column.get_render_width(self) for column in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width, self._total_row_height + header)

    def restyle(self) -> None:
        """The theme changed: rebuild the cell styles on the next refresh."""
        self._styles = {}
        self._fast_rows.clear()
        self._row_strips.clear()
        self._order = []
