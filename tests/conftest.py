"""Shared pytest fixtures: the fake NVML library (tests/fakenvml).

- ``fake_nvml_lib``: session; builds the fake ``libnvidia-ml.so.1`` once and returns its
  path (no C compiler or no nvml.h: ``missing()``, i.e. skipped, or failed in CI).
- ``fake_nvml``: in-process. Loads the fake into this process (once per session: a
  library cannot be unloaded) and points ``FAKE_NVML_SCENARIO`` at a per-test file.
  ``fake_nvml.write(Scenario(...))`` (re)writes that file; NVML started after it (e.g.
  ``NvmlReader()``) plays it, and a running one picks up later writes.
- ``fake_nvml_env``: for subprocesses. ``fake_nvml_env(Scenario(...))`` writes the
  scenario and returns an environment dict (LD_LIBRARY_PATH + FAKE_NVML_SCENARIO) for
  ``subprocess.run(..., env=...)``.

Missing prerequisites: skipped on a developer's machine, a failure in CI
--------------------------------------------------------------------------
With ``CI`` set (``CI=true``, as ``.ci/run`` sets it), a test that needs a tool the
machine lacks FAILS instead of skipping: CI installs every tool the tests use, so a
missing one is a broken CI set-up, and a silent skip would hide an untested feature.
Use one of these, never a bare ``pytest.skip`` for a missing tool:

- ``@pytest.mark.requires_tool("tmux", "sshd")`` on a test or module (``pytestmark``);
- ``@pytest.mark.requires_root`` for a test that needs root (e.g. to drop to nobody);
- the ``require_tool`` fixture, or ``from tests.conftest import require_tool``:
  ``sshd = require_tool("sshd")`` returns the tool's path (PATH, then /usr/sbin, /sbin);
- ``missing("why")`` for any other missing prerequisite (a library, a kernel feature).

Randomised tests
----------------
A test whose draw is not fixed in its source takes its seed from tests/helpers/fuzz.py:
the ``fuzz_seed`` fixture, or ``@seed(SEED)`` for hypothesis. The run's header and every
such test's failure say ``GPUTOP_FUZZ_SEED=<seed>``, which replays it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from gputop import codecache
from tests import fakenvml
from tests.fakenvml import FakeNvml
from tests.helpers import fuzz

# A user's own ~/.config/gputop/config.toml must not change what the tests see (this
# process and every gputop the tests start inherit it).
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="gputop-tests-config-")
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], ignore_errors=True)

# The code that dataclasses compile at gputop's start is kept in a file (gputop.codecache):
# the tests' in a directory of their own, not beside the checkout's byte code. A gputop
# started with an environment of its own (``env -i`` in a pane) writes beside the byte
# code: a file the session did not find there is removed at its end.
os.environ[codecache.ENV_DIR] = tempfile.mkdtemp(prefix="gputop-tests-codecache-")
atexit.register(shutil.rmtree, os.environ[codecache.ENV_DIR], ignore_errors=True)
_DEFAULT_CODE_DIR = codecache.default_dir()
_CODE_FILE = None if _DEFAULT_CODE_DIR is None else _DEFAULT_CODE_DIR / codecache.file_name()
_CODE_FILE_BEFORE = _CODE_FILE is not None and _CODE_FILE.exists()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _CODE_FILE is None or _CODE_FILE_BEFORE:
        return
    with contextlib.suppress(OSError):
        if _CODE_FILE.is_symlink() or not _CODE_FILE.is_file():
            return
        with _CODE_FILE.open("rb") as f:
            ours = f.read(len(codecache.MAGIC)) == codecache.MAGIC
        if ours:
            _CODE_FILE.unlink()


# --- missing prerequisites ----------------------------------------------------------------

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def missing(reason: str) -> NoReturn:
    """A prerequisite is missing: skip the test, or, in CI (``CI`` set), fail it."""
    if IN_CI:
        pytest.fail(
            f"{reason}: CI must provide it (.ci/run installs every tool the tests use; "
            "outside CI this test is skipped)",
            pytrace=False,
        )
    pytest.skip(reason)


def find_tool(name: str) -> str | None:
    """``name``'s path: on PATH, else in the sbin directories (sshd lives there, and a
    non-root PATH often lacks them); None when absent."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def require_tool(name: str) -> str:
    """The path of the executable ``name``; when absent, ``missing()`` (skip or fail)."""
    path = find_tool(name)
    if path is None:
        missing(f"{name} is not installed")
    return path


def require_root(why: str = "needs root") -> None:
    if os.geteuid() != 0:
        missing(f"{why} (not running as root)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires_tool(*names): the test needs these executables (see conftest)"
    )
    config.addinivalue_line("markers", "requires_root: the test needs root (see conftest)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires_tool"):
        for name in mark.args:
            require_tool(name)
    for mark in item.iter_markers("requires_root"):
        require_root(*mark.args)


def pytest_report_header() -> str:
    return f"fuzz seed: {fuzz.replay_line()} replays this run's randomised tests"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    seeded = "fuzz_seed" in getattr(item, "fixturenames", ()) or (
        getattr(getattr(item, "obj", None), "_hypothesis_internal_use_seed", None) == fuzz.SEED
    )
    if report.failed and seeded:
        report.sections.append(("fuzz seed", fuzz.replay_line()))
    return report


@pytest.fixture(scope="session")
def fuzz_seed() -> int:
    """The run's fuzz seed (tests/helpers/fuzz.py); a failure names it."""
    return fuzz.SEED


@pytest.fixture(name="require_tool")
def require_tool_fixture() -> Callable[[str], str]:
    """``require_tool("sshd")`` inside a test: the path, or skip (fail in CI)."""
    return require_tool


# --- the fake NVML library -------------------------------------------------------------


@pytest.fixture(scope="session")
def fake_nvml_lib() -> Path:
    try:
        return fakenvml.build()
    except fakenvml.FakeNvmlUnavailable as exc:
        missing(f"fake NVML cannot be built: {exc}")


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
    is tested on real processes (tests/ui/test_lifecycle.py)."""
    import gputop.encoding

    monkeypatch.setattr(gputop.encoding, "has_terminal", lambda: True)


@pytest.fixture(autouse=True)
def _ghost_pids_are_another_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests list made-up pids on fake GPUs as a container's would be: from another PID
    namespace. gputop detects whether it shares the driver's namespace (in the host's, a
    missing pid reads "exited"); this pins the answer for this process and the gputop
    subprocesses that inherit its environment. tests/sources/test_values.py tests both answers
    and the detection itself."""
    from gputop.sources.host import PID_NAMESPACE_ENV

    monkeypatch.setenv(PID_NAMESPACE_ENV, "other")
