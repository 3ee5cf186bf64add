"""Draw the Grafana dashboard's main panels from a real Prometheus: screenshots/grafana-panels.svg
(and .png with cairosvg); with ``--inside``, the panels of GPM and NVLink:
screenshots/grafana-inside.svg (and .png).

    python scripts/grafana_preview.py [--minutes 4] [--out screenshots/grafana-panels]
    python scripts/grafana_preview.py --inside [--minutes 2]

Starts ``gputop export --demo --jobs`` and Debian's ``prometheus`` (127.0.0.1, free
ports, a temporary directory, scraped every second), waits ``--minutes``, then runs the
dashboard's own queries (contrib/grafana/gputop-dashboard.json) through
``/api/v1/query_range`` and draws them: utilization vs memory, the verdict timeline,
the share of the range in each verdict, PCIe against the link maximum, and per-job GPU
memory. Both processes are stopped on the way out. There is no Grafana here: this is
the same data and colours, drawn as plain SVG.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from grafana_dashboard import COLOURS  # noqa: E402

from gputop.analysis.kinds import KINDS, LABELS  # noqa: E402
from tests.helpers.exporter import DASHBOARD, exporter, prometheus  # noqa: E402

GRAFANA = {  # Grafana's named colours used by the dashboard
    "dark-red": "#c4162a",
    "orange": "#ff9830",
    "red": "#f2495c",
    "purple": "#a352cc",
    "yellow": "#fade2a",
    "green": "#73bf69",
    "blue": "#5794f2",
}
PALETTE = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#705da0"]
BG, PANEL, GRID, TEXT, DIM = "#111217", "#181b1f", "#2c3235", "#ccccdc", "#8e8e9e"
FONT = "DejaVu Sans, Arial, sans-serif"


def colour(name: str) -> str:
    return GRAFANA.get(name, name)


def query_range(prom_url: str, expr: str, start: float, end: float, step: float) -> list[Any]:
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prom_url}/api/v1/query_range?{q}", timeout=30) as resp:
        data = json.load(resp)
    assert data["status"] == "success", data
    result: list[Any] = data["data"]["result"]
    return result


def query(prom_url: str, expr: str) -> list[Any]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{prom_url}/api/v1/query?{q}", timeout=30) as resp:
        data = json.load(resp)
    assert data["status"] == "success", data
    result: list[Any] = data["data"]["result"]
    return result


def fill(expr: str, range_: str) -> str:
    return expr.replace("$instance", ".*").replace("$gpu", ".*").replace("$__range", range_)


class Svg:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.parts: list[str] = [f'<rect width="{width}" height="{height}" fill="{BG}"/>']

    def text(self, x: float, y: float, s: str, size: int = 12, fill: str = TEXT, **kw: str) -> None:
        extra = " ".join(f'{k.replace("_", "-")}="{v}"' for k, v in kw.items())
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-family="{FONT}" font-size="{size}" '
            f'fill="{fill}" {extra}>{html.escape(s)}</text>'
        )

    def rect(self, x: float, y: float, w: float, h: float, fill: str, **kw: str) -> None:
        extra = " ".join(f'{k.replace("_", "-")}="{v}"' for k, v in kw.items())
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
            f'fill="{fill}" {extra}/>'
        )

    def line(
        self, pts: list[tuple[float, float]], stroke: str, width: float = 1.5, dash: str = ""
    ) -> None:
        if len(pts) < 2:
            return
        d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<polyline points="{d}" fill="none" stroke="{stroke}" '
            f'stroke-width="{width}"{dash_attr}/>'
        )

    def render(self) -> str:
        body = "\n".join(self.parts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
            f'viewBox="0 0 {self.w} {self.h}">\n{body}\n</svg>\n'
        )


def panel_frame(
    svg: Svg, x: float, y: float, w: float, h: float, title: str
) -> tuple[float, float, float, float]:
    svg.rect(x, y, w, h, PANEL, rx="4", stroke=GRID)
    svg.text(x + 10, y + 20, title, 13, TEXT, font_weight="bold")
    return x + 50, y + 32, w - 60, h - 84  # plot area (room for two legend rows)


def time_axis(
    svg: Svg, px: float, py: float, pw: float, ph: float, start: float, end: float
) -> None:
    for i in range(5):
        t = start + (end - start) * i / 4
        xx = px + pw * i / 4
        svg.line([(xx, py), (xx, py + ph)], GRID, 0.5)
        svg.text(
            xx,
            py + ph + 14,
            time.strftime("%H:%M:%S", time.localtime(t)),
            10,
            DIM,
            text_anchor="middle",
        )


def series_panel(
    svg: Svg,
    box: tuple[float, float, float, float],
    title: str,
    series: list[tuple[str, list[tuple[float, float]], str, str]],
    start: float,
    end: float,
    ymax: float,
    fmt: Any,
) -> None:
    px, py, pw, ph = panel_frame(svg, *box, title)
    for i in range(5):
        v = ymax * i / 4
        yy = py + ph - ph * i / 4
        svg.line([(px, yy), (px + pw, yy)], GRID, 0.5)
        svg.text(px - 6, yy + 4, fmt(v), 10, DIM, text_anchor="end")
    time_axis(svg, px, py, pw, ph, start, end)
    for _name, pts, stroke, dash in series:
        svg.line(
            [
                (px + pw * (t - start) / (end - start), py + ph - ph * min(v, ymax) / ymax)
                for t, v in pts
            ],
            stroke,
            1.6,
            dash,
        )
    # legend under the plot
    lx, ly = px, py + ph + 30
    for name, _, stroke, dash in series:
        if lx > px + pw - 120:
            lx, ly = px, ly + 14
        svg.line([(lx, ly - 4), (lx + 14, ly - 4)], stroke, 3, dash)
        svg.text(lx + 18, ly, name, 10, DIM)
        lx += 28 + 6.2 * len(name)


def points(result: dict[str, Any]) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for t, v in result["values"]]


#: The --inside node: four H100s with GPM and NVLink, each a case the panels tell apart:
#: GPU -> (utilization, SM active, tensor, DRAM, FP32, NVLink rate a direction of the max).
INSIDE_GPUS: dict[int, tuple[float, float, float, float, float, float]] = {
    0: (97, 86, 62, 45, 8, 0.10),  # busy, and truly so: bf16 on the tensor cores
    1: (98, 24, 9, 12, 4, 0.02),  # busy but hollow: small kernels, most SMs idle
    2: (95, 81, 0, 38, 71, 0.05),  # fp32 math: tensor cores idle
    3: (34, 18, 12, 10, 3, 0.92),  # waits on NVLink (the all-reduce), links near capacity
}
NVLINK_LINKS = 18
NVLINK_MAX = NVLINK_LINKS * 25e9  # NVLink 4.0, a direction (gputop.model.NVLINK_VERSIONS)


def inside_scenario(tick: int) -> Any:
    """The --inside node at ``tick``: each GPU's values, moving a little (a DDP step's
    rhythm), as the fake libnvidia-ml's GPM metrics 2-13 and 60/61 (MiB/s)."""
    import math

    from tests.fakenvml import HOPPER_GPM, Scenario, hopper

    gpus = []
    for index, (util, sm, tensor, dram, fp32, link) in INSIDE_GPUS.items():
        wave = math.sin(tick / 3 + index)
        vary = 1 + 0.08 * wave

        def pct(v: float, vary: float = vary) -> float:
            return max(0.0, min(100.0, v * vary))

        rate = NVLINK_MAX * min(1.0, link * (1 + 0.05 * wave)) / 2**20
        gpm = {
            **HOPPER_GPM,
            2: pct(sm),
            3: pct(sm / 2),
            5: pct(tensor),
            10: pct(dram),
            11: pct(1),
            12: pct(fp32),
            13: pct(tensor / 6),
            60: rate,
            61: rate * 0.97,
        }
        gpus.append(
            hopper(
                index,
                len(INSIDE_GPUS),
                links=NVLINK_LINKS,
                util_gpu=int(pct(util)),
                gpm_metrics=gpm,
            )
        )
    return Scenario(gpus=gpus)


def inside(args: argparse.Namespace) -> int:
    """The board's panels of what is inside utilization (SM active, tensor and DRAM, the
    pipes, NVLink against capacity), from a real Prometheus scraping ``gputop export`` on
    the fake libnvidia-ml (tests/fakenvml) whose scenario moves every second."""
    import threading

    from tests.fakenvml import subprocess_env

    board = json.loads(DASHBOARD.read_text())
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in board["panels"]}
    with tempfile.TemporaryDirectory(prefix="gputop-preview-") as tmp_name:
        tmp = Path(tmp_name)
        path = tmp / "scenario.txt"
        inside_scenario(0).write(path)
        env = subprocess_env(path)
        env["PYTHONPATH"] = str(ROOT)
        stop = threading.Event()

        def move() -> None:
            tick = 0
            while not stop.wait(1.0):
                tick += 1
                inside_scenario(tick).write(path)

        mover = threading.Thread(target=move, daemon=True)
        with (
            exporter(["--interval", "1"], env=env, tmp=tmp) as exp,
            prometheus([exp.url[7:]], tmp) as prom,
        ):
            mover.start()
            print(f"exporter {exp.url}, prometheus {prom.url}: waiting {args.minutes:g} min")
            prom.wait_for("gputop_gpu_sm_active_ratio")
            start = time.time()
            time.sleep(args.minutes * 60)
            end = time.time()
            stop.set()
            mover.join()
            step = max(1.0, (end - start) / 400)

            def qr(expr: str) -> list[Any]:
                return query_range(prom.url, fill(expr, "1m"), start, end, step)

            got = {
                title: [qr(e) for e in exprs[title]]
                for title in (
                    "SM active vs utilization",
                    "Tensor cores and DRAM bandwidth",
                    "Pipes (not tensor): FP64, FP32, FP16",
                    "NVLink throughput vs capacity",
                )
            }
    W, H = 1400, 700
    svg = Svg(W, H)
    svg.text(16, 26, "gputop: inside utilization (GPM, NVLink)", 18, TEXT, font_weight="bold")
    svg.text(
        450,
        26,
        "(a real Prometheus scraping gputop export on the fake NVML: 4 H100s, "
        f"{args.minutes:g} min; the dashboard's own queries)",
        12,
        DIM,
    )
    gpus = [str(i) for i in INSIDE_GPUS]

    def lines(results: list[list[Any]], names: list[str]) -> list[Any]:
        out = []
        dashes = ("", "5,3")[: len(results)]
        for i, gpu in enumerate(gpus):
            for result, name, dash in zip(results, names, dashes, strict=True):
                for r in result:
                    if r["metric"]["gpu"] == gpu:
                        out.append((f"GPU {gpu} {name}", points(r), PALETTE[i], dash))
        return out

    ratio = lambda v: f"{v:.0%}"  # noqa: E731
    sm, util = got["SM active vs utilization"]
    series_panel(
        svg,
        (10, 40, 685, 310),
        "SM active vs utilization (dashed)",
        lines([sm, util], ["SM active", "util"]),
        start,
        end,
        1.0,
        ratio,
    )
    series_panel(
        svg,
        (705, 40, 685, 310),
        "Tensor cores and DRAM bandwidth (dashed)",
        lines(got["Tensor cores and DRAM bandwidth"], ["tensor", "DRAM"]),
        start,
        end,
        1.0,
        ratio,
    )
    (pipes,) = got["Pipes (not tensor): FP64, FP32, FP16"]
    fp32 = [r for r in pipes if r["metric"].get("pipe") == "fp32"]
    series_panel(
        svg,
        (10, 370, 685, 310),
        "Pipes (not tensor): FP32 of each GPU",
        lines([fp32], ["fp32"]),
        start,
        end,
        1.0,
        ratio,
    )
    rates, cap = got["NVLink throughput vs capacity"]
    rx = [r for r in rates if r["metric"].get("direction") == "rx"]
    series_panel(
        svg,
        (705, 370, 685, 310),
        "NVLink rx vs links max (dashed)",
        lines([rx, cap], ["rx", "max"]),
        start,
        end,
        NVLINK_MAX * 1.05,
        lambda v: f"{v / 1e9:.0f} GB/s",
    )
    return write(svg, Path(args.out))


def write(svg: Svg, out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".svg").write_text(svg.render())
    print(f"wrote {out.with_suffix('.svg')}")
    try:
        import cairosvg
    except ImportError:
        print("cairosvg not installed: no PNG (pip install -e '.[screenshots]')")
        return 0
    cairosvg.svg2png(url=str(out.with_suffix(".svg")), write_to=str(out.with_suffix(".png")))
    print(f"wrote {out.with_suffix('.png')}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--out", help="default: screenshots/grafana-panels (-inside)")
    parser.add_argument(
        "--inside", action="store_true", help="the GPM and NVLink panels, on the fake NVML"
    )
    args = parser.parse_args()
    if args.out is None:
        name = "grafana-inside" if args.inside else "grafana-panels"
        args.out = str(ROOT / "screenshots" / name)
    if args.inside:
        return inside(args)
    board = json.loads(DASHBOARD.read_text())
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in board["panels"]}
    with tempfile.TemporaryDirectory(prefix="gputop-preview-") as tmp_name:
        tmp = Path(tmp_name)
        with exporter(["--demo", "--jobs"], tmp=tmp) as exp, prometheus([exp.url[7:]], tmp) as prom:
            print(
                f"exporter {exp.url}, prometheus {prom.url}: waiting {args.minutes:g} min",
                flush=True,
            )
            prom.wait_for("gputop_gpu_info")
            start = time.time()
            time.sleep(args.minutes * 60)
            end = time.time()
            step = max(1.0, (end - start) / 400)
            rng = f"{int(end - start)}s"

            def qr(expr: str) -> list[Any]:
                return query_range(prom.url, fill(expr, rng), start, end, step)

            util_e, mem_e = exprs["GPU utilization vs memory used"]
            util, mem = qr(util_e), qr(mem_e)
            codes = qr(exprs["Verdict timeline"][0])
            share = query(prom.url, fill(exprs["Share of the range in each verdict"][0], rng))
            pcie_e, link_e = exprs["PCIe throughput vs link maximum"]
            pcie, link = qr(pcie_e), qr(link_e)
            jobs = qr(exprs["Jobs: GPU memory"][0])
    W, H = 1400, 980
    svg = Svg(W, H)
    svg.text(16, 26, "gputop: GPUs, jobs and verdicts", 18, TEXT, font_weight="bold")
    svg.text(
        350,
        26,
        f"(drawn from a real Prometheus scraping gputop export --demo --jobs every 1 s; "
        f"{args.minutes:g} min; the dashboard's own queries)",
        12,
        DIM,
    )
    gpus = ["0", "2", "5", "7"]
    # 1. utilization vs memory, four GPUs
    lines = []
    for i, gpu in enumerate(gpus):
        c = PALETTE[i]
        for r in util:
            if r["metric"]["gpu"] == gpu:
                lines.append((f"GPU {gpu} util", points(r), c, ""))
        for r in mem:
            if r["metric"]["gpu"] == gpu:
                lines.append((f"GPU {gpu} memory", points(r), c, "5,3"))
    series_panel(
        svg,
        (10, 40, 685, 300),
        "GPU utilization vs memory used (GPUs 0, 2, 5, 7)",
        lines,
        start,
        end,
        1.0,
        lambda v: f"{v:.0%}",
    )
    # 2. verdict timeline
    px, py, pw, ph = panel_frame(svg, 705, 40, 685, 300, "Verdict timeline")
    rows = sorted(codes, key=lambda r: int(r["metric"]["gpu"]))
    row_h = ph / max(1, len(rows))
    seen: list[str] = []
    for k, r in enumerate(rows):
        yy = py + k * row_h
        svg.text(px - 6, yy + row_h * 0.62, f"GPU {r['metric']['gpu']}", 10, DIM, text_anchor="end")
        pts = points(r)
        for j, (t, v) in enumerate(pts):
            t2 = pts[j + 1][0] if j + 1 < len(pts) else end
            kind = KINDS[int(v) - 1]
            if kind not in seen:
                seen.append(kind)
            x0 = px + pw * (t - start) / (end - start)
            x1 = px + pw * (t2 - start) / (end - start)
            svg.rect(x0, yy + 2, x1 - x0 + 0.6, row_h - 4, colour(COLOURS[kind]))
    time_axis(svg, px, py, pw, ph, start, end)
    lx, ly = px, py + ph + 30
    for kind in seen:
        label = LABELS.get(kind, kind)
        if lx > px + pw - 130:
            lx, ly = px, ly + 14
        svg.rect(lx, ly - 9, 10, 10, colour(COLOURS[kind]))
        svg.text(lx + 14, ly, label, 10, DIM)
        lx += 26 + 6.0 * len(label)
    # 3. share of the range in each verdict
    px, py, pw, ph = panel_frame(
        svg, 10, 350, 685, 330, f"Share of the range in each verdict (last {args.minutes:g} min)"
    )
    bars = sorted(share, key=lambda r: (int(r["metric"]["gpu"]), -float(r["value"][1])))
    bar_h = min(18.0, (ph + 20) / max(1, len(bars)))
    for k, r in enumerate(bars):
        v = float(r["value"][1])
        kind = r["metric"]["kind"]
        yy = py - 4 + k * bar_h
        label = f"GPU {r['metric']['gpu']}: {LABELS.get(kind, kind)}"
        svg.text(px + 150, yy + bar_h * 0.7, label, 10, DIM, text_anchor="end")
        svg.rect(px + 156, yy + 1, (pw - 210) * v, bar_h - 3, colour(COLOURS[kind]))
        svg.text(px + 160 + (pw - 210) * v, yy + bar_h * 0.7, f"{v:.0%}", 10, TEXT)
    # 4. PCIe against the link maximum
    lines = []
    peak = max((float(v) for r in link for _, v in r["values"]), default=1.0)
    for i, gpu in enumerate(["5", "2"]):
        c = PALETTE[i + 3]
        for r in pcie:
            if r["metric"]["gpu"] == gpu:
                d = r["metric"]["direction"]
                lines.append((f"GPU {gpu} {d}", points(r), c, "" if d == "rx" else "2,2"))
        for r in link:
            if r["metric"]["gpu"] == gpu:
                lines.append((f"GPU {gpu} link max", points(r), c, "8,4"))
    series_panel(
        svg,
        (705, 350, 685, 330),
        "PCIe throughput vs link maximum (GPUs 5, 2)",
        lines,
        start,
        end,
        peak * 1.05,
        lambda v: f"{v / 1e9:.0f} GB/s",
    )
    # 5. jobs
    lines = []
    top = max((float(v) for r in jobs for _, v in r["values"]), default=1.0)
    for i, r in enumerate(sorted(jobs, key=lambda r: -float(r["values"][-1][1]))[:8]):
        m = r["metric"]
        lines.append(
            (
                f"{m.get('user', '?')} {m.get('command', '?')} (GPUs {m['gpus']})",
                points(r),
                PALETTE[i % 8],
                "",
            )
        )
    series_panel(
        svg,
        (10, 690, 1380, 280),
        "Jobs: GPU memory (gputop export --jobs)",
        lines,
        start,
        end,
        top * 1.1,
        lambda v: f"{v / 2**30:.0f} GiB",
    )
    return write(svg, Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
