"""Who owns a process: its ``/proc/PID/cgroup`` (v1, v2, hybrid) read as a Kubernetes pod,
a container, a Slurm job step or a systemd unit; anything else is nobody, never a guess.
The layouts and where each is documented: docs/owners.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gputop.fmt import clean_text
from gputop.model import Owner, ProcessInfo, replace
from gputop.sources.procfs import PROC_ROOT, read_file


@dataclass(frozen=True, slots=True)
class OwnerKind:
    """How one kind of owner is shown, and what users run to stop it (str.format of the
    Owner's fields; a field the template needs that is None: no command)."""

    kind: str
    label: str  # short, for the process table
    stop: str  # the command ("": none), offered when the fields it names are known


#: Every kind of owner (the first that matches a process wins: a pod beats its runtime).
OWNER_KINDS: tuple[OwnerKind, ...] = (
    OwnerKind("pod", "pod {namespace}/{pod}", "kubectl delete pod -n {namespace} {pod}"),
    OwnerKind("container", "{runtime} {short_id}", "{cli} stop {short_id}"),
    OwnerKind("slurm", "slurm {slurm_job}.{slurm_step}", "scancel {slurm_job}"),
    OwnerKind("service", "svc {unit}", "systemctl stop {unit}"),
    OwnerKind("session", "user {unit}", ""),
)
OWNER_KIND = {k.kind: k for k in OWNER_KINDS}
#: Shown where a pod's namespace and name are unknown (no kubelet log directory).
POD_UID_LABEL = "pod {pod_uid}"
#: Characters of a container id shown (the whole id is in the JSON).
SHORT_ID = 12
#: Runtimes whose own command stops a container outside Kubernetes ("{cli}").
STOPPABLE_RUNTIMES = frozenset({"docker", "podman"})


def _fields(owner: Owner) -> dict[str, str]:
    values = {k: v for k in Owner.__slots__ if isinstance(v := getattr(owner, k), str)}
    if owner.id is not None:
        values["short_id"] = owner.id[:SHORT_ID]
    if owner.runtime in STOPPABLE_RUNTIMES:
        values["cli"] = owner.runtime
    return values


def _format(template: str, values: dict[str, str]) -> str | None:
    try:
        return template.format(**values)
    except KeyError:  # a field it needs is unknown
        return None


def owner_label(owner: Owner | None) -> str | None:
    """``pod ns/name``, ``slurm 81234.0``, ``docker 3f2a9c1b4d5e``, ``svc name.service``."""
    if owner is None or owner.kind not in OWNER_KIND:
        return None
    values = _fields(owner)
    return _format(OWNER_KIND[owner.kind].label, values) or _format(POD_UID_LABEL, values)


#: What a fuller description adds to the label, where known (the kill dialog, job detail).
OWNER_DETAILS = (
    ("container", "container {container}"),
    ("slurm_job_name", "job {slurm_job_name}"),
    ("slurm_user", "of {slurm_user}"),
)


def owner_detail(owner: Owner | None) -> str | None:
    """The label and, where known, the pod's container or the Slurm job's name and user."""
    label = owner_label(owner)
    if owner is None or label is None:
        return None
    values = _fields(owner)
    extra = [t.format(**values) for key, t in OWNER_DETAILS if key in values]
    return " ".join([label, *extra])


def stop_command(owner: Owner | None) -> str | None:
    """What users would rather run than signal the process, when its names are known."""
    if owner is None or owner.kind not in OWNER_KIND:
        return None
    template = OWNER_KIND[owner.kind].stop
    return _format(template, _fields(owner)) if template else None


_HEX = r"[0-9a-f]{64}"
_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
# The scope prefix of a container's cgroup (systemd driver) -> its runtime.
_SCOPE_RUNTIME = {
    "cri-containerd": "containerd",
    "crio": "cri-o",
    "docker": "docker",
    "libpod": "podman",
    "nerdctl": "containerd",
}
_PREFIX = "|".join(sorted(_SCOPE_RUNTIME, key=len, reverse=True))
# kubepods[.slice]/[kubepods-]QOS[.slice]/[kubepods-QOS-]pod<uid>[.slice]/<container>
_POD = re.compile(
    rf"/[^/]*kubepods[^/]*(?:/[^/]*(?:besteffort|burstable)[^/]*)?"
    rf"/[^/]*pod({_UID})(?:\.slice)?(?:/([^/]+))?"
)
_CONTAINER = re.compile(rf"(?:^|/)(?:({_PREFIX})-({_HEX})(?:\.scope)?|(docker)/({_HEX}))(?:/|$)")
_SLURM = re.compile(r"/job_(\d+)/step_([^/]+)")
_UNIT = re.compile(r"/([^/]+\.(?:service|scope))(?=/|$)")


def parse_cgroup(text: bytes | str) -> Owner | None:
    """The owner a ``/proc/PID/cgroup`` text names, or None."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    cut = (line.split(":", 2)[-1] if line.count(":") >= 2 else "" for line in text.splitlines())
    paths = list(dict.fromkeys(p for p in cut if p.startswith("/") and p != "/"))
    # a pod wherever it is seen, then a container, ...
    found = (parse(path) for parse in (_pod, _container, _slurm, _unit) for path in paths)
    return next((owner for owner in found if owner is not None), None)


def _pod(path: str) -> Owner | None:
    m = _POD.search(path)
    if m is None:
        return None
    runtime = cid = None
    if m.group(2):
        inner = _container("/" + m.group(2))
        if inner is not None:
            runtime, cid = inner.runtime, inner.id
        elif re.fullmatch(_HEX, m.group(2)):
            cid = m.group(2)  # the cgroupfs driver names no runtime
    return Owner("pod", runtime=runtime, id=cid, pod_uid=m.group(1).replace("_", "-"))


def _container(path: str) -> Owner | None:
    m = _CONTAINER.search(path)
    if m is None:
        return None
    prefix = m.group(1) or m.group(3)
    return Owner("container", runtime=_SCOPE_RUNTIME[prefix], id=m.group(2) or m.group(4))


def _slurm(path: str) -> Owner | None:
    m = _SLURM.search(path)
    if m is None:
        return None
    return Owner("slurm", slurm_job=m.group(1), slurm_step=clean_text(m.group(2), 64))


def _unit(path: str) -> Owner | None:
    units = _UNIT.findall(path)
    if not units:
        return None
    kind = "session" if path.startswith("/user.slice/") else "service"
    return Owner(kind, unit=clean_text(units[-1], 256))


# --- what the cgroup does not say: the kubelet's pod log directories, Slurm's environment

#: The kubelet's pod logs, /var/log/pods/NAMESPACE_NAME_UID/CONTAINER/ (GPUTOP_POD_LOGS
#: moves it, for tests).
POD_LOGS = "/var/log/pods"
ENVIRON_READ_LIMIT = 1 << 17


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def pod_names(uid: str, cid: str | None, root: str) -> dict[str, str]:
    """{namespace, pod, container} as far as the log directories name them."""
    found = [d for d in _listdir(root) if d.endswith("_" + uid) and d.count("_") >= 2]
    if len(found) != 1:
        return {}
    namespace, pod = found[0][: -len(uid) - 1].split("_", 1)
    out = {"namespace": namespace, "pod": pod}
    containers = [c for c in _listdir(os.path.join(root, found[0])) if not c.startswith(".")]
    if len(containers) == 1:
        out["container"] = containers[0]
    elif cid is not None:  # /var/log/containers/POD_NAMESPACE_CONTAINER-ID.log
        links = _listdir(os.path.join(os.path.dirname(root.rstrip("/")), "containers"))
        head, tail = f"{pod}_{namespace}_", f"-{cid}.log"
        names = [
            x[len(head) : -len(tail)] for x in links if x.startswith(head) and x.endswith(tail)
        ]
        if len(names) == 1:
            out["container"] = names[0]
    return {k: clean_text(v, 253) or "?" for k, v in out.items()}


def slurm_environ(data: bytes) -> dict[str, str]:
    out = {}
    for key, field in ((b"SLURM_JOB_NAME=", "slurm_job_name"), (b"SLURM_JOB_USER=", "slurm_user")):
        at = data.find(b"\x00" + key)
        start = 0 if data.startswith(key) else (-1 if at < 0 else at + 1)
        if start >= 0:
            end = data.find(b"\x00", start)
            value = clean_text(data[start + len(key) : None if end < 0 else end], 256)
            if value:
                out[field] = value
    return out


def read_owner(pid: int, proc_root: str = PROC_ROOT) -> Owner | None:
    """The owner of ``pid``, with the names the cgroup lacks; None when unknown."""
    try:
        owner = parse_cgroup(read_file(f"{proc_root}/{pid}/cgroup", 1 << 16))
    except OSError:
        return None
    if owner is None:
        return None
    if owner.kind == "pod" and owner.pod_uid is not None:
        root = os.environ.get("GPUTOP_POD_LOGS") or POD_LOGS
        owner = replace(owner, **pod_names(owner.pod_uid, owner.id, root))
    elif owner.kind == "slurm":
        try:
            environ = read_file(f"{proc_root}/{pid}/environ", ENVIRON_READ_LIMIT)
        except OSError:  # another user's: the job id is still known
            environ = b""
        owner = replace(owner, **slurm_environ(environ))
    return owner


class OwnerReader:
    """Attaches each row's owner; a process is read once (pid and start time: a pid is
    reused) and an unchanged row comes back as the same object."""

    def __init__(self, proc_root: str = PROC_ROOT) -> None:
        self._proc_root = proc_root
        # (pid, create time) -> (the owner, the last row in, the row out)
        self._known: dict[tuple[int, float | None], tuple[Owner | None, object, ProcessInfo]] = {}

    def attach(self, rows: Iterable[ProcessInfo]) -> tuple[ProcessInfo, ...]:
        known, self._known = self._known, {}
        out = []
        for row in rows:
            key = (row.pid, row.create_time)
            before = known.get(key)
            if before is not None and before[1] is row:
                self._known[key] = before
                out.append(before[2])
                continue
            if before is not None:
                owner = before[0]
            elif row.visible and row.create_time is not None and row.status != "dead":
                owner = read_owner(row.pid, self._proc_root)
            else:
                owner = None
            done = row if owner is None else replace(row, owner=owner)
            self._known[key] = (owner, row, done)
            out.append(done)
        return tuple(out)
