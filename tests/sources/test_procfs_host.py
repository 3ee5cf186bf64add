"""The host-wide /proc parsers (gputop/sources/procfs.py) and HostReader.read_host against
psutil, which they replace on the per-tick path: the same files give the same values.

psutil reads its files under ``psutil.PROCFS_PATH``: pointed at a directory of copies
(of this machine's files, or of kernel-shaped samples), psutil and gputop read the very
same bytes, so the comparison is exact and does not race the live counters.
"""

from __future__ import annotations

import os
import warnings
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from psutil import _pslinux

from gputop.sources import procfs
from gputop.sources.host import HostReader

Freq = namedtuple("Freq", "current min max")

HOST_FILES = ("stat", "meminfo", "cpuinfo", "diskstats", "net/dev")


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty directory that psutil takes for /proc."""
    root = tmp_path / "proc"
    (root / "net").mkdir(parents=True)
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # psutil: no /proc/vmstat here
        yield root


def _copy_this_machine(root: Path) -> None:
    for name in HOST_FILES:
        (root / name).write_bytes(procfs.read_all(f"/proc/{name}"))


def _old_cpu_percents(old: Any, new: Any) -> tuple[float | None, float | None]:
    """HostReader's formula before it read /proc/stat itself, on psutil's named tuples."""
    d = {k: max(0.0, v - getattr(old, k, 0.0)) for k, v in new._asdict().items()}
    total = sum(d.values()) - d.get("guest", 0.0) - d.get("guest_nice", 0.0)
    if total <= 0:
        return None, None
    busy = total - d.get("idle", 0.0) - d.get("iowait", 0.0)
    iowait = None if "iowait" not in d else min(100.0, max(0.0, 100.0 * d["iowait"] / total))
    return min(100.0, max(0.0, 100.0 * busy / total)), iowait


# --- this machine ----------------------------------------------------------------------


def test_this_machines_files_parse_as_psutil_reads_them(fake_proc: Path) -> None:
    _copy_this_machine(fake_proc)
    data = {name: (fake_proc / name).read_bytes() for name in HOST_FILES}

    parsed = procfs.parse_cpu_times(data["stat"])
    assert parsed is not None
    total, cores = parsed
    assert total == tuple(psutil.cpu_times())
    assert cores == [tuple(c) for c in psutil.cpu_times(percpu=True)]
    assert len(cores) == psutil.cpu_count()

    mem = procfs.parse_meminfo(data["meminfo"])
    assert mem is not None
    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    assert (mem.total, mem.used, mem.available) == (vm.total, vm.used, vm.available)
    assert (mem.swap_total, mem.swap_used) == (sw.total, sw.used)

    disks = psutil.disk_io_counters(perdisk=True, nowrap=False)
    assert procfs.parse_diskstats(data["diskstats"]) == {
        name: (c.read_bytes, c.write_bytes) for name, c in disks.items()
    }
    nics = psutil.net_io_counters(pernic=True, nowrap=False)
    assert procfs.parse_net_dev(data["net/dev"]) == {
        name: (c.bytes_recv, c.bytes_sent) for name, c in nics.items()
    }

    reader = HostReader(proc_root=str(fake_proc))
    freq = psutil.cpu_freq()
    assert reader._cpu_freq_mhz() == (None if freq is None else freq.current)


def test_read_host_gives_psutils_values_on_the_same_files(fake_proc: Path) -> None:
    """The whole sample, two ticks: levels equal psutil's, percentages equal the former
    formula on psutil's tuples, rates the deltas of psutil's counters."""
    reader = HostReader(proc_root=str(fake_proc))
    before: dict[str, Any] = {}
    for tick in range(2):
        _copy_this_machine(fake_proc)
        if tick == 1:  # make sure time passed on every CPU of the copy
            stat = (fake_proc / "stat").read_bytes()
            (fake_proc / "stat").write_bytes(_busier(stat))
        sample = reader.read_host()
        assert reader.last_errors == ()
        now = {
            "cpu": psutil.cpu_times(),
            "cores": psutil.cpu_times(percpu=True),
            "disk": psutil.disk_io_counters(perdisk=True, nowrap=False),
            "net": psutil.net_io_counters(pernic=True, nowrap=False),
        }
        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        assert (sample.memory.total, sample.memory.used, sample.memory.available) == (
            vm.total,
            vm.used,
            vm.available,
        )
        assert (sample.swap.total, sample.swap.used) == (sw.total, sw.used)
        assert sample.cpu_count == psutil.cpu_count()
        if tick == 0:
            assert sample.cpu_percent is None and sample.cpu_per_core == ()
        else:
            cpu, iowait = _old_cpu_percents(before["cpu"], now["cpu"])
            assert (sample.cpu_percent, sample.iowait_percent) == (cpu, iowait)
            assert sample.cpu_per_core == tuple(
                _old_cpu_percents(a, b)[0]
                for a, b in zip(before["cores"], now["cores"], strict=True)
            )
            dt = sample.rate_seconds
            assert dt is not None and dt > 0
            rx = sum(
                c.bytes_recv - before["net"][n].bytes_recv
                for n, c in now["net"].items()
                if n != "lo"
            )
            assert sample.net.rx_bytes_per_s == rx / dt
        before = now


def _busier(stat: bytes) -> bytes:
    """/proc/stat with 100 more user and 50 more idle ticks on every cpu line."""
    out = []
    for line in stat.split(b"\n"):
        if line.startswith(b"cpu"):
            f = line.split()
            f[1] = str(int(f[1]) + 100).encode()
            f[4] = str(int(f[4]) + 50).encode()
            line = b" ".join(f)
        out.append(line)
    return b"\n".join(out)


# --- kernel-shaped samples -------------------------------------------------------------

STAT_8 = b"""cpu  2109820 16601 141125 3583982 5070 0 1926 584
cpu0 1007746 7876 66277 1846190 724 0 641 281
cpu1 1102073 8725 74848 1737792 4346 0 1284 303
intr 12608067 0 0 0 5873 665
ctxt 22771617
btime 1764546000
processes 2466107
procs_running 2
procs_blocked 0
softirq 4585064 0 1338094 37 761080 0 0 3 1331546 0 1154304
"""

STAT_7 = b"""cpu  2109820 16601 141125 3583982 5070 0 1926
cpu0 2109820 16601 141125 3583982 5070 0 1926
intr 12608067 0 0 0
"""

STAT_11 = b"""cpu  10 20 30 40 50 60 70 80 90 100 110
cpu0 5 10 15 20 25 30 35 40 45 50 55
cpu1 5 10 15 20 25 30 35 40 45 50 55
"""


@pytest.mark.parametrize("stat", [STAT_8, STAT_7, STAT_11], ids=["no-guest", "2.6.0", "future"])
def test_stat_of_other_kernels_parses_as_psutil_would_read_it(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch, stat: bytes
) -> None:
    """psutil fixes its CPU time fields on import from the running kernel's /proc/stat:
    its own function gives the fields it would use on the kernel of the sample."""
    (fake_proc / "stat").write_bytes(stat)
    monkeypatch.setattr(_pslinux.ntp, "scputimes", _pslinux._scputimes_ntuple(str(fake_proc)))
    parsed = procfs.parse_cpu_times(stat)
    assert parsed is not None
    total, cores = parsed
    assert total == tuple(psutil.cpu_times())
    assert cores == [tuple(c) for c in psutil.cpu_times(percpu=True)]
    assert len(total) == min(10, len(stat.split(b"\n")[0].split()) - 1)


@pytest.mark.parametrize(
    "stat",
    [
        b"",
        b"intr 1 2\n",
        b"cpu  1 2 3 4 5 6\n",
        b"cpu  1 2 3 4 5 6 x\n",
        b"cpu  1 2 3 4 5 6 7\ncpu0 1 2\n",
    ],
)
def test_stat_of_unknown_shape_is_left_to_psutil(stat: bytes) -> None:
    assert procfs.parse_cpu_times(stat) is None


MEMINFO = b"""MemTotal:       24684084 kB
MemFree:        23294308 kB
MemAvailable:   23900708 kB
Buffers:           12276 kB
Cached:           776612 kB
SwapCached:            0 kB
Active:           338260 kB
Inactive:         636916 kB
Active(file):     211524 kB
Inactive(file):   530512 kB
SwapTotal:       2097148 kB
SwapFree:        1048000 kB
Shmem:              8872 kB
SReclaimable:     124324 kB
Slab:             265088 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""


def _meminfo(**changes: bytes | None) -> bytes:
    """MEMINFO with lines replaced (``MemAvailable=b"0"``) or removed (None)."""
    out = []
    for line in MEMINFO.split(b"\n"):
        key = line.split(b":")[0].decode()
        if key in changes:
            value = changes[key]
            if value is None:
                continue
            line = f"{key}:".encode() + b" " + value + b" kB"
        out.append(line)
    return b"\n".join(out)


@pytest.mark.parametrize(
    ("meminfo", "ours"),
    [
        (MEMINFO, True),
        (_meminfo(MemAvailable=None), False),  # before Linux 3.14: psutil estimates
        (_meminfo(MemAvailable=b"0"), False),  # a kernel bug psutil works around
        (_meminfo(MemAvailable=b"99999999"), True),  # an LXC container: MemFree
        (_meminfo(SwapTotal=None, SwapFree=None), True),  # swap from sysinfo(2)
        (_meminfo(SwapFree=None), True),
    ],
    ids=["current", "no-MemAvailable", "MemAvailable-0", "lxc", "no-swap-lines", "no-SwapFree"],
)
def test_meminfo_of_other_kernels_gives_psutils_values(
    fake_proc: Path, meminfo: bytes, ours: bool
) -> None:
    """Where psutil would work the value out another way (an estimate from
    /proc/zoneinfo, sysinfo(2)), the reader asks psutil: the values are psutil's."""
    (fake_proc / "meminfo").write_bytes(meminfo)
    parsed = procfs.parse_meminfo(meminfo)
    assert (parsed is not None) == ours
    sample = HostReader(proc_root=str(fake_proc)).read_host()
    vm, sw = psutil.virtual_memory(), psutil.swap_memory()
    assert (sample.memory.total, sample.memory.used, sample.memory.available) == (
        vm.total,
        vm.used,
        vm.available,
    )
    assert (sample.swap.total, sample.swap.used) == (sw.total, sw.used)
    if parsed is not None:
        assert (parsed.total, parsed.used, parsed.available) == (vm.total, vm.used, vm.available)
    if parsed is not None and parsed.swap_total is not None:
        assert (parsed.swap_total, parsed.swap_used) == (sw.total, sw.used)


def test_meminfo_without_memtotal_is_left_to_psutil() -> None:
    assert procfs.parse_meminfo(_meminfo(MemTotal=None)) is None
    assert procfs.parse_meminfo(_meminfo(MemFree=None)) is None


DISKSTATS = b"""   7       0 loop0 38 0 626 3 0 0 0 0 0 12 3 0 0 0 0 0 0
 253       0 vda 2214613 44937 307074513 935717 1025633 633866 24246392 2071227 0 1357388 3193013 0 0 0 0 64917 186068
 253       1 vda1 2214340 44937 307054297 935623 1025633 633866 24246392 2071227 0 1357312 3006850 0 0 0 0 0 0
   8       0 sda 100 5 2000 50 200 10 4000 70 0 90 120 0 0 0 0
   8      16 sdb 10 1 300 5 20 2 600 7 0 9 12
   3       1 hda1 8 16 24 32
"""  # noqa: E501


def test_diskstats_of_every_shape_parses_as_psutil(fake_proc: Path) -> None:
    """5.5+ (20 fields), 4.18 (18), Linux 2.4 (15), 2.6 (14) and a 2.6 partition (7)."""
    (fake_proc / "diskstats").write_bytes(DISKSTATS)
    disks = psutil.disk_io_counters(perdisk=True, nowrap=False)
    expected = {name: (c.read_bytes, c.write_bytes) for name, c in disks.items()}
    assert procfs.parse_diskstats(DISKSTATS) == expected
    assert expected["vda"] == (307074513 * 512, 24246392 * 512)
    assert expected["hda1"] == (16 * 512, 32 * 512)
    assert procfs.parse_diskstats(b"   8 0 sda 1 2 3 4 5\n") is None  # psutil: ValueError


NET_DEV = b"""Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9018862   61270    0    0    0     0          0         0  9018862   61270    0    0    0     0       0          0
  eth0: 1416152026 1055209    0    0    0     0          0         0  3897806   44616    0    0    0     0       0          0
veth1a2b3c4:   12345     67    0    0    0     0          0         0    89012     34    0    0    0     0       0          0
"""  # noqa: E501


def test_net_dev_parses_as_psutil(fake_proc: Path) -> None:
    (fake_proc / "net" / "dev").write_bytes(NET_DEV)
    nics = psutil.net_io_counters(pernic=True, nowrap=False)
    expected = {name: (c.bytes_recv, c.bytes_sent) for name, c in nics.items()}
    assert procfs.parse_net_dev(NET_DEV) == expected
    assert expected["eth0"] == (1416152026, 3897806)
    assert procfs.parse_net_dev(NET_DEV + b"  eth1: 1 2 3\n") is None  # psutil: ValueError


def _cpuinfo(mhz: list[bytes]) -> bytes:
    return b"".join(
        b"processor\t: %d\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
        b"cpu MHz\t\t: %s\ncache size\t: 1024 KB\nflags\t\t: fpu vme de pse\n\n" % (i, m)
        for i, m in enumerate(mhz)
    )


CPUINFO = _cpuinfo([b"2596.120", b"3400.001", b"1499.999", b"2893.202"])


def test_cpuinfo_mhz_parses_as_psutil(fake_proc: Path) -> None:
    (fake_proc / "cpuinfo").write_bytes(CPUINFO)
    assert procfs.parse_cpuinfo_mhz(CPUINFO) == _pslinux._cpu_get_cpuinfo_freq()
    # s390 writes two lines a CPU; psutil takes both (and any case of "cpu MHz").
    s390 = b"cpu MHz dynamic : 5200\ncpu MHz static  : 5200\nCPU MHZ: 7\n"
    (fake_proc / "cpuinfo").write_bytes(s390)
    assert procfs.parse_cpuinfo_mhz(s390) == _pslinux._cpu_get_cpuinfo_freq() == [5200, 5200, 7]
    assert procfs.parse_cpuinfo_mhz(b"processor: 0\nmodel: arm\n") == []  # ARM: none
    assert procfs.parse_cpuinfo_mhz(b"cpu MHz\t\t 2596\n") is None  # no ':'


def test_cpu_freq_without_cpufreq_in_sysfs_is_psutils(fake_proc: Path, tmp_path: Path) -> None:
    """psutil's /proc/cpuinfo variant: the plain mean of the "cpu MHz" lines."""
    (fake_proc / "cpuinfo").write_bytes(CPUINFO)
    reader = HostReader(proc_root=str(fake_proc), sys_cpu=str(tmp_path / "nosys"))
    expected = 0.0
    for cpu in _pslinux._cpu_get_cpuinfo_freq():
        expected += cpu
    assert reader._cpu_freq_mhz() == expected / 4
    if not _has_sysfs_cpufreq():  # psutil's own variant here: the same value
        assert reader._cpu_freq_mhz() == psutil.cpu_freq().current


def _has_sysfs_cpufreq() -> bool:
    return os.path.exists("/sys/devices/system/cpu/cpufreq/policy0") or os.path.exists(
        "/sys/devices/system/cpu/cpu0/cpufreq"
    )


def test_cpu_freq_with_a_cpufreq_policy_per_cpu_is_psutils(
    fake_proc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psutil's sysfs variant with one policy a CPU takes cpuinfo's values truncated to
    kHz (psutil#1851); with another number of policies it reads scaling_cur_freq: left to
    psutil."""
    (fake_proc / "cpuinfo").write_bytes(CPUINFO)
    sys_cpu = tmp_path / "cpu"
    for i in range(4):
        (sys_cpu / "cpufreq" / f"policy{i}").mkdir(parents=True)
    reader = HostReader(proc_root=str(fake_proc), sys_cpu=str(sys_cpu))
    currents = [int(mhz * 1000) / 1000 for mhz in _pslinux._cpu_get_cpuinfo_freq()]
    expected = 0.0
    for c in currents:
        expected += c
    assert reader._cpu_freq_mhz() == expected / 4
    assert currents[2] == 1499.999 and currents[3] == 2893.202

    asked: list[bool] = []

    def psutil_cpu_freq() -> Any:
        asked.append(True)
        return Freq(1234.5, 0.0, 0.0)

    (sys_cpu / "cpufreq" / "policy3").rmdir()
    monkeypatch.setattr(psutil, "cpu_freq", psutil_cpu_freq)
    assert reader._cpu_freq_mhz() == 1234.5
    assert asked == [True]


def test_one_cpu_and_no_cpu_mhz(fake_proc: Path, tmp_path: Path) -> None:
    nosys = str(tmp_path / "nosys")
    (fake_proc / "cpuinfo").write_bytes(_cpuinfo([b"2596.120"]))
    assert HostReader(proc_root=str(fake_proc), sys_cpu=nosys)._cpu_freq_mhz() == 2596.12
    (fake_proc / "cpuinfo").write_bytes(b"processor: 0\nmodel: arm\n")
    reader = HostReader(proc_root=str(fake_proc), sys_cpu=nosys)
    assert reader._cpu_freq_mhz() is None  # psutil.cpu_freq() gives None: n/a, never 0
    assert reader.read_host().cpu_freq_mhz is None


def test_cpu_count_is_asked_again_when_a_cpu_goes_offline(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = iter([2, 1])
    asked: list[int] = []

    def cpu_count() -> int:
        asked.append(1)
        return next(counts)

    monkeypatch.setattr(psutil, "cpu_count", cpu_count)
    reader = HostReader(proc_root=str(fake_proc))
    (fake_proc / "stat").write_bytes(STAT_8)
    assert [reader.read_host().cpu_count for _ in range(3)] == [2, 2, 2]
    assert len(asked) == 1  # read once while the CPUs stay
    (fake_proc / "stat").write_bytes(STAT_8.replace(b"cpu1 ", b"intr1 "))  # cpu1 offline
    sample = reader.read_host()
    assert sample.cpu_count == 1 and len(asked) == 2
    assert sample.cpu_per_core == ()  # not the same cores as last tick: no percentages


def test_a_reader_told_not_to_read_the_frequency_does_not_open_cpuinfo(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy_this_machine(fake_proc)
    opened: list[str] = []
    real_read_all = procfs.read_all

    def read_all(path: str) -> bytes:
        opened.append(os.path.basename(path))
        return real_read_all(path)

    monkeypatch.setattr(procfs, "read_all", read_all)
    sample = HostReader(proc_root=str(fake_proc), cpu_freq=False).read_host()
    assert sample.cpu_freq_mhz is None  # not read: n/a, never 0
    assert sample.memory.total == psutil.virtual_memory().total  # the rest still comes
    assert sorted(opened) == ["dev", "diskstats", "meminfo", "stat"]
    opened.clear()
    HostReader(proc_root=str(fake_proc)).read_host()
    assert "cpuinfo" in opened  # the default reads it
