"""Every number the verdicts compare against, named, documented and overridable.

The module-level constants are the defaults. ``Thresholds`` carries one value per
constant (same name, lower case); ``Thresholds.from_overrides({"util_high": 90})`` or
``from_overrides({"UTIL_HIGH": "90"})`` (what ``--threshold UTIL_HIGH=90`` gives) returns
a copy with those values changed, after checking names, types, ranges and consistency.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# --- GPU utilization -------------------------------------------------------------------
UTIL_HIGH = 85.0  # % mean util at or above which the GPU counts as busy (gpu-bound)
UTIL_LOW = 50.0  # % mean util below which the GPU counts as starved
UTIL_OSCILLATION = 15.0  # util standard deviation (points) from which util "oscillates"
IDLE_UTIL = 5.0  # % util at or below which a sample counts as idle

# --- process tree CPU --------------------------------------------------------------------
WORKER_BUSY_CPU = 80.0  # % of one core: a worker this busy (window mean) is "near a full core"
WORKER_IDLE_CPU = 20.0  # % of one core: workers at or below this (mean) are idle
MAIN_BUSY_CPU = 90.0  # % of one core: a main (GPU) process this busy is CPU-bound
HOST_CPU_SATURATED = 90.0  # % of all cores: the host CPU is saturated

# --- disk ---------------------------------------------------------------------------------
IOWAIT_HIGH = 20.0  # % host iowait from which I/O waits are high
DISK_SLEEP_FRACTION = 0.5  # share of window samples with a job process in D state
DISK_NEAR_PEAK = 0.8  # window read rate / peak read rate seen in the whole history
DISK_MIN_READ = 10.0 * 2**20  # bytes/s: a job reading less than this is not disk-bound

# --- PCIe -----------------------------------------------------------------------------------
PCIE_NEAR_MAX = 0.7  # mean RX or TX / current link capacity, per direction
LINK_DEGRADED_FRACTION = 0.5  # share of busy samples below max gen or width

# --- clocks, memory -------------------------------------------------------------------------
THROTTLE_FRACTION = 0.5  # share of busy samples with a thermal/power throttle reason
MEM_NEARLY_FULL = 0.95  # used / total GPU memory
HELD_MEMORY_FRACTION = 0.05  # used / total with no process listed: memory is still held

# --- time ------------------------------------------------------------------------------------
WINDOW_SECONDS = 20.0  # the sliding window the verdicts look at
MIN_SAMPLES = 5  # fewer samples in the window: "warming up"
MIN_SECONDS = 4.0  # window covering less time than this: "warming up"
IDLE_HOLDER_SECONDS = 300.0  # idle (util <= IDLE_UTIL) this long while holding memory
IDLE_HOLDER_MIN_OBSERVED = 60.0  # ...or idle for all of at least this much observed history
#   while every holding process is older than IDLE_HOLDER_SECONDS


class ThresholdError(ValueError):
    """A bad threshold override: unknown name, unparsable value, out of range."""


# name -> (meaning, unit/kind of range): the README table and --help are made from this.
DOCS: dict[str, tuple[str, str]] = {
    "util_high": ("mean GPU util at or above which the GPU is busy (gpu-bound)", "percent"),
    "util_low": ("mean GPU util below which the GPU is starved", "percent"),
    "util_oscillation": (
        "util standard deviation (points) from which util oscillates; between "
        "UTIL_LOW and UTIL_HIGH an oscillating GPU counts as starved",
        "percent",
    ),
    "idle_util": ("util at or below which a sample is idle", "percent"),
    "worker_busy_cpu": (
        "mean CPU of the job's workers (% of one core) from which they are near a full core",
        "percent",
    ),
    "worker_idle_cpu": (
        "mean CPU of the workers (% of one core) at or below which they idle",
        "percent",
    ),
    "main_busy_cpu": (
        "CPU of a main (GPU) process, % of one core, from which it is CPU-bound",
        "percent",
    ),
    "host_cpu_saturated": ("host CPU % (all cores) from which the host is saturated", "percent"),
    "iowait_high": ("host iowait % from which I/O waits are high", "percent"),
    "disk_sleep_fraction": (
        "share of window samples with a job process in D state (disk-sleep) that means the "
        "job waits on I/O",
        "fraction",
    ),
    "disk_near_peak": (
        "host disk read rate (window mean) / highest rate seen in the history from which the "
        "disk is near its peak",
        "fraction",
    ),
    "disk_min_read": ("bytes/s a job must read to be called disk-bound by rate", "bytes"),
    "pcie_near_max": (
        "mean PCIe RX or TX / current link capacity from which the link is full",
        "fraction",
    ),
    "link_degraded_fraction": (
        "share of busy samples with the link below its max gen or width that means degraded",
        "fraction",
    ),
    "throttle_fraction": (
        "share of busy samples with a thermal or power throttle reason that means throttled",
        "fraction",
    ),
    "mem_nearly_full": ("used / total GPU memory from which memory is nearly full", "fraction"),
    "held_memory_fraction": (
        "used / total GPU memory from which memory counts as held even with no process listed",
        "fraction",
    ),
    "window_seconds": ("length of the sliding window the verdicts judge", "seconds"),
    "min_samples": ("fewer samples than this in the window: warming up", "count"),
    "min_seconds": ("window covering less time than this: warming up", "seconds"),
    "idle_holder_seconds": (
        "idle this long while holding GPU memory: idle memory holder",
        "seconds",
    ),
    "idle_holder_min_observed": (
        "idle for all observed history, at least this long, with every holding process older "
        "than IDLE_HOLDER_SECONDS: idle memory holder too",
        "seconds",
    ),
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    util_high: float = UTIL_HIGH
    util_low: float = UTIL_LOW
    util_oscillation: float = UTIL_OSCILLATION
    idle_util: float = IDLE_UTIL
    worker_busy_cpu: float = WORKER_BUSY_CPU
    worker_idle_cpu: float = WORKER_IDLE_CPU
    main_busy_cpu: float = MAIN_BUSY_CPU
    host_cpu_saturated: float = HOST_CPU_SATURATED
    iowait_high: float = IOWAIT_HIGH
    disk_sleep_fraction: float = DISK_SLEEP_FRACTION
    disk_near_peak: float = DISK_NEAR_PEAK
    disk_min_read: float = DISK_MIN_READ
    pcie_near_max: float = PCIE_NEAR_MAX
    link_degraded_fraction: float = LINK_DEGRADED_FRACTION
    throttle_fraction: float = THROTTLE_FRACTION
    mem_nearly_full: float = MEM_NEARLY_FULL
    held_memory_fraction: float = HELD_MEMORY_FRACTION
    window_seconds: float = WINDOW_SECONDS
    min_samples: int = MIN_SAMPLES
    min_seconds: float = MIN_SECONDS
    idle_holder_seconds: float = IDLE_HOLDER_SECONDS
    idle_holder_min_observed: float = IDLE_HOLDER_MIN_OBSERVED

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_overrides(
        cls, overrides: Mapping[str, Any], base: Thresholds | None = None
    ) -> Thresholds:
        """``base`` (default: the defaults) with ``overrides`` applied.

        Names are case-insensitive and may use ``-`` for ``_`` (``UTIL_HIGH``,
        ``util-high``). Values may be numbers or strings. Raises ``ThresholdError`` with
        a message for people on an unknown name, a bad value or inconsistent values.
        """
        start = base if base is not None else cls()
        known = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for raw_name, raw_value in overrides.items():
            name = str(raw_name).strip().lower().replace("-", "_")
            if name not in known:
                raise ThresholdError(
                    f"unknown threshold {str(raw_name)[:64]!r}; known: "
                    + ", ".join(n.upper() for n in known)
                )
            changes[name] = _parse_value(name, raw_value, known[name].type)
        result = dataclasses.replace(start, **changes)
        result.check()
        return result

    @classmethod
    def from_strings(cls, items: Iterable[str], base: Thresholds | None = None) -> Thresholds:
        """From ``NAME=VALUE`` strings (repeated ``--threshold`` arguments)."""
        overrides: dict[str, str] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ThresholdError(f"bad threshold {item!r}: expected NAME=VALUE")
            overrides[name] = value
        return cls.from_overrides(overrides, base)

    def check(self) -> None:
        """Raise ThresholdError when a value is out of range or values contradict."""
        for name in self.names():
            value = getattr(self, name)
            kind = DOCS[name][1]
            if kind == "percent" and not 0 <= value <= 100:
                raise ThresholdError(f"{name.upper()}={value}: must be between 0 and 100")
            if kind == "fraction" and not 0 < value <= 1:
                raise ThresholdError(f"{name.upper()}={value}: must be above 0 and at most 1")
            if kind in ("seconds", "bytes") and not value >= 0:
                raise ThresholdError(f"{name.upper()}={value}: must not be negative")
            if kind == "count" and value < 1:
                raise ThresholdError(f"{name.upper()}={value}: must be at least 1")
        if self.window_seconds <= 0:
            raise ThresholdError("WINDOW_SECONDS must be above 0")
        pairs = (
            ("idle_util", "util_low"),
            ("util_low", "util_high"),
            ("worker_idle_cpu", "worker_busy_cpu"),
        )
        for low, high in pairs:
            if getattr(self, low) > getattr(self, high):
                raise ThresholdError(
                    f"{low.upper()}={getattr(self, low)} must not exceed "
                    f"{high.upper()}={getattr(self, high)}"
                )

    def to_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.names()}


def _parse_value(name: str, value: Any, type_name: Any) -> float | int:
    is_int = type_name in ("int", int)
    if isinstance(value, bool):
        raise ThresholdError(f"{name.upper()}: expected a number, got {value!r}")
    if isinstance(value, int | float):
        number: float = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii():  # float() would take "９０" or "٩٠"
            raise ThresholdError(
                f"{name.upper()}: expected a number in ASCII digits, got {value!r}"
            )
        try:
            number = float(text)
        except ValueError:
            raise ThresholdError(f"{name.upper()}: expected a number, got {value!r}") from None
    else:
        raise ThresholdError(f"{name.upper()}: expected a number, got {value!r}")
    if not math.isfinite(number):
        raise ThresholdError(f"{name.upper()}: expected a finite number, got {value!r}")
    if is_int:
        if number != int(number):
            raise ThresholdError(f"{name.upper()}: expected a whole number, got {value!r}")
        return int(number)
    return number


DEFAULT = Thresholds()


def markdown_table() -> str:
    """The README table: name, default, meaning."""
    lines = ["| name | default | meaning |", "|---|---|---|"]
    for name in Thresholds.names():
        meaning, kind = DOCS[name]
        value = getattr(DEFAULT, name)
        if kind == "bytes":
            shown = f"{value:.0f} ({value / 2**20:g} MiB/s)"
        elif kind == "percent":
            shown = f"{value:g} %"
        elif kind == "seconds":
            shown = f"{value:g} s"
        else:
            shown = f"{value:g}"
        lines.append(f"| `{name.upper()}` | {shown} | {meaning} |")
    return "\n".join(lines)
