"""A remote ``gputop --stream`` line is checked by type and shape, not only by value (issue
29, class 4): each field replaced by each JSON type is n/a with an error (or its row left
out, or the line refused), never an exception; integers out of range, pid-0 rows, cut
lists and a time of hundreds of digits are said in words. The fuzz is seeded (the seed is
printed; GPUTOP_FUZZ_SEED=<seed> replays it) and of a fixed size."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from gputop.model import MAX_ITEMS, Snapshot, check_values
from gputop.present import render_json
from gputop.sources.remote import LineError, parse_line, summarize, to_snapshot
from gputop.textout import render_text
from tests.builders import demo_host_lines
from tests.helpers.shapes import JSON_TYPES, REPR, by_field, get, kept_or_said, mutated, pattern


@pytest.fixture(scope="module")
def line() -> dict[str, Any]:
    """A demo line with a part of each kind: MIG devices, an owner, an error, a holder (two
    of its GPUs: a fuzz round is the quicker)."""
    data = demo_host_lines(3, 2, mig=True)[-1]
    data["gpus"] = [data["gpus"][0], data["gpus"][4]]
    data["errors"] = [{"source": "nvml", "message": "x", "gpu": 0, "metric": "power"}]
    data["processes"][0]["owner"] = {"kind": "slurm", "slurm_job": "12", "unit": "x"}
    return data


def remote(data: dict[str, Any]) -> Snapshot:
    return to_snapshot(parse_line(json.dumps(data)))


def said(snap: Snapshot) -> dict[str, str]:
    return {e.metric or "": e.message for e in snap.errors if e.source == "remote"}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("processes", 0, "rss"), 2**64),
        (("processes", 0, "rss"), 10**400),
        (("gpus", 0, "ecc_uncorrected"), 2**64 + 5),
        (("gpus", 0, "processes", 0, "gpu_memory"), -(2**70)),
    ],
)
def test_integers_out_of_range_get_an_error_as_in_recordings(
    line: dict[str, Any], path: tuple[Any, ...], value: int
) -> None:
    snap = remote(mutated(line, path, value))
    errors = said(snap)
    (metric,) = errors
    assert metric.endswith(path[-1]) and "shown as n/a" in errors[metric], errors
    assert "Traceback" not in render_text(snap)


@pytest.mark.parametrize(
    "path",
    [("gpus", 0, "processes", 0, "pid"), ("processes", 0, "pid"), ("unlisted_holders", 0, "pid")],
)
@pytest.mark.parametrize("pid", [0, 2**32 - 1])
def test_a_pid_0_row_is_left_out_with_an_error_as_locally(
    line: dict[str, Any], path: tuple[Any, ...], pid: int
) -> None:
    rows = len(line[path[0]]) if len(path) == 3 else len(line["gpus"][0]["processes"])
    snap = remote(mutated(line, path, pid))
    left = snap.processes if path[0] == "processes" else snap.unlisted_holders
    if len(path) == 5:
        left = snap.gpus[0].processes  # type: ignore[assignment]
    assert len(left) == rows - 1 and all(p.pid != pid for p in left)
    errors = said(snap)
    assert list(errors) == [".".join(str(k) for k in path[-3:] if type(k) is str)]  # GPU: its own
    assert "never a real process: left out" in next(iter(errors.values()))


def test_a_cut_process_list_says_how_many_rows_were_cut(line: dict[str, Any]) -> None:
    data = json.loads(json.dumps(line))
    row = data["processes"][0]
    data["processes"] = [{**row, "pid": 1000 + i} for i in range(MAX_ITEMS + 904)]
    snap = remote(data)
    assert len(snap.processes) == MAX_ITEMS
    assert said(snap)["processes"] == (
        f"the remote host reported processes = a list of {MAX_ITEMS + 904}, "
        f"more than {MAX_ITEMS}: the last 904 left out"
    )


@pytest.mark.parametrize("digits", [400, 4000])
def test_a_time_of_hundreds_of_digits_is_refused_not_an_overflow(digits: int) -> None:
    with pytest.raises(LineError, match=f"its time a number of {digits} digits"):
        parse_line('{"schema":1,"time":' + "9" * digits + ',"gpus":[]}')


#: What only the whole snapshot has (and what parse_line reads): wrong, the line is refused.
REQUIRED = {"schema", "time", "hostname", "driver", "driver.available", "gpus"}


def test_every_field_of_a_line_by_each_json_type(line: dict[str, Any], fuzz_seed: int) -> None:
    """Fuzz: one row of each field (and the keys the stream adds: verdicts, jobs), every
    JSON type in a seeded quarter of the fields, one random type in the rest.
    Seeded: GPUTOP_FUZZ_SEED replays it."""
    rng = random.Random(fuzz_seed)
    tried = 0
    model = to_snapshot(line).to_dict()
    for path in by_field(line, rng):
        values = JSON_TYPES if rng.random() < 0.25 else (rng.choice(JSON_TYPES),)
        for value in values:
            tried += 1
            where = f"seed {fuzz_seed}: {pattern(path)} = {value!r:.60}"
            text = json.dumps(mutated(line, path, value))
            try:
                data = parse_line(text)
                summarize(data)  # the fleet row reads every line
                snap = to_snapshot(data)
            except LineError as exc:
                assert pattern(path) in REQUIRED, f"{where}: {exc}"
                continue
            try:  # a path of the model (not a key only the stream adds)
                get(model, path)
                in_model = True
            except (KeyError, IndexError, TypeError):
                in_model = False
            if in_model:
                errors = list(said(snap).values())
                problem = kept_or_said(snap.to_dict(), path, value, errors, "the remote host")
                assert problem is None, f"{where}: {problem}"
            assert check_values(snap, "remote", "the remote host") is snap, where
            shown = render_text(snap)
            assert not REPR.search(shown), f"{where}:\n{shown}"
            json.loads(render_json(snap))
    assert tried > 100, f"seed {fuzz_seed}"
