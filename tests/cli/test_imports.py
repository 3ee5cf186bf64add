"""The one-shot paths never import Textual or Rich, nor any module of the dashboard (the
pure views the text is built on live in gputop.views, below both); each check runs in a
fresh interpreter so that other tests' imports do not hide a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakenvml import SCENARIO_ENV, FakeGpu, Scenario

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from gputop.cli import main
try:
    rc = main({argv!r})
except SystemExit as exc:
    rc = exc.code
# the pure views (gputop.views, no Textual) that the --once text is built on may come along
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich")
               or m == "gputop.ui" or m.startswith("gputop.ui."))
sys.stderr.write("\\nPROBE " + json.dumps({{"rc": rc, "heavy": heavy}}) + "\\n")
"""


def probe(argv: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
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


@pytest.mark.parametrize("argv", [["--once"], ["--once", "--json"]], ids=["once", "once-json"])
@pytest.mark.parametrize("nvml", ["no-driver", "fake"])
def test_once_on_the_nvml_and_host_only_paths_does_not_import_textual_or_rich(
    argv: list[str], nvml: str, fake_nvml_env: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    """The real sources, not the demo: with no NVIDIA library at all (host-only, exit 3)
    and with the fake library (two GPUs, exit 0)."""
    if nvml == "fake":
        env = fake_nvml_env(Scenario(gpus=[FakeGpu(), FakeGpu()]))
        env = {**os.environ, **env}
        expected = {0}
    else:
        env = {k: v for k, v in os.environ.items() if k != SCENARIO_ENV}
        env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing there: no libnvidia-ml.so.1
        expected = {3, 0}  # 0 only where a real NVIDIA library is installed
    result = probe(argv, env)
    assert result["rc"] in expected, result
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
