"""Shared pytest fixtures: the fake NVML library (tests/fakenvml).

- ``fake_nvml_lib``: session; builds the fake ``libnvidia-ml.so.1`` once and returns its
  path (skips the test when there is no C compiler or no nvml.h).
- ``fake_nvml``: in-process. Loads the fake into this process (once per session: a
  library cannot be unloaded) and points ``FAKE_NVML_SCENARIO`` at a per-test file.
  ``fake_nvml.write(Scenario(...))`` (re)writes that file; NVML started after it (e.g.
  ``NvmlReader()``) plays it, and a running one picks up later writes.
- ``fake_nvml_env``: for subprocesses. ``fake_nvml_env(Scenario(...))`` writes the
  scenario and returns an environment dict (LD_LIBRARY_PATH + FAKE_NVML_SCENARIO) for
  ``subprocess.run(..., env=...)``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import fakenvml
from tests.fakenvml import FakeNvml

# A user's own ~/.config/gputop/config.toml must not change what the tests see (this
# process and every gputop the tests start inherit it).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="gputop-tests-config-")


@pytest.fixture(scope="session")
def fake_nvml_lib() -> Path:
    try:
        return fakenvml.build()
    except fakenvml.FakeNvmlUnavailable as exc:
        pytest.skip(f"fake NVML cannot be built: {exc}")


@pytest.fixture
def fake_nvml(
    fake_nvml_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeNvml]:
    fakenvml.load_in_process()
    fake = FakeNvml(tmp_path / "nvml-scenario.txt")
    fake.write(fakenvml.Scenario())
    monkeypatch.setenv(fakenvml.SCENARIO_ENV, str(fake.path))
    yield fake


@pytest.fixture
def fake_nvml_env(fake_nvml_lib: Path, tmp_path: Path) -> Callable[..., dict[str, str]]:
    counter = iter(range(1_000_000))

    def make(scenario: fakenvml.Scenario, path: Path | None = None) -> dict[str, str]:
        target = path or tmp_path / f"nvml-scenario-{next(counter)}.txt"
        scenario.write(target)
        return fakenvml.subprocess_env(target)

    return make


@pytest.fixture(autouse=True)
def _cli_has_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs of ``cli.main`` have no terminal (pytest holds stdin/stdout); the
    dashboard path (with a fake ``run_app``) must still be reachable. The refusal itself
    is tested on real processes (tests/test_lifecycle.py)."""
    import gputop.cli

    monkeypatch.setattr(gputop.cli, "has_terminal", lambda: True)


@pytest.fixture(autouse=True)
def _ghost_pids_are_another_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests list made-up pids on fake GPUs as a container's would be: from another PID
    namespace. gputop detects whether it shares the driver's namespace (in the host's, a
    missing pid reads "exited"); this pins the answer for this process and the gputop
    subprocesses that inherit its environment. tests/test_values.py tests both answers
    and the detection itself."""
    from gputop.sources.host import PID_NAMESPACE_ENV

    monkeypatch.setenv(PID_NAMESPACE_ENV, "other")
