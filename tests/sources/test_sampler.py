"""The background sampler: scheduling, no overlap, no burst, staleness, errors, lifecycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping

import pytest

from gputop.model import (
    DriverInfo,
    GpuProcess,
    GpuSample,
    HostSample,
    ProcessInfo,
    SampleError,
    Snapshot,
    UnlistedHolder,
)
from gputop.sampler import Sampler
from gputop.sources.live import LiveSource


class FakeSource:
    kind = "fake"

    def __init__(
        self,
        delay: float = 0.0,
        fail: Callable[[int], bool] = lambda n: False,
        gate: threading.Event | None = None,
    ) -> None:
        self.delay = delay
        self.fail = fail
        self.gate = gate
        self.calls = 0
        self.starts: list[float] = []
        self.threads: list[str] = []
        self.active = 0
        self.max_active = 0
        self.closed = 0
        self._lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        with self._lock:
            self.calls += 1
            n = self.calls
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.starts.append(time.monotonic())
        self.threads.append(threading.current_thread().name)
        try:
            if self.gate is not None:
                self.gate.wait(60)
            if self.delay:
                time.sleep(self.delay)
            if self.fail(n):
                raise RuntimeError(f"boom {n}")
            return Snapshot(time=float(n), hostname="h", driver=DriverInfo(available=False))
        finally:
            with self._lock:
                self.active -= 1

    def close(self) -> None:
        self.closed += 1


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``cond`` until true; the timeout only catches a hang (generous: a loaded
    2-core machine can be many times slower than an idle one)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


@pytest.fixture
def samplers() -> Iterator[list[Sampler]]:
    made: list[Sampler] = []
    yield made
    for s in made:
        s.stop(timeout=2)


def test_tick_now_stores_and_fills_tick_cost() -> None:
    src = FakeSource()
    s = Sampler(src, interval=1.0, history=3)
    assert s.latest() is None and s.history() == ()
    snaps = [s.tick_now() for _ in range(5)]
    assert s.latest() is snaps[-1]
    assert s.history() == tuple(snaps[-3:])  # bounded, oldest first
    assert snaps[-1].tick_seconds is not None and snaps[-1].tick_cpu_seconds is not None
    assert isinstance(s.history(), tuple)


def test_tick_pair_starts_its_readings_a_window_apart() -> None:
    """--once: two readings (rates need two); what runs between them is inside the window."""
    now = [100.0]
    sleeps: list[float] = []
    order: list[str] = []

    class Timed(FakeSource):
        cost = 0.03  # seconds each reading takes

        def snapshot(self) -> Snapshot:
            order.append("tick")
            now[0] += self.cost
            return super().snapshot()

    def meanwhile() -> None:
        order.append("meanwhile")
        now[0] += 0.02

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    source = Timed()
    s = Sampler(source, interval=1.0)
    second = s.tick_pair(0.1, meanwhile=meanwhile, clock=lambda: now[0], sleep=sleep)
    assert order == ["tick", "meanwhile", "tick"]
    assert sleeps == [0.05]  # 0.1 minus the first reading and the work in between
    assert s.history()[-1] is second and len(s.history()) == 2
    # a first reading longer than the window: the second follows at once
    source.cost = 0.2
    sleeps.clear()
    s.tick_pair(0.1, clock=lambda: now[0], sleep=sleep)
    assert sleeps == []


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Sampler(FakeSource(), interval=0)
    with pytest.raises(ValueError):
        Sampler(FakeSource(), history=0)
    s = Sampler(FakeSource())
    with pytest.raises(ValueError):
        s.interval = -1


def test_first_tick_immediate_then_on_interval(samplers: list[Sampler]) -> None:
    src = FakeSource()
    seen: list[tuple[float, str]] = []
    s = Sampler(
        src,
        interval=0.2,
        on_snapshot=lambda snap: seen.append((snap.time, threading.current_thread().name)),
    )
    samplers.append(s)
    s.start()
    assert wait_for(lambda: src.calls >= 6)
    gaps = [b - a for a, b in zip(src.starts, src.starts[1:], strict=False)]
    # Measured from the source's entry, a moment after the sampler's own start time
    # (longer under load): a margin, still far from a burst (gaps near 0).
    assert all(g >= 0.1 for g in gaps[:5]), gaps
    # on_snapshot runs in the worker thread, with every snapshot in order.
    assert wait_for(lambda: len(seen) >= 6)
    assert [t for t, _ in seen[:6]] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert {name for _, name in seen} == {"gputop-sampler"}
    with pytest.raises(RuntimeError):
        s.start()


def test_first_tick_does_not_wait_an_interval(samplers: list[Sampler]) -> None:
    src = FakeSource()
    s = Sampler(src, interval=600.0)
    samplers.append(s)
    s.start()
    assert wait_for(lambda: src.calls == 1)  # long before the 600 s interval


def test_slow_ticks_never_overlap_nor_burst(samplers: list[Sampler]) -> None:
    src = FakeSource(delay=0.12)
    s = Sampler(src, interval=0.03)
    samplers.append(s)
    s.start()
    # tick_now from another thread while the worker ticks: still one tick at a time.
    threading.Thread(target=s.tick_now).start()
    time.sleep(0.75)
    s.stop()
    assert src.max_active == 1
    # 0.75 s of 0.12 s ticks: at most ~7, never a catch-up burst.
    assert src.calls <= 8
    gaps = [b - a for a, b in zip(src.starts, src.starts[1:], strict=False)]
    assert all(g >= 0.11 for g in gaps), gaps


def test_stale_while_a_tick_hangs_and_consumers_do_not_block(samplers: list[Sampler]) -> None:
    gate = threading.Event()
    src = FakeSource(gate=gate)
    s = Sampler(src, interval=0.05)
    samplers.append(s)
    gate.set()
    s.tick_now()
    gate.clear()
    s.start()
    assert wait_for(lambda: src.calls >= 2)
    assert wait_for(lambda: s.stale)
    # The consumers return while the tick is held (the gate is closed): they did not
    # wait for it. Run in a thread, so that a consumer that waits fails (the gate's 10 s
    # would otherwise free it) instead of hanging the test.
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend([s.latest(), s.history()]))
    reader.start()
    reader.join(8)
    assert not gate.is_set() and src.active == 1  # still hung
    assert len(got) == 2, "latest()/history() waited for the hung tick"
    assert got[0] is not None and len(got[1]) == 1  # type: ignore[arg-type]
    gate.set()
    assert wait_for(lambda: not s.stale)


def test_pause_and_resume(samplers: list[Sampler]) -> None:
    src = FakeSource()
    s = Sampler(src, interval=0.02)
    samplers.append(s)
    s.paused = True
    s.start()
    time.sleep(0.15)
    assert src.calls == 0
    s.paused = False
    assert s.paused is False
    assert wait_for(lambda: src.calls >= 3)
    s.paused = True
    with s._tick_lock:  # a tick in flight finishes; none starts after this
        n = src.calls
    time.sleep(0.15)
    assert src.calls == n


def test_interval_change_takes_effect_at_next_tick(samplers: list[Sampler]) -> None:
    src = FakeSource()
    s = Sampler(src, interval=30.0)
    samplers.append(s)
    s.start()
    assert wait_for(lambda: src.calls == 1)
    time.sleep(0.05)
    assert src.calls == 1  # waiting 30 s
    s.interval = 0.02
    assert s.interval == 0.02
    assert wait_for(lambda: src.calls >= 4)


def test_source_exceptions_are_logged_and_the_loop_goes_on(
    samplers: list[Sampler], caplog: pytest.LogCaptureFixture
) -> None:
    src = FakeSource(fail=lambda n: n in (2, 3))
    s = Sampler(src, interval=0.01)
    samplers.append(s)
    s.start()
    assert wait_for(lambda: src.calls >= 5)
    assert wait_for(lambda: s.latest() is not None and s.latest().time >= 5)  # type: ignore[union-attr]
    assert [snap.time for snap in s.history()][:3] == [1.0, 4.0, 5.0]
    assert "sampling failed" in caplog.text and "boom 2" in caplog.text


def test_tick_now_propagates_source_errors() -> None:
    s = Sampler(FakeSource(fail=lambda n: True))
    with pytest.raises(RuntimeError, match="boom"):
        s.tick_now()


def test_callback_errors_do_not_stop_the_loop(samplers: list[Sampler]) -> None:
    src = FakeSource()

    def bad(snap: Snapshot) -> None:
        raise ValueError("ui broke")

    s = Sampler(src, interval=0.01, on_snapshot=bad)
    samplers.append(s)
    s.start()
    assert wait_for(lambda: src.calls >= 3)


def test_stop_joins_and_closes_once(samplers: list[Sampler]) -> None:
    src = FakeSource()
    s = Sampler(src, interval=0.01)
    s.start()
    assert wait_for(lambda: src.calls >= 2)
    s.stop()
    assert not s.running
    assert src.closed == 1
    n = src.calls
    time.sleep(0.05)
    assert src.calls == n
    s.stop()
    assert src.closed == 1
    with pytest.raises(RuntimeError):
        s.tick_now()


def test_stop_without_start_closes_the_source() -> None:
    src = FakeSource()
    s = Sampler(src)
    s.tick_now()
    s.stop()
    assert src.closed == 1


# --- LiveSource: composition of the readers (fakes; the real readers have their own tests)


NVML_OK = DriverInfo(available=True, driver_version="550.1", cuda_version="12.4")


class FakeNvml:
    def __init__(self, driver: DriverInfo = NVML_OK, fail: bool = False) -> None:
        self.driver = driver
        self.fail = fail
        self.reads = 0
        self.closed = False

    def read(self) -> tuple[tuple[GpuSample, ...], tuple[SampleError, ...]]:
        self.reads += 1
        if self.fail:
            raise OSError("nvml exploded")
        return (
            (
                GpuSample(
                    index=0,
                    minor_number=3,
                    processes=(GpuProcess(pid=10, gpu_memory=5), GpuProcess(pid=0)),
                ),
                GpuSample(index=1, minor_number=4, processes=(GpuProcess(pid=20),)),
            ),
            (SampleError("nvml", "fan not supported", gpu=1, metric="fan"),),
        )

    def close(self) -> None:
        self.closed = True
        raise RuntimeError("close failed")  # must not stop the host reader's close


class FakeHost:
    def __init__(self, fail_host: bool = False, fail_procs: bool = False) -> None:
        self.fail_host = fail_host
        self.fail_procs = fail_procs
        self.asked: list[list[int]] = []
        self.closed = False
        self.last_errors: tuple[str, ...] = ()

    def read_host(self) -> HostSample:
        self.last_errors = ("disk: PermissionError: nope",)
        if self.fail_host:
            raise RuntimeError("psutil broke")
        return HostSample(cpu_percent=12.0, cpu_count=4)

    def read_processes(
        self, pids: Iterable[int], *, ancestors: bool = False
    ) -> tuple[ProcessInfo, ...]:
        self.last_errors = ()
        pids = list(pids)
        self.asked.append(pids)
        if self.fail_procs:
            raise RuntimeError("proc broke")
        rows = []
        for pid in pids:
            if pid == 20:
                rows.append(ProcessInfo(pid=20, visible=False))
            else:
                rows.append(ProcessInfo(pid=pid, user="u", command="python x"))
        rows.append(ProcessInfo(pid=11, ppid=10, user="u"))  # a dataloader worker
        return tuple(rows)

    def close(self) -> None:
        self.closed = True


class FakeHolders:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[dict[int, int], set[int]]] = []
        self.fail = fail

    def __call__(
        self, minor_to_gpu: Mapping[int, int], listed: Collection[int]
    ) -> tuple[UnlistedHolder, ...]:
        self.calls.append((dict(minor_to_gpu), set(listed)))
        if self.fail:
            raise PermissionError("no /proc")
        return (UnlistedHolder(pid=99, gpu=1, minor_number=4), UnlistedHolder(pid=10, gpu=0))


def make_live(**kw: object) -> tuple[LiveSource, FakeNvml, FakeHost, FakeHolders]:
    nvml = kw.pop("nvml", None) or FakeNvml()
    host = kw.pop("host", None) or FakeHost()
    holders = kw.pop("holders", None) or FakeHolders()
    clock = [0.0]
    src = LiveSource(
        nvml,  # type: ignore[arg-type]
        host,  # type: ignore[arg-type]
        holders,  # type: ignore[arg-type]
        hostname="node\x1b[31m1",
        clock=lambda: 1234.5,
        monotonic=lambda: clock[0],
        **kw,  # type: ignore[arg-type]
    )
    src.fake_clock = clock  # type: ignore[attr-defined]
    return src, nvml, host, holders  # type: ignore[return-value]


def test_live_joins_host_info_into_gpu_processes() -> None:
    src, _nvml, host, holders = make_live()
    assert src.kind == "nvml"
    snap = src.snapshot()
    assert snap.source == "nvml" and snap.time == 1234.5
    assert snap.hostname == "node1"  # cleaned
    assert host.asked == [[10, 20]]  # pid 0 (driver bug) is never looked up
    g0, g1 = snap.gpus
    p10, p0 = g0.processes
    assert p10.host is not None and p10.host.user == "u" and p10.gpu_memory == 5
    assert p0.host is None
    (p20,) = g1.processes
    assert p20.host is not None and p20.host.visible is False
    assert [p.pid for p in snap.processes] == [10, 11, 20]
    assert snap.host is not None and snap.host.cpu_percent == 12.0
    # NVML's own errors and the host reader's reported problems are kept.
    assert any(e.message == "fan not supported" for e in snap.errors)
    assert any(e.source == "host" and "PermissionError" in e.message for e in snap.errors)
    assert snap.tick_seconds is not None and snap.tick_seconds >= 0
    assert snap.tick_cpu_seconds is not None and snap.tick_cpu_seconds >= 0
    # Holders: minor numbers mapped to indices; GPU pids and descendants count as listed.
    assert holders.calls == [({3: 0, 4: 1}, {10, 11, 20})]
    assert [h.pid for h in snap.unlisted_holders] == [99]


def test_with_host_copies_every_field_of_a_gpu_process() -> None:
    """``with_host`` (the join's fast ``replace``) passes every field: a field added to
    GpuProcess and not passed would be left at its default here."""
    import dataclasses

    from gputop.model import GpuProcess, ProcessInfo, with_host

    values = {f.name: object() for f in dataclasses.fields(GpuProcess)}
    row = GpuProcess(**values)  # type: ignore[arg-type]
    info = ProcessInfo(7)
    joined = with_host(row, info)
    for f in dataclasses.fields(GpuProcess):
        want = info if f.name == "host" else values[f.name]
        assert getattr(joined, f.name) is want, f.name


def test_live_host_only_when_no_driver() -> None:
    nvml = FakeNvml(DriverInfo(available=False, error="NVML library not found"))
    src, _, host, holders = make_live(nvml=nvml)
    assert src.kind == "host-only"
    snap = src.snapshot()
    assert snap.source == "host-only"
    assert snap.gpus == () and nvml.reads == 0
    assert snap.driver.error == "NVML library not found"
    assert snap.host is not None
    assert host.asked == []
    assert holders.calls == [({}, set())]


def test_live_never_raises_reader_failures_become_errors() -> None:
    src, _, _, _ = make_live(nvml=FakeNvml(fail=True), host=FakeHost(fail_host=True))
    snap = src.snapshot()
    assert snap.gpus == () and snap.host is None
    sources = {e.source for e in snap.errors}
    assert sources == {"nvml", "host"}
    assert any("nvml exploded" in e.message for e in snap.errors)

    src, _, _, _ = make_live(host=FakeHost(fail_procs=True), holders=FakeHolders(fail=True))
    snap = src.snapshot()
    assert len(snap.gpus) == 2 and all(p.host is None for p in snap.gpus[0].processes)
    assert any(e.metric == "processes" and "proc broke" in e.message for e in snap.errors)
    assert any(e.source == "holders" and "no /proc" in e.message for e in snap.errors)
    assert snap.unlisted_holders == ()


def test_live_holder_scan_runs_on_a_slower_cadence() -> None:
    src, _, _, holders = make_live(holder_interval=5.0)
    clock = src.fake_clock  # type: ignore[attr-defined]
    for t in range(12):
        clock[0] = float(t)
        snap = src.snapshot()
        assert [h.pid for h in snap.unlisted_holders] == [99]  # reused between scans
    assert len(holders.calls) == 3  # t = 0, 5, 10


def test_live_holder_scan_runs_every_ten_seconds_by_default() -> None:
    """The live source's default period (``RECOMMENDED_INTERVAL_S``): the scan reads every
    process's descriptors, so it runs once in 10 s (the old default ran it every 5 s);
    its holders are carried between scans."""
    src, _, _, holders = make_live()
    clock = src.fake_clock  # type: ignore[attr-defined]
    for t in range(25):
        clock[0] = float(t)
        assert [h.pid for h in src.snapshot().unlisted_holders] == [99]
    assert len(holders.calls) == 3  # t = 0, 10, 20


def test_live_holder_scan_backs_off_when_it_is_costly() -> None:
    """A scan that took 0.025 s of CPU waits 400 x that (10 s), not 5 s, before the next."""
    cpu = [0.0]
    src, _, _, holders = make_live(holder_interval=5.0, cpu_clock=lambda: cpu[0])
    real_scan = holders.__call__

    def costly(*args: object) -> object:
        cpu[0] += 0.025
        return real_scan(*args)  # type: ignore[arg-type]

    src._holders = costly  # type: ignore[assignment]
    clock = src.fake_clock  # type: ignore[attr-defined]
    for t in range(21):
        clock[0] = float(t)
        src.snapshot()
    assert len(holders.calls) == 3  # t = 0, 10, 20
    assert src.holder_wait == pytest.approx(10.0)


def test_live_close_closes_both_readers_even_if_one_fails() -> None:
    src, nvml, host, _ = make_live()
    src.close()
    assert nvml.closed and host.closed


def test_start_after_tick_now_keeps_the_schedule(samplers: list[Sampler]) -> None:
    """The sampler times its schedule from the start of its tick, the test from the
    source's entry, a moment later (more under load): a wide margin, still far from "a
    second reading a few ms after the first"."""
    src = FakeSource()
    s = Sampler(src, interval=1.0)
    samplers.append(s)
    s.tick_now()
    s.start()
    assert wait_for(lambda: src.calls == 2)
    assert src.starts[1] - src.starts[0] >= 0.5  # not a second reading a few ms later


def test_tick_pair_waits_longer_where_the_source_needs_it() -> None:
    """GPM: a source whose readings must be further apart than the window (after its first
    reading it knows) gets its own spacing; one that says nothing (or nonsense) the window."""
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    class Gpm(FakeSource):
        min_pair_window_s: object = 0.2

    for need, expect in ((0.2, [0.2]), (0.05, [0.1]), ("0.5", [0.1]), (None, [0.1])):
        source = Gpm()
        source.min_pair_window_s = need
        sleeps.clear()
        Sampler(source, interval=1.0).tick_pair(0.1, clock=lambda: now[0], sleep=sleep)
        assert sleeps == expect, need
