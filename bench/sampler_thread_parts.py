#!/usr/bin/env python3
"""The running dashboard's sampler thread once settled, part by part (no profiler).

    python bench/sampler_thread_parts.py [--per-gpu 2] [--settle 65] [--seconds 20] [--tree DIR]

``ui_thread_parts.py``'s run (``gputop --interval 1`` in a 200x50 tmux pane on the fake
8 GPUs x N real processes, settled), for the sampler's thread: its CPU (schedstat) and
the thread CPU spent in its parts, each wrapped once: the tick (the NVML read and its
check, the host, the GPU processes' rows, the holders scan) and the diagnosis
(``Feed.push``: the GPU verdicts, the context, the groups judged), on a live clock
(``bench_tick_parts.py`` steps its clocks). The wrappers cost a little: the thread uses
less unwrapped. Parts nest; they are not to be added up. ``--tree DIR``: the gputop of
that checkout (default: this one). Needs tmux and gcc. Prints figures; it is not a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ui_thread_parts import HEAD, WINDOW, run_parts  # noqa: E402

PROBE = """
state = {}
def measured_thread():
    return state.get("sampler")
import gputop.sources.live as live, gputop.sources.nvml as nvml, gputop.sources.host as host
import gputop.pipeline as pipeline
import gputop.sampler as sampler_mod
wrap(nvml.NvmlReader, "read"); wrap(host.HostReader, "read_host")
wrap(host.HostReader, "read_processes")
wrap(live.LiveSource, "_scan_holders"); wrap(live.LiveSource, "snapshot")
wrap(pipeline.Feed, "push")
wrap(sampler_mod.Sampler, "_tick"); wrap(sampler_mod.Sampler, "_hand_out")
import gputop.diagnosis as diag, gputop.analysis.verdict as verdict
import gputop.analysis.window as window
wrap(diag.Diagnoser, "push"); wrap(verdict.Analyzer, "context"); wrap(verdict, "gpu_verdicts_of")
wrap(verdict, "job_verdict"); wrap(window, "group_of"); wrap(nvml, "check_gpus")
run = sampler_mod.Sampler._run
def _run(self):
    state["sampler"] = threading.current_thread()
    return run(self)
sampler_mod.Sampler._run = _run
"""


def main(argv: list[str] | None = None) -> int:
    return run_parts(
        HEAD + PROBE + WINDOW, "sampler thread", "gputop-sampler-parts", __doc__ or "", argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
