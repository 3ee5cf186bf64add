"""The verdict kinds, declared once (:data:`KIND_SPECS`, one row per rule's finding; a
kind's label and word are its first row's), the families of findings and what a finding of
each hides (:data:`FAMILIES`), and how findings become a :class:`Verdict`: the rank alone
picks the kind, the families alone say which findings drop out.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

from gputop.model import SEVERITIES as SEVERITIES  # the analysis' own name for them
from gputop.model import Verdict

LOST = "lost"
IDLE_HOLDER = "idle memory holder"
IDLE = "idle"
WARMING_UP = "warming up"
THROTTLED = "throttled"
TRANSFER_PCIE = "transfer-bound: pcie"
INPUT_DISK = "input-bound: disk"
INPUT_CPU = "input-bound: cpu workers"
INPUT_MAIN = "input-bound: main process"
TRANSFER_NVLINK = "communication-bound: nvlink"
LAUNCH_MAIN = "launch-bound: main process"
LOW_SM = "low sm activity"
MEMORY_BANDWIDTH = "memory-bandwidth-bound"
TENSOR_IDLE = "tensor cores idle"
UNDERUSED = "underused"
LINK_DEGRADED = "link degraded"
GPU_BOUND = "gpu-bound"
MODERATE = "moderate"
MEMORY_FULL = "memory nearly full"
INPUT_MEASURED = "input-bound (measured)"
NOT_INPUT_MEASURED = "not input-bound (measured)"
ALLOCATOR_CACHE = "allocator cache"
UNKNOWN = "unknown"

#: A severity the rule picks: a waiting finding's is "warn" when the GPU is starved,
#: "info" when steady; a measured data wait's, by DATA_WAIT_HIGH.
WAITING = "warn or info"

# The families of findings (:data:`FAMILIES`).
GONE = "gone"
QUIET = "quiet"
HOLDER = "holder"
READING = "no reading"
NOTE = "note"
LOAD = "load"
CAUSE = "cause"
INPUT = "input"
WAIT = "measured wait"
NO_WAIT = "measured no wait"
FALLBACK = "fallback"


@dataclass(frozen=True, slots=True)
class Family:
    """Findings that drop out alike: a finding of this family hides those of ``hides``."""

    name: str
    hides: tuple[str, ...]  # families; never its own, never one that hides it
    why: str  # the docs' line


#: Every family. A hidden finding is neither the verdict nor in ``also``, whatever its
#: rank, and its rules are not looked for once a finding that hides it is found.
# fmt: off
FAMILIES: tuple[Family, ...] = (
    Family(GONE, (QUIET, HOLDER, NOTE, READING, LOAD, CAUSE, INPUT, WAIT, NO_WAIT, FALLBACK),
           "a GPU of the scope is lost: nothing else is judged"),
    Family(QUIET, (HOLDER, NOTE, READING, LOAD, CAUSE, INPUT, WAIT, NO_WAIT, FALLBACK),
           "(GPU only) nothing runs, nothing is held: nothing else to say"),
    Family(HOLDER, (READING, LOAD, CAUSE, INPUT, WAIT, NO_WAIT, FALLBACK),
           "memory held without work: the load is not judged (a full memory still is)"),
    Family(READING, (LOAD, CAUSE, INPUT, FALLBACK),
           "no utilization to judge the load from (too few samples, or none reported); a "
           "measured data wait still is"),
    Family(NOTE, (), "a fact about memory: listed with the verdict, whatever it is, unless hidden"),
    Family(LOAD, (), "what the utilization, clocks and link say while the GPU works"),
    Family(WAIT, (FALLBACK,),
           "the job's probe measured a data wait: it comes first; the host-side input causes "
           "stay, in `also`, to say where it comes from"),
    Family(NO_WAIT, (INPUT, FALLBACK),
           "the job's probe measured (almost) no data wait: an inferred input cause drops out "
           "(a measurement outranks an inference)"),
    Family(CAUSE, (FALLBACK,), "why the GPU waits: once one is seen, no fallback"),
    Family(INPUT, (FALLBACK,),
           "the GPU waits on the host's input, as inferred from the host: once one is seen, "
           "no fallback"),
    Family(FALLBACK, (), "what the utilization says when no cause is seen"),
)
# fmt: on


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One rule's finding: what it is called, how it ranks and how it shows."""

    rule: str  # the rule's name in the code (``RULES``)
    rank: int  # lower wins: the verdict's kind is its lowest-ranked finding's
    kind: str  # the verdict's ``kind``
    severity: str  # one of SEVERITIES, or WAITING (the rule picks warn or info)
    label: str  # the verdict's ``label``, for people
    word: str  # the short word (at most 8 characters) of a compact GPU line
    meaning: str  # the help legend's line; "" when the kind's first row says it
    when: str  # when the rule applies
    family: str  # one of FAMILIES: which findings it hides and which hide it


#: Every rule's finding, in rank order.
# fmt: off
KIND_SPECS: tuple[KindSpec, ...] = (
    KindSpec(
        "lost", 1, LOST, "bad", "GPU lost", "LOST", "",
        "a GPU of the scope fell off the bus (nothing else is judged)",
        GONE,
    ),
    KindSpec(
        "idle_holder", 2, IDLE_HOLDER, "warn", "idle memory holder", "MEM IDLE",
        "idle memory holder: the GPU holds memory but has run (almost) no kernel for minutes",
        "util ≤ IDLE_UTIL for IDLE_HOLDER_SECONDS while memory is held (or all observed "
        "history, ≥ IDLE_HOLDER_MIN_OBSERVED, with every holder older than "
        "IDLE_HOLDER_SECONDS)",
        HOLDER,
    ),
    KindSpec(
        "idle", 3, IDLE, "ok", "idle", "idle", "no process, no memory held, no load",
        "(GPU only) no process, no held memory, util ≤ IDLE_UTIL throughout; shown even "
        "from one sample",
        QUIET,
    ),
    KindSpec(
        "input_measured", 4, INPUT_MEASURED, WAITING, "input-bound (measured)", "data-wt",
        "input-bound (measured): the job's probe measured its steps waiting for the next batch",
        "the job's probe (mean over its ranks): data wait > DATA_WAIT_MODERATE % of step "
        "time (warn > DATA_WAIT_HIGH); before `warming up`: the probe's figure is a window "
        "of its own; the host-side input causes say where, in `also`",
        WAIT,
    ),
    KindSpec(
        "warming_up", 5, WARMING_UP, "info", "warming up", "warming",
        "too few samples yet for a verdict (a few seconds)",
        "fewer than MIN_SAMPLES samples or under MIN_SECONDS covered (`--once`); "
        "`memory nearly full` still listed in `also`",
        READING,
    ),
    KindSpec(
        "throttle_hard", 6, THROTTLED, "bad", "throttled", "throttle",
        "clocks cut by heat or a hardware slowdown while busy",
        "thermal / HW slowdown / power brake in ≥ THROTTLE_FRACTION of busy samples",
        LOAD,
    ),
    KindSpec(
        "pcie", 7, TRANSFER_PCIE, WAITING, "transfer-bound: PCIe", "PCIe-bnd",
        "transfer-bound: the GPU waits while PCIe copies run near the link's capacity",
        "util < UTIL_HIGH, mean RX or TX ≥ PCIE_NEAR_MAX of the current link capacity",
        CAUSE,
    ),
    KindSpec(
        "nvlink", 8, TRANSFER_NVLINK, WAITING, "comm-bound: NVLink", "NVL-bnd",
        "communication-bound: the GPUs wait while NVLink runs near the links' capacity",
        "util < UTIL_HIGH or SM active < SM_ACTIVE_LOW, mean NVLink RX or TX ≥ "
        "NVLINK_NEAR_MAX of the links' capacity (a job: on more than one GPU)",
        CAUSE,
    ),
    KindSpec(
        "disk_strong", 9, INPUT_DISK, WAITING, "input-bound: disk", "disk-bnd",
        "input-bound: the job waits on storage (D state, iowait, reads at the disk's peak)",
        "util < UTIL_HIGH, a job process in D state in ≥ DISK_SLEEP_FRACTION of samples, "
        "or iowait ≥ IOWAIT_HIGH while the job reads ≥ DISK_MIN_READ",
        INPUT,
    ),
    KindSpec(
        "workers", 10, INPUT_CPU, WAITING, "input-bound: CPU workers", "CPU-bnd",
        "input-bound: the DataLoader workers (or the whole host CPU) are maxed out",
        "util < UTIL_HIGH, workers' mean CPU ≥ WORKER_BUSY_CPU % of a core",
        INPUT,
    ),
    KindSpec(
        "main", 11, INPUT_MAIN, "warn", "input-bound: main process", "main-bnd",
        "input-bound: the main Python process is at a full core, workers idle",
        "util low (< UTIL_LOW) or oscillating (sd ≥ UTIL_OSCILLATION), a main process ≥ "
        "MAIN_BUSY_CPU, workers ≤ WORKER_IDLE_CPU or none",
        INPUT,
    ),
    KindSpec(
        "launch", 12, LAUNCH_MAIN, "warn", "launch-bound: main proc.", "launch",
        "launch-bound: utilization high but SMs mostly idle, the main process at a full core",
        "util ≥ UTIL_HIGH, SM active < SM_ACTIVE_LOW (GPM), a main process ≥ MAIN_BUSY_CPU",
        CAUSE,
    ),
    KindSpec(
        "no_input_wait", 13, NOT_INPUT_MEASURED, WAITING, "input keeps up (measured)",
        "no wait",
        "not input-bound (measured): the job's probe measured (almost) no data wait, so the "
        "GPU side is where to look",
        "the job's probe: data wait ≤ DATA_WAIT_MODERATE % while the GPU waits (util or SM "
        "active low); the inferred input causes drop out",
        NO_WAIT,
    ),
    KindSpec(
        "host_cpu", 14, INPUT_CPU, WAITING, "input-bound: CPU workers", "CPU-bnd", "",
        "util < UTIL_HIGH, host CPU ≥ HOST_CPU_SATURATED",
        INPUT,
    ),
    KindSpec(
        "disk_weak", 15, INPUT_DISK, WAITING, "input-bound: disk", "disk-bnd", "",
        "util < UTIL_HIGH, host disk reads ≥ DISK_NEAR_PEAK × the highest rate seen, job "
        "reads ≥ DISK_MIN_READ",
        INPUT,
    ),
    KindSpec(
        "underused", 16, UNDERUSED, "warn", "GPU underused", "low util",
        "GPU underused: utilization low or oscillating, no host cause seen",
        "util low or oscillating, no cause seen",
        FALLBACK,
    ),
    KindSpec(
        "low_sm", 17, LOW_SM, "warn", "low SM activity", "low SM",
        "low SM activity: utilization high but SMs mostly idle (small kernels, low occupancy)",
        "util ≥ UTIL_HIGH, SM active < SM_ACTIVE_LOW (GPM), no cause seen",
        FALLBACK,
    ),
    KindSpec(
        "link", 18, LINK_DEGRADED, "warn", "PCIe link degraded", "link deg",
        "PCIe link below its max generation or width while busy",
        "busy (util ≥ UTIL_LOW in ≥ half the samples), link below max gen/width in ≥ "
        "LINK_DEGRADED_FRACTION of them",
        LOAD,
    ),
    KindSpec(
        "memory_bandwidth", 19, MEMORY_BANDWIDTH, "info", "memory-bandwidth-bound", "mem-bw",
        "memory-bandwidth-bound: DRAM bandwidth near its peak while the SMs are not",
        "DRAM bandwidth ≥ DRAM_NEAR_MAX, SM active < SM_ACTIVE_HIGH (GPM)",
        LOAD,
    ),
    KindSpec(
        "tensor_idle", 20, TENSOR_IDLE, "info", "tensor cores idle", "no TC",
        "tensor cores idle: the SMs are busy, the tensor cores (almost) never",
        "util ≥ UTIL_HIGH, SM active ≥ SM_ACTIVE_HIGH, tensor active ≤ TENSOR_IDLE (GPM)",
        LOAD,
    ),
    KindSpec(
        "gpu_bound", 21, GPU_BOUND, "ok", "GPU-bound", "GPU-bnd",
        "GPU-bound: the GPU is busy, the input keeps up",
        "mean util ≥ UTIL_HIGH",
        LOAD,
    ),
    KindSpec(
        "moderate", 22, MODERATE, "info", "moderately busy", "moderate",
        "steady partial use, no cause seen",
        "util steady between UTIL_LOW and UTIL_HIGH, no cause seen",
        FALLBACK,
    ),
    KindSpec(
        "throttle_soft", 23, THROTTLED, "info", "throttled", "pwr cap",
        "at the power limit while busy (normal at full load)",
        "SW power cap only (normal at full load)",
        LOAD,
    ),
    KindSpec(
        "memory_full", 24, MEMORY_FULL, "warn", "memory nearly full", "mem full",
        "GPU memory nearly full",
        "used/total ≥ MEM_NEARLY_FULL (caching allocators fill memory on purpose)",
        NOTE,
    ),
    KindSpec(
        "allocator", 25, ALLOCATOR_CACHE, "info", "allocator holds memory", "cached",
        "the caching allocator holds most of the memory used, without tensors in it",
        "the job's probe (CUDA): reserved - allocated ≥ ALLOCATOR_CACHED of the job's GPU "
        "memory, while memory is nearly full (MEM_NEARLY_FULL)",
        NOTE,
    ),
    KindSpec(
        "unknown", 26, UNKNOWN, "info", "cannot tell", "unknown",
        "cannot tell: the GPU reports no utilization (MIG, vGPU)",
        "GPU utilization not reported (MIG, vGPU)",
        READING,
    ),
)
# fmt: on

#: Rule name -> its row.
RULES: dict[str, KindSpec] = {s.rule: s for s in KIND_SPECS}
_FIRST = {s.kind: s for s in reversed(KIND_SPECS)}  # kind -> its first row
#: Every kind, in the order of its first rank.
KINDS: tuple[str, ...] = tuple(dict.fromkeys(s.kind for s in KIND_SPECS))
#: Kind -> the verdict's label.
LABELS: dict[str, str] = {kind: _FIRST[kind].label for kind in KINDS}
#: Kind -> the short word of a compact GPU line (a view may show a later row's word).
VERDICT_WORDS: dict[str, str] = {kind: _FIRST[kind].word for kind in KINDS}


def legend() -> tuple[tuple[str, str], ...]:
    """The help screen's verdict legend: (word, meaning) of each row with one, by kind."""
    return tuple(
        (s.word, s.meaning) for kind in KINDS for s in KIND_SPECS if s.kind == kind and s.meaning
    )


def markdown_table() -> str:
    """The verdict table of ``docs/verdicts.md``: rank, kind, label, word, severity, when."""
    lines = ["| rank | kind | label | word | severity | when |", "|---|---|---|---|---|---|"]
    for s in KIND_SPECS:
        lines.append(
            f"| {s.rank} | `{s.kind}` | {s.label} | `{s.word}` | {s.severity} | {s.when} |"
        )
    return "\n".join(lines)


def short_markdown_table() -> str:
    """The README's short table (a kind without a legend line says when it applies)."""
    lines = ["| word | kind | means |", "|---|---|---|"]
    for kind in KINDS:
        rows = [s for s in KIND_SPECS if s.kind == kind]
        for s in [r for r in rows if r.meaning] or rows[:1]:
            lines.append(f"| `{s.word}` | `{kind}` | {s.meaning or s.when} |")
    return "\n".join(lines)


def families_markdown_table() -> str:
    """The families of ``docs/verdicts.md``: which findings drop out when several apply."""
    lines = ["| family | kinds | hides the findings of | why |", "|---|---|---|---|"]
    for f in FAMILIES:
        kinds = ", ".join(
            f"`{k}`" for k in dict.fromkeys(s.kind for s in KIND_SPECS if s.family == f.name)
        )
        hides = ", ".join(f.hides) or "none"
        lines.append(f"| {f.name} | {kinds} | {hides} | {f.why} |")
    return "\n".join(lines)


#: Marker name -> the table it holds (``docs/verdicts.md``, the README).
BLOCKS = {
    "verdict-kinds": markdown_table,
    "verdict-kinds-short": short_markdown_table,
    "verdict-families": families_markdown_table,
}


def markdown_block(name: str = "verdict-kinds") -> str:
    """The table ``name`` between the markers that delimit it in the docs."""
    return f"<!-- BEGIN generated: {name} -->\n{BLOCKS[name]()}\n<!-- END generated: {name} -->"


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule that applies to a scope: its rule (the row: rank, family) and kind, with
    its numbers."""

    rule: str
    kind: str
    severity: str
    evidence: str
    advice: str


def finding(spec: KindSpec, evidence: str, advice: str, severity: str | None = None) -> Finding:
    """``spec``'s finding; ``severity``: the one a WAITING rule picked (else the row's)."""
    return Finding(spec.rule, spec.kind, severity or spec.severity, evidence, advice)


@dataclass(frozen=True, slots=True)
class Precedence:
    """The two tables as the verdicts read them, by rule name: its rank, its family, and
    the families its finding hides."""

    rank: dict[str, int]
    family: dict[str, str]
    hides: dict[str, frozenset[str]]

    @staticmethod
    def of(specs: Iterable[KindSpec], families: Iterable[Family]) -> Precedence:
        hides = {f.name: frozenset(f.hides) - {f.name} for f in families}
        rows = tuple(specs)
        return Precedence(
            {s.rule: s.rank for s in rows},
            {s.rule: s.family for s in rows},
            {s.rule: hides[s.family] for s in rows},
        )

    def verdict(self, findings: Sequence[Finding], hidden: Set[str] | None = None) -> Verdict:
        """The lowest-ranked finding that no other hides; the other kinds in ``also``.
        ``hidden``: the families the findings hide, when the caller has them."""
        if len(findings) == 1:
            one = findings[0]
            return Verdict(one.kind, LABELS[one.kind], one.evidence, one.advice, one.severity)
        if hidden is None:
            hides = self.hides
            hidden = {family for f in findings for family in hides[f.rule]}
        family, rank = self.family, self.rank
        shown = [f for f in findings if family[f.rule] not in hidden] if hidden else findings
        first, *rest = sorted(shown, key=lambda f: rank[f.rule])
        also = tuple(dict.fromkeys(f.kind for f in rest if f.kind != first.kind))
        return Verdict(
            first.kind, LABELS[first.kind], first.evidence, first.advice, first.severity, also
        )


#: The declared tables, as the verdicts read them (a test may put others in its place).
PRECEDENCE = Precedence.of(KIND_SPECS, FAMILIES)


if __name__ == "__main__":  # python -m gputop.analysis.kinds --markdown [NAME]
    if not 1 <= len(sys.argv[1:]) <= 2 or sys.argv[1] != "--markdown":
        sys.exit("usage: python -m gputop.analysis.kinds --markdown [NAME]")
    print(markdown_block(*sys.argv[2:]))
