"""The demo fleet: deterministic, consistent, and showing every condition."""

from __future__ import annotations

import dataclasses
import json
import re
import statistics

import pytest

from gputop.analysis.kinds import (
    ALLOCATOR_CACHE,
    GPU_BOUND,
    INPUT_CPU,
    INPUT_MEASURED,
    LAUNCH_MAIN,
    LOW_SM,
    MEMORY_BANDWIDTH,
    NOT_INPUT_MEASURED,
    TENSOR_IDLE,
    TRANSFER_NVLINK,
)
from gputop.cli import main
from gputop.diagnosis import Diagnosis
from gputop.fmt import clean_text
from gputop.model import GpuSample, Snapshot, check_values
from gputop.pipeline import Feed
from gputop.sources.demo import (
    DEMO_EPOCH,
    EPOCH_S,
    LINK_FLAP,
    LINK_MAX,
    STREAM_S,
    DemoSource,
)

GiB = 2**30


def run(seed: int = 0, steps: int = 10, step: float = 1.0) -> list[Snapshot]:
    src = DemoSource(seed=seed, step=step)
    return [src.snapshot() for _ in range(steps)]


@pytest.fixture(scope="module")
def snaps() -> list[Snapshot]:
    """Two minutes of demo at 1 s."""
    return run(seed=0, steps=120)


@pytest.fixture(scope="module")
def snap(snaps: list[Snapshot]) -> Snapshot:
    return snaps[-1]


def gpu(snap: Snapshot, index: int) -> GpuSample:
    g = snap.gpu(index)
    assert g is not None
    return g


def test_same_seed_same_steps_identical() -> None:
    a = [s.to_dict() for s in run(seed=7, steps=30)]
    b = [s.to_dict() for s in run(seed=7, steps=30)]
    assert a == b
    c = [s.to_dict() for s in run(seed=8, steps=30)]
    assert a != c


def test_virtual_clock_advances_by_step() -> None:
    src = DemoSource(seed=1, start_time=1000.0, step=2.5)
    times = [src.snapshot().time for _ in range(4)]
    assert times == [1000.0, 1002.5, 1005.0, 1007.5]
    assert DemoSource().snapshot().time == DEMO_EPOCH


def test_injected_clock_drives_time() -> None:
    now = [500.0]
    src = DemoSource(seed=0, clock=lambda: now[0])
    assert src.snapshot().time == 500.0
    now[0] = 503.0
    s = src.snapshot()
    assert s.time == 503.0
    # Ages are relative to the clock's start.
    launcher = s.process_info(41187)
    assert launcher is not None and launcher.create_time == 500.0 - 7980


def test_step_must_be_positive() -> None:
    with pytest.raises(ValueError):
        DemoSource(step=0)


def test_first_snapshot_has_no_rates_like_a_real_source() -> None:
    first, second = run(steps=2)
    assert first.host is not None and second.host is not None
    assert first.host.cpu_percent is None
    assert first.host.disk.read_bytes_per_s is None
    assert all(p.cpu_percent is None for p in first.processes if p.visible)
    assert second.host.cpu_percent is not None
    assert second.host.disk.read_bytes_per_s is not None
    assert all(p.cpu_percent is not None for p in second.processes if p.visible)


def test_kind_and_identity(snap: Snapshot) -> None:
    assert DemoSource.kind == "demo" and snap.source == "demo"
    assert snap.driver.available and snap.driver.driver_version and snap.driver.cuda_version
    assert len(snap.gpus) == 8
    uuids = [g.uuid for g in snap.gpus]
    assert len(set(uuids)) == 8
    for g in snap.gpus:
        assert g.name == "NVIDIA H100 80GB HBM3"
        assert g.uuid is not None and re.fullmatch(
            r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", g.uuid
        )
        assert g.pci_bus_id is not None and re.fullmatch(
            r"00000000:[0-9A-F]{2}:00\.0", g.pci_bus_id
        )
        assert g.minor_number == g.index
        assert (g.pcie.max_gen, g.pcie.max_width) == (5, 16)
        assert g.pcie.link_max_bytes_per_s == pytest.approx(63.0e9, rel=0.01)
        m = g.memory
        assert m.total and m.used is not None and m.free is not None and m.reserved
        assert m.used + m.free + m.reserved == m.total
        assert g.power_w is not None and g.power_limit_w is not None
        assert 0 < g.power_w <= g.power_limit_w
        assert g.fan_percent is None  # SXM: no fan; n/a, never 0
    # Same seed, same UUIDs.
    assert [g.uuid for g in run(steps=1)[0].gpus] == uuids


def test_gpu_bound_torchrun_job(snaps: list[Snapshot], snap: Snapshot) -> None:
    for i in (0, 1):
        utils = [gpu(s, i).utilization.gpu for s in snaps]
        assert statistics.mean(u or 0 for u in utils) > 93
        assert (gpu(snap, i).power_w or 0) > 550
    ranks = [p for g in snap.gpus[:2] for p in g.processes]
    assert len(ranks) == 2
    launcher = snap.process_info(41187)
    assert launcher is not None and launcher.command and "torchrun" in launcher.command
    assert "--nproc_per_node=2" in launcher.command
    for r in ranks:
        info = snap.process_info(r.pid)
        assert info is not None and info.ppid == 41187 and info.user == "alice"
        workers = [p for p in snap.processes if p.ppid == r.pid]
        assert len(workers) == 4
        assert all(0 < (w.cpu_percent or 0) < 50 for w in workers)


def test_data_starved_job(snaps: list[Snapshot], snap: Snapshot) -> None:
    utils = [gpu(s, 2).utilization.gpu or 0 for s in snaps]
    assert min(utils) < 30 and max(utils) > 50
    assert 25 < statistics.mean(utils) < 55
    (main,) = gpu(snap, 2).processes
    workers = [p for p in snap.processes if p.ppid == main.pid]
    assert len(workers) == 8
    assert all((w.cpu_percent or 0) > 80 for w in workers)
    assert all((w.read_bytes_per_s or 0) > 30e6 for w in workers)
    statuses = {p.status for s in snaps for p in s.processes if p.ppid == main.pid}
    assert "disk-sleep" in statuses and "running" in statuses
    # The host's disk read accounts for the workers' reads.
    assert snap.host is not None and snap.host.disk.read_bytes_per_s is not None
    assert snap.host.disk.read_bytes_per_s >= sum(w.read_bytes_per_s or 0 for w in workers)
    assert (snap.host.iowait_percent or 0) > 0


def test_idle_process_holding_memory(snap: Snapshot) -> None:
    g = gpu(snap, 3)
    assert g.utilization.gpu == 0
    (p,) = g.processes
    assert p.gpu_memory is not None and p.gpu_memory >= 70 * GiB
    info = snap.process_info(p.pid)
    assert info is not None and info.create_time is not None
    assert snap.time - info.create_time > 8 * 3600
    assert info.cpu_percent is not None and info.cpu_percent < 2


def test_free_gpu(snap: Snapshot) -> None:
    g = gpu(snap, 4)
    assert g.processes == ()
    assert g.utilization.gpu == 0
    assert g.clock_event_reasons == ("idle",)


def test_pcie_heavy_job(snap: Snapshot) -> None:
    g = gpu(snap, 5)
    assert (g.pcie.rx_bytes_per_s or 0) > 0.6 * LINK_MAX
    assert (g.pcie.rx_bytes_per_s or 0) <= LINK_MAX
    assert (g.utilization.gpu or 0) < 60
    assert (g.pcie.gen, g.pcie.width) == (5, 16)


def test_throttled_near_oom_gpu_and_unlisted_holder(snap: Snapshot) -> None:
    g = gpu(snap, 6)
    assert g.memory.used is not None and g.memory.total is not None
    assert g.memory.used / g.memory.total >= 0.97
    assert (g.temperature_c or 0) >= 85
    assert g.clock_event_reasons is not None
    assert {"sw power cap", "sw thermal"} <= set(g.clock_event_reasons)
    assert g.clocks.sm_mhz is not None and g.clocks.sm_max_mhz is not None
    assert g.clocks.sm_mhz < g.clocks.sm_max_mhz
    assert g.power_w == g.power_limit_w
    (holder,) = snap.unlisted_holders
    assert holder.gpu == 6 and holder.user == "carol"
    assert snap.process_info(holder.pid) is None
    assert holder.pid not in {p.pid for g in snap.gpus for p in g.processes}
    # NVML's used memory includes what the holder keeps, beyond the listed processes.
    assert g.memory.used > sum(p.gpu_memory or 0 for p in g.processes)


def test_degraded_link_main_bound_and_invisible_pid(snap: Snapshot) -> None:
    g = gpu(snap, 7)
    assert (g.pcie.gen, g.pcie.width) == (4, 8)
    assert (g.utilization.gpu or 0) > 5
    main, ghost = sorted(g.processes, key=lambda p: p.pid)
    info = snap.process_info(main.pid)
    assert info is not None and (info.cpu_percent or 0) >= 90
    workers = [p for p in snap.processes if p.ppid == main.pid]
    assert len(workers) == 4 and all((w.cpu_percent or 0) <= 3 for w in workers)
    assert (g.utilization.gpu or 0) < 50
    ghost_info = snap.process_info(ghost.pid)
    assert ghost_info is not None and ghost_info.visible is False
    assert ghost_info.user is None and ghost_info.command is None
    assert ghost.gpu_memory is not None and ghost.gpu_memory > 0


def test_host_consistent_with_processes(snap: Snapshot) -> None:
    h = snap.host
    assert h is not None
    assert h.cpu_count == 64 and len(h.cpu_per_core) == 64
    assert all(0 <= c <= 100 for c in h.cpu_per_core)
    assert h.cpu_percent == pytest.approx(sum(h.cpu_per_core) / 64, abs=0.1)
    proc_cpu = sum(p.cpu_percent or 0 for p in snap.processes)
    assert sum(h.cpu_per_core) >= proc_cpu * 0.97
    assert h.memory.total == 2**40
    rss = sum(p.rss or 0 for p in snap.processes)
    assert h.memory.used is not None and h.memory.used >= rss
    assert h.memory.available is not None
    assert h.memory.used + h.memory.available <= h.memory.total
    assert h.load_average is not None and h.load_average[0] > 5
    assert h.net.rx_bytes_per_s is not None and h.net.tx_bytes_per_s is not None


def test_users_commands_and_text_are_clean(snap: Snapshot) -> None:
    users = {p.user for p in snap.processes if p.visible}
    assert users == {"alice", "bob", "carol"}
    for p in snap.processes:
        for text in (p.user, p.name, p.command):
            assert text == clean_text(text)
    pids = [p.pid for p in snap.processes]
    assert pids == sorted(pids) and len(set(pids)) == len(pids)
    # Every GPU process has its host info joined in, as the live source does.
    for g in snap.gpus:
        for p in g.processes:
            assert p.host is not None and p.host == snap.process_info(p.pid)


def test_json_round_trip(snap: Snapshot) -> None:
    data = json.loads(json.dumps(snap.to_dict()))
    assert Snapshot.from_dict(data) == snap


def test_real_clock_mode_advances_with_time() -> None:
    now = [100.0]
    src = DemoSource(seed=0, clock=lambda: now[0])
    src.snapshot()
    for _ in range(30):
        now[0] += 1.0
        s = src.snapshot()
    assert s.time == 130.0
    assert s.host is not None and s.host.cpu_percent is not None


def test_clock_event_reason_names_match_the_nvml_source(snaps: list[Snapshot]) -> None:
    from gputop.model import CLOCK_EVENT_REASONS

    known = {name for _, name in CLOCK_EVENT_REASONS}
    used = {r for s in snaps for g in s.gpus for r in g.clock_event_reasons or ()}
    assert used and used <= known


def test_phases_link_flap_and_cached_epoch() -> None:
    """GPU 1's link runs at x8 during LINK_FLAP; bob's workers stream from disk for
    STREAM_S of each epoch, then read from the page cache (no disk wait, little I/O)."""
    snaps = run(seed=0, steps=int(EPOCH_S) + 1)
    bob = set(range(52871, 52879))
    for s in snaps:
        elapsed = s.time - DEMO_EPOCH
        g1 = gpu(s, 1)
        assert (g1.pcie.gen, g1.pcie.width) == (
            (5, 8) if LINK_FLAP[0] <= elapsed < LINK_FLAP[1] else (5, 16)
        )
        assert (g1.utilization.gpu or 0) > 85  # still busy: the link is not the bottleneck
    streaming = [s for s in snaps if 10 <= s.time - DEMO_EPOCH < STREAM_S]
    cached = [s for s in snaps if STREAM_S + 20 <= s.time - DEMO_EPOCH < EPOCH_S]
    assert streaming and cached
    for s in cached:
        workers = [p for p in s.processes if p.pid in bob]
        assert len(workers) == 8
        assert all(p.status != "disk-sleep" for p in workers)
        assert sum(p.read_bytes_per_s or 0 for p in workers) < 10 * 2**20
        assert all((p.cpu_percent or 0) > 80 for p in workers)  # still decoding at a full core
    reads = [sum(p.read_bytes_per_s or 0 for p in s.processes if p.pid in bob) for s in streaming]
    assert min(reads) > 500e6
    after = snaps[-1]  # the next epoch streams again
    assert sum(p.read_bytes_per_s or 0 for p in after.processes if p.pid in bob) > 100e6


# --- the H200 node: GPM and NVLink, the verdicts that see inside utilization -------------


def h200_diagnoses(ticks: int = 40, seed: int = 0) -> list[Diagnosis]:
    src = DemoSource(seed=seed, start_time=DEMO_EPOCH, step=1.0, node="h200")
    feed, hist, out = Feed(), [], []
    for _ in range(ticks):
        hist.append(src.snapshot())
        out.append(feed.frame(hist).diagnosis)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_h200_node_shows_each_verdict_that_sees_inside_utilization(seed: int) -> None:
    """Once warmed up, every tick: each new kind is a GPU verdict and a job verdict."""
    new = {LAUNCH_MAIN, LOW_SM, TENSOR_IDLE, MEMORY_BANDWIDTH, TRANSFER_NVLINK}
    for d in h200_diagnoses(seed=seed)[10:]:
        assert d.error is None, d.traceback
        assert new <= {v.kind for v in d.gpus.values()}, d.gpus
        assert new <= {v.kind for v in d.job_verdicts.values()}, d.job_verdicts
        assert GPU_BOUND in {v.kind for v in d.gpus.values()}  # a bf16 job, SMs busy


def test_h200_node_reports_gpm_and_nvlink_in_range() -> None:
    src = DemoSource(seed=4, node="h200")
    for _ in range(30):
        snap = src.snapshot()
        assert snap.hostname == "gpu-node-12"
        assert check_values(snap, "demo", "the demo") is snap  # every value in its range
        assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
        for g in snap.gpus:
            a, nv = g.activity, g.nvlink
            assert g.name == "NVIDIA H200" and a.sm is not None and a.tensor is not None
            assert g.utilization.gpu is not None and a.sm <= g.utilization.gpu
            assert a.tensor <= a.sm and nv.links == 18 and nv.peers == ("switch",) * 18
            assert nv.rx_bytes_per_s is not None and nv.max_bytes_per_s == 18 * 25e9
            assert nv.rx_bytes_per_s <= nv.max_bytes_per_s
    idle = snap.gpus[7]
    assert idle.activity.sm == 0.0 and not idle.processes  # GPM there, nothing runs


def test_default_node_is_gpu_node_07_without_gpm() -> None:
    """The default demo is the H100 node of before (its goldens pin every value)."""
    a = [s.to_dict() for s in run(seed=5, steps=5)]
    src = DemoSource(seed=5, node="h100")
    assert a == [src.snapshot().to_dict() for _ in range(5)]
    assert all(g.activity.sm is None and g.nvlink.links is None for g in run(steps=2)[-1].gpus)
    with pytest.raises(ValueError, match="unknown demo node 'a100'"):
        DemoSource(node="a100")


def test_demo_node_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--demo", "--demo-node", "h200"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hostname"] == "gpu-node-12"
    assert all(g["activity"]["sm"] is not None for g in doc["gpus"])
    assert all(g["nvlink"]["links"] == 18 for g in doc["gpus"])
    with pytest.raises(SystemExit) as exit_:
        main(["--once", "--demo-node", "h200"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith("gputop: error: --demo-node needs --demo\n")


# --- the probe node: jobs running gputop's probe, the verdicts from measurement ----------


def probe_diagnoses(ticks: int = 30, seed: int = 0) -> list[Diagnosis]:
    src = DemoSource(seed=seed, start_time=DEMO_EPOCH, step=1.0, node="h200-probe")
    feed, hist, out = Feed(), [], []
    for _ in range(ticks):
        snap = src.snapshot()
        assert check_values(snap, "demo", "the demo") is snap  # every probe value in range
        assert Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
        hist.append(snap)
        out.append(feed.frame(hist).diagnosis)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_probe_node_shows_each_verdict_from_measurement(seed: int) -> None:
    """Once warmed up, every tick: a job input-bound (measured) whose workers say where, one
    not input-bound (measured) whose GPU side says memory-bandwidth-bound, and one whose
    caching allocator holds most of a nearly full GPU."""
    for d in probe_diagnoses(seed=seed)[10:]:
        assert d.error is None, d.traceback
        by_user = {j.user: d.job_verdicts[j.id] for j in d.jobs}
        kim, lena, mallory = by_user["kim"], by_user["lena"], by_user["mallory"]
        assert (kim.kind, kim.also) == (INPUT_MEASURED, (INPUT_CPU,)), kim
        assert "of each step waiting for the next batch" in kim.evidence
        assert "2 ranks" in kim.evidence
        assert (lena.kind, lena.also) == (NOT_INPUT_MEASURED, (MEMORY_BANDWIDTH,)), lena
        assert mallory.kind == GPU_BOUND and ALLOCATOR_CACHE in mallory.also, mallory
        probes = {j.user: j.probe for j in d.jobs}
        assert all(p is not None and p.data_wait_ratio is not None for p in probes.values())
        assert {v.kind for v in d.gpus.values()} >= {INPUT_MEASURED, NOT_INPUT_MEASURED}


def test_probe_node_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--demo", "--demo-node", "h200-probe"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["hostname"] == "gpu-node-14"
    probed = [p for p in doc["processes"] if p["probe"] is not None]
    assert len(probed) == 4  # kim's two ranks, lena's and mallory's main processes
    assert all(0 <= p["probe"]["data_wait_ratio"] <= 1 for p in probed)
    assert [j["probe"] is not None for j in doc["jobs"]] == [True] * len(doc["jobs"])


def test_once_job_lines_show_the_measured_wait_and_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A job with a probe: 'wait 42% step 310 ms' before its command, and its verdict from
    measurement even in --once (the probe's figure is a window of its own); a job without
    one: its line as before (the default demo's text has no 'wait ')."""
    assert main(["--once", "--demo", "--demo-node", "h200-probe"]) == 0
    text = capsys.readouterr().out
    jobs = text[text.index("\nJobs (") :]
    kim = next(line for line in jobs.splitlines() if " kim " in line)
    assert re.search(r"\bwait \d+% step \d+ ms  torchrun", kim), kim
    assert "Verdict: input-bound (measured)" in text
    assert main(["--once", "--demo"]) == 0
    assert "wait " not in capsys.readouterr().out.replace("iowait ", "")


def test_once_and_dashboard_word_a_jobs_probe_alike() -> None:
    """One wording of the probe's figures: --once's job line carries exactly the words of the
    dashboard's job line (its wide PROBE cell), also at the edges where the two once
    disagreed: a step of seconds ('1.35 s', not '1350 ms') and an impossible share or step,
    which reads n/a (it was clamped to 100 % in --once)."""
    from gputop.textout import render_text
    from gputop.ui.screens.jobs import job_cells

    src = DemoSource(seed=1, start_time=DEMO_EPOCH, step=1.0, node="h200-probe")
    snap = src.snapshot()
    diagnosis = Feed().frame([snap]).diagnosis
    job = next(j for j in diagnosis.jobs if j.probe is not None)
    assert job.probe is not None
    edges = {
        "wait 42% step 1.35 s": (0.42, 1.35),
        "wait n/a step 12.00 s": (None, 12.0),
        "wait n/a step n/a": (1e300, -1.0),
        "wait 100% step n/a": (1.0, float("inf")),
        "wait n/a step 4.2 ms": (float("nan"), 0.0042),
    }
    for words, (wait, step) in edges.items():
        probe = dataclasses.replace(
            job.probe, ranks=1, data_wait_ratio=wait, worst_data_wait_ratio=wait, step_seconds=step
        )
        one = dataclasses.replace(job, probe=probe)
        assert job_cells(one)["probe"] == words
        text = render_text(snap, diagnosis=dataclasses.replace(diagnosis, jobs=(one,)))
        line = next(t for t in text.splitlines() if t.lstrip().startswith(str(job.root_pid)))
        assert f"  {words}  " in line, (words, line)


def test_the_demo_nodes_are_the_names_the_parsers_offer() -> None:
    """The names live in ``sources.base`` (the parsers take them without loading the demo);
    each names one server, in order: the first is the default."""
    from gputop.cli import build_parser
    from gputop.sources.base import DEMO_NODES
    from gputop.sources.demo import NODES, DemoSource

    assert tuple(NODES) == DEMO_NODES
    assert DemoSource(0).node is NODES[DEMO_NODES[0]]
    choices = {a.dest: a.choices for a in build_parser()._actions}
    assert choices["demo_node"] == DEMO_NODES
