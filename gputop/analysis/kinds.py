"""The verdict kinds: their names, labels for people, severities and ranks, and how
findings become a :class:`Verdict`. What each kind means and when it applies: the
docstring of :mod:`gputop.analysis.verdict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOST = "lost"
IDLE_HOLDER = "idle memory holder"
IDLE = "idle"
WARMING_UP = "warming up"
THROTTLED = "throttled"
TRANSFER_PCIE = "transfer-bound: pcie"
INPUT_DISK = "input-bound: disk"
INPUT_CPU = "input-bound: cpu workers"
INPUT_MAIN = "input-bound: main process"
UNDERUSED = "underused"
LINK_DEGRADED = "link degraded"
GPU_BOUND = "gpu-bound"
MODERATE = "moderate"
MEMORY_FULL = "memory nearly full"
UNKNOWN = "unknown"
KINDS: tuple[str, ...] = (
    LOST,
    IDLE_HOLDER,
    IDLE,
    WARMING_UP,
    THROTTLED,
    TRANSFER_PCIE,
    INPUT_DISK,
    INPUT_CPU,
    INPUT_MAIN,
    UNDERUSED,
    LINK_DEGRADED,
    GPU_BOUND,
    MODERATE,
    MEMORY_FULL,
    UNKNOWN,
)
LABELS: dict[str, str] = {
    LOST: "GPU lost",
    IDLE_HOLDER: "idle memory holder",
    IDLE: "idle",
    WARMING_UP: "warming up",
    THROTTLED: "throttled",
    TRANSFER_PCIE: "transfer-bound: PCIe",
    INPUT_DISK: "input-bound: disk",
    INPUT_CPU: "input-bound: CPU workers",
    INPUT_MAIN: "input-bound: main process",
    UNDERUSED: "GPU underused",
    LINK_DEGRADED: "PCIe link degraded",
    GPU_BOUND: "GPU-bound",
    MODERATE: "moderately busy",
    MEMORY_FULL: "memory nearly full",
    UNKNOWN: "cannot tell",
}
SEVERITIES = ("ok", "info", "warn", "bad")
# Ranks (lower wins); see the module docstring.
_R_LOST, _R_HOLDER, _R_IDLE, _R_WARMING = 1, 2, 3, 4
_R_THROTTLE_HARD, _R_PCIE, _R_DISK_STRONG, _R_WORKERS, _R_MAIN = 5, 6, 7, 8, 9
_R_HOST_CPU, _R_DISK_WEAK, _R_UNDERUSED, _R_LINK, _R_GPU_BOUND = 10, 11, 12, 13, 14
_R_MODERATE, _R_THROTTLE_SOFT, _R_MEMORY, _R_UNKNOWN = 15, 16, 17, 18


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str  # one of KINDS
    label: str  # for people
    evidence: str  # the numbers behind it, one line
    advice: str  # what to try, one line
    severity: str  # "ok" | "info" | "warn" | "bad"
    also: tuple[str, ...] = ()  # other kinds that apply, by rank

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "severity": self.severity,
            "evidence": self.evidence,
            "advice": self.advice,
            "also": list(self.also),
        }


def verdict_to_dict(verdict: Verdict) -> dict[str, Any]:
    """The JSON form: {kind, label, severity, evidence, advice, also: [kind...]}."""
    return verdict.to_dict()


@dataclass(frozen=True, slots=True)
class _Finding:
    rank: int
    kind: str
    severity: str
    evidence: str
    advice: str


def _verdict(findings: list[_Finding]) -> Verdict:
    if len(findings) == 1:
        first = findings[0]
        return Verdict(first.kind, LABELS[first.kind], first.evidence, first.advice, first.severity)
    findings = sorted(findings, key=lambda f: f.rank)
    first = findings[0]
    also: list[str] = []
    for f in findings[1:]:
        if f.kind != first.kind and f.kind not in also:
            also.append(f.kind)
    return Verdict(
        first.kind, LABELS[first.kind], first.evidence, first.advice, first.severity, tuple(also)
    )
