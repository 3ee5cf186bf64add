"""``gputop fleet``: many hosts' GPUs and verdicts in one terminal (docs/fleet.md, which
says where hosts come from and how each is reached)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gputop import argtypes
from gputop.argtypes import EXIT_FAILURE, Parser, ascii_number
from gputop.config import Config, ConfigError, check_theme, load_config, with_overrides
from gputop.fmt import clean_text

if TYPE_CHECKING:
    from gputop.sources.streams import HostViews

DEFAULT_INTERVAL = 2.0
PROMETHEUS_INTERVAL = 15.0
DEFAULT_CONNECT_TIMEOUT = 30.0
#: At most this many hosts (one ssh process each; use --prometheus beyond).
MAX_HOSTS = 512


def _seconds(text: str) -> float:
    value = ascii_number(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text}: seconds from 0 to 3600 expected")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gputop fleet",
        description="Every host's GPUs and verdicts in one terminal, over SSH or Prometheus.",
        epilog=(
            "keys: Enter opens a host's dashboard (read-only), Esc comes back, / filters by "
            "host or user, s sorts, q quits. exit codes: 0 ok, 1 failure, 2 bad argument"
        ),
    )
    p.add_argument("hosts", nargs="*", metavar="HOST", help="ssh destinations ([user@]host)")
    p.add_argument("--hosts-file", metavar="FILE", help="hosts, one per line (# comments)")
    p.add_argument(
        "--slurm",
        nargs="?",
        const="",
        metavar="NODELIST",
        help="the nodes of a Slurm nodelist (default $SLURM_JOB_NODELIST), via scontrol",
    )
    p.add_argument(
        "--interval",
        type=argtypes.interval,
        metavar="SECONDS",
        help=f"seconds between each host's snapshots (default {DEFAULT_INTERVAL:g})",
    )
    p.add_argument(
        "--remote-command",
        metavar="CMD",
        help="how gputop starts on each host (default: gputop; {host} and {n} are replaced)",
    )
    p.add_argument("--ssh-config", metavar="FILE", help="an ssh config file (ssh -F FILE)")
    p.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="an extra ssh option, as for ssh -o (repeatable)",
    )
    p.add_argument(
        "--connect-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="a host that sends no snapshot within this is unreachable (default "
        f"{DEFAULT_CONNECT_TIMEOUT:g})",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="run the remote command on this machine instead of over ssh (demos, benchmarks)",
    )
    p.add_argument(
        "--prometheus", metavar="URL", help="read gputop export / dcgm-exporter metrics instead"
    )
    p.add_argument("--theme", metavar="NAME", help="a Textual theme, e.g. textual-light")
    p.add_argument("--config", metavar="PATH", help="settings file ([fleet] hosts = [...])")
    return p


def _read_hosts_file(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except OSError as exc:
        raise ValueError(f"--hosts-file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"--hosts-file {path}: not UTF-8 text") from None
    return [host for line in text.splitlines() for host in line.split("#", 1)[0].split()]


def slurm_hosts(nodelist: str) -> list[str]:
    """Expand a Slurm nodelist (``gpu[01-04]``) with ``scontrol show hostnames``."""
    nodes = nodelist or os.environ.get("SLURM_JOB_NODELIST", "")
    if not nodes:
        raise ValueError("--slurm: no nodelist given and $SLURM_JOB_NODELIST is not set")
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise ValueError("--slurm: scontrol is not installed here (run it on a Slurm node)")
    try:
        out = subprocess.run(
            [scontrol, "show", "hostnames", nodes],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"--slurm: scontrol failed: {exc}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["exit status " + str(out.returncode)])[-1]
        raise ValueError(f"--slurm: scontrol: {clean_text(last, 200)}")
    return out.stdout.split()


def check_hosts(hosts: Sequence[str]) -> list[str]:
    """Drop duplicates (first kept); refuse names ssh would read as options or that hold
    control characters or spaces."""
    seen: dict[str, None] = {}
    for h in hosts:
        if not h or h.startswith("-") or clean_text(h, 255) != h or any(c.isspace() for c in h):
            raise ValueError(f"not a host name: {clean_text(h, 60)!r}")
        seen.setdefault(h, None)
    if len(seen) > MAX_HOSTS:
        raise ValueError(
            f"{len(seen)} hosts: at most {MAX_HOSTS} over ssh; use --prometheus for more"
        )
    return list(seen)


def this_gputop(command: str) -> str:
    """``--local``: a command whose first word is ``gputop`` runs the gputop running this
    fleet (this Python, ``-m gputop``), so a virtual environment that is not activated
    (not on PATH) works as well as one that is."""
    words = command.split(maxsplit=1)
    if not words or words[0] != "gputop":
        return command
    return " ".join([shlex.join([sys.executable, "-m", "gputop"]), *words[1:]])


#: Options that only the ssh streams use (a --prometheus fleet has no use for them), and
#: those of them that only ssh itself uses (no use with --local either).
_STREAM_OPTIONS = ("hosts", "hosts_file", "slurm", "remote_command", "connect_timeout", "local")
_SSH_OPTIONS = ("ssh_config", "ssh_option")


def _refuse_lone_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """An option the chosen way of reaching hosts would ignore: one line, exit 2."""

    def given(dest: str) -> bool:
        return getattr(args, dest) not in (None, False, [])

    def flag(dest: str) -> str:
        return "HOST" if dest == "hosts" else "--" + dest.replace("_", "-")

    if args.prometheus is not None:
        for dest in (*_STREAM_OPTIONS, *_SSH_OPTIONS):
            if given(dest):
                parser.error(f"{flag(dest)} goes with ssh hosts, not with --prometheus")
    if args.local:
        for dest in _SSH_OPTIONS:
            if given(dest):
                parser.error(f"{flag(dest)} goes with ssh, not with --local")


def _need_terminal(parser: argparse.ArgumentParser) -> None:
    from gputop.encoding import has_terminal

    if not has_terminal():
        parser.error("not a terminal: gputop fleet is a screen (gputop --stream for lines)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[2:] if argv is None else argv))
    _refuse_lone_options(parser, args)
    try:
        config = with_overrides(load_config(args.config), theme=args.theme)
        check_theme(config)
    except ConfigError as exc:
        parser.error(str(exc))
    # Prometheus's data is as fresh as its scrapes (15 s by default): ask that often.
    interval = args.interval or (PROMETHEUS_INTERVAL if args.prometheus else DEFAULT_INTERVAL)
    if args.prometheus:
        from gputop.sources.prometheus import PrometheusError, PrometheusFleet, check_url

        try:
            url = check_url(args.prometheus)
        except PrometheusError as exc:
            parser.error(str(exc))
        _need_terminal(parser)
        return _run(PrometheusFleet(url, interval=interval), f"prometheus {url}", config)
    try:
        hosts = list(args.hosts)
        if args.hosts_file:
            hosts += _read_hosts_file(args.hosts_file)
        if args.slurm is not None:
            hosts += slurm_hosts(args.slurm)
        hosts = check_hosts(hosts or config.fleet_hosts)
    except ValueError as exc:
        parser.error(str(exc))
    if not hosts:
        parser.error(
            "no hosts: name them (gputop fleet HOST...), or use --hosts-file, --slurm or "
            "[fleet] hosts in the config file"
        )
    _need_terminal(parser)
    remote = args.remote_command or config.fleet_remote_command or "gputop"
    ssh_config = args.ssh_config or config.fleet_ssh_config
    if ssh_config:
        ssh_config = os.path.expanduser(ssh_config)
    from gputop.sources.streams import StreamSet, expand, local_command, ssh_command

    if not args.local and shutil.which("ssh") is None:
        print("gputop fleet: the OpenSSH client (ssh) is not installed", file=sys.stderr)
        return EXIT_FAILURE

    def command(host: str, n: int) -> list[str]:
        cmd = expand(remote, host, n)  # the remote command for this host
        if args.local:
            return local_command(this_gputop(cmd), interval)
        return ssh_command(host, cmd, interval, ssh_config=ssh_config, options=args.ssh_option)

    timeout = DEFAULT_CONNECT_TIMEOUT if args.connect_timeout is None else args.connect_timeout
    streams = StreamSet(hosts, command, interval=interval, first_line_timeout=timeout)
    return _run(streams, "local commands" if args.local else "ssh", config)


def _run(fleet: HostViews, via: str, config: Config) -> int:
    """The fleet screen over ``fleet`` until the user quits."""
    try:
        from gputop.ui.fleet import run_fleet
    except ImportError as exc:  # pragma: no cover - textual is a dependency
        fleet.close()
        print(f"gputop fleet: the screen is not available ({exc})", file=sys.stderr)
        return EXIT_FAILURE
    return run_fleet(
        fleet, via=via, thresholds=config.thresholds, theme=config.theme, watchdog=True
    )
