"""The command line: --once text and JSON, --gpus, exit codes, the dashboard hand-off."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gputop import __version__, argtypes
from gputop.argtypes import EXIT_NO_DRIVER
from gputop.cells import is_wide
from gputop.cli import EXIT_USAGE, main
from gputop.model import GpuProcess, GpuSample, SampleError, Snapshot, replace
from gputop.present import filter_gpus
from gputop.sources.demo import DemoSource
from gputop.textout import render_text

ROOT = Path(__file__).resolve().parents[2]


def cells(line: str) -> int:
    return sum(2 if is_wide(c) else 1 for c in line)


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def run_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=60,
    )


def demo_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    rc, out, err = run_main(capsys, "--once", "--json", "--demo", "--seed", "3", *extra)
    assert rc == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


# --- text ----------------------------------------------------------------------------


def test_once_text_demo(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "--once", "--demo", "--seed", "3")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert all(cells(line) <= 80 for line in lines), max(lines, key=cells)
    assert lines[0].startswith(f"gputop {__version__}  gpu-node-07  ")
    assert lines[0].endswith("source: demo")
    assert "Driver 550.90.07  CUDA 12.4  8 GPUs" in out
    assert sum(1 for line in lines if "NVIDIA H100 80GB HBM3" in line) == 8
    assert "Fan n/a" in out  # None is n/a, never 0
    assert "not visible (another PID namespace)" in out
    assert "2210457" in out
    assert "Unlisted holders" in out and "69904 carol" in out
    assert "Clock events: sw power cap, sw thermal" in out
    assert "PCIe gen4 x8 (max gen5 x16)" in out
    assert "  4 (no processes)" in out
    assert "+ 8 child processes: CPU " in out
    assert "Host  CPU " in out and "of 64 cores" in out
    assert "RAM " in out and "of 1.0TiB" in out
    assert "Disk read " in out and "Net rx " in out


def test_once_text_is_deterministic_with_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    a = run_main(capsys, "--once", "--demo", "--seed", "5")[1].splitlines()[1:]
    b = run_main(capsys, "--once", "--demo", "--seed", "5")[1].splitlines()[1:]
    c = run_main(capsys, "--once", "--demo", "--seed", "6")[1].splitlines()[1:]
    assert a == b  # everything but the header line with the wall-clock time
    assert a != c


def test_text_shows_lost_gpu_na_and_fits_80_columns() -> None:
    src = DemoSource(seed=0)
    src.snapshot()
    snap = src.snapshot()
    wide = "显卡" * 30
    gpus = list(snap.gpus)
    gpus[3] = GpuSample(index=3, name="NVIDIA H100 80GB HBM3", lost=True, lost_reason="GPU is lost")
    gpus[4] = GpuSample(index=4, name=wide)  # every metric unknown
    g0 = gpus[0]
    p0 = g0.processes[0]
    assert p0.host is not None
    long_proc = replace(p0, host=replace(p0.host, command=wide + " --x", user="x" * 40))
    gpus[0] = replace(g0, processes=(long_proc, GpuProcess(pid=77)))
    snap = replace(
        snap,
        gpus=tuple(gpus),
        errors=(SampleError("nvml", "e" * 200, gpu=1, metric="pcie_throughput"),),
    )
    out = render_text(snap)
    lines = out.splitlines()
    assert all(cells(line) <= 80 for line in lines), max(lines, key=cells)
    assert "LOST: GPU is lost" in out
    assert "  3 (GPU lost: processes unknown)" in out
    row4 = next(line for line in lines if line.startswith("  4  显卡"))
    assert row4.count("n/a") >= 4
    assert any(line.startswith("     PCIe n/a (max n/a)  RX n/a  TX n/a") for line in lines)
    assert "SM clock n/a of n/a  Fan n/a  Perf n/a  Clock events: n/a" in out
    assert "     77 n/a" in out  # a process without host information
    assert "Errors while sampling:" in out and "nvml (GPU 1, pcie_throughput)" in out


def test_text_without_driver_shows_the_host() -> None:
    snap = Snapshot(
        time=0.0,
        hostname="h",
        driver=replace(DemoSource().snapshot().driver, available=False, error="no library"),
        host=DemoSource().snapshot().host,
    )
    out = render_text(snap)
    assert "NVIDIA driver not available: no library" in out
    assert "Host  CPU n/a of 64 cores" in out  # first reading: no rate yet
    assert "Processes:" not in out


# --- JSON ----------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {
    "schema": None,
    "time": None,
    "hostname": None,
    "source": None,
    "driver": ["available", "error", "driver_version", "cuda_version"],
    "host": {
        "cpu_percent": None,
        "cpu_per_core": None,
        "memory": ["total", "used", "available"],
        "disk": ["read_bytes_per_s", "write_bytes_per_s"],
    },
    "gpus": None,
    "processes": None,
    "unlisted_holders": None,
    "errors": None,
}
GPU_KEYS: dict[str, Any] = {
    "index": None,
    "name": None,
    "uuid": None,
    "lost": None,
    "memory": ["total", "used", "free", "reserved"],
    "utilization": ["gpu", "memory"],
    "temperature_c": None,
    "power_w": None,
    "power_limit_w": None,
    "fan_percent": None,
    "pcie": [
        "tx_bytes_per_s",
        "rx_bytes_per_s",
        "gen",
        "width",
        "max_gen",
        "max_width",
        "link_max_bytes_per_s",
    ],
    "clock_event_reasons": None,
    "processes": None,
}
PROCESS_KEYS = ["pid", "visible", "type", "gpu_memory", "sm_percent", "user", "command"]
PROCESS_KEYS += ["cpu_percent", "rss"]
HOLDER_KEYS = ["pid", "gpu", "user", "command"]


def check_keys(obj: dict[str, Any], spec: dict[str, Any] | list[str]) -> None:
    for key in spec:
        assert key in obj, f"missing {key!r}"
        sub = spec[key] if isinstance(spec, dict) else None
        if sub is not None:
            check_keys(obj[key], sub)


def test_json_schema_keys(capsys: pytest.CaptureFixture[str]) -> None:
    data = demo_json(capsys)
    check_keys(data, SCHEMA)
    assert data["schema"] == 1 and data["source"] == "demo"
    assert data["driver"]["available"] is True
    assert len(data["host"]["cpu_per_core"]) == 64
    assert len(data["gpus"]) == 8
    for g in data["gpus"]:
        check_keys(g, GPU_KEYS)
        for p in g["processes"]:
            check_keys(p, PROCESS_KEYS)
    assert data["unlisted_holders"]
    for h in data["unlisted_holders"]:
        check_keys(h, HOLDER_KEYS)
    # Units: bytes, bytes per second, percent.
    g5 = data["gpus"][5]
    assert g5["memory"]["total"] == 81_559 * 2**20
    assert 0.6 < g5["pcie"]["rx_bytes_per_s"] / g5["pcie"]["link_max_bytes_per_s"] <= 1


def test_json_nulls_are_null(capsys: pytest.CaptureFixture[str]) -> None:
    data = demo_json(capsys)
    assert all(g["fan_percent"] is None for g in data["gpus"])
    ghost = next(p for p in data["gpus"][7]["processes"] if p["pid"] == 2210457)
    assert ghost["visible"] is False
    assert ghost["user"] is None and ghost["command"] is None and ghost["cpu_percent"] is None
    assert ghost["gpu_memory"] > 0
    # The parsed document round-trips into the model.
    assert Snapshot.from_dict(data).gpu(7) is not None


def test_json_is_deterministic_with_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = demo_json(capsys), demo_json(capsys)
    for d in (a, b):
        del d["time"]
        for p in d["processes"]:
            p.pop("create_time")
        for g in d["gpus"]:
            for p in g["processes"]:
                p.pop("create_time")
        for j in d["jobs"]:  # the id holds the root's create_time
            del j["create_time"], j["id"]
    assert a == b


def test_json_alone_implies_once(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(capsys, "--json", "--demo")
    assert rc == 0 and json.loads(out)["schema"] == 1


def test_json_never_holds_nan() -> None:
    from gputop.present import render_json

    snap = DemoSource().snapshot()
    g = replace(snap.gpus[0], power_w=float("nan"), temperature_c=float("inf"))
    text = render_json(replace(snap, gpus=(g,)))
    data = json.loads(text)
    assert data["gpus"][0]["power_w"] is None and data["gpus"][0]["temperature_c"] is None


# --- --gpus --------------------------------------------------------------------------


def test_filter_by_index(capsys: pytest.CaptureFixture[str]) -> None:
    data = demo_json(capsys, "--gpus", "2,6")
    assert [g["index"] for g in data["gpus"]] == [2, 6]
    pids = {p["pid"] for p in data["processes"]}
    assert 52840 in pids and 70533 in pids and 52871 in pids  # + descendants
    assert 41201 not in pids and 2210457 not in pids
    assert [h["pid"] for h in data["unlisted_holders"]] == [69904]
    rc, out, _ = run_main(capsys, "--once", "--demo", "--gpus", "7")
    assert rc == 0
    assert "1 of 8 GPUs shown" in out
    assert "Unlisted holders" not in out
    assert sum(1 for line in out.splitlines() if "NVIDIA H100" in line) == 1


def test_filter_by_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    uuids = [g["uuid"] for g in demo_json(capsys)["gpus"]]
    data = demo_json(capsys, "--gpus", f"{uuids[4]},{uuids[1][:12].lower()}")
    assert [g["index"] for g in data["gpus"]] == [1, 4]
    assert data["gpus"][1]["processes"] == []


def test_filter_gpus_none_keeps_everything() -> None:
    snap = DemoSource().snapshot()
    assert filter_gpus(snap, None) is snap
    assert filter_gpus(snap, []).gpus == ()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gpus", "9"], "no GPU with index 9"),
        (["--gpus", "GPU-nope"], "'GPU-nope' matches no GPU"),
        # demo UUIDs GPU-e3e70682-... and GPU-e443df78-...: never silently the first
        (["--gpus", "e"], "'e' matches several GPUs"),
        (["--gpus", "3,GPU-E"], "'GPU-E' matches several GPUs"),
        (["--gpus", "0,,1"], "--gpus"),
        (["--interval", "0"], "--interval"),
        (["--interval", "abc"], "--interval"),
        (["--interval", "61"], "out of range"),
        (["--bogus"], "unrecognized arguments"),
        (["--seed", "x"], "--seed"),
    ],
)
def test_bad_arguments_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    rc, out, err = run_main(capsys, "--once", "--demo", *argv)
    assert rc == EXIT_USAGE
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("gputop: error: ")
    assert message in err


def test_seed_needs_demo(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_main(capsys, "--once", "--seed", "1")
    assert rc == EXIT_USAGE and err == "gputop: error: --seed needs --demo\n"


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main(capsys, "--version")
    assert rc == 0 and out.strip() == f"gputop {__version__}"
    rc, out, _ = run_main(capsys, "--help")
    out = " ".join(out.split())  # argparse wraps the epilog where it likes
    assert rc == 0 and "--once" in out and "exit codes" in out


# --- the dashboard hand-off ----------------------------------------------------------


def test_dashboard_gets_a_primed_sampler_and_resolved_filter(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def run_app(sampler: Any, *, gpu_filter: Any, readonly: bool, **options: Any) -> int:
        seen.update(sampler=sampler, gpu_filter=gpu_filter, readonly=readonly, **options)
        seen["latest"] = sampler.latest()
        seen["interval"] = sampler.interval
        return 0

    fake = types.ModuleType("gputop.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop.ui.app", fake)
    rc, _, _ = run_main(capsys, "--demo", "--gpus", "1,3", "--interval", "0.5", "--readonly")
    assert rc == 0
    assert seen["gpu_filter"] == frozenset({1, 3})
    assert seen["readonly"] is True and seen["interval"] == 0.5
    assert seen["latest"] is not None and seen["latest"].source == "demo"
    assert not seen["sampler"].running  # stopped after the app returned


def test_the_dashboard_runs_without_the_argument_parser(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dashboard runs for days: the parser (its actions, help texts, formatter) is let
    go once the arguments and --gpus are checked, not held by the frames below."""
    alive: list[int] = []

    def run_app(sampler: Any, **options: Any) -> int:
        gc.collect()
        alive.append(sum(isinstance(o, argtypes.Parser) for o in gc.get_objects()))
        return 0

    fake = types.ModuleType("gputop.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop.ui.app", fake)
    rc, _, _ = run_main(capsys, "--demo", "--gpus", "1")
    assert rc == 0 and alive == [0]


def test_dashboard_gets_the_config_files_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def run_app(sampler: Any, **options: Any) -> int:
        seen.update(options)
        return 0

    fake = types.ModuleType("gputop.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop.ui.app", fake)
    config = tmp_path / "config.toml"
    config.write_text('[keys]\nsort = "o"\nhelp = "f1"\n')
    rc, _, _ = run_main(capsys, "--demo", "--config", str(config))
    assert rc == 0 and seen["keys"] == {"sort": "o", "help": "f1"}
    config.write_text('[keys]\nsort = "q"\n')
    rc, _, err = run_main(capsys, "--demo", "--config", str(config))
    assert rc == 2 and "[keys] sort = 'q' is already the key of quit" in err
    assert len(err.strip().splitlines()) == 1


def test_dashboard_missing_ui_is_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gputop.ui.app", None)
    rc, _, err = run_main(capsys, "--demo")
    assert rc == 1 and "dashboard is not available" in err


# --- no driver: this machine has no libnvidia-ml, so a plain run is the case ------------


def no_driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("FAKE_NVML_SCENARIO", None)
    env.pop("LD_LIBRARY_PATH", None)
    return env


def test_no_driver_text_exit_3() -> None:
    r = run_cli("--once", env=no_driver_env())
    assert r.returncode == EXIT_NO_DRIVER, r.stderr
    assert "NVIDIA driver not available: " in r.stdout
    assert "Host  CPU " in r.stdout and "RAM " in r.stdout
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("gputop: NVIDIA driver not available: ")
    assert len(r.stderr.strip()) > len("gputop: NVIDIA driver not available: ") + 5


def test_no_driver_json_exit_3() -> None:
    r = run_cli("--once", "--json", "--gpus", "0", env=no_driver_env())
    assert r.returncode == EXIT_NO_DRIVER, r.stderr
    data = json.loads(r.stdout)
    assert data["driver"]["available"] is False
    assert data["driver"]["error"]
    assert data["driver"]["error"] in r.stderr
    assert data["source"] == "host-only"
    assert data["gpus"] == []
    host = data["host"]
    assert host["cpu_count"] and host["memory"]["total"]
    assert host["cpu_percent"] is not None  # two readings, so the rate exists


# --- against the fake libnvidia-ml (tests/fakenvml): the real pynvml path -------------


def _free_pid() -> int:
    """A pid no process here has, below pid_max (above it, gputop drops the entry)."""
    from tests.pids import free_pid

    return free_pid()


GHOST = _free_pid()


def fake_scenario() -> Any:
    from tests import fakenvml

    me = os.getpid()  # a real, visible process
    ghost = GHOST  # not in this PID namespace
    return fakenvml.Scenario(
        gpus=[
            fakenvml.FakeGpu(
                util_gpu=97,
                fan=None,  # not supported: n/a
                processes=[
                    fakenvml.FakeProcess(pid=me, used_memory=30 * 2**30),
                    fakenvml.FakeProcess(pid=ghost, used_memory=2 * 2**30),
                ],
            ),
            fakenvml.FakeGpu(errors={"*": "GPU_IS_LOST"}),
            # idle: no process, 200 MiB used (below HELD_MEMORY_FRACTION: not held)
            fakenvml.FakeGpu(util_gpu=0, memory_used=200 * 2**20, processes=[]),
        ]
    )


def test_fake_nvml_json_shows_the_scenario(fake_nvml_env: Any) -> None:
    r = run_cli("--once", "--json", env=fake_nvml_env(fake_scenario()))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["source"] == "nvml"
    d = data["driver"]
    assert d["available"] is True and d["driver_version"] == "550.54.15"
    assert d["cuda_version"] == "12.4"
    g0, g1, g2 = data["gpus"]
    assert [g0["index"], g1["index"], g2["index"]] == [0, 1, 2]
    assert g0["utilization"]["gpu"] == 97 and g0["fan_percent"] is None
    assert g0["memory"]["total"] == 80 * 2**30
    assert g0["pcie"]["gen"] == 5 and g0["pcie"]["link_max_bytes_per_s"] > 6e10
    assert g1["lost"] is True
    assert g2["processes"] == []
    procs = {p["pid"]: p for p in g0["processes"]}
    me = procs[os.getpid()]
    assert me["visible"] is True and me["gpu_memory"] == 30 * 2**30
    assert me["user"] and me["command"] and "pytest" in me["command"]
    ghost = procs[GHOST]
    assert ghost["visible"] is False and ghost["user"] is None
    # Two readings: a lost GPU and an idle one are judged, the busy one is warming up.
    assert [g["verdict"]["kind"] for g in data["gpus"]] == ["warming up", "lost", "idle"]
    assert [j["gpus"] for j in data["jobs"]] == [[0], [0]]  # this process and the ghost
    # The test process's descendants (this very gputop run) are in processes.
    assert os.getpid() in {p["pid"] for p in data["processes"]}


def test_fake_nvml_text_and_filter(fake_nvml_env: Any) -> None:
    env = fake_nvml_env(fake_scenario())
    r = run_cli("--once", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(cells(line) <= 80 for line in lines)
    assert "source: nvml" in lines[0]
    assert "LOST" in r.stdout
    assert "not visible (another PID namespace)" in r.stdout
    assert f"{os.getpid():>7}" in r.stdout
    r = run_cli("--once", "--json", "--gpus", "GPU-fa4e0000-0000-4000-8000-000000000002", env=env)
    assert r.returncode == 0, r.stderr
    assert [g["index"] for g in json.loads(r.stdout)["gpus"]] == [2]
    r = run_cli("--once", "--gpus", "5", env=env)
    assert r.returncode == EXIT_USAGE
    assert r.stderr == "gputop: error: --gpus: no GPU with index 5 (GPUs: 0, 1, 2)\n"
    # every fake UUID starts GPU-fa4e0000-: a prefix naming several GPUs is refused
    for argv in (["--once"], ["--once", "--json"]):
        r = run_cli(*argv, "--gpus", "fa4e", env=env)
        assert (r.returncode, r.stdout) == (EXIT_USAGE, ""), r.stderr
        assert r.stderr == "gputop: error: --gpus: 'fa4e' matches several GPUs\n"
    # The dashboard's check: it needs a terminal (without one it refuses before sampling).
    rc, shown = run_on_pty("--gpus", "fa4e", env=env)
    assert rc == EXIT_USAGE
    assert shown == "gputop: error: --gpus: 'fa4e' matches several GPUs\r\n"


def run_on_pty(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    """``gputop ARGV`` with a pty as stdin, stdout and stderr: (exit status, what it wrote)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gputop", *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=dict(env, PYTHONPATH=str(ROOT)),
        )
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child is gone and the slave closed
                break
            if not chunk:
                break
            out += chunk
        return proc.wait(timeout=60), out.decode("utf-8", "replace")
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def test_fake_nvml_driver_not_loaded_exit_3(fake_nvml_env: Any) -> None:
    from tests import fakenvml

    env = fake_nvml_env(fakenvml.Scenario(init_result="DRIVER_NOT_LOADED"))
    r = run_cli("--once", "--json", env=env)
    assert r.returncode == EXIT_NO_DRIVER
    data = json.loads(r.stdout)
    assert data["driver"]["available"] is False and data["gpus"] == []
    assert r.stderr.startswith("gputop: NVIDIA driver not available: ")
    assert data["driver"]["error"] in r.stderr


def test_config_file_settings_reach_the_dashboard_and_flags_override_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "gputop.toml"
    config.write_text(
        'readonly = true\ninterval = 2.0\ntheme = "textual-light"\n'
        "[thresholds]\nUTIL_HIGH = 70\nWINDOW_SECONDS = 30\n"
    )
    seen: dict[str, Any] = {}

    def run_app(sampler: Any, **options: Any) -> int:
        seen.update(options, interval=sampler.interval)
        return 0

    fake = types.ModuleType("gputop.ui.app")
    fake.run_app = run_app  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gputop.ui.app", fake)
    rc, _, _ = run_main(capsys, "--demo", "--config", str(config))
    assert rc == 0
    assert seen["readonly"] is True and seen["interval"] == 2.0
    assert seen["theme"] == "textual-light"
    assert (seen["thresholds"].util_high, seen["thresholds"].window_seconds) == (70.0, 30.0)
    # Flags win over the file.
    rc, _, _ = run_main(
        capsys, "--demo", "--config", str(config), "--interval", "0.5", "--window", "10"
    )
    assert rc == 0 and seen["interval"] == 0.5 and seen["thresholds"].window_seconds == 10.0
    assert seen["thresholds"].util_high == 70.0


def test_a_bad_config_file_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "gputop.toml"
    config.write_text("interval = 0.01\n")
    rc, out, err = run_main(capsys, "--demo", "--once", "--config", str(config))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "interval" in err and str(config) in err
    rc, _, err = run_main(capsys, "--once", "--config", str(tmp_path / "missing.toml"))
    assert rc == 2 and "missing.toml" in err
