"""What the dashboard has loaded when its first frame with GPU data is on the terminal.

The real start (``gputop`` in a tmux pane, on the fake NVML and on the demo) runs in a
fresh interpreter; a probe writes ``sys.modules`` once the first drawn frame has been
painted, and the run ends there. Counted by name, not timed: whatever the first screen
does not show (plotext, the secondary screens, the recorder, the exporter, the fleet)
must load when first needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakenvml import FakeGpu, FakeProcess, Scenario
from tests.tmux_pane import probe_in_pane

ROOT = Path(__file__).resolve().parents[2]

#: Loaded on a later screen or by another command, never before the first frame.
NOT_AT_START = (
    "plotext",
    "textual_plotext",
    "prometheus_client",
    "gputop.record",
    "gputop.exporter",
    "gputop.fleet",
    "gputop.ui.screens.detail",
    "gputop.ui.screens.jobs",
    "gputop.ui.screens.help",
    "gputop.ui.screens.kill",
    "gputop.ui.history",
    "gputop.actions",
    "gputop.textout",
    "gputop.stream",
    "gputop.probe",  # the probe runs in training processes, never in gputop's own
    "torch",
    "gputop.ui.screens.job_detail",
    "gputop.ui.screens.process",
    # The footer is mounted one refresh after the first frame
    # (GpuTopApp._mount_after_first_frame): its module loads then; Textual's is not used.
    "gputop.ui.keybar",
    "textual.widgets._footer",
    # The first frame is drawn "judging" (Feed.push's judge=False); the diagnosis, its
    # rules and window load with the first judging, one refresh later.
    "gputop.diagnosis",
    "gputop.analysis.verdict",
    "gputop.analysis.gpu_rules",
    "gputop.analysis.input_rules",
    "gputop.analysis.holders",
    "gputop.analysis.measured",
    "gputop.analysis.window",
)
#: Loaded only by the demo: a live start (the fake NVML) never needs them; the parser's
#: ``--demo-node`` choices come from ``sources.base.DEMO_NODES``.
NOT_AT_LIVE_START = (
    "gputop.sources.demo",
    # The first snapshot's processes are read once the first frame is drawn
    # (``Sampler.tick_now(processes=False)``): the owners' and the probes' readers, and
    # the table's owner cells, load then.
    "gputop.sources.owners",
    "gputop.sources.probes",
)
#: gputop's own modules at the first frame, at most (47: sources.owners, issue 22, whose
#: owners the first frame's process table shows; 51: issue 31's probe reader, the file
#: contract it reads by, the measured verdicts and the probe column's cells, which the
#: first frame shows where a training process runs the probe; 50: issue 32, the demo's
#: module no longer loaded for the parser's --demo-node choices; 43: the diagnosis' seven
#: modules after the first frame; 44: issue 32 §5's one malloc arena, ``gputop.heap``; 41:
#: the owners' and the probes' readers and the probe files' contract, with the first
#: snapshot's processes, after it; 42: the dataclasses' code cache, gputop.codecache).
GPUTOP_AT_START = 42
#: Every module at the first frame, Python's and Textual's included, at most (462 on the
#: fake NVML at issue 32, the footer's module after the first frame; 456 with the
#: diagnosis after it; 452 with the processes after it).
ALL_AT_START = 455

PROBE = """
import json, sys
import gputop.cli as cli
out = sys.argv[1]
real = cli._dashboard

def dashboard(*args, **kwargs):
    import gputop.ui.app as app
    apply = app.GpuTopApp.apply_frame

    def first(self, frame):
        drawn = apply(self, frame)
        if drawn and not getattr(self, "_probed", False):
            self._probed = True

            def painted():
                with open(out, "w") as f:
                    json.dump(sorted(sys.modules), f)
                self.exit()

            self.call_after_refresh(painted)
        return drawn

    app.GpuTopApp.apply_frame = first
    return real(*args, **kwargs)

cli._dashboard = dashboard
sys.exit(cli.main(sys.argv[2:]))
"""


def modules_at_first_frame(tmp_path: Path, argv: list[str], env: dict[str, str]) -> list[str]:
    out = tmp_path / "modules.json"
    names: list[str] = probe_in_pane(PROBE, out, argv, env, ROOT, closer="]", what="first frame")
    return names


@pytest.mark.parametrize("source", ["fake-nvml", "demo"])
def test_the_first_frame_loads_only_what_it_shows(
    source: str, tmp_path: Path, fake_nvml_env: Callable[..., dict[str, str]]
) -> None:
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "TEXTUAL_ANIMATIONS": "none"}
    if source == "demo":
        argv = ["--demo", "--interval", "1"]
    else:
        argv = ["--interval", "1"]
        scenario = Scenario(gpus=[FakeGpu(processes=[FakeProcess(4242)]), FakeGpu()])
        env.update(fake_nvml_env(scenario))
    names = modules_at_first_frame(tmp_path, argv, env)
    not_yet = NOT_AT_START + (NOT_AT_LIVE_START if source == "fake-nvml" else ())
    early = [n for n in names if any(n == m or n.startswith(m + ".") for m in not_yet)]
    assert early == [], f"loaded before the first frame: {early}"
    ours = [n for n in names if n.split(".")[0] == "gputop"]
    limit = GPUTOP_AT_START
    assert len(ours) <= limit, f"{len(ours)} gputop modules at start (at most {limit}): {ours}"
    assert len(names) <= ALL_AT_START, f"{len(names)} modules at start (at most {ALL_AT_START})"
