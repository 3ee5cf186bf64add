"""The JSON document (``--once --json``, ``--stream``) and the ``--once`` text must not change
in a restructuring.

``tests/json_golden/*.json`` hold the documents and the text, byte for byte, that the code
gave before the restructuring of the one-home-per-fact issue (``python -m tests.json_golden
--write`` run on main at 6fada32, before any change; re-recorded once, when the P-state was
added: ``json_golden/before/`` keeps the first recording, and a test checks that the only
difference is the P-state). ``tests/cli/test_json_golden.py`` makes them again
with the code of today and compares the bytes.

Two sources, as the issue asks:
- the demo (seeded, on a fixed clock), with and without MIG, each tick diagnosed;
- the fake ``libnvidia-ml.so.1`` read through the real pynvml (in a subprocess: one process
  loads one library), its GPUs with a fixed host part, so that nothing of this machine
  (its /proc, its clock) is in the bytes.

Only public APIs are used, so that the same documents can be made by older code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from gputop.analysis.thresholds import DEFAULT
from gputop.diagnosis import Diagnoser
from gputop.model import Snapshot, replace
from gputop.sources.demo import DemoSource

HERE = Path(__file__).with_name("json_golden")
START = 1_700_000_000.0
TICKS = 30
PRINTED = (0, 5, 19, 29)  # the ticks whose documents are kept


def _document(snapshot: Snapshot, diagnosis: object) -> str:
    """The JSON document, then the --once text, of one snapshot (public entries only)."""
    import gputop.textout as textout

    render_json = getattr(textout, "render_json", None)
    if render_json is None:  # moved to the neutral presentation module
        from gputop import present  # type: ignore[attr-defined]

        render_json = present.render_json
    text = textout.render_text(snapshot, diagnosis=diagnosis)  # type: ignore[arg-type]
    return render_json(snapshot, diagnosis) + "\n---\n" + text  # type: ignore[no-any-return]


def _diagnose(diagnoser: Diagnoser, history: list[Snapshot]) -> object:
    update = getattr(diagnoser, "update", None)
    if update is not None:
        return update(list(history))
    return diagnoser.push(history[-1])


def _demo(mig: bool) -> Iterator[Snapshot]:
    clock = iter(START + i for i in range(10_000))
    source = DemoSource(seed=3, clock=lambda: next(clock), mig=mig)
    while True:
        yield source.snapshot()


def _diagnosed(snaps: Iterator[Snapshot]) -> list[str]:
    diagnoser = Diagnoser(DEFAULT)
    history: list[Snapshot] = []
    out: list[str] = []
    for i in range(TICKS):
        history.append(next(snaps))
        diagnosis = _diagnose(diagnoser, history)
        if i in PRINTED:
            out.append(_document(history[-1], diagnosis))
    return out


def _fake_child() -> None:
    """In the child: read the fake (its scenario named by the environment), print docs."""
    from gputop.sources.nvml import NvmlReader

    reader = NvmlReader()
    host = next(_demo(False))
    snaps: list[Snapshot] = []
    for i in range(3):
        gpus, errors = reader.read()
        snaps.append(
            replace(
                host,
                time=START + i,
                hostname="golden",
                driver=reader.driver,
                gpus=gpus,
                processes=(),
                unlisted_holders=(),
                errors=errors,
                source="nvml",
                tick_seconds=None,
                tick_cpu_seconds=None,
            )
        )
    reader.close()
    diagnoser = Diagnoser(DEFAULT)
    docs = []
    for i in range(len(snaps)):
        docs.append(_document(snaps[i], _diagnose(diagnoser, snaps[: i + 1])))
    sys.stdout.write(json.dumps(docs))


def fake_scenario() -> object:
    from tests import fakenvml

    return fakenvml.Scenario(
        gpus=[
            fakenvml.FakeGpu(
                util_gpu=97,
                fan=None,
                processes=[
                    fakenvml.FakeProcess(pid=4242, used_memory=30 * 2**30),
                    fakenvml.FakeProcess(pid=4243, used_memory=2 * 2**30),
                ],
            ),
            fakenvml.FakeGpu(errors={"*": "GPU_IS_LOST"}),
            fakenvml.FakeGpu(util_gpu=0, memory_used=200 * 2**20, processes=[]),
            fakenvml.FakeGpu(util_gpu=12, processes=[]),
        ]
    )


def _fake(tmp: Path) -> list[str]:
    from tests import fakenvml

    fakenvml.build()
    target = tmp / "scenario.txt"
    fake_scenario().write(target)  # type: ignore[attr-defined]
    env = fakenvml.subprocess_env(target)
    r = subprocess.run(
        [sys.executable, "-m", "tests.json_golden", "--child"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    docs: list[str] = json.loads(r.stdout)
    return docs


def documents(tmp: Path) -> dict[str, list[str]]:
    return {
        "demo": _diagnosed(_demo(False)),
        "demo_mig": _diagnosed(_demo(True)),
        "fake": _fake(tmp),
    }


def main(argv: Sequence[str]) -> int:
    import os
    import tempfile
    import time

    os.environ["TZ"] = "UTC"  # the --once text prints local time
    time.tzset()

    if "--child" in argv:
        _fake_child()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        docs = documents(Path(tmp))
    if "--write" in argv:
        HERE.mkdir(exist_ok=True)
        for name, texts in docs.items():
            (HERE / f"{name}.json").write_text("\n".join(texts) + "\n")
    else:
        for name, texts in docs.items():
            print(name, [len(t) for t in texts])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
