"""The host panel's view: the host sample in, lines of parts out. No Textual here."""

from __future__ import annotations

from collections.abc import Sequence

from gputop import fmt
from gputop.model import HostSample
from gputop.views.parts import Parts, bar, level, pct4, used_total

#: iowait from which the host panel marks it.
IOWAIT_WARN_PERCENT = 20.0


def host_lines(host: HostSample | None, width: int, *, compact: bool) -> tuple[Parts, ...]:
    if host is None:
        return ((("host: n/a (no host sample)", "dim"),),)
    digits = 1 if compact else 2
    load = (
        " ".join(fmt.number(v, "", digits) for v in host.load_average)
        if host.load_average is not None
        else fmt.NA
    )
    mem = host.memory
    mem_pct = fmt.ratio_percent(mem.used, mem.total)
    swap_pct = fmt.ratio_percent(host.swap.used, host.swap.total)
    iowait = host.iowait_percent
    io_role = "warn" if iowait is not None and iowait >= IOWAIT_WARN_PERCENT else ""
    cpu: Parts = (
        ("CPU ", "label"),
        (pct4(host.cpu_percent) + " ", ""),
        *bar(host.cpu_percent, 8 if compact else 10),
        ("  iowait ", "label"),
        (fmt.percent(iowait), io_role),
        ("  load ", "label"),
        (load, ""),
    )
    ram: Parts = (
        ("  RAM ", "label"),
        (f"{used_total(mem.used, mem.total)} {fmt.percent(mem_pct)}", ""),
    )
    swap_used = (
        fmt.bytes_(host.swap.used) if compact else used_total(host.swap.used, host.swap.total)
    )
    swap: Parts = (("swap ", "label"), (f"{swap_used} {fmt.percent(swap_pct)}", ""))
    io: Parts = (
        ("disk ", "label"),
        ("R ", "label"),
        (fmt.rate(host.disk.read_bytes_per_s), ""),
        (" W ", "label"),
        (fmt.rate(host.disk.write_bytes_per_s), ""),
        ("  net ", "label"),
        ("rx ", "label"),
        (fmt.rate(host.net.rx_bytes_per_s), ""),
        (" tx ", "label"),
        (fmt.rate(host.net.tx_bytes_per_s), ""),
    )
    cores = host.cpu_count if host.cpu_count is not None else len(host.cpu_per_core)
    freq = f" @ {fmt.number(host.cpu_freq_mhz, 'MHz')}" if host.cpu_freq_mhz is not None else ""
    if compact:
        line1: Parts = (*cpu, *ram)
        line2: Parts = (*swap, ("  ", ""), *io)
    else:
        line1 = (*cpu, *ram, ("  ", ""), *swap)
        line2 = (*io, (f"  {cores} cores{freq}", "dim"))
    return (line1, line2, *core_lines(host.cpu_per_core, width, max_rows=2 if compact else 4))


def core_lines(per_core: Sequence[float], width: int, *, max_rows: int) -> list[Parts]:
    """One cell per core (▁..█, fixed 0-100 %), wrapped; '+N' when cores do not fit."""
    if not per_core:
        return []
    label = "cores "
    room = max(8, width - len(label))
    cells = "".join(level(v) for v in per_core)
    rows = [cells[i : i + room] for i in range(0, len(cells), room)]
    if len(rows) > max_rows:
        rows = rows[:max_rows]
        more = ""
        for _ in range(3):  # the marker's own width decides how many cells it hides
            hidden = len(cells) - (room * max_rows - len(more))
            more = f" +{hidden}"
        rows[-1] = rows[-1][: room - len(more)] + more
    pad = " " * len(label)
    return [((label if i == 0 else pad, "label"), (row, "cores")) for i, row in enumerate(rows)]
