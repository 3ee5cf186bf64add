"""A one-line prompt over the dashboard: a question, a box to type in; Enter answers with
the text typed, Esc with None. What each prompt asks is data (``PromptSpec``): the GPU
prompt (``g``, ``#`` in a replay) and a replay's go-to (``g``) are one screen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gputop.views.gpu_choice import EXAMPLES, MAX_CHOICE_LENGTH


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """One prompt: ``name`` makes its widgets' ids (``NAME-box``, ``NAME-input``)."""

    name: str
    question: str  # the line above the box, as it reads (no markup)
    placeholder: str  # in the empty box
    width: int  # the box's, in cells (border and padding included)
    max_length: int = 0  # the most characters the box takes (0: no limit)


#: What the go-to prompt and the replay's `?` offer as examples of a time
#: (``gputop.record.when`` reads them).
GOTO_EXAMPLES = "2026-11-30 03:00, 03:00, 2h ago, yesterday 23:10"

#: The GPUs to show (``g``; ``#`` in a replay).
GPU_PROMPT = PromptSpec(
    name="gpus",
    question=f"Show GPUs ({EXAMPLES}):",
    placeholder="GPUs",
    width=56,
    max_length=MAX_CHOICE_LENGTH,
)
#: A replay's go-to (``g``): a time in the recording.
GO_TO = PromptSpec(
    name="goto", question=f"Go to (e.g. {GOTO_EXAMPLES}):", placeholder="time", width=64
)


class Prompt(ModalScreen[str | None]):
    """One line to answer ``spec.question``; ``current`` is in the box at first."""

    DEFAULT_CSS = """
    Prompt { align: center middle; }
    Prompt .prompt-box {
        height: auto; border: thick $primary; background: $surface; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "Input"

    def __init__(self, spec: PromptSpec, current: str = "") -> None:
        super().__init__()
        self.spec = spec
        self._current = current

    def compose(self) -> ComposeResult:
        spec = self.spec
        with Vertical(id=f"{spec.name}-box", classes="prompt-box") as box:
            box.styles.width = spec.width
            yield Static(spec.question, markup=False)
            yield Input(
                self._current,
                id=f"{spec.name}-input",
                placeholder=spec.placeholder,
                max_length=spec.max_length,
            )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
