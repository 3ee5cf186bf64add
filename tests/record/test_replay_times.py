"""``gputop replay`` times: a time that is no time, a reversed range and a range outside
the recording are one line and exit 2; an empty range inside it is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import run_cli
from tests.record.test_record import demo, record


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    out = tmp_path / "rec"
    record(out, demo(120))
    return out


def _one_line(text: str) -> str:
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--at", "@nan", "--once"], "not a time: '@nan'"),
        (["--at", "@inf", "--once", "--json"], "not a time: '@inf'"),
        (["--from", "@nan", "--json"], "not a time: '@nan'"),
        (["--from", "now", "--to", "1h ago"], "--from 'now' is after --to '1h ago'"),
        (["--from", "@1000", "--to", "@2000"], "nothing recorded between"),
        (["--from", "now"], "nothing recorded after"),
    ],
)
def test_a_bad_time_or_range_is_one_line_and_exit_2(
    recorded: Path, args: list[str], said: str
) -> None:
    r = run_cli("replay", str(recorded), *args)
    assert (r.returncode, r.stdout) == (2, "")
    assert said in _one_line(r.stderr)


def test_an_empty_range_inside_the_recording_is_said(tmp_path: Path) -> None:
    snaps = demo(20)
    later = demo(20, start=snaps[-1].time + 600)
    record(tmp_path, snaps + later)
    t1, t2 = snaps[-1].time + 100, snaps[-1].time + 200
    r = run_cli("replay", str(tmp_path), "--from", f"@{t1}", "--to", f"@{t2}")
    assert (r.returncode, r.stdout) == (0, "")
    assert _one_line(r.stderr).startswith("gputop replay: no samples between ")
