"""The findings of what a job's ranks measured of themselves (gputop.probe, on
``Job.probe`` and ``ProcessInfo.probe``): the data wait, and the caching allocator's hold.

A probe's figures are already a window (``probefile.WINDOW_SECONDS``, as long as the
verdicts'), and a stale probe never reaches a snapshot (the reader drops it), so the
newest snapshot's figures are the ones judged: no history of probes is kept here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputop.analysis.gpu_rules import Group, pct
from gputop.analysis.jobs import Job, JobProbe, job_probe
from gputop.analysis.kinds import RULES, Finding, finding
from gputop.analysis.thresholds import Thresholds
from gputop.fmt import bytes_
from gputop.model import GpuSample, ProcessInfo

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


@dataclass(frozen=True, slots=True)
class Measured:
    """What a scope is judged by of its ranks' own measurement: the probe figures and the
    ranks (pids) they come from, with the GPU memory NVML counts for those ranks."""

    probe: JobProbe
    pids: tuple[int, ...]
    used: int  # bytes of the scope's GPUs held by those ranks (NVML; else the GPUs' used)


def measured_of(
    job: Job | None,
    job_ids: Sequence[str],
    gpus: Sequence[int],
    jobs: Mapping[str, Job],
    samples: Iterable[GpuSample],
    procs: Mapping[int, ProcessInfo],
) -> Measured | None:
    """A job's own probe figures; a GPU's, those of the one job on it over its ranks on
    that GPU (with several jobs on a GPU whose wait it is cannot be told: None)."""
    if job is None:
        if len(job_ids) != 1 or (job := jobs.get(job_ids[0])) is None or job.probe is None:
            return None  # (a job none of whose ranks has a probe has none on any GPU)
        on = set(gpus)
        pids = tuple(dict.fromkeys(pid for g, pid in job.gpu_pids if g in on))
        probe = job_probe(procs[pid] for pid in pids if pid in procs)
    else:
        pids, probe = job.main_pids, job.probe
    if probe is None:
        return None
    ranks, samples = set(pids), tuple(samples)
    known = [p.gpu_memory for g in samples for p in g.processes if p.pid in ranks]
    if any(b is not None for b in known):
        used = sum(b for b in known if b is not None)
    else:  # NVML gives no per-process memory (a container, an old driver): the GPUs'
        used = sum(g.memory.used or 0 for g in samples)
    return Measured(probe, pids, used)


def input_bound(m: Measured | None, t: Thresholds) -> bool:
    """The ranks measured a data wait above DATA_WAIT_MODERATE."""
    wait = None if m is None else m.probe.data_wait_ratio
    return wait is not None and 100 * wait > t.data_wait_moderate


def data_wait(m: Measured | None, group: Group, t: Thresholds) -> list[Finding]:
    """Input-bound (measured), or not (measured) while the GPU waits; nothing without a
    measured wait, or when the wait is low and the GPU is busy (it waits on nothing)."""
    probe = None if m is None else m.probe
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
        advice = f"The input keeps up; the GPU side says {named}: see its advice (in also)"
    else:
        advice = GPU_SIDE_ADVICE
    severity = group.severity if group.early is None else "info"
    return [finding(RULES["no_input_wait"], text + base, advice, severity)]


def allocator_cache(
    m: Measured | None, procs: Mapping[int, ProcessInfo], full: bool, t: Thresholds
) -> list[Finding]:
    """The ranks' caching allocators hold most of the GPU memory they use without tensors
    in it, while memory is nearly full (``full``)."""
    if m is None or not full or not m.used:
        return []
    reserved = allocated = 0
    seen = False
    for pid in m.pids:
        info = procs.get(pid)
        for c in () if info is None or info.probe is None else info.probe.memory:
            if c.reserved is not None and c.allocated is not None:
                reserved += c.reserved
                allocated += c.allocated
                seen = True
    cached = reserved - allocated
    if not seen or cached < t.allocator_cached * m.used:
        return []
    evidence = (
        f"the caching allocator holds {bytes_(cached)} without tensors in it (reserved "
        f"{bytes_(reserved)}, allocated {bytes_(allocated)}): {pct(100 * cached / m.used)} "
        f"of the {bytes_(m.used)} its ranks use, while memory is nearly full"
    )
    return [finding(RULES["allocator"], evidence, ALLOCATOR_ADVICE)]
