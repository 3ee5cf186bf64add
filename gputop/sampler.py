"""The background sampler: one worker thread asks a source for a snapshot every interval.

Ticks never overlap; an overrun's missed ticks are never made up. A source's exception is
logged, kept in ``last_error``, and the loop carries on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from gputop.model import Snapshot, replace
from gputop.sources.base import Deferring, Source, pair_window

log = logging.getLogger(__name__)


class Sampler:
    def __init__(
        self,
        source: Source,
        interval: float = 1.0,
        history: int = 3600,
        on_snapshot: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self._wake = threading.Event()  # interval change, unpause, stop
        self.interval = interval  # checked first, as by its setter
        if history < 1:
            raise ValueError("history must be >= 1")
        self.source = source
        self.on_snapshot = on_snapshot
        self._paused = False
        self._history: deque[Snapshot] = deque(maxlen=history)
        self._lock = threading.Lock()  # guards _history (copies only)
        self._tick_lock = threading.Lock()  # one tick at a time (worker or tick_now)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._last_start = float("-inf")  # monotonic start of the last tick
        self._tick_started: float | None = None  # monotonic start of a running tick
        self.last_error: str | None = None
        self.ticks = 0

    @property
    def interval(self) -> float:
        return self._interval

    @interval.setter
    def interval(self, value: float) -> None:
        if not value > 0:
            raise ValueError("interval must be > 0")
        self._interval = float(value)
        self._wake.set()  # the wait is recomputed; takes effect for the next tick

    @property
    def paused(self) -> bool:
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self._paused = bool(value)
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stale(self) -> bool:
        """Whether the running tick started more than two intervals ago."""
        started = self._tick_started
        return started is not None and time.monotonic() - started > 2 * self._interval

    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._history[-1] if self._history else None

    def history(self) -> tuple[Snapshot, ...]:
        """Snapshots kept, oldest first."""
        with self._lock:
            return tuple(self._history)

    def start(self) -> None:
        """Start the worker thread; its first tick comes one interval after a recent
        ``tick_now()`` (readings milliseconds apart give meaningless rates). A snapshot
        that ``tick_now(processes=False)`` left without its processes is completed first,
        at once, and handed to ``on_snapshot``."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(target=self._run, name="gputop-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker thread and close the source (left open under a tick stuck for
        longer than ``timeout``)."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._closed:
            return
        if not self._tick_lock.acquire(timeout=max(0.0, timeout)):
            log.error("a tick is still running after %.1fs: source left open", timeout)
            return
        try:
            if not self._closed:
                self._closed = True
                self.source.close()
        except Exception:
            log.exception("closing the source failed")
        finally:
            self._tick_lock.release()

    def tick_now(self, *, processes: bool = True) -> Snapshot:
        """One snapshot now, kept like a worker tick, without ``on_snapshot``; the
        source's exception propagates. ``processes`` False: where the source can leave
        them for later (``Deferring``), the GPU processes' host side is read when the
        worker starts (the dashboard draws its first frame meanwhile)."""
        with self._tick_lock:
            if self._closed:
                raise RuntimeError("sampler stopped")
            return self._tick(processes=processes)

    def tick_pair(
        self,
        window: float,
        *,
        meanwhile: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Snapshot:
        """The second of two ``tick_now()`` readings ``window`` seconds apart (rates need
        two), or more where the source needs more (GPM); ``meanwhile`` runs between them,
        inside the window."""
        start = clock()
        self.tick_now()
        if meanwhile is not None:
            meanwhile()
        wait = start + pair_window(self.source, window) - clock()  # known after a reading
        if wait > 0:
            sleep(wait)
        return self.tick_now()

    def _tick(self, *, processes: bool = True) -> Snapshot:
        # The caller holds _tick_lock.
        start = self._last_start = self._tick_started = time.monotonic()
        cpu0 = time.thread_time()
        source = self.source
        try:
            if not processes and isinstance(source, Deferring):
                snap = source.snapshot(processes=False)
            else:
                snap = source.snapshot()
        finally:
            self._tick_started = None
        if snap.tick_seconds is None:
            wall, cpu = time.monotonic() - start, time.thread_time() - cpu0
            snap = replace(snap, tick_seconds=wall, tick_cpu_seconds=cpu)
        with self._lock:
            self._history.append(snap)
        self.ticks += 1
        return snap

    def _complete_latest(self) -> Snapshot | None:
        """The newest snapshot completed by its source, in its place (None: it was whole)."""
        with self._tick_lock:
            source = self.source
            latest = self.latest()
            if self._closed or latest is None or not isinstance(source, Deferring):
                return None
            self._tick_started = time.monotonic()
            try:
                whole = source.complete(latest)
            finally:
                self._tick_started = None
            if whole is latest:
                return None
            with self._lock:
                if self._history and self._history[-1] is latest:
                    self._history[-1] = whole
            return whole

    def _failed(self, exc: Exception) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        log.exception("sampling failed")

    def _hand_out(self, snap: Snapshot) -> None:
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(snap)
            except Exception:
                log.exception("on_snapshot callback failed")

    def _run(self) -> None:
        try:
            whole = self._complete_latest()
        except Exception as exc:
            self._failed(exc)
            whole = None
        if whole is not None:
            self._hand_out(whole)
        while not self._stopping.is_set():
            # paused: until woken (None); else until the next tick is due
            wait = None if self._paused else self._last_start + self._interval - time.monotonic()
            if wait is None or wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
                continue  # re-check: stop, pause or a new interval may have come
            with self._tick_lock:
                if self._stopping.is_set() or self._closed:
                    break
                if self._paused:  # paused since the check above: no tick after pause
                    continue
                try:
                    snap = self._tick()
                except Exception as exc:
                    self._failed(exc)
                    continue
            self.last_error = None
            self._hand_out(snap)


def make_source(demo: bool, seed: int | None, *, cpu_freq: bool = True) -> Source:
    """What a command samples: the demo (on the wall clock), or the live host."""
    if demo:
        from gputop.sources.demo import DemoSource

        return DemoSource(0 if seed is None else seed, clock=time.time)
    from gputop.sources.host import HostReader
    from gputop.sources.live import LiveSource

    return LiveSource(host=HostReader(cpu_freq=cpu_freq))
