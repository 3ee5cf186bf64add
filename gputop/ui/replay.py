"""The dashboard on a recording: the live dashboard with the replay's keys and header.

After a jump no verdict is shown until the look-back before the cursor is read
(docs/recording.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual.binding import Binding, BindingType

from gputop.analysis.thresholds import Thresholds
from gputop.diagnosis import Diagnosis
from gputop.model import Snapshot
from gputop.pipeline import Frame, Stream
from gputop.ui.app import (
    GPU_DIGITS_HELP,
    FrameArrived,
    GpuTopApp,
    Key,
    help_legend,
    key_bindings,
)
from gputop.ui.screens.prompt import GO_TO, GOTO_EXAMPLES, Prompt
from gputop.views.header_view import mode_text, replay_range_parts
from gputop.views.parts import Parts, safe

if TYPE_CHECKING:
    from gputop.record import player as rp

#: What the screen says while a frame's look-back is still being read (the verdict slots'
#: wide label: never an old verdict, never one judged from part of the history).
JUDGING = "judging from the recording…"


REPLAY_KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", "q"),
    Key("question_mark", "help", "Help", "?"),
    Key("space", "play", "Play", "Space"),
    Key("left_square_bracket", "step(-1)", "Step", "[ ]"),
    Key("right_square_bracket", "step(1)", "One sample on", "]", show=False),
    Key("left_curly_bracket", "jump(-60)", "Min", "{ }"),
    Key("right_curly_bracket", "jump(60)", "A minute on", "}", show=False),
    Key("less_than_sign", "speed(0)", "Speed", "< >"),
    Key("greater_than_sign", "speed(1)", "Faster", ">", show=False),
    Key("g", "goto", "Go to", "g"),
    Key("G", "newest", "End", "G"),
    Key("j", "jobs", "Jobs", "j", show=False),
    Key("enter", "detail", "Detail", "Enter", show=False),
    Key("slash", "filter", "Filter", "/", show=False),
    Key("s", "sort", "Sort", "s", show=False),
    Key("r", "reverse", "Reverse sort", "r", show=False),
    Key("a", "all_gpus", "All GPUs", "a", show=False),
    Key("c", "layout", "Layout", "c", show=False),
    # `g` goes to a time here: the GPU prompt is on `#`.
    Key("number_sign", "choose_gpus", "Choose GPUs", "#", show=False),
    Key("e", "process", "Process detail", "e", show=False),
    Key("escape", "clear_filter", "Clear filter", "Esc", show=False),
)

#: What `?` says for each replay key (the footer's labels are short).
_HELP: dict[str, str] = {
    "play": "play / pause the replay",
    "step(-1)": "one sample back / on ([ and ]; pauses)",
    "jump(-60)": "a minute back / on ({ and })",
    "speed(0)": "slower / faster (< and >): 1x, 2x, 5x ... 600x",
    "goto": f"go to a time: {GOTO_EXAMPLES}",
    "newest": "the newest sample of the recording",
}


def _bindings() -> list[BindingType]:
    quit_ = Binding("ctrl+c", "quit", "Quit", show=False, priority=True)
    return [*key_bindings(REPLAY_KEYS, gpu_0=("Show GPU 0", "0")), quit_]


class ReplayApp(GpuTopApp, inherit_bindings=False):
    """The dashboard driven by a ``Player``, with only its own keys (and ctrl+c)."""

    BINDINGS: ClassVar[list[BindingType]] = _bindings()
    REPLAY = True
    KILL_REFUSED = (
        "a replay shows processes of the past: their pids may belong to anyone now, "
        "so nothing can be signalled from here"
    )

    def __init__(self, player: rp.Player, **kwargs: Any) -> None:
        kwargs["readonly"] = True
        super().__init__(player, **kwargs)  # a Player is a Stream, as a Sampler is
        self.player = player
        self.generation = -1  # the player's move of the frame shown
        self.stale_frames = 0  # frames of an older move that arrived late and were dropped

    def _frame(self, shown: rp.Frame) -> Frame:
        """The player's frame through the feed: judged once its whole look-back is read."""
        return self.feed.frame(
            shown.history,
            judging=None if shown.complete else JUDGING,
            after=shown.after,
            generation=shown.generation,
        )

    def _apply_latest(self, sampler: Stream) -> None:
        shown = self.player.frame()
        if shown is not None:
            self.apply_frame(self._frame(shown))
            self.generation = shown.generation

    def _from_sampler_thread(self, snapshot: Snapshot) -> None:
        """The player's thread: judge the frame here, hand it over with its move."""
        shown = self.player.frame()
        if shown is None or shown.snapshot is not snapshot:
            return  # not the player's frame now (cannot happen on its own thread)
        self.post_message(FrameArrived(self._frame(shown)))

    def on_frame_arrived(self, message: FrameArrived) -> None:
        # Textual calls every class's handler along the MRO: this one decides for both.
        message.prevent_default()
        generation = message.frame.generation
        if generation is not None:
            if generation < self.generation:
                self.stale_frames += 1
                return  # an older move's frame: the newer one is shown already
            self.generation = generation
        super().on_frame_arrived(message)

    def _adopt(self, done: Diagnosis) -> None:
        # The verdict history (detail screen) is of the look-back before the cursor only:
        # after a jump, what was judged at the old position is not this one's history.
        t = done.snapshot.time
        log = self.verdict_log
        kept = sorted((e for e in log if t - self.player.lookback < e[0] < t), key=lambda e: e[0])
        if len(kept) != len(log):
            log.clear()
            log.extend(kept)
        super()._adopt(done)

    def _render_header(self) -> None:
        self.header.set_lines([self.header_parts_now()])

    def header_parts_now(self) -> Parts:
        """The live header, its mode replaced by REPLAY, the recorded time, speed and state."""
        snap = self.snapshot
        parts = list(self.header_parts(paused=False, stale=False, error=None))
        if self.player.last_error:  # in the replay's words, not a live sampler's
            parts += [("  ", ""), (f"! {safe(self.player.last_error, 160)}", "error-strong")]
        if snap is None:
            return tuple(parts)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.time))
        p = self.player
        state = "PLAYING" if p.playing else ("END" if p.at_end else "PAUSED")
        replay: Parts = (
            ("REPLAY ", "warn-strong"),
            (stamp, "accent"),
            (f" {p.speed:g}x {state}", "warn-strong" if state != "PLAYING" else "ok"),
        )
        rec = p.recording
        gap = " " if self.compact else "  "
        where = replay_range_parts(rec.start, rec.end, snap.time, compact=self.compact)
        replay += ((gap, ""), *where)
        if self.judging is not None:
            replay += (("  " + self.judging, "dim"),)
        at = parts.index(mode_text(snap))  # the header of a snapshot always says its mode
        parts[at : at + 1] = replay
        if self.compact:  # below 100 columns the cursor and its range before the versions
            versions = {i for i, (t, role) in enumerate(parts) if role == "label" and t.strip()
                        in ("drv", "CUDA")}  # fmt: skip
            parts = [part for i, part in enumerate(parts) if not {i, i - 1} & versions]
        return tuple(parts)

    def action_play(self) -> None:
        self.player.toggle()
        self.set_timer(0.05, self._render_header)

    def action_step(self, n: int) -> None:
        self.player.step(n)

    def action_jump(self, seconds: int) -> None:
        self.player.jump(float(seconds))

    def action_speed(self, up: int) -> None:
        self.player.faster(bool(up))
        self._render_header()

    def action_newest(self) -> None:
        self.player.newest()

    def action_goto(self) -> None:
        def done(text: str | None) -> None:
            self._back_on_main(None)
            if not text:
                return
            from gputop.record.when import parse_time

            try:
                t = parse_time(text, time.time())
            except ValueError as exc:
                self.notify(str(exc), severity="warning", timeout=6)
                return
            rec = self.player.recording
            if t < rec.start or t > rec.end + 2 * self.player.interval:
                first = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.start))
                last = time.strftime("%Y-%m-%d %H:%M", time.localtime(rec.end))
                self.notify(
                    f"outside the recording ({first} to {last}): showing the nearest sample",
                    severity="warning",
                    timeout=6,
                )
            self.player.goto(t)

        self.push_screen(Prompt(GO_TO), done)

    def action_help(self) -> None:
        from gputop.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(replay_help(), help_legend()), self._back_on_main)

    def palette_keys(self) -> Iterable[Key]:
        """The footer's keys only (besides Textual's own: themes, screenshot...)."""
        return (k for k in REPLAY_KEYS if k.show and k.action != "quit")


def replay_help() -> list[tuple[str, str]]:
    # Not in the footer:
    also = (
        "jobs",
        "detail",
        "filter",
        "sort",
        "reverse",
        "all_gpus",
        "layout",
        "process",
        "choose_gpus",
    )
    keys = [k for k in REPLAY_KEYS if k.action in _HELP or k.show or k.action in also]
    return [
        *((k.display, _HELP.get(k.action, k.description)) for k in keys),
        GPU_DIGITS_HELP,
        ("", "no signal is ever offered in a replay: its processes are of the past"),
    ]


def run_replay(
    player: rp.Player, *, thresholds: Thresholds | None = None, theme: str | None = None
) -> int:
    """Run the replay dashboard (through run_app) until the user quits."""
    from gputop.ui.app import run_app

    player.tick_now()  # the first frame (its block only) is drawn on mount
    try:
        return run_app(
            player,
            thresholds=thresholds,
            theme=theme,
            watchdog=True,
            app_class=ReplayApp,
        )
    finally:
        player.stop()
