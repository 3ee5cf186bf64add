"""Issue 30, section 4: GPM's SM and TC next to UTIL, the NVLink line, the detail screen's
activity and NVLink charts, and ``--once`` text; where GPM and NVLink are not there,
nothing changes. Pilot at 80, 100, 120 and 200 columns."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gputop.model import Activity, Nvlink, Snapshot
from gputop.textout import render_text
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.detail import DetailScreen, HistoryPlot
from gputop.views.gpu_view import (
    activity_text,
    bar_width_for,
    gpu_view,
    has_inside,
    has_nvlink,
    inside_parts,
    nvlink_parts,
    verdict_width_for,
)
from gputop.views.parts import plain
from tests import builders as fx
from tests.helpers.fuzz import SEED
from tests.helpers.hostile import HOSTILE, poison_snapshot

SIZES = ((80, 24), (100, 30), (120, 40), (200, 50))


def inside_history(n: int = 20, gpus: int = 2) -> tuple[Snapshot, ...]:
    """An H200-like node: every GPU with GPM and 18 NVLink links, ``n`` seconds of it."""
    return tuple(
        fx.full_snapshot(
            [
                fx.with_inside(fx.full_gpu_sample(i, util=95.0), sm=20.0 + i + t % 5)
                for i in range(gpus)
            ],
            time=fx.FULL_T0 + t,
        )
        for t in range(n)
    )


def plain_history(n: int = 20, gpus: int = 2) -> tuple[Snapshot, ...]:
    return tuple(
        fx.full_snapshot(
            [fx.full_gpu_sample(i, util=95.0) for i in range(gpus)], time=fx.FULL_T0 + t
        )
        for t in range(n)
    )


# --- the pure views ---------------------------------------------------------------------


def test_sm_and_tc_sit_next_to_util_in_both_layouts() -> None:
    g = fx.with_inside(fx.full_gpu_sample(0, util=95.0), sm=21.0)
    compact = plain(gpu_view(g, compact=True, bar_width=bar_width_for(80, True, True)).lines[0])
    assert " 95% SM 21% TC 30% " in compact
    assert "55°C" in compact and "300W" in compact  # the temperature and power stay
    wide = [plain(line) for line in gpu_view(g, compact=False, bar_width=20).lines]
    assert " 95% SM 21% TC 30% " in wide[0]
    assert wide[2] == "   NVL rx 46.6GiB/s 11% tx 55.9GiB/s 13% of 419.1GiB/s 18 links v4.0"


def test_without_gpm_or_nvlink_the_lines_are_as_before() -> None:
    """No GPM, no NVLink: not a cell more (the golden and snapshot tests hold this too)."""
    g = fx.full_gpu_sample(0)
    assert not has_inside(g) and not has_nvlink(g)
    for compact in (True, False):
        view = gpu_view(g, compact=compact, bar_width=10)
        text = "\n".join(plain(line) for line in view.lines)
        assert "SM" not in text and "TC" not in text and "NVL" not in text
        assert len(view.lines) == (1 if compact else 2)
    assert bar_width_for(120, False, False) == bar_width_for(120, False)
    # NVLink without GPM (an A100): the NVL line, no SM/TC
    a100 = replace(fx.with_inside(g), activity=Activity())
    lines = [plain(line) for line in gpu_view(a100, compact=False, bar_width=10).lines]
    assert "SM" not in lines[0] and lines[2].startswith("   NVL rx ")


def test_gpm_lines_keep_fixed_widths() -> None:
    """A GPU with GPM: its line is as wide whatever its values (n/a included)."""
    a = fx.with_inside(fx.full_gpu_sample(0, util=0.0), sm=0.0)
    b = fx.with_inside(fx.full_gpu_sample(1, util=100.0), sm=100.0)
    c = replace(a, activity=Activity(sm=None, tensor=5.0))
    for compact in (True, False):
        widths = {
            len(plain(gpu_view(g, compact=compact, bar_width=10).lines[0])) for g in (a, b, c)
        }
        assert len(widths) == 1, widths
    assert "SM n/a" in plain(inside_parts(c))


def test_activity_and_nvlink_text_say_na_never_zero() -> None:
    g = replace(
        fx.full_gpu_sample(0),
        activity=Activity(sm=50.0),
        nvlink=Nvlink(links=4, version=None, max_bytes_per_s=None),
    )
    assert activity_text(g).startswith("SM 50%  TC n/a  DRAM n/a")
    assert plain(nvlink_parts(g)) == "NVL rx n/a tx n/a of n/a 4 links"
    assert not has_nvlink(replace(g, nvlink=Nvlink(links=0)))  # no active link: no line


@seed(SEED)
@settings(
    max_examples=80,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    values=st.lists(
        st.one_of(
            st.sampled_from(HOSTILE),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(min_value=-(2**70), max_value=2**70),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_gpm_and_nvlink_views_never_raise(seed: int, values: list[Any]) -> None:
    """NaN, inf, huge and negative numbers anywhere in GPM's and NVLink's parts (no check
    by value in between): every view and ``--once`` text still draws. Seeded:
    GPUTOP_FUZZ_SEED replays it."""
    print(f"seed={seed}")
    snap = poison_snapshot(inside_history(1)[0], random.Random(seed), values, share=0.6)
    render_text(snap)
    for g in snap.gpus:
        for compact in (True, False):
            gpu_view(g, compact=compact, bar_width=10)
        activity_text(g)
        plain(nvlink_parts(g))


# --- the dashboard, at each width -------------------------------------------------------


async def _panel_lines(history: tuple[Snapshot, ...], size: tuple[int, int]) -> list[str]:
    app = GpuTopApp(snapshots=list(history))
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        lines = app.gpu_panel._lines
        assert lines is not None
        width = lines.size.width
        out = [plain(line) for line in lines.lines]
        for text in out:
            assert len(text) <= width, (size, text)
        return out


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_dashboard_shows_sm_tc_and_nvlink_at_every_width(size: tuple[int, int]) -> None:
    lines = await _panel_lines(inside_history(), size)
    first = lines[0]
    assert "SM 24%" in first and "TC 30%" in first  # GPU 0 at t = 19: 20 + 19 % 5
    wide = size[0] >= 100
    nvl = [line for line in lines if line.lstrip().startswith("NVL rx")]
    # Wide: each GPU's NVL line. Compact (80 columns): one line a GPU; NVLink is in the
    # detail screen and --once (docs/dashboard.md says so).
    assert len(nvl) == (2 if wide else 0)
    if wide:
        assert "of 419.1GiB/s" in nvl[0]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_verdict_slot_stays_whole_with_gpm(size: tuple[int, int]) -> None:
    """SM and TC take room from the bars and history, never from the verdict word."""
    history = inside_history()
    app = GpuTopApp(snapshots=list(history))
    async with app.run_test(size=size) as pilot:
        app.apply_snapshot(history[-1], history)
        await pilot.pause()
        panel = app.gpu_panel
        width = size[0]
        compact = app.compact
        bar = bar_width_for(width, compact, True)
        verdict = verdict_width_for(width, compact, bar, True)
        assert verdict >= 8
        lines = panel._lines
        assert lines is not None
        for block in panel.blocks.values():
            text = plain(block.view.lines[0])
            assert len(text) <= lines.size.width, (size, text)


async def test_without_gpm_the_panel_is_unchanged() -> None:
    """The same node without GPM and NVLink: the panel of before (no SM, TC or NVL)."""
    for size in SIZES:
        lines = await _panel_lines(plain_history(), size)
        text = "\n".join(lines)
        assert "SM " not in text and "TC " not in text and "NVL" not in text


# --- the detail screen ------------------------------------------------------------------


async def test_detail_charts_activity_and_nvlink_where_the_gpu_has_them() -> None:
    from tests.ui.test_ui_screens import Host, widgets_text

    screen = DetailScreen(0, inside_history(30))
    app = Host(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        shown = {p.id for p in screen.query(HistoryPlot) if p.display}
        assert shown == {
            "plot-util",
            "plot-activity",
            "plot-mem",
            "plot-pcie",
            "plot-nvlink",
            "plot-power",
        }
        for plot in screen.query(HistoryPlot):
            assert plot.render().plain.strip()
        activity = screen.query_one("#plot-activity", HistoryPlot).render().plain
        assert "SM active" in activity and "tensor" in activity and "DRAM" in activity
        nvlink = screen.query_one("#plot-nvlink", HistoryPlot).render().plain
        assert "NVLink, of 419.1GiB/s" in nvlink
        text = widgets_text(app)
        assert "SM 24%  TC 30%  DRAM 40%" in text  # t = 29: 20 + 29 % 5
        assert "NVL rx 46.6GiB/s 11%" in text
        assert "SM clock n/a" in text  # the clock says it is one: SM alone is GPM's


async def test_detail_of_a_gpu_without_gpm_keeps_its_four_charts() -> None:
    from tests.ui.test_ui_screens import Host

    screen = DetailScreen(0, plain_history(10))
    app = Host(screen)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        shown = [p.id for p in screen.query(HistoryPlot) if p.display]
        assert shown == ["plot-util", "plot-mem", "plot-pcie", "plot-power"]


async def test_detail_charts_of_hostile_gpm_values_draw() -> None:
    """NaN, inf, 1e308 and ints past a float in the charted GPM and NVLink values."""
    from tests.ui.test_ui_screens import Host

    bad = [math.nan, math.inf, -math.inf, 1e308, -1.0, 2**70, 0.0]
    history = tuple(
        replace(
            snap,
            gpus=tuple(
                replace(
                    g,
                    activity=Activity(
                        sm=bad[t % 7], tensor=bad[(t + 1) % 7], dram=bad[(t + 2) % 7]
                    ),
                    nvlink=replace(
                        g.nvlink,
                        rx_bytes_per_s=bad[(t + 3) % 7],
                        tx_bytes_per_s=bad[(t + 4) % 7],
                        max_bytes_per_s=bad[(t + 5) % 7],
                    ),
                )
                for g in snap.gpus
            ),
        )
        for t, snap in enumerate(inside_history(14))
    )
    for n in (1, 2, 7, 14):
        screen = DetailScreen(0, history[:n])
        app = Host(screen)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            for plot in screen.query(HistoryPlot):
                if plot.display:
                    plot.render()


# --- --once text, a replay and the fleet ------------------------------------------------


def test_once_text_has_the_activity_and_nvl_lines() -> None:
    text = render_text(inside_history(1)[0])
    lines = text.splitlines()
    assert "     SM 20%  TC 30%  DRAM 40%  occupancy 20%  FP64 1%  FP32 10%  FP16 2%" in lines
    assert "     NVL rx 46.6GiB/s 11% tx 55.9GiB/s 13% of 419.1GiB/s 18 links v4.0" in lines
    assert all(len(line) <= 80 for line in lines)
    assert text.isascii()
    plain_text = render_text(plain_history(1)[0])
    assert "SM 20%" not in plain_text and "NVL" not in plain_text


async def test_a_replay_of_a_recording_shows_them(tmp_path: Path) -> None:
    from gputop.record.player import Player
    from gputop.record.store import Recorder, Recording
    from gputop.ui.replay import ReplayApp

    rec = Recorder(tmp_path, interval=1.0, retain=None, max_size=None)
    for snap in inside_history(10):
        rec.add(snap)
    rec.close()
    player = Player(Recording(tmp_path), 200)
    player.tick_now()
    app = ReplayApp(player)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                await pilot.pause(0.02)
                if app.gpu_panel.blocks:
                    break
            text = app.gpu_panel.blocks[0].text
            assert "SM 2" in text and "TC 30%" in text and "NVL rx 46.6GiB/s" in text
    finally:
        player.stop()


async def test_the_fleet_host_dashboard_shows_them() -> None:
    """A host's --stream line, as the fleet reads it, opened on its dashboard."""
    import json

    from gputop.present import to_json_dict
    from gputop.stream import json_line
    from gputop.ui.fleet import FleetApp
    from tests.helpers.fleet import FakeFleet

    fleet = FakeFleet(["h200-node"], interval=2.0)
    fleet.feed("h200-node", json.loads(json_line(to_json_dict(inside_history(1)[0]))))
    app = FleetApp(fleet, via="test")  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        app.open_host("h200-node")
        await pilot.pause()
        text = app.gpu_panel.blocks[0].text
        assert "SM 20%" in text and "TC 30%" in text
        assert "NVL rx 46.6GiB/s 11% tx 55.9GiB/s 13% of 419.1GiB/s" in text


def test_mig_devices_with_gpm_show_their_sm_and_tc() -> None:
    """GPM per GPU instance (nvmlGpmMigSampleGet): each MIG line says its SM and TC; one
    without says nothing more."""
    from gputop.model import GpuMemory, MigDevice
    from gputop.views.gpu_view import mig_lines

    mem = GpuMemory(total=70 * fx.GiB, used=20 * fx.GiB)
    with_gpm = MigDevice(
        0,
        profile="3g.71gb",
        gpu_instance_id=1,
        compute_instance_id=0,
        memory=mem,
        activity=Activity(sm=35.0, tensor=12.0),
    )
    without = replace(with_gpm, index=1, gpu_instance_id=2, activity=Activity())
    g = replace(
        fx.with_inside(fx.full_gpu_sample(0)), mig_mode=True, mig_devices=(with_gpm, without)
    )
    lines = [plain(line) for line in mig_lines(g, 10)]
    assert "29%  SM 35% TC 12%  procs 0" in lines[0]
    assert "SM" not in lines[1] and "29%  procs 0" in lines[1]
    text = render_text(fx.full_snapshot([g]))
    assert "mem 20.0GiB/70.0GiB  SM 35% TC 12%  processes: none" in text
    assert "mem 20.0GiB/70.0GiB  processes: none" in text
