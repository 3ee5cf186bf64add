"""The live dashboard: wiring, keys, and applying frames (:meth:`GpuTopApp.apply_frame`)."""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import textual.keys
from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from gputop import codecache, gcpolicy
from gputop.analysis.thresholds import DEFAULT, Thresholds
from gputop.keys import KEYS as KEYS  # the table the bindings, footer and help derive from
from gputop.keys import Key as Key
from gputop.keys import UnicodeNames, remapped
from gputop.model import PROCESSES_PENDING, Snapshot, Verdict, processes_pending
from gputop.pipeline import Feed, Frame, Stream
from gputop.sources.base import no_signal_reason
from gputop.ui.gpu_panel import GpuPanel
from gputop.ui.lines import HeaderLine, PartsLines
from gputop.ui.main_area import MainArea, NoMatch, ProcessNotes
from gputop.ui.process_table import ProcessTable
from gputop.ui.terminal import (
    QUIT_GRACE_S,
    Ending,
    GpuTopDriver,
    install_signal_handlers,
    owning_terminal,
)
from gputop.views import process_view
from gputop.views.gpu_view import VerdictMark, judging_mark, verdict_legend, verdict_mark
from gputop.views.header_view import header_parts
from gputop.views.host_view import host_lines
from gputop.views.parts import (
    COMPACT_HEIGHT,
    COMPACT_WIDTH,
    INTERVAL_STEPS,
    MIN_HEIGHT,
    MIN_WIDTH,
    Parts,
    gpu_ranges,
)

W = TypeVar("W", bound=Widget)

if TYPE_CHECKING:
    from gputop.diagnosis import Diagnosis
    from gputop.ui.keybar import KeyBar

#: Actions off while another screen is on top (the digits' "gpu" has no Key).
MAIN_ONLY_ACTIONS = frozenset({"gpu", *(k.action for k in KEYS if k.main)})


#: What the empty filter box says.
FILTER_PLACEHOLDER = "filter: command, user or pid (Esc clears)"

#: How long a toast stays (Textual's default is 5 s), and the most over a screen of charts.
TOAST_SECONDS = 3.0

#: From this width the footer also offers the command palette (ctrl+p).
FOOTER_PALETTE_WIDTH = 120

#: The digit keys' line in `?`, for the live dashboard and the replay alike.
GPU_DIGITS_HELP = ("0-9", "show only that GPU (a: all GPUs again)")

_HELP_EXTRA: tuple[tuple[str, str], ...] = (
    ("Up/Down, PgUp/PgDn", "move in the process table; click a row to select it"),
    ("click a column header", "sort by it; again to reverse"),
    ("ctrl+p", "command palette (themes, keys, screenshot)"),
)


def key_bindings(
    keys: Iterable[Key], gpu_0: tuple[str, str] = ("One GPU", "0-9")
) -> list[BindingType]:
    """``keys``, then the digits (hidden: `?` lists "0-9"; the footer must fit 80 columns);
    ``gpu_0``: the 0 key's description and display."""
    out: list[BindingType] = [
        Binding(
            k.keys,
            k.action,
            k.description,
            show=k.show,
            key_display=k.display,
            priority=k.priority,
            id=f"gputop.{k.id}",
        )
        for k in keys
    ]
    # Where no process can be signalled the footer leaves the kill key out; pressed, it
    # still says why (this binding answers when "kill" is off).
    out += [Binding(k.keys, "kill_refused", show=False) for k in keys if k.action == "kill"]
    for n in range(10):
        what, display = gpu_0 if n == 0 else (f"Show GPU {n}", str(n))
        out.append(Binding(str(n), f"gpu({n})", what, show=False, key_display=display))
    return out


# Textual's key names answered without Unicode's name database (a MiB kept resident);
# textual.keys calls the two functions through its module global.
setattr(textual.keys, "unicodedata", UnicodeNames)  # noqa: B010 (mypy: not a module)


def _bindings() -> list[BindingType]:
    return [
        *key_bindings(KEYS),
        # Ctrl-C quits with SIGINT's status; priority: also from the filter box and dialogs.
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True),
        # Ctrl-Z suspends: Textual reads it as a key (the tty's ISIG is off).
        Binding("ctrl+z", "suspend_process", "Suspend", show=False, priority=True),
    ]


class FrameArrived(Message):
    """A frame judged on the feed's thread; only the newest one waiting matters."""

    def __init__(self, frame: Frame) -> None:
        super().__init__()
        self.frame = frame

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FrameArrived)


#: Snapshots the dashboard's charts may show (its feed's history).
HISTORY = 3600


class GpuTopApp(App[int]):
    """gputop's main screen."""

    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    AUTO_FOCUS = "#procs"
    BINDINGS: ClassVar[list[BindingType]] = _bindings()
    #: Why no process is ever signalled from this app (said by the kill key); None: it may.
    KILL_REFUSED: ClassVar[str | None] = None
    #: Whether a cursor moves through recorded time (a replay): the detail charts then
    #: also show what comes after it; live, they end now ("seconds ago").
    REPLAY: ClassVar[bool] = False

    def __init__(
        self,
        sampler: Stream | None = None,
        *,
        snapshots: Sequence[Snapshot] = (),
        gpu_filter: Collection[int] | None = None,
        readonly: bool = False,
        thresholds: Thresholds | None = None,
        window: float | None = None,
        theme: str | None = None,
        keys: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.keys = remapped(keys or {})  # [keys] of the config file on the defaults
        self.set_keymap({f"gputop.{name}": key for name, key in (keys or {}).items()})
        self._theme_name = theme  # applied on mount: an unknown name is said, not fatal
        self.sampler = sampler
        self.readonly = readonly
        # Why no signal is offered at all (demo, replay, snapshots); None: live pids.
        self.no_signal_reason = no_signal_reason(sampler.source if sampler is not None else None)
        # GPU index -> a fixed mark for the verdict slot (a fleet host's); None: the diagnosis'.
        self.verdicts: Mapping[int, VerdictMark] | None = None
        base = thresholds if thresholds is not None else DEFAULT
        if window is not None:
            base = replace(base, window_seconds=float(window))
            base.check()
        self.thresholds = base
        keep = max(HISTORY, len(snapshots))
        self.feed = Feed(base, history=keep)  # judges each snapshot once, keeps the history
        self.frame: Frame | None = None  # the newest frame taken
        self._diagnosis: Diagnosis | None = None
        # The GPU lines' verdict marks of self._diagnosis.
        self._marks: Mapping[int, VerdictMark] = {}
        self.verdict_error: str | None = None  # the analysis failed on the newest snapshot
        # (time, GPU index -> verdict kind) per diagnosis: the detail screen's history.
        self.verdict_log: deque[tuple[float, dict[int, str]]] = deque(maxlen=keep)
        self.verdict_seconds: list[float] = []  # what each diagnosis cost
        # run_app sets it: SIGTERM / SIGHUP / SIGINT then end the app the normal way.
        self.handle_signals = False
        self.ending = Ending()  # exit() was called, a signal came, the terminal went
        self._restore_signals: Callable[[], None] | None = None
        self._initial = tuple(snapshots)
        # --gpus as the CLI resolved it (indices); None: every GPU.
        self._base_gpus = None if gpu_filter is None else frozenset(gpu_filter)
        self.shown_gpus = self._base_gpus
        self.sort_key = "gpu"
        self.sort_reverse = False
        self.tagged: set[str] = set()
        self.paused = False
        self.stale = False
        self.sample_error: str | None = None  # the sampler's last tick failed: why
        # --record: why recording stopped (None: recording, or not asked), asked each second.
        self.record_status: Callable[[], str | None] | None = None
        self.record_error: str | None = None
        self.compact = False
        self.too_small = False
        self._interval = sampler.interval if sampler is not None else 1.0
        self.snapshot: Snapshot | None = None  # the newest frame's snapshot and history
        self.history: tuple[Snapshot, ...] = ()
        self.pending = False  # a snapshot arrived but was not drawn
        self.frames = 0  # snapshots drawn
        self._size: Size | None = None
        # The process rows of one snapshot, made once for it: a sort, a filter or a tag
        # orders the same rows, and the table reuses their cells (ProcessTable.show).
        self._rows_of: Snapshot | None = None
        self._rows: list[process_view.ProcRow] = []
        self._parts: dict[str, Widget] = {}  # selector -> a widget of the main screen

    def compose(self) -> ComposeResult:
        with MainArea(id="main"):
            yield HeaderLine(id="header")
            yield GpuPanel(id="gpus")
            yield PartsLines(id="host")  # host_lines: a line repaints only when it changes
            yield ProcessNotes(id="notes")  # why the process table may be incomplete
            # Here comes the filter box (filter_input), mounted when first asked for.
            yield NoMatch(id="no-match")  # the filter or GPU choice hides every process
            yield ProcessTable(id="procs")
        yield Static(id="too-small")
        # The footer (KeyBar) comes right after the first frame's paint
        # (_mount_after_first_frame): the GPU lines do not need it. The filter box
        # comes when first asked for: most runs never filter, and a hidden box is a widget
        # with its styles, caches and message queue kept for the whole run.

    def _part(self, selector: str, kind: type[W]) -> W:
        """A widget of the main screen, looked up once: the dashboard reads several of them
        each tick, and a query searches the DOM each time (again once it left the DOM)."""
        found = self._parts.get(selector)
        if found is None or found.parent is None:
            found = self._parts[selector] = self.query_one(selector, kind)
        return cast(W, found)

    @property
    def header(self) -> HeaderLine:
        return self._part("#header", HeaderLine)

    @property
    def gpu_panel(self) -> GpuPanel:
        return self._part("#gpus", GpuPanel)

    @property
    def host_panel(self) -> PartsLines:
        return self._part("#host", PartsLines)

    @property
    def table(self) -> ProcessTable:
        return self._part("#procs", ProcessTable)

    def _filter_box(self, *, mount: bool) -> Input | None:
        """The main screen's filter box, looked up once (as ``_part``); it is mounted when
        first asked for: until then None, or with ``mount`` made and mounted now."""
        box = self._parts.get("#filter")
        if box is not None and box.parent is not None:
            return cast(Input, box)
        if not mount or not self.screen_stack:
            return None  # only this mounts it (a tick asks, and must not query the DOM)
        main = self._main_screen
        found = main.query_one_optional("#filter", Input)
        if found is None:
            found = Input(placeholder=FILTER_PLACEHOLDER, id="filter")
            main.query_one("#main").mount(found, before="#no-match")
        self._parts["#filter"] = found
        return found

    @property
    def filter_input(self) -> Input:
        """The filter box, mounted now if it is not yet."""
        box = self._filter_box(mount=True)
        if box is None:
            raise LookupError("the filter box is asked for before the app is composed")
        return box

    @property
    def text_filter(self) -> str:
        """The filter in effect: the main screen's filter box holds it (no copy here),
        read from there whichever screen is on top."""
        box = self._filter_box(mount=False)
        return "" if box is None else box.value  # not mounted yet: no filter

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification is plain text, whoever asks (a screen's notify comes here):
        it may quote what a user typed or a host's names, and those are never markup (a
        ``[/]`` would raise, a ``[@click=...]`` would be a link)."""
        # A toast lies over the screen's lower right: over charts on the detail screens.
        # Short by default, and never longer than that over another screen than the main.
        seconds = TOAST_SECONDS if timeout is None else timeout
        if self.screen_stack and self.screen is not self._main_screen:
            seconds = min(seconds, TOAST_SECONDS)
        super().notify(message, title=title, severity=severity, timeout=seconds, markup=False)

    @property
    def interval(self) -> float:
        return self.sampler.interval if self.sampler is not None else self._interval

    def on_mount(self) -> None:
        if self.handle_signals:
            self._restore_signals = install_signal_handlers(self, self.ending)
        if self._theme_name in self.available_themes:
            self.theme = self._theme_name
        elif self._theme_name:
            known = ", ".join(sorted(self.available_themes))
            self.notify(
                f"unknown theme {self._theme_name!r}; known: {known}",
                severity="warning",
                timeout=10,
            )
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._set_layout(self.size)
        if self._initial:
            self.apply_snapshot(self._initial[-1], self._initial)
        sampler = self.sampler
        if sampler is not None:
            if not self._initial:
                self._apply_latest(sampler)
            self.feed.subscribers.append(self._post_frame)
            sampler.on_snapshot = self._from_sampler_thread
            # Started after the first paint (_mount_after_first_frame): its thread would
            # take the interpreter from it (a first snapshot's processes are read at once).
            self.set_interval(1.0, self._check_stale, name="stale-check")
        if self.snapshot is None:
            self._render_header()
        self.call_after_refresh(self._mount_after_first_frame)

    async def _mount_after_first_frame(self) -> None:
        """The sampler started, the first snapshot's verdicts and the footer, one refresh
        after the first frame: the footer, docked at the bottom, takes its row from the
        table in the next frame. A first snapshot drawn before its
        processes were read is completed by the sampler's thread at once, and comes back
        judged (on_frame_arrived)."""
        try:
            await self._complete_first_frame()
        finally:
            # The start is over: dataclasses compile as usual (codecache), the collector
            # runs (gcpolicy's module doc).
            codecache.stop()
            gcpolicy.release(settle=True)

    async def _complete_first_frame(self) -> None:
        from gputop.ui.keybar import KeyBar  # nothing of it before the first frame

        sampler = self.sampler
        if sampler is not None and not self.closing and not sampler.running:
            sampler.start()
        pending = self.snapshot is not None and processes_pending(self.snapshot)
        if not self.closing and not pending:
            judged = self.feed.judge(publish=False)  # None: the sampler's tick judged it
            if judged is not None:
                self.apply_frame(judged)
        main = self._main_screen
        if self.closing or main.query_one_optional("#footer") is not None:
            return
        footer = KeyBar(id="footer")  # lists the keys one refresh after its mount
        self._set_footer(footer, self.size)
        await main.mount(footer)

    def _set_footer(self, footer: KeyBar, size: Size) -> None:
        footer.compact = self.compact
        # Narrower, the keys take the room: `?` lists ctrl+p.
        footer.show_command_palette = size.width >= FOOTER_PALETTE_WIDTH

    def _apply_latest(self, sampler: Stream) -> None:
        """The first frame: what the source has already (drawn on mount), its verdicts
        "judging" until the next refresh (_mount_after_first_frame): the diagnosis' modules
        and its first run come after the first paint."""
        latest = sampler.latest()
        if latest is not None:
            self.apply_frame(self.feed.push(latest, publish=False, judge=False))

    async def action_interrupt(self) -> None:
        """Ctrl-C: quit with SIGINT's status, as a shell would report it."""
        self.exit(return_code=128 + signal.SIGINT)

    def _theme_changed(self, _theme: object) -> None:
        self.table.restyle()
        self.refresh_view()

    def _from_sampler_thread(self, snapshot: Snapshot) -> None:
        """On the sampler's thread: the feed judges here; never touch widgets here."""
        self.feed.push(snapshot)

    def _post_frame(self, frame: Frame) -> None:
        self.post_message(FrameArrived(frame))

    def on_frame_arrived(self, message: FrameArrived) -> None:
        self.apply_frame(message.frame)

    def exit(self, result: int | None = None, return_code: int = 0, message: Any = None) -> None:
        # A signal or a lost terminal began the ending first: its status wins.
        self.ending.begin(return_code, grace=QUIT_GRACE_S)
        status = self.ending.status if self.ending.status is not None else return_code
        super().exit(result, status, message)

    @property
    def closing(self) -> bool:
        """Shutdown has begun: nothing is applied, the widgets are going or gone."""
        return self.ending.begun.is_set() or not self.is_running

    def _check_stale(self) -> None:
        if self.closing:
            return
        stale = bool(self.sampler is not None and self.sampler.stale)
        error = self.sampler.last_error if self.sampler is not None else None
        recording = self.record_status() if self.record_status is not None else None
        if stale != self.stale or error != self.sample_error or recording != self.record_error:
            self.stale = stale
            self.sample_error = error
            self.record_error = recording
            self._render_header()

    def apply_snapshot(self, snapshot: Snapshot, history: Sequence[Snapshot] | None = None) -> bool:
        """Judge ``snapshot`` on this thread (tests, a fleet host) and apply it."""
        if self.closing:
            return False
        return self.apply_frame(self.feed.frame(_ending_with(history or (), snapshot)))

    def apply_frame(self, frame: Frame) -> bool:
        """Take a new frame; returns whether it was drawn."""
        if self.closing:
            return False
        self.frame = frame
        if frame.diagnosis is not None and frame.diagnosis is not self._diagnosis:
            self._adopt(frame.diagnosis)  # once: a frame handed over again is not new
        self.snapshot = frame.snapshot
        self.history = frame.history
        self._update_top_screen()
        if self.paused or self.too_small or self.screen is not self._main_screen:
            self.pending = True
            return False
        self._render()
        self.frames += 1
        return True

    def forget_view(self) -> None:
        """Forget what is shown: snapshots, verdicts, GPU choice, filter, tags (a fleet host)."""
        self.snapshot = None
        self.frame = None
        self._diagnosis = None
        self.history = ()
        self._marks = {}
        self.verdict_log.clear()
        self.shown_gpus = self._base_gpus = None
        self.tagged.clear()
        self.stale = False
        self.sample_error = None
        box = self._filter_box(mount=False)
        if box is not None:
            box.value = ""
            box.display = False

    @property
    def _main_screen(self) -> Screen[Any]:
        return self.screen_stack[0]

    def diagnosis(self) -> Diagnosis | None:
        """The verdicts for the newest frame (None while it is judging, or before one)."""
        return None if self.frame is None else self.frame.diagnosis

    @property
    def judging(self) -> str | None:
        """Why the frame shown has no verdicts yet (None: judged)."""
        return None if self.frame is None else self.frame.judging

    def _adopt(self, done: Diagnosis) -> None:
        """Make ``done`` the current diagnosis (UI thread): say a failure once, log it."""
        if done.error is not None:
            # Textual's log, not stderr: stderr is the screen.
            self.log.error(f"computing the verdicts failed\n{done.traceback}")
            if self.verdict_error is None:
                self.notify(f"verdicts unavailable: {done.error}", severity="error", timeout=10)
        self.verdict_error = done.error
        self._diagnosis = done
        self._marks = {i: verdict_mark(v) for i, v in done.gpus.items()}
        if done.gpus:
            self.verdict_log.append((done.snapshot.time, {i: v.kind for i, v in done.gpus.items()}))
        self.verdict_seconds.append(done.seconds)
        if len(self.verdict_seconds) > 1000:
            del self.verdict_seconds[:500]

    def gpu_verdict(self, index: int) -> tuple[Verdict | None, list[tuple[float, str]]]:
        """GPU ``index``'s verdict now, and its (time, kind) history (the detail screen)."""
        diagnosis = self.diagnosis()
        verdict = None if diagnosis is None else diagnosis.gpus.get(index)
        return verdict, [(t, kinds[index]) for t, kinds in self.verdict_log if index in kinds]

    def _verdict_marks(self) -> Mapping[int, VerdictMark] | None:
        if self.verdicts is not None:
            return self.verdicts
        if self.judging is not None and self.snapshot is not None:
            mark = judging_mark(self.judging)  # why: a replay's look-back, a first sample
            return {g.index: mark for g in self.snapshot.gpus}
        return None if self.diagnosis() is None else self._marks

    def _render(self) -> None:
        self.pending = False
        snapshot = self.snapshot
        with self.batch_update():
            self._render_header()
            if snapshot is None:
                return
            width = self.size.width
            layout = self._part("#main", MainArea).shown
            self.gpu_panel.display = layout.gpus
            self.host_panel.display = layout.host
            if layout.gpus:
                self.gpu_panel.show(
                    snapshot,
                    self.history,
                    shown=self.shown_gpus,
                    compact=self.compact or layout.gpu_lines,
                    width=width,
                    verdicts=self._verdict_marks(),
                )
            if layout.host:
                host = host_lines(snapshot.host, width, compact=self.compact)
                self.host_panel.set_lines(host)
            self._part("#notes", ProcessNotes).show(snapshot)
            self._render_table()

    def header_parts(self, *, paused: bool, stale: bool, error: str | None) -> Parts:
        """The header line of the snapshot shown, with what the keys chose."""
        all_gpus = self.shown_gpus is None or (
            self.snapshot is not None
            and self.shown_gpus == frozenset(g.index for g in self.snapshot.gpus)
        )
        return header_parts(
            self.snapshot,
            interval=self.interval,
            paused=paused,
            stale=stale,
            gpu_filter=None if all_gpus else self.shown_gpus,
            text_filter=self.text_filter,
            compact=self.compact,
            error=error,
            markers=self.header_markers(),
            clock=not self.REPLAY,
        )

    def header_markers(self) -> Parts:
        """REC while --record writes, READONLY where no process is signalled from here."""
        out: list[tuple[str, str]] = []
        if self.record_error:  # early in the line: it must not be cut
            out.append((f"! not recording: {self.record_error}", "error-strong"))
        elif self.record_status is not None:
            out.append(("REC", "error-strong"))
        # A replay's mode word (REPLAY) already says nothing is signalled from it, and its
        # header needs the room for where the cursor is in the recording.
        refused = self.no_signal_reason is not None or self.KILL_REFUSED is not None
        if not self.REPLAY and (self.readonly or refused):
            out.append(("READONLY", "warn-strong"))
        return tuple(out)

    def _render_header(self) -> None:
        parts = self.header_parts(paused=self.paused, stale=self.stale, error=self.sample_error)
        self.header.set_lines([parts])

    def _render_table(self) -> None:
        table = self.table
        table.configure(
            self.size.width, compact=self.compact, sort_key=self.sort_key, reverse=self.sort_reverse
        )
        if self.snapshot is None:
            return
        if self._rows_of is not self.snapshot:  # a key re-renders the same snapshot
            had_rows = bool(self._rows)
            self._rows_of, self._rows = self.snapshot, process_view.process_rows(self.snapshot)
            if had_rows != bool(self._rows):
                self.refresh_bindings()  # the footer offers the kill key only with a process
        every = self._rows
        # A tag belongs to a (gpu, pid) that still exists: a gone process loses its tag.
        self.tagged &= {r.key for r in every}
        rows = process_view.table_rows(
            every,
            gpus=self.shown_gpus,
            text=self.text_filter,
            sort_key=self.sort_key,
            reverse=self.sort_reverse,
        )
        table.show(rows, self.tagged)
        no_match = self._part("#no-match", NoMatch)
        no_match.show(bool(every) and not rows, text=self.text_filter, gpus=self.shown_gpus)

    def refresh_view(self) -> None:
        """Redraw from the newest snapshot now (after a key changed what is shown)."""
        if self.closing:
            return
        if self.too_small or self.screen is not self._main_screen:
            self.pending = True
            return
        self._render()

    def on_resize(self, event: events.Resize) -> None:
        # A hang-up may still send a Resize: nothing is laid out once closing.
        if self.closing:
            return
        self._set_layout(event.size)

    def _set_layout(self, size: Size) -> None:
        if size == self._size:
            return
        self._size = size
        compact = size.width < COMPACT_WIDTH or size.height < COMPACT_HEIGHT
        too_small = size.width < MIN_WIDTH or size.height < MIN_HEIGHT
        self.compact = compact
        main = self.query_one("#main")
        main.set_class(compact, "-compact")
        footer = self._main_screen.query_one_optional("#footer")
        if footer is not None:  # else _mount_after_first_frame sets it
            self._set_footer(cast("KeyBar", footer), size)
        if too_small != self.too_small:
            self.too_small = too_small
            main.display = not too_small
            note = self.query_one("#too-small", Static)
            note.display = too_small
            if too_small:
                quit_key = next(k.display for k in self.keys if k.action == "quit")
                note.update(  # a remapped key's name is the user's text: not markup
                    Content(
                        f"terminal too small: {size.width}x{size.height}, "
                        f"gputop needs {MIN_WIDTH}x{MIN_HEIGHT} ({quit_key} quits)"
                    )
                )
        if not too_small and self.snapshot is not None:
            self.refresh_view()

    def action_gpu(self, index: int) -> None:
        if self.snapshot is not None and self.snapshot.gpu(index) is None:
            self.notify(f"there is no GPU {index}", severity="warning", timeout=3)
            return
        self.shown_gpus = frozenset({index})
        self.refresh_view()

    def action_layout(self) -> None:
        """The next of LAYOUTS: fewer lines above the process table, then all again."""
        shown = self._part("#main", MainArea).next_layout(compact=self.compact)
        self.notify(f"layout: {shown.name}", timeout=2)
        self.refresh_view()

    def action_choose_gpus(self) -> None:
        """A prompt for GPUs by index and range (``10``, ``0,2-3``)."""
        from gputop.ui.screens.prompt import GPU_PROMPT, Prompt
        from gputop.views.gpu_choice import parse_gpu_choice

        known = [] if self.snapshot is None else [g.index for g in self.snapshot.gpus]
        shown = self.shown_gpus
        current = "" if shown is None or shown == frozenset(known) else gpu_ranges(shown)

        def done(text: str | None) -> None:
            if text is None:
                return
            try:
                chosen = parse_gpu_choice(text, known)
            except ValueError as e:
                self.notify(str(e), severity="warning", timeout=4)
                return
            self.shown_gpus = self._base_gpus if chosen is None else chosen
            self.refresh_view()

        self.push_screen(Prompt(GPU_PROMPT, current), done)

    def action_all_gpus(self) -> None:
        self.shown_gpus = self._base_gpus
        self.refresh_view()

    def action_filter(self) -> None:
        box = self.filter_input
        box.display = True
        # Now, not deferred like ``focus()``: keys typed right after "/" must reach the box.
        self.screen.set_focus(box)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.display = False
            self.table.focus()

    def action_user_filter(self) -> None:
        """htop's `u`: the filter set to the selected process's user (shown in the filter
        box, where it can be changed; the filter also matches commands and owners)."""
        proc = self.table.cursor_proc
        if proc is None or not proc.user:
            self.notify("no user to filter on: select a process first", timeout=3)
            return
        box = self.filter_input
        box.value = proc.user
        box.display = True
        self.refresh_view()

    def action_clear_filter(self) -> None:
        box = self._filter_box(mount=False)
        if box is None or (not box.display and not box.value):
            return
        box.value = ""
        box.display = False
        self.table.focus()
        self.refresh_view()

    def action_sort(self) -> None:
        """Next sort column among those on screen (the compact table hides some)."""
        shown = {c.key for c in process_view.visible_columns(self.compact)}
        keys = [k for k in process_view.SORT_KEYS if k in shown]
        at = keys.index(self.sort_key) if self.sort_key in keys else -1
        self.sort_key = keys[(at + 1) % len(keys)]
        self.refresh_view()

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.refresh_view()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key not in process_view.SORT_KEYS:
            return
        self.sort_reverse = key == self.sort_key and not self.sort_reverse  # again: reversed
        self.sort_key = key
        self.refresh_view()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.sampler is not None:
            self.sampler.paused = self.paused
        if not self.paused and self.pending:
            self.refresh_view()
        else:
            self._render_header()
        self._update_top_screen()  # a view held still while paused catches up

    def _update_top_screen(self) -> None:
        top = self.screen
        update_history = getattr(top, "update_history", None)
        if not self.paused and top is not self._main_screen and callable(update_history):
            update_history(self.history)

    def action_interval(self, step: int) -> None:
        steps = INTERVAL_STEPS
        current = self.interval
        # Outside the steps (e.g. --interval 0.1 or 30) the key only moves towards them.
        if step > 0:
            new = next((s for s in steps if s > current + 1e-9), max(current, steps[-1]))
        else:
            new = next((s for s in reversed(steps) if s < current - 1e-9), min(current, steps[0]))
        if self.sampler is not None:
            self.sampler.interval = new
        self._interval = new
        self._render_header()

    def action_tag(self) -> None:
        table = self.table
        key = table.cursor_key
        if key is None:
            return
        self.tagged ^= {key}
        self.refresh_view()
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def _detail_gpu(self) -> int | None:
        proc = self.table.cursor_proc
        if proc is not None and proc.gpu is not None:
            return proc.gpu
        gpus = () if self.snapshot is None else self.snapshot.gpus
        shown = (g.index for g in gpus if self.shown_gpus is None or g.index in self.shown_gpus)
        return next(shown, None)  # else the first GPU shown

    def action_detail(self) -> None:
        gpu = self._detail_gpu()
        if gpu is None:
            self.notify("no GPU to show", severity="warning", timeout=3)
            return
        self._open_detail(gpu)

    def action_process(self) -> None:
        """The selected process: its whole command, owner, and GPU memory and SM history."""
        from gputop.ui.screens.process import ProcessScreen

        row = self.table.cursor_proc
        if row is None:
            self.notify("no process selected", severity="warning", timeout=3)
            return
        self.push_screen(
            ProcessScreen(row, self.history, open_gpu=self._open_detail), self._back_on_main
        )

    def _open_detail(self, gpu: int) -> None:
        """GPU ``gpu``'s detail screen (Enter; Enter in the process screen)."""
        from gputop.ui.screens.detail import DetailScreen

        self.push_screen(
            DetailScreen(
                gpu,
                self.history,
                verdict=lambda: self.gpu_verdict(gpu),
                after=(lambda: () if self.frame is None else self.frame.after)
                if self.REPLAY
                else None,
                judging=lambda: self.judging,
            ),
            self._back_on_main,
        )

    def action_jobs(self) -> None:
        from gputop.ui.screens.jobs import JobsScreen

        proc = self.table.cursor_proc
        select = None if proc is None else proc.pid
        self.push_screen(
            JobsScreen(
                self.diagnosis,
                select_pid=select,
                judging=lambda: self.judging,
                open_job=self._open_job,
            ),
            self._back_on_main,
        )

    def _open_job(self, job_id: str) -> None:
        """One job in detail, over the jobs view (Enter there)."""
        from gputop.ui.screens.job_detail import JobDetailScreen

        self.push_screen(JobDetailScreen(job_id, self.diagnosis, self.history))

    def kill_refused(self) -> str | None:
        """Why the kill key does nothing here (None: it may signal)."""
        if self.KILL_REFUSED is not None:
            return self.KILL_REFUSED
        if self.snapshot is not None and processes_pending(self.snapshot):
            return PROCESSES_PENDING.message
        if self.snapshot is not None and not self._rows:  # e.g. host-only, no holder
            return "no process to signal"
        return None

    def action_kill_refused(self) -> None:
        if self.screen is self._main_screen:
            self.notify(self.kill_refused() or "nothing to signal", severity="warning", timeout=6)

    def action_kill(self) -> None:
        from gputop.actions import KillTarget
        from gputop.ui.screens.kill import KillScreen

        if self.KILL_REFUSED is not None:
            self.notify(self.KILL_REFUSED, severity="warning", timeout=6)
            return
        table = self.table
        rows = [table.rows_by_key[k] for k in sorted(self.tagged) if k in table.rows_by_key]
        rows = rows or [p for p in (table.cursor_proc,) if p is not None]  # tagged, else cursor's
        if not rows:
            self.notify("no process selected", severity="warning", timeout=3)
            return
        hidden = [r for r in rows if r.visible is False]
        rows = [r for r in rows if r.visible is not False]
        if hidden:
            pids = ", ".join(str(r.pid) for r in hidden)
            self.notify(
                f"pid {pids} not visible in this PID namespace: cannot be signalled from here",
                severity="warning",
                timeout=6,
            )
        if not rows:
            return
        targets = [
            KillTarget(r.pid, r.create_time, r.user, r.command, r.gpu, r.gpu_memory) for r in rows
        ]

        def done(outcome: str | None) -> None:
            if outcome:
                self.notify(outcome, title="kill", timeout=8)
                self.tagged.clear()
            self._back_on_main(None)

        self.push_screen(
            KillScreen(
                targets,
                readonly=self.readonly,
                no_signals=self.no_signal_reason,
                owners=[(r.owner_detail, r.stop) for r in rows],
            ),
            done,
        )

    def action_help(self) -> None:
        from gputop.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(help_bindings(self.keys), help_legend()), self._back_on_main)

    def _back_on_main(self, _result: object = None) -> None:
        if self.pending and self.screen is self._main_screen:
            self.refresh_view()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keys that act on the main screen do nothing while another screen is on top."""
        if action == "kill" and self.kill_refused() is not None:
            return False  # off, and out of the footer: "kill_refused" says why
        if action not in MAIN_ONLY_ACTIONS or not self.screen_stack:
            return True
        box = self._filter_box(mount=False)  # None before it is mounted
        if action == "filter" and box is not None and self.focused is box:
            return False  # "/" typed in the box is a character of the filter
        return self.screen is self._main_screen

    def palette_keys(self) -> Iterable[Key]:
        """The keys the command palette offers on the main screen."""
        return (k for k in self.keys if k.action not in ("quit", "clear_filter"))

    def get_key_display(self, binding: Binding) -> str:
        """A key the config file moved is shown as it was written there."""
        mine = next((k for k in self.keys if f"gputop.{k.id}" == binding.id), None)
        return mine.display if mine is not None else super().get_key_display(binding)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if screen is not self._main_screen:
            return
        for k in self.palette_keys():
            yield SystemCommand(
                f"{k.description} ({k.display})",
                f"same as pressing {k.display}",
                partial(self.run_action, k.action),
            )


def _ending_with(history: Sequence[Snapshot], snap: Snapshot) -> tuple[Snapshot, ...]:
    """``history`` cut so that it ends with ``snap`` (a newer tick may already be in it)."""
    if history and history[-1] is snap:
        return tuple(history)  # the same object when it is already a tuple
    return (*(s for s in history if s.time < snap.time), snap)


def help_legend() -> list[tuple[str, str]]:
    """What the markers mean: the verdict words first, then the other markers."""
    from gputop.ui.screens.help import LEGEND

    return [*verdict_legend(), *LEGEND]


def help_bindings(keys: Iterable[Key] = KEYS) -> list[tuple[str, str]]:
    """(key, what it does) for the help screen."""
    first, *rest = [(k.display, k.description) for k in keys]
    return [first, GPU_DIGITS_HELP, *rest, *_HELP_EXTRA]


def run_app(
    sampler: Stream,
    *,
    gpu_filter: Collection[int] | None = None,
    readonly: bool = False,
    thresholds: Thresholds | None = None,
    window: float | None = None,
    theme: str | None = None,
    watchdog: bool = False,
    app_class: type[GpuTopApp] | None = None,
    record_status: Callable[[], str | None] | None = None,
    subscribers: Sequence[Callable[[Frame], None]] = (),
    keys: Mapping[str, str] | None = None,
) -> int:
    """Run the dashboard until the user quits; ``subscribers`` get frames on the sampler thread."""
    app = (app_class or GpuTopApp)(
        sampler,
        gpu_filter=gpu_filter,
        readonly=readonly,
        thresholds=thresholds,
        window=window,
        theme=theme,
        keys=keys,
    )
    app.record_status = record_status
    app.feed.subscribers.extend(subscribers)

    def cleanup() -> None:
        sampler.on_snapshot = None  # the sampler may tick once more: not into a dead app
        if watchdog:
            app.ending.finished()

    return run_in_terminal(
        app, watchdog=watchdog, on_timeout=lambda: sampler.stop(timeout=0.1), cleanup=cleanup
    )


def run_in_terminal(
    app: GpuTopApp, *, watchdog: bool, on_timeout: Callable[[], None], cleanup: Callable[[], None]
) -> int:
    """Run ``app`` owning the terminal, the signals handled; returns the exit status."""
    app.handle_signals = True
    app.driver_class = GpuTopDriver
    app.ending.watchdog = watchdog
    app.ending.on_timeout.append(on_timeout)
    try:
        with owning_terminal():
            app.run()
    finally:
        cleanup()
        if app._restore_signals is not None:
            app._restore_signals()
    if app.return_code is not None:
        return app.return_code
    return app.ending.status or 0
