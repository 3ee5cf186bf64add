"""``gputop fleet`` against two real OpenSSH servers on 127.0.0.1 (tests/sshd.py).

Each host streams this checkout's ``gputop --demo --stream`` through the system's ssh
client. One server is frozen (SIGSTOP: a hung link) -> its host turns stale; then killed
-> unreachable, with ssh's own error; then started again on the same port -> live again,
by itself. Quitting leaves no ssh process. Driven in Pilot and for real in tmux.

Waits are on conditions with generous bounds (a loaded 2-core machine); nothing here
measures time.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import sshd
from tests.conftest import missing
from tests.sshd import SshLab
from tests.tmux_pane import TmuxPane, plain_shell, shell_env


@pytest.fixture(autouse=True)
def _needs_openssh() -> None:
    """Skipped without OpenSSH; failed in CI (tests/conftest.py: no silent skips)."""
    why = sshd.missing()
    if why is not None:
        missing(why)


INTERVAL = 0.5
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[SshLab]:
    lab = SshLab(tmp_path)
    try:
        yield lab
    finally:
        lab.close()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


async def test_pilot_stale_unreachable_back_and_no_ssh_left(lab: SshLab) -> None:
    from gputop.sources.streams import StreamSet, ssh_command, status
    from gputop.ui.fleet import FleetApp

    one = lab.server("host1")
    two = lab.server("host2")

    def command(host: str, n: int) -> list[str]:
        return ssh_command(host, str(lab.remote_command), INTERVAL, ssh_config=str(lab.ssh_config))

    streams = StreamSet(["host1", "host2"], command, interval=INTERVAL, first_line_timeout=60)
    app = FleetApp(streams)

    def state(host: str) -> str:
        return status(streams.view(host), time.monotonic(), INTERVAL)[0]

    async def until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            await pilot.pause(0.1)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {screen()}")

    def screen() -> str:
        return app.fleet_screen.query_one("#fleet-hosts").text  # type: ignore[attr-defined,no-any-return]

    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(lambda: state("host1") == state("host2") == "live", "both hosts live")
            await until(lambda: screen().count("live") == 2, "both rows say live")
            assert "GPU-bnd" in screen() or "warming" in screen()

            two.stop()  # a hung link: the connection stays, no data comes
            await until(lambda: state("host2") == "stale", "host2 stale")
            await until(lambda: "stale" in screen(), "the row to say stale")
            assert state("host1") == "live"  # the other host never waits

            two.kill()  # the host dies: the connection drops, reconnecting is refused
            await until(lambda: state("host2") == "unreachable", "host2 unreachable")
            await until(lambda: "unreachable" in screen(), "the row to say unreachable")
            error = streams.view("host2").error or ""
            assert "refused" in error.lower() or "closed" in error.lower(), error
            assert state("host1") == "live"

            two.start()  # back on the same port: reconnects by itself (backoff)
            await until(lambda: state("host2") == "live", "host2 live again", timeout=90)

            # Enter opens a host's dashboard from its stream; Esc comes back.
            await pilot.press("enter")
            await until(lambda: app.snapshot is not None, "the host's dashboard")
            assert app.screen is not app.fleet_screen
            await pilot.press("escape")
            await until(lambda: app.screen is app.fleet_screen, "the fleet again")
            pids = lab.ssh_processes()  # the children: one ssh client per host
            assert len(pids) == 2
            await pilot.press("q")
    finally:
        streams.close()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"ssh {pid} left behind"
    assert lab.ssh_processes() == []
    assert one.proc is not None and one.proc.poll() is None  # only what we killed died


def shell_pane(tmp: Path, width: int, height: int) -> TmuxPane:
    """A private tmux server with one pane running a plain shell."""
    env = shell_env(tmp)
    return TmuxPane(plain_shell(env), width=width, height=height, prefix="gputop-fleet")


@pytest.mark.requires_tool("tmux")
def test_tmux_fleet_over_real_ssh(lab: SshLab, tmp_path: Path) -> None:
    lab.server("host1")
    two = lab.server("host2")
    status = tmp_path / "status"
    pane = shell_pane(tmp_path, 100, 30)
    try:
        pane.wait_text("PROMPT$", timeout=60)
        cmd = [
            sys.executable,
            "-m",
            "gputop",
            "fleet",
            "--ssh-config",
            str(lab.ssh_config),
            "--remote-command",
            str(lab.remote_command),
            "--interval",
            str(INTERVAL),
            "host1",
            "host2",
        ]
        pane.send_line(
            f"cd {shlex.quote(str(ROOT))} && {shlex.join(cmd)}; "
            f"echo EXIT=$? > {shlex.quote(str(status))}"
        )
        pane.wait_for(
            lambda s: s.count(" live ") >= 2 or s.count("live") >= 3,
            "two live hosts",
            timeout=60,
            poll=0.2,
        )
        two.stop()
        pane.wait_for(lambda s: "stale" in s, "host2 stale", timeout=60, poll=0.2)
        two.kill()
        text = pane.wait_for(
            lambda s: "unreachable" in s, "host2 unreachable", timeout=60, poll=0.2
        )
        assert "refused" in text or "closed" in text, text
        two.start()
        pane.wait_for(
            lambda s: "unreachable" not in s and "stale" not in s,
            "host2 back",
            timeout=90,
            poll=0.2,
        )
        pane.keys("Enter")
        pane.wait_for(
            lambda s: "fleet › host1" in s and "PID" in s, "host1's dashboard", timeout=60, poll=0.2
        )
        pane.keys("Escape")
        pane.wait_for(lambda s: "gputop fleet" in s, "the fleet screen again", timeout=60, poll=0.2)
        pane.keys("q")
        pane.wait_for(lambda s: status.exists(), "gputop to exit", timeout=30, poll=0.2)
        assert status.read_text().strip() == "EXIT=0"
        text = pane.screen()
        assert "Traceback" not in text
        wait_until(lambda: lab.ssh_processes() == [], "no ssh process left", 10)
    finally:
        pane.close()
