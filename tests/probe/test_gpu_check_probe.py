"""scripts/gpu_check.py's probe section, without a GPU: the comparison of the probe file's
CUDA memory with torch's own, and "not checked" where PyTorch sees no CUDA."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.probe.harness import require_torch

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu_check.py"
MiB = 1 << 20


@pytest.fixture(scope="module")
def gc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_probe", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check_probe"] = module
    spec.loader.exec_module(module)
    return module


def found(**file: int) -> dict[str, Any]:
    own = {"device": 0, "allocated": 256 * MiB, "reserved": 768 * MiB, "peak": 768 * MiB}
    unused = {"device": 1, "allocated": 0, "reserved": 0, "peak": 0}
    return {"device": 0, "probe": {"memory": [{**own, **file}]}, "torch": [own, unused]}


def test_agreement(gc: ModuleType) -> None:
    checks = gc.compare_probe(found())
    assert [c.what for c in checks] == [
        "cuda:0 allocated", "cuda:0 reserved", "cuda:0 peak", "cuda:0 cached",
    ]  # fmt: skip
    assert all(c.ok for c in checks)


@pytest.mark.parametrize(
    ("change", "failing"),
    [({"allocated": 255 * MiB}, "cuda:0 allocated"), ({"peak": 1}, "cuda:0 peak"),
     ({"reserved": 256 * MiB}, "cuda:0 reserved")],
)  # fmt: skip
def test_each_disagreement(gc: ModuleType, change: dict[str, int], failing: str) -> None:
    bad = [c.what for c in gc.compare_probe(found(**change)) if not c.ok]
    assert failing in bad


@pytest.mark.parametrize("probe", [None, {}, {"memory": []}])
def test_no_figures_is_a_failure(gc: ModuleType, probe: object) -> None:
    checks = gc.compare_probe({"device": 0, "probe": probe, "torch": found()["torch"]})
    assert checks and not all(c.ok for c in checks)


@pytest.mark.timeout(200)
def test_the_real_check_or_not_checked(gc: ModuleType) -> None:
    """Without CUDA: said, not checked. With it (a lent GPU): the figures agree."""
    require_torch()
    import torch

    checks, why = gc.check_probe(gc.parse_args([]))
    if torch.cuda.is_available():
        assert why == "" and checks and all(c.ok for c in checks), gc.render(checks)
    else:
        assert checks == [] and "no CUDA" in why
