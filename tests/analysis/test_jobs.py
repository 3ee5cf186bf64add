"""Process trees -> jobs (gputop.analysis.jobs), on synthetic snapshots."""

from __future__ import annotations

import json

from gputop.analysis.jobs import Job, build_jobs, is_never_root, job_to_dict
from gputop.model import GpuProcess, ProcessInfo, Verdict, replace
from tests.builders import T0, GiB, gpu_process, gpu_sample, process_info, snapshot


def _one(jobs: tuple[Job, ...]) -> Job:
    assert len(jobs) == 1, jobs
    return jobs[0]


def _torchrun(with_launcher: bool = True) -> list[ProcessInfo]:
    rows = [
        process_info(5, 1, user="root", name="sshd"),
        process_info(10, 5, name="bash", command="-bash"),
        process_info(
            20, 10, name="torchrun", command="torchrun --nproc-per-node 4 train.py", cpu=2.0
        ),
    ]
    if not with_launcher:
        rows = []
    for r in range(4):
        rank = 21 + r
        rows.append(process_info(rank, 20, command="python -u train.py", cpu=100.0 + r))
        for w in range(2):
            rows.append(
                process_info(100 + 10 * r + w, rank, command="python -u train.py", cpu=90.0)
            )
    return rows


def _torchrun_snapshot(with_launcher: bool = True, time: float = T0) -> object:
    gpus = [gpu_sample(r, 80.0 + r, [gpu_process(21 + r, mem=10 * GiB, sm=70.0)]) for r in range(4)]
    return snapshot(time, gpus, _torchrun(with_launcher))


def test_torchrun_is_one_job_with_four_gpu_entries() -> None:
    job = _one(build_jobs(_torchrun_snapshot()))  # type: ignore[arg-type]
    assert job.root_pid == 20
    assert job.command == "torchrun --nproc-per-node 4 train.py"
    assert job.user == "alice"
    assert job.gpus == (0, 1, 2, 3)
    assert job.gpu_pids == ((0, 21), (1, 22), (2, 23), (3, 24))
    assert job.main_pids == (21, 22, 23, 24)
    assert job.workers == 8
    assert job.worker_pids == (100, 101, 110, 111, 120, 121, 130, 131)
    # launcher + 4 ranks + 8 workers; bash and sshd above the root are not members
    assert job.pids == (20, 21, 22, 23, 24, 100, 101, 110, 111, 120, 121, 130, 131)
    assert job.cpu_percent == 2.0 + (100 + 101 + 102 + 103) + 8 * 90.0
    assert job.cores == job.cpu_percent / 100
    assert job.main_cpu_percent == 100 + 101 + 102 + 103
    assert job.gpu_memory == 40 * GiB
    assert job.sm_percent == 280.0
    assert job.gpu_util == (80 + 81 + 82 + 83) / 4
    assert job.rss == 13 * 100 * 2**20
    assert job.id == f"20:{T0 - 1000:.2f}"
    assert job.age == 1000.0


def test_without_launcher_rows_each_rank_is_its_own_job() -> None:
    jobs = build_jobs(_torchrun_snapshot(with_launcher=False))  # type: ignore[arg-type]
    assert [j.root_pid for j in jobs] == [21, 22, 23, 24]
    assert [j.gpus for j in jobs] == [(0,), (1,), (2,), (3,)]
    assert all(j.workers == 2 for j in jobs)


def test_job_id_is_stable_across_ticks() -> None:
    a = _one(build_jobs(_torchrun_snapshot(time=T0)))  # type: ignore[arg-type]
    b = _one(build_jobs(_torchrun_snapshot(time=T0 + 7)))  # type: ignore[arg-type]
    assert a.id == b.id
    assert b.age == a.age + 7  # type: ignore[operator]


def test_shell_parent_is_not_the_root() -> None:
    rows = [
        process_info(10, 1, name="bash"),
        process_info(11, 10, command="python train.py"),
        process_info(12, 11, command="python train.py"),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(11)])], rows)))
    assert job.root_pid == 11
    assert job.command == "python train.py"
    assert job.pids == (11, 12)
    assert job.workers == 1


def test_tmux_and_sshd_chain_stop_the_climb() -> None:
    rows = [
        process_info(2, 1, user="root", name="sshd", command="sshd: /usr/sbin/sshd -D"),
        process_info(3, 2, user="root", name="sshd-session"),
        process_info(4, 3, name="sshd-session", command="sshd: alice@pts/0"),
        process_info(5, 4, name="-bash"),
        process_info(6, 5, name="tmux: client"),
        process_info(30, 1, name="tmux: server", command="tmux new -s train"),
        process_info(31, 30, name="zsh"),
        process_info(32, 31, command="python train.py"),
        process_info(33, 32, command="python train.py"),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(32)])], rows)))
    assert job.root_pid == 32
    assert job.pids == (32, 33)


def test_a_plain_launcher_parent_is_the_root() -> None:
    # make -> python: make is neither a shell nor a session process: it is what was launched
    rows = [
        process_info(10, 1, name="bash"),
        process_info(11, 10, name="make", command="make train"),
        process_info(12, 11, command="python train.py"),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(12)])], rows)))
    assert job.root_pid == 11
    assert job.command == "make train"
    assert job.workers == 0


def test_two_users_never_merge() -> None:
    rows = [
        # alice's launcher starts a process that runs as bob (setuid helper, sudo -u ...)
        process_info(40, 1, user="alice", command="python launch.py"),
        process_info(41, 40, user="bob", command="python train.py"),
        process_info(42, 41, user="bob", command="python train.py", cpu=50.0),
        process_info(43, 41, user="carol", command="helper", cpu=70.0),  # another user below bob's
        # two separate users' jobs on the same GPU
        process_info(50, 1, user="alice", command="python a.py"),
        process_info(60, 1, user="dave", command="python d.py"),
    ]
    g = gpu_sample(0, 90, [gpu_process(41), gpu_process(50), gpu_process(60)])
    jobs = build_jobs(snapshot(T0, [g], rows))
    by_root = {j.root_pid: j for j in jobs}
    assert set(by_root) == {41, 50, 60}
    bob = by_root[41]
    assert bob.user == "bob"
    assert bob.pids == (41, 42)  # carol's process is not merged into bob's job
    assert bob.workers == 1
    assert bob.cpu_percent == 1.0 + 50.0
    assert by_root[50].user == "alice"
    assert by_root[60].user == "dave"


def test_unknown_parent_user_stops_the_climb() -> None:
    rows = [
        process_info(40, 1, user=None, command="launcher"),
        process_info(41, 40, command="python t.py"),
    ]
    assert (
        _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(41)])], rows))).root_pid == 41
    )


def test_lightning_ddp_rank0_is_the_root() -> None:
    rows = [
        process_info(10, 1, name="bash"),
        process_info(60, 10, command="python train.py", cpu=100.0),
    ]
    rows += [process_info(60 + r, 60, command="python train.py", cpu=100.0) for r in (1, 2, 3)]
    for rank in (60, 61, 62, 63):
        rows += [process_info(1000 + 10 * (rank - 60) + w, rank, cpu=5.0) for w in range(3)]
    gpus = [gpu_sample(r, 90, [gpu_process(60 + r)]) for r in range(4)]
    job = _one(build_jobs(snapshot(T0, gpus, rows)))
    assert job.root_pid == 60
    assert job.gpus == (0, 1, 2, 3)
    assert job.gpu_pids == ((0, 60), (1, 61), (2, 62), (3, 63))
    assert job.workers == 12  # ranks 1-3 are GPU processes, not workers
    assert 61 not in job.worker_pids
    assert job.main_cpu_percent == 400.0


def test_gpu_process_with_unknown_ancestors_is_its_own_root() -> None:
    rows = [process_info(70, 999, command="python train.py"), process_info(71, 70)]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(70)])], rows)))
    assert job.root_pid == 70
    assert job.pids == (70, 71)
    assert job.workers == 1


def test_invisible_pid_is_its_own_job_with_unknown_user() -> None:
    host = ProcessInfo(pid=80, visible=False)
    g = gpu_sample(0, 50, [replace(gpu_process(80, mem=3 * GiB), host=host), gpu_process(81)])
    rows = [host, process_info(81, 1, command="python mine.py", cpu=12.0)]
    jobs = build_jobs(snapshot(T0, [g], rows))
    by_root = {j.root_pid: j for j in jobs}
    hidden = by_root[80]
    assert hidden.visible is False
    assert hidden.user is None and hidden.command is None
    assert hidden.id == "80:?"
    assert hidden.gpu_memory == 3 * GiB
    assert hidden.cpu_percent is None and hidden.rss is None and hidden.disk_sleep is None
    assert hidden.age is None
    assert by_root[81].user == "alice"


def test_gpu_process_the_host_knows_nothing_about() -> None:
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(90)])], [])))
    assert job.root_pid == 90
    assert job.visible is None
    assert job.user is None
    assert job.cpu_percent is None


def test_host_info_on_the_gpu_process_is_used_when_processes_lacks_it() -> None:
    info = process_info(91, 1, command="python t.py", cpu=33.0)
    g = gpu_sample(0, 50, [GpuProcess(pid=91, gpu_memory=GiB, host=info)])
    job = _one(build_jobs(snapshot(T0, [g], [])))
    assert job.user == "alice"
    assert job.cpu_percent == 33.0


def test_none_aware_sums() -> None:
    rows = [
        process_info(100, 1, cpu=None, rss=None, read=None),
        process_info(101, 100, cpu=40.0, rss=None, read=None),
        process_info(102, 100, cpu=None, rss=None, read=None),
    ]
    g = gpu_sample(0, 50, [GpuProcess(pid=100, gpu_memory=None, sm_percent=None)])
    job = _one(build_jobs(snapshot(T0, [g], rows)))
    assert job.cpu_percent == 40.0  # partial: the known ones
    assert job.main_cpu_percent is None  # the only GPU process's CPU is unknown
    assert job.rss is None and job.read_bytes_per_s is None
    assert job.gpu_memory is None and job.sm_percent is None


def test_disk_sleep_zombies_and_reads() -> None:
    rows = [
        process_info(100, 1, status="running", read=1e6),
        process_info(101, 100, status="disk-sleep", read=5e6),
        process_info(102, 100, status="disk-sleep", read=None),
        process_info(103, 100, status="zombie", cpu=None, read=None),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(100)])], rows)))
    assert job.disk_sleep == 2
    assert job.read_bytes_per_s == 6e6
    assert job.workers == 2  # the zombie is a member, not a worker
    assert 103 in job.pids


def test_one_process_on_two_gpus_counts_once() -> None:
    rows = [process_info(100, 1, cpu=80.0)]
    gpus = [
        gpu_sample(0, 40, [gpu_process(100, mem=GiB)]),
        gpu_sample(1, 60, [gpu_process(100, mem=2 * GiB)]),
    ]
    job = _one(build_jobs(snapshot(T0, gpus, rows)))
    assert job.gpus == (0, 1)
    assert job.gpu_pids == ((0, 100), (1, 100))
    assert job.main_pids == (100,)
    assert job.main_cpu_percent == 80.0
    assert job.cpu_percent == 80.0
    assert job.gpu_memory == 3 * GiB
    assert job.gpu_util == 50.0


def test_jupyter_kernels_under_one_server_are_separate_jobs() -> None:
    rows = [
        process_info(10, 1, name="bash"),
        process_info(20, 10, command="/usr/bin/python3 /usr/local/bin/jupyter-lab"),
        process_info(21, 20, command="python -m ipykernel_launcher -f /run/kernel-1.json"),
        process_info(22, 20, command="python -m ipykernel_launcher -f /run/kernel-2.json"),
    ]
    gpus = [gpu_sample(0, 10, [gpu_process(21)]), gpu_sample(1, 10, [gpu_process(22)])]
    assert [j.root_pid for j in build_jobs(snapshot(T0, gpus, rows))] == [21, 22]


def test_sudo_and_containers_are_never_roots() -> None:
    rows = [
        process_info(5, 1, user="root", name="containerd-shim-runc-v2"),
        process_info(6, 5, user="root", name="tini", command="/usr/bin/tini -- sudo python t.py"),
        process_info(7, 6, user="root", name="sudo", command="sudo python t.py"),
        process_info(8, 7, user="root", command="python t.py"),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 50, [gpu_process(8)])], rows)))
    assert job.root_pid == 8
    for name in ("-bash", "tmux: server", "/usr/sbin/sshd", "systemd", "dumb-init", "nohup"):
        assert is_never_root(process_info(1, 0, name=name)), name
    assert not is_never_root(process_info(1, 0, name="torchrun"))
    assert not is_never_root(process_info(1, 0, name="python3"))


def test_invalid_pids_and_lost_gpus_are_skipped() -> None:
    gpus = [
        gpu_sample(0, 50, [gpu_process(0), gpu_process(2**32 - 1), gpu_process(100)]),
        gpu_sample(1, lost=True),
    ]
    job = _one(build_jobs(snapshot(T0, gpus, [process_info(100)])))
    assert job.root_pid == 100


def test_jobs_sorted_by_first_gpu_then_root_pid() -> None:
    rows = [process_info(300), process_info(200), process_info(100)]
    gpus = [
        gpu_sample(0, 1, [gpu_process(300), gpu_process(200)]),
        gpu_sample(1, 1, [gpu_process(100)]),
    ]
    assert [j.root_pid for j in build_jobs(snapshot(T0, gpus, rows))] == [200, 300, 100]


def test_job_to_dict_is_json_ready() -> None:
    job = _one(build_jobs(_torchrun_snapshot()))  # type: ignore[arg-type]
    v = Verdict("gpu-bound", "GPU-bound", "util mean 90 %", "nothing", "ok")
    d = job_to_dict(job, v)
    assert json.loads(json.dumps(d)) == d
    assert d["gpus"] == [0, 1, 2, 3]
    assert d["gpu_pids"][0] == {"gpu": 0, "pid": 21}
    assert d["workers"] == 8
    assert d["verdict"]["kind"] == "gpu-bound"
    assert d["verdict"]["also"] == []
    assert job_to_dict(job)["verdict"] is None
    for key in ("id", "user", "command", "cpu_percent", "main_cpu_percent", "rss",
                "read_bytes_per_s", "pids"):  # fmt: skip
        assert key in d


# What multiprocessing starts the helpers with (Lib/multiprocessing/resource_tracker.py,
# forkserver.py; semaphore_tracker.py before Python 3.8), and a spawned worker's line.
_PY = "/usr/bin/python3 -B -s"
_TRACKER = f"{_PY} -c from multiprocessing.resource_tracker import main;main(9)"
_FORKSERVER = (
    f"{_PY} -c from multiprocessing.forkserver import main; "
    "main(12, 13, ['__main__'], **{'sys_path': ['/srv']})"
)
_OLD_TRACKER = f"{_PY} -c from multiprocessing.semaphore_tracker import main;main(5)"
_SPAWNED = (
    f"{_PY} -c from multiprocessing.spawn import spawn_main; "
    "spawn_main(tracker_fd=9, pipe_handle=15) --multiprocessing-fork"
)


def test_multiprocessing_helpers_are_members_but_not_workers() -> None:
    rows = [
        process_info(10, 1, name="bash", command="-bash"),
        process_info(20, 10, command="python train.py", cpu=30.0),
        process_info(21, 20, command=_TRACKER, cpu=0.0),
        process_info(22, 20, command=_FORKSERVER, cpu=0.0),
        process_info(23, 20, command=_OLD_TRACKER, cpu=0.0),
        # the forkserver's children are workers (a GPU ancestor above their parent)
        process_info(30, 22, command=_FORKSERVER, cpu=90.0),
        process_info(31, 22, command=_FORKSERVER, cpu=90.0),
        process_info(40, 20, command=_SPAWNED, cpu=90.0),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 20, [gpu_process(20)])], rows)))
    assert job.worker_pids == (30, 31, 40)
    assert job.pids == (20, 21, 22, 23, 30, 31, 40)  # their CPU and memory still count
    assert job.cpu_percent == 30.0 + 3 * 90.0


def test_a_helper_module_named_elsewhere_in_a_command_is_no_helper() -> None:
    rows = [
        process_info(20, 1, command="python train.py"),
        process_info(21, 20, command="python grep_for.py multiprocessing.resource_tracker"),
    ]
    job = _one(build_jobs(snapshot(T0, [gpu_sample(0, 20, [gpu_process(20)])], rows)))
    assert job.worker_pids == (21,)


def test_a_job_never_spans_two_pods_containers_or_slurm_jobs() -> None:
    from gputop.model import Owner

    pod_a = Owner("pod", id="a" * 64, pod_uid="u-a", namespace="ml", pod="train-a")
    pod_b = Owner("pod", id="b" * 64, pod_uid="u-b", namespace="ml", pod="train-b")
    slurm = Owner("slurm", slurm_job="81234", slurm_step="0")
    rows = [
        # one parent (a launcher run as the same user) above processes of two pods
        process_info(40, 1, command="python launch.py"),
        replace(process_info(41, 40, command="python a.py"), owner=pod_a),
        replace(process_info(42, 41, command="python a.py", cpu=50.0), owner=pod_a),
        replace(process_info(43, 41, command="exec-probe", cpu=70.0), owner=pod_b),
        replace(process_info(51, 40, command="python b.py"), owner=pod_b),
        replace(process_info(61, 40, command="python s.py"), owner=slurm),
    ]
    g = gpu_sample(0, 90, [gpu_process(41), gpu_process(51), gpu_process(61)])
    jobs = build_jobs(snapshot(T0, [g], rows))
    by_root = {j.root_pid: j for j in jobs}
    assert set(by_root) == {41, 51, 61}  # the shared parent roots none of them
    assert by_root[41].pids == (41, 42)  # pod b's process below is not pod a's worker
    assert (by_root[41].owner, by_root[51].owner, by_root[61].owner) == (pod_a, pod_b, slurm)
    doc = job_to_dict(by_root[61])
    assert doc["owner"]["kind"] == "slurm" and doc["owner"]["slurm_job"] == "81234"
    assert job_to_dict(build_jobs(_torchrun_snapshot())[0])["owner"] is None  # type: ignore[arg-type]


def test_a_jobs_probe_is_the_mean_and_the_worst_of_its_ranks() -> None:
    from gputop.analysis.jobs import job_probe
    from gputop.model import Probe, ProcessInfo

    def rank(pid: int, wait: float | None, step: float | None) -> ProcessInfo:
        return ProcessInfo(pid, probe=Probe(1.0, 20.0, 10, wait, step, 2.0))

    assert job_probe([ProcessInfo(1), ProcessInfo(2)]) is None
    got = job_probe([rank(10, 0.2, 0.3), rank(11, 0.6, 0.5), rank(12, None, None)])
    assert got is not None
    assert got.ranks == 3
    assert got.data_wait_ratio == 0.4 and got.worst_data_wait_ratio == 0.6
    assert got.worst_pid == 11
    assert got.step_seconds == 0.4 and got.worst_step_seconds == 0.5
    assert got.batches_per_second == 2.0
