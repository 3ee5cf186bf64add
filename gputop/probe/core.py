"""The probe's machinery: what it measures inside the training process, and the thread
that publishes it (the file's contract is gputop.probefile's).

Standard library and gputop.probefile only: this runs inside the user's training process,
in whatever environment that has. torch is never imported here: the DataLoader is patched
when the training code imports ``torch.utils.data`` (a ``sys.meta_path`` hook), or at once
when it already has.

The hot path is the wrapped ``__next__``: two ``perf_counter`` calls and a deque append.
Everything else (the window's figures, CUDA memory, the file) happens in one daemon thread,
started at the first batch taken, waking at most every ``PUBLISH_SECONDS``. Any error
there disables the probe with one line on stderr; the training loop never sees it.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import itertools
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gputop import probefile

#: The module and class whose ``__next__`` every DataLoader iterator (single- and
#: multi-process) inherits (torch 1.x and 2.x).
TORCH_MODULE = "torch.utils.data.dataloader"
TORCH_CLASS = "_BaseDataLoaderIter"

_perf = time.perf_counter

#: (wait start, batch in hand) per batch taken: the last WINDOW_STEPS steps need one more
#: batch (a step runs from one batch to the next).
_batches: collections.deque[tuple[float, float]] = collections.deque(
    maxlen=probefile.WINDOW_STEPS + 1
)
_lock = threading.RLock()
_state: dict[str, Any] = {}


def _fresh_state() -> None:
    """Nothing measured, nothing published: at start, and in a forked child."""
    _batches.clear()
    _state.update(
        publisher=None,  # the thread, once the first batch was taken
        stop=threading.Event(),
        published_upto=0.0,  # the perf_counter time of the last batch already published
        written=None,  # (st_dev, st_ino) of the file this process wrote
        start_ticks=None,
        pending_wait=0.0,  # waiting() seconds since the last step() (custom loops)
    )


_fresh_state()
_state.update(started=False, disabled=False, hook=None, cls=None, original=None)


def say(message: str) -> None:
    """The probe's one line on stderr (never raises: stderr may be closed)."""
    try:
        sys.stderr.write(f"gputop probe: {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


# --- starting, stopping ------------------------------------------------------------------


def enabled_by_env(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(probefile.ENABLE_ENV, "").strip() != "0"


def start() -> bool:
    """Start measuring (idempotent): patch the DataLoader now if torch's is imported, else
    when it is. False: the environment turns the probe off, or it was disabled."""
    with _lock:
        if _state["disabled"] or not enabled_by_env():
            return False
        if _state["started"]:
            return True
        _state["started"] = True
        module = sys.modules.get(TORCH_MODULE)
        if module is not None:
            _patch(module)
        else:
            hook = _ImportHook()
            _state["hook"] = hook
            sys.meta_path.insert(0, hook)
        return bool(_state["started"])


def running() -> bool:
    return bool(_state["started"]) and not _state["disabled"]


def disable(reason: str) -> None:
    """Stop for good in this process, with one line on stderr: unpatch, unhook, stop the
    publisher, remove the file it wrote."""
    with _lock:
        if _state["disabled"]:
            return
        _state["disabled"] = True
        _state["started"] = False
        say(f"disabled, training goes on unprobed: {reason}")
        _unpatch_and_unhook()
        _state["stop"].set()
        _remove_own_file()


def stop() -> None:
    """Stop quietly (the opposite of :func:`start`): unpatch, stop publishing, remove the
    file. A later :func:`start` starts afresh."""
    with _lock:
        _state["started"] = False
        _unpatch_and_unhook()
        _state["stop"].set()
        _remove_own_file()
        _fresh_state()


def _unpatch_and_unhook() -> None:
    hook = _state["hook"]
    if hook is not None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(hook)
        _state["hook"] = None
    cls, original = _state["cls"], _state["original"]
    if cls is not None and original is not None:
        cls.__next__ = original
    _state["cls"] = _state["original"] = None


def _at_exit() -> None:
    with _lock:
        _state["stop"].set()
        _remove_own_file()


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker, a multiprocessing rank) starts clean: no steps
    of its parent's, no publisher, and never touches the parent's file."""
    global _lock
    _lock = threading.RLock()  # the parent's publisher may have held it at the fork
    _fresh_state()
    if running() and _state["cls"] is not None:
        _state["cls"].__next__ = _first_next


atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)


# --- the DataLoader ---------------------------------------------------------------------


class _ImportHook:
    """A ``sys.meta_path`` finder that lets torch's own finder load the DataLoader module,
    then patches it once its code has run."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TORCH_MODULE:
            return None
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
        except Exception:
            return None  # the import goes on as if the probe were not there
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            try:
                with _lock:
                    if running():
                        _patch(module)
            except Exception as exc:
                disable(f"cannot patch the DataLoader: {type(exc).__name__}: {exc}")

        try:
            setattr(loader, "exec_module", exec_module)  # noqa: B010  (mypy: a method)
        except Exception:
            return spec
        return spec


def _patch(module: Any) -> None:
    """Wrap ``_BaseDataLoaderIter.__next__`` (once)."""
    try:
        cls = getattr(module, TORCH_CLASS)
        original = cls.__dict__["__next__"]
    except (AttributeError, KeyError):
        disable(f"this torch has no {TORCH_CLASS}.__next__ to measure")
        return
    if _state["cls"] is not None:
        return
    _state["cls"], _state["original"] = cls, original
    _make_wrappers(original)
    cls.__next__ = _first_next
    hook = _state["hook"]
    if hook is not None:  # its work is done
        _state["hook"] = None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(hook)


_first_next: Callable[[Any], Any]
_fast_next: Callable[[Any], Any]


def _make_wrappers(original: Callable[[Any], Any]) -> None:
    global _first_next, _fast_next
    append, perf = _batches.append, _perf

    @functools.wraps(original)
    def fast_next(self: Any) -> Any:
        # exactly what the original returns or raises (StopIteration too): a batch not
        # handed over is not a step
        t0 = perf()
        batch = original(self)
        append((t0, perf()))
        return batch

    @functools.wraps(original)
    def first_next(self: Any) -> Any:
        t0 = perf()
        batch = original(self)
        t1 = perf()
        try:
            append((t0, t1))
            with _lock:
                cls = _state["cls"]
                if running() and cls is not None:
                    cls.__next__ = fast_next
                    _start_publisher()
        except Exception as exc:  # the loop never sees the probe fail
            disable(f"{type(exc).__name__}: {exc}")
        return batch

    _first_next, _fast_next = first_next, fast_next


# --- custom loops -------------------------------------------------------------------------


class Waiting:
    """``with waiting(): batch = next(it)``: the time inside counts as waiting for data in
    the current step (closed by :func:`step`)."""

    __slots__ = ("t0",)

    def __enter__(self) -> Waiting:
        self.t0 = _perf()
        return self

    def __exit__(self, *exc: object) -> None:
        _state["pending_wait"] += _perf() - self.t0


def step() -> None:
    """A custom loop's step ends (call once per step, after its :class:`Waiting`)."""
    if not running():
        return
    try:
        t1 = _perf()
        wait = _state["pending_wait"]
        _state["pending_wait"] = 0.0
        _batches.append((t1 - wait, t1))
        if _state["publisher"] is None:
            with _lock:
                _start_publisher()
    except Exception as exc:
        disable(f"{type(exc).__name__}: {exc}")


# --- the figures --------------------------------------------------------------------------


def figures(batches: list[tuple[float, float]], now: float) -> dict[str, Any] | None:
    """The window's figures from (wait start, batch in hand) pairs, oldest first, at
    ``now`` (perf_counter): steps whose batch came in the last WINDOW_SECONDS, each from
    the batch before. None: no step in the window."""
    cut = now - probefile.WINDOW_SECONDS
    steps = 0
    total_step = total_wait = 0.0
    begin = None
    for (_, before), (t0, t1) in itertools.pairwise(batches):
        if t1 < cut:
            continue
        length = t1 - before
        if length < 0:
            continue
        steps += 1
        total_step += length
        total_wait += min(max(t1 - t0, 0.0), length)
        if begin is None:
            begin = before
    if steps == 0 or begin is None:
        return None
    window = max(now - begin, total_step)
    return {
        "window_seconds": window,
        "steps": steps,
        "data_wait_ratio": total_wait / total_step if total_step > 0 else None,
        "step_seconds": total_step / steps,
        "batches_per_second": steps / window if window > 0 else None,
    }


def cuda_memory() -> list[dict[str, int]]:
    """Per device, what torch's caching allocator holds, when this process has initialised
    CUDA (looked up in sys.modules: never imported here)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None:
        return []
    is_initialized = getattr(cuda, "is_initialized", None)
    if is_initialized is None or not is_initialized():
        return []
    out = []
    for device in range(min(int(cuda.device_count()), probefile.MAX_DEVICES)):
        out.append(
            {
                "device": device,
                "allocated": int(cuda.memory_allocated(device)),
                "reserved": int(cuda.memory_reserved(device)),
                "peak": int(cuda.max_memory_allocated(device)),
            }
        )
    return out


def start_ticks() -> int:
    """Field 22 of /proc/self/stat: with the pid, this process's identity."""
    with open("/proc/self/stat", "rb") as f:
        text = f.read().decode("ascii", "replace")
    return int(text[text.rindex(")") + 2 :].split()[22 - 3])


def document(found: dict[str, Any], memory: list[dict[str, int]], wall: float) -> dict[str, Any]:
    if _state["start_ticks"] is None:
        _state["start_ticks"] = start_ticks()
    doc: dict[str, Any] = {
        probefile.MARK: probefile.VERSION,
        "pid": os.getpid(),
        "start_ticks": _state["start_ticks"],
        "time": wall,
        **found,
        "memory": memory,
    }
    return {k: doc[k] for k in probefile.FIELDS}


# --- the publisher ------------------------------------------------------------------------


def _start_publisher() -> None:
    """Under the lock: the one publishing thread of this process, once."""
    if _state["publisher"] is not None or not running():
        return
    thread = threading.Thread(
        target=_publish_loop, args=(_state["stop"],), name="gputop-probe", daemon=True
    )
    _state["publisher"] = thread
    thread.start()


def _publish_loop(stop: threading.Event) -> None:
    while not stop.wait(probefile.PUBLISH_SECONDS):
        try:
            publish_once()
        except Exception as exc:
            disable(f"cannot publish: {type(exc).__name__}: {exc}")
            return


def publish_once() -> bool:
    """Write the file if a batch was taken since the last write (a loop that stalled or
    ended stops publishing: its file goes stale). False: nothing new."""
    wall = time.time()  # before the copy: every batch taken before ``wall`` is in it
    batches = list(_batches.copy())
    if not batches or batches[-1][1] <= _state["published_upto"]:
        return False
    found = figures(batches, _perf())
    if found is None:
        return False
    data = json.dumps(document(found, cuda_memory(), wall), allow_nan=False).encode()
    with _lock:
        if not running() or _state["stop"].is_set():
            return False
        _write(data)
        _state["published_upto"] = batches[-1][1]
    return True


class Refused(Exception):
    """A directory the probe will not write to."""


def open_dir(create: bool) -> int:
    """A descriptor of this user's probe directory (created 0700 when missing and
    ``create``), checked: a real directory, not a link, owned by this uid, closed to
    group and others (someone else may have made /tmp/gputop-UID first)."""
    path = probefile.own_dir()
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise Refused(f"{path} is a symbolic link") from None
        raise exc
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise Refused(f"{path} belongs to uid {st.st_uid}, not to this process's")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise Refused(f"{path} is open to group or others (mode {stat.S_IMODE(st.st_mode):o})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write(data: bytes) -> None:
    """Replace this process's file atomically: a temporary in the same directory, 0600."""
    name = probefile.file_name(os.getpid())
    temp = f".{name}.tmp"
    dir_fd = open_dir(create=True)
    try:
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dir_fd,
        )
        try:
            try:
                os.fchmod(fd, 0o600)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                st = os.fstat(fd)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        _state["written"] = (st.st_dev, st.st_ino)
    finally:
        os.close(dir_fd)


def _remove_own_file() -> None:
    """Remove this process's file: only the regular file it wrote itself."""
    written = _state["written"]
    if written is None:
        return
    _state["written"] = None
    try:
        dir_fd = open_dir(create=False)
    except (OSError, Refused):
        return
    try:
        name = probefile.file_name(os.getpid())
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (
            stat.S_ISREG(st.st_mode)
            and (st.st_dev, st.st_ino) == written
            and st.st_uid == os.geteuid()
        ):
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
