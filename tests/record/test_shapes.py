"""A recording is checked by type and shape, not only by value (issue 29, class 4): a
field of the wrong JSON type is n/a (or its row left out, or the block damaged) with an
error, never a traceback, in ``replay --once``, ``--json`` and the dashboard."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputop.model import Owner, SampleError, Snapshot, check_values, replace
from gputop.present import render_json
from gputop.record import codec
from gputop.record.player import Player
from gputop.record.store import Recorder, Recording
from gputop.sources.demo import DemoSource
from gputop.textout import render_text
from gputop.ui.replay import ReplayApp
from tests.cli.test_cli import run_cli
from tests.helpers.shapes import JSON_TYPES, REPR, by_field, kept_or_said, mutated, pattern

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

T0 = 1_800_000_000.0


def demo(n: int = 5) -> list[Snapshot]:
    """Demo snapshots holding a part of each kind: MIG devices, an owner, an error, a holder
    (two of the demo's GPUs: a fuzz round is the quicker)."""
    source = DemoSource(3, start_time=T0, step=1.0, mig=True)
    out = []
    for _ in range(n):
        snap = source.snapshot()
        first = replace(snap.processes[0], owner=Owner(kind="slurm", slurm_job="12", unit="x"))
        error = SampleError("nvml", "x", gpu=0, metric="power")
        gpus = (snap.gpus[0], snap.gpus[4])  # a busy one, and the one in MIG mode
        pids = {p.pid for g in gpus for p in g.processes} | {snap.processes[0].pid}
        procs = tuple(p for p in (first, *snap.processes[1:]) if p.pid in pids)
        out.append(replace(snap, gpus=gpus, processes=procs, errors=(error,)))
    return out


def _gpu0(s: Snapshot, **changes: Any) -> Snapshot:
    return replace(s, gpus=(replace(s.gpus[0], **changes), *s.gpus[1:]))


# The cases, and more of the same kind: (what, the change, the error's path).
WRONG: dict[str, tuple[Callable[[Snapshot], Snapshot], str]] = {
    "a GPU name that is a number": (lambda s: _gpu0(s, name=7), "name"),
    "GPU memory that is 5": (lambda s: _gpu0(s, memory=5), "memory"),
    "gpus that is null": (lambda s: replace(s, gpus=None), "gpus"),
    "a process list that is a text": (lambda s: _gpu0(s, processes="x"), "processes"),
    "a GPU that is a number": (lambda s: replace(s, gpus=(5, *s.gpus[1:])), "gpus"),
    "host memory that is a list": (
        lambda s: replace(s, host=replace(s.host, memory=[1, 2])),
        "host.memory",
    ),
    "a user that is an object": (
        lambda s: replace(s, processes=(replace(s.processes[0], user={"a": 1}), *s.processes[1:])),
        "processes.user",
    ),
}


def _recording(directory: Path, change: Callable[[Snapshot], Snapshot]) -> Path:
    rec = Recorder(directory, interval=1.0, retain=None, max_size=None)
    for snap in demo():
        rec.add(change(snap))
    rec.close()
    return directory


@pytest.mark.parametrize("what", list(WRONG))
def test_replay_once_and_json_of_a_wrong_type_say_it_in_errors(tmp_path: Path, what: str) -> None:
    change, path = WRONG[what]
    directory = _recording(tmp_path / "rec", change)
    r = run_cli("replay", str(directory), "--once", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    data = json.loads(r.stdout)
    said = [e for e in data["errors"] if e["source"] == "replay"]
    assert [e["metric"] for e in said] == [path], said
    assert "the recording reported" in said[0]["message"]
    r = run_cli("replay", str(directory), "--once")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "Errors while sampling:" in r.stdout and "the recording reported" in r.stdout
    assert not REPR.search(r.stdout)


def test_a_hostname_that_is_a_number_is_a_damaged_block_in_one_line(tmp_path: Path) -> None:
    directory = _recording(tmp_path / "rec", lambda s: replace(s, hostname=5))
    for form in (["--once"], ["--once", "--json"]):
        r = run_cli("replay", str(directory), *form)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr.count("\n") == 1 and "hostname = 5, not a text" in r.stderr, r.stderr


@pytest.mark.parametrize("what", list(WRONG))
async def test_the_replay_dashboard_shows_a_wrong_type_as_an_error(
    tmp_path: Path, what: str
) -> None:
    change, path = WRONG[what]
    player = Player(Recording(_recording(tmp_path / "rec", change)), 3)
    player.tick_now()
    app = ReplayApp(player)
    try:  # the app starts the player, run_replay stops it: here the test does
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.02)
                if app.snapshot is not None:
                    break
            assert app.snapshot is not None
            said = [e.metric for e in app.snapshot.errors if e.source == "replay"]
            assert said == [path]
            await pilot.press("enter")  # the first GPU in detail: every panel drawn
            await pilot.pause()
    finally:
        player.stop()
    assert app.return_code in (None, 0)


def _block(rows: list[dict[str, Any]]) -> list[Snapshot]:
    """The real decoding of a block whose rows are these dicts (as a recorder writes them)."""

    class Raw:  # flatten() reads the snapshot's dict form
        def __init__(self, d: dict[str, Any]) -> None:
            self.d = d

        def to_dict(self, whole: bool = False) -> dict[str, Any]:
            return self.d

    flat = [codec.flatten(Raw(json.loads(json.dumps(d)))) for d in rows]  # type: ignore[arg-type]
    return codec.decode_snapshots(codec.encode_rows(flat))


#: What only the whole snapshot has: wrong there, the block is damaged.
REQUIRED = {"time", "hostname", "driver", "driver.available"}


def test_every_field_of_a_recording_by_each_json_type(fuzz_seed: int) -> None:
    """Fuzz: one row of each field, every JSON type in a seeded quarter of the fields, one
    random type in the rest (a few seconds). Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(fuzz_seed)
    clean = demo(2)
    base = clean[1].to_dict()
    tried = 0
    for path in by_field(base, rng):
        values = JSON_TYPES if rng.random() < 0.25 else (rng.choice(JSON_TYPES),)
        for value in values:
            tried += 1
            where = f"seed {fuzz_seed}: {pattern(path)} = {value!r:.60}"
            try:
                first, got = _block([clean[0].to_dict(), mutated(base, path, value)])
            except codec.CodecError as exc:
                assert pattern(path) in REQUIRED, f"{where}: {exc}"
                continue
            assert first == clean[0], where
            said = [e.message for e in got.errors if e.source == "replay"]
            problem = kept_or_said(got.to_dict(), path, value, said, "the recording")
            assert problem is None, f"{where}: {problem}"
            assert check_values(got, "replay", "the recording") is got, where  # all checked
            text = render_text(got)
            assert not REPR.search(text), f"{where}:\n{text}"
            json.loads(render_json(got))
    assert tried > 137, f"seed {fuzz_seed}"


#: What the error calls each key's type.
EXPECTED = {"name": "a text", "memory": "a GpuMemory", "processes": "a list of GpuProcesses"}


@pytest.mark.parametrize("key", ["name", "memory", "processes", "index"])
def test_a_row_of_a_block_that_lacks_a_key_its_other_rows_have(key: str) -> None:
    """A damaged block (its columns for one row only) reads as a value of no type."""
    clean = demo(2)
    row = clean[1].to_dict()
    del row["gpus"][0][key]
    first, got = _block([clean[0].to_dict(), row])
    assert first == clean[0]
    said = [(e.metric, e.message) for e in got.errors if e.source == "replay"]
    if key == "index":  # a GPU without its index is left out
        assert [g.index for g in got.gpus] == [g.index for g in clean[1].gpus[1:]]
        why = "not a whole number 0-65536: left out"
        assert said == [("gpus.index", f"the recording reported gpus.index = nothing, {why}")]
    else:
        why = f"not {EXPECTED[key]}: shown as n/a"
        assert said == [(key, f"GPU 0: the recording reported {key} = nothing, {why}")]
    render_text(got)
