"""The GPU prompt (``g``): a list of GPUs to show, ``10`` or ``0,2-3``, for nodes with
more than ten GPUs (the digit keys reach 0-9) and for several GPUs at once."""

from __future__ import annotations

from collections.abc import Collection
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gputop.argtypes import MAX_GPU_INDEX_DIGITS
from gputop.views.parts import gpu_ranges

#: What the prompt accepts, said in it and in `?`.
EXAMPLES = "10, 0,2-3 or all"
#: The longest text the prompt takes (a list of every GPU of a large node fits).
MAX_CHOICE_LENGTH = 200
#: Words that choose every GPU again (as the a key does).
ALL_WORDS = frozenset({"", "all", "*", "a"})


def parse_gpu_choice(text: str, known: Collection[int]) -> frozenset[int] | None:
    """``text`` -> the GPU indices it names (None: every GPU); ValueError saying why
    when it is not a list of indices and ranges of GPUs in ``known``."""
    spec = text.strip().lower()
    if spec in ALL_WORDS:
        return None
    if len(spec) > MAX_CHOICE_LENGTH:
        raise ValueError(f"too long: at most {MAX_CHOICE_LENGTH} characters")
    chosen: set[int] = set()
    for token in spec.split(","):
        token = token.strip()
        first, dash, last = token.partition("-")
        ends = [first.strip(), last.strip()] if dash else [first.strip()]
        if not all(e.isascii() and e.isdigit() and len(e) <= MAX_GPU_INDEX_DIGITS for e in ends):
            raise ValueError(f"not a GPU index or range (e.g. {EXAMPLES}): {token!r}"[:120])
        lo, hi = int(ends[0]), int(ends[-1])
        if lo > hi:
            raise ValueError(f"a range goes up: {lo}-{hi}")
        chosen.update(range(lo, hi + 1))
    missing = sorted(chosen - set(known))
    if missing:
        have = gpu_ranges(known, empty="none")
        raise ValueError(f"no GPU {gpu_ranges(missing)} here (GPUs {have})")
    return frozenset(chosen)


class GpuPrompt(ModalScreen[str | None]):
    """One line: the GPUs to show. Enter chooses, Esc cancels."""

    DEFAULT_CSS = """
    GpuPrompt { align: center middle; }
    GpuPrompt #gpus-box {
        width: 56; height: auto; border: thick $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#gpus-input"

    def __init__(self, current: str = "") -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="gpus-box"):
            yield Static(f"Show GPUs ({EXAMPLES}):")
            yield Input(
                self._current, id="gpus-input", placeholder="GPUs", max_length=MAX_CHOICE_LENGTH
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
