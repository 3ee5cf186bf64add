"""The fleet screen in Pilot, fed by demo host views (tests/helpers/fleet.py)."""

from __future__ import annotations

import os

import pytest
from textual.widgets import Static

from gputop.ui.fleet import FleetApp
from gputop.ui.lines import PartsLines
from tests.helpers.fleet import demo_fleet

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")


def hosts_text(app: FleetApp) -> str:
    return app.fleet_screen.query_one("#fleet-hosts", PartsLines).text


def shown_names(app: FleetApp) -> list[str]:
    """The hosts on the fleet screen, in order."""
    return [r.name for r in app.fleet_screen.shown]


def summary_text(app: FleetApp) -> str:
    return app.fleet_screen.query_one("#fleet-summary", PartsLines).text


@pytest.mark.parametrize("size, count", [((80, 24), 8), ((200, 50), 40)])
async def test_every_host_fits(size: tuple[int, int], count: int) -> None:
    names = [f"gpu-{i:02d}" for i in range(count)]
    fleet, _ = demo_fleet(names, ticks=8)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = hosts_text(app)
        assert all(n in text for n in names)
        scroll = app.fleet_screen.query_one("#fleet-scroll")
        lines = text.count("\n") + 1
        assert lines <= scroll.size.height, (lines, scroll.size.height)
        assert all(len(line) <= size[0] for line in text.splitlines())
        assert "GPUs " in summary_text(app) and f"hosts {count}" in summary_text(app)
        assert "busy" in summary_text(app) and "idle-holding" in summary_text(app)


async def test_states_sort_filter_and_summary() -> None:
    names = ["a-node", "b-node", "c-node", "d-node"]
    fleet, _ = demo_fleet(names[:2], ticks=30)
    fleet.names = names
    fleet._views.update({n: type(fleet._views["a-node"])(n) for n in names[2:]})
    fleet.fail("c-node", "ssh: connect to host c-node port 22: Connection refused")
    fleet.fail("d-node", "gputop not found; install it", problem="no-gputop")
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = hosts_text(app)
        assert "unreachable" in text and "Connection refused" in text
        assert "no gputop" in text and "install" in text
        assert "hosts 4: live 2" in summary_text(app)
        assert shown_names(app) == names  # sorted by host
        await pilot.press("s")  # worst verdict first: the hosts that cannot answer
        assert set(shown_names(app)[:2]) == {"c-node", "d-node"}
        await pilot.press("s")  # idle memory
        assert app.fleet_screen.sort_key == "idle"
        await pilot.press("slash")
        await pilot.press(*"carol")
        assert set(shown_names(app)) == {"a-node", "b-node"}  # demo hosts run carol's jobs
        await pilot.press("enter", "escape")
        assert len(shown_names(app)) == 4  # Esc cleared the filter
        await pilot.press("slash", *"b-no", "enter")
        assert shown_names(app) == ["b-node"]


async def test_enter_opens_a_read_only_dashboard_and_esc_comes_back() -> None:
    fleet, datas = demo_fleet(["h1", "h2"], ticks=30)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.host == "h2"
        assert app.screen is not app.fleet_screen
        assert app.snapshot is not None and len(app.snapshot.gpus) == 8
        header = app.header.text
        assert "h2" in header and "Esc" in header
        # The GPU lines carry the host's own verdicts.
        assert app.verdicts and app.verdicts[0].word  # type: ignore[union-attr]
        # New lines of that host go on feeding it.
        fleet.feed("h2", datas["h2"][-1] | {"time": datas["h2"][-1]["time"] + 1})
        await pilot.pause()
        assert len(app.history) == 2
        await pilot.press("3")  # 0-9 keep their meaning: one GPU
        assert app.shown_gpus == frozenset({3})
        await pilot.press("k")  # nothing remote is ever signalled
        await pilot.pause()
        assert any("read-only" in str(n.message) for n in app._notifications)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.fleet_screen
        assert app.host is None
        await pilot.press("enter")  # h2 is still selected
        assert app.host == "h2" and app.shown_gpus is None  # a fresh view of the host


async def test_a_stale_host_dims_and_says_its_age() -> None:
    fleet, datas = demo_fleet(["h1"], ticks=10)
    fleet.feed("h1", datas["h1"][-1], age=25.0)
    received = fleet.view("h1").received
    assert received is not None
    # The app's clock stands still 25.2 s after the line: the age cannot drift with how
    # long the app takes to start on a loaded machine (it read "stale 26s" under load).
    app = FleetApp(fleet, clock=lambda: received + 25.2)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "stale 25s" in hosts_text(app)
        assert "live 0" not in summary_text(app)


@pytest.mark.parametrize("moment", ["shutdown-begins", "widgets-gone"])
async def test_nothing_is_drawn_once_shutdown_begins(moment: str) -> None:
    """Deterministic: the streams' FleetChanged (or the 1 s timer) arrives at an exact
    moment of run_test's teardown (``_shutdown()`` without ``exit()``). It used to draw
    into removed widgets: NoMatches '#fleet-header', about 1 full run in 5 under load.
    Frames are counted from the moment shutdown begins (its first prune): a draw before
    it is allowed, and under load the timer drew one between the pause and the teardown
    (3 frames vs 2). That draw is made here on purpose, as is a prune before shutdown
    (a widget removed), which must not count as the start of it."""
    from gputop.ui.fleet import FleetChanged

    fleet, _ = demo_fleet(["a-node", "b-node"], ticks=8)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    fed: list[str] = []
    at_shutdown: list[int] = []  # frames drawn when shutdown began
    running_prunes: list[int] = []
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        real_prune = app._prune

        async def prune(*nodes: object, parent: object = None) -> None:
            if not app.closing:  # a widget removed while running: not the teardown
                running_prunes.append(1)
                await real_prune(*nodes, parent=parent)  # type: ignore[arg-type]
                return
            if not at_shutdown:
                at_shutdown.append(app.fleet_screen.frames)
            if moment == "shutdown-begins" and not fed:  # the first prune only
                fed.append(moment)
                app.on_fleet_changed(FleetChanged())
            await real_prune(*nodes, parent=parent)  # type: ignore[arg-type]
            if moment == "widgets-gone" and not fed:
                fed.append(moment)
                app.on_fleet_changed(FleetChanged())

        app._prune = prune  # type: ignore[method-assign,assignment]
        before = app.fleet_screen.frames
        gone = Static("removed before shutdown")
        await app.screen.mount(gone)
        await gone.remove()
        assert running_prunes
        app.refresh_fleet()  # the 1 s timer's draw, just before the teardown
        assert app.fleet_screen.frames == before + 1
    assert fed and at_shutdown and app.return_code in (0, None)
    assert app.fleet_screen.frames == at_shutdown[0]


async def test_a_source_with_history_fills_the_opened_dashboard() -> None:
    """Over Prometheus, Enter reads the host's recent minutes (query_range) on a worker
    thread; they go before the lines already received."""
    fleet, datas = demo_fleet(["p1"], ticks=20)
    asked: list[str] = []

    def history(host: str, seconds: float = 600.0) -> list[dict[str, object]]:
        asked.append(host)
        return list(datas[host][:-1])

    fleet.history = history  # type: ignore[attr-defined]
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        for _ in range(200):
            if len(app.history) == 20:
                break
            await pilot.pause(0.05)
        assert asked == ["p1"]
        assert len(app.history) == 20
        assert [s.time for s in app.history] == sorted(s.time for s in app.history)


async def test_help_lists_the_fleet_keys_and_states() -> None:
    from gputop.ui.screens.help import HelpScreen

    fleet, _ = demo_fleet(["h1"], ticks=6)
    app = FleetApp(fleet)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.fleet_screen


def test_the_filter_matches_a_hosts_pods_and_slurm_jobs() -> None:
    from gputop.present import to_json_dict
    from gputop.sources.remote import summarize
    from gputop.sources.streams import HostView
    from gputop.views import fleet_views as fv
    from tests.builders import demo_snapshots, with_owners

    owned = to_json_dict(with_owners(demo_snapshots(2)[-1]))
    plain = to_json_dict(demo_snapshots(2)[-1])
    hosts = [
        HostView("owned", report=summarize(owned), data=owned),
        HostView("plain", report=summarize(plain), data=plain),
        HostView("odd", report=summarize(plain), data={**plain, "processes": [{"owner": 7}]}),
    ]
    rows = fv.rows(hosts, now=0.0, interval=1.0)

    def shown(text: str) -> list[str]:
        return [r.name for r in rows if fv.matches(r, text)]

    assert shown("ml-research/llama") == ["owned"]  # ns/pod as the table shows it
    assert shown("resnet-ddp") == ["owned"] and shown("81234") == ["owned"]
    assert shown("llama13b-ft") == ["owned"]  # the Slurm job's name
    assert shown("carol") == ["owned", "plain", "odd"]  # users still match
