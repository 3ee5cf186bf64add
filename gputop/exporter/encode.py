"""Faster encoders for the Prometheus text format (0.0.4) and OpenMetrics 1.0.0, byte for
byte the output of ``prometheus_client``'s ``generate_latest`` and
``openmetrics.exposition.generate_latest``.

Why: at 8 GPUs x 16 processes a scrape has ~390 series, and the library validates and
escapes every label name and value of every sample on every scrape. The exporter's
families (:class:`gputop.exporter.metrics.Family`) hold their series as (label values,
value) pairs; for each series the encoder remembers its escaped ``name{labels} `` and
its last line, and writes the line afresh only when the value changed (values that
compare equal are written alike, except 0.0 and -0.0, whose sign is compared too). What
is remembered is pruned to about the series of the last scrape, so jobs coming and going
cannot grow it. Other families (``process_*``) are encoded sample by sample with the
prefix cached. Names are escaped by prometheus_client's own
``escape_metric_name``/``escape_label_name``, label values as its ``generate_latest``
does (backslash, newline, double quote); anything outside the plain cases this module
handles (timestamps, exemplars, histograms, ``_created`` samples, other escapings) falls
back to the library for the whole scrape. The tests compare both encoders' bytes on the
demo, MIG, job, lost-GPU, host-only, n/a and hostile-label scrapes.
"""

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

from gputop.exporter.metrics import Family

_go_float = cast(Callable[[float], str], floatToGoString)

#: Series prefixes of other families kept at most (label churn cannot grow the cache
#: without bound: it is dropped and refilled when full).
MAX_CACHED = 20_000

_PLAIN_TYPES = {"gauge": "gauge", "counter": "counter", "info": "gauge"}


class TextEncoder:
    """``generate_latest(registry)`` with the per-series text cached between scrapes.
    Not thread-safe: the caller serialises (the server encodes under its cache lock)."""

    def __init__(self) -> None:
        self._prefix: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._heads: dict[tuple[str, str, str], str] = {}
        self._lines: _Lines = {}

    def __call__(self, registry: Collector) -> bytes:
        metrics = list(registry.collect())
        out = self._encode(metrics)
        if out is None:  # something this encoder does not handle: the library's, all of it
            return generate_latest(_Fixed(metrics))
        return out

    def _encode(self, metrics: Iterable[Any]) -> bytes | None:
        if len(self._prefix) > MAX_CACHED:
            self._prefix.clear()
        series_families: list[Family] = []
        prefixes = self._prefix
        output: list[str] = []
        append = output.append
        for metric in metrics:
            mtype = _PLAIN_TYPES.get(metric.type)
            if mtype is None:
                return None
            mname = metric.name
            if metric.type == "counter":
                mname += "_total"
            elif metric.type == "info":
                mname += "_info"
            head_key = (mname, mtype, metric.documentation)
            head = self._heads.get(head_key)
            if head is None:
                name = escape_metric_name(mname, UNDERSCORES)
                doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
                head = self._heads[head_key] = f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n"
            append(head)
            if type(metric) is Family:
                _series(metric, self._lines, _prefix, output)
                series_families.append(metric)
                continue
            for s in metric.samples:
                if s.timestamp is not None or s.exemplar is not None or s.name != mname:
                    return None  # _created, _gsum...: not a plain series of this family
                key = (s.name, tuple(s.labels.items()))
                prefix = prefixes.get(key)
                if prefix is None:
                    prefix = prefixes[key] = _prefix(s.name, s.labels)
                append(f"{prefix}{_value(s.value)}\n")
        self._lines = _pruned(self._lines, series_families)
        return "".join(output).encode("utf-8")


def _prefix(name: str, labels: dict[str, str]) -> str:
    """``name{a="x",b="y"} `` exactly as generate_latest writes it (label names sorted)."""
    escaped = escape_metric_name(name, UNDERSCORES)
    if not labels:
        return escaped + " "
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
    """Append the lines of a :class:`Family`'s series: a series whose value is the one it
    had last time is the line written then (equal values write the same text, except
    0.0 and -0.0: the sign is compared too; NaN never equals itself, so it is written
    afresh)."""
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
    """``lines`` without the series this scrape did not have, once they are as many as
    those it had (jobs come and go: what is remembered stays about one scrape's worth)."""
    count = sum(len(fam.series) for fam in families)
    if len(lines) <= 2 * count + 64:
        return lines
    kept: _Lines = {}
    for fam in families:
        name = fam.sample_name
        for labels, _ in fam.series:
            key = (name, labels)
            kept[key] = lines[key]
    return kept


def _value(value: float) -> str:
    """``floatToGoString(value)``: Python's repr, except a positive number of 7 or more
    integer digits, which Go writes with an exponent (the library's rule, written out
    here so a byte count costs one repr, not two), and inf/NaN (the library's)."""
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
    """A label value as generate_latest writes it (label values are UTF-8: only
    backslash, newline and double quote are escaped)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class OpenMetricsEncoder:
    """``openmetrics.generate_latest(registry)`` (escaping "underscores", version 1.0.0:
    what Prometheus asks for first) with the per-series text cached between scrapes, as
    :class:`TextEncoder`. Not thread-safe: the caller serialises."""

    def __init__(self) -> None:
        self._prefix: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._heads: dict[tuple[str, str, str, str], str] = {}
        self._lines: _Lines = {}

    def __call__(self, registry: Collector) -> bytes:
        metrics = list(registry.collect())
        out = self._encode(metrics)
        if out is None:
            return cast(bytes, om.generate_latest(_Fixed(metrics)))  # type: ignore[no-untyped-call]
        return out

    def _encode(self, metrics: Iterable[Any]) -> bytes | None:
        if len(self._prefix) > MAX_CACHED:
            self._prefix.clear()
        series_families: list[Family] = []
        prefixes = self._prefix
        output: list[str] = []
        append = output.append
        for metric in metrics:
            if metric.type not in _PLAIN_TYPES:
                return None
            head_key = (metric.name, metric.type, metric.documentation, metric.unit)
            head = self._heads.get(head_key)
            if head is None:
                name = escape_metric_name(metric.name, UNDERSCORES)
                doc = _escape_value(metric.documentation)
                head = f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n"
                if metric.unit:
                    head += f"# UNIT {name} {metric.unit}\n"
                self._heads[head_key] = head
            append(head)
            if type(metric) is Family:
                _series(metric, self._lines, _om_prefix, output)
                series_families.append(metric)
                continue
            for s in metric.samples:
                if (
                    s.timestamp is not None
                    or s.exemplar is not None
                    or s.native_histogram is not None
                    or s.value is None
                ):
                    return None
                key = (s.name, tuple(s.labels.items()))
                prefix = prefixes.get(key)
                if prefix is None:
                    prefix = prefixes[key] = _om_prefix(s.name, s.labels)
                append(f"{prefix}{_value(s.value)}\n")
        append("# EOF\n")
        self._lines = _pruned(self._lines, series_families)
        return "".join(output).encode("utf-8")


def _om_prefix(name: str, labels: dict[str, str]) -> str:
    """``name{a="x",b="y"} `` as openmetrics.generate_latest writes it."""
    escaped = om._escape(name, UNDERSCORES, om._is_legacy_labelname_rune)
    if not labels:
        return f"{escaped} "
    pairs = ",".join(
        f'{escape_label_name(k, UNDERSCORES)}="{_escape_value(v)}"'
        for k, v in sorted(labels.items())
    )
    return f"{escaped}{{{pairs}}} "


class _Fixed(Collector):
    """Metrics already collected, presented again as a collector (for the fallback)."""

    def __init__(self, metrics: list[Any]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Any]:
        return self._metrics
