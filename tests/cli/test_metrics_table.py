"""The GPU metric table (``gputop.model.GPU_METRICS``) is the one declaration of each
scalar GPU metric: the bounds, the exporter's per-GPU gauges, the metrics that stand on
their own in the panel, ``--once`` and the detail screen, and docs/metrics.md come from it.

``python -m tests.cli.test_metrics_table --write`` rewrites the generated block of
docs/metrics.md from the table.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

from gputop import fmt, textout
from gputop.exporter.metrics import GPU_GAUGES, METRICS
from gputop.model import (
    GPU_METRIC,
    GPU_METRICS,
    LABELLED_METRICS,
    DriverInfo,
    GpuSample,
    SampleError,
    Snapshot,
)
from gputop.sources.nvml import check_gpus
from gputop.views import gpu_view as gv
from gputop.views.parts import plain
from tests import builders as fx

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
BEGIN = "<!-- BEGIN generated: gpu-metrics -->\n"
END = "<!-- END generated: gpu-metrics -->"
BLOCK = re.compile(re.escape(BEGIN) + r"(.*?)" + re.escape(END), re.S)


def cell(text: str) -> str:
    return text.replace("|", "\\|") or "—"


def gpu_metrics_markdown() -> str:
    """:data:`GPU_METRICS` as a markdown table (docs/metrics.md, generated)."""
    lines = [
        "| field (`--json`) | NVML call | unit | bounds | Prometheus | DCGM | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in GPU_METRICS:
        bounds = "" if m.bounds is None else f"{m.bounds[0]:g}-{m.bounds[1]:g}"
        label = '{{{}="{}"}}'.format(*m.export_label) if m.export_label else ""
        export = f"`{m.export}{label}`" if m.export else ""
        cells = (f"`{m.field}`", m.nvml, m.unit, bounds, export, m.dcgm, m.about)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def test_the_docs_table_is_the_generated_one() -> None:
    found = BLOCK.search(DOC.read_text(encoding="utf-8"))
    assert found, f"{DOC} has no generated gpu-metrics block"
    assert found.group(1) == gpu_metrics_markdown(), (
        "docs/metrics.md is out of date: python -m tests.cli.test_metrics_table --write"
    )


def test_every_row_names_a_field_of_the_sample_and_of_its_json() -> None:
    sample = fx.with_inside(fx.full_gpu_sample(0))
    document = Snapshot(0.0, "h", DriverInfo(True), gpus=(sample,)).to_dict()["gpus"][0]
    assert len(GPU_METRIC) == len(GPU_METRICS)  # one row per field
    for m in GPU_METRICS:
        data = document
        for part in m.field.split("."):
            assert part in data, m.field
            data = data[part]
        assert data == m.get(sample), m.field
        assert m.about and m.nvml


def test_the_bounds_are_the_tables() -> None:
    for m in GPU_METRICS:
        if m.bounds is None:
            continue
        low, high = m.bounds
        head, _, tail = m.field.rpartition(".")
        part = getattr(fx.full_gpu_sample(0), head) if head else None
        # just past the bound, of the field's own type (a float where a whole number goes
        # is a wrong type, said as such: tests/record/test_shapes.py)
        bad = high + 1 if isinstance(m.get(fx.full_gpu_sample(0)), float) else int(high) + 1
        if part is None:
            sample = dataclasses.replace(fx.full_gpu_sample(0), **{tail: bad})
        else:
            sample = dataclasses.replace(
                fx.full_gpu_sample(0), **{head: dataclasses.replace(part, **{tail: bad})}
            )
        errors: list[SampleError] = []
        (checked,) = check_gpus([sample], errors)
        assert m.get(checked) is None, m.field
        (error,) = errors
        assert error.metric == m.field
        assert f"outside {low:g}-{high:g}" in error.message


def test_every_gauge_of_the_table_is_exported_as_declared() -> None:
    defs = {d.name: d for d in METRICS}
    names = [name for name, _ in GPU_GAUGES]
    assert len(names) == len(set(names))
    for name, m in GPU_GAUGES:
        d = defs[name]
        assert (d.type, d.unit, d.labels, d.help) == ("gauge", m.export_unit, ("gpu",), m.about)


def test_a_labelled_metric_stands_on_its_own_in_the_panel_and_in_once() -> None:
    assert LABELLED_METRICS  # the rule below is about something real
    g = dataclasses.replace(fx.full_gpu_sample(0), fan_percent=30.0)
    panel = plain(gv.gpu_view(g, compact=False, bar_width=10).lines[1])
    once = textout.render_text(Snapshot(0.0, "h", DriverInfo(True), gpus=(g,)))
    for m in LABELLED_METRICS:
        value = fmt.shown(m.get(g), m.text)
        assert f" {m.label} {value}" in panel
        assert f"  {m.label.capitalize()} {value}" in once


def test_the_wide_line_width_is_measured_on_the_line() -> None:
    for bar in (0, 6, 13, 20):
        for slot in (0, gv.VERDICT_WIDTH, gv.LONG_VERDICT_WIDTH):
            line = gv.gpu_view(
                fx.full_gpu_sample(3), compact=False, bar_width=bar, verdict_width=slot
            )
            assert gv.wide_line_width(bar, slot) == len(plain(line.lines[0]))
    for width in range(100, 300, 7):
        bar = gv.bar_width_for(width, False)
        history = width - gv.wide_line_width(bar, gv.VERDICT_WIDTH) - gv.HISTORY_FRAME
        assert bar in (6, 20) or gv.BAR_HISTORY <= history < gv.BAR_HISTORY + 2


def test_a_sample_without_values_shows_na_for_each_labelled_metric() -> None:
    g = GpuSample(index=0)
    panel = plain(gv.gpu_view(g, compact=False, bar_width=10).lines[1])
    for m in LABELLED_METRICS:
        assert f" {m.label} {fmt.NA}" in panel


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(BLOCK.sub(lambda _: BEGIN + gpu_metrics_markdown() + END, text), "utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write()


def test_the_performance_state_goes_end_to_end() -> None:
    """P-state (issue 20, item 9): declared once, it reaches the panel, --once, JSON and the
    exporter; the demo's GPUs report the table's value."""
    from prometheus_client.exposition import generate_latest

    from gputop.exporter.metrics import Totals, build
    from gputop.sources.demo import DemoSource

    snap = DemoSource(1, start_time=0.0, step=1.0).snapshot()
    assert {g.performance_state for g in snap.gpus} == {GPU_METRIC["performance_state"].demo}
    g = dataclasses.replace(snap.gpus[0], performance_state=8)
    snap = dataclasses.replace(snap, gpus=(g,))
    assert snap.to_dict()["gpus"][0]["performance_state"] == 8
    assert " perf P8" in plain(gv.gpu_view(g, compact=False, bar_width=10).lines[1])
    assert "  Perf P8" in textout.render_text(snap)

    class Collector:
        def collect(self) -> object:
            return build(snap, {}, [], {}, Totals())

    scrape = generate_latest(Collector()).decode()  # type: ignore[arg-type]
    assert 'gputop_gpu_performance_state{gpu="0"} 8.0' in scrape
