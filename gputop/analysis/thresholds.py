"""Every number the verdicts compare against, declared once as a field of :class:`Thresholds`
(default, kind of range, meaning), from which ``--help``, the docs and :data:`DOCS` are made."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gputop.argtypes import echo


class ThresholdError(ValueError):
    """A bad threshold override: unknown name, unparsable value, out of range."""


def _t(default: float, kind: str, meaning: str) -> Any:
    """A threshold's field; ``kind``: percent, fraction, bytes, seconds or count."""
    return dataclasses.field(default=default, metadata={"kind": kind, "meaning": meaning})


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every limit the verdicts use, each with its kind and meaning (the config's [thresholds])."""

    # --- GPU utilization
    util_high: float = _t(
        85.0, "percent", "mean GPU util at or above which the GPU is busy (gpu-bound)"
    )
    util_low: float = _t(50.0, "percent", "mean GPU util below which the GPU is starved")
    util_oscillation: float = _t(
        15.0,
        "percent",
        "util standard deviation (points) from which util oscillates; between "
        "UTIL_LOW and UTIL_HIGH an oscillating GPU counts as starved",
    )
    idle_util: float = _t(5.0, "percent", "util at or below which a sample is idle")
    # --- inside utilization (GPM, Hopper and later; unused where GPM is not there)
    sm_active_low: float = _t(
        50.0,
        "percent",
        "mean SM active below which a busy GPU is hollow: kernels run, most SMs idle "
        "(NVIDIA DCGM: below 0.5 the GPU is likely used ineffectively)",
    )
    sm_active_high: float = _t(
        80.0,
        "percent",
        "mean SM active a busy GPU needs to be gpu-bound, and tensor cores idle to be told "
        "(NVIDIA DCGM: 0.8 is necessary, not sufficient)",
    )
    tensor_idle: float = _t(
        1.0,
        "percent",
        "mean tensor-pipe activity at or below which the tensor cores idle (PyTorch "
        "profiler: no tensor-core time suggests AMP)",
    )
    dram_near_max: float = _t(
        80.0, "percent", "mean DRAM bandwidth, % of its peak, from which memory bandwidth binds"
    )
    nvlink_near_max: float = _t(
        0.8,
        "fraction",
        "mean NVLink RX or TX / the links' capacity from which NVLink runs near capacity",
    )
    # --- process tree CPU
    worker_busy_cpu: float = _t(
        80.0,
        "percent",
        "mean CPU of the job's workers (% of one core) from which they are near a full core",
    )
    worker_idle_cpu: float = _t(
        20.0, "percent", "mean CPU of the workers (% of one core) at or below which they idle"
    )
    main_busy_cpu: float = _t(
        90.0, "percent", "CPU of a main (GPU) process, % of one core, from which it is CPU-bound"
    )
    host_cpu_saturated: float = _t(
        90.0, "percent", "host CPU % (all cores) from which the host is saturated"
    )
    # --- disk
    iowait_high: float = _t(20.0, "percent", "host iowait % from which I/O waits are high")
    disk_sleep_fraction: float = _t(
        0.5,
        "fraction",
        "share of window samples with a job process in D state (disk-sleep) that means the "
        "job waits on I/O",
    )
    disk_near_peak: float = _t(
        0.8,
        "fraction",
        "host disk read rate (window mean) / highest rate seen in the history from which the "
        "disk is near its peak",
    )
    disk_min_read: float = _t(
        10.0 * 2**20, "bytes", "bytes/s a job must read to be called disk-bound by rate"
    )
    # --- PCIe
    pcie_near_max: float = _t(
        0.7, "fraction", "mean PCIe RX or TX / current link capacity from which the link is full"
    )
    link_degraded_fraction: float = _t(
        0.5,
        "fraction",
        "share of busy samples with the link below its max gen or width that means degraded",
    )
    # --- clocks, memory
    throttle_fraction: float = _t(
        0.5,
        "fraction",
        "share of busy samples with a thermal or power throttle reason that means throttled",
    )
    mem_nearly_full: float = _t(
        0.95, "fraction", "used / total GPU memory from which memory is nearly full"
    )
    held_memory_fraction: float = _t(
        0.05,
        "fraction",
        "used / total GPU memory from which memory counts as held even with no process listed",
    )
    # --- measured inside the training process (gputop's probe; unused without one)
    data_wait_moderate: float = _t(
        5.0,
        "percent",
        "mean share of step time a job's ranks wait for the next batch (probe) above which "
        "the job is input-bound (measured), at severity info (TensorFlow profiler: input-bound "
        "above 5 % of step time, moderately); at or below it: not input-bound (measured)",
    )
    data_wait_high: float = _t(
        20.0,
        "percent",
        "mean data-wait share above which input-bound (measured) warns (TensorFlow profiler: "
        "above 20 % highly input-bound)",
    )
    data_wait_rank_spread: float = _t(
        10.0,
        "percent",
        "points by which the worst rank's data wait must exceed the job's mean to be named",
    )
    allocator_cached: float = _t(
        0.5,
        "fraction",
        "share of a job's GPU memory used (NVML) that its caching allocators hold without "
        "tensors in it (probe: reserved - allocated) from which they hold most of it; told "
        "only while memory is nearly full (MEM_NEARLY_FULL)",
    )
    # --- time
    window_seconds: float = _t(20.0, "seconds", "length of the sliding window the verdicts judge")
    min_samples: int = _t(5, "count", "fewer samples than this in the window: warming up")
    min_seconds: float = _t(4.0, "seconds", "window covering less time than this: warming up")
    idle_holder_seconds: float = _t(
        300.0, "seconds", "idle this long while holding GPU memory: idle memory holder"
    )
    idle_holder_min_observed: float = _t(
        60.0,
        "seconds",
        "idle for all observed history, at least this long, with every holding process older "
        "than IDLE_HOLDER_SECONDS: idle memory holder too",
    )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_overrides(
        cls, overrides: Mapping[str, Any], base: Thresholds | None = None
    ) -> Thresholds:
        """``base`` (default: the defaults) with ``overrides`` applied (names
        case-insensitive, ``-`` for ``_``); ThresholdError on a bad name or value."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for raw_name, raw_value in overrides.items():
            name = str(raw_name).strip().lower().replace("-", "_")
            if name not in known:
                raise ThresholdError(
                    f"unknown threshold {echo(raw_name)}; known: "
                    + ", ".join(n.upper() for n in known)
                )
            changes[name] = _parse_value(name, raw_value, known[name].type)
        result = dataclasses.replace(base or cls(), **changes)
        result.check()
        return result

    @classmethod
    def from_strings(cls, items: Iterable[str], base: Thresholds | None = None) -> Thresholds:
        """From ``NAME=VALUE`` strings (repeated ``--threshold`` arguments)."""
        overrides: dict[str, str] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ThresholdError(f"bad threshold {echo(item)}: expected NAME=VALUE")
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
        for low, high in (
            ("idle_util", "util_low"),
            ("util_low", "util_high"),
            ("worker_idle_cpu", "worker_busy_cpu"),
            ("sm_active_low", "sm_active_high"),
            ("data_wait_moderate", "data_wait_high"),
        ):
            if getattr(self, low) > getattr(self, high):
                raise ThresholdError(
                    f"{low.upper()}={getattr(self, low)} must not exceed "
                    f"{high.upper()}={getattr(self, high)}"
                )

    def to_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.names()}


def _parse_value(name: str, value: Any, type_name: Any) -> float | int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        number: float = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii():  # float() would take "９０" or "٩٠"
            raise ThresholdError(
                f"{name.upper()}: expected a number in ASCII digits, got {echo(value)}"
            )
        try:
            number = float(text)
        except ValueError:
            raise ThresholdError(f"{name.upper()}: expected a number, got {echo(value)}") from None
    else:
        raise ThresholdError(f"{name.upper()}: expected a number, got {echo(value)}")
    if not math.isfinite(number):
        raise ThresholdError(f"{name.upper()}: expected a finite number, got {echo(value)}")
    if type_name in ("int", int):
        if number != int(number):
            raise ThresholdError(f"{name.upper()}: expected a whole number, got {echo(value)}")
        return int(number)
    return number


DEFAULT = Thresholds()

#: name -> (meaning, kind of range), from the fields.
DOCS: dict[str, tuple[str, str]] = {
    f.name: (f.metadata["meaning"], f.metadata["kind"]) for f in dataclasses.fields(Thresholds)
}


def markdown_table() -> str:
    """The README table: name, default, meaning."""
    lines = ["| name | default | meaning |", "|---|---|---|"]
    for name in Thresholds.names():
        meaning, kind = DOCS[name]
        value = getattr(DEFAULT, name)
        unit = {"percent": " %", "seconds": " s"}.get(kind, "")
        shown = f"{value:.0f} ({value / 2**20:g} MiB/s)" if kind == "bytes" else f"{value:g}{unit}"
        lines.append(f"| `{name.upper()}` | {shown} | {meaning} |")
    return "\n".join(lines)
