"""The ``--once`` text table: plain ASCII in 80 columns (wide characters count as two),
with a verdict per GPU and a "Jobs" section when given a diagnosis."""

from __future__ import annotations

import textwrap

from gputop import __version__, cells, fmt
from gputop.analysis.kinds import LABELS, WARMING_UP
from gputop.cells import fit as pad
from gputop.diagnosis import Diagnosis
from gputop.model import LABELLED_METRICS, GpuSample, Owner, ProcessInfo, Snapshot, Verdict
from gputop.present import children_of, descendants
from gputop.sources.owners import owner_label
from gputop.views.gpu_view import (
    activity_text,
    has_inside,
    has_nvlink,
    inside_parts,
    nvlink_parts,
    pcie_percent,
)
from gputop.views.parts import EXITED, gpu_ranges, plain, used_total
from gputop.views.probe_view import job_probe_cell
from gputop.views.process_view import time_text

WIDTH = 80


def fit(text: str) -> str:
    return cells.truncate(text, WIDTH)


def _wrap(text: str, indent: int = 0) -> list[str]:
    pad = " " * indent
    return [
        fit(line)
        for line in textwrap.wrap(
            text, WIDTH, initial_indent=pad, subsequent_indent=pad + "  ", break_long_words=True
        )
    ] or [pad]


def _link(gen: int | None, width: int | None) -> str:
    if gen is None and width is None:
        return fmt.NA
    return f"gen{fmt.number(gen)} x{fmt.number(width)}"


def _share(share: float | None) -> str:
    return "" if share is None else f" {fmt.percent(share)}"


def _short_command(command: str | None) -> str:
    """'/usr/bin/python3 x' -> 'python3 x'."""
    if not command:
        return fmt.NA
    first, _, rest = command.partition(" ")
    first = first.rsplit("/", 1)[-1] or first
    return f"{first} {rest}" if rest else first


def _verdict_lines(verdict: Verdict | None, indent: int) -> list[str]:
    """Verdict and advice, wrapped. A warming-up verdict is its label only: the note
    under the tables says what it waits for."""
    if verdict is None:
        return [fit(" " * indent + "Verdict: n/a")]
    also = ", ".join(LABELS.get(k, k) for k in verdict.also)
    head = f"Verdict: {verdict.label}" + (f" (also: {also})" if verdict.also else "")
    if verdict.kind == WARMING_UP:
        return _wrap(head, indent)
    lines = _wrap(f"{head}: {verdict.evidence}", indent)
    if verdict.advice:
        lines.extend(_wrap(f"Advice: {verdict.advice}", indent))
    return lines


def _gpu_lines(g: GpuSample) -> list[str]:
    name = g.name or fmt.NA
    if g.lost:
        reason = g.lost_reason or "fell off the bus"
        return [fit(f"{g.index:>3}  {pad(name, 22)} LOST: {reason}")]
    mem = used_total(g.memory.used, g.memory.total)
    power = f"{fmt.number(g.power_w, 'W')}/{fmt.number(g.power_limit_w, 'W')}"
    lines = [
        f"{g.index:>3}  {pad(name, 22)} {fmt.percent(g.utilization.gpu):>5} "
        f"{fmt.percent(g.utilization.memory):>5} {mem:>17} "
        f"{fmt.number(g.temperature_c, 'C'):>5} {power:>11}"
    ]
    p = g.pcie
    tx_share, rx_share = pcie_percent(g)
    lines.append(
        fit(
            f"     PCIe {_link(p.gen, p.width)} (max {_link(p.max_gen, p.max_width)})"
            f"  RX {fmt.rate(p.rx_bytes_per_s)}{_share(rx_share)}"
            f"  TX {fmt.rate(p.tx_bytes_per_s)}{_share(tx_share)}"
        )
    )
    if has_inside(g):  # GPM: what the SMs did while "utilization" says a kernel ran
        lines.extend(_wrap(activity_text(g), indent=5))
    if has_nvlink(g):
        lines.append(fit("     " + plain(nvlink_parts(g))))
    reasons = g.clock_event_reasons
    slow = fmt.NA if reasons is None else ", ".join(reasons) or "none"
    c = g.clocks
    clocks = f"     SM clock {fmt.number(c.sm_mhz, 'MHz')} of {fmt.number(c.sm_max_mhz, 'MHz')}"
    for metric in LABELLED_METRICS:
        clocks += f"  {metric.label.capitalize()} {fmt.shown(metric.get(g), metric.text)}"
    events = f"Clock events: {slow}"
    if cells.cell_width(clocks) + 2 + cells.cell_width(events) <= WIDTH:
        lines.append(f"{clocks}  {events}")
    else:
        lines.append(clocks)
        lines.extend(_wrap(events, indent=5))
    if g.mig_mode:
        lines.append(f"     MIG on: {len(g.mig_devices)} MIG devices")
        for m in g.mig_devices:
            procs = g.processes_of(m)
            pids = " ".join(str(p.pid) for p in procs) or "none"
            lines.append(
                fit(
                    f"       {pad(fmt.clean_text(m.profile or m.name, 16) or fmt.NA, 9)} "
                    f"GI {fmt.number(m.gpu_instance_id)} CI {fmt.number(m.compute_instance_id)}"
                    f"  mem {used_total(m.memory.used, m.memory.total)}"
                    + (f"  {plain(inside_parts(m)).strip()}" if has_inside(m) else "")
                    + f"  processes: {pids}"
                )
            )
    return lines


#: pid -> its rows with their position in ``Snapshot.processes`` (built once per table).
_Rows = dict[int, list[tuple[int, ProcessInfo]]]


def _children_summary(pid: int, children: dict[int, list[int]], rows: _Rows) -> str | None:
    kids = descendants({pid}, children) - {pid}
    # in the snapshot's order, as a scan of its processes would find them
    found = sorted((e for k in kids for e in rows.get(k, ())), key=lambda e: e[0])
    infos = [p for _, p in found]
    if not infos:
        return None
    cpu = [p.cpu_percent for p in infos]
    read = [p.read_bytes_per_s for p in infos]
    total_cpu = None if any(v is None for v in cpu) else sum(v or 0.0 for v in cpu)
    total_read = None if any(v is None for v in read) else sum(v or 0.0 for v in read)
    blocked = sum(1 for p in infos if p.status == "disk-sleep")
    text = (
        f"{' ' * 13}+ {len(infos)} child process{'es' if len(infos) != 1 else ''}:"
        f" CPU {fmt.percent(total_cpu)}, read {fmt.rate(total_read)}"
    )
    if blocked:
        text += f", {blocked} in disk-sleep"
    return fit(text)


def _process_lines(snapshot: Snapshot) -> list[str]:
    lines = [
        f"{'GPU':>3} {'PID':>7} {'USER':<8} {'GPU-MEM':>8} {'SM':>4} {'CPU':>5} "
        f"{'TIME':>8}  COMMAND"
    ]
    children = children_of(snapshot.processes)  # indexed once, not scanned per process
    rows: _Rows = {}
    for i, row in enumerate(snapshot.processes):
        rows.setdefault(row.pid, []).append((i, row))
    for g in snapshot.gpus:
        if g.lost:
            lines.append(f"{g.index:>3} (GPU lost: processes unknown)")
            continue
        if g.processes_unavailable:
            why = fmt.clean_text(g.processes_unavailable, 300) or ""
            if not why.startswith("process list unavailable"):
                why = f"processes {'incomplete' if g.processes else 'unknown'}: {why}"
            lines.extend(_wrap(f"{g.index:>3} ({why})"))
        if not g.processes:
            if not g.processes_unavailable:
                lines.append(f"{g.index:>3} (no processes)")
            continue
        for p in sorted(g.processes, key=lambda p: p.pid):
            info = p.host or (rows[p.pid][0][1] if p.pid in rows else None)
            prefix = f"{g.index:>3} {p.pid:>7} "
            numbers = f"{fmt.bytes_(p.gpu_memory):>8} {fmt.percent(p.sm_percent):>4}"
            if info is not None and not info.visible:
                lines.append(
                    fit(f"{prefix}{pad(fmt.NA, 8)} {numbers}  not visible (another PID namespace)")
                )
                continue
            user = info.user if info and info.user else fmt.NA
            cpu = fmt.percent(info.cpu_percent if info else None)
            command = _short_command(info.command if info else None)
            if info is None:
                command = "n/a (no host information)"
            elif info.status == "dead":
                command = EXITED
            elif info.status == "zombie":
                command = f"[zombie] {_short_command(info.name)}"
            command = _owned(info.owner if info else None, command)
            age = time_text(fmt.since(snapshot.time, info.create_time if info else None))
            lines.append(fit(f"{prefix}{pad(user, 8)} {numbers} {cpu:>5} {age:>8}  {command}"))
            if kids := _children_summary(p.pid, children, rows):
                lines.append(kids)
    return lines


def _holder_lines(snapshot: Snapshot) -> list[str]:
    if not snapshot.unlisted_holders:
        return []
    lines = [
        "Unlisted holders (hold /dev/nvidia*, not in NVML's process list):",
        f"{'GPU':>3} {'PID':>7} {'USER':<8} COMMAND",
    ]
    for h in snapshot.unlisted_holders:
        gpu = "?" if h.gpu is None else str(h.gpu)
        command = _short_command(h.command or h.name)
        lines.append(fit(f"{gpu:>3} {h.pid:>7} {pad(h.user or fmt.NA, 8)} {command}"))
    return lines


def _owned(owner: Owner | None, command: str) -> str:
    """The command led by its owner, as the dashboard shows it at 80 columns."""
    label = owner_label(owner)
    return f"[{label}] {command}" if label else command


def _job_command(command: str | None) -> str:
    """'python3 /usr/local/bin/torchrun --x' -> 'torchrun --x'."""
    short = _short_command(command)
    first, _, rest = short.partition(" ")
    if first.startswith("python") and rest and not rest.startswith("-"):
        script, _, args = rest.partition(" ")
        if "/" in script:
            return _short_command(f"{script} {args}".strip())
    return short


def _job_lines(diagnosis: Diagnosis) -> list[str]:
    lines = ["Jobs (a launch and its process tree; CORES: CPU used by the whole tree):"]
    if not diagnosis.jobs:
        return [*lines, "  (no jobs)"]
    lines.append(f"{'ROOT':>7} {'USER':<8} {'GPUS':<8} {'WORKERS':>7} {'CORES':>5}  COMMAND")
    for job in diagnosis.jobs:
        if job.visible is False:
            user, command = fmt.NA, "not visible (another PID namespace)"
        else:
            user = job.user or fmt.NA
            command = _owned(job.owner, _job_command(job.command or job.name))
        if job.probe is not None:  # measured in the training process: before the command
            command = f"{job_probe_cell(job.probe, compact=False)}  {command}"
        lines.append(
            fit(
                f"{job.root_pid:>7} {pad(user, 8)} {pad(gpu_ranges(job.gpus, fmt.NA), 8)} "
                f"{job.workers:>7} {fmt.number(job.cores, '', 1):>5}  {command}"
            )
        )
        lines.extend(_verdict_lines(diagnosis.job_verdicts.get(job.id), 8))
    return lines


def _warming_note(diagnosis: Diagnosis) -> list[str]:
    verdicts = [*diagnosis.gpus.values(), *diagnosis.job_verdicts.values()]
    warming = next((v for v in verdicts if v.kind == WARMING_UP), None)
    if warming is None:
        return []
    t = diagnosis.thresholds
    return _wrap(
        f"Warming up: {warming.evidence}. A snapshot sees too short a time for most "
        f"verdicts; the dashboard (gputop) judges a sliding {t.window_seconds:g} s window."
    )


def _host_lines(snapshot: Snapshot) -> list[str]:
    h = snapshot.host
    if h is None:
        return ["Host  n/a (host information could not be read)"]
    loads = h.load_average
    load = fmt.NA if loads is None else " ".join(fmt.number(v, "", 2) for v in loads)
    lines = [
        fit(
            f"Host  CPU {fmt.percent(h.cpu_percent, 1)} of {fmt.number(h.cpu_count)} cores"
            f"  load {load}  iowait {fmt.percent(h.iowait_percent, 1)}"
            f"  {fmt.number(h.cpu_freq_mhz, 'MHz')}"
        ),
        fit(
            f"      RAM {fmt.bytes_(h.memory.used)} used of {fmt.bytes_(h.memory.total)},"
            f" {fmt.bytes_(h.memory.available)} available"
            f"  swap {used_total(h.swap.used, h.swap.total)}"
        ),
        fit(
            f"      Disk read {fmt.rate(h.disk.read_bytes_per_s)}"
            f" write {fmt.rate(h.disk.write_bytes_per_s)}"
            f"  Net rx {fmt.rate(h.net.rx_bytes_per_s)} tx {fmt.rate(h.net.tx_bytes_per_s)}"
        ),
    ]
    if h.cpu_per_core:
        lines.append("      Per-core load, one digit per core (0: <10 %, 9: >=90 %):")
        digits = "".join(
            "?" if fmt.finite(v) is None else str(min(9, max(0, int(v // 10))))
            for v in h.cpu_per_core
        )
        label = "      Cores "
        step = WIDTH - len(label)
        lines.extend(label + digits[i : i + step] for i in range(0, len(digits), step))
    # Which window the rates cover (``--once``'s two readings are a short time apart).
    rates = "Rates (CPU %, disk, network, per process)"
    if h.rate_seconds is None:
        lines.extend(_wrap(f"{rates}: not known yet (one reading)", 6))
    else:
        lines.extend(_wrap(f"{rates} over the last {fmt.number(h.rate_seconds, '', 2)} s", 6))
    return lines


def render_text(
    snapshot: Snapshot, *, total_gpus: int | None = None, diagnosis: Diagnosis | None = None
) -> str:
    """``total_gpus``: how many GPUs there were before filtering."""
    stamp = fmt.clock(snapshot.time, "%Y-%m-%d %H:%M:%S")
    d = snapshot.driver
    lines = [fit(f"gputop {__version__}  {snapshot.hostname}  {stamp}  source: {snapshot.source}")]
    if d.available:
        count = f"{len(snapshot.gpus)} GPU{'s' if len(snapshot.gpus) != 1 else ''}"
        if total_gpus is not None and total_gpus != len(snapshot.gpus):
            count = f"{len(snapshot.gpus)} of {total_gpus} GPUs shown"
        lines.append(
            fit(f"Driver {d.driver_version or fmt.NA}  CUDA {d.cuda_version or fmt.NA}  {count}")
        )
        for fallback in d.compat:  # what an older driver made gputop fall back to
            lines.extend(_wrap(f"Older driver: {fmt.clean_text(fallback, 200) or ''}", indent=2))
        lines += [
            "",
            f"{'GPU':>3}  {'Name':<22} {'Util':>5} {'MemU':>5} {'Memory used/total':>17} "
            f"{'Temp':>5} {'Power/cap':>11}",
        ]
        for g in snapshot.gpus:
            lines.extend(_gpu_lines(g))
            if diagnosis is not None:
                lines.extend(_verdict_lines(diagnosis.gpus.get(g.index), 5))
        lines += ["", "Processes:", *_process_lines(snapshot)]
        if diagnosis is not None:
            lines += ["", *_job_lines(diagnosis)]
            if diagnosis.error is not None:
                lines.extend(_wrap(f"Verdicts unavailable: the analysis failed: {diagnosis.error}"))
            if note := _warming_note(diagnosis):
                lines += ["", *note]
    else:
        lines.extend(_wrap(f"NVIDIA driver not available: {d.error or 'unknown reason'}"))
        lines.append("No GPU information; host only.")
    if holders := _holder_lines(snapshot):
        lines += ["", *holders]
    lines += ["", *_host_lines(snapshot)]
    if snapshot.errors:
        lines += ["", "Errors while sampling:"]
        for e in snapshot.errors:
            where = ", ".join(x for x in (None if e.gpu is None else f"GPU {e.gpu}", e.metric) if x)
            lines.extend(_wrap(f"{e.source}{f' ({where})' if where else ''}: {e.message}", 2))
    return "\n".join(lines) + "\n"
