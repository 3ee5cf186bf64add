"""Pure views (a snapshot in, rows and styled text parts out, no Textual): the names of
the per-panel view modules that the app and the screens use, in one place."""

from __future__ import annotations

from gputop.ui.gpu_view import verdict_mark as verdict_mark
from gputop.ui.header_view import header_parts as header_parts
from gputop.ui.host_view import host_lines as host_lines
from gputop.ui.parts import Parts as Parts
from gputop.ui.process_view import SORT_KEYS as SORT_KEYS
from gputop.ui.process_view import ProcRow as ProcRow
from gputop.ui.process_view import process_notes as process_notes
from gputop.ui.process_view import process_rows as process_rows
from gputop.ui.process_view import table_rows as table_rows
from gputop.ui.process_view import visible_columns as visible_columns
