"""The stream set's faults, each with real child processes (local commands standing in
for ssh): garbage and future schemas mark one host, a slow host delays nobody, refusals
back off, hangs time out, a dropped stream goes stale and reconnects by itself, a host
without gputop says so, and closing leaves no process behind.

Every wait is on a condition with a generous bound (a loaded 2-core machine).
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.sources.streams import INSTALL_HINT, HostView, StreamSet, local_command, status
from tests.fleet.test_fleet_remote import demo_line

INTERVAL = 0.2


@pytest.fixture(scope="module")
def line_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lines") / "line.json"
    path.write_text(demo_line() + "\n")
    return path


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def good(line_file: Path) -> str:
    """A host that sends a line every INTERVAL."""
    return f"while true; do cat {shlex.quote(str(line_file))}; sleep {INTERVAL}; done"


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def make() -> Iterator[Callable[..., StreamSet]]:
    made: list[StreamSet] = []

    def build(scripts: dict[str, str], **kw: object) -> StreamSet:
        s = StreamSet(
            list(scripts),
            lambda host, n: sh(scripts[host]),
            interval=INTERVAL,
            **kw,  # type: ignore[arg-type]
        )
        made.append(s)
        s.start()
        return s

    yield build
    for s in made:
        s.close()


def state(s: StreamSet, host: str) -> str:
    return status(s.view(host), time.monotonic(), INTERVAL)[0]


def test_garbage_and_a_future_schema_mark_their_host_only(make, line_file: Path) -> None:
    s = make(
        {
            "ok": good(line_file),
            "garbage": "while true; do echo 'not json'; sleep 0.1; done",
            "future": 'while true; do echo \'{"schema": 99, "time": 1}\'; sleep 0.1; done',
        }
    )
    wait_until(lambda: s.view("ok").seq >= 5, "five lines from the good host")
    assert state(s, "garbage") == "bad-data"
    assert "not JSON" in (s.view("garbage").error or "")
    assert state(s, "future") == "schema"
    assert "newer" in (s.view("future").error or "")
    assert state(s, "ok") == "live"


def test_a_slow_host_never_delays_the_others(make, line_file: Path) -> None:
    s = make({"slow": "sleep 60", "fast": good(line_file)})
    wait_until(lambda: s.view("fast").seq >= 10, "ten lines from the fast host")
    assert state(s, "slow") == "connecting"


def test_a_refusing_host_is_unreachable_with_its_error_and_backs_off(make) -> None:
    script = "echo 'ssh: connect to host x port 22: Connection refused' >&2; exit 255"
    s = make({"down": script})
    wait_until(lambda: s.view("down").failures >= 3, "three failed attempts")
    v = s.view("down")
    assert state(s, "down") == "unreachable"
    assert v.error == "ssh: connect to host x port 22: Connection refused"
    assert v.retry_at is not None and v.retry_at - time.monotonic() > 1.0  # backing off


def test_a_host_that_hangs_times_out(make, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    s = make({"hung": f"echo $$ > {pidfile}; exec sleep 600"}, first_line_timeout=1.0)
    wait_until(lambda: s.view("hung").failures >= 1, "the first attempt to time out")
    assert "timed out" in (s.view("hung").error or "")
    pid = int(pidfile.read_text())
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), "the hung child to be gone", 10)


def test_a_dropped_stream_goes_stale_then_reconnects_by_itself(
    make, line_file: Path, tmp_path: Path
) -> None:
    # Each connection sends two lines, then hangs for a while, then drops.
    count = tmp_path / "attempts"
    script = (
        f"echo x >> {count}; cat {line_file}; sleep {INTERVAL}; cat {line_file}; sleep 2; exit 255"
    )
    s = make({"flaky": script})
    wait_until(lambda: s.view("flaky").seq >= 2, "two lines")
    wait_until(lambda: state(s, "flaky") == "stale", "stale after 3 silent intervals")
    wait_until(lambda: s.view("flaky").seq >= 4, "lines from a second connection", 30)
    assert s.view("flaky").attempts >= 2
    assert len(count.read_text().split()) >= 2


def test_a_host_without_gputop_says_so_and_how_to_install(make) -> None:
    s = make({"bare": "exec gputop-that-is-not-here --stream"})
    wait_until(lambda: state(s, "bare") == "no-gputop", "no gputop")
    assert INSTALL_HINT in (s.view("bare").error or "")


def test_an_over_long_line_is_dropped_and_the_next_one_read(make, line_file: Path) -> None:
    script = f"head -c 9000000 /dev/zero | tr '\\0' x; echo; {good(line_file)}"
    s = make({"big": script})
    wait_until(lambda: s.view("big").seq >= 2, "good lines after the long one")
    assert state(s, "big") == "live"


def test_close_ends_every_process_group(make, tmp_path: Path, line_file: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 600 & echo $! >> {pids}; echo $$ >> {pids}; {good(line_file)}"
    s = make({"a": script, "b": script})
    wait_until(lambda: s.view("a").seq >= 1 and s.view("b").seq >= 1, "both hosts")
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 4
    s.close()
    for pid in children:
        wait_until(lambda pid=pid: not _alive(pid), f"pid {pid} to be gone", 10)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def test_views_are_immutable_and_in_host_order(make, line_file: Path) -> None:
    s = make({"b": good(line_file), "a": good(line_file)})
    views = s.views()
    assert [v.name for v in views] == ["b", "a"]
    assert all(isinstance(v, HostView) for v in views)
    with pytest.raises(AttributeError):
        views[0].seq = 5  # type: ignore[misc]


def test_local_command_runs_the_stream_here() -> None:
    argv = local_command("gputop --demo", 2.0)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert argv[2].endswith("gputop --demo --stream --interval 2")
    assert os.path.exists(argv[0])
