"""The probe's parts: the window's figures (property test), the wrapped ``__next__``
(returns and raises exactly what the original does), a custom loop's ``waiting()`` and
``step()``, a forked child starting clean, the file against probefile's contract."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from gputop import probefile
from gputop.probe import core

SEED = 31
print(f"hypothesis seed {SEED}")


def script(tmp_path: Path, body: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` in a fresh Python (the probe's state is per process)."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(path)],
        env={**os.environ, "GPUTOP_PROBE_DIR": str(tmp_path / "probes"), **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


times = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@seed(SEED)
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(times, times), max_size=120), times)
def test_the_figures_are_in_range_or_none(batches: list[tuple[float, float]], now: float) -> None:
    found = core.figures(batches, now)
    if found is None:
        return
    assert found["steps"] >= 1
    for key in ("window_seconds", "step_seconds", "data_wait_ratio", "batches_per_second"):
        value = found[key]
        assert value is None or (math.isfinite(value) and value >= 0), (key, value)
    assert found["data_wait_ratio"] is None or found["data_wait_ratio"] <= 1
    json.dumps(found, allow_nan=False)


def test_the_figures_of_a_known_loop() -> None:
    # batches in hand at 1, 2, 3, 4; each waited 0.25 s for
    batches = [(t - 0.25, float(t)) for t in (1, 2, 3, 4)]
    found = core.figures(batches, 4.0)
    assert found == {
        "window_seconds": 3.0, "steps": 3, "data_wait_ratio": 0.25,
        "step_seconds": 1.0, "batches_per_second": 1.0,
    }  # fmt: skip
    # only the last WINDOW_SECONDS count
    assert core.figures(batches, 4.0 + probefile.WINDOW_SECONDS + 0.5) is None


def test_the_wrapped_next_returns_and_raises_what_the_original_does(tmp_path: Path) -> None:
    proc = script(
        tmp_path,
        """
        import sys, types
        class _BaseDataLoaderIter:
            def __init__(self, items): self.items = list(items)
            def __next__(self):
                if not self.items: raise StopIteration
                item = self.items.pop(0)
                if isinstance(item, BaseException): raise item
                return item
        module = types.ModuleType("torch.utils.data.dataloader")
        module._BaseDataLoaderIter = _BaseDataLoaderIter
        sys.modules["torch.utils.data.dataloader"] = module
        original = _BaseDataLoaderIter.__next__
        import gputop.probe
        assert _BaseDataLoaderIter.__next__ is not original
        marker, boom = object(), KeyError("boom")
        it = _BaseDataLoaderIter([marker, None, boom, 7])
        assert next(it) is marker
        assert next(it) is None
        try: next(it)
        except KeyError as e: assert e is boom
        else: raise AssertionError("no KeyError")
        assert next(it) == 7
        try: next(it)
        except StopIteration: pass
        else: raise AssertionError("no StopIteration")
        from gputop.probe import core
        assert len(core._batches) == 3  # only the batches handed over
        gputop.probe.stop()
        assert _BaseDataLoaderIter.__next__ is original
        print("ok")
        """,
    )
    assert proc.stdout == "ok\n", proc.stderr
    assert proc.stderr == ""


def test_a_custom_loop_with_waiting_and_step(tmp_path: Path) -> None:
    proc = script(
        tmp_path,
        """
        import json, os, time
        import gputop.probe
        from gputop import probefile
        waited = total = 0.0
        prev = time.perf_counter()
        for _ in range(30):
            t0 = time.perf_counter()
            with gputop.probe.waiting():
                time.sleep(0.04)  # the next batch
            waited += time.perf_counter() - t0
            time.sleep(0.02)  # the step's work
            gputop.probe.step()
            now = time.perf_counter()
            total += now - prev
            prev = now
        end = time.time()
        path = os.path.join(probefile.own_dir(), probefile.file_name(os.getpid()))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                doc = json.load(open(path))
                if doc["time"] > end:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        import sys
        print(json.dumps({"doc": doc, "truth": waited / total, "torch": "torch" in sys.modules}))
        """,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    doc = got["doc"]
    assert list(doc) == list(probefile.FIELDS)
    assert doc["steps"] == 29  # steps from one step() to the next
    assert got["torch"] is False  # the probe never imports torch (to look for CUDA or else)
    assert abs(doc["data_wait_ratio"] - got["truth"]) <= 0.10
    assert not (tmp_path / "probes" / probefile.file_name(doc["pid"])).exists()  # removed


def test_a_forked_child_starts_clean(tmp_path: Path) -> None:
    proc = script(
        tmp_path,
        """
        import os, threading, time, json
        import gputop.probe
        from gputop.probe import core
        for _ in range(5):
            gputop.probe.step()
        assert core._state["publisher"] is not None
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            seen = {
                "batches": len(core._batches),
                "threads": [t.name for t in threading.enumerate()],
                "written": core._state["written"],
            }
            os.write(w, json.dumps(seen).encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        print(os.read(r, 10000).decode())
        """,
    )
    assert proc.returncode == 0, proc.stderr
    child = json.loads(proc.stdout)
    assert child == {"batches": 0, "threads": ["MainThread"], "written": None}


def test_the_docs_list_every_field() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "probe.md").read_text()
    for name, meaning in probefile.FIELDS.items():
        assert f"| `{name}` | {meaning} |" in doc, name


@pytest.mark.parametrize("value", ["0", " 0 "])
def test_the_off_switch(value: str) -> None:
    assert not core.enabled_by_env({probefile.ENABLE_ENV: value})
    assert core.enabled_by_env({probefile.ENABLE_ENV: "1"})
    assert core.enabled_by_env({})


def test_the_document_is_the_contracts(monkeypatch: Any) -> None:
    found = core.figures([(0.0, 1.0), (1.5, 2.0)], 2.0)
    assert found is not None
    doc = core.document(found, [], 1.7e9)
    assert list(doc) == list(probefile.FIELDS)
    assert doc["pid"] == os.getpid() and doc["start_ticks"] == core.start_ticks()


def test_cuda_memory_is_read_from_the_torch_already_imported(monkeypatch: Any) -> None:
    """Per device, torch's own three figures; nothing where CUDA is not initialised."""

    class Cuda:
        initialised = True

        def is_initialized(self) -> bool:
            return self.initialised

        def device_count(self) -> int:
            return 2

        def memory_allocated(self, d: int) -> int:
            return 10 + d

        def memory_reserved(self, d: int) -> int:
            return 20 + d

        def max_memory_allocated(self, d: int) -> int:
            return 30 + d

    cuda = Cuda()
    monkeypatch.setitem(sys.modules, "torch", type("torch", (), {"cuda": cuda}))
    assert core.cuda_memory() == [
        {"device": 0, "allocated": 10, "reserved": 20, "peak": 30},
        {"device": 1, "allocated": 11, "reserved": 21, "peak": 31},
    ]
    cuda.initialised = False
    assert core.cuda_memory() == []
    monkeypatch.delitem(sys.modules, "torch")
    assert core.cuda_memory() == []
    assert "torch" not in sys.modules
