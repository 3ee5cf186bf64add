"""What a training process's probe measured (gputop.probe), as the screens show it: the
data-wait share and the step time on process rows and job lines, a job's probe over the
sampler's history, and the CUDA caching allocator's figures. Pure: no Textual here.

The one wording of the probe's figures: the dashboard and ``--once`` both print these. A
figure that is impossible (a share outside 0-1, a negative or infinite step) reads n/a, as
one not measured does: clamped, a broken probe file would read as a plausible 100 %.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gputop import fmt
from gputop.analysis.jobs import Job, JobProbe, job_probe, process_index
from gputop.model import CudaMemory, ProcessInfo, Snapshot
from gputop.views.parts import Parts

#: The worst rank's wait is named beside the job's mean when it is this far above it
#: (a share of step time): one straggler rank stalls every rank at the next collective.
WORST_APART = 0.10
#: Step times below this are shown in milliseconds, with a decimal below ``FINE_STEP``.
MS_BELOW = 1.0
FINE_STEP = 0.01
#: What the job detail says instead of empty charts when no process of the job has a probe.
NO_PROBE = "no probe: start the job with `gputop run -- …` (docs/probe.md)"


def wait_percent(ratio: float | None) -> float | None:
    """A data-wait share (0-1) in percent; None when unknown or outside 0-1."""
    ratio = fmt.finite(ratio)
    return None if ratio is None or not 0.0 <= ratio <= 1.0 else 100.0 * ratio


def wait_text(ratio: float | None) -> str:
    """0.42 -> '42%'; n/a when unknown (never 0)."""
    return fmt.percent(wait_percent(ratio))


def step_text(seconds: float | None) -> str:
    """0.31 -> '310 ms', 0.0042 -> '4.2 ms', 1.25 -> '1.25 s', 75 -> '1:15'."""
    s = fmt.finite(seconds)
    if s is None or s < 0:
        return fmt.NA
    if s < FINE_STEP:
        return f"{s * 1000:.1f} ms"
    if s < MS_BELOW:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.2f} s"
    return fmt.duration(s)


def probe_cell(ratio: float | None, step: float | None, compact: bool) -> str:
    """A process row's probe: 'wait 42% step 310 ms' ('wait 42%' compact)."""
    wait = f"wait {wait_text(ratio)}"
    return wait if compact else f"{wait} step {step_text(step)}"


def worst_apart(probe: JobProbe) -> bool:
    """The worst rank waits much longer than the job's mean."""
    mean, worst = fmt.finite(probe.data_wait_ratio), fmt.finite(probe.worst_data_wait_ratio)
    return mean is not None and worst is not None and worst - mean >= WORST_APART


def job_probe_cell(probe: JobProbe | None, *, compact: bool) -> str:
    """A job line's probe: the mean over the ranks, '/' the worst rank's wait when it is
    far above the mean ('wait 42%/71% step 310 ms'; compact 'wait 42% 310 ms'); '' without
    a probe."""
    if probe is None:
        return ""
    wait = f"wait {wait_text(probe.data_wait_ratio)}"
    if compact:
        return f"{wait} {step_text(probe.step_seconds)}"
    if worst_apart(probe):
        wait += f"/{wait_text(probe.worst_data_wait_ratio)}"
    return f"{wait} step {step_text(probe.step_seconds)}"


def job_probe_parts(probe: JobProbe | None) -> tuple[Parts, ...]:
    """The job detail's probe lines: the wait (mean, worst rank), then the step, the rate
    and the ranks (none without a probe). Two lines, each within an 80-column terminal: as
    one line it wrapped wherever the width fell, a figure cut from its unit."""
    if probe is None:
        return ()
    ranks = f"{probe.ranks} rank{'s' if probe.ranks != 1 else ''}"
    wait = f"waiting for data {wait_text(probe.data_wait_ratio)} of each step"
    if probe.ranks > 1:
        worst = wait_text(probe.worst_data_wait_ratio)
        pid = "" if probe.worst_pid is None else f", pid {probe.worst_pid}"
        wait += f" (mean; worst rank {worst}{pid})"
    step = f"step {step_text(probe.step_seconds)}"
    if probe.ranks > 1:
        step += f" (mean; slowest {step_text(probe.worst_step_seconds)})"
    rate = f"{fmt.number(probe.batches_per_second, digits=1)} batches/s"
    label = "probe: "
    return (
        ((label, "label"), (wait, "")),
        ((" " * len(label), ""), (f"{step} · {rate} · {ranks} measured", "")),
    )


def memory_text(memory: CudaMemory) -> str:
    """'cuda:0 allocated 12.0GiB reserved 30.0GiB peak 14.0GiB'."""
    return (
        f"cuda:{memory.device} allocated {fmt.bytes_(memory.allocated)} "
        f"reserved {fmt.bytes_(memory.reserved)} peak {fmt.bytes_(memory.peak)}"
    )


def memory_parts(infos: Iterable[ProcessInfo]) -> tuple[Parts, ...]:
    """One line per process whose probe read CUDA's caching allocator."""
    lines: list[Parts] = []
    for info in infos:
        probe = info.probe
        if probe is None or not probe.memory:
            continue
        text = " · ".join(memory_text(m) for m in probe.memory)
        lines.append(((f"CUDA memory, pid {info.pid}: ", "label"), (text, "")))
    return tuple(lines)


def job_infos(snapshot: Snapshot, pids: Iterable[int]) -> list[ProcessInfo]:
    """The job's processes that this snapshot knows, in pid order."""
    index = process_index(snapshot)
    return [index[p] for p in sorted(set(pids)) if p in index]


def job_probe_history(history: Sequence[Snapshot], job: Job) -> list[tuple[float, JobProbe | None]]:
    """(seconds relative to the newest snapshot, the job's probe then) for each snapshot:
    the job's processes as they are now, their probes as each snapshot had them."""
    if not history:
        return []
    newest = fmt.finite(history[-1].time)
    out: list[tuple[float, JobProbe | None]] = []
    for snap in history:
        when = fmt.finite(snap.time)
        x = float("nan") if when is None or newest is None else when - newest
        out.append((x, job_probe(job_infos(snap, job.pids))))
    return out
