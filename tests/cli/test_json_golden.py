"""The JSON document and the ``--once`` text are byte-identical to those recorded before the
restructuring (``tests/json_golden.py`` says how they are made)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import json_golden


@pytest.fixture
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


#: What the P-state (added after the restructuring, on purpose) put into the documents:
#: one JSON key per GPU and one word on the --once clock line.
PSTATE = re.compile(r'^ *"performance_state": (?:\d+|null),\n|  Perf (?:P\d+|n/a)', re.M)
#: What the owner of a process and a job (issue 22, on purpose) put into the documents: one
#: key per process and job, null where the cgroup names no one.
OWNER = re.compile(r',\n *"owner": null(?=\n)|^ *"owner": null,\n', re.M)
#: What the training process's probe (issue 31, on purpose) put there: one key per process.
PROBE = re.compile(r',\n *"probe": null(?=\n)|^ *"probe": null,\n', re.M)
#: What a process's environment of interest (issue 32, on purpose) put there: one key per
#: process, null where it was not read (the demo and the fake driver read none).
ENVIRONMENT = re.compile(r',\n *"environment": null(?=\n)|^ *"environment": null,\n', re.M)
#: The --once process table's TIME (issue 32 §4, on purpose): the dashboard's spelling,
#: minutes after a process's first minute, where it was AGE to the second. Its 8 columns,
#: header and cells, are masked in both.
TIME_HEADER = re.compile(r"^(GPU +PID USER +GPU-MEM +SM +CPU) +(?:AGE|TIME)(  COMMAND)$", re.M)
TIME_CELL = re.compile(
    r"^( {0,2}\d{1,3} [ \d]{7} .{8} [ \S]{8} [ \S]{4} [ \S]{5} )[ \S]{8}(  )", re.M
)


def _no_time(text: str) -> str:
    return TIME_CELL.sub(r"\1????????\2", TIME_HEADER.sub(r"\1 ????????\2", text))


def test_documents_are_byte_identical_to_the_recorded_ones(tmp_path: Path, utc: None) -> None:
    docs = json_golden.documents(tmp_path)
    assert sorted(docs) == sorted(p.stem for p in json_golden.HERE.glob("*.json"))
    for name, texts in docs.items():
        want = (json_golden.HERE / f"{name}.json").read_text()
        got = "\n".join(texts) + "\n"
        assert got == want, f"{name}: the document differs from the recorded one"


def test_without_the_pstate_they_are_the_documents_of_before_the_restructuring(
    tmp_path: Path, utc: None
) -> None:
    """``json_golden/before/`` holds the documents as the code gave them before the
    restructuring began (6fada32); the only difference since is the P-state."""
    docs = json_golden.documents(tmp_path)
    for name, texts in docs.items():
        before = (json_golden.HERE / "before" / f"{name}.json").read_text()
        got = "\n".join(texts) + "\n"
        assert PSTATE.search(got), name  # the P-state is there ...
        got = OWNER.sub("", PROBE.sub("", ENVIRONMENT.sub("", got)))
        assert TIME_HEADER.search(got) and TIME_CELL.search(got), name  # masked below
        got, before = _no_time(PSTATE.sub("", got)), _no_time(before)
        assert got == before, f"{name}: differs from before the restructuring"
