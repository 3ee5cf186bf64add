"""Fuzz (issue 21): numbers no host reports, put in a demo host's stream lines and in a
recording, go to the fleet UI (Pilot: the host opened, its GPU detail screen open) and to
``replay --once`` in text and JSON; and (issue 29) fields of the wrong JSON type or shape
beside them. Nothing raises, nothing out of bounds is shown. A
fixed number of rounds (a few seconds); the seed is in every failure message
(GPUTOP_FUZZ_SEED=<seed> replays it)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from gputop.model import Snapshot, check_values, replace
from gputop.record import replay_cli
from gputop.record.store import Recorder
from gputop.sources.demo import DemoSource
from gputop.sources.remote import LineError, parse_line, to_snapshot
from gputop.ui.fleet import FleetApp
from gputop.ui.screens.detail import DetailScreen
from tests.helpers.fleet import demo_fleet
from tests.helpers.hostile import HOSTILE, NONSENSE, poison_line, poison_snapshot
from tests.helpers.screen import terminal_rows
from tests.helpers.shapes import JSON_TYPES, mutated, paths

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

ROUNDS = 25


def reshape_line(line: str, rng: random.Random, count: int) -> str:
    """``line`` with ``count`` of its fields, at any depth, replaced by a JSON type (issue
    29: type and shape mutations beside the values)."""
    data = json.loads(line)
    for _ in range(count):
        data = mutated(data, rng.choice(list(paths(data))), rng.choice(JSON_TYPES))
    return json.dumps(data)


def in_bounds(snapshot: Snapshot, seed: int) -> None:
    """What a view draws: the check by value finds nothing more in it."""
    again = check_values(snapshot, "test", "the test")
    assert again.errors == snapshot.errors, f"seed {seed}: {again.errors[len(snapshot.errors) :]}"


def screen_values(rows: list[str]) -> str:
    """The screen without what quotes a refused value (the errors say what was sent) and
    the per-core strip (a digit per core)."""
    if "Errors while sampling:" in rows:  # --once: the errors come last
        rows = rows[: rows.index("Errors while sampling:")]
    return "\n".join(r for r in rows if "reported" not in r and not r.strip().startswith("Cores"))


async def test_fleet_ui_with_the_detail_screen_open_survives_hostile_lines(fuzz_seed: int) -> None:
    """Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(fuzz_seed)
    fleet, datas = demo_fleet(["h1", "h2"], ticks=20)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("enter")  # open h1
        await pilot.pause()
        await pilot.press("enter")  # its first GPU in detail
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen), f"seed {fuzz_seed}"
        base, t = datas["h1"][-1], datas["h1"][-1]["time"]
        fed = 0
        for n in range(ROUNDS):
            line = poison_line(base | {"time": t + n + 1}, rng, count=rng.randint(1, 12))
            line = reshape_line(line, rng, count=rng.randint(0, 4))
            try:
                data = parse_line(line)
                to_snapshot(data)  # what the reader refuses never reaches the screen
            except LineError:
                continue
            fleet.feed("h1", data)
            fed += 1
            await pilot.pause()
            assert app.snapshot is not None, f"seed {fuzz_seed}"
            in_bounds(app.snapshot, fuzz_seed)
            shown = screen_values(terminal_rows(app))
            bad = NONSENSE.search(shown)
            assert not bad, f"seed {fuzz_seed}, round {n}: {bad.group()!r} in\n{shown}"
        await pilot.press("escape")  # back to the host's dashboard, then the fleet
        await pilot.pause()
        shown = screen_values(terminal_rows(app))
        assert not NONSENSE.search(shown), f"seed {fuzz_seed}:\n{shown}"
        await pilot.press("escape")
        await pilot.pause()
        shown = screen_values(terminal_rows(app))
        assert not NONSENSE.search(shown), f"seed {fuzz_seed}:\n{shown}"
    assert fed, f"seed {fuzz_seed}: every line was refused"


@pytest.fixture(scope="module")
def hostile_recording(tmp_path_factory: pytest.TempPathFactory, fuzz_seed: int) -> tuple[Path, int]:
    rng = random.Random(fuzz_seed)
    directory = tmp_path_factory.mktemp("hostile-rec")
    source = DemoSource(seed=rng.randrange(100), start_time=1_800_000_000.0, step=1.0)
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None)
    for _ in range(40):
        snap = source.snapshot()
        share = rng.choice((0.0, 0.02, 0.2))
        values = HOSTILE + JSON_TYPES  # wrong values, and wrong types and shapes (issue 29)
        rec.add(replace(poison_snapshot(snap, rng, values, share=share), time=snap.time))
    rec.close()
    return directory, fuzz_seed


@pytest.mark.parametrize("form", [["--once"], ["--once", "--json"]], ids=["text", "json"])
def test_replay_once_of_a_hostile_recording(
    hostile_recording: tuple[Path, int],
    form: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory, seed = hostile_recording
    rng = random.Random(seed)
    for at in ["@" + str(1_800_000_000 + rng.randrange(40)) for _ in range(4)] + [None]:
        argv = [str(directory), *form, *(["--at", at] if at else [])]
        status = replay_cli.main(argv)
        out, err = capsys.readouterr()
        assert status == 0, f"seed {seed}, {argv}: {err}"
        assert "Traceback" not in err
        if "--json" in form:
            data: dict[str, Any] = json.loads(out)
            in_bounds(Snapshot.from_dict(data), seed)
        else:
            bad = NONSENSE.search(screen_values(out.splitlines()))
            assert not bad, f"seed {seed}: {bad.group()!r} in\n{out}"
