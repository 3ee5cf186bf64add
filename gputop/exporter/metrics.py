"""Snapshot + diagnosis -> Prometheus metric families (pure). :data:`METRICS` is the one
table of every family (docs/exporter.md is made from it); n/a is a missing series, never 0.
The job label is ``command``: Prometheus would rename ``job`` to ``exported_job``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from gputop import __version__
from gputop.analysis.jobs import Job
from gputop.analysis.kinds import KINDS
from gputop.model import (
    CLOCK_EVENT_REASONS,
    GPU_METRICS,
    QUIET_PARTS,
    GpuMetric,
    GpuSample,
    Owner,
    Snapshot,
    Verdict,
)
from gputop.sources.owners import SHORT_ID

DEFAULT_MAX_JOBS = 20

#: Clock-event reason names, in bit order: every one gets a 0/1 series.
REASONS: tuple[str, ...] = tuple(name for _, name in CLOCK_EVENT_REASONS)

#: A family's sample name is its name with this suffix, by type.
SAMPLE_SUFFIX = {"counter": "_total", "info": "_info"}

#: Sources whose read-error counter exists from the start (at 0).
ERROR_SOURCES: tuple[str, ...] = ("nvml", "host")

GPU = ("gpu",)
MIG = ("gpu", "mig")
#: Who owns a job or a process, labelled as dcgm-exporter does (Grafana boards join on
#: them): "" where unknown (an empty label is no label in Prometheus).
OWNER = ("namespace", "pod", "container", "slurm_job")
JOB = ("user", "command", "gpus", *OWNER)
#: A process's CUDA device as its probe reads it: ``device`` is the process's own index
#: (after CUDA_VISIBLE_DEVICES), not the GPU's.
PROCESS_DEVICE = ("pid", "device", "user", *OWNER)
#: (family, CudaMemory field) of the probe's per-device memory families.
PROBE_MEMORY = (
    ("gputop_process_gpu_memory_allocated_bytes", "allocated"),
    ("gputop_process_gpu_memory_reserved_bytes", "reserved"),
)

#: (name, metric) of each per-GPU gauge the GPU metric table declares, a row its own.
GPU_GAUGES: tuple[tuple[str, GpuMetric], ...] = tuple(
    (m.export, m) for m in GPU_METRICS if m.export and m.export_label is None
)
#: name -> its rows, of each per-GPU family that several rows of the table share, told
#: apart by a label (``gputop_gpu_pipe_active_ratio{pipe="fp64"}``).
GPU_LABELLED: dict[str, tuple[GpuMetric, ...]] = {
    name: tuple(m for m in GPU_METRICS if m.export == name and m.export_label is not None)
    for name in dict.fromkeys(m.export for m in GPU_METRICS if m.export and m.export_label)
}
#: The parts of a MIG device whose rows of the table are exported per MIG device too, as
#: ``gputop_gpu_mig_*`` with the ``mig`` label (GPM reads each GPU instance). The MIG
#: device's memory has its own families (below), from before.
MIG_PARTS: tuple[str, ...] = ("activity",)
MIG_WHERE = " (of the MIG device's GPU instance)"

#: (unit in the model, exported unit) -> the conversion; none for every other pair.
CONVERSIONS: dict[tuple[str, str], Callable[[float], float]] = {
    ("%", "0-1"): lambda v: v / 100.0,
    ("MHz", "hertz"): lambda v: v * 1_000_000,
}


@dataclass(frozen=True, slots=True)
class MetricDef:
    """One Prometheus metric the exporter serves: name, type, unit, labels, help."""

    name: str  # as it appears in a scrape (counters with _total, info with _info)
    type: str  # "gauge" | "counter" | "info"
    unit: str  # for people: "bytes", "0-1", "1"...
    labels: tuple[str, ...]
    help: str
    jobs: bool = False  # only with --jobs


def mig_name(name: str) -> str:
    """The per-MIG-device family of a per-GPU one: ``gputop_gpu_mig_sm_active_ratio``."""
    return "gputop_gpu_mig_" + name.removeprefix("gputop_gpu_")


def exported_first(m: GpuMetric) -> GpuMetric:
    """The first row of the table exported under ``m``'s family (``m`` itself, unless it
    shares a labelled family)."""
    return m if m.export_label is None else GPU_LABELLED[str(m.export)][0]


def table_family(m: GpuMetric, labels: tuple[str, ...]) -> MetricDef:
    """The family of a row of the table (the first of a labelled family's rows), per GPU
    (``GPU``) or per MIG device (``MIG``): a labelled family's help is its rows' own."""
    name, where = (str(m.export), "") if labels == GPU else (mig_name(str(m.export)), MIG_WHERE)
    if m.export_label is None:
        return MetricDef(name, "gauge", m.export_unit, labels, m.about + where)
    rows = GPU_LABELLED[str(m.export)]
    label = m.export_label[0]
    about = "; ".join(f"{label} {r.export_label[1]}: {r.about}" for r in rows if r.export_label)
    return MetricDef(name, "gauge", m.export_unit, (*labels, label), about + where)


# fmt: off
METRICS: tuple[MetricDef, ...] = (
    #         name, type, unit, labels, help, only with --jobs
    MetricDef("gputop_gpu_info", "info", "1",
              ("gpu", "uuid", "name", "pci_bus_id", "driver_version"), "GPU identity; always 1"),
    MetricDef("gputop_gpu_lost", "gauge", "0/1", GPU, "1 while the GPU is lost (off the bus)"),
    *(table_family(m, GPU) for m in GPU_METRICS if m.export and m is exported_first(m)),
    MetricDef("gputop_gpu_pcie_bytes_per_second", "gauge", "bytes/s", ("gpu", "direction"),
              "PCIe throughput; direction tx = GPU to host, rx = host to GPU"),
    MetricDef("gputop_gpu_clock_event_reason", "gauge", "0/1", ("gpu", "reason"),
              "1 while this reason holds the clocks down (NVML clock-event reasons)"),
    MetricDef("gputop_gpu_mig_info", "info", "1",
              ("gpu", "mig", "uuid", "profile", "gpu_instance", "compute_instance"),
              "A MIG device of a GPU in MIG mode (mig = its slot on the GPU); always 1"),
    MetricDef("gputop_gpu_mig_memory_used_bytes", "gauge", "bytes", MIG,
              "Memory used on the MIG device"),
    MetricDef("gputop_gpu_mig_memory_total_bytes", "gauge", "bytes", MIG,
              "Memory of the MIG device"),
    *(table_family(m, MIG) for m in GPU_METRICS if m.export and m is exported_first(m)
      and m.field.partition(".")[0] in MIG_PARTS),
    MetricDef("gputop_gpu_verdict", "gauge", "1", ("gpu", "kind", "severity"),
              "The GPU's current verdict: one series at 1 (kind as in --json)"),
    MetricDef("gputop_gpu_verdict_seconds_total", "counter", "seconds", ("gpu", "kind"),
              "Time the GPU spent in each verdict since the exporter started"),
    MetricDef("gputop_job_gpu_memory_bytes", "gauge", "bytes", JOB,
              "GPU memory held by the job, summed over its GPUs", jobs=True),
    MetricDef("gputop_job_cpu_ratio", "gauge", "0-1", JOB,
              "CPU the job uses (every process), share of all the host's CPUs", jobs=True),
    MetricDef("gputop_job_workers", "gauge", "1", JOB,
              "Worker processes (e.g. DataLoader)", jobs=True),
    MetricDef("gputop_job_verdict", "gauge", "1", (*JOB, "kind"),
              "The job's current verdict: one series at 1", jobs=True),
    MetricDef("gputop_job_data_wait_ratio", "gauge", "0-1", JOB,
              "Share of step time the job's ranks wait for the next batch (gputop's probe), "
              "the mean over its ranks; no series without a probe", jobs=True),
    MetricDef("gputop_job_step_seconds", "gauge", "seconds", JOB,
              "Time between consecutive batches (gputop's probe), the mean over the job's "
              "ranks; no series without a probe", jobs=True),
    MetricDef("gputop_process_owner_gpu_memory_bytes", "gauge", "bytes", (*GPU, *OWNER),
              "GPU memory of each pod, container or Slurm job on the GPU, summed", jobs=True),
    MetricDef(PROBE_MEMORY[0][0], "gauge", "bytes", PROCESS_DEVICE,
              "Bytes the process's live tensors hold on its CUDA device (gputop's probe; "
              "device: the process's own index); no series without a probe", jobs=True),
    MetricDef(PROBE_MEMORY[1][0], "gauge", "bytes", PROCESS_DEVICE,
              "Bytes the process's caching allocator holds on its CUDA device (gputop's "
              "probe): what NVML counts as used, less the context", jobs=True),
    MetricDef("gputop_driver_available", "gauge", "0/1", (),
              "1 when NVML answered; 0: host-only (no driver or no library)"),
    MetricDef("gputop_last_sample_timestamp_seconds", "gauge", "seconds", (),
              "When the latest sample was taken (Unix time): its age is time() - this"),
    MetricDef("gputop_sample_duration_seconds", "gauge", "seconds", (),
              "Wall time the latest sample took"),
    MetricDef("gputop_read_errors_total", "counter", "1", ("source",),
              "Readings that failed, by source (nvml, host, holders...)"),
    MetricDef("gputop_build_info", "info", "1", ("version",), "gputop version; always 1"),
)
# fmt: on


@dataclass
class Totals:
    """The counters, carried from tick to tick."""

    verdict_seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # (gpu, kind)
    read_errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_SOURCES, 0))
    last_time: float | None = None  # the previous snapshot's time

    def add(self, snapshot: Snapshot, verdicts: Mapping[int, Verdict], max_step: float) -> None:
        """Count one snapshot's errors and the time since the previous one in each GPU's
        verdict (at most ``max_step``: a stalled sampler credits no verdict a minute)."""
        for err in snapshot.errors:
            self.read_errors[err.source] = self.read_errors.get(err.source, 0) + 1
        prev, self.last_time = self.last_time, snapshot.time
        step = 0.0 if prev is None else min(max(snapshot.time - prev, 0.0), max_step)
        for gpu in snapshot.gpus:
            label = str(gpu.index)
            if gpu.lost:
                continue
            for kind in KINDS:
                self.verdict_seconds.setdefault((label, kind), 0.0)
            verdict = verdicts.get(gpu.index)
            if verdict is not None and step:
                key = (label, verdict.kind)
                self.verdict_seconds[key] = self.verdict_seconds.get(key, 0.0) + step


class Family(Metric):
    """A metric family kept as its series, (label values, value), which the encoders
    write directly; :attr:`samples` builds the library's own samples on first use."""

    def __init__(
        self, name: str, documentation: str, typ: str, labelnames: Sequence[str], unit: str = ""
    ) -> None:
        super().__init__(name, documentation, typ, unit)
        self.labelnames: tuple[str, ...] = tuple(labelnames)
        self.sample_name = self.name + SAMPLE_SUFFIX.get(typ, "")
        self.series: list[tuple[tuple[str, ...], float]] = []
        self._samples: list[Sample] | None = None

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:  # as the library's families make them (an info's value: 1)
            info = self.type == "info"
            self._samples = []
            for labels, value in self.series:
                named = dict(zip(self.labelnames, labels, strict=True))
                self._samples.append(Sample(self.sample_name, named, 1 if info else value))
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value if value else None  # Metric.__init__ sets []


def _family(name: str, series: Iterable[tuple[tuple[str, ...], float]] = ()) -> Family:
    """The family of a :data:`METRICS` entry, named by its scrape name, with ``series``."""
    d = _DEFS[name]
    base = name.removesuffix(SAMPLE_SUFFIX.get(d.type, ""))
    unit = "seconds" if d.type == "counter" and base.endswith("_seconds") else ""
    fam = Family(base, d.help, d.type, d.labels, unit)
    fam.series.extend(series)
    return fam


#: (family, read, conversion, the row's label value or none) of each exported row, per GPU
#: and per MIG device.
GaugeRead = tuple[str, Callable[[Any], Any], Callable[[float], float] | None, tuple[str, ...]]
_GAUGE_READS: tuple[GaugeRead, ...] = tuple(
    (
        str(m.export),
        m.get,
        CONVERSIONS.get((m.unit, m.export_unit)),
        () if m.export_label is None else (m.export_label[1],),
    )
    for m in GPU_METRICS
    if m.export
)


def _quiet_part(m: GpuMetric) -> str | None:
    head = m.field.partition(".")[0]
    return head if head in QUIET_PARTS[GpuSample] else None


#: The reads in runs of the table's order: (a part that says nothing while it equals this
#: empty value, so its rows are skipped at once: a GPU without GPM or NVLink), or (None,
#: reads) for the rest.
_GAUGE_RUNS: tuple[tuple[str | None, Any, tuple[GaugeRead, ...]], ...] = tuple(
    (part, QUIET_PARTS[GpuSample].get(part) if part else None, tuple(r for r, _ in run))
    for part, run in itertools.groupby(
        zip(_GAUGE_READS, (m for m in GPU_METRICS if m.export), strict=True),
        key=lambda rm: _quiet_part(rm[1]),
    )
)
_MIG_READS: tuple[GaugeRead, ...] = tuple(
    (mig_name(name), get, convert, extra)
    for (name, get, convert, extra), m in zip(
        _GAUGE_READS, (m for m in GPU_METRICS if m.export), strict=True
    )
    if m.field.partition(".")[0] in MIG_PARTS
)
_DEFS = {m.name: m for m in METRICS}


def owner_labels(owner: Owner | None) -> tuple[str, ...]:
    """OWNER's values: a pod's names, a container's short id, a Slurm job's id."""
    if owner is None:
        return ("",) * len(OWNER)
    container = owner.container
    if owner.kind == "container" and owner.id is not None:
        container = owner.id[:SHORT_ID]
    values = (owner.namespace, owner.pod, container, owner.slurm_job)
    return tuple(v or "" for v in values)


def job_families(
    jobs: Sequence[Job], verdicts: Mapping[str, Verdict], cpu_count: int | None, max_jobs: int
) -> list[Family]:
    """The job families: jobs merged by JOB's labels (user, command, gpus, owner), summed;
    the top ``max_jobs`` by GPU memory, then CPU."""
    groups: dict[tuple[str, ...], list[Job]] = {}
    for job in jobs:
        gpus = ",".join(str(i) for i in job.gpus)
        # The launch's short command name (torchrun, python); "" (unknown) is no label.
        command = job.command.split(" ", 1)[0].rsplit("/", 1)[-1] if job.command else ""
        key = (job.user or "", job.name or command, gpus, *owner_labels(job.owner))
        groups.setdefault(key, []).append(job)
    # (labels, GPU memory, CPU ratio, workers, verdict kinds, data wait, step)
    rows: list[
        tuple[tuple[str, ...], int | None, float | None, int, list[str], float | None, float | None]
    ] = []
    for key, members in sorted(groups.items()):  # ties in the order below: by the key
        mems = [j.gpu_memory for j in members if j.gpu_memory is not None]
        cpus = [j.cpu_percent for j in members if j.cpu_percent is not None]
        cpu_ratio = sum(cpus) / 100.0 / cpu_count if cpus and cpu_count else None
        kinds = sorted({verdicts[j.id].kind for j in members if j.id in verdicts})
        workers = sum(len(j.worker_pids) for j in members)
        # a share and a time do not add up: jobs merged under one label set give their mean
        waits = [j.probe.data_wait_ratio for j in members if j.probe is not None]
        steps = [j.probe.step_seconds for j in members if j.probe is not None]
        wait, step = _mean(waits), _mean(steps)
        rows.append((key, sum(mems) if mems else None, cpu_ratio, workers, kinds, wait, step))
    rows.sort(key=lambda r: (-(r[1] or 0), -(r[2] or 0.0)))
    fams = {m.name: _family(m.name) for m in METRICS if m.name.startswith("gputop_job_")}
    memory = fams["gputop_job_gpu_memory_bytes"].series
    cpu = fams["gputop_job_cpu_ratio"].series
    worker_count = fams["gputop_job_workers"].series
    verdict = fams["gputop_job_verdict"].series
    data_wait = fams["gputop_job_data_wait_ratio"].series
    step_time = fams["gputop_job_step_seconds"].series
    for labels, gpu_memory, ratio, workers, kinds, wait, step in rows[: max(0, max_jobs)]:
        if gpu_memory is not None:
            memory.append((labels, float(gpu_memory)))
        if ratio is not None:
            cpu.append((labels, ratio))
        worker_count.append((labels, float(workers)))
        verdict.extend(((*labels, kind), 1.0) for kind in kinds)
        if wait is not None:
            data_wait.append((labels, wait))
        if step is not None:
            step_time.append((labels, step))
    return list(fams.values())


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def probe_memory(snapshot: Snapshot, max_series: int) -> list[list[tuple[tuple[str, ...], float]]]:
    """Each PROBE_MEMORY family's series: (pid, device, user, *OWNER) -> bytes, of the
    ``max_series`` processes whose allocators reserve the most."""
    probed = [
        (-sum(m.reserved or 0 for m in p.probe.memory), p.pid, p, p.probe.memory)
        for p in snapshot.processes
        if p.probe is not None and p.probe.memory
    ]
    probed.sort(key=lambda row: row[:2])
    out: list[list[tuple[tuple[str, ...], float]]] = [[] for _ in PROBE_MEMORY]
    for _, pid, p, memory in probed[: max(0, max_series)]:
        who = (p.user or "", *owner_labels(p.owner))
        for m in memory:
            labels = (str(pid), str(m.device), *who)
            for series, (_, part) in zip(out, PROBE_MEMORY, strict=True):
                value = getattr(m, part)
                if value is not None:
                    series.append((labels, float(value)))
    return [sorted(series) for series in out]


def owner_memory(snapshot: Snapshot, max_series: int) -> list[tuple[tuple[str, ...], float]]:
    """(gpu, *OWNER) -> GPU memory summed over the owned processes, the top ``max_series``."""
    sums: dict[tuple[str, ...], float] = {}
    for g in snapshot.gpus:
        for p in g.processes:
            labels = owner_labels(None if p.host is None else p.host.owner)
            if p.gpu_memory is not None and any(labels):
                key = (str(g.index), *labels)
                sums[key] = sums.get(key, 0.0) + float(p.gpu_memory)
    top = sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, max_series)]
    return sorted(top)


def build(
    snapshot: Snapshot | None,
    gpu_verdicts: Mapping[int, Verdict],
    jobs: Sequence[Job],
    job_verdicts: Mapping[str, Verdict],
    totals: Totals,
    *,
    with_jobs: bool = False,
    max_jobs: int = DEFAULT_MAX_JOBS,
) -> list[Metric]:
    """Every family for one snapshot (None: nothing sampled yet, only build info)."""
    out: list[Metric] = [_family("gputop_build_info", [((__version__,), 1.0)])]
    if snapshot is None:
        return out

    families: dict[str, Family] = {}

    def gauge(name: str) -> list[tuple[tuple[str, ...], float]]:
        fam = families.get(name)
        if fam is None:
            fam = families[name] = _family(name)
        return fam.series

    info = _family("gputop_gpu_info")
    mig_info = _family("gputop_gpu_mig_info")
    driver_version = snapshot.driver.driver_version or ""
    for g in snapshot.gpus:
        label = str(g.index)
        one = (label,)
        info.series.append(
            ((label, g.uuid or "", g.name or "", g.pci_bus_id or "", driver_version), 1.0)
        )
        gauge("gputop_gpu_lost").append((one, 1.0 if g.lost else 0.0))
        if g.lost:
            continue
        for part, empty, reads in _GAUGE_RUNS:
            if part is not None and getattr(g, part) == empty:
                continue
            for name, get, convert, extra in reads:
                value = get(g)
                if value is not None:
                    value = float(value if convert is None else convert(value))
                    gauge(name).append(((label, *extra) if extra else one, value))
        pcie = gauge("gputop_gpu_pcie_bytes_per_second")
        for direction, rate in (("tx", g.pcie.tx_bytes_per_s), ("rx", g.pcie.rx_bytes_per_s)):
            if rate is not None:
                pcie.append(((label, direction), float(rate)))
        if g.clock_event_reasons is not None:
            active = g.clock_event_reasons  # every known reason, then any other that holds
            every = (*REASONS, *sorted(set(active).difference(REASONS)))
            reasons = gauge("gputop_gpu_clock_event_reason")
            reasons.extend(((label, r), 1.0 if r in active else 0.0) for r in every)
        for m in g.mig_devices:
            slot = str(m.index)
            ids = (m.uuid or "", m.profile or "", _text(m.gpu_instance_id))
            mig_info.series.append(((label, slot, *ids, _text(m.compute_instance_id)), 1.0))
            for which, amount in (("used", m.memory.used), ("total", m.memory.total)):
                if amount is not None:
                    mig = gauge(f"gputop_gpu_mig_memory_{which}_bytes")
                    mig.append(((label, slot), float(amount)))
            for name, get, convert, extra in _MIG_READS:
                value = get(m)
                if value is not None:
                    value = float(value if convert is None else convert(value))
                    gauge(name).append(((label, slot, *extra), value))
        verdict = gpu_verdicts.get(g.index)
        if verdict is not None:
            gauge("gputop_gpu_verdict").append(((label, verdict.kind, verdict.severity), 1.0))
    out.append(info)
    if mig_info.series:
        out.append(mig_info)
    out.extend(families.values())

    shown = {str(g.index) for g in snapshot.gpus if not g.lost}
    seconds = [s for s in sorted(totals.verdict_seconds.items()) if s[0][0] in shown]
    out.append(_family("gputop_gpu_verdict_seconds_total", seconds))

    if with_jobs:
        cpu_count = snapshot.host.cpu_count if snapshot.host is not None else None
        out += job_families(jobs, job_verdicts, cpu_count, max_jobs)
        owned = _family("gputop_process_owner_gpu_memory_bytes", owner_memory(snapshot, max_jobs))
        out.append(owned)
        for (name, _), series in zip(PROBE_MEMORY, probe_memory(snapshot, max_jobs), strict=True):
            out.append(_family(name, series))

    available = 1.0 if snapshot.driver.available else 0.0
    out.append(_family("gputop_driver_available", [((), available)]))
    out.append(_family("gputop_last_sample_timestamp_seconds", [((), snapshot.time)]))
    if snapshot.tick_seconds is not None:
        out.append(_family("gputop_sample_duration_seconds", [((), snapshot.tick_seconds)]))
    errors = sorted(totals.read_errors.items())
    out.append(_family("gputop_read_errors_total", (((k,), float(v)) for k, v in errors)))
    return out


def _text(value: int | None) -> str:
    return "" if value is None else str(value)
