"""Every way a session ends, ends gputop (issue 9, parts 1 and 2), tried as users do:
a tmux pane killed in each state of the dashboard, a pty whose master is closed (an SSH
drop), a pty nobody reads any more (a frozen link) followed by a signal, no terminal at
all, a quit while NVML hangs, Ctrl-Z / fg and stray SIGCONTs, and the exit statuses.

Each "gone within 2 s" is measured from the moment the terminal went away (or the signal
was sent) to the moment the process exited (its pidfd became readable): no sleeps.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakenvml import FakeGpu, Scenario
from tests.lifecycle_harness import (
    GONE_S,
    ROOT,
    Gone,
    Tmux,
    env_for_gputop,
    gputop_command,
    need,
    pty_gputop,
    thread_names,
    tmux_pane,
    wait_pid_file,
)

MAIN = ("H100 80GB HBM3", "COMMAND")


@dataclass(frozen=True)
class State:
    name: str
    keys: tuple[str, ...] = ()
    shows: tuple[str, ...] = MAIN
    args: tuple[str, ...] = ()
    size: tuple[int, int] = (120, 40)


STATES = [
    State("main"),
    State("help", ("?",), ("Esc, ? or q closes this help",)),
    State("detail", ("Enter",), ("verdict:", "Esc back")),
    State("kill dialog", ("k",), ("No signals from this source",)),
    State("palette", ("C-p",), ("Search for commands",)),
    State("jobs view", ("j",), ("Jobs ·",)),
    State("process screen", ("e",), ("Enter its GPU", "Esc back")),
    State("GPU prompt", ("g",), ("Show GPUs",)),
    State("paused", ("p",), ("PAUSED",)),
    State("filter focused", ("/", "x"), ("filter x",)),
    State("0.1 s in 20x6", (), ("terminal too small",), ("--interval", "0.1"), (20, 6)),
]


def _enter_state(pane: Tmux, state: State) -> None:
    pane.wait_text(*(("terminal too small",) if state.size[0] < 40 else MAIN))
    for key in state.keys:
        pane.keys(key)
        time.sleep(0.15)  # a pause between keys, as a person leaves
    pane.wait_text(*state.shows)


def _assert_gone_after(gone: Gone, t0: float, what: str) -> None:
    ok = gone.wait(t0 + GONE_S - time.monotonic())
    took = time.monotonic() - t0
    assert ok, f"gputop still running {took:.2f} s after {what}"


@pytest.mark.parametrize("launch", ["pane process", "from a shell"])
@pytest.mark.parametrize("state", STATES, ids=[s.name for s in STATES])
def test_pane_killed_in_every_state_ends_gputop(tmp_path: Path, state: State, launch: str) -> None:
    """The pane's process is killed with kill-pane; from a shell, the whole session goes
    (kill-session): the shell gets SIGHUP and passes it on to its job."""
    pid_file = tmp_path / "pid"
    args = ("--demo", *state.args)
    line = gputop_command(pid_file, *args)
    command = line if launch == "pane process" else "env PS1='PROMPT$ ' bash --norc --noprofile"
    width, height = state.size
    gone: Gone | None = None
    with tmux_pane(tmp_path, command, width, height) as pane:
        try:
            if launch == "from a shell":
                pane.wait_text("PROMPT$")
                pane.tmux("send-keys", "-t", "t", "-l", line)
                pane.keys("Enter")
            pid = wait_pid_file(pid_file)
            gone = Gone(pid)
            _enter_state(pane, state)
            how = "kill-pane" if launch == "pane process" else "kill-session"
            pane.tmux(how, "-t", "t")
            t0 = time.monotonic()
            _assert_gone_after(gone, t0, how)
        finally:
            if gone is not None:
                gone.kill()
                gone.close()


@pytest.mark.parametrize("how", ["respawn-pane -k", "kill-server"])
def test_other_ways_tmux_drops_the_pane(tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "pid"
    with tmux_pane(tmp_path, gputop_command(pid_file, "--demo")) as pane:
        gone = Gone(wait_pid_file(pid_file))
        try:
            pane.wait_text(*MAIN)
            if how == "kill-server":
                pane.tmux("kill-server")
            else:
                pane.tmux("respawn-pane", "-k", "-t", "t", "sleep 60")
            t0 = time.monotonic()
            _assert_gone_after(gone, t0, how)
        finally:
            gone.kill()
            gone.close()


# --- a pty: the master closed (SSH dropped), or no longer read (a frozen link) ----------


@pytest.mark.parametrize("keys", [b"", b"j"], ids=["main", "jobs view"])
def test_pty_master_closed_ends_gputop_with_129(keys: bytes) -> None:
    with pty_gputop("--demo") as g:
        g.wait_text("COMMAND")
        if keys:
            g.send(keys)
            g.wait_text("Jobs")
        g.close_master()
        t0 = time.monotonic()
        status = g.wait_gone(GONE_S)
        assert status is not None, f"gputop still running {GONE_S} s after the hang-up"
        assert time.monotonic() - t0 < GONE_S
        assert status == 128 + signal.SIGHUP


def test_hang_up_shuts_nvml_down_and_leaves_nothing(
    fake_nvml_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    """The live source: nvmlShutdown is called on the way out of a hang-up."""
    env = fake_nvml_env(Scenario(gpus=[FakeGpu(), FakeGpu()]))
    log = tmp_path / "nvml.log"
    env = {**env, "FAKE_NVML_LOG": str(log)}
    with pty_gputop("--interval", "0.5", env=env) as g:
        g.wait_text("H100")
        pid = g.proc.pid
        g.close_master()
        assert g.wait_gone(GONE_S) == 128 + signal.SIGHUP
    assert f"nvmlShutdown 0 {pid}" in log.read_text().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_frozen_link_then_a_signal_ends_gputop(sig: signal.Signals) -> None:
    """Nobody reads the terminal any more: gputop's writes block. A signal still ends it
    within 2 s, with 128 + the signal's number."""
    with pty_gputop("--demo", "--interval", "0.1", width=250, height=70) as g:
        g.wait_text("COMMAND")
        g.stop_reading()
        g.wait_frozen()
        os.kill(g.proc.pid, sig)
        t0 = time.monotonic()
        status = g.wait_gone(GONE_S)
        assert status is not None, f"gputop still running {GONE_S} s after {sig.name}"
        assert time.monotonic() - t0 < GONE_S
        assert status == 128 + sig


# --- no terminal at all --------------------------------------------------------------


NOT_A_TERMINAL = "gputop: error: not a terminal: use --once, --json or --stream\n"


@pytest.mark.parametrize("how", ["</dev/null >file", "stdin a closed pipe", ">file"])
def test_no_terminal_is_refused_with_exit_2(tmp_path: Path, how: str) -> None:
    out = tmp_path / "out"
    env = env_for_gputop()
    with out.open("wb") as f:
        if how == "</dev/null >file":
            r = subprocess.run(
                [sys.executable, "-m", "gputop", "--demo"],
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.PIPE,
                cwd=ROOT,
                env=env,
                timeout=30,
            )
        elif how == "stdin a closed pipe":
            r = subprocess.run(
                [sys.executable, "-m", "gputop", "--demo"],
                input=b"",
                stdout=f,
                stderr=subprocess.PIPE,
                cwd=ROOT,
                env=env,
                timeout=30,
            )
        else:  # stdin and stderr a terminal, stdout a file
            master, slave = os.openpty()
            try:
                r = subprocess.run(
                    [sys.executable, "-m", "gputop", "--demo"],
                    stdin=slave,
                    stdout=f,
                    stderr=subprocess.PIPE,
                    cwd=ROOT,
                    env=env,
                    timeout=30,
                )
            finally:
                os.close(slave)
                os.close(master)
    assert r.returncode == 2
    assert r.stderr.decode() == NOT_A_TERMINAL
    assert out.read_bytes() == b""  # not one escape code


# --- quit while NVML hangs --------------------------------------------------------------


def test_quit_while_nvml_hangs_does_not_wait_for_nvml(
    fake_nvml_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    scenario_path = tmp_path / "scenario.txt"
    env = fake_nvml_env(Scenario(gpus=[FakeGpu()]), scenario_path)
    with pty_gputop("--interval", "0.2", env=env) as g:
        g.wait_text("H100")
        # From now on one call never returns (10 minutes).
        Scenario(gpus=[FakeGpu(sleeps_ms={"nvmlDeviceGetMemoryInfo": 600_000})]).write(
            scenario_path
        )
        g.wait_text("STALE", timeout=20)  # the header says the sampler is stuck
        g.send(b"q")
        t0 = time.monotonic()
        status = g.wait_gone(GONE_S)  # the hung call would take 10 minutes
        took = time.monotonic() - t0
        assert status is not None, f"the prompt did not come back within {GONE_S} s"
        print(f"\nq while NVML hangs: gone after {took:.2f} s")
        assert status == 0


# --- suspend and resume --------------------------------------------------------------


def _stty(pane: Tmux, tmp: Path, name: str) -> str:
    path = tmp / name
    pane.tmux("send-keys", "-t", "t", "-l", f"stty -g > {path}")
    pane.keys("Enter")
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, "stty did not run"
        time.sleep(0.05)
    return path.read_text().strip()


def _shell_pane(tmp_path: Path) -> Callable[[], Tmux]:
    def make() -> Tmux:
        env = env_for_gputop({"PS1": "PROMPT$ "})
        cmd = "env -i " + " ".join(f"{k}='{v}'" for k, v in env.items())
        return Tmux(tmp_path, cmd + " bash --norc --noprofile")

    return make


def _start_from_shell(pane: Tmux, tmp: Path) -> tuple[int, Path]:
    pid_file = tmp / "pid"
    status = tmp / "status"
    pane.wait_text("PROMPT$")
    line = gputop_command(pid_file, "--demo").replace("exec env", "env", 1)
    pane.tmux("send-keys", "-t", "t", "-l", line)  # a job alone: a list would go on at ^Z
    pane.keys("Enter")
    pid = wait_pid_file(pid_file)
    pane.wait_text(*MAIN)
    return pid, status


def _wait_status(pane: Tmux, path: Path, timeout: float = 10.0) -> str:
    """The status the shell saw once gputop (its foreground job) returned."""
    pane.wait_text("PROMPT$", absent=("COMMAND",))
    pane.tmux("send-keys", "-t", "t", "-l", f"echo EXIT=$? > {path}")
    pane.keys("Enter")
    deadline = time.monotonic() + timeout
    while not path.exists() or "EXIT=" not in path.read_text():
        assert time.monotonic() < deadline, "gputop did not exit"
        time.sleep(0.05)
    return path.read_text().strip()


def _proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("how", ["ctrl-z", "kill -STOP", "stray SIGCONT"])
def test_suspend_resume_and_stray_sigcont_are_harmless(tmp_path: Path, how: str) -> None:
    """Ctrl-Z suspends (the shell is back, its terminal as it was); fg resumes; then one
    q quits with 0 and the terminal is as before. The same after a kill -STOP / fg, and
    after a SIGCONT nobody asked for."""
    need("tmux")
    pane = _shell_pane(tmp_path)()
    try:
        before = _stty(pane, tmp_path, "before")
        pid, status = _start_from_shell(pane, tmp_path)
        if how == "stray SIGCONT":
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGCONT)
        else:
            if how == "ctrl-z":
                pane.keys("C-z")
            else:
                os.kill(pid, signal.SIGSTOP)
            pane.wait_text("PROMPT$", "Stopped")
            assert _proc_state(pid) == "T"
            if how == "ctrl-z":
                assert pane.flag("alternate_on") == "0"
                assert _stty(pane, tmp_path, "suspended") == before
            pane.tmux("send-keys", "-t", "t", "-l", "fg")
            pane.keys("Enter")
        pane.wait_text(*MAIN)
        time.sleep(0.3)  # let a second input thread (the bug) start if it would
        threads = thread_names(pid)
        pane.keys("q")
        assert _wait_status(pane, status) == "EXIT=0", f"threads: {threads}\n{pane.screen()}"
        assert _stty(pane, tmp_path, "after") == before
        assert pane.flag("alternate_on") == "0"
    finally:
        pane.close()
        for path in (tmp_path / "pid",):
            if path.exists() and path.read_text().strip().isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(path.read_text()), signal.SIGKILL)


# --- exit statuses ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ("q", 0),
        ("ctrl-c key", 130),
        ("SIGINT", 130),
        ("SIGTERM", 143),
        ("SIGHUP", 129),
    ],
)
def test_exit_statuses(how: str, status: int) -> None:
    with pty_gputop("--demo") as g:
        g.wait_text("COMMAND")
        if how == "q":
            g.send(b"q")
        elif how == "ctrl-c key":
            g.send(b"\x03")
        else:
            os.kill(g.proc.pid, getattr(signal, how))
        assert g.wait_gone(10) == status
