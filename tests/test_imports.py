"""The one-shot paths never import Textual or Rich (import costs ~0.2 s); each check
runs in a fresh interpreter so that other tests' imports do not hide a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
from gputop.cli import main
try:
    rc = main({argv!r})
except SystemExit as exc:
    rc = exc.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich")
               or m.startswith("gputop.ui"))
sys.stderr.write("\\nPROBE " + json.dumps({{"rc": rc, "heavy": heavy}}) + "\\n")
"""


def probe(argv: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    line = next(x for x in r.stderr.splitlines() if x.startswith("PROBE "))
    result: dict[str, object] = json.loads(line.removeprefix("PROBE "))
    return result


@pytest.mark.parametrize(
    ("argv", "rc"),
    [
        (["--once", "--demo"], 0),
        (["--json", "--demo"], 0),
        (["--stream", "--demo", "--count", "1"], 0),
        (["--help"], 0),
        (["--version"], 0),
        (["--interval", "0"], 2),
    ],
)
def test_one_shot_paths_do_not_import_textual_or_rich(argv: list[str], rc: int) -> None:
    result = probe(argv)
    assert result["rc"] == rc
    assert result["heavy"] == []


def test_importing_the_cli_is_light() -> None:
    code = (
        "import sys, gputop.cli, gputop.sampler, gputop.textout, gputop.sources.demo\n"
        "import gputop.stream, gputop.diagnosis\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')]\n"
        "assert not bad, bad\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
