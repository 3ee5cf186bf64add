"""``gputop export`` for real: a subprocess on the demo or on the fake libnvidia-ml, checked
by Debian's promtool and scraped by a real Prometheus (both installed by ``.ci/run``).

Every process a test starts (exporter, Prometheus, the stand-in job) is stopped in a
``finally``/context manager, also when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.analysis.kinds import KINDS
from tests.fakenvml import FakeGpu, FakeMig, FakeProcess, GiB, Scenario, subprocess_env
from tests.helpers.exporter import (
    DASHBOARD,
    dashboard_queries,
    exporter,
    parse,
    prometheus,
    series,
)
from tests.lifecycle_harness import need as need_tool

pytestmark = pytest.mark.timeout(180)

Env = Callable[..., dict[str, str]]


def need(tool: str) -> str:
    """The tool's path; skips without it, fails instead under CI=true (.ci/run installs
    Debian's prometheus, which brings prometheus and promtool)."""
    need_tool(tool)
    path = shutil.which(tool)
    assert path is not None
    return path


def once_json(args: list[str], env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    run_env = dict(os.environ if env is None else env)
    run_env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "--once", "--json", *args],
        capture_output=True,
        text=True,
        env=run_env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data: dict = json.loads(out.stdout)  # type: ignore[type-arg]
    return data


def wait_until(check: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextlib.contextmanager
def job_process() -> Iterator[int]:
    """A real process standing in for a training job, launched from a shell (the shell
    stays its parent, as for a user's launch; a job's root never climbs past a shell)."""
    argv = [sys.executable, "-c", "import sys,time; print('ready', flush=True); time.sleep(120)"]
    proc = subprocess.Popen(
        ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready and proc.stdout.readline().startswith(b"ready")
        import psutil

        (child,) = psutil.Process(proc.pid).children()
        yield child.pid
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


# --- promtool -----------------------------------------------------------------------


def test_promtool_check_metrics_on_demo_with_jobs(tmp_path: Path) -> None:
    promtool = need("promtool")
    with exporter(["--demo", "--jobs"], tmp=tmp_path) as exp:
        text = exp.scrape()
    assert "gputop_job_verdict{" in text and "gputop_gpu_verdict{" in text
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "" and check.stderr.strip() == "", check.stdout + check.stderr


def test_mig_devices_on_the_fake_nvml_match_once_json(tmp_path: Path, fake_nvml_env: Env) -> None:
    promtool = need("promtool")
    migs = [FakeMig(0, 1, 0, "3g.40gb", 40 * GiB, 5 * GiB), FakeMig(1, 2, 0, "3g.40gb", 40 * GiB)]
    env = fake_nvml_env(
        Scenario(gpus=[FakeGpu(), FakeGpu(mig_mode=(1, 1), util_gpu=None, migs=migs)]),
        tmp_path / "s.txt",
    )
    doc = once_json([], env)
    want = doc["gpus"][1]["mig_devices"]
    assert len(want) == 2
    with exporter([], env=env, tmp=tmp_path) as exp:
        text = exp.scrape()
    samples = parse(text)
    info = series(samples, "gputop_gpu_mig_info", gpu="1")
    assert {dict(lab)["uuid"] for lab in info} == {m["uuid"] for m in want}
    for m in want:
        mig = str(m["index"])
        used = series(samples, "gputop_gpu_mig_memory_used_bytes", gpu="1", mig=mig)
        total = series(samples, "gputop_gpu_mig_memory_total_bytes", gpu="1", mig=mig)
        assert list(used.values()) == [m["memory"]["used"]]
        assert list(total.values()) == [m["memory"]["total"]]
    assert not series(samples, "gputop_gpu_utilization_ratio", gpu="1")  # n/a under MIG
    assert not series(samples, "gputop_gpu_mig_info", gpu="0")
    check = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout


#: The issue's families of what is inside utilization, and where --json has each value
#: (with the factor from --json's unit to the exported one).
INSIDE = {
    ("gputop_gpu_sm_active_ratio", ()): ("activity", "sm", 0.01),
    ("gputop_gpu_sm_occupancy_ratio", ()): ("activity", "sm_occupancy", 0.01),
    ("gputop_gpu_tensor_active_ratio", ()): ("activity", "tensor", 0.01),
    ("gputop_gpu_dram_active_ratio", ()): ("activity", "dram", 0.01),
    **{
        ("gputop_gpu_pipe_active_ratio", (("pipe", p),)): ("activity", p, 0.01)
        for p in ("fp64", "fp32", "fp16")
    },
    **{
        ("gputop_gpu_nvlink_bytes_per_second", (("direction", d),)): (
            "nvlink",
            f"{d}_bytes_per_s",
            1.0,
        )
        for d in ("rx", "tx")
    },
    ("gputop_gpu_nvlink_link_max_bytes_per_second", ()): ("nvlink", "max_bytes_per_s", 1.0),
}


def test_gpm_and_nvlink_on_the_fake_hopper_pass_promtool_and_prometheus_agrees_with_json(
    tmp_path: Path, fake_nvml_env: Env
) -> None:
    """Two H100s with GPM and NVLink to each other (GPU 1's FP16 pipe and tensor metric
    NOT_SUPPORTED), a MIG H100 with GPM per GPU instance, and a GPU without either: the
    scrape passes promtool, and a real Prometheus holds the values of ``--once --json``;
    n/a is no series."""
    promtool = need("promtool")
    need("prometheus")
    from tests.fakenvml import HOPPER_GPM, hopper

    migs = [FakeMig(0, 1, 0, "3g.40gb", 40 * GiB, 5 * GiB)]
    scenario = Scenario(
        gpus=[
            hopper(0, 2),
            hopper(1, 2, gpm_metrics={**HOPPER_GPM, 5: None, 13: None}),
            hopper(2, links=0, mig_mode=(1, 1), util_gpu=None, migs=migs),
            FakeGpu(),
        ]
    )
    env = fake_nvml_env(scenario, tmp_path / "s.txt")
    doc = once_json([], env)
    gpus = {str(g["index"]): g for g in doc["gpus"]}
    assert gpus["0"]["activity"]["sm"] is not None and gpus["1"]["activity"]["fp16"] is None
    with (
        exporter(["--interval", "0.5"], env=env, tmp=tmp_path) as exp,
        prometheus([exp.url.removeprefix("http://")], tmp_path) as prom,
    ):
        wait_until(lambda: bool(series(exp.samples(), "gputop_gpu_sm_active_ratio")), what="GPM")
        text = exp.scrape()
        check = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
        )
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout
        samples = parse(text)
        prom.wait_for("gputop_gpu_nvlink_link_max_bytes_per_second")
        for (name, extra), (part, key, factor) in INSIDE.items():
            result = prom.wait_for(name)
            for gpu, g in gpus.items():
                want = (g.get(part) or {}).get(key)
                labels = dict(extra, gpu=gpu)
                rows = [
                    r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())
                ]
                if want is None:  # not available: no series, never 0
                    assert not rows, (name, labels)
                    assert not series(samples, name, **labels), (name, labels)
                else:
                    assert _value(result, **labels) == pytest.approx(want * factor), (name, gpu)
        # The MIG device: its GPU instance's activity, beside its memory.
        (mig,) = gpus["2"]["mig_devices"]
        assert mig["activity"]["sm"] is not None
        sm = prom.wait_for("gputop_gpu_mig_sm_active_ratio")
        assert _value(sm, gpu="2", mig=str(mig["index"])) == pytest.approx(
            mig["activity"]["sm"] / 100
        )
        # The board's new panels query these families and get an answer.
        for expr in dashboard_queries("1m"):
            if "sm_active" in expr or "nvlink" in expr:
                assert prom.query(expr), expr


# --- a real Prometheus --------------------------------------------------------------


def _value(result: list[dict], **labels: str) -> float:  # type: ignore[type-arg]
    rows = [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]
    assert len(rows) == 1, (labels, result)
    return float(rows[0]["value"][1])


def test_prometheus_scrapes_the_demo_and_agrees_with_once_json(tmp_path: Path) -> None:
    need("prometheus")
    seed = ["--demo", "--seed", "3"]
    doc = once_json(seed)
    with (
        exporter([*seed, "--jobs"], tmp=tmp_path) as exp,
        prometheus([exp.url.removeprefix("http://")], tmp_path) as prom,
    ):
        info = prom.wait_for("gputop_gpu_info")
        assert prom.targets_up()
        assert len(info) == len(doc["gpus"]) == 8
        for g in doc["gpus"]:
            (row,) = [r["metric"] for r in info if r["metric"]["gpu"] == str(g["index"])]
            assert row["uuid"] == g["uuid"]
            assert row["name"] == g["name"]
            assert row["pci_bus_id"] == g["pci_bus_id"]
            assert row["driver_version"] == doc["driver"]["driver_version"]
        # What does not move in the simulation must be equal to the byte.
        total = prom.query("gputop_gpu_memory_total_bytes")
        limit = prom.query("gputop_gpu_power_limit_watts")
        link = prom.query("gputop_gpu_pcie_link_max_bytes_per_second")
        for g in doc["gpus"]:
            gpu = str(g["index"])
            assert _value(total, gpu=gpu) == g["memory"]["total"]
            assert _value(limit, gpu=gpu) == pytest.approx(g["power_limit_w"])
            assert _value(link, gpu=gpu) == pytest.approx(g["pcie"]["link_max_bytes_per_s"])
        # Each GPU has exactly one current verdict, and its counters exist.
        verdicts = prom.wait_for("gputop_gpu_verdict == 1")
        assert sorted(r["metric"]["gpu"] for r in verdicts) == [str(i) for i in range(8)]
        assert prom.query("count(gputop_gpu_verdict_seconds_total)")
        # The jobs: the same (user, short command, GPUs) as --json, no pid anywhere.
        jobs = prom.wait_for("gputop_job_gpu_memory_bytes")
        exported = {(r["metric"].get("user", ""), r["metric"]["gpus"]) for r in jobs}
        expected = {(j["user"] or "", ",".join(map(str, j["gpus"]))) for j in doc["jobs"]}
        assert exported == expected
        assert not any("pid" in k for r in jobs for k in r["metric"])
        # The short command arrives as itself (a "job" label would become exported_job).
        assert all(r["metric"]["job"] == "gputop" for r in jobs)
        assert {r["metric"].get("command") for r in jobs} >= {"torchrun", "python"}
        # The self-health series, and the exporter's own footprint (no Textual: <= 40 MiB).
        age = prom.wait_for("time() - gputop_last_sample_timestamp_seconds")
        assert 0 <= float(age[0]["value"][1]) < 10
        rss = prom.wait_for("process_resident_memory_bytes")
        assert float(rss[0]["value"][1]) <= 40 * 2**20
        # Every query of the Grafana dashboard runs, and the verdict timeline's code is the
        # rank of each GPU's verdict kind.
        for expr in dashboard_queries("1m"):
            prom.query(expr)  # asserts status "success"
        # The example queries of docs/exporter.md run too.
        doc = (Path(__file__).resolve().parents[2] / "docs" / "exporter.md").read_text()
        examples = re.findall(r"```promql\n(.*?)```", doc, re.DOTALL)
        assert len(examples) >= 5
        for expr in examples:
            prom.query(expr)
        board = json.loads(DASHBOARD.read_text())
        (timeline,) = [p for p in board["panels"] if p["type"] == "state-timeline"]
        expr = timeline["targets"][0]["expr"].replace("$instance", ".*").replace("$gpu", ".*")
        codes = {r["metric"]["gpu"]: float(r["value"][1]) for r in prom.wait_for(expr)}
        assert sorted(codes) == [str(i) for i in range(8)]
        assert all(c in range(1, len(KINDS) + 1) for c in codes.values()), codes


def test_prometheus_values_match_once_json_on_fake_nvml_and_an_ended_job_vanishes(
    tmp_path: Path, fake_nvml_env: Env
) -> None:
    need("prometheus")
    with job_process() as pid:
        scenario = Scenario(
            gpus=[
                FakeGpu(util_gpu=37, processes=[FakeProcess(pid, used_memory=3 * GiB)]),
                FakeGpu(util_gpu=91, fan=None, power_mw=None),  # n/a: missing series
            ]
        )
        path = tmp_path / "scenario.txt"
        env = fake_nvml_env(scenario, path)
        doc = once_json([], env)
        assert [p["pid"] for p in doc["gpus"][0]["processes"]] == [pid]
        with (
            exporter(["--jobs", "--interval", "0.5"], env=env, tmp=tmp_path) as exp,
            prometheus([exp.url.removeprefix("http://")], tmp_path) as prom,
        ):
            prom.wait_for("gputop_gpu_utilization_ratio")
            for g in doc["gpus"]:
                gpu = str(g["index"])
                checks = {
                    "gputop_gpu_utilization_ratio": g["utilization"]["gpu"] / 100,
                    "gputop_gpu_memory_used_bytes": g["memory"]["used"],
                    "gputop_gpu_memory_total_bytes": g["memory"]["total"],
                    "gputop_gpu_memory_reserved_bytes": g["memory"]["reserved"],
                    "gputop_gpu_temperature_celsius": g["temperature_c"],
                    "gputop_gpu_power_limit_watts": g["power_limit_w"],
                    "gputop_gpu_sm_clock_hertz": g["clocks"]["sm_mhz"] * 1e6,
                    "gputop_gpu_pcie_link_gen": g["pcie"]["gen"],
                    "gputop_gpu_pcie_link_max_width": g["pcie"]["max_width"],
                }
                for name, want in checks.items():
                    assert _value(prom.query(name), gpu=gpu) == pytest.approx(want), name
                tx = prom.query('gputop_gpu_pcie_bytes_per_second{direction="tx"}')
                assert _value(tx, gpu=gpu) == pytest.approx(g["pcie"]["tx_bytes_per_s"])
            # GPU 0 has power and fan; GPU 1 has neither: no series, never 0.
            assert _value(prom.query("gputop_gpu_fan_ratio"), gpu="0") == pytest.approx(0.3)
            assert [r["metric"]["gpu"] for r in prom.query("gputop_gpu_fan_ratio")] == ["0"]
            assert [r["metric"]["gpu"] for r in prom.query("gputop_gpu_power_watts")] == ["0"]
            # The job: same user, GPU memory as --json; then it ends and its series go.
            (job,) = doc["jobs"]
            mem = prom.wait_for("gputop_job_gpu_memory_bytes")
            assert _value(mem, gpus="0") == job["gpu_memory"] == 3 * GiB
            assert mem[0]["metric"]["user"] == job["user"]
            assert prom.wait_for('gputop_job_verdict{gpus="0"}')
            os.kill(pid, signal.SIGKILL)  # the job dies; NVML stops listing it
            Scenario(gpus=[FakeGpu(util_gpu=37), scenario.gpus[1]]).write(path)
            wait_until(
                lambda: not series(exp.samples(), "gputop_job_gpu_memory_bytes"),
                what="the job's series to leave the scrape",
            )
            for name in ("gputop_job_gpu_memory_bytes", "gputop_job_workers", "gputop_job_verdict"):
                assert not series(exp.samples(), name), name
                prom.wait_for(name, empty=True)


# --- faults ---------------------------------------------------------------------------


def test_slow_nvml_scrapes_answer_at_once_with_the_last_sample(
    tmp_path: Path, fake_nvml_env: Env
) -> None:
    path = tmp_path / "scenario.txt"
    env = fake_nvml_env(Scenario(gpus=[FakeGpu(util_gpu=42)]), path)
    with exporter(["--interval", "0.5"], env=env, tmp=tmp_path) as exp:
        wait_until(
            lambda: bool(series(exp.samples(), "gputop_gpu_utilization_ratio")), what="a sample"
        )
        # Every NVML call on the GPU now takes 3 s: the sampler is stuck in them.
        Scenario(gpus=[FakeGpu(util_gpu=42, sleeps_ms={"*": 3000})]).write(path)
        slowest = 0.0
        ages = []
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            start = time.monotonic()
            samples = exp.samples()
            slowest = max(slowest, time.monotonic() - start)
            (stamp,) = series(samples, "gputop_last_sample_timestamp_seconds").values()
            ages.append(time.time() - stamp)
            # The last sample is still served, whole.
            assert series(samples, "gputop_gpu_utilization_ratio", gpu="0")
            time.sleep(0.2)
    # < 100 ms is the budget (bench/bench_exporter.py measures it); a loaded CI box
    # gets a generous bound here.
    assert slowest < 1.0, slowest
    assert max(ages) > 2.0, ages  # the age of the last sample shows the stall


def test_lost_gpu_keeps_only_info_and_lost(tmp_path: Path, fake_nvml_env: Env) -> None:
    env = fake_nvml_env(
        Scenario(gpus=[FakeGpu(), FakeGpu(errors={"*": "GPU_IS_LOST"})]), tmp_path / "s.txt"
    )
    with exporter(["--jobs"], env=env, tmp=tmp_path) as exp:
        wait_until(lambda: bool(series(exp.samples(), "gputop_gpu_lost", gpu="1")), what="GPU 1")
        samples = exp.samples()
    assert series(samples, "gputop_gpu_lost", gpu="1") and all(
        v == 1.0 for v in series(samples, "gputop_gpu_lost", gpu="1").values()
    )
    assert list(series(samples, "gputop_gpu_lost", gpu="0").values()) == [0.0]
    names = {name for (name, labels) in samples if ("gpu", "1") in labels}
    assert names == {"gputop_gpu_info", "gputop_gpu_lost"}, names
    assert series(samples, "gputop_gpu_utilization_ratio", gpu="0")


def test_no_driver_serves_self_health_and_says_why(tmp_path: Path, fake_nvml_lib: Path) -> None:
    env = subprocess_env(tmp_path / "unused.txt")
    del env["FAKE_NVML_SCENARIO"]  # the fake then answers DRIVER_NOT_LOADED, like no driver
    with exporter([], env=env, tmp=tmp_path) as exp:
        samples = exp.samples()
        err = exp.stderr()
    assert "NVIDIA driver not available" in err and "not loaded" in err, err
    assert list(series(samples, "gputop_driver_available").values()) == [0.0]
    assert series(samples, "gputop_last_sample_timestamp_seconds")
    assert series(samples, "gputop_read_errors_total", source="nvml")
    assert not [n for (n, _) in samples if n.startswith("gputop_gpu_")]


def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "gputop", "export", "--demo", "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"127.0.0.1:{port}" in out.stderr and "in use" in out.stderr, out.stderr


def test_bad_listen_address_is_exit_2() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gputop", "export", "--listen", "localhost:http"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr


def test_100_concurrent_scrapes_all_answer_and_sampling_goes_on(tmp_path: Path) -> None:
    with exporter(["--demo", "--jobs", "--interval", "0.5"], tmp=tmp_path) as exp:
        first = exp.samples()
        results: list[int | str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(100)

        def one() -> None:
            try:
                barrier.wait(10)
                req = urllib.request.Request(
                    exp.url + "/metrics", headers={"Accept-Encoding": "gzip"}
                )
                with urllib.request.urlopen(req, timeout=30) as resp:
                    body = resp.read()
                    status = resp.status
                ok = status == 200 and len(body) > 1000
                outcome: int | str = status if ok else f"short body {len(body)}"
            except Exception as exc:
                outcome = repr(exc)
            with lock:
                results.append(outcome)

        stamps = []
        for _ in range(3):
            results.clear()
            threads = [threading.Thread(target=one) for _ in range(100)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert results == [200] * 100, [r for r in results if r != 200][:5]
            (stamp,) = series(exp.samples(), "gputop_last_sample_timestamp_seconds").values()
            stamps.append(stamp)
            time.sleep(0.6)
        (start,) = series(first, "gputop_last_sample_timestamp_seconds").values()
        # Sampling was never held up by the scrapes: new samples all along.
        assert start <= stamps[0] < stamps[1] < stamps[2], (start, stamps)
        assert parse(exp.scrape())  # still serving


def test_export_never_imports_textual(tmp_path: Path) -> None:
    code = (
        "import sys; from gputop.exporter import main, build_parser; "
        "import gputop.exporter.server, gputop.exporter.metrics, gputop.sources.live, "
        "gputop.sources.demo; build_parser(); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'plotext', "
        "'textual_plotext', 'rich')); print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_sigterm_stops_it_cleanly(tmp_path: Path) -> None:
    with exporter(["--demo"], tmp=tmp_path) as exp:
        exp.proc.send_signal(signal.SIGTERM)
        assert exp.proc.wait(15) == 0
