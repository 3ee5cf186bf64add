"""The probe reader (issue 31, sections 2 and 5): a probe file counts only where it is a
regular file of the process's user (or root) in that user's directory, of the live process
(pid and start time), fresh and with values the model accepts. Every other file is ignored
and said in the errors (source "probe"), with no traceback, no fd left open and bounded
memory. Real processes, real files; the unprivileged side through ``runuser -u nobody``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import gputop.probefile as probefile
from gputop.model import LIMITS, CudaMemory, Probe, ProcessInfo, SampleError, replace, within
from gputop.sources import probes as probes_module
from gputop.sources import procfs
from gputop.sources.probes import OTHERS_CLOSED, ProbeReader
from tests.conftest import require_root, require_tool
from tests.helpers.fuzz import SEED
from tests.helpers.probe_files import contents, make_dir, write

NOBODY = 65534
#: A Python nobody can run (the test's own may live in root's home).
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


@contextlib.contextmanager
def process(*prefix: str) -> Iterator[int]:
    """A real process (``sleep``; ``prefix``: e.g. runuser as nobody), killed at the end."""
    proc = subprocess.Popen([*prefix, "sleep", "600"], start_new_session=True)
    try:
        pid = proc.pid
        if prefix:  # runuser's child is the sleep: wait for it to be there
            for _ in range(500):
                kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                # runuser's child forks as root, then drops to nobody and runs sleep
                if kids and procfs.read_real_uid(int(kids[0])) != 0:
                    pid = int(kids[0])
                    break
                time.sleep(0.01)  # polling for a child to exist, not synchronising on time
            else:
                raise RuntimeError("runuser started no child")
        yield pid
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=10)


@pytest.fixture
def me() -> Iterator[int]:
    with process() as pid:
        yield pid


class Dirs:
    """A per-test stand-in for ``probefile.dirs_of``: ``base/run-UID``, ``base/tmp-UID``."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def __call__(self, uid: int) -> tuple[str, ...]:
        return (str(self.base / f"run-{uid}"), str(self.base / f"tmp-{uid}"))

    def tmp(self, uid: int, mode: int = 0o700) -> Path:
        path = make_dir(self.base / f"tmp-{uid}", mode)
        os.chown(path, uid, uid)
        return path


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    """Under /tmp itself: pytest's tmp_path is in a directory (0700) nobody cannot reach."""
    base = Path(tempfile.mkdtemp(prefix="gputop-probe-test-"))
    os.chmod(base, 0o755)
    try:
        yield Dirs(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def reader(dirs: Dirs, **kw: Any) -> ProbeReader:
    kw.setdefault("own_dir", str(dirs.base / "own"))
    return ProbeReader(dirs_of=dirs, **kw)


def row(pid: int) -> ProcessInfo:
    return ProcessInfo(pid=pid, create_time=1.0, status="sleeping")


def probe_errors(r: ProbeReader) -> list[str]:
    assert all(isinstance(e, SampleError) and e.source == "probe" for e in r.errors)
    return [e.message for e in r.errors]


def read_one(r: ProbeReader, pid: int) -> Probe | None:
    (out,) = r.attach([row(pid)])
    return out.probe


def refused(r: ProbeReader, pid: int, *words: str) -> str:
    """The tick's one error for ``pid``'s file, which says ``words``; no probe attached."""
    assert read_one(r, pid) is None
    said = probe_errors(r)
    assert len(said) == 1, said
    assert "ignored" in said[0] and all(w in said[0] for w in words), said[0]
    return said[0]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# --- what counts -------------------------------------------------------------------------


def test_a_valid_file_attaches_the_probe(dirs: Dirs, me: int) -> None:
    uid = os.geteuid()
    write(dirs.tmp(uid), me)
    r = reader(dirs)
    probe = read_one(r, me)
    assert r.errors == ()
    assert probe is not None
    assert (probe.data_wait_ratio, probe.step_seconds, probe.steps) == (0.42, 0.31, 64)
    assert probe.memory == (CudaMemory(0, 1 << 30, 3 << 30, 2 << 30),)


def test_without_any_directory_nothing_is_said_and_the_row_is_the_same(dirs: Dirs, me: int) -> None:
    r = reader(dirs)
    given = row(me)
    (out,) = r.attach([given])
    assert out is given and r.errors == ()


def test_the_own_directory_is_read_for_gputops_own_user(dirs: Dirs, me: int) -> None:
    """``$GPUTOP_PROBE_DIR`` / ``$XDG_RUNTIME_DIR``: a user's own gputop finds its probes."""
    own = make_dir(dirs.base / "own")
    write(own, me)
    assert read_one(reader(dirs), me) is not None
    assert read_one(reader(dirs, own_uid=NOBODY), me) is None  # not gputop's user: not there


def test_the_row_is_shared_while_the_probe_is_unchanged(dirs: Dirs, me: int) -> None:
    write(dirs.tmp(os.geteuid()), me)
    r = reader(dirs)
    given = row(me)
    (first,) = r.attach([given])
    (second,) = r.attach([given])
    assert first.probe is not None and second is first


def test_an_unchanged_file_is_parsed_once(
    dirs: Dirs, me: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = probes_module.parse

    def counted(data: bytes) -> Any:
        calls.append(1)
        return real(data)

    monkeypatch.setattr(probes_module, "parse", counted)
    d = dirs.tmp(os.geteuid())
    write(d, me)
    r = reader(dirs)
    for _ in range(5):
        assert read_one(r, me) is not None
    assert len(calls) == 1
    write(d, me, contents(me, data_wait_ratio=0.5))
    probe = read_one(r, me)
    assert len(calls) == 2 and probe is not None and probe.data_wait_ratio == 0.5


def test_a_processs_uid_is_read_once_and_again_when_its_user_changes(
    dirs: Dirs, me: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cheap per tick (a look-up per row), yet right after a setuid: the host source's user
    of the row changes, and the uid is read again."""
    calls = []
    real = procfs.read_real_uid

    def counted(pid: int, proc_root: str = procfs.PROC_ROOT) -> int | None:
        calls.append(pid)
        return real(pid, proc_root)

    monkeypatch.setattr(procfs, "read_real_uid", counted)
    r = reader(dirs)
    for _ in range(5):
        r.attach([replace(row(me), user="root")])
    assert calls == [me]
    r.attach([replace(row(me), user="nobody")])
    assert calls == [me, me]


def test_a_crowded_directory_is_read_by_name_past_its_limit(
    dirs: Dirs, me: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of killed processes pile up (or a user fills the directory): past
    MAX_ENTRIES entries the shown processes' files are opened by name, with the same
    result and no error."""
    monkeypatch.setattr(probes_module, "MAX_ENTRIES", 10)
    d = dirs.tmp(os.geteuid())
    for i in range(30):
        (d / f"probe-{4_000_000 + i}.json").write_text("{}")
    write(d, me)
    looked = []
    real = probefile.pid_of

    def counted(name: str) -> int | None:
        looked.append(name)
        return real(name)

    monkeypatch.setattr(probefile, "pid_of", counted)
    r = reader(dirs)
    assert read_one(r, me) is not None and r.errors == ()
    assert len(looked) == 10  # the listing stopped at the limit
    (d / f"probe-{me}.json").unlink()
    write(d, me, "[")
    refused(r, me, "not JSON")


# --- hostile files (section 5) -----------------------------------------------------------


def test_a_symlink_is_never_followed(dirs: Dirs, me: int, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps(contents(me)))
    d = dirs.tmp(os.geteuid())
    (d / probefile.file_name(me)).symlink_to(target)
    refused(reader(dirs), me, "symbolic link")


def test_a_fifo_never_blocks(dirs: Dirs, me: int) -> None:
    d = dirs.tmp(os.geteuid())
    os.mkfifo(d / probefile.file_name(me), 0o600)
    refused(reader(dirs), me, "not a regular file")  # the test finishing is the point


def test_a_100_mb_file_is_refused_unread(dirs: Dirs, me: int) -> None:
    d = dirs.tmp(os.geteuid())
    path = d / probefile.file_name(me)
    with open(path, "wb") as f:
        f.truncate(100 * 2**20)  # sparse
    os.chmod(path, 0o600)
    refused(reader(dirs), me, "104857600 bytes", "limit")


def test_a_hard_link_is_refused(dirs: Dirs, me: int, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps(contents(me)))
    os.link(other, dirs.tmp(os.geteuid()) / probefile.file_name(me))
    refused(reader(dirs), me, "2 links")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 10_000 + "]" * 10_000, ("not JSON",)),  # nested 10k deep
        ('{"a":' * 10_000 + "1" + "}" * 10_000, ("not JSON",)),
        ("not json at all", ("not JSON",)),
        (b"\xff\xfe\x00garbage", ("not JSON",)),
        ("[1, 2, 3]", ("not a JSON object",)),
        ('{"pid": 1}', ("format",)),
        ("9" * 60_000, ("not JSON",)),  # past Python's digit limit for an int
    ],
)
def test_a_file_that_is_not_a_probe_is_refused(
    dirs: Dirs, me: int, text: str | bytes, words: tuple[str, ...]
) -> None:
    write(dirs.tmp(os.geteuid()), me, text)
    refused(reader(dirs), me, *words)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({probefile.MARK: 2}, ("format",)),
        ({probefile.MARK: True}, ("format",)),
        ({"time": "now"}, ("time",)),
        ({"time": ...}, ("time",)),
        ({"time": float("nan")}, ("time",)),
        ({"time": 1e308}, ("time 1e+308",)),
        ({"time": 1e12}, ("time = 1e+12", "outside")),
        ({"time": 10**400}, ("time a number of 401 digits",)),
        ({"time": True}, ("time true",)),
        ({"pid": 10**400}, ("pid a number of 401 digits",)),
        ({"start_ticks": 10**400}, ("start time a number of 401 digits",)),
        ({"start_ticks": 1.5}, ("start time 1.5",)),
        ({"pid": 1}, ("pid 1",)),
        ({"pid": "x"}, ("pid",)),
        ({"start_ticks": 1}, ("start time 1", "another process")),
        ({"start_ticks": ...}, ("start time",)),
        ({"age": 3 * probefile.STALE_SECONDS}, ("stale",)),
        ({"age": -3 * probefile.STALE_SECONDS}, ("future",)),
    ],
)
def test_a_file_of_another_process_or_time_is_refused(
    dirs: Dirs, me: int, changes: dict[str, Any], words: tuple[str, ...]
) -> None:
    if "age" in changes:  # seconds before now, when the test runs
        changes = {"time": time.time() - changes["age"]}
    write(dirs.tmp(os.geteuid()), me, json.dumps(contents(me, **changes)))
    refused(reader(dirs), me, *words)


def test_a_reused_pid_with_another_start_time_is_refused(dirs: Dirs, me: int) -> None:
    """A file left by a process that ended, its pid now another process's: the file's pid
    is the live one's, its start time the ended process's (earlier)."""
    ended = contents(me)["start_ticks"] - 100
    write(dirs.tmp(os.geteuid()), me, json.dumps(contents(me, start_ticks=ended)))
    refused(reader(dirs), me, f"start time {ended}", "another process had that pid")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("data_wait_ratio", float("nan")),
        ("data_wait_ratio", float("inf")),
        ("data_wait_ratio", 1.5),
        ("data_wait_ratio", -0.1),
        ("data_wait_ratio", "42%"),
        ("step_seconds", 1e308),
        ("step_seconds", -1.0),
        ("steps", -5),
        ("steps", 2.5),
        ("steps", True),
        ("steps", 10**400),
        ("window_seconds", -(10**400)),
        ("batches_per_second", {"a": 1}),
        ("window_seconds", [1]),
        ("memory", "lots"),
        ("memory", [{"device": -1, "allocated": 5}]),
        ("memory", [{"device": 0, "allocated": float("nan"), "reserved": 10**30}]),
    ],
)
def test_an_impossible_value_is_na_and_said(dirs: Dirs, me: int, field: str, value: Any) -> None:
    write(dirs.tmp(os.geteuid()), me, json.dumps(contents(me, **{field: value})))
    r = reader(dirs)
    probe = read_one(r, me)
    said = probe_errors(r)
    assert probe is not None, said  # the file counts; the value does not
    assert said and all("ignored" not in s for s in said), said
    assert all(f"probe-{me}.json" in s for s in said), said
    if field == "memory":
        assert all(m.allocated is None or m.allocated < 2**60 for m in probe.memory)
    else:
        assert getattr(probe, field) is None
        assert field in said[0]
    assert probe.data_wait_ratio is None or 0 <= probe.data_wait_ratio <= 1


def test_more_devices_than_the_limit_are_cut_and_said(dirs: Dirs, me: int) -> None:
    many = [{"device": i, "allocated": i} for i in range(probefile.MAX_DEVICES + 10)]
    write(dirs.tmp(os.geteuid()), me, json.dumps(contents(me, memory=many)))
    r = reader(dirs)
    probe = read_one(r, me)
    assert probe is not None and len(probe.memory) == probefile.MAX_DEVICES
    assert any(f"more than {probefile.MAX_DEVICES}" in s for s in probe_errors(r))


def test_a_group_writable_directory_is_refused(dirs: Dirs, me: int) -> None:
    d = dirs.tmp(os.geteuid(), 0o770)
    write(d, me)
    said = refused(reader(dirs), me, "others can write")
    assert str(d) in said


def test_a_directory_that_is_a_symlink_is_refused(dirs: Dirs, me: int, tmp_path: Path) -> None:
    real = make_dir(tmp_path / "real")
    write(real, me)
    (dirs.base / f"tmp-{os.geteuid()}").symlink_to(real)
    refused(reader(dirs), me, "symbolic link")


def test_a_directory_that_is_a_file_is_refused(dirs: Dirs, me: int) -> None:
    (dirs.base / f"tmp-{os.geteuid()}").write_text("x")
    refused(reader(dirs), me, "not a directory")


@pytest.mark.requires_root
def test_another_uids_file_in_a_root_processs_directory_is_refused(dirs: Dirs, me: int) -> None:
    path = write(dirs.tmp(0), me)
    os.chown(path, NOBODY, NOBODY)
    refused(reader(dirs), me, f"owned by uid {NOBODY}", "uid 0")


@pytest.mark.requires_root
def test_a_directory_of_another_owner_is_refused(dirs: Dirs, me: int) -> None:
    d = dirs.tmp(0)
    write(d, me)
    os.chown(d, NOBODY, NOBODY)
    refused(reader(dirs), me, "not owned by uid 0")


def _as_nobody(code: str) -> None:
    runuser = require_tool("runuser")
    done = subprocess.run(
        [runuser, "-u", "nobody", "--", PYTHON, "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.requires_root
def test_nobodys_file_claiming_a_root_process_is_refused(dirs: Dirs, me: int) -> None:
    """nobody writes, in its own directory, a file claiming root's process (its pid and
    start time): the directory is nobody's, the process root's."""
    require_root()
    d = dirs.tmp(NOBODY)
    text = json.dumps(contents(me))
    path = d / probefile.file_name(me)
    _as_nobody(f"open({str(path)!r}, 'w').write({text!r})")
    assert path.stat().st_uid == NOBODY
    with process(require_tool("runuser"), "-u", "nobody", "--") as theirs:
        r = reader(dirs)
        out = r.attach([row(me), row(theirs)])
        assert [o.probe for o in out] == [None, None]
        said = probe_errors(r)
        assert len(said) == 1 and f"probe-{me}.json" in said[0], said
        assert f"process {me} is uid 0's" in said[0], said


@pytest.mark.requires_root
def test_nobodys_own_probe_counts(dirs: Dirs) -> None:
    """The same rules let a plain user's probe through: its file, its directory, its
    process."""
    with process(require_tool("runuser"), "-u", "nobody", "--") as theirs:
        d = dirs.tmp(NOBODY)
        path = d / probefile.file_name(theirs)
        _as_nobody(f"open({str(path)!r}, 'w').write({json.dumps(contents(theirs))!r})")
        r = reader(dirs)
        assert read_one(r, theirs) is not None and r.errors == ()


@pytest.mark.requires_root
def test_an_own_directory_that_is_another_users_stays_theirs(dirs: Dirs, me: int) -> None:
    """Root's gputop started with a user's environment (``sudo -E``: its
    ``$XDG_RUNTIME_DIR`` is the user's): that directory is still the user's, and their
    probe counts."""
    with process(require_tool("runuser"), "-u", "nobody", "--") as theirs:
        d = dirs.tmp(NOBODY)
        path = d / probefile.file_name(theirs)
        _as_nobody(f"open({str(path)!r}, 'w').write({json.dumps(contents(theirs))!r})")
        r = reader(dirs, own_dir=str(d))
        out = r.attach([row(me), row(theirs)])
        assert [o.probe is not None for o in out] == [False, True], r.errors
        assert r.errors == ()


@pytest.mark.requires_root
def test_a_plain_users_gputop_says_once_that_others_are_closed(dirs: Dirs, me: int) -> None:
    """nobody's gputop reading root's processes: root's directory (0700) cannot be listed;
    one line says so, not one per directory or file, and nothing raises."""
    for uid_dir in ("run-0", "tmp-0"):
        write(make_dir(dirs.base / uid_dir), me)
    code = f"""
import json, sys
sys.path.insert(0, {str(Path(__file__).parents[2])!r})
from gputop.model import ProcessInfo
from gputop.sources.probes import ProbeReader
base = {str(dirs.base)!r}
r = ProbeReader(dirs_of=lambda uid: (f"{{base}}/run-{{uid}}", f"{{base}}/tmp-{{uid}}"))
out = r.attach([ProcessInfo(pid={me}, create_time=1.0)])
assert out[0].probe is None
print(json.dumps([e.message for e in r.errors]))
"""
    runuser = require_tool("runuser")
    done = subprocess.run(
        [runuser, "-u", "nobody", "--", PYTHON, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout) == [OTHERS_CLOSED]
    # Where even the directory's existence is hidden (a 0700 runtime directory above it),
    # nothing is said: a plain user's gputop would say it every tick, probe or not.
    for uid_dir in ("run-0", "tmp-0"):
        shutil.rmtree(dirs.base / uid_dir)
        make_dir(dirs.base / uid_dir / "hidden", 0o700)
        os.chmod(dirs.base / uid_dir, 0o700)
    hidden = code.replace('/run-{uid}"', '/run-{uid}/hidden"').replace(
        '/tmp-{uid}"', '/tmp-{uid}/hidden"'
    )
    assert hidden != code
    done = subprocess.run(
        [runuser, "-u", "nobody", "--", PYTHON, "-c", hidden],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout) == []


# --- bounded: fds, memory, one error per file per tick -----------------------------------


def test_refusals_leave_no_fd_and_a_bounded_cache(dirs: Dirs, tmp_path: Path) -> None:
    with process() as a, process() as b, process() as c, process() as e:
        d = dirs.tmp(os.geteuid())
        os.mkfifo(d / probefile.file_name(a), 0o600)
        write(d, b, "[" * 10_000)
        write(d, c, json.dumps(contents(c, start_ticks=1)))
        write(d, e)
        r = reader(dirs)
        rows = [row(p) for p in (a, b, c, e)]
        r.attach(rows)
        before = open_fds()
        for i in range(50):
            write(d, e, json.dumps(contents(e, steps=i)))  # a new file each tick
            out = r.attach(rows)
            assert [o.probe is not None for o in out] == [False, False, False, True]
            assert len(r.errors) == 3  # one per refused file, each tick
        assert open_fds() == before
        tracemalloc.start()
        try:
            r.attach(rows)
            start, _ = tracemalloc.get_traced_memory()
            for i in range(50):
                write(d, e, json.dumps(contents(e, steps=100 + i)))
                r.attach(rows)
            grown = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        assert grown < 256 * 1024, f"{grown} bytes kept over 50 ticks"
        assert len(r._parsed) <= 3


# --- fuzz ----------------------------------------------------------------------------------

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from([10**400, -(10**400), 1e308, -1e308, 2**63, 2**64, 0.5, -0.0]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


_VALUE_FIELDS = (
    "window_seconds",
    "steps",
    "data_wait_ratio",
    "step_seconds",
    "batches_per_second",
    "memory",
    "x",
)


@seed(SEED)
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    changes=st.dictionaries(st.sampled_from(_VALUE_FIELDS), _VALUES, max_size=len(_VALUE_FIELDS)),
    raw=st.one_of(st.none(), st.none(), st.binary(max_size=200)),
    identity=st.one_of(
        st.just({}),
        st.just({}),
        st.dictionaries(
            st.sampled_from([probefile.MARK, "pid", "start_ticks", "time"]), _VALUES, max_size=2
        ),
    ),
)
def test_fuzz_any_file_is_a_checked_probe_or_a_said_refusal(
    dirs: Dirs, me: int, changes: dict[str, Any], raw: bytes | None, identity: dict[str, Any]
) -> None:
    """Seeded (GPUTOP_FUZZ_SEED replays it), a bounded number of rounds: any contents give a
    probe whose every value is within LIMITS, or one refusal; never an exception."""
    data = raw if raw is not None else json.dumps(contents(me, **changes, **identity))
    write(dirs.tmp(os.geteuid()), me, data)
    r = reader(dirs)
    probe = read_one(r, me)
    for e in r.errors:
        assert e.source == "probe" and "\n" not in e.message
    if probe is None:
        assert len(r.errors) == 1 and "ignored" in r.errors[0].message, r.errors
        return
    assert raw is None
    for name in (
        "window_seconds",
        "steps",
        "data_wait_ratio",
        "step_seconds",
        "batches_per_second",
    ):
        value = getattr(probe, name)
        assert value is None or within(value, *LIMITS[Probe, name]), (name, value)
    for m in probe.memory:
        assert isinstance(m, CudaMemory) and within(m.device, *LIMITS[CudaMemory, "device"])
        for name in ("allocated", "reserved", "peak"):
            value = getattr(m, name)
            assert value is None or within(value, *LIMITS[CudaMemory, name]), (name, value)


def test_json_is_loaded_only_when_a_probe_file_is_read(tmp_path: Path) -> None:
    """Most dashboards never meet a probe file: the reader, made and asked with no file
    there, loads no json (its modules and C extension would stay for the whole run)."""
    d = str(tmp_path)
    code = (
        "import sys\n"
        "import os\n"
        "from gputop.model import ProcessInfo\n"
        "from gputop.sources.probes import ProbeReader\n"
        f"reader = ProbeReader(dirs_of=lambda uid: ({d!r},), own_dir={d!r})\n"
        "rows = reader.attach((ProcessInfo(pid=os.getpid(), user='me'),))\n"
        "assert len(rows) == 1 and rows[0].probe is None, rows\n"
        "print('json' in sys.modules)\n"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
