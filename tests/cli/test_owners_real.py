"""Owners from this machine's real cgroups: processes moved (cgroup.procs) into
kubepods, docker, Slurm and systemd cgroups at their managers' real positions (at the root
of the v2 hierarchy and of the v1 ones, named ``systemd`` and ``memory``), listed on the
fake NVML; ``--once --json``, the jobs, the table and the exporter's labels name them.

Issue 29: a real unprivileged user (nobody) in its own delegated subtree
(``user@65534.service``, chowned to it by root as systemd's Delegate=yes does) creates
cgroups named like someone else's pod, Slurm job and container and moves its own
processes there; gputop names none of them, and offers no command.

Every cgroup made is removed afterwards (its processes moved out first), also when a test
fails; ids are fresh per run. Needs root (in CI a failure, not a skip)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gputop.model import Snapshot
from gputop.views import process_view
from tests.conftest import missing, require_root, require_tool
from tests.fakenvml import FakeGpu, FakeProcess, Scenario
from tests.helpers.exporter import exporter, parse, series

ROOT = Path(__file__).resolve().parents[2]
# Fresh per run: the positions are the machine's real ones, shared with anything else.
CID_A, CID_B, CID_DOCKER, CID_VICTIM = (uuid.uuid4().hex * 2 for _ in range(4))
UID_A, UID_B = str(uuid.uuid4()), str(uuid.uuid4())
JOB = str(100_000_000 + uuid.uuid4().int % 800_000_000)
SERVICE = f"gputop-test-{uuid.uuid4().hex[:8]}.service"
NOBODY = 65534
#: Where gputop runs when it runs as a DaemonSet's pod would (a cgroup namespace of its own)
GPUTOP_POD = (
    f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
    f"{str(uuid.uuid4()).replace('-', '_')}.slice/cri-containerd-{uuid.uuid4().hex * 2}.scope"
)


def _gputop(
    args: list[str], env: dict[str, str], in_pod: Cgroups | None = None
) -> subprocess.CompletedProcess[str]:
    """``gputop ARGS``; with ``in_pod``, as a DaemonSet's pod on a cgroup v2 node runs it:
    in a cgroup namespace of its own, rooted at a pod's real position (the host's PID
    namespace, as the DaemonSet has)."""
    cmd = [sys.executable, "-m", "gputop", *args]
    if in_pod is None:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    unshare = require_tool("unshare")
    proc = subprocess.Popen(
        ["sh", "-c", 'read _ && exec "$@"', "sh", unshare, "--cgroup", "--", *cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        in_pod.move(proc.pid, "v2", GPUTOP_POD)  # then it makes its namespace there
        out, err = proc.communicate("\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _mounts() -> dict[str, Path]:
    """ "v2", "systemd" (the named v1 hierarchy), "memory" -> where each is mounted."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split(" ", 2)
        point = Path(left.split()[4])
        if fstype == "cgroup2":
            found.setdefault("v2", point)
        elif fstype == "cgroup":
            for opt in options.split(",") + options.split()[-1:]:
                if opt in ("name=systemd", "memory"):
                    found.setdefault(opt.removeprefix("name="), point)
    return found


@dataclass
class Cgroups:
    """Cgroups at real positions (paths from each hierarchy's root); every one this test
    made is removed by ``close`` (its processes moved to the root first), none that was
    there before."""

    mounts: dict[str, Path]
    made: list[tuple[Path, Path]] = field(default_factory=list)  # (cgroup, its root)
    #: made here and handed to a user: what it creates below is removed with it
    handed: set[Path] = field(default_factory=set)

    def make(self, hierarchy: str, path: str) -> Path:
        home = self.mounts[hierarchy]
        target = home / path.strip("/")
        for d in [*[*target.relative_to(home).parents][::-1][1:], target.relative_to(home)]:
            full = home / d
            if full.exists():
                continue
            try:
                full.mkdir()
            except OSError as exc:  # a read-only /sys/fs/cgroup (an unprivileged container)
                missing(f"cannot create cgroups in {home}: {exc}")
            self.made.append((full, home))
        return target

    def move(self, pid: int, hierarchy: str, path: str) -> None:
        (self.make(hierarchy, path) / "cgroup.procs").write_text(str(pid))

    def close(self) -> None:
        for cgroup, home in reversed(self.made):  # the deepest first
            if cgroup in self.handed:  # what the user made below it goes first
                below = [d for d in cgroup.rglob("*") if d.is_dir()]
                for d in sorted(below, key=lambda d: -len(d.parts)):
                    self._remove(d, home)
            self._remove(cgroup, home)

    @staticmethod
    def _remove(cgroup: Path, home: Path) -> None:
        procs = cgroup / "cgroup.procs"
        try:
            pids = procs.read_text().split() if procs.exists() else []
        except OSError:
            pids = []
        for pid in pids:
            with contextlib.suppress(OSError):  # gone meanwhile
                (home / "cgroup.procs").write_text(pid)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            cgroup.rmdir()


@pytest.fixture
def cgroups() -> Iterator[Cgroups]:
    require_root("moving processes between cgroups needs root")
    mounts = _mounts()
    if "v2" not in mounts:
        missing("no cgroup v2 hierarchy mounted")
    made = Cgroups(mounts)
    try:
        yield made
    finally:
        made.close()
        leftovers = [str(c) for c, _ in made.made if c.exists()]
        assert not leftovers, f"test cgroups left behind: {leftovers}"


@dataclass
class Node:
    """The processes of one node: two pods, a docker container, a Slurm step, a service."""

    pids: dict[str, int]
    procs: list[subprocess.Popen[bytes]]


def _v1(cgroups: Cgroups) -> list[str]:
    """The v1 hierarchies to use (v2 where there is no v1)."""
    return [h for h in ("systemd", "memory") if h in cgroups.mounts] or ["v2"]


def _sleep(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "300"], env=env)


@pytest.fixture
def node(cgroups: Cgroups, tmp_path: Path) -> Iterator[Node]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # A launcher in pod A whose two children end up in pod A and in pod B.
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import subprocess, time\n"
                "ps = [subprocess.Popen(['sleep', '300']) for _ in range(2)]\n"
                "print(*[p.pid for p in ps], flush=True)\n"
                "time.sleep(300)\n",
            ],
            stdout=subprocess.PIPE,
        )
        procs.append(launcher)
        assert launcher.stdout is not None
        a1, b1 = (int(x) for x in launcher.stdout.readline().split())
        slurm_env = {**os.environ, "SLURM_JOB_NAME": "llama-ft", "SLURM_JOB_USER": "alice"}
        docker, slurm, service = _sleep(), _sleep(slurm_env), _sleep()
        procs += [docker, slurm, service]
        pids = {
            "launcher": launcher.pid,
            "a": a1,
            "b": b1,
            "docker": docker.pid,
            "slurm": slurm.pid,
            "service": service.pid,
        }
        # Pod A: the systemd driver, containerd, in the v2 hierarchy.
        pod_a = (
            f"kubepods.slice/kubepods-burstable.slice/"
            f"kubepods-burstable-pod{UID_A.replace('-', '_')}.slice/cri-containerd-{CID_A}.scope"
        )
        for pid in (launcher.pid, a1):
            cgroups.move(pid, "v2", pod_a)
        # Pod B: the cgroupfs driver in the v1 hierarchies (v2 where there is no v1).
        for h in _v1(cgroups):
            cgroups.move(b1, h, f"kubepods/besteffort/pod{UID_B}/{CID_B}")
            cgroups.move(docker.pid, h, f"docker/{CID_DOCKER}")
        cgroups.move(slurm.pid, _v1(cgroups)[-1], f"slurm/uid_0/job_{JOB}/step_0/task_0")
        cgroups.move(service.pid, "v2", f"system.slice/{SERVICE}")
        pods = tmp_path / "pods"
        (pods / f"ml_train-a_{UID_A}" / "trainer").mkdir(parents=True)
        (pods / f"vision_serve-b_{UID_B}" / "server").mkdir(parents=True)
        yield Node(pids, procs)
    finally:
        cgroups.close()  # the processes back home first, then the cgroups go
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        for p in procs[:1]:
            if p.stdout is not None:
                p.stdout.close()


def _env(fake_nvml_env: Any, node: Node, tmp_path: Path) -> dict[str, str]:
    p = node.pids
    scenario = Scenario(
        gpus=[
            FakeGpu(processes=[FakeProcess(p["a"]), FakeProcess(p["b"])]),
            FakeGpu(
                processes=[
                    FakeProcess(p["docker"]),
                    FakeProcess(p["slurm"]),
                    FakeProcess(p["service"]),
                ]
            ),
        ]
    )
    env = dict(fake_nvml_env(scenario))
    env["GPUTOP_POD_LOGS"] = str(tmp_path / "pods")
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_real_cgroups_name_pods_containers_slurm_jobs_and_services(
    node: Node, cgroups: Cgroups, fake_nvml_env: Any, tmp_path: Path
) -> None:
    env = _env(fake_nvml_env, node, tmp_path)
    r = _gputop(["--once", "--json"], env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    owners = {p["pid"]: p["owner"] for g in data["gpus"] for p in g["processes"]}
    p = node.pids
    a, b = owners[p["a"]], owners[p["b"]]
    assert (a["kind"], a["runtime"], a["id"], a["pod_uid"]) == ("pod", "containerd", CID_A, UID_A)
    assert (a["namespace"], a["pod"], a["container"]) == ("ml", "train-a", "trainer")
    assert (b["kind"], b["runtime"], b["id"]) == ("pod", None, CID_B)
    assert (b["namespace"], b["pod"], b["container"]) == ("vision", "serve-b", "server")
    assert owners[p["docker"]]["runtime"] == "docker" and owners[p["docker"]]["id"] == CID_DOCKER
    slurm = owners[p["slurm"]]
    assert (slurm["slurm_job"], slurm["slurm_step"], slurm["uid"]) == (JOB, "0", "0")
    # the job's name is the process's claim; SLURM_JOB_USER is not read at all
    assert (slurm["slurm_job_name"], slurm["slurm_user"]) == ("llama-ft", None)
    assert owners[p["service"]]["unit"] == SERVICE
    # processes[] (the host view) carries the same owners; the launcher is pod A's too
    host = {q["pid"]: q["owner"] for q in data["processes"]}
    assert host[p["launcher"]] == a and host[p["b"]] == b
    # A job never spans two pods: the launcher roots pod A's job, pod B's child is its own.
    jobs = {j["root_pid"]: j for j in data["jobs"]}
    assert jobs[p["launcher"]]["owner"] == a and p["b"] not in jobs[p["launcher"]]["pids"]
    assert jobs[p["b"]]["owner"] == b

    # gputop in a cgroup namespace of its own (a pod's) names the same owners
    r = _gputop(["--once", "--json"], env, in_pod=cgroups)
    assert r.returncode == 0, r.stderr
    seen = {q["pid"]: q["owner"] for g in json.loads(r.stdout)["gpus"] for q in g["processes"]}
    assert seen == owners

    # --stream's lines carry the same owners.
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--stream", "--count", "2", "--interval", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        streamed = {q["pid"]: q["owner"] for g in json.loads(line)["gpus"] for q in g["processes"]}
        assert streamed == owners

    # --once's text leads each command with its owner, as the table does at 80 columns.
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--once"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    rows_of = [ln.split() for ln in r.stdout.splitlines()]
    by_pid = {
        int(w[1]): " ".join(w) for w in rows_of if len(w) > 2 and w[0].isdigit() and w[1].isdigit()
    }
    assert "[pod ml/train-a] " in by_pid[p["a"]]
    assert f"[slurm {JOB}.0] " in by_pid[p["slurm"]]
    assert f"[docker {CID_DOCKER[:12]}] " in by_pid[p["docker"]]
    assert any(w[:1] == [str(p["b"])] and "[pod vision/serve-b]" in " ".join(w) for w in rows_of), (
        "pod B's job line names its pod"
    )

    # The table, drawn from that very document.
    rows = {row.pid: row for row in process_view.process_rows(Snapshot.from_dict(data))}
    assert rows[p["a"]].owner == "pod ml/train-a"
    assert rows[p["b"]].owner == "pod vision/serve-b"
    assert rows[p["docker"]].owner == f"docker {CID_DOCKER[:12]}"
    assert rows[p["slurm"]].owner == f"slurm {JOB}.0"
    assert rows[p["slurm"]].stop == f"scancel -- {JOB}"
    assert rows[p["service"]].owner == f"svc {SERVICE}"
    assert rows[p["service"]].stop == f"systemctl stop -- {SERVICE}"
    assert rows[p["b"]].stop == "kubectl delete pod --namespace vision -- serve-b"

    # The exporter's labels (--jobs), once its first sample is in.
    with exporter(["--jobs", "--interval", "0.2"], env=env, tmp=tmp_path) as ex:
        got: dict[Any, float] = {}
        for _ in range(100):
            with urllib.request.urlopen(ex.url + "/metrics", timeout=10) as resp:
                got = parse(resp.read().decode())
            if series(got, "gputop_process_owner_gpu_memory_bytes", pod="serve-b"):
                break
            time.sleep(0.1)
    owned = series(got, "gputop_process_owner_gpu_memory_bytes", namespace="ml", pod="train-a")
    assert {dict(k)["gpu"] for k in owned} == {"0"} and dict(next(iter(owned)))[
        "container"
    ] == "trainer"
    assert series(got, "gputop_job_gpu_memory_bytes", namespace="vision", pod="serve-b")
    assert series(got, "gputop_process_owner_gpu_memory_bytes", slurm_job=JOB, gpu="1")
    assert series(got, "gputop_process_owner_gpu_memory_bytes", container=CID_DOCKER[:12])


# --- issue 29: what a real unprivileged user can forge in its own delegated subtree -------

USER_TREE = f"user.slice/user-{NOBODY}.slice/user@{NOBODY}.service"
#: Run as nobody: print its pid, wait to be moved into its own subtree, then create the
#: cgroup named on stdin below where it is, in every hierarchy, and move itself there.
FORGER = """
import os, sys
print(os.getpid(), flush=True)
rel = sys.stdin.readline().strip()
for arg in sys.argv[1:]:
    name, mount = arg.split("=", 1)
    for line in open("/proc/self/cgroup").read().splitlines():
        _, controllers, path = line.split(":", 2)
        if (name == "v2") == (controllers == "") and (
            name == "v2" or name in controllers.replace("name=", "").split(",")
        ):
            target = mount + path.rstrip("/") + "/" + rel
            os.makedirs(target, exist_ok=True)
            with open(target + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
print("moved", flush=True)
sys.stdin.read()
"""
#: What nobody names its cgroups (below its own user@65534.service): the victims' pod,
#: Slurm job, docker container and service of the ``node`` fixture.
FORGED = {
    "pod": f"kubepods/besteffort/pod{UID_B}/{CID_B}",
    "pod-systemd": (
        f"kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{UID_A.replace('-', '_')}.slice/cri-containerd-{CID_A}.scope"
    ),
    "slurm": f"slurm/uid_0/job_{JOB}/step_0",
    "slurm-v2": f"system.slice/slurmstepd.scope/job_{JOB}/step_0",
    "docker": f"docker/{CID_DOCKER}",
    "docker-systemd": f"system.slice/docker-{CID_VICTIM}.scope",
    "service": f"system.slice/{SERVICE}",
}


@dataclass
class Forgers:
    pids: dict[str, int]  # FORGED's key -> the pid of nobody's process there


@pytest.fixture
def forgers(cgroups: Cgroups) -> Iterator[Forgers]:
    runuser = require_tool("runuser")
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    hierarchies = ["v2", *[h for h in ("systemd", "memory") if h in cgroups.mounts]]
    # Root stands in for systemd's Delegate=yes: the user's manager cgroup is the user's.
    for h in hierarchies:
        tree = cgroups.make(h, USER_TREE)
        for path in [tree, *tree.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        cgroups.handed.add(tree)
    args = [f"{h}={cgroups.mounts[h]}" for h in hierarchies]
    procs: list[subprocess.Popen[str]] = []
    pids: dict[str, int] = {}
    try:
        for name, rel in FORGED.items():
            proc = subprocess.Popen(
                [runuser, "-u", "nobody", "--", python, "-I", "-c", FORGER, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd="/",
            )
            procs.append(proc)
            assert proc.stdout is not None and proc.stdin is not None
            pid = pids[name] = int(proc.stdout.readline())
            for h in hierarchies:  # as systemd puts the user's processes in its subtree
                cgroups.move(pid, h, USER_TREE)
            proc.stdin.write(rel + "\n")
            proc.stdin.flush()
            said = proc.stdout.readline()
            assert said == "moved\n", f"nobody could not move itself to {rel}: {said!r}"
        yield Forgers(pids)
    finally:
        for pid in pids.values():  # nobody's processes (runuser's children)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in procs:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


def test_a_user_cannot_make_its_process_someone_elses_pod_job_or_container(
    node: Node, forgers: Forgers, cgroups: Cgroups, fake_nvml_env: Any, tmp_path: Path
) -> None:
    p, f = node.pids, forgers.pids
    scenario = Scenario(
        gpus=[
            FakeGpu(processes=[FakeProcess(p["b"]), FakeProcess(p["docker"])]),
            FakeGpu(processes=[FakeProcess(p["slurm"]), FakeProcess(p["service"])]),
            FakeGpu(processes=[FakeProcess(pid) for pid in f.values()]),
        ]
    )
    env = dict(fake_nvml_env(scenario))
    env["GPUTOP_POD_LOGS"] = str(tmp_path / "pods")
    env["PYTHONPATH"] = str(ROOT)
    r = _gputop(["--once", "--json"], env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    owners = {q["pid"]: q["owner"] for g in data["gpus"] for q in g["processes"]}
    # the victims, at their real positions, are still named
    assert owners[p["b"]]["pod"] == "serve-b" and owners[p["slurm"]]["slurm_job"] == JOB
    assert owners[p["docker"]]["id"] == CID_DOCKER and owners[p["service"]]["unit"] == SERVICE
    for name, pid in f.items():
        owner = owners[pid]
        # nobody's own: its manager's cgroup, or its own rootless-looking container
        assert owner is not None, name
        assert owner["kind"] in ("session", "user-container"), (name, owner)
        assert owner["uid"] == str(NOBODY), (name, owner)
        assert not any(owner[k] for k in ("pod", "namespace", "pod_uid", "slurm_job")), name
    assert owners[f["docker-systemd"]]["kind"] == "user-container"
    assert owners[f["docker-systemd"]]["id"] == CID_VICTIM
    assert owners[f["pod"]] == {**owners[f["pod"]], "kind": "session", "id": None}
    # the same from a cgroup namespace of its own (a pod's)
    r = _gputop(["--once", "--json"], env, in_pod=cgroups)
    assert r.returncode == 0, r.stderr
    seen = {q["pid"]: q["owner"] for g in json.loads(r.stdout)["gpus"] for q in g["processes"]}
    assert seen == owners
    rows = {row.pid: row for row in process_view.process_rows(Snapshot.from_dict(data))}
    for name, pid in f.items():
        assert rows[pid].stop is None, (name, rows[pid].stop)  # no command aimed at anyone
        assert rows[pid].owner is not None and rows[pid].owner.startswith(
            ("user ", f"uid {NOBODY} ")
        ), (name, rows[pid].owner)

    # export --jobs charges nobody's GPU memory to no pod, job or container
    with exporter(["--jobs", "--interval", "0.2"], env=env, tmp=tmp_path) as ex:
        got: dict[Any, float] = {}
        for _ in range(100):
            with urllib.request.urlopen(ex.url + "/metrics", timeout=10) as resp:
                got = parse(resp.read().decode())
            if series(got, "gputop_process_owner_gpu_memory_bytes", pod="serve-b"):
                break
            time.sleep(0.1)
    assert series(got, "gputop_process_owner_gpu_memory_bytes", pod="serve-b", gpu="0")
    assert not series(got, "gputop_process_owner_gpu_memory_bytes", gpu="2")
    nobodys = series(got, "gputop_job_gpu_memory_bytes", gpus="2")
    assert nobodys, "nobody's processes are jobs of their own"
    for key in nobodys:
        labels = dict(key)
        assert not any(labels.get(k) for k in ("namespace", "pod", "container", "slurm_job"))
