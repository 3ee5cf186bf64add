"""Who owns a process, from /proc/PID/cgroup texts as real nodes write them, the kubelet's
pod log directories and Slurm's environment; hostile input gives a clean answer."""

from __future__ import annotations

import random
import re
import shlex
import time
from pathlib import Path

import pytest

from gputop.model import Owner, ProcessInfo, replace
from gputop.sources.owners import (
    SLURM_NAMES,
    OwnerReader,
    host_path,
    namespace_depths,
    owner_detail,
    owner_label,
    parse_cgroup,
    pod_names,
    read_owner,
    slurm_claims,
    stop_argv,
    stop_command,
)
from gputop.sources.procfs import ENVIRON_READ_LIMIT, parse_environ, read_environ

CID = "3f2a9c1b4d5e" + "6f70" * 13  # 64 hex digits, as runc names containers
UID = "1f2e3d4c-5b6a-4789-8abc-def012345678"
UID_ = UID.replace("-", "_")  # the systemd driver's slice names escape "-" as "_"

# --- recorded texts ---------------------------------------------------------------------
# Kubernetes, the systemd cgroup driver (kubeadm's default since v1.22:
# https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/configure-cgroup-driver/;
# the kubepods.slice/kubepods-QOS.slice/kubepods-QOS-pod<uid>.slice naming is the kubelet's
# systemd proposal, kubernetes docs/proposals/kubelet-systemd.md), cgroup v2, containerd
# (its CRI plugin names the scope "cri-containerd-<id>.scope").
K8S_SYSTEMD_V2_CONTAINERD = (
    f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
    f"cri-containerd-{CID}.scope\n"
)
# CRI-O, systemd driver, guaranteed QoS (no QoS slice), cgroup v2 ("crio-<id>.scope").
K8S_SYSTEMD_V2_CRIO = f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{CID}.scope\n"
# The cgroupfs driver, cgroup v1 (every controller names the same path; the kubelet's
# default driver: kubepods/QOS/pod<uid>/<container id>), containerd names no runtime.
K8S_CGROUPFS_V1 = "".join(
    f"{n}:{c}:/kubepods/besteffort/pod{UID}/{CID}\n"
    for n, c in ((12, "pids"), (7, "memory"), (4, "cpu,cpuacct"), (1, "name=systemd"))
)
# The docker-shim (dockershim, systemd driver, v1 hybrid: the unified line is systemd's).
K8S_DOCKERSHIM_HYBRID = (
    f"11:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
    f"docker-{CID}.scope\n"
    f"1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/"
    f"kubepods-besteffort-pod{UID_}.slice/docker-{CID}.scope\n"
    f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/"
    f"docker-{CID}.scope\n"
)
# Docker outside Kubernetes: "/docker" for the cgroupfs driver, "system.slice" (a
# docker-<id>.scope) for the systemd driver (dockerd --cgroup-parent docs; runc names a
# systemd scope "<prefix>-<name>.scope").
DOCKER_CGROUPFS_V1 = "".join(
    f"{n}:{c}:/docker/{CID}\n" for n, c in ((11, "devices"), (4, "memory"), (1, "name=systemd"))
)
DOCKER_SYSTEMD_V2 = f"0::/system.slice/docker-{CID}.scope\n"
# Podman (--cgroup-manager systemd, its default, podman(1)): root containers in
# machine.slice, rootless ones under the user's manager; cgroupfs: libpod_parent.
PODMAN_ROOT_V2 = f"0::/machine.slice/libpod-{CID}.scope/container\n"
PODMAN_ROOTLESS_V2 = (
    f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{CID}.scope\n"
)
PODMAN_CGROUPFS_V1 = (
    f"5:memory:/libpod_parent/libpod-{CID}\n1:name=systemd:/libpod_parent/libpod-{CID}\n"
)
# Slurm, cgroup v1 (https://slurm.schedmd.com/cgroups.html: /slurm/uid_N/job_N/step_N/
# task_N per controller) with systemd's named hierarchy naming slurmd's service.
SLURM_V1 = (
    "10:memory:/slurm/uid_1000/job_81234/step_0/task_0\n"
    "4:cpuset:/slurm/uid_1000/job_81234/step_0\n"
    "3:devices:/slurm/uid_1000/job_81234/step_0\n"
    "1:name=systemd:/system.slice/slurmd.service\n"
)
# Slurm, cgroup v2 (https://slurm.schedmd.com/cgroup_v2.html: slurmstepd.scope/job_N/
# step_N/user/task_N).
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_81234/step_batch/user/task_0\n"
# systemd services and user sessions (v2, and the hybrid layout's unified line).
SERVICE_V2 = "0::/system.slice/nvidia-dcgm.service\n"
SESSION_HYBRID = (
    "5:memory:/user.slice/user-1000.slice/session-3.scope\n"
    "1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n"
    "0::/user.slice/user-1000.slice/session-3.scope\n"
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (K8S_SYSTEMD_V2_CONTAINERD, Owner("pod", runtime="containerd", id=CID, pod_uid=UID)),
        (K8S_SYSTEMD_V2_CRIO, Owner("pod", runtime="cri-o", id=CID, pod_uid=UID)),
        (K8S_CGROUPFS_V1, Owner("pod", id=CID, pod_uid=UID)),
        (K8S_DOCKERSHIM_HYBRID, Owner("pod", runtime="docker", id=CID, pod_uid=UID)),
        (DOCKER_CGROUPFS_V1, Owner("container", runtime="docker", id=CID)),
        (DOCKER_SYSTEMD_V2, Owner("container", runtime="docker", id=CID)),
        (PODMAN_ROOT_V2, Owner("container", runtime="podman", id=CID)),
        (PODMAN_ROOTLESS_V2, Owner("user-container", runtime="podman", id=CID, uid="1000")),
        (PODMAN_CGROUPFS_V1, Owner("container", runtime="podman", id=CID)),
        (SLURM_V1, Owner("slurm", slurm_job="81234", slurm_step="0", uid="1000")),
        (SLURM_V2, Owner("slurm", slurm_job="81234", slurm_step="batch")),
        (SERVICE_V2, Owner("service", unit="nvidia-dcgm.service")),
        (SESSION_HYBRID, Owner("session", unit="session-3.scope", uid="1000")),
    ],
    ids=[
        "k8s-systemd-v2-containerd",
        "k8s-systemd-v2-crio",
        "k8s-cgroupfs-v1",
        "k8s-dockershim-hybrid",
        "docker-cgroupfs-v1",
        "docker-systemd-v2",
        "podman-root-v2",
        "podman-rootless-v2",
        "podman-cgroupfs-v1",
        "slurm-v1",
        "slurm-v2",
        "service-v2",
        "session-hybrid",
    ],
)
def test_each_recorded_cgroup_text_names_its_owner(text: str, want: Owner) -> None:
    assert parse_cgroup(text) == want
    assert parse_cgroup(text.encode()) == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0::/\n",
        "12:pids:/\n1:name=systemd:/\n0::/\n",  # a container's own cgroup namespace
        "0::/user.slice/user-1000.slice\n",  # a slice holds no process
        "0::/mygroup/sub\n",  # someone's own cgroup: nobody we can name
        f"0::/kubepods/burstable/notapod{CID[:20]}\n",
        f"0::/docker/{CID[:63]}\n",  # not a whole container id
        "garbage without colons\n",
    ],
)
def test_anything_else_is_nobody_never_a_guess(text: str) -> None:
    assert parse_cgroup(text) is None


def test_labels_and_stop_commands_read_as_users_type_them() -> None:
    pod = Owner("pod", runtime="containerd", id=CID, pod_uid=UID, namespace="ml", pod="train-0")
    assert owner_label(pod) == "pod ml/train-0"
    assert stop_command(pod) == "kubectl delete pod --namespace ml -- train-0"
    nameless = Owner("pod", pod_uid=UID)
    assert owner_label(nameless) == f"pod {UID}"
    assert stop_command(nameless) is None  # no name: nothing to type
    slurm = Owner("slurm", slurm_job="81234", slurm_step="0")
    assert (owner_label(slurm), stop_command(slurm)) == ("slurm 81234.0", "scancel -- 81234")
    docker = Owner("container", runtime="docker", id=CID)
    assert (owner_label(docker), stop_command(docker)) == (
        "docker 3f2a9c1b4d5e",
        "docker stop -- 3f2a9c1b4d5e",
    )
    other = Owner("container", runtime="containerd", id=CID)
    assert (owner_label(other), stop_command(other)) == ("containerd 3f2a9c1b4d5e", None)
    svc = Owner("service", unit="nvidia-dcgm.service")
    assert (owner_label(svc), stop_command(svc)) == (
        "svc nvidia-dcgm.service",
        "systemctl stop -- nvidia-dcgm.service",
    )
    assert owner_label(None) is None and owner_label(Owner("unknown-kind")) is None


# --- the kubelet's layout: /var/log/pods/NAMESPACE_NAME_UID/CONTAINER/ ----------------------


def _pod_dir(root: Path, namespace: str, pod: str, uid: str, *containers: str) -> Path:
    d = root / "pods" / f"{namespace}_{pod}_{uid}"
    for c in containers:
        (d / c).mkdir(parents=True)
        (d / c / "0.log").write_text("")
    return d


def test_the_kubelet_log_directories_name_the_pod_and_its_only_container(tmp_path: Path) -> None:
    _pod_dir(tmp_path, "ml", "train-0", UID, "trainer")
    _pod_dir(tmp_path, "ml", "other", "aaaaaaaa-0000-4000-8000-000000000000", "x")
    assert pod_names(UID, CID, str(tmp_path / "pods")) == {
        "namespace": "ml",
        "pod": "train-0",
        "container": "trainer",
    }


def test_of_several_containers_the_kubelet_symlink_names_the_one(tmp_path: Path) -> None:
    _pod_dir(tmp_path, "ml", "train-0", UID, "trainer", "sidecar")
    links = tmp_path / "containers"
    links.mkdir()
    (links / f"train-0_ml_trainer-{CID}.log").write_text("")
    (links / f"train-0_ml_sidecar-{'0' * 64}.log").write_text("")
    names = pod_names(UID, CID, str(tmp_path / "pods"))
    assert names == {"namespace": "ml", "pod": "train-0", "container": "trainer"}
    # no symlink: the container is unknown, not guessed
    assert "container" not in pod_names(UID, "1" * 64, str(tmp_path / "pods"))


def test_no_log_directory_leaves_the_names_unknown(tmp_path: Path) -> None:
    assert pod_names(UID, CID, str(tmp_path / "absent")) == {}
    (tmp_path / "pods").mkdir()
    assert pod_names(UID, CID, str(tmp_path / "pods")) == {}


def _fake_proc(root: Path, pid: int, cgroup: str, environ: bytes | None = None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(cgroup)
    if environ is not None:
        (d / "environ").write_bytes(environ)


def test_a_pod_process_gets_its_names_from_the_configured_log_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pod_dir(tmp_path, "ml", "train-0", UID, "trainer")
    _fake_proc(tmp_path / "proc", 42, K8S_SYSTEMD_V2_CONTAINERD)
    monkeypatch.setenv("GPUTOP_POD_LOGS", str(tmp_path / "pods"))
    owner = read_owner(42, str(tmp_path / "proc"))
    assert owner is not None
    assert (owner.namespace, owner.pod, owner.container) == ("ml", "train-0", "trainer")
    assert owner_label(owner) == "pod ml/train-0"


def test_a_slurm_step_claims_its_job_name_but_not_its_user(tmp_path: Path) -> None:
    """SLURM_JOB_USER is what the process says; its real uid is its user (issue 29)."""
    env = b"PATH=/bin\x00SLURM_JOB_NAME=llama-ft\x00SLURM_JOB_USER=alice\x00X=1\x00"
    _fake_proc(tmp_path, 7, SLURM_V2, env)
    owner = read_owner(7, str(tmp_path))
    assert owner == Owner("slurm", slurm_job="81234", slurm_step="batch", slurm_job_name="llama-ft")
    assert owner_detail(owner) == "slurm 81234.batch job name llama-ft (its claim)"
    # an old recording's slurm_user is kept as data and never shown as the job's user
    old = Owner("slurm", slurm_job="81234", slurm_step="0", slurm_user="alice")
    assert "alice" not in (owner_detail(old) or "")
    # v1's path names the job's uid (slurmstepd writes it there): that one is shown
    assert owner_detail(parse_cgroup(SLURM_V1)) == "slurm 81234.0 of uid 1000"
    assert slurm_claims(parse_environ(b"SLURM_JOB_NAME=first\x00", SLURM_NAMES)) == {
        "slurm_job_name": "first"
    }


@pytest.mark.parametrize("room", [-1, 0, 1, ENVIRON_READ_LIMIT // 2])
def test_both_readers_of_an_environment_agree_at_its_limit(tmp_path: Path, room: int) -> None:
    """One reader, one limit: the host source's variables (``read_environ`` as the host
    calls it) and a Slurm step's claimed job name (``read_owner``) are read as far as the
    same byte. An entry that ends within the limit is read by both, one cut by it by
    neither. ``room``: bytes between the entry's end and the limit (negative: past it).
    Each once had a limit of its own, and an entry between the two was read by one only."""
    entries = {"SLURM_JOB_NAME": b"SLURM_JOB_NAME=llama-ft\x00", "RANK": b"RANK=3\x00"}
    for name, entry in entries.items():
        pid = 7 if name == "RANK" else 8
        head = b"PATH=/bin\x00FILLER="
        pad = ENVIRON_READ_LIMIT - room - len(head) - len(entry) - 1
        data = head + b"y" * pad + b"\x00" + entry + b"z" * 4096  # more after the limit
        assert data.index(entry) + len(entry) == ENVIRON_READ_LIMIT - room
        _fake_proc(tmp_path, pid, SLURM_V2, data)
    within = room >= 0
    owner = read_owner(8, str(tmp_path))
    assert owner is not None
    assert (owner.slurm_job_name == "llama-ft") is within
    assert (read_environ(7, proc_root=str(tmp_path)) == (("RANK", "3"),)) is within


def test_an_unreadable_environment_still_gives_the_job(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 7, SLURM_V1)  # no environ file: as unreadable as EACCES
    assert read_owner(7, str(tmp_path)) == Owner(
        "slurm", slurm_job="81234", slurm_step="0", uid="1000"
    )
    assert read_owner(8, str(tmp_path)) is None  # no such process


# --- the cache: once per process (pid and start time) ------------------------------------


def test_a_process_is_read_once_and_an_unchanged_row_is_the_same_object(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 5, DOCKER_SYSTEMD_V2)
    reader = OwnerReader(str(tmp_path))
    row = ProcessInfo(pid=5, create_time=100.0, status="running")
    (first,) = reader.attach([row])
    assert first.owner == Owner("container", runtime="docker", id=CID)
    (tmp_path / "5" / "cgroup").write_text(SERVICE_V2)
    assert reader.attach([row])[0] is first  # same row: the same object, no read
    newer = ProcessInfo(pid=5, create_time=100.0, status="sleeping")
    assert reader.attach([newer])[0].owner == first.owner  # new values, owner kept
    reused = ProcessInfo(pid=5, create_time=200.0)  # the pid was reused: read again
    assert reader.attach([reused])[0].owner == Owner("service", unit="nvidia-dcgm.service")
    invisible = ProcessInfo(pid=5, visible=False)
    assert reader.attach([invisible])[0] is invisible


# --- bad input ---------------------------------------------------------------------------


def _is_clean(text: str | None) -> bool:
    return text is None or not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in text)


def test_a_one_megabyte_cgroup_line_is_parsed_in_bounded_time() -> None:
    for line in (
        "0::/" + "a" * (1 << 20) + "\n",
        "0::" + "/kubepods" * (1 << 17) + "\n",
        "0::" + "/x.service" * (1 << 17) + "\n",
    ):
        owner = parse_cgroup(line)
        assert owner is None or _is_clean(owner_label(owner))


def test_hostile_names_become_clean_text(tmp_path: Path) -> None:
    odd = "ev\x1b[31mil[/bold][red]x\u202e"
    # not a unit name systemd could have made: nobody, rather than a cleaned-up guess
    assert parse_cgroup(f"0::/system.slice/{odd}.service\n") is None
    assert parse_cgroup(f"0::/system.slice/{'a' * 248}.service\n") is None  # over 255
    env = b"SLURM_JOB_NAME=" + odd.encode() + b"\xff\x00SLURM_JOB_USER=\x1b]0;t\x07bob\x00"
    got = slurm_claims(parse_environ(env, SLURM_NAMES))
    assert all(_is_clean(v) for v in got.values()) and "slurm_user" not in got
    odd_dir = odd.replace("/", "")  # a directory name has no slash
    _pod_dir(tmp_path, "ml", f"p[b]\x1b[1m{odd_dir}", UID, f"c\x07[i]{odd_dir}")
    names = pod_names(UID, CID, str(tmp_path / "pods"))
    assert names and all(_is_clean(v) for v in names.values())


def test_random_cgroup_texts_never_raise_and_stay_clean(fuzz_seed: int) -> None:
    """A property test bounded in time; seeded (GPUTOP_FUZZ_SEED replays it)."""
    seed = fuzz_seed
    rng = random.Random(seed)
    parts = [
        "kubepods", "kubepods.slice", "burstable", f"pod{UID}", f"kubepods-pod{UID_}.slice",
        f"cri-containerd-{CID}.scope", f"crio-{CID}", "docker", CID, f"libpod-{CID}.scope",
        "job_81234", "step_0", "step_\x1b[2J", "user.slice", "x.service", "s.scope", "",
        "[bold]", "\u202e", "\x00", ":", "\n", "é", "\udcff",
    ]  # fmt: skip
    deadline = time.monotonic() + 2.0
    n = 0
    while time.monotonic() < deadline and n < 5000:
        n += 1
        lines = [
            f"{rng.randint(0, 12)}:{rng.choice(['', 'memory', 'name=systemd'])}:/"
            + "/".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
            for _ in range(rng.randint(0, 4))
        ]
        text = "\n".join(lines)
        try:
            owner = parse_cgroup(text)
            if owner is not None:
                assert owner.kind in {"pod", "container", "slurm", "service", "session"}
                assert _is_clean(owner_label(owner)) and _is_clean(stop_command(owner))
        except Exception as exc:  # pragma: no cover - the failure message names the seed
            raise AssertionError(f"seed {seed} (GPUTOP_FUZZ_SEED): {text!r}") from exc


def test_owners_survive_json_a_remote_hosts_checked_decoding_and_a_recording(
    tmp_path: Path,
) -> None:
    from gputop.model import Snapshot
    from gputop.present import to_json_dict
    from gputop.record.store import Recorder, Recording
    from tests.builders import demo_snapshots, with_owners

    snaps = [with_owners(s) for s in demo_snapshots(3)]
    doc = to_json_dict(snaps[-1])
    assert Snapshot.from_dict(doc) == snaps[-1]
    assert Snapshot.from_dict(doc, checked=True) == snaps[-1]
    # a remote host's owner strings are cleaned, a wrong-typed owner is n/a
    doc["processes"][0]["owner"] = {"kind": "pod", "pod": "x\x1b[2Jy", "namespace": 7}
    doc["processes"][1]["owner"] = "pod"
    checked = Snapshot.from_dict(doc, checked=True)
    first = checked.processes[0].owner
    assert first is not None and first.pod == "xy" and first.namespace is None
    assert checked.processes[1].owner is None
    rec = Recorder(tmp_path, interval=1.0, retain=None, max_size=None)
    for s in snaps:
        rec.add(s)
    rec.close()
    assert list(Recording(tmp_path).between(0, 1e12)) == snaps


# --- issue 29: an owner no user can forge ------------------------------------------------

USER_TREE = "/user.slice/user-1000.slice/user@1000.service"  # delegated to uid 1000
FORGED = {
    "pod": f"/kubepods/besteffort/pod{UID}/{CID}",
    "pod-systemd": f"/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope",
    "slurm": "/slurm/uid_0/job_777/step_0",
    "slurm-v2": "/system.slice/slurmstepd.scope/job_777/step_0",
    "docker": f"/system.slice/docker-{CID}.scope",
    "docker-cgroupfs": f"/docker/{CID}",
    "service": "/system.slice/nvidia-dcgm.service",
}
SYSTEM_KINDS = {"pod", "container", "slurm", "service"}


@pytest.mark.parametrize("name", sorted(FORGED))
@pytest.mark.parametrize(
    "below",
    [USER_TREE, USER_TREE + "/app.slice", "/user.slice/user-1000.slice/session-3.scope"],
    ids=["user-manager", "user-app-slice", "session"],
)
def test_a_position_inside_a_users_own_subtree_names_no_one_else(name: str, below: str) -> None:
    owner = parse_cgroup(f"0::{below}{FORGED[name]}\n")
    # the user's own: its session or manager, or its own (rootless) container
    assert owner is not None and owner.kind in {"session", "user-container"}, owner
    assert owner.uid == "1000" and stop_command(owner) is None
    # the hybrid layout: a line in the user's subtree outweighs the system positions of
    # the others (a user writes only its own subtree, in the hierarchies delegated to it)
    for other in (FORGED[name], "/"):
        hybrid = f"5:memory:{other}\n1:name=systemd:{below}{FORGED[name]}\n0::{below}\n"
        owner = parse_cgroup(hybrid)
        assert owner is not None and owner.kind in {"session", "user-container"}, owner


def test_a_rootless_container_is_the_users_never_a_system_one() -> None:
    owner = parse_cgroup(f"0::{USER_TREE}/user.slice/libpod-{CID}.scope/container\n")
    assert owner == Owner("user-container", runtime="podman", id=CID, uid="1000")
    assert owner_label(owner) == "uid 1000 podman 3f2a9c1b4d5e" and stop_command(owner) is None
    # its own "system.slice" (rootless docker's) is still the user's
    owner = parse_cgroup(f"0::{USER_TREE}/system.slice/docker-{CID}.scope\n")
    assert owner is not None and owner.kind == "user-container"
    # a pod's path inside it is still that container, not the pod
    owner = parse_cgroup(f"0::{USER_TREE}/user.slice/libpod-{CID}.scope{FORGED['pod']}\n")
    assert owner is not None and owner.kind == "user-container"
    # user-1000.slice holding user@1001.service is no layout systemd makes
    assert parse_cgroup("0::/user.slice/user-1000.slice/user@1001.service\n") is None


@pytest.mark.parametrize("name", sorted(FORGED))
def test_the_outermost_manager_wins_and_a_payload_holds_no_host_unit(name: str) -> None:
    other = "e" * 64
    inside = parse_cgroup(f"0::/system.slice/docker-{other}.scope{FORGED[name]}\n")
    assert inside == Owner("container", runtime="docker", id=other)
    inside = parse_cgroup(f"0::/docker/{other}{FORGED[name]}\n")
    assert inside == Owner("container", runtime="docker", id=other)
    for payload in ("/lxc.payload.c1", "/lxc/c1", "/machine.slice/machine-vm1.scope"):
        assert parse_cgroup(f"0::{payload}{FORGED[name]}\n") is None, payload


@pytest.mark.parametrize("name", sorted(FORGED))
def test_positions_are_anchored_at_the_hierarchys_root(name: str) -> None:
    assert parse_cgroup(f"0::{FORGED[name]}\n") is not None  # at its real position
    for prefix in ("/mygroup", "/system.slice/containerd.service", "/../.."):
        owner = parse_cgroup(f"0::{prefix}{FORGED[name]}\n")
        assert owner is None or owner.kind == "service", (prefix, owner)  # the unit above
    # a pod slice's child that is no container of a runtime: the pod, without an id
    owner = parse_cgroup(f"0::/kubepods/pod{UID}/job_777/step_0\n")
    assert owner == Owner("pod", pod_uid=UID)


# --- issue 29: commands safe to paste ----------------------------------------------------

HOSTILE_NAMES = [
    "x;rm -rf ~",
    "$(reboot)",
    "`id`",
    "--all",
    "-A",
    "a b",
    "Prod",
    "x\u200bz",
    "\ufeffx",
    "x\u202ey",
    "a" * 254,
    "",
    "-",
    "a.-b",
]


@pytest.mark.parametrize("bad", HOSTILE_NAMES)
def test_a_command_is_offered_only_when_every_name_is_valid_for_its_kind(bad: str) -> None:
    pod = Owner("pod", namespace="ml", pod="train-0", pod_uid=UID)
    assert stop_command(replace(pod, pod=bad)) is None
    assert stop_command(replace(pod, namespace=bad)) is None
    assert stop_command(Owner("service", unit=bad)) is None
    bad_units = [bad, f"{bad}.service"] if not re.fullmatch(r"[-.A-Za-z0-9]*", bad) else [bad]
    assert all(stop_command(Owner("service", unit=u)) is None for u in bad_units)
    assert stop_command(Owner("slurm", slurm_job=bad, slurm_step="0")) is None
    assert stop_command(Owner("container", runtime="docker", id=bad)) is None


def test_every_argument_is_quoted_and_option_parsing_ended() -> None:
    # "-.service"-like names are valid systemd unit names: "--" keeps them names
    assert stop_command(Owner("service", unit="-A.service")) == "systemctl stop -- -A.service"
    assert stop_command(Owner("service", unit=r"dev-x\x2dy.service")) == (
        r"systemctl stop -- 'dev-x\x2dy.service'"
    )
    long_pod = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253 characters: whole, not cut
    cmd = stop_command(Owner("pod", namespace="n" * 63, pod=long_pod))
    assert cmd is not None and shlex.split(cmd)[-1] == long_pod
    assert stop_command(Owner("container", runtime="containerd", id=CID)) is None


def test_random_names_never_give_a_command_that_pastes_as_another(fuzz_seed: int) -> None:
    """Any owner fields: a command offered splits back into its template's arguments,
    each name valid. Bounded; seeded (GPUTOP_FUZZ_SEED replays it)."""
    seed = fuzz_seed
    rng = random.Random(seed)
    alphabet = "a-.0_9;$`()'\" \\@:Z\u200b\u202e\ufeff\n-"
    for _ in range(3000):
        vals = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in "xyz"]
        for owner in (
            Owner("pod", namespace=vals[0], pod=vals[1]),
            Owner("service", unit=vals[2] + rng.choice([".service", ".scope", ""])),
            Owner("slurm", slurm_job=vals[0]),
            Owner("container", runtime=rng.choice(["docker", "podman", vals[1]]), id=vals[2]),
        ):
            cmd = stop_command(owner)
            argv = stop_argv(owner)
            if cmd is None:
                continue
            try:
                assert argv is not None and shlex.split(cmd) == list(argv)
                names = argv[argv.index("--") + 1 :]
                assert owner.kind == "service" or not any(a.startswith("-") for a in names)
            except AssertionError as exc:  # pragma: no cover - names the seed
                raise AssertionError(f"seed {seed} (GPUTOP_FUZZ_SEED): {owner!r}") from exc


# --- property test: no owner without its anchored position -------------------------------

SEGMENTS = [
    "kubepods", "kubepods.slice", "besteffort", "burstable", f"pod{UID}",
    f"kubepods-pod{UID_}.slice", "kubepods-besteffort.slice",
    f"kubepods-besteffort-pod{UID_}.slice",
    f"cri-containerd-{CID}.scope", f"crio-{CID}.scope", "docker", CID, f"docker-{CID}.scope",
    f"libpod-{CID}.scope", "libpod_parent", f"libpod-{CID}", "machine.slice", "system.slice",
    "slurmstepd.scope", "slurm", "uid_0", "job_777", "step_0", "user", "task_0",
    "user.slice", "user-1000.slice", "user@1000.service", "session-3.scope", "app.slice",
    "x.service", "lxc.payload.c1", "lxc", "..", "", "\u202e", "é",
]  # fmt: skip
#: (kind, how a path that may give it starts) as docs/owners.md lists the positions
ANCHORS = {
    "pod": ("/kubepods/", "/kubepods.slice/"),
    "container": ("/docker/", "/system.slice/docker-", "/machine.slice/", "/libpod_parent/"),
    "slurm": ("/slurm/uid_", "/system.slice/slurmstepd.scope/"),
    "service": ("/system.slice/",),
    "user-container": ("/user.slice/user-",),
    "session": ("/user.slice/user-",),
}


WRITABLE = re.compile(r"/(?:user\.slice|lxc\.payload\.[^/]+|lxc/[^/]+)(?:/|$)")


def test_random_paths_give_owners_only_from_anchored_positions(fuzz_seed: int) -> None:
    """Bounded in time; the seed is printed on failure (GPUTOP_FUZZ_SEED replays it)."""
    seed = fuzz_seed
    rng = random.Random(seed)
    deadline = time.monotonic() + 3.0
    n = 0
    while time.monotonic() < deadline and n < 20000:
        n += 1
        # real positions, forged ones and junk, with anything below them
        starts = ["", USER_TREE, "/lxc.payload.c1", "/system.slice", *FORGED.values()]
        starts += ["/../../..", "/..", "/../../kubepods-besteffort-pod" + UID_ + ".slice"]
        paths = [
            rng.choice(starts)
            + "/"
            + "/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(0, 9)))
            for _ in range(rng.randint(1, 3))
        ]
        lines = [
            f"{i}:{rng.choice(['', 'memory', 'name=systemd'])}:{p}" for i, p in enumerate(paths)
        ]
        try:
            # read from the host's namespace, or from a pod's of its own (paths with "..")
            depths = rng.choice([None, DEPTHS])
            owner = parse_cgroup("\n".join(lines), depths)
            if owner is None:
                continue
            if depths is not None:  # each path as from the root, where it can be known
                seen = [
                    host_path(p, depths.get(lines[i].split(":")[1])) for i, p in enumerate(paths)
                ]
                paths = [p[0] for p in seen if p is not None]
            assert any(p.startswith(ANCHORS[owner.kind]) for p in paths)
            if owner.kind in SYSTEM_KINDS:  # no line in a user's subtree or a payload
                assert not any(WRITABLE.match(p) for p in paths)
            else:
                assert stop_command(owner) is None
        except Exception as exc:  # pragma: no cover - the failure message names the seed
            raise AssertionError(f"seed {seed} (GPUTOP_FUZZ_SEED): {lines!r}") from exc


# --- gputop in a cgroup namespace of its own (a pod on a cgroup v2 node) -----------------

#: gputop as a DaemonSet's besteffort pod: its namespace root is 4 levels down in v2
#: (kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/<ctr>)
#: and, say, 2 in a v1 memory hierarchy; PID 1 (the host's init, hostPID) shows the way up.
INIT_SEEN_FROM_A_POD = (
    "4:memory:/../..\n1:name=systemd:/../../../../init.scope\n0::/../../../../init.scope\n"
)
DEPTHS = {"memory": 2, "name=systemd": 4, "": 4}


def test_the_depth_of_gputops_own_namespace_comes_from_pid_1() -> None:
    assert namespace_depths(INIT_SEEN_FROM_A_POD) == DEPTHS
    assert namespace_depths("0::/init.scope\n1:name=systemd:/\n") == {}  # the host's own
    assert namespace_depths("0::/../../x/y\n") == {}  # not the host's init


@pytest.mark.parametrize(
    ("seen", "want"),
    [
        # another pod: only the ancestors gputop shares are climbed; the slice spells them
        (
            f"0::/../../../kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
            f"cri-containerd-{CID}.scope\n",
            Owner("pod", runtime="containerd", id=CID, pod_uid=UID),
        ),
        (
            f"0::/../../kubepods-besteffort-pod{UID_}.slice/crio-{CID}.scope\n",
            Owner("pod", runtime="cri-o", id=CID, pod_uid=UID),
        ),
        (
            f"0::/../../../kubepods-pod{UID_}.slice/crio-{CID}.scope\n",
            Owner("pod", runtime="cri-o", id=CID, pod_uid=UID),
        ),
        # up to the root: the whole path
        (
            f"0::/../../../../system.slice/docker-{CID}.scope\n",
            Owner("container", runtime="docker", id=CID),
        ),
        (f"4:memory:/../../docker/{CID}\n", Owner("container", runtime="docker", id=CID)),
        (
            f"0::/../../../..{USER_TREE}{FORGED['pod']}\n4:memory:/../../kubepods/pod{UID}\n",
            Owner("session", unit="user@1000.service", uid="1000"),
        ),
        # a slice whose name does not fit where it is, a way further up than the root
        (f"0::/../kubepods-burstable-pod{UID_}.slice/crio-{CID}.scope\n", None),
        (f"0::/../../../../../system.slice/docker-{CID}.scope\n", None),
        (f"0::/../../../x/../kubepods-pod{UID_}.slice\n", None),
        # a user's slice named to spell a pod's parents, one level deeper than a pod's
        (f"0::/../kubepods-burstable-pod{UID_}-x.slice/crio-{CID}.scope\n", None),
    ],
)
def test_paths_outside_gputops_namespace_are_read_from_the_root(
    seen: str, want: Owner | None
) -> None:
    assert parse_cgroup(seen, DEPTHS) == want
    if want is not None and want.kind != "session":
        assert parse_cgroup(seen) is None  # without knowing the depth: nobody, no guess


def test_a_reader_in_a_namespace_of_its_own_reads_pid_1_once(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 1, INIT_SEEN_FROM_A_POD)
    _fake_proc(tmp_path, 5, f"0::/../../kubepods-besteffort-pod{UID_}.slice/crio-{CID}.scope\n")
    reader = OwnerReader(str(tmp_path))
    (row,) = reader.attach([ProcessInfo(pid=5, create_time=1.0, status="running")])
    assert row.owner == Owner("pod", runtime="cri-o", id=CID, pod_uid=UID)
    assert read_owner(5, str(tmp_path)) == row.owner
