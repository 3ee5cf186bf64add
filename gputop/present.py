"""What every consumer presents the same way: GPU selection and filtering, and the
JSON document of a snapshot with its diagnosis.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable
from typing import Any

from gputop.analysis.jobs import job_to_dict
from gputop.diagnosis import Diagnosis
from gputop.model import GpuSample, ProcessInfo, Snapshot, replace

# --- GPU selection -------------------------------------------------------------------


def resolve_gpu_selection(tokens: Iterable[str], gpus: Iterable[GpuSample]) -> frozenset[int]:
    """Indices / UUIDs (whole or a unique prefix, any case; a MIG device's chooses its
    GPU) -> GPU indices. ValueError names the first token that matches no GPU."""
    gpus = tuple(gpus)
    by_index = {g.index: g for g in gpus}
    uuids = [
        (g.index, u.lower()) for g in gpus for u in (g.uuid, *(m.uuid for m in g.mig_devices)) if u
    ]
    chosen: set[int] = set()
    for token in tokens:
        if token.isascii() and token.isdigit():
            index = int(token)
            if index not in by_index:
                have = ", ".join(str(i) for i in sorted(by_index)) or "none"
                raise ValueError(f"--gpus: no GPU with index {index} (GPUs: {have})")
            chosen.add(index)
            continue
        want = token.lower()
        if not want.startswith("gpu-") and not want.startswith("mig-"):
            want = "gpu-" + want
        exact = sorted({i for i, u in uuids if u == want})
        matches = exact or sorted({i for i, u in uuids if u.startswith(want)})
        if len(matches) != 1:
            why = "matches several GPUs" if matches else "matches no GPU"
            raise ValueError(f"--gpus: {token!r} {why}")
        chosen.add(matches[0])
    return frozenset(chosen)


def filter_gpus(snapshot: Snapshot, indices: Collection[int] | None) -> Snapshot:
    """Only the chosen GPUs and what concerns them (None: everything)."""
    if indices is None:
        return snapshot
    keep = frozenset(indices)
    gpus = tuple(g for g in snapshot.gpus if g.index in keep)
    roots = {p.pid for g in gpus for p in g.processes}
    wanted = descendants(roots, children_of(snapshot.processes))
    return replace(
        snapshot,
        gpus=gpus,
        processes=tuple(p for p in snapshot.processes if p.pid in wanted),
        unlisted_holders=tuple(h for h in snapshot.unlisted_holders if h.gpu in keep),
        errors=tuple(e for e in snapshot.errors if e.gpu is None or e.gpu in keep),
    )


def children_of(processes: Iterable[ProcessInfo]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in processes:
        if p.ppid is not None and p.ppid != p.pid:
            children.setdefault(p.ppid, []).append(p.pid)
    return children


def descendants(roots: set[int], children: dict[int, list[int]]) -> set[int]:
    """``roots`` and every pid below them."""
    seen = set(roots)
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


# --- JSON ----------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def to_json_dict(snapshot: Snapshot, diagnosis: Diagnosis | None = None) -> dict[str, Any]:
    """The ``--json`` document: ``Snapshot.to_dict()`` (NaN/inf as null), with the
    diagnosis as each GPU's ``verdict``, the ``jobs`` list and any ``verdict_error``."""
    out: dict[str, Any] = snapshot.to_dict()
    if diagnosis is not None:
        for gpu in out["gpus"]:
            verdict = diagnosis.gpus.get(gpu["index"])
            gpu["verdict"] = None if verdict is None else verdict.to_dict()
        out["jobs"] = [job_to_dict(j, diagnosis.job_verdicts.get(j.id)) for j in diagnosis.jobs]
        if diagnosis.error is not None:
            out["verdict_error"] = diagnosis.error
    finite: dict[str, Any] = _finite(out)
    return finite


def render_json(snapshot: Snapshot, diagnosis: Diagnosis | None = None) -> str:
    return json.dumps(to_json_dict(snapshot, diagnosis), indent=2, allow_nan=False)
