"""Issue 32 §5: the dashboard's first frame is drawn before its snapshot is judged (the
diagnosis' modules and its first run come after the first paint). That frame shows every
GPU line and process the plain path shows, each GPU's verdict slot "judging" (never an
old or made-up verdict); the next refresh has the verdicts the plain path judges, without
waiting for the sampler's next tick."""

from __future__ import annotations

from typing import Any

import pytest

from gputop.pipeline import NOT_JUDGED_YET, Feed, Frame
from gputop.views.gpu_view import judging_mark
from tests import builders as fx
from tests.helpers.first_frame import FirstFrameProbe as NotingProbe
from tests.ui.test_ui_app import FakeSampler, table_pids


@pytest.fixture(autouse=True)
def _no_animations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


class FirstFrameProbe(NotingProbe):
    """Notes what the first drawn frame shows."""

    def noted(self, frame: Frame) -> dict[str, Any]:
        return {
            "diagnosis": frame.diagnosis,
            "judging": frame.judging,
            "marks": self._verdict_marks(),
            "gpus": sorted(self.gpu_panel.blocks),
            "pids": table_pids(self),
            "texts": [b.text for b in self.gpu_panel.blocks.values()],
        }


def _kinds(feed_frame: Frame) -> dict[int, str]:
    assert feed_frame.diagnosis is not None
    return {i: v.kind for i, v in feed_frame.diagnosis.gpus.items()}


async def test_the_first_frame_is_drawn_judging_and_judged_one_refresh_later() -> None:
    snapshot = fx.demo_snapshots(1)[0]
    plain = Feed().push(snapshot)  # the plain path: judged before it is shown
    sampler = FakeSampler([snapshot])
    app = FirstFrameProbe(sampler)  # type: ignore[arg-type]
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        first = app.at_first_frame
        assert first is not None
        assert first["diagnosis"] is None and first["judging"] == NOT_JUDGED_YET
        every_gpu = [g.index for g in snapshot.gpus]
        assert first["gpus"] == every_gpu
        assert first["marks"] == {i: judging_mark(NOT_JUDGED_YET) for i in every_gpu}
        assert all("judging" in text for text in first["texts"])
        # Every process the plain path shows is on the first frame already.
        assert sorted(first["pids"]) == sorted(table_pids(app)) != []
        # One refresh later, with no tick of the sampler: the verdicts of the plain path.
        assert app.frame is not None and app.frame.snapshot is snapshot
        assert app.judging is None
        assert app.frame.diagnosis is not None
        assert _kinds(app.frame) == _kinds(plain) != {}
        assert plain.diagnosis is not None
        assert [j.id for j in app.frame.diagnosis.jobs] == [j.id for j in plain.diagnosis.jobs]
        marks = app._verdict_marks()
        assert marks is not None and judging_mark(NOT_JUDGED_YET) not in marks.values()
        assert not any("judging" in b.text for b in app.gpu_panel.blocks.values())


def test_a_snapshot_pushed_unjudged_is_judged_with_the_next_push() -> None:
    one, two, three = fx.demo_snapshots(3)
    plain = Feed()
    for s in (one, two):
        plain.push(s)
    expected = plain.push(three)

    feed = Feed()
    first = feed.push(one, judge=False)
    assert first.diagnosis is None and first.judging == NOT_JUDGED_YET
    assert feed.kept == (0, 0)  # nothing judged: no diagnoser yet
    feed.push(two)  # judges one and two
    assert feed.judge() is None  # nothing waits
    got = feed.push(three)
    assert _kinds(got) == _kinds(expected)
    assert feed.kept == plain.kept


def test_judge_hands_the_waiting_snapshot_over_once() -> None:
    one, two = fx.demo_snapshots(2)
    feed = Feed(history=5)
    seen: list[Frame] = []
    feed.subscribers.append(seen.append)
    feed.push(one, judge=False, publish=False)
    feed.push(two, judge=False, publish=False)
    judged = feed.judge()
    assert judged is not None and judged.snapshot is two and judged.history == (one, two)
    assert judged.diagnosis is not None and judged.diagnosis.snapshot is two
    assert seen == [judged]
    assert feed.judge() is None and seen == [judged]
    plain = Feed()
    plain.push(one)
    assert _kinds(judged) == _kinds(plain.push(two))


def test_the_clock_going_back_drops_what_waits() -> None:
    one, two = fx.demo_snapshots(2)
    feed = Feed()
    feed.push(two, judge=False)
    frame = feed.push(one)  # earlier: a new stream; ``two`` is not judged into it
    assert frame.diagnosis is not None and frame.history == (one,)
    assert feed.kept[0] == 1
