"""Values a GPU cannot report truly: the one place where NVML's numbers are bounded.

Buggy drivers, vGPU guests and Jetson boards return garbage (``0xFFFFFFFF`` for a
percentage, used memory above the total). Such a value becomes None (n/a) and a
:class:`SampleError` names it; it is never shown as if it were true. The bounds
(:data:`BOUNDS`, also in the README):

- utilization (GPU, memory), encoder, decoder: 0-100 %
- fan: 0-200 % (NVML documents that it "may exceed 100 %", never by that much)
- temperature: 1-150 °C (0xFFFFFFFF reads as -1 °C or 4294967295 °C)
- power draw and power limit: 0-5000 W; SM and memory clocks: 0-10000 MHz
- memory: total above 0; used, free and reserved at most the total (used above it:
  used and free become n/a, the total stays)
"""

from __future__ import annotations

import math
from dataclasses import replace

from gputop.model import GpuSample, SampleError

SOURCE = "nvml"

#: (field path, low, high, unit) of each bounded scalar.
BOUNDS: tuple[tuple[str, float, float, str], ...] = (
    ("utilization.gpu", 0, 100, "%"),
    ("utilization.memory", 0, 100, "%"),
    ("encoder_percent", 0, 100, "%"),
    ("decoder_percent", 0, 100, "%"),
    ("fan_percent", 0, 200, "%"),
    ("temperature_c", 1, 150, "°C"),
    ("power_w", 0, 5000, "W"),
    ("power_limit_w", 0, 5000, "W"),
    ("clocks.sm_mhz", 0, 10_000, "MHz"),
    ("clocks.memory_mhz", 0, 10_000, "MHz"),
    ("clocks.sm_max_mhz", 0, 10_000, "MHz"),
    ("clocks.memory_max_mhz", 0, 10_000, "MHz"),
)


#: BOUNDS with each path split once: (path, part or None, field, low, high, unit).
_SPLIT_BOUNDS = tuple(
    (path, *((head, tail) if tail else (None, head)), low, high, unit)
    for path, low, high, unit in BOUNDS
    for head, _, tail in [path.partition(".")]
)


def _shown(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_gpu(sample: GpuSample) -> tuple[GpuSample, list[SampleError]]:
    """``sample`` with every impossible value replaced by None, and an error for each."""
    if sample.lost:
        return sample, []
    errors: list[SampleError] = []

    def bad(metric: str, value: float, why: str) -> None:
        errors.append(
            SampleError(
                SOURCE,
                f"GPU {sample.index}: the driver reported {metric} = {_shown(value)}, "
                f"{why}: shown as n/a",
                gpu=sample.index,
                metric=metric,
            )
        )

    changes: dict[str, object] = {}
    parts: dict[str, dict[str, object]] = {}
    isfinite = math.isfinite
    for path, head, name, low, high, unit in _SPLIT_BOUNDS:
        value = getattr(sample if head is None else getattr(sample, head), name)
        if value is None:
            continue
        if isinstance(value, int | float) and isfinite(value) and low <= value <= high:
            continue
        bad(path, value, f"outside {_shown(low)}-{_shown(high)} {unit}")
        if head is not None:
            parts.setdefault(head, {})[name] = None
        else:
            changes[name] = None
    memory = sample.memory
    mem: dict[str, object] = {}
    total = memory.total
    if total is not None and total <= 0:
        bad("memory.total", total, "not above 0")
        mem["total"] = total = None
    if total is not None:
        for name in ("used", "free", "reserved"):
            value = getattr(memory, name)
            if value is not None and not 0 <= value <= total:
                bad(f"memory.{name}", value, f"more than the total {total}")
                mem[name] = None
        if "used" in mem:
            mem["free"] = None  # derived from the same broken reading
    if mem:
        parts["memory"] = {**parts.get("memory", {}), **mem}
    for head, fields in parts.items():
        changes[head] = replace(getattr(sample, head), **fields)
    if not changes:
        return sample, errors
    return replace(sample, **changes), errors  # type: ignore[arg-type]


def check_gpus(
    samples: list[GpuSample] | tuple[GpuSample, ...], errors: list[SampleError]
) -> list[GpuSample]:
    """:func:`check_gpu` for each sample; the errors are appended to ``errors``."""
    out = []
    for sample in samples:
        checked, found = check_gpu(sample)
        out.append(checked)
        errors.extend(found)
    return out
