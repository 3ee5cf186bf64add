"""The findings of what a job's ranks measured of themselves (gputop.probe, on
``Job.probe`` and ``ProcessInfo.probe``): the data wait, and the caching allocator's hold.

A probe's figures are already a window (``probefile.WINDOW_SECONDS``, as long as the
verdicts'), and a stale probe never reaches a snapshot (the reader drops it), so the
newest snapshot's figures are the ones judged: no history of probes is kept here.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputop.analysis.gpu_rules import Group, pct
from gputop.analysis.jobs import Job, JobProbe
from gputop.analysis.kinds import RULES, Finding, finding
from gputop.analysis.thresholds import Thresholds
from gputop.fmt import bytes_
from gputop.model import ProcessInfo

INPUT_ADVICE = (
    "Find where the batch is made: `also` names the host side when gputop sees it (disk, "
    "CPU workers, the main process). More DataLoader workers, pin_memory and a larger "
    "prefetch_factor for slow workers; faster or cached storage for disk; decode and "
    "augment in workers, not in the main process"
)
HOLLOW_ADVICE = (
    "The input keeps up and kernels run on few SMs: small kernels or low occupancy; raise "
    "the batch, fuse kernels (torch.compile), check occupancy with Nsight Compute"
)
GPU_SIDE_ADVICE = (
    "The input keeps up, so the GPU waits on something else: host code between kernels, "
    "synchronisation (.item(), .cpu()), communication; profile a step (torch.profiler)"
)
ALLOCATOR_ADVICE = (
    "The caching allocator keeps freed blocks for reuse: normal, but it leaves no room to "
    "others. Call torch.cuda.empty_cache() at phase boundaries (after evaluation, between "
    "epochs), or lower the batch size if the peak itself is too high"
)


def wait_text(probe: JobProbe, t: Thresholds) -> str | None:
    """'42 % of each step waiting for the next batch (step 310 ms, 2 ranks)'; None: no
    rank measured the wait."""
    wait = probe.data_wait_ratio
    if wait is None:
        return None
    details = []
    if probe.step_seconds is not None:
        details.append(f"step {probe.step_seconds * 1000:.0f} ms")
    details.append(f"{probe.ranks} rank" + ("s" if probe.ranks != 1 else ""))
    text = f"{pct(100 * wait)} of each step waiting for the next batch ({', '.join(details)})"
    worst = probe.worst_data_wait_ratio
    if worst is not None and 100 * (worst - wait) > t.data_wait_rank_spread:
        text += f"; the worst rank (pid {probe.worst_pid}) waits {pct(100 * worst)}"
    return text


def input_bound(job: Job | None, t: Thresholds) -> bool:
    """The job's probe measured a data wait above DATA_WAIT_MODERATE."""
    probe = None if job is None else job.probe
    wait = None if probe is None else probe.data_wait_ratio
    return wait is not None and 100 * wait > t.data_wait_moderate


def data_wait(job: Job | None, group: Group, t: Thresholds) -> list[Finding]:
    """Input-bound (measured), or not (measured) while the GPU waits; nothing without a
    measured wait, or when the wait is low and the GPU is busy (it waits on nothing)."""
    probe = None if job is None else job.probe
    text = None if probe is None else wait_text(probe, t)
    if probe is None or text is None or probe.data_wait_ratio is None:
        return []
    base = f"; {group.base}" if group.base else ""
    wait = 100 * probe.data_wait_ratio
    if wait > t.data_wait_moderate:
        severity = "warn" if wait > t.data_wait_high else "info"
        return [finding(RULES["input_measured"], text + base, INPUT_ADVICE, severity)]
    if group.early is None and group.busy and not group.hollow:
        return []  # busy: gpu-bound says the input keeps up
    if group.hollow:
        advice = HOLLOW_ADVICE
    elif group.activity:
        named = " and ".join(dict.fromkeys(f.kind for f in group.activity))
        advice = f"The input keeps up; the GPU side says {named} (see also). " + GPU_SIDE_ADVICE
    else:
        advice = GPU_SIDE_ADVICE
    severity = group.severity if group.early is None else "info"
    return [finding(RULES["no_input_wait"], text + base, advice, severity)]


def allocator_cache(
    job: Job | None, processes: Iterable[ProcessInfo], full: bool, t: Thresholds
) -> list[Finding]:
    """The caching allocators of the job's ranks hold most of its GPU memory without
    tensors in it, while memory is nearly full (``full``)."""
    if job is None or job.probe is None or not full or not job.gpu_memory:
        return []
    pids = set(job.pids)
    reserved = allocated = 0
    seen = False
    for info in processes:
        if info.pid not in pids or info.probe is None:
            continue
        for m in info.probe.memory:
            if m.reserved is not None and m.allocated is not None:
                reserved += m.reserved
                allocated += m.allocated
                seen = True
    cached = reserved - allocated
    if not seen or cached < t.allocator_cached * job.gpu_memory:
        return []
    evidence = (
        f"the caching allocator holds {bytes_(cached)} without tensors in it (reserved "
        f"{bytes_(reserved)}, allocated {bytes_(allocated)}): "
        f"{pct(100 * cached / job.gpu_memory)} of the job's {bytes_(job.gpu_memory)} used, "
        "while memory is nearly full"
    )
    return [finding(RULES["allocator"], evidence, ALLOCATOR_ADVICE)]
