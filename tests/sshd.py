"""Real OpenSSH servers on 127.0.0.1 for the fleet tests: throwaway keys, temp config.

``SshLab(tmp)`` makes a client key, an ssh config (``ssh -F``) with one ``Host`` alias
per server, and a remote command (a wrapper that records each remote gputop's pid, then
runs this checkout's gputop demo stream). ``lab.server(name)`` starts ``sshd -D`` on an
ephemeral port in its own process group; ``stop()`` (SIGSTOP: a hung link), ``kill()``
(SIGKILL: a dead host) and ``start()`` again on the same port. ``lab.close()`` ends
every sshd and every remote command it started, also after a failure.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
SSH = shutil.which("ssh")
SSH_KEYGEN = shutil.which("ssh-keygen")
ROOT = Path(__file__).resolve().parent.parent


def demo_stream_command() -> str:
    """This checkout's demo stream (its arguments: --stream --interval S)."""
    return f"{shlex.quote(sys.executable)} -m gputop --demo"


def missing() -> str | None:
    """Why the real-sshd tests cannot run here, or None."""
    for name, path in (("sshd", SSHD), ("ssh", SSH), ("ssh-keygen", SSH_KEYGEN)):
        if path is None:
            return f"{name} is not installed (Debian: openssh-server, openssh-client)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"sshd did not listen on port {port} within {timeout}s")


class Server:
    def __init__(self, lab: SshLab, name: str) -> None:
        self.lab = lab
        self.name = name
        self.port = free_port()
        self.dir = lab.dir / name
        self.dir.mkdir()
        self.host_key = self.dir / "host_key"
        subprocess.run(
            [str(SSH_KEYGEN), "-q", "-t", "ed25519", "-N", "", "-f", str(self.host_key)],
            check=True,
        )
        self.config = self.dir / "sshd_config"
        lines = [
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {lab.authorized_keys}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "StrictModes no",  # the temp dir's permissions are the test's, not a user's
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "LogLevel ERROR",
            "MaxStartups 100",
        ]
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.dir / "sshd.log", "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # its own group: per-connection children die with it
        )
        log.close()
        wait_port(self.port)

    def _group(self, sig: int) -> None:
        """The listener and every process under it (per-connection sshd children start
        their own sessions, so a process group does not reach them)."""
        if self.proc is None:
            return
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self) -> None:
        """Freeze the server and its connections (a hung link: no data, no close)."""
        self._group(signal.SIGSTOP)

    def kill(self) -> None:
        """The host dies: every sshd of this server ends, its connections drop."""
        self._group(signal.SIGKILL)
        self._group(signal.SIGCONT)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children first)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()  # names can be any bytes
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _pids_with(marker: str) -> list[int]:
    """Processes whose command line contains ``marker``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(entry) != os.getpid():
            out.append(int(entry))
    return out


class SshLab:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.user = getpass.getuser()
        self.key = tmp / "id_ed25519"
        subprocess.run(
            [str(SSH_KEYGEN), "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)],
            check=True,
        )
        self.authorized_keys = tmp / "authorized_keys"
        self.authorized_keys.write_text((tmp / "id_ed25519.pub").read_text())
        self.ssh_config = tmp / "ssh_config"
        self.known_hosts = tmp / "known_hosts"
        self.remote_pids = tmp / "remote-pids"
        self.remote_command = tmp / "remote-gputop"
        self.servers: dict[str, Server] = {}
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privsep dir
        self.write_remote_command()

    def write_remote_command(self, body: str | None = None) -> None:
        """The command the fleet runs on each host: records its pid, then runs this
        checkout's gputop demo stream (its arguments: --stream --interval S)."""
        run = body or f'exec {demo_stream_command()} "$@"'
        self.remote_command.write_text(
            "#!/bin/sh\n"
            f"echo $$ >> {shlex.quote(str(self.remote_pids))}\n"
            f"cd {shlex.quote(str(ROOT))}\n"
            f"{run}\n"
        )
        self.remote_command.chmod(0o755)

    def server(self, name: str) -> Server:
        s = Server(self, name)
        self.servers[name] = s
        s.start()
        self._write_client_config()
        return s

    def _write_client_config(self) -> None:
        lines = []
        for name, s in self.servers.items():
            lines += [f"Host {name}", "  HostName 127.0.0.1", f"  Port {s.port}"]
        lines += [
            "Host *",
            f"  User {self.user}",
            f"  IdentityFile {self.key}",
            "  IdentitiesOnly yes",
            "  IdentityAgent none",
            f"  UserKnownHostsFile {self.known_hosts}",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking no",
            "  ControlMaster no",
            "  LogLevel ERROR",
        ]
        self.ssh_config.write_text("\n".join(lines) + "\n")

    def ssh_processes(self) -> list[int]:
        """ssh clients still running with this lab's config."""
        return [p for p in _pids_with(str(self.ssh_config)) if _comm(p) == "ssh"]

    def close(self) -> None:
        for s in self.servers.values():
            s.kill()
        for pid in self.remote_pids_running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.ssh_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remote_pids_running(self) -> list[int]:
        if not self.remote_pids.exists():
            return []
        out = []
        for line in self.remote_pids.read_text().split():
            pid = int(line)
            if Path(f"/proc/{pid}").exists() and str(ROOT).encode() in _cmd(pid):
                out.append(pid)
        return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _cmd(pid: int) -> bytes:
    try:
        cwd = Path(f"/proc/{pid}/cwd").resolve().as_posix().encode()
        return Path(f"/proc/{pid}/cmdline").read_bytes() + cwd
    except OSError:
        return b""
