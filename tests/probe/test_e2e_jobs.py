"""Issue 31 end to end: two real ``torchrun --standalone --nproc-per-node 2`` jobs (gloo, 3
DataLoader workers per rank) under ``gputop run``, one input-bound (its Dataset sleeps in
``__getitem__``, fork) and one fast (spawn), their ranks listed on the fake NVML (one GPU
each), and the real ``gputop`` command looking at them while they train:

- ``--once --json``: each job is one job, with its ranks and its DataLoader workers; its
  ``probe.data_wait_ratio`` is within ``POINTS`` of the truth this test computes itself
  from the ranks' own timing of their ``next()`` calls; the verdicts are
  ``input-bound (measured)`` and ``not input-bound (measured)`` (the fake's GPUs wait: low
  utilization, so the measured low wait is said, not dropped);
- ``--stream --count 2`` carries the same probes;
- ``gputop export --jobs`` serves ``gputop_job_data_wait_ratio`` for both jobs.

Every wait is a bounded poll on a file or a process; the jobs are ended by their process
group in a ``finally``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gputop import probefile
from gputop.analysis.thresholds import DEFAULT
from gputop.sources.probes import OTHERS_CLOSED
from tests import fakenvml
from tests.cli.test_cli import ROOT, run_cli
from tests.conftest import missing, require_root, require_tool
from tests.helpers.exporter import exporter, series
from tests.probe.harness import BOUND, environ, torchrun_path

TRAINER = str(Path(__file__).with_name("steady_trainer.py"))
RANKS = 2
WORKERS = 3
#: How far gputop's data-wait share may be from the truth (the issue's accuracy).
POINTS = 0.10
#: The probe's window full: the figures are a steady state's, not the first batches'.
STEADY_STEPS = probefile.WINDOW_STEPS + 10
#: ``--stream`` lines at 0.5 s: past the verdicts' warm-up (5 samples over 4 s).
STREAM_LINES = 12


@dataclass
class Launched:
    name: str
    proc: subprocess.Popen[str]
    out: Path
    log: Path

    def ranks(self) -> dict[int, dict[str, Any]]:
        """The ranks' latest reports, by pid."""
        found = {}
        for path in self.out.glob("rank-*.json"):
            with contextlib.suppress(OSError, ValueError):
                report = json.loads(path.read_text())
                found[report["pid"]] = report
        return found


def poll(check: Any, what: str, jobs: list[Launched], timeout: float = BOUND) -> Any:
    """``check()``'s first truthy value, polled until ``timeout``; fails early, with the
    job's output, when a job has ended."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        for job in jobs:
            if job.proc.poll() is not None:
                pytest.fail(
                    f"{job.name} ended ({job.proc.returncode}): {job.log.read_text()[-3000:]}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)  # polling a condition, bounded by the deadline


@contextlib.contextmanager
def launched(
    base: Path,
    specs: dict[str, list[str]],
    env: dict[str, str],
    torchrun: list[str],
    probe_dir: Path,
    python: str = sys.executable,
    prefix: tuple[str, ...] = (),
) -> Iterator[list[Launched]]:
    """Each spec as a ``torchrun`` job under ``gputop run`` (``prefix``: e.g. runuser),
    its reports in ``base/NAME``; stopped by a file at the end, killed on the way out
    (then the probe files of its ranks, which a killed rank leaves, removed)."""
    jobs: list[Launched] = []
    try:
        for name, args in specs.items():
            out = base / name
            out.mkdir()
            log = base / f"{name}.log"
            # from a shell, as a user starts it: the job's root is torchrun, below the shell
            argv = ["bash", "-c", '"$@"; exit $?', "bash", *prefix, python, "-m", "gputop",
                    "run", "--", *torchrun, "--standalone", "--nproc-per-node", str(RANKS),
                    TRAINER, str(out), "--workers", str(WORKERS), "--deadline", str(BOUND),
                    *args]  # fmt: skip
            with log.open("w") as f:
                proc = subprocess.Popen(
                    argv, env=env, stdout=f, stderr=subprocess.STDOUT, text=True,
                    start_new_session=True,
                )  # fmt: skip
            jobs.append(Launched(name, proc, out, log))
        yield jobs
        for job in jobs:  # a clean end: each rank leaves its loop and its group
            (job.out / "stop").touch()
        for job in jobs:
            job.proc.wait(timeout=120)
    finally:
        for job in jobs:
            if job.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.proc.pid, signal.SIGKILL)
                job.proc.wait(timeout=30)
            for report in job.ranks().values():  # in case a rank left the group
                for pid in (report["pid"], *report["workers"]):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                (probe_dir / probefile.file_name(report["pid"])).unlink(missing_ok=True)


def truth(report: dict[str, Any], probe: dict[str, Any]) -> float:
    """The rank's data-wait share over the steps the probe's figure covers: its last
    ``probe["steps"]`` steps whose batch came by the probe's time stamp, each from one
    batch in hand to the next, the wait from the ``next()`` call to its batch."""
    pairs = [p for p in itertools.pairwise(report["batches"]) if p[1][1] <= probe["time"]]
    pairs = pairs[-probe["steps"] :]
    assert len(pairs) == probe["steps"], (len(pairs), probe)
    step = sum(t1 - before for (_, before), (_, t1) in pairs)
    wait = sum(t1 - t0 for _, (t0, t1) in pairs)
    return wait / step


def probed(doc: dict[str, Any], pids: set[int]) -> dict[int, dict[str, Any]]:
    return {p["pid"]: p["probe"] for p in doc["processes"] if p["pid"] in pids and p["probe"]}


@pytest.mark.timeout(3 * BOUND)
def test_two_torchrun_jobs_measured_by_gputop(tmp_path: Path, fake_nvml_env: Any) -> None:
    # a fast job's wait is the workers' hand-over, a fraction of a millisecond even on a
    # loaded machine: a long step keeps it far under the threshold
    specs = {
        "slow": ["--dataset", "slow", "--context", "fork", "--step", "0.01"],
        "fast": ["--dataset", "fast", "--context", "spawn", "--step", "0.15"],
    }
    torchrun = [torchrun_path()]
    probe_dir = tmp_path / "probes"
    with launched(tmp_path, specs, environ(probe_dir), torchrun, probe_dir) as jobs:
        # every rank has filled the probe's window, and published it
        def steady(job: Launched) -> dict[int, dict[str, Any]] | None:
            r = job.ranks()
            ok = len(r) == RANKS and all(
                x["steps"] >= STEADY_STEPS and len(x["workers"]) == WORKERS for x in r.values()
            )
            return r if ok else None

        ranks = {
            job.name: poll(
                lambda job=job: steady(job),
                f"{job.name}'s ranks to reach {STEADY_STEPS} steps",
                jobs,
            )
            for job in jobs
        }
        all_pids = [pid for r in ranks.values() for pid in sorted(r)]
        poll(
            lambda: all((probe_dir / probefile.file_name(pid)).exists() for pid in all_pids),
            "every rank's probe file", jobs,
        )  # fmt: skip
        # one GPU per rank; the GPUs wait (low utilization) in both jobs
        scenario = fakenvml.Scenario(
            gpus=[
                fakenvml.FakeGpu(util_gpu=10, processes=[fakenvml.FakeProcess(pid=pid)])
                for pid in all_pids
            ]
        )
        env = fake_nvml_env(scenario)
        env["GPUTOP_PROBE_DIR"] = str(probe_dir)

        r = run_cli("--once", "--json", env=env)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        doc = json.loads(r.stdout)
        said = [e for e in doc["errors"] if e["source"] == "probe"]
        assert not [e for e in said if str(probe_dir) in e["message"]], said
        by_root = {j["root_pid"]: j for j in doc["jobs"]}
        roots: dict[str, int] = {}
        for job in jobs:
            rank_pids = set(ranks[job.name])
            # torchrun, exec'd in gputop run's place, is the job's root: one job per launch
            (agent,) = {x["ppid"] for x in ranks[job.name].values()}
            found = [j for j in doc["jobs"] if rank_pids & set(j["pids"])]
            assert [j["root_pid"] for j in found] == [agent], doc["jobs"]
            roots[job.name] = agent
            got = by_root[agent]
            assert {g["pid"] for g in got["gpu_pids"]} == rank_pids
            assert len(got["gpus"]) == RANKS
            dl_workers = {w for x in ranks[job.name].values() for w in x["workers"]}
            assert len(dl_workers) == RANKS * WORKERS
            assert dl_workers <= set(got["worker_pids"]), (dl_workers, got["worker_pids"])
            assert got["probe"]["ranks"] == RANKS, got["probe"]

        # the truth, from each rank's own timing over the probe's window
        for job in jobs:
            rank_pids = set(ranks[job.name])
            probes = probed(doc, rank_pids)
            assert set(probes) == rank_pids, doc["processes"]

            # the ranks keep reporting: wait for a report past the probe's time stamp
            def past(job: Launched, probes: dict[int, dict[str, Any]]) -> dict[int, Any] | None:
                r = job.ranks()
                ok = all(r[pid]["batches"][-1][1] >= probes[pid]["time"] for pid in probes)
                return r if ok else None

            latest = poll(
                lambda job=job, probes=probes: past(job, probes),
                f"{job.name}'s reports past the probes' time", jobs, timeout=60,
            )  # fmt: skip
            truths = {pid: truth(latest[pid], probes[pid]) for pid in probes}
            for pid, want in truths.items():
                assert abs(probes[pid]["data_wait_ratio"] - want) <= POINTS, (pid, probes, truths)
            job_truth = sum(truths.values()) / len(truths)
            got = by_root[roots[job.name]]
            print(
                f"{job.name}: gputop {got['probe']['data_wait_ratio']:.3f}, truth {job_truth:.3f}"
            )
            assert abs(got["probe"]["data_wait_ratio"] - job_truth) <= POINTS, (got, truths)

        slow, fast = (by_root[roots[job.name]] for job in jobs)
        assert 100 * slow["probe"]["data_wait_ratio"] > DEFAULT.data_wait_high  # it sleeps
        assert slow["verdict"]["kind"] == "input-bound (measured)", slow["verdict"]
        assert slow["verdict"]["severity"] == "warn"
        assert 100 * fast["probe"]["data_wait_ratio"] <= DEFAULT.data_wait_moderate, fast["probe"]
        # one sample: the load is not judged yet (docs/verdicts.md: `warming up` outranks a
        # measured low wait, which it names in `also`; a measured high wait outranks it)
        assert fast["verdict"]["kind"] == "warming up", fast["verdict"]
        assert "not input-bound (measured)" in fast["verdict"]["also"], fast["verdict"]

        # --stream carries the probes, line after line; once warmed up, the fast job's
        # GPUs wait (low utilization) while its input keeps up: not input-bound (measured)
        r = run_cli("--stream", "--count", str(STREAM_LINES), "--interval", "0.5", env=env)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == STREAM_LINES
        for line in lines:
            doc = json.loads(line)
            assert set(probed(doc, set(all_pids))) == set(all_pids)
            kinds = {j["root_pid"]: j["verdict"]["kind"] for j in doc["jobs"]}
            assert kinds[roots["slow"]] == "input-bound (measured)"
            assert all(
                j["probe"]["ranks"] == RANKS for j in doc["jobs"] if j["root_pid"] in roots.values()
            )
        verdict = {j["root_pid"]: j["verdict"] for j in doc["jobs"]}[roots["fast"]]
        print(f"fast, after {STREAM_LINES} lines: {verdict}")
        assert verdict["kind"] == "not input-bound (measured)", verdict

        # the exporter serves each job's data wait, labelled by its GPUs
        with exporter(["--jobs", "--interval", "0.5"], env=env, tmp=tmp_path) as exp:
            want = {
                ",".join(str(g) for g in j["gpus"]): j["probe"]["data_wait_ratio"]
                for j in (slow, fast)
            }

            def served() -> dict[frozenset[tuple[str, str]], float] | None:
                s = series(exp.samples(), "gputop_job_data_wait_ratio")
                return s if len(s) == len(want) else None

            got_series = poll(served, "gputop_job_data_wait_ratio for both jobs", jobs, timeout=60)
            values = {dict(labels)["gpus"]: v for labels, v in got_series.items()}
            assert set(values) == set(want), values
            for gpus, ratio in want.items():
                assert abs(values[gpus] - ratio) <= POINTS, (values, want)
            steps = series(exp.samples(), "gputop_job_step_seconds")
            assert len(steps) == len(want)


# --- a plain user's job ---------------------------------------------------------------

#: The system's interpreter: a plain user cannot run this venv's, under /root.
SYSTEM_PYTHON = "/usr/bin/python3"
#: Another plain user than the job's: its gputop must not read the job's probes.
OTHER_USER = "daemon"


def plain_user_python() -> tuple[str, str]:
    """(the system's python, a PYTHONPATH giving it this checkout and this venv's
    packages, torch included), for a plain user; missing() where that cannot work."""
    require_root("runs the job as nobody and gputop as another plain user")
    torchrun_path()
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        missing(f"{SYSTEM_PYTHON} is not there")
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True, text=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    if version != str(tuple(sys.version_info[:2])):
        missing(f"{SYSTEM_PYTHON} is {version}, not this venv's Python: it cannot load its torch")
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    path = f"{ROOT}:{Path(spec.origin).parents[1]}"
    # a checkout or a venv under a home only its owner can enter is out of a plain user's
    # reach: said as a missing prerequisite, not as the job's failure
    can = subprocess.run(
        [require_tool("runuser"), "-u", "nobody", "--", SYSTEM_PYTHON, "-c",
         "import torch, gputop.probe"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path}, capture_output=True, text=True,
        timeout=120, cwd="/",
    )  # fmt: skip
    if can.returncode != 0:
        # Where the checkout lies is the machine's choice, not a tool CI can install: a
        # checkout under a home only its owner enters skips this test, in CI too (the
        # reader's own tests run their plain user without the checkout).
        pytest.skip(f"nobody cannot import torch and gputop from {path}: {can.stderr[-300:]}")
    return SYSTEM_PYTHON, path


@pytest.mark.requires_root
@pytest.mark.timeout(3 * BOUND)
def test_a_plain_users_job_is_read_by_root_and_not_by_another_user(fake_nvml_env: Any) -> None:
    """The job runs as nobody (its probe writes to nobody's own directory, 0700): gputop as
    root reads its ranks' probes; gputop as another plain user reads none and says why
    (the reader's line: other users' probes are not readable here)."""
    runuser = require_tool("runuser")
    python, path = plain_user_python()
    nobody = pwd.getpwnam("nobody").pw_uid
    # a directory both plain users can reach: nobody's reports, the fake NVML's scenario
    own = Path(probefile.dirs_of(nobody)[-1])  # /tmp/gputop-65534: no runtime dir
    made_own = not own.exists()  # the probe makes it: the test removes what it made
    base = Path(tempfile.mkdtemp(prefix="gputop-e2e-"))
    try:
        base.chmod(0o755)
        os.chown(base, nobody, nobody)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
        prefix = (runuser, "-u", "nobody", "--")
        torchrun = [python, "-m", "torch.distributed.run"]
        specs = {"slow": ["--dataset", "slow", "--context", "fork", "--step", "0.01"]}
        with launched(base, specs, env, torchrun, own, python, prefix) as jobs:
            for job in jobs:
                os.chown(job.out, nobody, nobody)
            (job,) = jobs

            def steady() -> dict[int, dict[str, Any]] | None:
                r = job.ranks()
                ok = len(r) == RANKS and all(x["steps"] >= STEADY_STEPS for x in r.values())
                return r if ok else None

            ranks = poll(steady, "nobody's ranks to reach their steady state", jobs)
            pids = sorted(ranks)
            poll(
                lambda: all((own / probefile.file_name(p)).exists() for p in pids),
                f"the ranks' probe files in {own}", jobs,
            )  # fmt: skip
            assert own.stat().st_uid == nobody and own.stat().st_mode & 0o777 == 0o700
            scenario = fakenvml.Scenario(
                gpus=[
                    fakenvml.FakeGpu(util_gpu=10, processes=[fakenvml.FakeProcess(pid=p)])
                    for p in pids
                ]
            )
            scenario_path = base / "scenario.txt"
            gputop_env = fake_nvml_env(scenario, scenario_path)
            scenario_path.chmod(0o644)
            for key in (probefile.DIR_ENV, "XDG_RUNTIME_DIR"):
                gputop_env.pop(key, None)  # where gputop looks: each user's own directories

            # root reads every user's directory
            r = run_cli("--once", "--json", env=gputop_env)
            assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
            doc = json.loads(r.stdout)
            assert set(probed(doc, set(pids))) == set(pids), doc["errors"]
            (got,) = [j for j in doc["jobs"] if set(pids) <= set(j["pids"])]
            assert got["user"] == "nobody" and got["probe"]["ranks"] == RANKS
            assert got["verdict"]["kind"] == "input-bound (measured)", got["verdict"]

            # another plain user sees the processes, not their probes, and says so
            other = {**gputop_env, "PYTHONPATH": path, "HOME": "/nonexistent"}
            other["XDG_CONFIG_HOME"] = "/nonexistent"  # (the tests' config dir is root's)
            done = subprocess.run(
                [runuser, "-u", OTHER_USER, "--", python, "-m", "gputop", "--once", "--json"],
                env=other, capture_output=True, text=True, timeout=120, cwd="/",
            )  # fmt: skip
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            doc = json.loads(done.stdout)
            shown = {p["pid"] for p in doc["processes"]}
            assert set(pids) <= shown
            assert probed(doc, set(pids)) == {}
            said = [e["message"] for e in doc["errors"] if e["source"] == "probe"]
            assert OTHERS_CLOSED in said, doc["errors"]
            (got,) = [j for j in doc["jobs"] if set(pids) <= set(j["pids"])]
            assert got["probe"] is None
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if made_own:
            shutil.rmtree(own, ignore_errors=True)
