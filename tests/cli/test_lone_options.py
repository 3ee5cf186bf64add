"""Issue 32, section 2: an option that makes no sense without another (or with the one
given) is refused in one line with exit 2, the way ``--count needs --stream`` is, instead
of being ignored. Through the real ``gputop`` command line (``gputop.cli.main``)."""

from __future__ import annotations

import pytest

from gputop.cli import main

#: (argv, what the one line says). Each was accepted and ignored before.
REFUSED = [
    (("export", "--max-jobs", "5"), "--max-jobs needs --jobs"),
    (("export", "--demo", "--max-jobs", "5"), "--max-jobs needs --jobs"),
    (("record", "--max-size", "1"), "--max-size: 1: at least 1M"),
    (("replay", "/nonexistent", "--once", "--speed", "10"), "--speed goes with the dashboard"),
    (("replay", "/nonexistent", "--json", "--speed", "10"), "--speed goes with the dashboard"),
    (("replay", "/nonexistent", "--from", "1h ago", "--speed", "2"), "--speed goes with"),
    (("fleet", "--prometheus", "http://p:9090", "h1"), "HOST goes with ssh hosts"),
    (("fleet", "--prometheus", "http://p:9090", "--local"), "--local goes with ssh hosts"),
    (("fleet", "--prometheus", "http://p:9090", "--hosts-file", "f"), "--hosts-file goes"),
    (("fleet", "--prometheus", "http://p:9090", "--slurm"), "--slurm goes with ssh hosts"),
    (("fleet", "--prometheus", "http://p:9090", "--remote-command", "g"), "--remote-command"),
    (("fleet", "--prometheus", "http://p:9090", "--connect-timeout", "5"), "--connect-timeout"),
    (("fleet", "--prometheus", "http://p:9090", "--ssh-option", "Port=2"), "--ssh-option"),
    (("fleet", "--local", "--ssh-config", "/dev/null", "h1"), "--ssh-config goes with ssh, not"),
    (("fleet", "--local", "--ssh-option", "Port=2", "h1"), "--ssh-option goes with ssh, not"),
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    _, err = capsys.readouterr()
    return rc, err


@pytest.mark.parametrize(("argv", "said"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_lone_option_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], said: str
) -> None:
    rc, err = run(capsys, *argv)
    assert rc == 2, err
    assert err.count("\n") == 1 and said in err, err


def test_the_pairs_that_make_sense_still_parse() -> None:
    from gputop import exporter, fleet
    from gputop.record import replay_cli

    assert exporter.build_parser().parse_args(["--jobs", "--max-jobs", "5"]).max_jobs == 5
    assert replay_cli.build_parser().parse_args(["d", "--speed", "10"]).speed == 10
    args = fleet.build_parser().parse_args(["--local", "--connect-timeout", "5", "h1"])
    assert args.connect_timeout == 5
