"""Every command the README shows is run here, each in a bounded form, and a command the
README shows that this file does not know fails the test.

Commands are the lines of the README's ``sh`` code blocks (a trailing ``# comment``
dropped) and its inline code spans that start with a command (``gputop``, ``pipx``,
``python``, ``.venv/bin/``). ``FORMS`` says how each is checked:

- ``ci``: the test command. ``.ci/run`` runs it verbatim (checked here); running pip
  inside the test suite it starts would be a loop.
- ``dist``: ``pipx install .``. ``.ci/run`` runs ``scripts/check_dist.sh``, which
  ``pipx install``s the wheel built from this checkout into a fresh pipx home and runs
  the installed ``gputop`` (checked here).
- ``quick-start``: the install is the test command's without the test extra (so CI
  runs it, with the extra), then ``activate`` (checked as below) and ``gputop``, the
  ``gputop.cli:entry`` console script, started as ``dashboard``.
- ``activate`` (within ``quick-start``): the quick start's set-up (the venv's
  ``activate``, in a shell whose PATH holds no gputop, ``.venv`` standing for the venv
  running the tests) puts ``gputop`` on PATH, and the Usage lines that run as they are
  run there by that name (:func:`test_the_usage_lines_run_after_the_quick_start`).
- ``dashboard``: started on a pty (this machine's real source: host-only without a
  driver), waits for the process table, ``q``, exit status 0.
- ``as-is``: run as shown; exit 0, or 3 where there is no NVIDIA driver.
- ``once``: the dashboard's options with ``--once`` added; exit 0 (3 without a driver).
- ``demo-once``: with ``--demo --once`` added, so GPUs exist on any machine; exit 0.
- ``config``: ``PATH`` is a file holding the README's ``toml`` example; ``--demo --once``.
- ``record-dashboard``: ``DIR`` a new directory; the dashboard on the demo
  (``--interval 0.2``), started on a pty, quit after a few samples; a recording is left
  in ``DIR``.
- ``record``: ``gputop record --demo --dir DIR``, stopped with SIGTERM (exit 0), then
  ``replay``: ``gputop replay DIR --at now --once`` on what it recorded.
- ``export``: ``gputop export --jobs --demo`` on a free loopback port: ``/metrics``
  answers with the verdict series, SIGTERM ends it with 0.
- ``run``: ``train.py`` a script in a new directory that exits 0 only when the probe runs
  in it; ``python`` this interpreter; exit 0.
- ``help``: a synopsis with placeholders (``HOST...``): its ``--help`` exits 0 and names
  every option the line shows.

The checks run at once on a few threads (they are subprocesses), so the file stays fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.conftest import missing
from tests.lifecycle_harness import PtyGputop, env_for_gputop

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 350

#: Every command the README shows -> how this file checks it (the module docstring).
FORMS: dict[str, str] = {
    "python3 -m venv .venv && .venv/bin/pip install -q -e . && . .venv/bin/activate && gputop": (
        "quick-start"
    ),
    ".venv/bin/gputop": "dashboard",
    "gputop --demo": "dashboard",
    "pipx install . && gputop": "dist",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' "
    "&& .venv/bin/python -m pytest -q": "ci",
    "gputop": "dashboard",
    "gputop --demo --seed 3": "once",
    "gputop --demo --demo-node h200": "once",
    "gputop --once": "as-is",
    "gputop --json": "as-is",
    "gputop --stream --count 3": "as-is",
    "gputop --gpus 0,2": "demo-once",
    "gputop --interval 0.5": "once",
    "gputop --window 30": "once",
    "gputop --threshold UTIL_HIGH=90": "once",
    "gputop --readonly": "once",
    "gputop --config PATH": "config",
    "gputop --record [DIR]": "record-dashboard",
    "gputop record": "record",
    "gputop replay [--at TIME]": "replay",
    "gputop export [--jobs]": "export",
    "gputop run -- python train.py": "run",
    "gputop fleet HOST...": "help",
    "gputop replay": "help",  # named in the list of documents
    "gputop export": "help",
    "gputop fleet": "help",
}

_FENCE = re.compile(r"^```(\S*)\s*$")
_COMMENT = re.compile(r"\s+#\s.*$")
_INLINE = re.compile(r"`((?:gputop|pipx|python3?|\.venv/bin/[^\s`]+)(?:\s[^`]*)?)`")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced code block."""
    blocks: list[tuple[str, list[str]]] = []
    lang: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence and lang is None:
            lang, body = fence.group(1), []
        elif line.startswith("```") and lang is not None:
            blocks.append((lang, body))
            lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, "a code block is never closed"
    return blocks


def _outside_fences(text: str) -> str:
    return re.sub(r"^```.*?^```\s*$", "", text, flags=re.DOTALL | re.MULTILINE)


def shown_commands(text: str) -> list[str]:
    """The commands a reader of ``text`` sees, in order, each once."""
    found: list[str] = []
    for lang, lines in _blocks(text):
        if lang != "sh":
            continue
        for line in lines:
            command = _COMMENT.sub("", line).strip()
            if command:
                found.append(command)
    for span in _INLINE.findall(_outside_fences(text)):
        found.append(" ".join(span.split()))
    return list(dict.fromkeys(found))


README_TEXT = README.read_text()
SHOWN = shown_commands(README_TEXT)


# --- what the README may hold -----------------------------------------------------------


def test_the_readme_is_short() -> None:
    assert len(README_TEXT.splitlines()) <= MAX_LINES


def test_every_command_the_readme_shows_has_a_form_here() -> None:
    unknown = [c for c in SHOWN if c not in FORMS]
    assert not unknown, (
        f"the README shows commands tests/cli/test_readme.py does not run: {unknown}"
    )
    stale = [c for c in FORMS if c not in SHOWN]
    assert not stale, f"FORMS lists commands the README no longer shows: {stale}"


def test_code_blocks_are_commands_or_the_config_example() -> None:
    """A command can hide from the extraction in no other kind of block."""
    langs = [lang for lang, _ in _blocks(README_TEXT)]
    assert set(langs) <= {"sh", "toml"}, langs
    assert langs.count("toml") == 1
    indented = re.findall(r"\n\n( {4}\S.*)", _outside_fences(README_TEXT))
    assert not indented, f"indented code blocks (use ```sh): {indented}"


def test_the_readme_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README_TEXT):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_the_generated_table_markers_are_paired() -> None:
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        begins = re.findall(r"<!-- BEGIN generated: ([\w-]+) -->", text)
        ends = re.findall(r"<!-- END generated: ([\w-]+) -->", text)
        assert begins == ends, (path.name, begins, ends)
    assert "verdict-kinds-short" in re.findall(r"<!-- BEGIN generated: ([\w-]+) -->", README_TEXT)


# --- the checks -------------------------------------------------------------------------


def _gputop(args: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env_for_gputop(),
        timeout=timeout,
    )


def _args(command: str) -> list[str]:
    words = shlex.split(command)
    assert words[0] == "gputop" or words[0].endswith("/bin/gputop"), command
    return words[1:]


def _ok(result: subprocess.CompletedProcess[str], allowed: tuple[int, ...] = (0, 3)) -> None:
    assert result.returncode in allowed, (result.returncode, result.stderr[-2000:])


def _ci_command() -> str:
    (command,) = [c for c, how in FORMS.items() if how == "ci"]
    return command


def check_ci(command: str, tmp: Path) -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    runs = [line for line in ci if command in line and not line.lstrip().startswith("#")]
    assert runs, ".ci/run no longer runs the README's test command verbatim"


def check_dist(command: str, tmp: Path) -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    dist = (ROOT / "scripts" / "check_dist.sh").read_text()
    assert "scripts/check_dist.sh" in ci
    assert "pipx install" in dist and '"$GPUTOP" --demo --once' in dist


def _wait_repaints(g: PtyGputop, count: int, timeout: float = 30.0) -> None:
    """Wait until the screen was repainted ``count`` times more (a sample each)."""
    deadline = time.monotonic() + timeout
    for _ in range(count):
        size = len(g.text())
        while len(g.text()) == size:
            assert time.monotonic() < deadline, "the dashboard stopped repainting"
            time.sleep(0.1)
        time.sleep(0.3)  # one repaint is several writes: let it finish


def check_dashboard(
    command: str, tmp: Path, *, extra: tuple[str, ...] = (), samples: int = 0
) -> None:
    g = PtyGputop(*_args(command), *extra)
    try:
        g.wait_text("COMMAND", timeout=60)
        _wait_repaints(g, samples)
        g.send(b"q")
        assert g.wait_gone(30) == 0, g.text()[-2000:]
    finally:
        g.kill()


def check_quick_start(command: str, tmp: Path) -> None:
    ci_install = _ci_command().rsplit(" && ", 1)[0]
    want = ci_install.replace("'.[test]'", ".") + " && . .venv/bin/activate && gputop"
    assert command == want, (command, ci_install)
    check_activate(". .venv/bin/activate", tmp)
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "gputop"]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert script.value == declared["gputop"] == "gputop.launch:entry"


def _quick_start_block() -> list[str]:
    """The commands of the Quick start's first ``sh`` block."""
    section = README_TEXT.split("## Quick start", 1)[1]
    ((lang, lines),) = _blocks(section)[:1]
    assert lang == "sh"
    return [_COMMENT.sub("", line).strip() for line in lines if line.strip()]


def after_the_quick_start(tmp: Path, commands: list[str]) -> subprocess.CompletedProcess[str]:
    """The quick start's set-up, then ``commands``, in one bash whose PATH holds no gputop.
    The install (CI runs it) is stood in for by ``.venv``, a link to the venv running the
    tests; starting the dashboard is left to ``check_dashboard``."""
    if sys.prefix == sys.base_prefix:
        missing("the tests do not run from a virtual environment")
    (tmp / ".venv").symlink_to(sys.prefix)
    install = set(_ci_command().replace("'.[test]'", ".").split(" && ")[:2])
    steps = [
        part
        for line in _quick_start_block()
        for part in line.split(" && ")
        if part not in install and _args_or_none(part) is None
    ]
    script = " && ".join([*steps, *commands])
    env = {**env_for_gputop(), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=120,
    )


def _args_or_none(command: str) -> list[str] | None:
    """The arguments of a command that starts gputop, else None."""
    words = shlex.split(command)
    if words and (words[0] == "gputop" or words[0].endswith("/bin/gputop")):
        return words[1:]
    return None


def check_activate(command: str, tmp: Path) -> None:
    assert any(command in line.split(" && ") for line in _quick_start_block())
    result = after_the_quick_start(tmp, ["command -v gputop"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert _the_venvs_gputop(result.stdout.strip(), tmp), result.stdout


def _the_venvs_gputop(found: str, tmp: Path) -> bool:
    """``found`` is the venv's gputop (activate names the venv by its real path)."""
    return bool(found) and Path(found).resolve() == (tmp / ".venv" / "bin" / "gputop").resolve()


def test_the_usage_lines_run_after_the_quick_start(tmp_path: Path) -> None:
    """Issue 32: the Usage lines said ``gputop: command not found`` after the quick start.
    Those that run as they are (``as-is``) run by the name the shell finds."""
    usage = [c for c, how in FORMS.items() if how == "as-is"]
    assert usage
    # Each one's status, 3 (no NVIDIA driver) as good as 0: the shell goes on either way.
    checks = [f'{{ {c} >/dev/null; s=$?; [ "$s" = 0 ] || [ "$s" = 3 ]; }}' for c in usage]
    result = after_the_quick_start(tmp_path, ["command -v gputop", *checks])
    assert result.returncode == 0, (result.stdout, result.stderr[-2000:])
    assert "command not found" not in result.stderr
    assert _the_venvs_gputop(result.stdout.strip(), tmp_path), result.stdout


def check_run(command: str, tmp: Path) -> None:
    (tmp / "train.py").write_text(
        "import sys\nimport gputop.probe\nsys.exit(0 if gputop.probe.running() else 1)\n"
    )
    args = [sys.executable if a == "python" else a for a in _args(command)]
    args = [str(tmp / a) if a == "train.py" else a for a in args]
    env = {**env_for_gputop(), "GPUTOP_PROBE_DIR": str(tmp / "probes")}
    result = subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=env,
        timeout=60,
    )
    _ok(result, (0,))


def check_as_is(command: str, tmp: Path) -> None:
    result = _gputop(_args(command))
    _ok(result)
    if "--json" in command:
        assert json.loads(result.stdout)["schema"] == 1
    if "--stream" in command:
        count = int(command.split("--count", 1)[1].split()[0])
        lines = result.stdout.splitlines()
        assert len(lines) == count and all(json.loads(line)["schema"] == 1 for line in lines)


def check_once(command: str, tmp: Path) -> None:
    args = _args(command)
    result = _gputop([*args, "--once"])
    _ok(result, (0,) if "--demo" in args else (0, 3))
    assert "GPU" in result.stdout or "host" in result.stdout.lower()


def check_demo_once(command: str, tmp: Path) -> None:
    _ok(_gputop([*_args(command), "--demo", "--once"]), (0,))


def check_config(command: str, tmp: Path) -> None:
    ((toml,),) = [["\n".join(lines)] for lang, lines in _blocks(README_TEXT) if lang == "toml"]
    path = tmp / "config.toml"
    path.write_text(toml + "\n")
    args = [str(path) if a == "PATH" else a for a in _args(command)]
    _ok(_gputop([*args, "--demo", "--once"]), (0,))


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.rec"))


def check_record_dashboard(command: str, tmp: Path) -> None:
    directory = tmp / "dashboard-recording"
    args = [str(directory) if a == "[DIR]" else a for a in _args(command)]
    # A few samples first: the recorder joins after the sampler's first one.
    extra = ("--demo", "--interval", "0.2")
    check_dashboard("gputop " + shlex.join(args), tmp, extra=extra, samples=3)
    assert _segments(directory), "the dashboard's --record left no recording"


@contextlib.contextmanager
def _started(args: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env_for_gputop(),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def check_record(command: str, tmp: Path) -> Path:
    directory = tmp / "recording"
    args = [*_args(command), "--demo", "--dir", str(directory), "--interval", "0.2"]
    with _started(args) as proc:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # said once its signal handlers are in place
        assert "recording to" in line, line
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.3)
            if len(list(directory.glob("*"))) > 0:
                break
        time.sleep(1.0)  # a few samples
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert _segments(directory)
    return directory


def check_replay(command: str, tmp: Path) -> None:
    directory = check_record("gputop record", tmp)
    args = _args(command.replace("[--at TIME]", "--at now"))
    assert args[0] == "replay"
    result = _gputop([args[0], str(directory), *args[1:], "--once"])
    _ok(result, (0,))
    assert "REPLAY" in result.stdout or "GPU" in result.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def check_export(command: str, tmp: Path) -> None:
    args = [a for a in _args(command) if a != "[--jobs]"] + ["--jobs", "--demo"]
    port = _free_port()
    with _started([*args, "--listen", f"127.0.0.1:{port}"]) as proc:
        deadline = time.monotonic() + 30
        body = ""
        while "gputop_gpu_verdict{" not in body:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, body[-500:]
            url = f"http://127.0.0.1:{port}/metrics"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as r:
                body = r.read().decode()
            time.sleep(0.2)
        assert "gputop_job_verdict{" in body or "gputop_job_gpu_memory_bytes" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def check_help(command: str, tmp: Path) -> None:
    args = _args(command)
    options = re.findall(r"--[\w-]+", command)
    result = _gputop([args[0], "--help"])
    _ok(result, (0,))
    for option in options:
        assert option in result.stdout, option
    placeholders = [a.strip("[].") for a in args[1:] if a.strip("[].").isupper()]
    for placeholder in placeholders:
        assert placeholder in result.stdout, placeholder


CHECKS: dict[str, Callable[[str, Path], object]] = {
    "ci": check_ci,
    "dist": check_dist,
    "quick-start": check_quick_start,
    "dashboard": check_dashboard,
    "as-is": check_as_is,
    "once": check_once,
    "demo-once": check_demo_once,
    "config": check_config,
    "record-dashboard": check_record_dashboard,
    "record": check_record,
    "replay": check_replay,
    "export": check_export,
    "run": check_run,
    "help": check_help,
}


def run_all(
    forms: dict[str, str], mktemp: Callable[[str], Path]
) -> dict[str, BaseException | None]:
    """Every command's check, run at once on a few threads: command -> its failure.
    The temporary directories are made first, on this thread: pytest's TempPathFactory
    is not thread-safe. Made on the pool's threads as the session's first ones, two
    threads each made a base directory, and ``mktemp`` failed with "readme is not a
    normalized and relative path" (its base directory changed between two looks)."""
    assert set(forms.values()) <= set(CHECKS)
    tmps = {command: mktemp("readme") for command in forms}

    def run(command: str) -> BaseException | None:
        try:
            CHECKS[forms[command]](command, tmps[command])
        except BaseException as exc:  # reported by the command's own test
            return exc
        return None

    with ThreadPoolExecutor(max_workers=min(4, (os.cpu_count() or 2) * 2)) as pool:
        return dict(zip(forms, pool.map(run, forms), strict=True))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BaseException | None]:
    return run_all(FORMS, tmp_path_factory.mktemp)


def test_the_checks_temporary_directories_are_made_on_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``mktemp`` on the pool's threads raced inside pytest (:func:`run_all`)."""
    made: list[str] = []
    ran: list[Path] = []

    def mktemp(name: str) -> Path:
        made.append(threading.current_thread().name)
        path = tmp_path / f"{name}-{len(made)}"
        path.mkdir()
        return path

    monkeypatch.setitem(CHECKS, "noop", lambda _command, tmp: ran.append(tmp))
    forms = {f"command {i}": "noop" for i in range(8)}
    failures = run_all(forms, mktemp)
    assert failures == dict.fromkeys(forms)
    assert made == [threading.current_thread().name] * len(forms)
    assert sorted(ran) == sorted(tmp_path.iterdir())  # each check its own directory


@pytest.mark.parametrize("command", list(FORMS), ids=list(FORMS))
def test_the_readme_command_runs(command: str, outcomes: dict[str, BaseException | None]) -> None:
    failure = outcomes[command]
    if failure is not None:
        raise AssertionError(f"{command!r} ({FORMS[command]}): {failure!r}") from failure
