"""Type and shape mutations of a snapshot's JSON form (issue 29, class 4): every field, at
every depth, replaced by each JSON type; and the oracle a checked reading must meet."""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterator
from typing import Any

#: One value of each JSON type (and the shapes that break a reader): null, both bools,
#: integers small, negative and of hundreds of digits, floats, NaN, strings, lists, objects.
JSON_TYPES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    7,
    10**400,
    2.5,
    1e308,
    float("nan"),
    "",
    "text",
    [],
    [1, "x", None],
    {},
    {"a": 1},
)

Path = tuple[Any, ...]


def paths(node: Any, at: Path = ()) -> Iterator[Path]:
    """Every path below ``node`` (objects' keys, lists' indexes), parents first."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        yield (*at, key)
        if isinstance(value, dict | list):
            yield from paths(value, (*at, key))


def pattern(path: Path) -> str:
    """The field a path names, whatever its list indexes ("gpus.*.memory.used")."""
    return ".".join("*" if type(k) is int else str(k) for k in path)


def by_field(data: dict[str, Any], rng: random.Random) -> list[Path]:
    """One path of each field (a random one of its list items)."""
    found: dict[str, list[Path]] = {}
    for p in paths(data):
        found.setdefault(pattern(p), []).append(p)
    return [rng.choice(found[k]) for k in sorted(found)]


def get(node: Any, path: Path) -> Any:
    for key in path:
        node = node[key]
    return node


def mutated(data: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    get(out, path[:-1])[path[-1]] = copy.deepcopy(value)
    return out


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: 1 and 1.0 alike, a bool never a number, NaN never equal."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if type(a) in (int, float) and type(b) in (int, float):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def kept_or_said(
    decoded: dict[str, Any], path: Path, value: Any, said: list[str], who: str
) -> str | None:
    """Why the decoding of a line or block with ``value`` at ``path`` breaks the rule
    (None: it holds): the value is read as sent, or an error says what was refused."""
    if said:
        return None
    try:
        got = get(decoded, path)
    except (KeyError, IndexError, TypeError):
        return f"{pattern(path)} = {value!r:.60} went without an error from {who}"
    if isinstance(value, dict) and isinstance(got, dict) and got.keys().isdisjoint(value):
        return None  # an object's keys the model lacks are additive (docs/json.md): unread
    if not same_json(got, value):
        return f"{pattern(path)} = {value!r:.60} read as {got!r:.60} without an error"
    return None


#: What a screen must never show of a refused value: a Python repr of a list or dict.
REPR = re.compile(r"\[1, 'x', None\]|\{'a': 1\}")
