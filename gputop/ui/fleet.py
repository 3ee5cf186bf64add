"""``gputop fleet``: every host's GPUs and verdicts on one screen; Enter opens one host.

Hosts are read on their own threads, which only post a replaceable :class:`FleetChanged`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input

from gputop.analysis.thresholds import Thresholds
from gputop.model import Snapshot
from gputop.sources.remote import LineError, summarize, to_snapshot
from gputop.sources.streams import HostView, HostViews, status
from gputop.ui.app import GpuTopApp, run_in_terminal
from gputop.ui.keybar import KeyBar
from gputop.ui.lines import HeaderLine, PartsLines
from gputop.views import fleet_views as fv
from gputop.views.gpu_view import VerdictMark, verdict_legend
from gputop.views.parts import Parts, safe

#: Snapshots of the open host kept for its dashboard (its histories and verdicts).
HOST_HISTORY = 900


def source_state(streams: HostViews) -> tuple[str | None, str | None]:
    """(why the source's last answer was refused, what it skipped) where the source keeps
    them (Prometheus does; each ssh host's trouble is on its own row)."""
    error, note = getattr(streams, "error", None), getattr(streams, "note", None)
    return (
        error if isinstance(error, str) else None,
        note if isinstance(note, str) else None,
    )


class FleetChanged(Message):
    """A host's view changed (posted from the reader thread; a backlog collapses)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetChanged)


class FleetScreen(Screen[None]):
    """One row per host, a summary line, sort and filter."""

    AUTO_FOCUS = None
    DEFAULT_CSS = """
    FleetScreen #fleet-summary, FleetScreen #fleet-columns { height: 1; }
    FleetScreen #fleet-source { height: auto; }
    FleetScreen #fleet-scroll { height: 1fr; scrollbar-size-vertical: 0; }
    FleetScreen #fleet-filter {
        display: none; height: 1; border: none; padding: 0 1; background: $boost;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open host", key_display="Enter"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("s", "sort", "Sort", key_display="s"),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("R", "retry", "Retry now", key_display="R"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
    ]

    def __init__(self, fleet: FleetApp) -> None:
        super().__init__(id="fleet")
        self.fleet = fleet
        self.sort_key = "host"
        self.reverse = False
        self.text_filter = ""
        self.cursor: str | None = None  # the selected host's name
        self.shown: list[fv.Row] = []
        self.frames = 0

    def compose(self) -> ComposeResult:
        yield HeaderLine(id="fleet-header")
        yield PartsLines(id="fleet-summary")
        yield PartsLines(id="fleet-source")  # the source's own trouble (none: no line)
        yield PartsLines(id="fleet-columns")
        with VerticalScroll(id="fleet-scroll"):
            yield PartsLines(id="fleet-hosts")  # every shown host's lines
        yield Input(placeholder="filter: host, user, pod, job (Esc clears)", id="fleet-filter")
        yield KeyBar()

    def on_resize(self, _event: events.Resize) -> None:
        self.redraw()  # also the first draw: a screen is laid out (and resized) once mounted

    @property
    def filter_input(self) -> Input:
        return self.query_one("#fleet-filter", Input)

    def redraw(self) -> None:
        """Draw every host from the newest views (only changed lines repaint)."""
        if not self.is_mounted:
            return
        app = self.fleet
        width = max(20, self.size.width)
        every = fv.rows(app.streams.views(), app.clock(), app.interval)
        matching = [r for r in every if fv.matches(r, self.text_filter)]
        self.shown = shown = fv.sort_rows(matching, self.sort_key, self.reverse)
        names = [r.name for r in shown]
        if self.cursor not in names:
            self.cursor = names[0] if names else None
        lines: list[Parts] = []
        at_cursor: Region | None = None  # the selected host's lines
        for r in shown:
            block = fv.host_lines(r, width, selected=r.name == self.cursor)
            if r.name == self.cursor:
                at_cursor = Region(0, len(lines), 1, len(block))
            lines.extend(block)
        error, note = source_state(app.streams)
        if not shown:
            lines = [fv.no_hosts_line(self.text_filter, error)]
        with app.batch_update():
            self.query_one("#fleet-header", HeaderLine).set_lines([self._header(len(every))])
            self.query_one("#fleet-summary", PartsLines).set_lines([fv.summary_parts(every)])
            source = fv.source_lines(app.via, error, note)
            self.query_one("#fleet-source", PartsLines).set_lines(source)
            self.query_one("#fleet-columns", PartsLines).set_lines([fv.columns_header(width)])
            self.query_one("#fleet-hosts", PartsLines).set_lines(lines)
        if at_cursor is not None:
            scroll = self.query_one("#fleet-scroll", VerticalScroll)
            scroll.scroll_to_region(at_cursor, animate=False, immediate=True)
        self.frames += 1

    def _header(self, hosts: int) -> Parts:
        app = self.fleet
        parts: list[tuple[str, str]] = [
            ("gputop fleet ", "title"),
            (f"{hosts} hosts", ""),
            ("  every ", "label"),
            (f"{app.interval:g}s", ""),
            ("  via ", "label"),
            (app.via, ""),
            ("  sort ", "label"),
            (fv.SORT_LABELS[self.sort_key] + (" ↑" if self.reverse else ""), "accent"),
        ]
        if self.text_filter:
            parts += [("  filter ", "label"), (safe(self.text_filter, 64), "accent")]
        return tuple(parts)

    def action_move(self, step: int) -> None:
        names = [r.name for r in self.shown]
        if not names:
            return
        at = names.index(self.cursor) if self.cursor in names else 0
        self.cursor = names[max(0, min(len(names) - 1, at + step))]
        self.redraw()

    def action_page(self, step: int) -> None:
        rows_per_page = max(1, self.query_one("#fleet-scroll").size.height // 2)
        self.action_move(step * rows_per_page)

    def action_edge(self, end: int) -> None:
        self.action_move(len(self.shown) if end else -len(self.shown))  # clamped: last, first

    def action_sort(self) -> None:
        keys = list(fv.SORT_LABELS)
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.redraw()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.redraw()

    def action_filter(self) -> None:
        box = self.filter_input
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:  # the screen's one Input
        self.text_filter = event.value
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.display = False
        self.set_focus(None)

    def action_clear_filter(self) -> None:
        box = self.filter_input
        box.value = ""
        box.display = False
        self.text_filter = ""
        self.set_focus(None)
        self.redraw()

    def action_open(self) -> None:
        if self.cursor is None:
            self.notify("no host selected", severity="warning", timeout=3)
            return
        self.fleet.open_host(self.cursor)

    def action_retry(self) -> None:
        self.fleet.streams.retry_now()
        self.notify("retrying every host that is not connected", timeout=3)

    def action_help(self) -> None:
        from gputop.ui.screens.help import HelpScreen

        keys = [
            ("Up/Down, PgUp/PgDn", "choose a host"),
            ("Enter", "open the host's full dashboard (read-only); Esc comes back"),
            ("/", "filter by host, user, pod or Slurm job (Esc clears)"),
            ("s", "sort: host, worst verdict, idle memory; r reverses"),
            ("R", "retry unreachable hosts now"),
            ("q", "quit (every ssh connection is closed)"),
        ]
        legend = [*fv.LEGEND, *verdict_legend()]
        self.app.push_screen(HelpScreen(keys, legend))


class FleetApp(GpuTopApp):
    """The dashboard, read-only, with the fleet screen on top."""

    TITLE = "gputop fleet"
    KILL_REFUSED = (
        "read-only: processes on a remote host are never signalled from the fleet "
        "(ssh there and use gputop)"
    )

    def __init__(
        self,
        streams: HostViews,
        *,
        via: str = "ssh",
        thresholds: Thresholds | None = None,
        theme: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(None, readonly=True, thresholds=thresholds, theme=theme)
        self.streams = streams
        self.via = via
        self.clock = clock
        self._interval = streams.interval  # GpuTopApp.interval (fixed: see action_interval)
        self.fleet_screen = FleetScreen(self)
        self.host: str | None = None  # the host open in the dashboard
        self._host_seq = 0
        self._host_history: deque[Snapshot] = deque(maxlen=HOST_HISTORY)

    def on_mount(self) -> None:
        super().on_mount()
        self.install_screen(self.fleet_screen, name="fleet")
        self.push_screen("fleet")
        self.streams.on_change = self._from_streams
        self.streams.start()
        self.set_interval(1.0, self.refresh_fleet, name="fleet-ages")

    def _from_streams(self) -> None:
        """Reader thread: only post; the UI thread reads the views."""
        self.post_message(FleetChanged())

    def on_fleet_changed(self, _message: FleetChanged) -> None:
        self.refresh_fleet()

    def refresh_fleet(self) -> None:
        """Draw the fleet (when it is on screen) and feed the open host's dashboard."""
        if self.closing:  # shutdown began (any path): the widgets are going or gone
            return
        if self.screen is self.fleet_screen:
            self.fleet_screen.redraw()
        if self.host is not None:
            self._feed_host()

    def open_host(self, name: str) -> None:
        """Show ``name``'s full dashboard, fed by its stream."""
        self.host = name
        self._host_seq = 0
        self._host_history.clear()
        self.forget_view()  # the previous host's (the feed judges this one's afresh)
        self.verdicts = {}
        if self.screen is self.fleet_screen:
            self.pop_screen()
        self._feed_host()
        if self.snapshot is None:
            self._render_header()
        history = getattr(self.streams, "history", None)  # a source that keeps one
        if callable(history):
            self.run_worker(lambda: self._fetch_history(name, history), thread=True, exclusive=True)

    def _fetch_history(self, name: str, history: Callable[[str], list[dict[str, Any]]]) -> None:
        """Worker thread: the host's recent minutes; a failure is said, the live view goes on."""
        try:
            snaps = [to_snapshot(d) for d in history(name)]
        except Exception as exc:  # an answer's problem: said, never the end of the app
            said = str(exc) if isinstance(exc, LineError | ValueError) else type(exc).__name__
            self.call_from_thread(self.notify, f"no history: {safe(said, 200)}", severity="warning")
            return
        self.call_from_thread(self._adopt_history, name, snaps)

    def _adopt_history(self, name: str, snaps: list[Snapshot]) -> None:
        if name != self.host or not snaps:
            return
        newest = self._host_history[-1].time if self._host_history else float("inf")
        older = [s for s in snaps if s.time < newest]
        self._host_history = deque([*older, *self._host_history], maxlen=HOST_HISTORY)
        if self.snapshot is not None:
            self.apply_snapshot(self.snapshot, tuple(self._host_history))

    def _feed_host(self) -> None:
        if self.host is None:
            return
        view = self.streams.view(self.host)
        self._host_state(view)
        if view.seq == self._host_seq or view.data is None:
            return
        self._host_seq = view.seq
        try:
            snap = to_snapshot(view.data)
            report = summarize(view.data)
        except LineError as exc:
            self.sample_error = str(exc)
            self._render_header()
            return
        if self._host_history and snap.time <= self._host_history[-1].time:
            self._host_history.clear()  # the remote clock went back (a new stream)
        self._host_history.append(snap)
        # The GPU lines show the host's own verdicts (judged there, on its whole history).
        marks: dict[int, VerdictMark] = {}
        for c in report.gpus:
            if c.verdict is not None:
                word, role = fv.word(c.verdict)
                marks[c.index] = VerdictMark(c.verdict.kind, word, c.verdict.label, role)
        self.verdicts = marks
        self.apply_snapshot(snap, tuple(self._host_history))

    def _host_state(self, view: HostView) -> None:
        state, shown, detail = status(view, self.clock(), self.interval)
        stale = state != "live"
        error = None if state in ("live", "stale") else f"{shown}: {detail or ''}"
        if stale != self.stale or error != self.sample_error:
            self.stale = stale
            self.sample_error = error
            if self.screen_stack:
                self._render_header()

    def _render_header(self) -> None:
        super()._render_header()
        if self.host is None or not self.screen_stack:
            return
        head = self.header
        name = safe(self.host, 64)
        lead: Parts = (("fleet › ", "dim"), (name, "accent"), (" (Esc) ", "dim"))
        rest = head.lines[0] if head.lines else ()
        if rest and rest[0][0].strip() == "gputop":
            rest = rest[1:]  # the program's name: "fleet" already says it
        head.set_lines([lead + rest])

    def action_clear_filter(self) -> None:
        """Esc: clears the filter first; without one, back to the fleet."""
        if self.filter_input.display or self.text_filter:
            super().action_clear_filter()
            return
        self.back_to_fleet()

    def back_to_fleet(self) -> None:
        self.host = None
        self.stale = False
        self.sample_error = None
        if self.screen is not self.fleet_screen:
            self.push_screen("fleet")
        self.fleet_screen.redraw()

    def action_interval(self, step: int) -> None:
        self.notify("the fleet's interval is set with --interval", timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.screen_stack and self.screen is self.fleet_screen and action == "pause":
            return False  # the fleet never pauses its streams; the footer leaves it out
        if action == "tag" and self.host is not None:
            return True  # harmless; the kill key is off (KILL_REFUSED) and says why
        return super().check_action(action, parameters)


def run_fleet(
    streams: HostViews,
    *,
    via: str = "ssh",
    thresholds: Thresholds | None = None,
    theme: str | None = None,
    watchdog: bool = False,
) -> int:
    """Run the fleet screen until the user quits; every stream is closed after it.
    ``watchdog``: as for :func:`gputop.ui.app.run_app` (the CLI sets it)."""
    app = FleetApp(streams, via=via, thresholds=thresholds, theme=theme)

    def cleanup() -> None:
        streams.on_change = None
        streams.close()

    # A hang on the way out: the ssh processes are ended before the watchdog ends us.
    return run_in_terminal(
        app, watchdog=watchdog, on_timeout=lambda: streams.close(timeout=0.5), cleanup=cleanup
    )
