"""gputop.views: snapshot -> rows and text, without Textual."""

from __future__ import annotations

import sys

import pytest

from gputop.model import DriverInfo, UnlistedHolder
from gputop.views import header_view, host_view, process_view
from gputop.views.gpu_view import (
    VerdictMark,
    bar_width_for,
    gpu_view,
    is_mem_idle,
    pcie_downgrade,
    throttle_words,
)
from gputop.views.host_view import core_lines
from gputop.views.parts import level, memory_bar, plain
from gputop.views.process_view import MIN_COMMAND_WIDTH, column_widths, matches, sort_rows
from tests import builders as fx


def test_the_views_package_imports_no_widget_library() -> None:
    """Every module of gputop.views, read from its source (what it could import, not
    only what one path happened to load)."""
    import ast
    from pathlib import Path

    import gputop.views

    modules = sorted(Path(gputop.views.__file__).parent.glob("*.py"))
    assert len(modules) > 1
    for path in modules:
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        assert not any(n.startswith(("textual", "rich")) for n in names), (path, names)
    assert "gputop.views.process_view" in sys.modules


@pytest.mark.parametrize(
    ("value", "cell"),
    [(None, "·"), (0.0, " "), (0.1, "▁"), (12.5, "▁"), (13.0, "▂"), (50.0, "▄"), (100.0, "█")],
)
def test_level_is_a_fixed_scale(value: float | None, cell: str) -> None:
    assert level(value) == cell


def test_history_never_rescales_and_pads_left() -> None:
    # A flat 3 % stays at the floor; an auto-scaling chart would draw it full height.
    from gputop.ui.gpu_panel import history_parts  # the GPU panel's history rows

    def history(values: list[float | None], width: int) -> str:
        cells = "".join(level(v) for v in values)
        return history_parts(("", cells), width, 0)[-1][0]

    assert history([3.0, 3.0, 3.0], 5) == "  ▁▁▁"
    assert history([0.0, 100.0, None], 3) == " █·"
    assert history(list(range(100)), 4) == "████"
    assert history([50.0] * 10, 0) == ""


def test_memory_bar_shows_used_reserved_free_as_characters() -> None:
    parts = memory_bar(50.0, 25.0, 8)
    assert plain(parts) == "████▓▓░░"
    assert plain(memory_bar(None, None, 4)) == "····"


def test_mem_idle_marker_thresholds() -> None:
    idle = fx.full_gpu_sample(0, util=5.0, used=70 * fx.GiB, total=80 * fx.GiB)
    busy = fx.full_gpu_sample(1, util=50.0, used=70 * fx.GiB, total=80 * fx.GiB)
    empty = fx.full_gpu_sample(2, util=0.0, used=1 * fx.GiB, total=80 * fx.GiB)
    unknown = fx.full_gpu_sample(3, util=None, used=70 * fx.GiB, total=80 * fx.GiB)
    assert is_mem_idle(idle)
    assert not is_mem_idle(busy)
    assert not is_mem_idle(empty)
    assert not is_mem_idle(unknown)  # unknown is not idle
    for compact in (True, False):
        line = plain(gpu_view(idle, compact=compact, bar_width=8).lines[0])
        assert "MEM IDLE" in line
        line = plain(gpu_view(busy, compact=compact, bar_width=8).lines[0])
        assert "MEM IDLE" not in line


def test_verdict_word_takes_the_slot() -> None:
    idle = fx.full_gpu_sample(0, util=5.0, used=70 * fx.GiB)
    mark = VerdictMark("input_cpu", "INPUT", "input-bound: CPU", "warn")
    view = gpu_view(idle, compact=True, bar_width=8, verdict=mark)
    line = plain(view.lines[0])
    assert line.rstrip().endswith("INPUT")
    assert "MEM IDLE" not in line


def test_gpu_lines_have_fixed_widths() -> None:
    a = fx.full_gpu_sample(0, util=0.0, used=0)
    b = fx.full_gpu_sample(12, util=100.0, used=80 * fx.GiB, name="x" * 60)
    c = fx.full_gpu_sample(3, util=None, used=None)
    for compact in (True, False):
        widths = {
            len(plain(gpu_view(g, compact=compact, bar_width=10).lines[0])) for g in (a, b, c)
        }
        assert len(widths) == 1, widths


def test_compact_gpu_line_fits_80_columns_with_room_for_history() -> None:
    g = fx.full_gpu_sample(0)
    bw = bar_width_for(80, compact=True)
    line = plain(gpu_view(g, compact=True, bar_width=bw).lines[0])
    assert len(line) <= 67  # a space before each figure (issue 32): 12 columns of history
    assert line.startswith(" 0 H100 80GB HBM3")
    assert "55°C" in line and "300W" in line


def test_wide_gpu_lines_say_everything() -> None:
    g = fx.full_gpu_sample(1, util=80.0, gen=4, width=8, reasons=("sw power cap", "hw thermal"))
    lines = [plain(p) for p in gpu_view(g, compact=False, bar_width=20).lines]
    assert "H100 80GB HBM3" in lines[0]
    assert "40.0GiB/80.0GiB" in lines[0] and "50%" in lines[0] and "80%" in lines[0]
    second = lines[1]
    assert "55°C" in second and "300W/700W" in second and "fan n/a" in second
    assert "PCIe TX 953.7MiB/s 2% RX 2.8GiB/s 5%" in second
    assert "LINK gen4x8<gen5x16" in second
    assert "throttle: SW power cap, HW thermal" in second


def test_pcie_downgrade_only_matters_while_busy() -> None:
    idle = fx.full_gpu_sample(0, util=0.0, gen=1, width=16)
    idle = views_replace_pcie_traffic(idle, 0.0)
    assert pcie_downgrade(idle) is None
    busy = fx.full_gpu_sample(0, util=90.0, gen=3, width=16)
    assert pcie_downgrade(busy) == "LINK gen3x16<gen5x16"
    full = fx.full_gpu_sample(0, util=90.0)
    assert pcie_downgrade(full) is None


def views_replace_pcie_traffic(g, value):  # type: ignore[no-untyped-def]
    from gputop.model import replace

    return replace(g, pcie=replace(g.pcie, tx_bytes_per_s=value, rx_bytes_per_s=value))


def test_lost_gpu_says_lost() -> None:
    lost = fx.full_gpu_sample(2, lost=True)
    for compact in (True, False):
        view = gpu_view(lost, compact=compact, bar_width=8)
        assert view.lost
        assert "LOST" in plain(view.lines[0])
        assert "GPU is lost" in plain(view.lines[0])


def test_none_values_show_na_never_zero() -> None:
    g = fx.full_gpu_sample(0, util=None, used=None)
    line = plain(gpu_view(g, compact=True, bar_width=8).lines[0])
    assert line.count("n/a") == 2
    assert " 0%" not in line


def test_throttle_words() -> None:
    assert throttle_words(None) is None
    assert throttle_words(()) == ""
    # idle clocks are not a throttle (issue 10): an idle GPU shows none
    assert throttle_words(("idle", "sw power cap")) == "SW power cap"
    assert throttle_words(("idle",)) == ""
    assert throttle_words(("something_new",)) == "something new"


def test_header_parts() -> None:
    snap = fx.full_snapshot([fx.full_gpu_sample(0)])
    text = plain(header_view.header_parts(snap, interval=0.5, paused=True, stale=True))
    for word in ("node-1", "550.90.07", "CUDA 12.4", "0.5s", "live", "PAUSED", "STALE", "12ms"):
        assert word in text, word
    host_only = fx.full_snapshot(
        driver=DriverInfo(available=False, error="NVML library not found"), source="host-only"
    )
    text = plain(header_view.header_parts(host_only, interval=1, paused=False, stale=False))
    assert "HOST-ONLY (NVML library not found)" in text
    assert "PAUSED" not in text and "STALE" not in text
    demo = fx.full_snapshot([fx.full_gpu_sample(0)], source="demo")
    text = plain(header_view.header_parts(demo, interval=1, paused=False, stale=False))
    assert "DEMO" in text
    assert "waiting" in plain(header_view.header_parts(None, interval=1, paused=False, stale=False))


def test_host_lines() -> None:
    lines = [plain(p) for p in host_view.host_lines(fx.full_host_sample(), 80, compact=False)]
    text = "\n".join(lines)
    for word in ("CPU  25%", "iowait 2%", "load 1.50 1.25 1.00", "RAM 16.0GiB/64.0GiB 25%"):
        assert word in text, word
    assert "disk R 10.0MiB/s W 2.0MiB/s" in text
    assert "net rx 5.0MiB/s tx 1.0MiB/s" in text
    assert lines[-1] == "cores  ▁▄█▃▆▁█"
    assert plain(host_view.host_lines(None, 80, compact=True)[0]).startswith("host: n/a")


def test_core_cells_wrap_and_say_how_many_are_hidden() -> None:
    rows = core_lines([50.0] * 300, 46, max_rows=2)
    assert len(rows) == 2
    # 2 rows of 40 cells; " +225" takes 5 of them: 75 cells shown, 225 hidden.
    assert plain(rows[1]).endswith("▄ +225")
    assert sum(plain(r).count("▄") for r in rows) == 75
    for row in rows:
        assert len(plain(row)) <= 46


def test_process_rows_cover_invisible_pids_and_unlisted_holders() -> None:
    g0 = fx.full_gpu_sample(
        0, processes=[fx.full_gpu_process(100), fx.full_gpu_process(200, visible=False)]
    )
    holder = UnlistedHolder(pid=300, gpu=0, minor_number=0, user="eve", command="python zombie.py")
    snap = fx.full_snapshot([g0], holders=[holder])
    rows = {r.key: r for r in process_view.process_rows(snap)}
    assert set(rows) == {"0:100", "0:200", "0:300"}
    hidden = rows["0:200"]
    assert hidden.command.startswith("pid not visible")
    assert hidden.user is None and hidden.cpu_percent is None and hidden.elapsed is None
    assert hidden.cell_text("user", compact=False) == "n/a"
    assert hidden.cell_text("mem", compact=False) == "10.0GiB"
    h = rows["0:300"]
    assert h.kind == "holder" and h.type == "-"
    assert h.command == "[holds /dev/nvidia0, not listed by NVML] python zombie.py"
    assert h.cell_text("mem", compact=True) == "n/a"
    assert rows["0:100"].cell_text("time", compact=False) == "10m"  # as the table draws it


def test_process_rows_respect_the_gpu_filter() -> None:
    snap = fx.multi_gpu_snapshot(3)
    rows = process_view.table_rows(process_view.process_rows(snap), gpus=frozenset({1}))
    assert {r.gpu for r in rows} == {1}
    assert len(rows) == 2


def test_untrusted_text_is_cleaned() -> None:
    evil = "\x1b[31mred\x1b[0m [bold red]x[/] \x07bell\u202e"
    snap = fx.full_snapshot(
        [
            fx.full_gpu_sample(
                0, processes=[fx.full_gpu_process(1, command=evil, user="\x1b]0;t\x07bob")]
            )
        ]
    )
    (row,) = process_view.process_rows(snap)
    assert row.command == "red [bold red]x[/] bell"
    assert row.cell_text("user", compact=False) == "bob"


def test_text_filter_matches_command_user_and_pid() -> None:
    snap = fx.multi_gpu_snapshot(2)
    rows = process_view.process_rows(snap)
    assert {r.pid for r in rows if matches(r, "v1")} == {1011}
    assert {r.pid for r in rows if matches(r, "1000")} == {1000}
    assert {r.pid for r in rows if matches(r, "TRAIN")} == {1000, 1001, 1010, 1011}
    assert all(matches(r, "  ") for r in rows)


def test_sort_puts_unknown_last_both_ways() -> None:
    snap = fx.multi_gpu_snapshot(3)
    rows = process_view.process_rows(snap)
    by_sm = [r.pid for r in sort_rows(rows, "sm")]
    assert by_sm == [1000, 1010, 1020, 1001, 1011, 1021]
    by_sm_rev = [r.pid for r in sort_rows(rows, "sm", reverse=True)]
    assert by_sm_rev == [1020, 1010, 1000, 1001, 1011, 1021]
    for key in process_view.SORT_KEYS:
        assert len(sort_rows(rows, key)) == len(rows)


def test_column_widths_are_fixed_and_fill_the_width() -> None:
    for compact, width in ((True, 79), (False, 199)):
        w = column_widths(width, compact)
        cols = process_view.visible_columns(compact)
        assert sum(w.values()) + len(cols) - 1 == width
        assert w["command"] >= MIN_COMMAND_WIDTH
    assert "rss" not in column_widths(79, True)
    assert "rss" in column_widths(199, False)


def test_history_cells_of_each_snapshot() -> None:
    """What the GPU panel's histories are drawn from: one cell per snapshot and GPU; a
    lost or missing GPU is an empty cell, never 0."""
    from gputop.ui.gpu_panel import _NO_POINT, _snapshot_points

    history = [
        fx.full_snapshot([fx.full_gpu_sample(0, util=float(i))], time=fx.FULL_T0 + i)
        for i in range(10)
    ]
    history.append(fx.full_snapshot([fx.full_gpu_sample(0, lost=True)], time=fx.FULL_T0 + 10))
    points = [_snapshot_points(s) for s in history[-4:]]
    util = [p.get(0, _NO_POINT)[0] for p in points]
    mem = [p.get(0, _NO_POINT)[1] for p in points]
    assert util == [level(7.0), level(8.0), level(9.0), level(None)]
    assert mem == [level(50.0)] * 3 + [level(None)]
    assert level(None) != level(0.0)
    assert [p.get(5, _NO_POINT) for p in points] == [(level(None),) * 2] * 4


def test_table_rows_filters_and_sorts() -> None:
    snap = fx.multi_gpu_snapshot(3)
    every = process_view.process_rows(snap)
    rows = process_view.table_rows(
        every, gpus=frozenset({0, 2}), text="u", sort_key="pid", reverse=True
    )
    assert [r.pid for r in rows] == [1020, 1000]


def test_an_unsupported_process_list_is_said_not_shown_as_no_processes() -> None:
    from gputop.model import SampleError, replace
    from gputop.textout import render_text

    snap = fx.multi_gpu_snapshot(2)
    g0, g1 = snap.gpus
    why = "compute list: not supported; graphics list: not supported"
    snap = replace(
        snap,
        gpus=(
            replace(g0, processes=(), processes_unavailable=why),
            replace(g1, processes_unavailable="compute list: no permission"),
        ),
        errors=(SampleError("nvml", "GPU 1: no permission", gpu=1, metric="compute_processes"),),
    )
    notes = ["".join(text for text, _ in line) for line in process_view.process_notes(snap)]
    assert notes == [
        f"! GPU 0: process list unavailable ({why})",
        "! GPU 1: process info not permitted (NVML NoPermission): processes missing from the table",
    ]
    text = render_text(snap)
    assert "  0 (processes unknown: compute list: not supported; graphics list: not" in text
    assert "  1 (processes incomplete: compute list: no permission)" in text
    assert "(no processes)" not in text


def test_exited_and_zombie_processes_say_so_in_the_command_column() -> None:
    from gputop.model import replace

    snap = fx.multi_gpu_snapshot(1)
    (g,) = snap.gpus
    a, b = g.processes[:2]
    assert a.host is not None and b.host is not None
    dead = replace(a, host=replace(a.host, status="dead", command=None, name=None))
    zombie = replace(b, host=replace(b.host, status="zombie", command=None, name="python"))
    snap = replace(snap, gpus=(replace(g, processes=(dead, zombie)),))
    commands = {r.pid: r.command for r in process_view.process_rows(snap)}
    assert commands == {a.pid: "exited", b.pid: "[zombie] python"}
