"""Cached encoders for the Prometheus text format and OpenMetrics 1.0.0, byte for byte
``prometheus_client``'s (the tests compare them); docs/exporter.md says how."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from math import copysign
from typing import Any, cast

from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics import exposition as om
from prometheus_client.openmetrics.exposition import (
    UNDERSCORES,
    escape_label_name,
    escape_metric_name,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gputop.exporter.metrics import SAMPLE_SUFFIX, Family

_go_float = cast(Callable[[float], str], floatToGoString)

#: Series prefixes of other families kept at most (dropped and refilled when full).
MAX_CACHED = 20_000

_PLAIN_TYPES = {"gauge": "gauge", "counter": "counter", "info": "gauge"}


class _Encoder:
    """The cached encoding both formats share. Not thread-safe: the caller serialises."""

    closing = ""
    fallback: Callable[[Collector], bytes]  # the library's encoder
    prefix_of: Callable[[str, dict[str, str]], str]  # ``name{labels} ``
    plain: Callable[[Any, str], bool]  # whether it writes (sample, family's name) itself
    make_head: Callable[[Any], tuple[str, str]]  # (HELP/TYPE/UNIT lines, sample name)

    def __init__(self) -> None:
        self._prefix: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._heads: dict[tuple[str, ...], tuple[str, str]] = {}
        self._lines: _Lines = {}

    def __call__(self, registry: Collector) -> bytes:
        """The registry's bytes; with what this encoder does not handle, the library's."""
        metrics = list(registry.collect())
        if len(self._prefix) > MAX_CACHED:
            self._prefix.clear()
        series_families: list[Family] = []
        prefixes = self._prefix
        output: list[str] = []
        append = output.append
        for metric in metrics:
            if metric.type not in _PLAIN_TYPES:
                return self.fallback(_Fixed(metrics))
            about = (metric.name, metric.type, metric.documentation, metric.unit)
            head = self._heads.get(about)
            if head is None:
                head = self._heads[about] = self.make_head(metric)
            append(head[0])
            if type(metric) is Family:
                _series(metric, self._lines, self.prefix_of, output)
                series_families.append(metric)
                continue
            for s in metric.samples:
                if not self.plain(s, head[1]):
                    return self.fallback(_Fixed(metrics))
                key = (s.name, tuple(s.labels.items()))
                prefix = prefixes.get(key)
                if prefix is None:
                    prefix = prefixes[key] = self.prefix_of(s.name, s.labels)
                append(f"{prefix}{_value(s.value)}\n")
        append(self.closing)
        self._lines = _pruned(self._lines, series_families)
        return "".join(output).encode("utf-8")


class TextEncoder(_Encoder):
    """``generate_latest(registry)`` with the per-series text cached between scrapes."""

    fallback = staticmethod(generate_latest)

    @staticmethod
    def make_head(metric: Any) -> tuple[str, str]:
        mname = metric.name + SAMPLE_SUFFIX.get(metric.type, "")
        name = escape_metric_name(mname, UNDERSCORES)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        return f"# HELP {name} {doc}\n# TYPE {name} {_PLAIN_TYPES[metric.type]}\n", mname

    @staticmethod
    def plain(sample: Any, name: str) -> bool:
        # not _created, _gsum...: only the plain series of this family
        return sample.timestamp is None and sample.exemplar is None and sample.name == name

    @staticmethod
    def prefix_of(name: str, labels: dict[str, str]) -> str:
        return _prefix(escape_metric_name(name, UNDERSCORES), labels)


def _prefix(escaped: str, labels: dict[str, str]) -> str:
    """``name{a="x",b="y"} ``, label names sorted, as both library encoders write it."""
    if not labels:
        return f"{escaped} "
    pairs = ",".join(
        f'{escape_label_name(k, UNDERSCORES)}="{_escape_value(v)}"'
        for k, v in sorted(labels.items())
    )
    return f"{escaped}{{{pairs}}} "


#: Per series (sample name, label values): its last value, line and ``name{labels} ``.
_Lines = dict[tuple[str, tuple[str, ...]], tuple[float, str, str]]


def _series(
    fam: Family, lines: _Lines, prefix_of: Callable[[str, dict[str, str]], str], out: list[str]
) -> None:
    """Append the lines of a :class:`Family`'s series, a line kept when its value is the
    same (the sign too: 0.0 and -0.0 differ; NaN is never equal)."""
    name = fam.sample_name
    append = out.append
    for labels, value in fam.series:
        key = (name, labels)
        hit = lines.get(key)
        if hit is not None:
            last = hit[0]
            if last == value and (value or copysign(1.0, value) == copysign(1.0, last)):
                append(hit[1])
                continue
            prefix = hit[2]
        else:
            prefix = prefix_of(name, dict(zip(fam.labelnames, labels, strict=True)))
        line = f"{prefix}{_value(value)}\n"
        lines[key] = (value, line, prefix)
        append(line)


def _pruned(lines: _Lines, families: list[Family]) -> _Lines:
    """``lines`` without the series this scrape did not have, once they outnumber them."""
    count = sum(len(fam.series) for fam in families)
    if len(lines) <= 2 * count + 64:
        return lines
    return {(f.sample_name, ls): lines[f.sample_name, ls] for f in families for ls, _ in f.series}


def _value(value: float) -> str:
    """``floatToGoString(value)`` with one repr: Go writes 7 or more integer digits with
    an exponent."""
    d = float(value)
    if d - d:  # inf - inf and NaN - NaN are NaN; any finite d - d is 0.0
        return _go_float(d)
    text = repr(d)
    if d > 0:
        dot = text.find(".")
        if dot > 6:
            mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
            return f"{mantissa}e+{dot - 1:02d}"
    return text


def _escape_value(value: str) -> str:
    """A label value as the library writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class OpenMetricsEncoder(_Encoder):
    """``openmetrics.generate_latest(registry)`` (escaping "underscores", version 1.0.0:
    what Prometheus asks for first), cached."""

    closing = "# EOF\n"

    @staticmethod
    def fallback(registry: Collector) -> bytes:
        return cast(bytes, om.generate_latest(registry))  # type: ignore[no-untyped-call]

    @staticmethod
    def prefix_of(name: str, labels: dict[str, str]) -> str:
        return _prefix(om._escape(name, UNDERSCORES, om._is_legacy_labelname_rune), labels)

    @staticmethod
    def make_head(metric: Any) -> tuple[str, str]:
        name = escape_metric_name(metric.name, UNDERSCORES)
        head = f"# HELP {name} {_escape_value(metric.documentation)}\n# TYPE {name} {metric.type}\n"
        unit = f"# UNIT {name} {metric.unit}\n" if metric.unit else ""
        return head + unit, metric.name

    @staticmethod
    def plain(sample: Any, name: str) -> bool:
        return (
            sample.timestamp is None
            and sample.exemplar is None
            and sample.native_histogram is None
            and sample.value is not None
        )


class _Fixed(Collector):
    """Metrics already collected, as a collector (for the fallback)."""

    def __init__(self, metrics: list[Any]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Any]:
        return self._metrics
