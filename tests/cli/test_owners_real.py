"""Owners from this machine's real cgroups: processes moved (cgroup.procs) into
kubepods, docker, Slurm and systemd style cgroups of the v2 hierarchy and the v1 ones
(named ``systemd``, ``memory``), listed on the fake NVML; ``--once --json``, the jobs,
the table and the exporter's labels name them. The cgroups are removed afterwards, also
when a test fails. Needs root (in CI a failure, not a skip)."""

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
from gputop.ui import views
from tests.conftest import missing, require_root
from tests.fakenvml import FakeGpu, FakeProcess, Scenario
from tests.helpers.exporter import exporter, parse, series

ROOT = Path(__file__).resolve().parents[2]
CID_A = "a1" * 32
CID_B = "b2" * 32
CID_DOCKER = "d0c0" * 16
UID_A = "0a0a0a0a-1111-4222-8333-444455556666"
UID_B = "0b0b0b0b-1111-4222-8333-444455556666"


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


def _own_path(hierarchy: str) -> str:
    """This process's cgroup in ``hierarchy`` (its /proc/self/cgroup line)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (hierarchy == "v2" and controllers == "") or (
            hierarchy in controllers.replace("name=", "").split(",")
        ):
            return path
    raise LookupError(hierarchy)


@dataclass
class Cgroups:
    """Test cgroups under this process's own cgroup of each hierarchy; every one made is
    removed by ``close`` (its processes moved back first)."""

    mounts: dict[str, Path]
    tag: str = field(default_factory=lambda: f"gputop-test-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    made: list[tuple[Path, Path]] = field(default_factory=list)  # (cgroup, where it came from)

    def move(self, pid: int, hierarchy: str, path: str) -> None:
        home = self.mounts[hierarchy] / _own_path(hierarchy).lstrip("/")
        target = home / self.tag / path.lstrip("/")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only /sys/fs/cgroup (an unprivileged container)
            missing(f"cannot create cgroups in {home}: {exc}")
        for d in [target, *target.relative_to(home).parents][::-1]:
            full = home / d if d != target else target
            if full != home and (full, home) not in self.made:
                self.made.append((full, home))
        (target / "cgroup.procs").write_text(str(pid))

    def close(self) -> None:
        for cgroup, home in reversed(self.made):  # the deepest first
            procs = cgroup / "cgroup.procs"
            try:
                pids = procs.read_text().split() if procs.exists() else []
            except OSError:
                pids = []
            for pid in pids:
                with contextlib.suppress(OSError):  # gone meanwhile
                    (home / "cgroup.procs").write_text(pid)
            with contextlib.suppress(FileNotFoundError):
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
        v1 = [h for h in ("systemd", "memory") if h in cgroups.mounts] or ["v2"]
        for h in v1:
            cgroups.move(b1, h, f"kubepods/besteffort/pod{UID_B}/{CID_B}")
            cgroups.move(docker.pid, h, f"docker/{CID_DOCKER}")
        cgroups.move(slurm.pid, v1[-1], "slurm/uid_0/job_81234/step_0/task_0")
        cgroups.move(service.pid, "v2", "system.slice/gputop-test-dcgm.service")
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
    node: Node, fake_nvml_env: Any, tmp_path: Path
) -> None:
    env = _env(fake_nvml_env, node, tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
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
    assert (slurm["slurm_job"], slurm["slurm_step"]) == ("81234", "0")
    assert (slurm["slurm_job_name"], slurm["slurm_user"]) == ("llama-ft", "alice")
    assert owners[p["service"]]["unit"] == "gputop-test-dcgm.service"
    # processes[] (the host view) carries the same owners; the launcher is pod A's too
    host = {q["pid"]: q["owner"] for q in data["processes"]}
    assert host[p["launcher"]] == a and host[p["b"]] == b
    # A job never spans two pods: the launcher roots pod A's job, pod B's child is its own.
    jobs = {j["root_pid"]: j for j in data["jobs"]}
    assert jobs[p["launcher"]]["owner"] == a and p["b"] not in jobs[p["launcher"]]["pids"]
    assert jobs[p["b"]]["owner"] == b

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
    assert "[slurm 81234.0] " in by_pid[p["slurm"]]
    assert f"[docker {CID_DOCKER[:12]}] " in by_pid[p["docker"]]
    assert any(w[:1] == [str(p["b"])] and "[pod vision/serve-b]" in " ".join(w) for w in rows_of), (
        "pod B's job line names its pod"
    )

    # The table, drawn from that very document.
    rows = {row.pid: row for row in views.process_rows(Snapshot.from_dict(data))}
    assert rows[p["a"]].owner == "pod ml/train-a"
    assert rows[p["b"]].owner == "pod vision/serve-b"
    assert rows[p["docker"]].owner == f"docker {CID_DOCKER[:12]}"
    assert rows[p["slurm"]].owner == "slurm 81234.0" and rows[p["slurm"]].stop == "scancel 81234"
    assert rows[p["service"]].owner == "svc gputop-test-dcgm.service"

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
    assert series(got, "gputop_process_owner_gpu_memory_bytes", slurm_job="81234", gpu="1")
    assert series(got, "gputop_process_owner_gpu_memory_bytes", container=CID_DOCKER[:12])
