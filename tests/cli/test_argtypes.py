"""Every command line (gputop and its subcommands) reads numbers from ASCII digits only,
and a bad one is one line and exit 2: Python's int()/float()/isdigit() also take "３"
(fullwidth) and "١" (Arabic-Indic)."""

from __future__ import annotations

import argparse
import importlib

import pytest

from gputop.argtypes import ascii_number, ascii_whole, interval, is_ascii_digits

FULLWIDTH_3 = "\uff13"  # ３
ARABIC_1 = "\u0661"  # ١

#: (module with build_parser, the arguments before the number, the option taking it)
OPTIONS = [
    ("gputop.cli", [], "--interval"),
    ("gputop.cli", ["--stream"], "--count"),
    ("gputop.cli", ["--demo"], "--seed"),
    ("gputop.cli", [], "--window"),
    ("gputop.record.record_cli", [], "--interval"),
    ("gputop.record.record_cli", [], "--flush"),
    ("gputop.record.record_cli", ["--demo"], "--seed"),
    ("gputop.record.replay_cli", [], "--speed"),
    ("gputop.exporter", [], "--max-jobs"),
    ("gputop.exporter", ["--demo"], "--seed"),
    ("gputop.exporter", [], "--listen"),
    ("gputop.fleet", ["h1"], "--interval"),
]


@pytest.mark.parametrize(("module", "before", "option"), OPTIONS)
@pytest.mark.parametrize("digit", [FULLWIDTH_3, ARABIC_1])
def test_non_ascii_digits_are_one_line_and_exit_2(
    module: str, before: list[str], option: str, digit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = importlib.import_module(module).build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([*before, option, digit])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert option in err


@pytest.mark.parametrize(("module", "before", "option"), OPTIONS)
def test_ascii_digits_are_taken(module: str, before: list[str], option: str) -> None:
    parser = importlib.import_module(module).build_parser()
    value = "127.0.0.1:9867" if option == "--listen" else "3"
    args = parser.parse_args([*before, option, value])
    assert args is not None


def test_the_converters() -> None:
    assert ascii_number(" 2.5 ") == 2.5
    assert ascii_whole("-7") == -7
    assert is_ascii_digits("0123") and not is_ascii_digits("") and not is_ascii_digits("-1")
    assert interval("60") == 60
    for bad in (FULLWIDTH_3, ARABIC_1, "1e", "", "1" * 21):
        with pytest.raises(argparse.ArgumentTypeError):
            ascii_whole(bad)
    for bad in (FULLWIDTH_3, ARABIC_1, "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            ascii_number(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
        interval("61")
