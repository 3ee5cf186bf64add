"""``gputop fleet``'s arguments: bad input is one line and exit 2; hosts from every place."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop import fleet
from gputop.cli import main
from gputop.config import ConfigError, load_config
from gputop.sources.streams import expand, ssh_command


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        rc = main(["fleet", *argv])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    _, err = capsys.readouterr()
    return rc, err


@pytest.mark.parametrize(
    "argv, said",
    [
        ((), "no hosts"),
        (("-oProxyCommand=x",), "unrecognized arguments"),
        (("--", "-oProxyCommand=x"), "not a host name"),
        (("bad\x1bhost",), "not a host name"),
        (("--hosts-file", "/nonexistent/hosts"), "--hosts-file"),
        (("--slurm", "gpu[01-02]"), "--slurm"),
        (("--interval", "0"), "out of range"),
        (("--prometheus", "ftp://x"), "not an http(s) URL"),
        (("--connect-timeout", "-1", "h"), "seconds"),
        (("--theme", "nosuch", "h"), "unknown theme 'nosuch'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol
    rc, err = run(capsys, *argv)
    assert rc == 2
    assert said in err
    assert err.count("\n") == 1


def test_hosts_file_and_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "hosts"
    f.write_text("# nodes\ngpu-01 gpu-02  # two\n\ngpu-01\nalice@gpu-03\n")
    hosts = fleet._read_hosts_file(str(f))
    assert fleet.check_hosts(["gpu-00", *hosts]) == ["gpu-00", "gpu-01", "gpu-02", "alice@gpu-03"]


def test_config_fleet_table(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[fleet]\nhosts = ["a", "b"]\nremote_command = "/opt/g/bin/gputop"\n')
    c = load_config(str(f))
    assert c.fleet_hosts == ("a", "b") and c.fleet_remote_command == "/opt/g/bin/gputop"
    for bad in ('[fleet]\nhosts = "a"\n', '[fleet]\nhosts = ["-oX"]\n', "[fleet]\nport = 1\n"):
        f.write_text(bad)
        with pytest.raises(ConfigError):
            load_config(str(f))


def test_the_ssh_command_line() -> None:
    argv = ssh_command("gpu-01", "/opt/g/bin/gputop", 2.0, ssh_config="/tmp/cfg")
    assert argv[:3] == ["ssh", "-F", "/tmp/cfg"]
    assert "BatchMode=yes" in argv and "ServerAliveInterval=5" in argv
    assert argv[-3:] == ["--", "gpu-01", "/opt/g/bin/gputop --stream --interval 2"]
    assert expand("gputop --demo --seed {n} # {host}", "a b", 3) == "gputop --demo --seed 3 # 'a b'"
