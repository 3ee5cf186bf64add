"""Write contrib/grafana/gputop-dashboard.json: the Grafana dashboard for ``gputop export``.

    python scripts/grafana_dashboard.py [--check]

It is generated so that the verdict timeline's value mappings follow the verdict kinds
of :mod:`gputop.analysis.kinds` (tests/exporter/test_exporter.py checks the file is up to date
and names only exported metrics). ``--check`` exits 1 when the file differs.

Import it in Grafana (Dashboards -> New -> Import) and pick your Prometheus data source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gputop.analysis.kinds import KINDS, LABELS

OUT = Path(__file__).resolve().parents[1] / "contrib" / "grafana" / "gputop-dashboard.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'instance=~"$instance", gpu=~"$gpu"'

#: Verdict kind -> colour in the timeline (a fixed palette: same colour, same meaning).
COLOURS: dict[str, str] = {
    "lost": "#c4162a",
    "idle memory holder": "#d683ce",
    "idle": "#5a5a5a",
    "warming up": "#8ab8ff",
    "throttled": "#f2495c",
    "input-bound (measured)": "#ff9830",
    "transfer-bound: pcie": "#8f3bb8",
    "communication-bound: nvlink": "#1f60c4",
    "input-bound: disk": "#ff780a",
    "input-bound: cpu workers": "#fade2a",
    "input-bound: main process": "#cca300",
    "launch-bound: main process": "#e0752d",
    "not input-bound (measured)": "#56a64b",
    "underused": "#ffb357",
    "low sm activity": "#ffcb7d",
    "link degraded": "#b877d9",
    "memory-bandwidth-bound": "#3274d9",
    "tensor cores idle": "#96d98d",
    "gpu-bound": "#73bf69",
    "moderate": "#c8f2c2",
    "memory nearly full": "#5794f2",
    "allocator cache": "#8ac7f2",
    "unknown": "#a0a0a0",
}


def verdict_code_expr() -> str:
    """One number per GPU: its current verdict kind's place in KINDS, from 1."""
    parts = [
        f'gputop_gpu_verdict{{{SEL}, kind="{kind}"}} * {rank}'
        for rank, kind in enumerate(KINDS, start=1)
    ]
    return "sum by (instance, gpu) (\n  " + "\n  or ".join(parts) + "\n)"


def _target(expr: str, legend: str, ref: str = "A", instant: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        t.update(instant=True, range=False, format="table")
    return t


def _panel(
    pid: int,
    title: str,
    kind: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    unit: str | None = None,
    description: str = "",
    **extra: Any,
) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {}
    if unit:
        defaults["unit"] = unit
    panel: dict[str, Any] = {
        "id": pid,
        "title": title,
        "description": description,
        "type": kind,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {},
    }
    for key, value in extra.items():
        if key == "defaults":
            defaults.update(value)
        else:
            panel[key] = value
    return panel


def dashboard() -> dict[str, Any]:
    mappings = [
        {
            "type": "value",
            "options": {
                str(rank): {"text": LABELS.get(kind, kind), "color": COLOURS[kind], "index": rank}
                for rank, kind in enumerate(KINDS, start=1)
            },
        }
    ]
    panels = [
        _panel(
            1,
            "GPU utilization vs memory used",
            "timeseries",
            (0, 0, 12, 8),
            [
                _target(f"gputop_gpu_utilization_ratio{{{SEL}}}", "GPU {{gpu}} utilization", "A"),
                _target(
                    f"gputop_gpu_memory_used_bytes{{{SEL}}} / gputop_gpu_memory_total_bytes",
                    "GPU {{gpu}} memory",
                    "B",
                ),
            ],
            unit="percentunit",
            description="Memory held while utilization is low: a job holding a GPU it "
            "does not use, or one starved by its input.",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            2,
            "Verdict timeline",
            "state-timeline",
            (12, 0, 12, 8),
            [_target(verdict_code_expr(), "GPU {{gpu}} ({{instance}})")],
            description="What gputop says each GPU is bound by, over time.",
            defaults={"mappings": mappings, "color": {"mode": "fixed"}},
            options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
        ),
        _panel(
            3,
            "Share of the range in each verdict",
            "bargauge",
            (0, 8, 12, 8),
            [
                _target(
                    "sum by (gpu, kind) (increase(gputop_gpu_verdict_seconds_total"
                    f"{{{SEL}}}[$__range]))\n/ ignoring(kind) group_left "
                    "sum by (gpu) (increase(gputop_gpu_verdict_seconds_total"
                    f"{{{SEL}}}[$__range])) > 0",
                    "GPU {{gpu}}: {{kind}}",
                    instant=True,
                )
            ],
            unit="percentunit",
            description='E.g. "GPU 3 was input-bound 41 % of the night".',
            defaults={"min": 0, "max": 1},
            options={"displayMode": "basic", "orientation": "horizontal"},
        ),
        _panel(
            4,
            "PCIe throughput vs link maximum",
            "timeseries",
            (12, 8, 12, 8),
            [
                _target(
                    f"gputop_gpu_pcie_bytes_per_second{{{SEL}}}",
                    "GPU {{gpu}} {{direction}}",
                    "A",
                ),
                _target(
                    f"gputop_gpu_pcie_link_max_bytes_per_second{{{SEL}}}",
                    "GPU {{gpu}} link max",
                    "B",
                ),
            ],
            unit="Bps",
            description="Near the maximum while utilization is low: transfer-bound.",
        ),
        _panel(
            5,
            "Jobs: GPU memory",
            "timeseries",
            (0, 16, 8, 8),
            [_target("gputop_job_gpu_memory_bytes", "{{user}} {{command}} (GPUs {{gpus}})")],
            unit="bytes",
            description="Needs gputop export --jobs.",
        ),
        _panel(
            6,
            "Jobs: CPU (share of the host)",
            "timeseries",
            (8, 16, 8, 8),
            [_target("gputop_job_cpu_ratio", "{{user}} {{command}} (GPUs {{gpus}})")],
            unit="percentunit",
            description="Needs gputop export --jobs.",
        ),
        _panel(
            7,
            "Jobs: verdict now",
            "table",
            (16, 16, 8, 8),
            [
                _target(
                    "gputop_job_verdict == 1",
                    "",
                    instant=True,
                ),
                _target("gputop_job_workers", "", "B", instant=True),
            ],
            description="Needs gputop export --jobs.",
            transformations=[
                {"id": "merge", "options": {}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "Value #A": True, "__name__": True},
                        "renameByName": {"Value #B": "workers"},
                    },
                },
            ],
        ),
        _panel(
            8,
            "Power and temperature",
            "timeseries",
            (0, 24, 12, 7),
            [
                _target(f"gputop_gpu_power_watts{{{SEL}}}", "GPU {{gpu}} W", "A"),
                _target(f"gputop_gpu_temperature_celsius{{{SEL}}}", "GPU {{gpu}} °C", "B"),
            ],
        ),
        _panel(
            9,
            "Exporter health: age of the last sample",
            "timeseries",
            (12, 24, 12, 7),
            [
                _target(
                    'time() - gputop_last_sample_timestamp_seconds{instance=~"$instance"}',
                    "{{instance}}",
                ),
                _target(
                    'gputop_sample_duration_seconds{instance=~"$instance"}',
                    "{{instance}} sample duration",
                    "B",
                ),
            ],
            unit="s",
            description="Grows when NVML stalls; the other panels then show the last sample.",
        ),
        _panel(
            10,
            "MIG devices: memory used and SM active",
            "timeseries",
            (0, 31, 24, 7),
            [
                _target(
                    f"gputop_gpu_mig_memory_used_bytes{{{SEL}}}"
                    " / gputop_gpu_mig_memory_total_bytes",
                    "GPU {{gpu}} MIG {{mig}} memory",
                ),
                _target(
                    f"gputop_gpu_mig_sm_active_ratio{{{SEL}}}",
                    "GPU {{gpu}} MIG {{mig}} SM active",
                    "B",
                ),
            ],
            unit="percentunit",
            description="GPUs in MIG mode: NVML gives no utilization per MIG device; memory "
            "always, and SM active from GPM (Hopper and later) per GPU instance (profile and "
            "ids in gputop_gpu_mig_info).",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            11,
            "SM active vs utilization",
            "timeseries",
            (0, 38, 12, 8),
            [
                _target(
                    f"gputop_gpu_sm_active_ratio{{{SEL}}}",
                    "GPU {{gpu}} SM active",
                    "A",
                ),
                _target(
                    f"gputop_gpu_utilization_ratio{{{SEL}}}"
                    f" and on (instance, gpu) gputop_gpu_sm_active_ratio{{{SEL}}}",
                    "GPU {{gpu}} utilization",
                    "B",
                ),
            ],
            unit="percentunit",
            description="Utilization counts any kernel running, a one-thread kernel too; SM "
            "active is the share of SMs busy (GPM: Hopper and later; no line elsewhere). "
            "Utilization high while SM active stays below 0.5 (NVIDIA's DCGM guidance): small "
            "kernels, or a main process that cannot launch them fast enough.",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            12,
            "Tensor cores and DRAM bandwidth",
            "timeseries",
            (12, 38, 12, 8),
            [
                _target(f"gputop_gpu_tensor_active_ratio{{{SEL}}}", "GPU {{gpu}} tensor", "A"),
                _target(f"gputop_gpu_dram_active_ratio{{{SEL}}}", "GPU {{gpu}} DRAM", "B"),
            ],
            unit="percentunit",
            description="Tensor: share of time any tensor pipe was active (about 0 with SM "
            "active high: fp32 math, where bf16/fp16 with AMP would use the tensor cores). "
            "DRAM: bandwidth used of its peak, which tops out near 0.8 (memory-bound there).",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            13,
            "Pipes (not tensor): FP64, FP32, FP16",
            "timeseries",
            (0, 46, 12, 8),
            [
                _target(
                    f"gputop_gpu_pipe_active_ratio{{{SEL}}}",
                    "GPU {{gpu}} {{pipe}}",
                )
            ],
            unit="percentunit",
            description="Share of time each non-tensor floating-point pipe was active (GPM).",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            14,
            "NVLink throughput vs capacity",
            "timeseries",
            (12, 46, 12, 8),
            [
                _target(
                    f"gputop_gpu_nvlink_bytes_per_second{{{SEL}}}",
                    "GPU {{gpu}} {{direction}}",
                    "A",
                ),
                _target(
                    f"gputop_gpu_nvlink_link_max_bytes_per_second{{{SEL}}}",
                    "GPU {{gpu}} links max",
                    "B",
                ),
            ],
            unit="Bps",
            description="All links, each direction, against what the active links carry a "
            "direction. Near the maximum while the GPUs wait: communication-bound (NVLink).",
        ),
        _panel(
            15,
            "Jobs: data wait (measured)",
            "timeseries",
            (0, 54, 12, 8),
            [_target("gputop_job_data_wait_ratio", "{{user}} {{command}} (GPUs {{gpus}})")],
            unit="percentunit",
            description="Share of each step the job's ranks wait for the next batch, measured "
            "by gputop's probe (gputop run). Above 0.05 input-bound, above 0.2 highly (the "
            "TensorFlow profiler's bands). Needs gputop export --jobs; no line without a probe.",
            defaults={"min": 0, "max": 1},
        ),
        _panel(
            16,
            "Jobs: step time (measured)",
            "timeseries",
            (12, 54, 12, 8),
            [_target("gputop_job_step_seconds", "{{user}} {{command}} (GPUs {{gpus}})")],
            unit="s",
            description="Mean time between consecutive batches over the job's ranks (gputop's "
            "probe). Needs gputop export --jobs; no line without a probe.",
        ),
    ]
    variables = [
        {
            "name": "datasource",
            "label": "Prometheus",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        {
            "name": "instance",
            "label": "Host",
            "type": "query",
            "datasource": DS,
            "query": "label_values(gputop_gpu_info, instance)",
            "definition": "label_values(gputop_gpu_info, instance)",
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "current": {},
            "hide": 0,
        },
        {
            "name": "gpu",
            "label": "GPU",
            "type": "query",
            "datasource": DS,
            "query": 'label_values(gputop_gpu_info{instance=~"$instance"}, gpu)',
            "definition": 'label_values(gputop_gpu_info{instance=~"$instance"}, gpu)',
            "refresh": 2,
            "includeAll": True,
            "multi": True,
            "current": {},
            "hide": 0,
        },
    ]
    return {
        "title": "gputop: GPUs, jobs and verdicts",
        "uid": "gputop-verdicts",
        "description": "gputop export: is the training bound by its data pipeline or the GPU?",
        "tags": ["gputop", "gpu", "nvidia"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-12h", "to": "now"},
        "timezone": "",
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python scripts/grafana_dashboard.py")
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
