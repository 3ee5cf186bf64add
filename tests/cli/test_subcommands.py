"""The subcommand convention: ``gputop NAME ...`` runs ``SUBCOMMANDS[NAME]``'s ``main``,
importing that module only then."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop import cli
from tests.cli.test_cli import run_main

FAKE = "gputop_test_fake_subcommand"


@pytest.fixture
def fake_subcommand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / f"{FAKE}.py").write_text(
        "import sys\n"
        "CALLS = []\n"
        "def main(argv):\n"
        "    CALLS.append(list(argv))\n"
        "    print('fake ran', argv)\n"
        "    return 7\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.SUBCOMMANDS, "fake", FAKE)
    monkeypatch.delitem(sys.modules, FAKE, raising=False)
    yield tmp_path
    sys.modules.pop(FAKE, None)


def test_a_subcommand_module_is_imported_only_when_run(
    fake_subcommand: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run_main(capsys, "--help")
    assert rc == 0
    listed = " ".join(out.split()).split("subcommands: ", 1)[1].split(" (", 1)[0]
    assert "fake" in listed.split(", ")  # with the real ones (export, ...)
    rc, out, _ = run_main(capsys, "--once", "--demo")
    assert rc == 0
    assert FAKE not in sys.modules  # neither --help nor --once imported it

    rc, out, _ = run_main(capsys, "fake", "--interval", "3", "x")
    assert rc == 7  # its return value is the exit status
    assert FAKE in sys.modules
    assert sys.modules[FAKE].CALLS == [["--interval", "3", "x"]]
    assert "fake ran" in out


def test_a_subcommand_name_only_counts_as_the_first_argument(
    fake_subcommand: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = run_main(capsys, "--demo", "fake")
    assert rc == 2 and "unrecognized arguments: fake" in err
    assert FAKE not in sys.modules


@pytest.mark.parametrize("name", sorted(cli.SUBCOMMANDS) or ["(none yet)"])
def test_every_registered_subcommand_has_a_main(name: str) -> None:
    if name not in cli.SUBCOMMANDS:
        return  # the convention exists before its first user
    module = importlib.import_module(cli.SUBCOMMANDS[name])
    main = getattr(module, "main", None)
    assert callable(main), f"{cli.SUBCOMMANDS[name]} has no main(argv)"
    assert list(inspect.signature(main).parameters) == ["argv"]
