"""NVML's numbers bounded: an impossible value becomes None (n/a) and a :class:`SampleError`
names it (docs/drivers.md, "Values gputop refuses"). The bounds and the check are the
model's (``GpuMetric.bounds``, :func:`gputop.model.check_gpu`), shared with remote lines and
recordings; memory is also bounded by its own total.
"""

from __future__ import annotations

from gputop.model import GPU_METRICS, GpuSample, SampleError
from gputop.model import check_gpu as checked_gpu

SOURCE = "nvml"

#: (field path, low, high, unit)
BOUNDS: tuple[tuple[str, float, float, str], ...] = tuple(
    (m.field, *m.bounds, m.unit) for m in GPU_METRICS if m.bounds is not None
)


def check_gpu(sample: GpuSample) -> tuple[GpuSample, list[SampleError]]:
    """``sample`` with every impossible value None, and an error for each."""
    return checked_gpu(sample, SOURCE, "the driver")


def check_gpus(
    samples: list[GpuSample] | tuple[GpuSample, ...], errors: list[SampleError]
) -> list[GpuSample]:
    """:func:`check_gpu` for each sample, appending to ``errors``."""
    checked = [check_gpu(sample) for sample in samples]
    errors.extend(error for _, found in checked for error in found)
    return [sample for sample, _ in checked]
