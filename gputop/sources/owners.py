"""Who owns a process: its ``/proc/PID/cgroup`` (v1, v2, hybrid) read as a Kubernetes pod,
a container, a Slurm job step or a systemd unit; anything else is nobody, never a guess.

An owner is read only where its manager creates it: each kind declares, as data, the
positions its manager (kubelet, dockerd/containerd/podman, slurmstepd, systemd) uses,
anchored at the root of the hierarchy. A user owns a delegated subtree
(``user@UID.service``) and a container's root owns its payload, and either can create
cgroups with any name inside it: what is below is never another principal's pod, job,
container or unit. The layouts, where each is documented, and what is trusted:
docs/owners.md.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gputop.fmt import clean_text
from gputop.model import Owner, ProcessInfo, replace
from gputop.sources.procfs import PROC_ROOT, read_environ, read_file


@dataclass(frozen=True, slots=True)
class OwnerKind:
    """How one kind of owner is shown, and what users run to stop it: the command's
    arguments, each a literal or one ``{field}`` of the Owner (a field unknown or not
    valid for its kind, see NAME_RULES: no command)."""

    kind: str
    label: str  # short, for the process table (str.format of the Owner's fields)
    stop: tuple[str, ...] = ()  # () = none offered


#: Every kind of owner, in the order a process's hierarchies are weighed (a pod beats its
#: runtime, a Slurm step the slurmd service of systemd's own hierarchy).
OWNER_KINDS: tuple[OwnerKind, ...] = (
    OwnerKind(
        "pod",
        "pod {namespace}/{pod}",
        ("kubectl", "delete", "pod", "--namespace", "{namespace}", "--", "{pod}"),
    ),
    OwnerKind("container", "{runtime} {short_id}", ("{cli}", "stop", "--", "{short_id}")),
    OwnerKind("slurm", "slurm {slurm_job}.{slurm_step}", ("scancel", "--", "{slurm_job}")),
    OwnerKind("service", "svc {unit}", ("systemctl", "stop", "--", "{unit}")),
    # Inside a user's own subtree: that user's, never a system one; no command for others.
    OwnerKind("user-container", "uid {uid} {runtime} {short_id}"),
    OwnerKind("session", "user {unit}"),
)
OWNER_KIND = {k.kind: k for k in OWNER_KINDS}
#: Shown where a pod's namespace and name are unknown (no kubelet log directory).
POD_UID_LABEL = "pod {pod_uid}"
#: Characters of a container id shown (the whole id is in the JSON).
SHORT_ID = 12
#: Runtimes whose own command stops a container outside Kubernetes ("{cli}").
STOPPABLE_RUNTIMES = frozenset({"docker", "podman"})

_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
#: What each Owner field a stop command uses must be; a command is offered only when every
#: field it needs matches whole. Kubernetes: a namespace is a DNS-1123 label, a
#: pod name a DNS-1123 subdomain (253 characters); systemd: unit_name_is_valid() (255
#: characters of ASCII letters, digits, ":-_.\\", one "@" before an instance).
NAME_RULES: dict[str, re.Pattern[str]] = {
    "namespace": re.compile(_DNS_LABEL),
    "pod": re.compile(rf"(?=.{{1,253}}\Z){_DNS_LABEL}(?:\.{_DNS_LABEL})*"),
    "runtime": re.compile("|".join(sorted(STOPPABLE_RUNTIMES))),
    "id": re.compile(r"[0-9a-f]{64}"),  # runc's container ids; the short one is its start
    "slurm_job": re.compile(r"[1-9][0-9]{0,9}"),
    "unit": re.compile(
        r"(?=.{1,255}\Z)[A-Za-z0-9:_.\\-]+(?:@[A-Za-z0-9:_.\\-]+)?\.(?:service|scope)"
    ),
}


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
#: A Slurm job's name comes from the process's own environment: its claim, said as one.
#: (SLURM_JOB_USER, which old recordings carry, is a claim too and never shown.)
OWNER_DETAILS = (
    ("container", "container {container}"),
    ("slurm_job_name", "job name {slurm_job_name} (its claim)"),
    ("uid", "of uid {uid}"),
)


def owner_detail(owner: Owner | None) -> str | None:
    """The label and, where known, the pod's container, the Slurm job's claimed name and
    the user a cgroup position names."""
    label = owner_label(owner)
    if owner is None or label is None:
        return None
    values = _fields(owner)
    template = OWNER_KIND[owner.kind].label
    extra = [
        t.format(**values)
        for key, t in OWNER_DETAILS
        if key in values and "{" + key + "}" not in template
    ]
    return " ".join([label, *extra])


#: Names made from another field: valid when that one is.
DERIVED_NAMES = {"short_id": "id", "cli": "runtime"}


def stop_argv(owner: Owner | None) -> tuple[str, ...] | None:
    """The command users would rather run than signal the process, as arguments; None
    unless every name in it is known and valid for its kind (NAME_RULES)."""
    if owner is None or owner.kind not in OWNER_KIND or not OWNER_KIND[owner.kind].stop:
        return None
    values = _fields(owner)
    argv = []
    for arg in OWNER_KIND[owner.kind].stop:
        if arg.startswith("{") and arg.endswith("}"):
            name = arg[1:-1]
            field = DERIVED_NAMES.get(name, name)
            value, source = values.get(name), values.get(field)
            if value is None or source is None or NAME_RULES[field].fullmatch(source) is None:
                return None
            arg = value
        argv.append(arg)
    return tuple(argv)


def stop_command(owner: Owner | None) -> str | None:
    """:func:`stop_argv` as one line safe to paste into a shell: every argument quoted,
    option parsing ended (``--``) before the names."""
    argv = stop_argv(owner)
    return None if argv is None else shlex.join(argv)


# --- positions: where each manager creates its cgroups ------------------------------------

_HEX = r"[0-9a-f]{64}"
_UID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_UID_ = r"[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}"  # systemd's escape
# systemd's unit names: at most 255 characters (unit_name_is_valid())
_UNIT = r"(?=[^/]{1,255}(?:/|\Z))[A-Za-z0-9:_.\\-]+(?:@[A-Za-z0-9:_.\\-]+)?\.(?:service|scope)"
_STEP = r"[A-Za-z0-9._-]{1,64}"  # "0", "batch", "extern", "interactive", "4.1"
# The scope prefix of a container's cgroup (systemd driver) -> its runtime.
_SCOPE_RUNTIME = {
    "cri-containerd": "containerd",
    "crio": "cri-o",
    "docker": "docker",
    "libpod": "podman",
    "nerdctl": "containerd",
}


@dataclass(frozen=True, slots=True)
class Position:
    """A cgroup that one manager creates, as a pattern anchored at the hierarchy's root
    (the path with its leading "/" dropped; it ends at a "/" or the path's end).
    Everything below the position is the payload of what it names: the outermost
    manager wins."""

    kind: str  # the Owner's kind; "" = a subtree that names nobody (another's payload)
    manager: str  # who creates it, for people
    pattern: str  # named groups become the Owner's fields: pod_uid, id, uid, unit, ...
    runtime: str | None = None  # a container runtime the position implies
    #: Below it a user or a container's root creates cgroups with any name (a delegated
    #: subtree, a payload): a process placed there in any hierarchy is nobody else's.
    user_writable: bool = False


#: Every position gputop reads an owner from, tried in order (the first that matches a
#: path wins); a path at none of them names nobody.
POSITIONS: tuple[Position, ...] = (
    # kubelet, systemd driver: kubepods.slice/[kubepods-QOS.slice/]kubepods-[QOS-]pod<uid
    # with "_">.slice/<runtime>-<id>.scope
    Position(
        "pod",
        "kubelet (systemd driver)",
        rf"kubepods\.slice/(?:kubepods-(?P<qos>besteffort|burstable)\.slice/kubepods-(?P=qos)-"
        rf"|kubepods-)pod(?P<pod_uid>{_UID_})\.slice"
        rf"(?:/(?P<prefix>cri-containerd|crio|docker)-(?P<id>{_HEX})\.scope)?",
    ),
    # kubelet, cgroupfs driver: kubepods/[QOS/]pod<uid>/<container id>
    Position(
        "pod",
        "kubelet (cgroupfs driver)",
        rf"kubepods/(?:(?:besteffort|burstable)/)?pod(?P<pod_uid>{_UID})(?:/(?P<id>{_HEX}))?",
    ),
    Position("container", "dockerd (cgroupfs driver)", rf"docker/(?P<id>{_HEX})", "docker"),
    Position(
        "container",
        "dockerd, nerdctl (systemd driver)",
        rf"system\.slice/(?P<prefix>docker|nerdctl)-(?P<id>{_HEX})\.scope",
    ),
    Position(
        "container",
        "podman as root (systemd cgroup manager)",
        rf"machine\.slice/(?:machine-libpod_pod_[0-9a-f]{{64}}\.slice/)?libpod-(?P<id>{_HEX})"
        rf"\.scope",
        "podman",
    ),
    Position(
        "container",
        "podman as root (cgroupfs cgroup manager)",
        rf"libpod_parent/libpod-(?P<id>{_HEX})",
        "podman",
    ),
    Position(
        "slurm",
        "slurmstepd (cgroup/v1)",
        rf"slurm/uid_(?P<uid>[0-9]{{1,10}})/job_(?P<slurm_job>[0-9]{{1,10}})"
        rf"/step_(?P<slurm_step>{_STEP})",
    ),
    Position(
        "slurm",
        "slurmstepd (cgroup/v2)",
        rf"system\.slice/(?:[A-Za-z0-9._-]{{1,64}}_)?slurmstepd\.scope"
        rf"/job_(?P<slurm_job>[0-9]{{1,10}})/step_(?P<slurm_step>{_STEP})",
    ),
    # systemd (PID 1): a unit directly under system.slice, or in a template's slice
    Position(
        "service",
        "systemd",
        rf"system\.slice/(?:system-[A-Za-z0-9:_.\\-]+\.slice/)?(?P<unit>{_UNIT})",
    ),
    # A user's own subtree (systemd delegates user@UID.service to the user): a container
    # there is that user's (rootless podman or docker; its outermost one), else the
    # user's manager or login session; nothing in it is anyone else's.
    Position(
        "user-container",
        "rootless podman or docker, in the user's own subtree",
        rf"user\.slice/user-(?P<uid>[0-9]{{1,10}})\.slice/user@(?P=uid)\.service(?:/[^/]*)*?"
        rf"/(?P<prefix>libpod|docker)-(?P<id>{_HEX})\.scope",
        user_writable=True,
    ),
    Position(
        "session",
        "systemd (the user's manager, a login session)",
        r"user\.slice/user-(?P<uid>[0-9]{1,10})\.slice/"
        r"(?P<unit>user@(?P=uid)\.service|session-[A-Za-z0-9]{1,32}\.scope)",
        user_writable=True,
    ),
    Position("", "systemd (users' slices)", r"user\.slice", user_writable=True),
    # Payloads of LXC, systemd-nspawn, libvirt: their root creates any cgroup below.
    Position("", "LXC", r"lxc\.payload\.[^/]+|lxc/[^/]+", user_writable=True),
    Position("", "systemd-machined", r"machine\.slice/[^/]+", user_writable=True),
)
_POSITIONS = tuple((p, re.compile(rf"(?:{p.pattern})(?=/|\Z)")) for p in POSITIONS)
_RANK = {k.kind: i for i, k in enumerate(OWNER_KINDS)}


def owner_at(path: str, seen_from: int = 0) -> tuple[Owner | None, bool]:
    """The owner a cgroup path's position names (None: nobody) and whether the path is
    in a subtree a user or a container's root writes (see Position.user_writable).
    ``seen_from``: where the part of the path the kernel showed begins (see
    :func:`host_path`); a position must reach past it."""
    if not path.startswith("/"):
        return None, False
    for position, pattern in _POSITIONS:
        m = pattern.match(path, 1)
        if m is None:
            continue
        if not position.kind or m.end() <= seen_from:
            return None, position.user_writable
        got = {k: v for k, v in m.groupdict().items() if v is not None}
        runtime = _SCOPE_RUNTIME.get(got.pop("prefix", ""), position.runtime)
        got.pop("qos", None)
        if "pod_uid" in got:
            got["pod_uid"] = got["pod_uid"].replace("_", "-")
        if "id" not in got:
            runtime = None  # a pod's own cgroup, no container in it
        owner = Owner(position.kind, runtime=runtime, **got)
        return owner, position.user_writable
    return None, False


def _climbs(parts: list[str]) -> int:
    """How many ``..`` a path's parts begin with (levels above gputop's namespace root)."""
    return len(parts) - len(list(itertools.dropwhile(lambda p: p == "..", parts)))


def namespace_depths(init_cgroup: bytes | str) -> dict[str, int]:
    """How deep gputop's own cgroup namespace root is in each hierarchy (by the line's
    controllers field), from PID 1's ``/proc/1/cgroup`` as gputop reads it: with the
    host's PID namespace, PID 1 is the host's init, at the root (or in ``init.scope``),
    and the kernel writes the way there from gputop's root as one ``..`` per level. In
    the host's cgroup namespace (no ``..``): nothing."""
    if isinstance(init_cgroup, bytes):
        init_cgroup = init_cgroup.decode("utf-8", "replace")
    out = {}
    for line in init_cgroup.splitlines():
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        parts = [p for p in path.split("/") if p]
        ups = _climbs(parts)
        if ups and len(parts) - ups <= 1:
            out[controllers] = ups
    return out


def host_path(path: str, depth: int | None) -> tuple[str, int] | None:
    """A path the kernel wrote from gputop's own cgroup namespace (``/../../x``) as a
    path from the hierarchy's root, and where the part it showed begins; None where it
    cannot be known.

    Climbing ``depth`` levels reaches the root: the rest is the whole path. Climbing
    fewer stops at one of gputop's own ancestors, whose names the kernel does not show;
    only a systemd slice spells its parents in its name (``kubepods-burstable-pod<uid>
    .slice`` is in ``kubepods.slice/kubepods-burstable.slice``), and it is taken only
    when that is the very depth it is at. (Those ancestors are where gputop was deployed:
    gputop trusts its own placement.)"""
    parts = path.split("/")[1:]
    ups = _climbs(parts)
    if ups == 0:
        return path, 0
    rest = parts[ups:]
    if depth is None or ups > depth or not rest or any(p in ("", ".", "..") for p in rest):
        return None
    if ups == depth:
        return "/" + "/".join(rest), 0
    names = rest[0].removesuffix(".slice").split("-")
    if not rest[0].endswith(".slice") or len(names) != depth - ups + 1 or "" in names:
        return None
    parents = ["-".join(names[:i]) + ".slice" for i in range(1, len(names))]
    implied = "/" + "/".join(parents)
    return implied + "/" + "/".join(rest), len(implied)


def parse_cgroup(text: bytes | str, depths: Mapping[str, int] | None = None) -> Owner | None:
    """The owner a ``/proc/PID/cgroup`` text names, or None. ``depths``: gputop's own
    cgroup namespace (:func:`namespace_depths`), for paths outside it.

    Each line (a hierarchy) is read on its own. A process in a user-writable subtree in
    any hierarchy (a user moves only its own processes, only within what it was given)
    is that user's or nobody's: its other lines cannot make it a system pod, job,
    container or unit. Otherwise the lines' owners are weighed in OWNER_KINDS' order (a
    Slurm step of a memory hierarchy beats the slurmd service of systemd's own)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.split(":", 2)[1:] for line in text.splitlines() if line.count(":") >= 2]
    paths = (host_path(path, (depths or {}).get(controllers)) for controllers, path in lines)
    placed = [owner_at(*p) for p in dict.fromkeys(paths) if p is not None]
    confined = [owner for owner, writable in placed if writable]
    found = [o for o in (confined if confined else [o for o, _ in placed]) if o is not None]
    if not found:
        return None
    owner = min(found, key=lambda o: _RANK[o.kind])
    return _cleaned(owner)


def _cleaned(owner: Owner) -> Owner:
    # The positions admit only plain names; cleaned anyway, as every shown string is.
    changes = {
        k: clean_text(v, 256)
        for k in ("slurm_step", "unit")
        if isinstance(v := getattr(owner, k), str)
    }
    return replace(owner, **changes) if changes else owner


# --- what the cgroup does not say: the kubelet's pod log directories, Slurm's environment

#: The kubelet's pod logs, /var/log/pods/NAMESPACE_NAME_UID/CONTAINER/ (GPUTOP_POD_LOGS
#: moves it, for tests).
POD_LOGS = "/var/log/pods"


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


#: What gputop takes from a Slurm step's environment, each as the process's own claim
#: (variable, Owner field): a process sets its environment as it likes (SLURM_JOB_USER is
#: not read: the process's real uid is its user). Read by the one reader of an
#: environment, ``procfs.read_environ``, with its limit and its checks.
SLURM_CLAIMS = (("SLURM_JOB_NAME", "slurm_job_name"),)
SLURM_NAMES = tuple(name for name, _ in SLURM_CLAIMS)


def slurm_claims(environment: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Owner fields from (name, value) pairs of ``procfs.read_environ``; an empty value
    claims nothing."""
    fields = dict(SLURM_CLAIMS)
    return {fields[name]: value for name, value in environment if name in fields and value}


def read_depths(proc_root: str = PROC_ROOT) -> dict[str, int]:
    """:func:`namespace_depths` of this machine (empty when PID 1 cannot be read)."""
    try:
        return namespace_depths(read_file(f"{proc_root}/1/cgroup", 1 << 16))
    except OSError:
        return {}


def read_owner(
    pid: int, proc_root: str = PROC_ROOT, depths: Mapping[str, int] | None = None
) -> Owner | None:
    """The owner of ``pid``, with the names the cgroup lacks; None when unknown.
    ``depths``: :func:`read_depths`, read here when not given."""
    if depths is None:
        depths = read_depths(proc_root)
    try:
        owner = parse_cgroup(read_file(f"{proc_root}/{pid}/cgroup", 1 << 16), depths)
    except OSError:
        return None
    if owner is None:
        return None
    if owner.kind == "pod" and owner.pod_uid is not None:
        root = os.environ.get("GPUTOP_POD_LOGS") or POD_LOGS
        owner = replace(owner, **pod_names(owner.pod_uid, owner.id, root))
    elif owner.kind == "slurm":
        try:
            environment = read_environ(pid, SLURM_NAMES, proc_root)
        except OSError:  # another user's: the job id is still known
            environment = ()
        owner = replace(owner, **slurm_claims(environment))
    return owner


class OwnerReader:
    """Attaches each row's owner; a process is read once (pid and start time: a pid is
    reused) and an unchanged row comes back as the same object."""

    def __init__(self, proc_root: str = PROC_ROOT) -> None:
        self._proc_root = proc_root
        # gputop's own cgroup namespace does not move: read once
        self._depths = read_depths(proc_root)
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
                owner = read_owner(row.pid, self._proc_root, self._depths)
            else:
                owner = None
            done = row if owner is None else replace(row, owner=owner)
            self._known[key] = (owner, row, done)
            out.append(done)
        return tuple(out)
