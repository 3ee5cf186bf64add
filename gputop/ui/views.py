"""Pure views (a snapshot in, rows and styled text parts out, no Textual): the names of
the per-panel view modules that the app, the screens and the tests use, in one place."""

from __future__ import annotations

from gputop.ui.gpu_view import JUDGING_MARK as JUDGING_MARK
from gputop.ui.gpu_view import LONG_VERDICT_WIDTH as LONG_VERDICT_WIDTH
from gputop.ui.gpu_view import MEM_IDLE_MARKER as MEM_IDLE_MARKER
from gputop.ui.gpu_view import MIN_WIDE_HISTORY as MIN_WIDE_HISTORY
from gputop.ui.gpu_view import POWER_CAP_WORD as POWER_CAP_WORD
from gputop.ui.gpu_view import SEVERITY_ROLES as SEVERITY_ROLES
from gputop.ui.gpu_view import VERDICT_WIDTH as VERDICT_WIDTH
from gputop.ui.gpu_view import VERDICT_WORDS as VERDICT_WORDS
from gputop.ui.gpu_view import VerdictMark as VerdictMark
from gputop.ui.gpu_view import bar_width_for as bar_width_for
from gputop.ui.gpu_view import gpu_view as gpu_view
from gputop.ui.gpu_view import is_mem_idle as is_mem_idle
from gputop.ui.gpu_view import pcie_downgrade as pcie_downgrade
from gputop.ui.gpu_view import throttle_words as throttle_words
from gputop.ui.gpu_view import verdict_legend as verdict_legend
from gputop.ui.gpu_view import verdict_mark as verdict_mark
from gputop.ui.gpu_view import verdict_parts as verdict_parts
from gputop.ui.gpu_view import verdict_width_for as verdict_width_for
from gputop.ui.header_view import header_parts as header_parts
from gputop.ui.header_view import mode_text as mode_text
from gputop.ui.host_view import core_lines as core_lines
from gputop.ui.host_view import host_lines as host_lines
from gputop.ui.parts import INTERVAL_STEPS as INTERVAL_STEPS
from gputop.ui.parts import Part as Part
from gputop.ui.parts import Parts as Parts
from gputop.ui.parts import level as level
from gputop.ui.parts import memory_bar as memory_bar
from gputop.ui.parts import plain as plain
from gputop.ui.parts import safe as safe
from gputop.ui.process_view import MIN_COMMAND_WIDTH as MIN_COMMAND_WIDTH
from gputop.ui.process_view import SORT_KEYS as SORT_KEYS
from gputop.ui.process_view import column_widths as column_widths
from gputop.ui.process_view import matches as matches
from gputop.ui.process_view import process_notes as process_notes
from gputop.ui.process_view import process_rows as process_rows
from gputop.ui.process_view import sort_rows as sort_rows
from gputop.ui.process_view import table_rows as table_rows
from gputop.ui.process_view import visible_columns as visible_columns
