"""Probes in a recording (issue 31, section 3): ``ProcessInfo.probe`` round-trips exactly
through the recorder and replay (both decoding paths), a probe that comes and goes between
rows of a block keeps its columns straight, a recording made before probes existed still
replays (no probe: null), and an impossible probe value in a recording is n/a with an
error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputop.model import CudaMemory, Probe, Snapshot, check_values, replace
from gputop.record import codec
from gputop.record.store import Recorder, Recording
from gputop.sources.demo import DemoSource

T0 = 1_800_000_000.0

PROBES = [
    Probe(
        time=T0,
        window_seconds=20.0,
        steps=64,
        data_wait_ratio=0.42,
        step_seconds=0.31,
        batches_per_second=3.2,
        memory=(CudaMemory(0, 1 << 30, 3 << 30, 2 << 30), CudaMemory(1, None, 5, None)),
    ),
    Probe(time=T0 + 1, data_wait_ratio=0.0),  # figures n/a, no CUDA
    None,
]


def with_probes(n: int = 12) -> list[Snapshot]:
    """Demo snapshots whose first processes carry probes that come, change and go."""
    source = DemoSource(2, start_time=T0, step=1.0)
    out = []
    for i in range(n):
        snap = source.snapshot()
        procs = list(snap.processes)
        for k in range(min(3, len(procs))):
            probe = PROBES[(i + k) % len(PROBES)]
            if probe is not None:
                probe = replace(probe, time=snap.time - 0.5, steps=i)
            procs[k] = replace(procs[k], probe=probe)
        by_pid = {p.pid: p for p in procs}
        gpus = tuple(
            replace(
                g,
                processes=tuple(replace(p, host=by_pid.get(p.pid, p.host)) for p in g.processes),
            )
            for g in snap.gpus
        )
        out.append(replace(snap, processes=tuple(procs), gpus=gpus))
    assert any(p.probe and p.probe.memory for s in out for p in s.processes)
    return out


def _json(snaps: list[Snapshot]) -> list[str]:
    return [json.dumps(s.to_dict()) for s in snaps]


def test_probes_round_trip_through_a_recording(tmp_path: Path) -> None:
    snaps = with_probes()
    rec = Recorder(tmp_path, interval=1.0, retain=None, max_size=None, flush_seconds=5)
    for s in snaps:
        rec.add(s)
    rec.close()
    back = Recording(tmp_path)
    assert back.problems == []
    got = [back[i] for i in range(len(snaps))]
    assert got == snaps
    assert got[0].processes[0].probe == snaps[0].processes[0].probe


def test_both_decoding_paths_agree_on_probes() -> None:
    snaps = with_probes()
    payload = codec.encode_rows([codec.flatten(s) for s in snaps])
    assert codec.decode_snapshots(payload) == snaps
    n, keys, columns, flags = codec._decode_columns(payload)
    assert codec._from_dicts(n, keys, columns) == snaps
    assert codec._Direct(n, keys, columns, flags).snapshots() == snaps


def test_whole_rows_have_the_probes_columns() -> None:
    """``to_dict(whole=True)``: a process without a probe has the ``probe`` column (null),
    one with a probe its fields; no column of a probe is dropped as "quiet"."""
    snap = with_probes(1)[0]
    flat = codec.flatten(snap)
    probed = [i for i, p in enumerate(snap.processes) if p.probe is not None]
    plain = [i for i, p in enumerate(snap.processes) if p.probe is None]
    assert probed and plain
    assert flat[("processes", plain[0], "probe")] is None
    for name in ("time", "window_seconds", "data_wait_ratio", "step_seconds"):
        assert ("processes", probed[0], "probe", name) in flat
    assert ("processes", probed[0], "probe", "memory", "#") in flat


def _block(rows: list[dict[str, Any]]) -> list[Snapshot]:
    """A block whose rows are these dicts, as a recorder writes them."""

    class Raw:
        def __init__(self, d: dict[str, Any]) -> None:
            self.d = d

        def to_dict(self, whole: bool = False) -> dict[str, Any]:
            return self.d

    flat = [codec.flatten(Raw(json.loads(json.dumps(d)))) for d in rows]  # type: ignore[arg-type]
    return codec.decode_snapshots(codec.encode_rows(flat))


def _without_probes(d: dict[str, Any]) -> dict[str, Any]:
    """What a gputop before issue 31 recorded: no ``probe`` key anywhere."""
    for p in d["processes"]:
        p.pop("probe", None)
    for g in d["gpus"]:
        for p in g["processes"]:
            p.pop("probe", None)
    return d


def test_a_recording_from_before_probes_still_replays() -> None:
    source = DemoSource(2, start_time=T0, step=1.0)
    snaps = [source.snapshot() for _ in range(3)]
    old = [_without_probes(s.to_dict(whole=True)) for s in snaps]
    assert "probe" not in json.dumps(old)
    back = _block(old)
    assert back == snaps
    assert all(p.probe is None for s in back for p in s.processes)
    assert not [e for s in back for e in s.errors if e.source == "replay"]


def test_an_impossible_probe_value_in_a_recording_is_na_and_said() -> None:
    snaps = with_probes(2)
    rows = [s.to_dict(whole=True) for s in snaps]
    pid = next(p["pid"] for p in rows[1]["processes"] if p.get("probe"))
    for p in rows[1]["processes"]:
        if p["pid"] == pid:
            p["probe"]["data_wait_ratio"] = 7.5
            p["probe"]["step_seconds"] = "slow"
    first, got = _block(rows)
    assert first == snaps[0]
    probe = got.process_info(pid).probe  # type: ignore[union-attr]
    assert probe is not None and probe.data_wait_ratio is None and probe.step_seconds is None
    said = sorted(e.metric or "" for e in got.errors if e.source == "replay")
    assert said == ["processes.probe.data_wait_ratio", "processes.probe.step_seconds"], said
    assert check_values(got, "replay", "the recording") is got


def test_replay_once_json_shows_the_recorded_probe(tmp_path: Path) -> None:
    from tests.cli.test_cli import run_cli

    snaps = with_probes(3)
    rec = Recorder(tmp_path, interval=1.0, retain=None, max_size=None)
    for s in snaps:
        rec.add(s)
    rec.close()
    r = run_cli("replay", str(tmp_path), "--once", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    last = snaps[-1]
    want = {p.pid: p.probe for p in last.processes}
    got = {p["pid"]: p["probe"] for p in doc["processes"]}
    assert got.keys() == want.keys()
    for pid, probe in want.items():
        if probe is None:
            assert got[pid] is None
        else:
            assert got[pid]["data_wait_ratio"] == probe.data_wait_ratio
            assert len(got[pid]["memory"]) == len(probe.memory)
    assert any(p is not None for p in got.values())
