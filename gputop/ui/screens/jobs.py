"""The jobs view (key j): a tree job -> GPU processes -> DataLoader workers, and the
selected job in full. Untrusted text goes into ``rich.text.Text``, never markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from gputop import fmt
from gputop.analysis.jobs import Job, process_index
from gputop.cells import fit
from gputop.diagnosis import Diagnosis
from gputop.model import GpuProcess, ProcessInfo, Snapshot, Verdict
from gputop.sources.owners import owner_detail, owner_label
from gputop.ui.keybar import KeyBar
from gputop.ui.roles import rich_styles
from gputop.views.gpu_view import verdict_mark, verdict_parts
from gputop.views.parts import STATUS_WORDS, Part, Parts, gpu_ranges, safe
from gputop.views.probe_view import job_probe_cell, job_probe_parts, probe_cell
from gputop.views.process_view import INVISIBLE, Column

#: From this width the job lines carry every number and the verdict's full label.
WIDE_WIDTH = 150
#: Below either, GPU processes start folded (their workers one Space away).
FOLD_WIDTH = 100
FOLD_HEIGHT = 30


JOB_COLUMNS: tuple[Column, ...] = (
    Column("verdict", "VERDICT", 25, 8),
    Column("user", "USER", 10, 8),
    Column("gpus", "GPUS", 8, 5),
    Column("mem", "GPU-MEM", 9, 8, right=True),
    Column("cpu", "CPU%", 7, 6, right=True),
    Column("cores", "CORES", 5, 0, right=True),
    Column("main", "MAIN%", 6, 0, right=True),
    Column("workers", "W", 0, 3, right=True),
    Column("workers_wide", "WORKERS", 7, 0, right=True),
    Column("rss", "RSS", 8, 0, right=True),
    Column("read", "READ/s", 10, 0, right=True),
    Column("dstate", "D", 3, 0, right=True),
    Column("probe", "PROBE", 24, 15),  # only when a job runs gputop's probe
    Column("age", "AGE", 9, 8, right=True),
)

TREE_ICON = 2  # "▼ " before a node that can fold
GUIDE = 4  # Tree's guide_depth: cells of indentation per level
MIN_COMMAND = 8


def _cpu(value: float | None) -> str:
    return fmt.number(value, digits=1)


def _cores(value: float | None) -> str:
    return fmt.NA if value is None else f"{value / 100.0:.1f}"


def job_command(job: Job) -> str:
    """The root's command, after its owner (``[pod ns/name]``) when it has one."""
    if job.visible is False:
        return INVISIBLE
    command = safe(job.command or job.name, 2048)
    label = owner_label(job.owner)
    return command if label is None else f"[{safe(label, 256)}] {command}"


def job_cells(job: Job) -> dict[str, str]:
    return {
        "user": safe(job.user, 64),
        "gpus": gpu_ranges(job.gpus),
        "mem": fmt.bytes_(job.gpu_memory),
        "cpu": _cpu(job.cpu_percent),
        "cores": _cores(job.cpu_percent),
        "main": _cpu(job.main_cpu_percent),
        "workers": str(job.workers),
        "workers_wide": str(job.workers),
        "rss": fmt.bytes_(job.rss),
        "read": fmt.rate(job.read_bytes_per_s),
        "dstate": fmt.number(job.disk_sleep),
        "age": fmt.duration(job.age),
        "probe": job_probe_cell(job.probe, compact=False),
        "probe_compact": job_probe_cell(job.probe, compact=True),
    }


def _columns(width: int, probes: bool = False) -> list[tuple[Column, int]]:
    """``probes``: a job has a probe (else PROBE would be an empty column)."""
    compact = width < WIDE_WIDTH
    return [
        (c, c.width(compact))
        for c in JOB_COLUMNS
        if c.width(compact) and (probes or c.key != "probe")
    ]


def job_header(width: int, probes: bool = False) -> str:
    cells = [fit(c.label, w, c.align) for c, w in _columns(width, probes)]
    return " " * TREE_ICON + " ".join(cells) + " COMMAND"


def job_parts(job: Job, verdict: Verdict | None, width: int, probes: bool = False) -> Parts:
    values = job_cells(job)
    if width < WIDE_WIDTH:
        values["probe"] = values["probe_compact"]
    mark = None if verdict is None else verdict_mark(verdict)
    parts: list[Part] = []
    for col, w in _columns(width, probes):
        if col.key != "verdict":
            parts.append((fit(values[col.key], w, col.align), ""))
        elif mark is None:
            parts.append((fit(fmt.NA, w), "dim"))
        else:
            parts.append((fit(mark.text(w), w), mark.role))
        parts.append((" ", ""))
    used = TREE_ICON + sum(len(t) for t, _ in parts)
    room = max(MIN_COMMAND, width - used - 2)
    parts.append((fit(job_command(job), room), "dim" if job.visible is False else ""))
    return tuple(parts)


def _status(info: ProcessInfo | None) -> tuple[str, str]:
    status = None if info is None else info.status
    if status is None:
        return fmt.NA, "dim"
    if status in ("disk-sleep", "zombie"):
        return ("D " if status == "disk-sleep" else "") + status, "warn"
    return safe(STATUS_WORDS.get(status, status), 16), ""


def _proc_command(info: ProcessInfo | None) -> tuple[str, str]:
    if info is not None and not info.visible:
        return INVISIBLE, "dim"
    if info is None or not (info.command or info.name):
        return fmt.NA, "dim"
    return safe(info.command or info.name, 2048), ""


def _process_parts(head: str, info: ProcessInfo | None, room: int) -> Parts:
    status, status_role = _status(info)
    command, command_role = _proc_command(info)
    head += f"CPU {fit(_cpu(None if info is None else info.cpu_percent), 6, '>')} "
    status_cell = fit(status, 12) + " "
    rest = max(MIN_COMMAND, room - len(head) - len(status_cell))
    return ((head, ""), (status_cell, status_role), (fit(command, rest), command_role))


def gpu_proc_parts(
    gpu: int, proc: GpuProcess | None, pid: int, info: ProcessInfo | None, room: int
) -> Parts:
    mem = fmt.bytes_(None if proc is None else proc.gpu_memory)
    sm = fmt.percent(None if proc is None else proc.sm_percent)
    head = f"GPU {gpu} pid {pid:<8} mem {fit(mem, 8, '>')} SM {fit(sm, 4, '>')} "
    probe = None if info is None else info.probe
    if probe is not None:  # each rank's own figures: the straggler stands out
        head += probe_cell(probe.data_wait_ratio, probe.step_seconds, compact=False) + " "
    return _process_parts(head, info, room)


def worker_parts(pid: int, info: ProcessInfo | None, room: int) -> Parts:
    return _process_parts(f"worker pid {pid:<8} ", info, room)


@dataclass(frozen=True, slots=True)
class Entry:
    """One tree node to show: a stable key, its line, its children."""

    key: str  # "job:<id>", "gpu:<id>:<gpu>:<pid>", "worker:<id>:<pid>"
    job_id: str
    parts: Parts
    children: tuple[Entry, ...] = ()
    expanded: bool = True  # when the node is first shown; the user's folds are kept after


def _parent_main(pid: int, mains: set[int], index: Mapping[int, ProcessInfo]) -> int | None:
    seen = {pid}
    info = index.get(pid)
    while info is not None and info.ppid is not None and info.ppid not in seen:
        if info.ppid in mains:
            return info.ppid
        seen.add(info.ppid)
        info = index.get(info.ppid)
    return None


def job_entries(
    jobs: Sequence[Job],
    verdicts: Mapping[str, Verdict],
    snapshot: Snapshot,
    width: int,
    *,
    fold_workers: bool = False,
) -> tuple[Entry, ...]:
    """The whole tree in the jobs' order; ``fold_workers``: GPU processes start folded."""
    index = process_index(snapshot)
    gpu_procs = {(g.index, p.pid): p for g in snapshot.gpus for p in g.processes}
    out: list[Entry] = []
    room1 = width - TREE_ICON - GUIDE - 2  # a GPU process line (one level down)
    room2 = width - GUIDE * 2 - 2  # a worker line (two levels down, no fold icon)
    probes = any(job.probe is not None for job in jobs)
    for job in jobs:
        mains = set(job.main_pids)
        workers_of: dict[int, list[int]] = {}
        for pid in job.worker_pids:
            parent = _parent_main(pid, mains, index)
            if parent is None and job.main_pids:
                parent = job.main_pids[0]
            if parent is not None:
                workers_of.setdefault(parent, []).append(pid)
        children: list[Entry] = []
        for gpu, pid in job.gpu_pids:
            workers = tuple(  # popped: a process on two GPUs has its workers under the first
                Entry(f"worker:{job.id}:{w}", job.id, worker_parts(w, index.get(w), room2))
                for w in workers_of.pop(pid, ())
            )
            line = gpu_proc_parts(gpu, gpu_procs.get((gpu, pid)), pid, index.get(pid), room1)
            key = f"gpu:{job.id}:{gpu}:{pid}"
            children.append(Entry(key, job.id, line, workers, expanded=not fold_workers))
        line = job_parts(job, verdicts.get(job.id), width, probes)
        out.append(Entry(f"job:{job.id}", job.id, line, tuple(children)))
    return tuple(out)


def job_facts(job: Job) -> str:
    return (
        f"GPU{'s' if len(job.gpus) != 1 else ''} {gpu_ranges(job.gpus)} · "
        f"GPU memory {fmt.bytes_(job.gpu_memory)} · "
        f"CPU {fmt.percent(job.cpu_percent, 1)} ({_cores(job.cpu_percent)} cores), "
        f"main {fmt.percent(job.main_cpu_percent, 1)} · "
        f"{job.workers} worker{'s' if job.workers != 1 else ''} · RSS {fmt.bytes_(job.rss)} · "
        f"read {fmt.rate(job.read_bytes_per_s)} · in D state {fmt.number(job.disk_sleep)} · "
        f"age {fmt.duration(job.age)}"
    )


def job_detail_parts(
    job: Job, verdict: Verdict | None, width: int | None = None
) -> tuple[Parts, ...]:
    """The selected job in full; with ``width`` the command line is cut to one line (the
    rest always wraps in full)."""
    head = f"job {job.root_pid}"
    middle = f" · {safe(job.user, 64)} · "
    command = job_command(job)
    if width is not None:
        command = fit(command, max(MIN_COMMAND, width - len(head) - len(middle)))
    lines: list[Parts] = [
        ((head, "title"), (middle, ""), (command, "dim" if job.visible is False else "")),
        ((job_facts(job), ""),),
    ]
    owner = owner_detail(job.owner)
    if owner is not None:
        lines.append((("owner: ", "label"), (safe(owner, 512), "")))
    lines += job_probe_parts(job.probe)
    if verdict is None:
        lines.append((("verdict: ", "label"), (f"{fmt.NA} (no verdict for this job)", "dim")))
    else:
        lines += verdict_parts(verdict)
    return tuple(lines)


def to_text(lines: Sequence[Parts], styles: Mapping[str, Style]) -> Text:
    """Parts -> one rich Text, never parsed as markup."""
    text = Text(no_wrap=False)
    for i, parts in enumerate(lines):
        if i:
            text.append("\n")
        for chunk, role in parts:
            text.append(chunk, styles.get(role) or None)
    return text


class JobTree(Tree[str]):
    DEFAULT_CSS = "JobTree { height: 1fr; width: 1fr; scrollbar-size-vertical: 1; }"

    # Enter selects the node, which opens its job in detail (JobsScreen): said in the footer.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Job detail", key_display="Enter"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("jobs", id=id)
        self.show_root = False
        self.guide_depth = GUIDE
        self.auto_expand = False  # Enter does not fold; Space does
        self._styles: Mapping[str, Style] | None = None
        self.nodes_by_key: dict[str, TreeNode[str]] = {}
        self.entries: dict[str, Entry] = {}  # node key -> what the node shows

    def reconcile(self, entries: Sequence[Entry], styles: Mapping[str, Style]) -> None:
        """Show ``entries``, keeping known nodes (so the cursor and folds stay)."""
        cursor = self.cursor_node
        cursor_key = None if cursor is None else cursor.data
        cursor_parents = []
        node = cursor
        while node is not None and node.data is not None:
            cursor_parents.append(node.data)
            node = node.parent
        restyle = styles is not self._styles
        self._styles = styles
        self._reconcile(self.root, entries, styles, restyle)
        self.last_line  # noqa: B018 -- rebuilds the lines, so nodes know their line numbers
        if cursor_key is not None and cursor_key not in self.nodes_by_key:
            # The selected process ended: the nearest remaining ancestor, else the first job.
            target = next(
                (self.nodes_by_key[k] for k in cursor_parents if k in self.nodes_by_key), None
            )
            if target is None and self.root.children:
                target = self.root.children[0]
            self.move_cursor(target)
        elif cursor is None and self.root.children:
            self.move_cursor(self.root.children[0])

    def _reconcile(
        self,
        parent: TreeNode[str],
        entries: Sequence[Entry],
        styles: Mapping[str, Style],
        restyle: bool,
    ) -> None:
        wanted = {e.key for e in entries}
        existing = {child.data: child for child in parent.children if child.data is not None}
        for key, child in existing.items():
            if key not in wanted:
                self._forget(child)
                child.remove()
        previous: TreeNode[str] | None = None
        for entry in entries:
            node = existing.get(entry.key)
            if node is None or entry.key not in self.nodes_by_key:
                label = to_text((entry.parts,), styles)
                if previous is None:
                    node = parent.add(label, entry.key, before=0, expand=entry.expanded)
                else:
                    node = parent.add(label, entry.key, after=previous, expand=entry.expanded)
                self.nodes_by_key[entry.key] = node
            elif restyle or self.entries[entry.key].parts != entry.parts:
                node.set_label(to_text((entry.parts,), styles))
            self.entries[entry.key] = entry
            node.allow_expand = bool(entry.children)
            self._reconcile(node, entry.children, styles, restyle)
            previous = node

    def _forget(self, node: TreeNode[str]) -> None:
        for child in node.children:
            self._forget(child)
        if node.data is not None:
            self.nodes_by_key.pop(node.data, None)
            self.entries.pop(node.data, None)

    def select_key(self, key: str) -> bool:
        node = self.nodes_by_key.get(key)
        if node is None:
            return False
        self.last_line  # noqa: B018 -- node line numbers up to date
        self.move_cursor(node)
        return True

    @property
    def cursor_key(self) -> str | None:
        node = self.cursor_node
        return None if node is None else node.data


class JobsScreen(Screen[None]):
    """Esc, j or q returns."""

    DEFAULT_CSS = """
    JobsScreen #jobs-title, JobsScreen #jobs-header {
        height: 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    JobsScreen #jobs-title { padding: 0 1; background: $panel; }
    JobsScreen #jobs-header { text-style: bold; }
    JobsScreen #jobs-detail {
        height: auto; max-height: 60%; overflow-y: auto;
        border-top: hkey $primary-muted; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="Esc"),
        Binding("j,q", "close", "Back", show=False),
        Binding("space", "fold", "Fold", key_display="Space"),
    ]

    AUTO_FOCUS = "#jobs-tree"

    def __init__(
        self,
        diagnose: Callable[[], Diagnosis | None],
        *,
        select_pid: int | None = None,
        judging: Callable[[], str | None] | None = None,
        open_job: Callable[[str], None] | None = None,
    ) -> None:
        """``open_job``: shows a job (by id) in detail (the app's: the detail screen
        imports this module)."""
        super().__init__()
        self._diagnose = diagnose
        self._open_job = open_job
        # A replay reading its look-back: why there are no jobs and verdicts yet.
        self._judging_text = judging or (lambda: None)
        self._select_pid = select_pid
        self._shown: Diagnosis | None = None
        self._width = 0
        self._styles: dict[str, Style] = {}
        self._theme: object = None
        self.updates = 0  # how often the tree was reconciled (tests)

    def compose(self) -> ComposeResult:
        yield Static(id="jobs-title")
        yield Static(id="jobs-header")
        yield JobTree(id="jobs-tree")
        yield Static(id="jobs-detail")
        yield KeyBar()

    @property
    def job_tree(self) -> JobTree:
        return self.query_one("#jobs-tree", JobTree)

    def on_mount(self) -> None:
        self._refresh(force=True)
        pid, diagnosis = self._select_pid, self._shown
        if pid is not None and diagnosis is not None:
            job = next((j for j in diagnosis.jobs if pid in j.pids), None)
            if job is not None:
                self.job_tree.select_key(f"job:{job.id}")
        self._show_detail()

    def on_resize(self, event: events.Resize) -> None:
        if self._width and event.size.width != self._width:
            self._refresh(force=True)

    def update_history(self, history: Sequence[Snapshot]) -> None:
        """Called by the app with each new frame while this screen is on top, which it is
        from its push: a frame can come before its widgets exist (the first frame's
        completion runs on the main screen's task, and a `j` pressed right after the first
        paint can push this screen before it). on_mount then shows the newest diagnosis."""
        if self.is_mounted:
            self._refresh()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_fold(self) -> None:
        self.job_tree.action_toggle_node()

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        self._show_detail()

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        self.action_job_detail()  # the tree has Enter: selecting a node opens its job

    def action_job_detail(self) -> None:
        """The selected job (or the job of the selected process) in detail, with charts."""
        job = self.selected_job()
        if job is not None and self._open_job is not None:
            self._open_job(job.id)

    def _style_map(self) -> dict[str, Style]:
        theme = self.app.theme
        if theme != self._theme or not self._styles:
            self._theme = theme
            self._styles = rich_styles(self.app.theme_variables)
        return self._styles

    def _refresh(self, force: bool = False) -> None:
        diagnosis = self._diagnose()
        size = self.size if self.size.width else self.app.size
        width = size.width
        if not force and diagnosis is self._shown and width == self._width:
            return
        self._shown = diagnosis
        self._width = width
        styles = self._style_map()
        title = self.query_one("#jobs-title", Static)
        header = self.query_one("#jobs-header", Static)
        if diagnosis is None:
            waiting = self._judging_text() or "waiting for the first sample"
            title.update(Text(f"Jobs · {waiting} · Esc back"))
            header.update("")
            self.job_tree.reconcile((), styles)
            self._show_detail()
            return
        jobs = diagnosis.jobs
        ngpus = len({g for j in jobs for g in j.gpus})
        title_parts: Parts = (
            ("Jobs", "title"),
            (f" · {len(jobs)} job{'s' if len(jobs) != 1 else ''}", ""),
            (f" on {ngpus} GPU{'s' if ngpus != 1 else ''}", ""),
            (" · Space folds · Esc back", "dim"),
        )
        title.update(to_text((title_parts,), styles))
        header.update(Text(job_header(width, any(j.probe is not None for j in jobs))))
        fold = size.width < FOLD_WIDTH or size.height < FOLD_HEIGHT
        verdicts, snap = diagnosis.job_verdicts, diagnosis.snapshot
        self.job_tree.reconcile(job_entries(jobs, verdicts, snap, width, fold_workers=fold), styles)
        self.updates += 1
        self._show_detail()

    def selected_job(self) -> Job | None:
        diagnosis = self._shown
        entry = self.job_tree.entries.get(self.job_tree.cursor_key or "")
        if diagnosis is None or entry is None:
            return None
        return diagnosis.job(entry.job_id)

    def _show_detail(self) -> None:
        box = self.query_one("#jobs-detail", Static)
        styles = self._style_map()
        diagnosis = self._shown
        if diagnosis is None or not diagnosis.jobs:
            why = (
                (self._judging_text() or "no sample yet")
                if diagnosis is None
                else "no GPU data (host-only)"
                if not diagnosis.snapshot.driver.available
                else "no process is using a GPU"
            )
            box.update(to_text(((("No jobs: ", "label"), (why, "")),), styles))
            return
        job = self.selected_job()
        if job is None:
            box.update(to_text(((("Select a job to see its verdict", "dim"),),), styles))
            return
        width = max(MIN_COMMAND, box.content_size.width or self.size.width - 2)
        lines = list(job_detail_parts(job, diagnosis.job_verdicts.get(job.id), width))
        key = self.job_tree.cursor_key
        if key is not None and not key.startswith("job:"):  # a process: its command in full
            pid = int(key.rsplit(":", 1)[1])
            head = f"{'GPU process' if key.startswith('gpu:') else 'worker'} {pid}: "
            command, role = _proc_command(process_index(diagnosis.snapshot).get(pid))
            command = fit(command, max(MIN_COMMAND, width - len(head)))
            lines.insert(1, ((head, "label"), (command, role)))
        box.update(to_text(lines, styles))
