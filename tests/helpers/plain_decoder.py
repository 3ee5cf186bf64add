"""The plain reading of a snapshot's JSON form: one walk over the type hints per value.
The oracle that ``Snapshot.from_dict`` (compiled once per class) is compared with."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from gputop.model import HOST_FIELDS, GpuProcess, ProcessInfo, Snapshot, type_hints


def plain_from_dict(data: dict[str, Any]) -> Snapshot:
    snapshot: Snapshot = _walk(Snapshot, data)
    return snapshot


def _walk(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        return _walk(members[0], value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_walk(args[0], v) for v in value)
        return tuple(_walk(a, v) for a, v in zip(args, value, strict=True))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = type_hints(tp)
        data = dict(value)
        kwargs: dict[str, Any] = {}
        if tp is GpuProcess:
            host_data = {name: data.pop(name, None) for name in HOST_FIELDS}
            if host_data.get("visible") is None:
                kwargs["host"] = None
            else:
                kwargs["host"] = _walk(ProcessInfo, {"pid": data["pid"], **host_data})
            data.pop("host", None)
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _walk(hints[f.name], data[f.name])
        return tp(**kwargs)
    if tp is float and isinstance(value, int):
        return float(value)
    return value
