"""Smaller things found while testing driver generations (issue 10, part 4)."""

from __future__ import annotations

import dataclasses

import pytest
from textual.theme import BUILTIN_THEMES

from gputop.analysis.thresholds import Thresholds
from gputop.cli import EXIT_USAGE, main
from gputop.ui.app import help_legend


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def test_unknown_threshold_lists_every_name(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "--demo", "--once", "--threshold", "nosuch=1")
    assert rc == EXIT_USAGE and out == ""
    (line,) = err.splitlines()
    for f in dataclasses.fields(Thresholds):
        assert f.name.upper() in line, f.name
    assert "…" not in line


def test_unknown_theme_is_a_bad_argument(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "--demo", "--once", "--theme", "nosuch")
    assert rc == EXIT_USAGE and out == ""
    (line,) = err.splitlines()
    assert "unknown theme 'nosuch'" in line and "textual-light" in line
    rc, out, err = _run(capsys, "--demo", "--once", "--theme", sorted(BUILTIN_THEMES)[0])
    assert rc == 0, err


def test_help_legend_has_lost() -> None:
    assert "LOST" in [marker for marker, _ in help_legend()]


async def test_demo_with_a_mig_gpu_shows_its_mig_devices() -> None:
    """DemoSource(mig=True) (the MIG screenshot): GPU 4 partitioned, UTIL n/a, one line per
    MIG device in the GPU panel; the default demo is unchanged."""
    from gputop.sources.demo import MIG_GPU, DemoSource
    from gputop.ui.app import GpuTopApp

    plain = DemoSource(seed=0).snapshot()
    assert all(not g.mig_mode and not g.mig_devices for g in plain.gpus)
    source = DemoSource(seed=0, mig=True)
    history = tuple(source.snapshot() for _ in range(30))
    g = history[-1].gpu(MIG_GPU)
    assert g is not None and g.mig_mode and g.utilization.gpu is None
    assert [m.profile for m in g.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb"]
    app = GpuTopApp(sampler=None)
    async with app.run_test(size=(200, 50)) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        text = app.gpu_panel.blocks[MIG_GPU].text
        assert "MIG on, 3 devices" in text
        assert [ln.split()[1] for ln in text.splitlines() if ln.strip().startswith("MIG ")] == [
            "3g.40gb",
            "2g.20gb",
            "1g.10gb",
        ]


def test_mig_devices_and_compat_round_trip_through_json() -> None:
    """The JSON additions of issue 10 (schema stays 1) read back losslessly."""
    import json

    from gputop.model import SCHEMA_VERSION, Snapshot, replace
    from gputop.sources.demo import DemoSource

    snap = DemoSource(0, mig=True).snapshot()
    snap = replace(snap, driver=replace(snap.driver, compat=("memory read with v1",)))
    data = json.loads(json.dumps(snap.to_dict()))
    assert data["schema"] == SCHEMA_VERSION == 1
    assert data["gpus"][4]["mig_devices"][0]["profile"] == "3g.40gb"
    assert Snapshot.from_dict(data) == snap
    old = dict(data, driver={k: v for k, v in data["driver"].items() if k != "compat"})
    old["gpus"] = [{k: v for k, v in g.items() if k != "mig_devices"} for g in data["gpus"]]
    back = Snapshot.from_dict(old)  # a file written before the additions still reads
    assert back.driver.compat == () and back.gpus[4].mig_devices == ()
