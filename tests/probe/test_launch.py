"""Starting the probe without a code change: ``gputop run -- CMD`` and ``python -m
gputop.probe``; their bad usage (one line, exit 2), a command not found (127), the
command's own exit status and signals, the sitecustomize they hide."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.probe import launch

GPUTOP_RUN = [sys.executable, "-m", "gputop", "run"]
#: What a Python under the probe reports of it.
REPORT = (
    "import sys; p = sys.modules.get('gputop.probe'); print('probe', p is not None and p.running())"
)


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize(
    ("argv", "says"),
    [([], "no command given"), (["--"], "no command given"), (["--bogus"], "unknown option")],
)
def test_bad_usage_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    proc = run([*GPUTOP_RUN, *argv])
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_command_not_found_is_127_like_a_shell(tmp_path: Path) -> None:
    proc = run([*GPUTOP_RUN, "--", str(tmp_path / "no-such-command")])
    assert proc.returncode == 127
    assert proc.stderr.count("\n") == 1 and "command not found" in proc.stderr


def test_a_command_that_cannot_run_is_126(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o600)
    proc = run([*GPUTOP_RUN, "--", str(script)])
    if os.geteuid() == 0 and proc.returncode == 0:  # root may run it all the same
        return
    assert proc.returncode == 126
    assert proc.stderr.count("\n") == 1 and "cannot run" in proc.stderr


def test_the_exit_status_and_signals_are_the_commands_own() -> None:
    assert run([*GPUTOP_RUN, "--", "sh", "-c", "exit 7"]).returncode == 7
    proc = run([*GPUTOP_RUN, "sh", "-c", "kill -TERM $$"])
    assert proc.returncode == -signal.SIGTERM


def test_the_command_replaces_gputop(tmp_path: Path) -> None:
    """exec, not a child: the command's pid is gputop's (signals reach it directly)."""
    proc = subprocess.Popen(
        [*GPUTOP_RUN, "--", sys.executable, "-c", "import os; print(os.getpid())"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, _ = proc.communicate(timeout=120)
    assert int(out) == proc.pid


def test_every_python_of_the_command_runs_the_probe() -> None:
    """A Python started by a shell started by gputop run."""
    proc = run([*GPUTOP_RUN, "--", "sh", "-c", f'"{sys.executable}" -c "{REPORT}"'])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "probe True"
    assert proc.stderr == ""


def test_the_hidden_sitecustomize_still_runs(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import sys\nsys.stdout.write('other site\\n')\n")
    env = {**os.environ, "PYTHONPATH": f"{other}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = run([*GPUTOP_RUN, "--", sys.executable, "-c", REPORT], env=env)
    # (gputop's own Python ran it first, before the exec)
    assert proc.stdout.splitlines()[-2:] == ["other site", "probe True"], proc.stderr
    # and the boot directory is no place to import from for the program
    proc = run([*GPUTOP_RUN, "--", sys.executable, "-c", "import sys; print(sys.path)"], env=env)
    assert launch.BOOT_DIR not in proc.stdout


def test_a_python_that_cannot_load_the_probe_runs_unprobed(tmp_path: Path) -> None:
    """The boot directory away from any gputop package (as if gputop's files could not be
    read): one line, and the command runs."""
    boot = tmp_path / "a" / "probe" / "boot"
    boot.mkdir(parents=True)
    shutil.copy(Path(launch.BOOT_DIR) / "sitecustomize.py", boot)
    # no gputop reachable from here but by the boot's own path
    env = {**os.environ, "PYTHONPATH": str(boot), "GPUTOP_PROBE": "1"}
    proc = run([sys.executable, "-c", "print('ran')"], env=env, cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == "ran\n"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "runs unprobed" in lines[0], proc.stderr


def test_python_m_gputop_probe_runs_a_script_and_a_module(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(f"import sys\n{REPORT}\nprint(sys.argv)\n")
    (tmp_path / "jobmod.py").write_text(f"import sys\n{REPORT}\nprint(sys.argv[1:])\n")
    base = [sys.executable, "-m", "gputop.probe"]
    proc = run([*base, str(tmp_path / "job.py"), "a", "-b"], cwd=tmp_path)
    assert proc.stdout.splitlines() == ["probe True", f"[{str(tmp_path / 'job.py')!r}, 'a', '-b']"]
    proc = run([*base, "-m", "jobmod", "x"], cwd=tmp_path)
    assert proc.stdout.splitlines() == ["probe True", "['x']"], proc.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [([], "usage"), (["-m"], "needs a module"), (["nope.py"], "no such file"),
     (["-m", "no_such_module_here"], "no module")],
)  # fmt: skip
def test_python_m_gputop_probe_bad_usage(tmp_path: Path, argv: list[str], says: str) -> None:
    proc = run([sys.executable, "-m", "gputop.probe", *argv], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr


def test_the_probe_comes_from_the_gputop_that_launched_it(tmp_path: Path) -> None:
    """The command's Python (another environment, here one where some other gputop may be
    installed) loads gputop's package from beside the boot directory, and nothing else
    of gputop's environment."""
    import gputop

    env = {**os.environ, "PYTHONPATH": launch.BOOT_DIR, "GPUTOP_PROBE": "1"}
    code = f"import gputop, sys; {REPORT}; print(gputop.__file__)"
    proc = run([sys.executable, "-c", code], env=env, cwd=tmp_path)
    assert proc.stdout.splitlines() == ["probe True", gputop.__file__], proc.stderr
