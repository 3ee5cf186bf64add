"""The one place where NVML's numbers are bounded: an impossible value becomes None (n/a)
and a :class:`SampleError` names it (docs/drivers.md, "Values gputop refuses"). Scalars:
``GpuMetric.bounds``; memory is bounded by its own total.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gputop.model import GPU_METRICS, GpuSample, SampleError

SOURCE = "nvml"

#: (field path, low, high, unit)
BOUNDS: tuple[tuple[str, float, float, str], ...] = tuple(
    (m.field, *m.bounds, m.unit) for m in GPU_METRICS if m.bounds is not None
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
    """``sample`` with every impossible value None, and an error for each."""
    if sample.lost:
        return sample, []
    errors: list[SampleError] = []

    def bad(metric: str, value: float, why: str) -> None:
        message = f"GPU {sample.index}: the driver reported {metric} = {_shown(value)}, {why}"
        errors.append(
            SampleError(SOURCE, f"{message}: shown as n/a", gpu=sample.index, metric=metric)
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
        bad(path, value, f"outside {_shown(low)}-{_shown(high)}" + (f" {unit}" if unit else ""))
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
    """:func:`check_gpu` for each sample, appending to ``errors``."""
    checked = [check_gpu(sample) for sample in samples]
    errors.extend(error for _, found in checked for error in found)
    return [sample for sample, _ in checked]
