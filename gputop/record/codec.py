"""Block codec: a run of snapshots <-> one compressed, column-encoded payload (the encoding:
docs/recording.md, "Format"). Decoding is exact, floats bit for bit: decode(encode(s)) == s."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import operator
import struct
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

import zstandard

from gputop.model import (
    HOST_FIELDS,
    INVALID_PIDS,
    LIMITS,
    MAX_TEXT,
    GpuMemory,
    GpuProcess,
    ProcessInfo,
    Snapshot,
    check_values,
    clean_texts,
    decoder,
    host_decoder,
    type_hints,
)

#: zstandard level: small files at a compression cost the recorder barely notices.
LEVEL = 15

_LEN = "#"  # path element of a list's length
#: A flattened snapshot: path -> leaf (:func:`flatten`).
Row = dict[tuple[Any, ...], Any]
_MISSING = object()


class CodecError(ValueError):
    """A payload that cannot be decoded (damaged, or not written by this codec)."""


# --- dict form ------------------------------------------------------------------------


def _share_hosts(d: dict[str, Any]) -> dict[str, Any]:
    """Replace a GPU process's host fields by ``host_ref`` where they equal the
    snapshot's own entry for that pid (in place)."""
    procs = {_key(p.get("pid")): p for p in _objects(d.get("processes"))}
    for gpu in _objects(d.get("gpus")):
        for row in _objects(gpu.get("processes")):
            info = procs.get(_key(row.get("pid")))
            if info is None:
                continue
            keys = [k for k in row if k not in _ROW_KEYS]
            if set(keys) == set(info) - {"pid"} and all(_same(row[k], info[k]) for k in keys):
                for k in keys:
                    del row[k]
                row["host_ref"] = True
    return d


# The GpuProcess fields of its own (not the host's); anything else in a row is a host field.
_ROW_KEYS = frozenset({f.name for f in dataclasses.fields(GpuProcess)} - {"host"} | {"host_ref"})


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a list that should hold only objects (untrusted: maybe not a list)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _key(value: Any) -> Any:
    """``value`` if it can be a dict key (a pid of the wrong type may be a list)."""
    return value if isinstance(value, int | float | str | None) else None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _unshare_hosts(d: dict[str, Any]) -> dict[str, Any]:
    procs = {_key(p.get("pid")): p for p in _objects(d.get("processes"))}
    for gpu in _objects(d.get("gpus")):
        for row in _objects(gpu.get("processes")):
            if row.pop("host_ref", False):
                info = procs.get(_key(row.get("pid")))
                if info is None:
                    raise CodecError("a process row refers to a pid the snapshot lacks")
                row.update((k, v) for k, v in info.items() if k != "pid")
    return d


def flatten(snapshot: Snapshot) -> Row:
    """The snapshot's leaves: path -> scalar (a list's length under ``#``)."""
    out: Row = {}
    _flatten(_share_hosts(snapshot.to_dict(whole=True)), (), out)  # every row, every column
    return out


def _flatten(value: Any, path: tuple[Any, ...], out: Row) -> None:
    if isinstance(value, dict):
        if not value:
            out[(*path, "{}")] = 0
        for k, v in value.items():
            _flatten(v, (*path, k), out)
    elif isinstance(value, list):
        out[(*path, _LEN)] = len(value)
        for i, v in enumerate(value):
            _flatten(v, (*path, i), out)
    else:
        out[path] = value


# --- columns --------------------------------------------------------------------------


def _shuffle(raw: bytes, width: int) -> bytes:
    return b"".join(raw[i::width] for i in range(width))


def _unshuffle(data: bytes, width: int) -> bytes:
    n = len(data) // width
    out = bytearray(len(data))
    for i in range(width):
        out[i::width] = data[i * n : (i + 1) * n]
    return bytes(out)


_WIDTHS = (("b", 1, 2**7), ("h", 2, 2**15), ("i", 4, 2**31), ("q", 8, 2**63))


def _ints(values: list[int]) -> tuple[str, bytes] | None:
    """Integers as differences (or as they are, when smaller) in the narrowest width
    that holds them all; None when some do not fit in 8 bytes."""
    deltas = [values[0], *map(operator.sub, values[1:], values[:-1])]
    use, mode = (deltas, "d") if sum(map(abs, deltas)) <= sum(map(abs, values)) else (values, "a")
    low, high = min(use), max(use)
    for code, width, limit in _WIDTHS:
        if -limit <= low and high < limit:
            return mode + code, _shuffle(struct.pack(f"<{len(use)}{code}", *use), width)
    return None


def _decode_ints(mode: str, data: bytes, n: int) -> list[int]:
    code = mode[1:]
    width = struct.calcsize(code)
    values = list(struct.unpack(f"<{n}{code}", _unshuffle(data, width)))
    return list(itertools.accumulate(values)) if mode[0] == "d" else values


def _decimal(values: list[float]) -> tuple[int, list[int]] | None:
    """Floats that are k-digit decimals (k <= 3): k and the integers; None unless the
    division gives back each float exactly (and no -0.0, whose sign would be lost)."""
    for k in range(4):
        scale = 10**k
        ints = []
        for v in values:
            if not math.isfinite(v) or abs(v) * scale >= 2**53:
                return None
            i = round(v * scale)
            if i / scale != v or (v == 0 and math.copysign(1.0, v) < 0):
                break
            ints.append(i)
        else:
            return k, ints
    return None


def _encode_column(values: list[Any]) -> tuple[list[Any], bytes]:
    """(descriptor, data) for the values of the rows where the leaf is present."""
    first = values[0]
    t = type(first)
    if all(_same(v, first) for v in values):
        if t is float and not math.isfinite(first):
            return ["cf", repr(first)], b""
        return ["c", first], b""
    if t is int and all(type(v) is int for v in values):
        packed = _ints(values)
        if packed is not None:
            return ["i", packed[0]], packed[1]
    if t is float and all(type(v) is float for v in values):
        dec = _decimal(values)
        if dec is not None:
            packed = _ints(dec[1])
            if packed is not None:
                return ["n", packed[0], dec[0]], packed[1]
        raw = struct.unpack(f"<{len(values)}Q", struct.pack(f"<{len(values)}d", *values))
        xored = [raw[0], *map(operator.xor, raw[1:], raw[:-1])]
        return ["f"], _shuffle(struct.pack(f"<{len(values)}Q", *xored), 8)
    return ["j"], json.dumps(values, separators=(",", ":")).encode()


def _decode_column(desc: list[Any], data: bytes, n: int) -> list[Any]:
    kind = desc[0]
    if kind == "c":  # a recording is untrusted: its text is cleaned as a source's is
        return clean_texts([desc[1]], MAX_TEXT) * n
    if kind == "cf":
        return [float(desc[1])] * n
    if kind == "i":
        return _decode_ints(desc[1], data, n)
    if kind == "n":
        scale = 10 ** desc[2]
        return [i / scale for i in _decode_ints(desc[1], data, n)]
    if kind == "f":
        xored = struct.unpack(f"<{n}Q", _unshuffle(data, 8))
        raw = struct.pack(f"<{n}Q", *itertools.accumulate(xored, operator.xor))
        return list(struct.unpack(f"<{n}d", raw))
    if kind == "j":
        values = json.loads(data)
        if not isinstance(values, list) or len(values) != n:
            raise CodecError("a JSON column has the wrong length")
        return clean_texts(values, MAX_TEXT)
    raise CodecError(f"unknown column kind {kind!r}")


# --- blocks ---------------------------------------------------------------------------


def encode_rows(rows: Sequence[Row]) -> bytes:
    """The uncompressed payload of flattened snapshots (:func:`flatten`)."""
    if not rows:
        raise ValueError("an empty block")
    keys = dict.fromkeys(itertools.chain.from_iterable(rows))
    n = len(rows)
    descs: list[list[Any]] = []
    blobs: list[bytes] = []
    for key in keys:
        present = [i for i, row in enumerate(rows) if key in row]
        values = [rows[i][key] for i in present]
        desc, data = _encode_column(values)
        if len(present) != n:
            desc.append({"rows": present})
        desc.insert(1, len(data))
        descs.append(desc)
        blobs.append(data)
    head = json.dumps(
        {"n": n, "keys": [list(k) for k in keys], "cols": descs},
        separators=(",", ":"),
        allow_nan=False,
    ).encode()
    return struct.pack("<I", len(head)) + head + b"".join(blobs)


def _decode_columns(
    payload: bytes,
) -> tuple[int, list[tuple[Any, ...]], list[list[Any]], list[tuple[bool, bool]]]:
    """Rows, paths, one full column per path (``_MISSING`` where a row lacks it), and
    per column (constant, float)."""
    try:
        (size,) = struct.unpack_from("<I", payload, 0)
        head = json.loads(payload[4 : 4 + size])
        n = int(head["n"])
        keys = [tuple(k) for k in head["keys"]]
        descs = head["cols"]
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise CodecError(f"unreadable block header: {exc}") from None
    if len(keys) != len(descs):
        raise CodecError("a block has as many paths as columns, this one does not")
    pos = 4 + size
    columns: list[list[Any]] = []
    flags: list[tuple[bool, bool]] = []
    for desc in descs:
        try:  # a recording is untrusted: any column description may be damaged
            body = [desc[0], *desc[2:]]
            rows = body.pop()["rows"] if isinstance(body[-1], dict) else None
            data = payload[pos : pos + desc[1]]
            pos += desc[1]
            values = _decode_column(body, data, n if rows is None else len(rows))
            if rows is not None:
                full: list[Any] = [_MISSING] * n
                for i, v in zip(rows, values, strict=True):
                    full[i] = v
                values = full
        except (struct.error, ValueError, TypeError, IndexError, KeyError) as exc:
            raise CodecError(f"unreadable column: {exc}") from None
        kind = body[0]
        constant = rows is None and kind in ("c", "cf")
        floats = kind in ("n", "f", "cf") or (kind == "c" and type(body[1]) is float)
        columns.append(values)
        flags.append((constant, floats))
    return n, keys, columns, flags


def decode_snapshots(payload: bytes) -> list[Snapshot]:
    """The snapshots of an uncompressed payload: straight from the columns, or (paths
    :class:`_Direct` does not know) ``Snapshot.from_dict`` of each row's dict."""
    n, keys, columns, flags = _decode_columns(payload)
    try:
        direct = _Direct(n, keys, columns, flags)
        snapshots, suspect = direct.snapshots(), direct.suspect
    except _Fallback:
        snapshots, suspect = _from_dicts(n, keys, columns), True
    if not suspect:  # every column within LIMITS: the check would change nothing
        return snapshots
    try:  # a recording is untrusted: the remote lines' check by value
        return [check_values(s, "replay", "the recording") for s in snapshots]
    except ValueError as exc:
        raise CodecError(str(exc)) from None


def _from_dicts(n: int, keys: list[tuple[Any, ...]], columns: list[list[Any]]) -> list[Snapshot]:
    """Each row's snapshot by the checked decoding of its dict: a value of the wrong type
    or shape stays for :func:`check_values` to make n/a with an error."""
    out = []
    read = decoder(Snapshot, checked=True)
    for r in range(n):
        try:
            snapshot = read(_unshare_hosts(_row(keys, [column[r] for column in columns])))
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            raise CodecError(f"a snapshot that does not fit the model: {exc}") from None
        if not isinstance(snapshot, Snapshot):
            raise CodecError("a snapshot that does not fit the model: its time or hostname lacks")
        out.append(snapshot)
    return out


def _row(keys: list[tuple[Any, ...]], values: list[Any]) -> dict[str, Any]:
    """One row's dict (``Snapshot.to_dict()`` form) from its leaves, :func:`flatten` undone."""
    root: dict[str, Any] = {}

    def container(path: tuple[Any, ...]) -> Any:
        node: Any = root
        for name in path:
            found = node[name] if isinstance(node, list) else node.get(name)
            if found is None:
                found = node[name] = {}
            node = found
        return node

    for key, value in zip(keys, values, strict=True):
        if value is _MISSING:
            continue
        if not key or (key[-1] == _LEN and len(key) < 2):
            raise CodecError("an empty path, or a list length without a list")
        if key[-1] == _LEN:
            container(key[:-2])[key[-2]] = [None] * int(value)
        elif key[-1] == "{}":
            container(key[:-1])
        else:
            container(key[:-1])[key[-1]] = value
    return root


def _dict(dictionary: bytes | None) -> zstandard.ZstdCompressionDict | None:
    if dictionary is None:
        return None
    return zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def compressor(dictionary: bytes | None = None) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, dict_data=_dict(dictionary))


def decompress(data: bytes, dictionary: bytes | None = None) -> bytes:
    try:
        return zstandard.ZstdDecompressor(dict_data=_dict(dictionary)).decompress(data)
    except zstandard.ZstdError as exc:
        raise CodecError(f"unreadable compressed block: {exc}") from None


# --- straight from the columns ------------------------------------------------------------
# ``Snapshot.from_dict`` of each row without the dicts: each node of the path tree is built
# for all rows at once by its model type; a node constant over the block is built once and
# shared. Anything unknown raises _Fallback and the dict path decodes the block.


class _Fallback(Exception):
    pass


class _Node:
    __slots__ = ("children", "length", "own")

    def __init__(self) -> None:
        self.children: dict[Any, _Node] = {}
        self.own: int | None = None  # column of the value at this very path (e.g. a None)
        self.length: int | None = None  # column of the list's length


def _tree(keys: list[tuple[Any, ...]]) -> _Node:
    root = _Node()
    for col, key in enumerate(keys):
        node = root
        last = key[-1] if key else None
        if last == "{}" or not key:
            raise _Fallback
        body = key[:-1] if last == _LEN else key
        for name in body:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node()
            node = child
        if last == _LEN:
            node.length = col
        else:
            node.own = col
    return root


@functools.cache
def _maker(cls: type) -> Callable[..., Any]:
    """A positional constructor of the frozen, slotted dataclass ``cls`` that sets the
    slots directly (``__init__`` without its per-field ``object.__setattr__``)."""
    names = [f.name for f in dataclasses.fields(cls)]
    if hasattr(cls, "__post_init__") or not all(
        isinstance(cls.__dict__.get(name), types.MemberDescriptorType) for name in names
    ):
        raise _Fallback
    env: dict[str, Any] = {"new": object.__new__, "cls": cls}
    for i, name in enumerate(names):
        env[f"s{i}"] = cls.__dict__[name].__set__
    args = ", ".join(f"a{i}" for i in range(len(names)))
    body = "".join(f"    s{i}(o, a{i})\n" for i in range(len(names)))
    exec(f"def make({args}):\n    o = new(cls)\n{body}    return o\n", env)
    made: Callable[..., Any] = env["make"]
    return made


@functools.cache
def _classify(tp: Any) -> tuple[int, Any]:
    """(1: a dataclass, 2: a tuple, 0: a value; the type without its Optional)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):  # Optional: its type
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return 1, tp
    return (2 if typing.get_origin(tp) is tuple else 0), tp


@functools.cache
def _types(tp: Any) -> frozenset[type]:
    """The types a built value of ``tp`` may have (and ``_MISSING``'s, a row without it):
    anything else makes the block suspect, for the check by type."""
    args = typing.get_args(tp)
    optional = {type(None)} if type(None) in args else set()
    _, bare = _classify(tp)
    if typing.get_origin(bare) is tuple:
        bare = tuple
    return frozenset({bare, type(_MISSING), *optional, *((int,) if bare is float else ())})


@functools.cache
def _bounds(cls: type, name: str) -> tuple[tuple[float, float, str], int, set[type]] | None:
    """A field's LIMITS, its _classify kind and the number types it takes; None: unbounded."""
    limit = LIMITS.get((cls, name))
    if not limit:
        return None
    kind, bare = _classify(type_hints(cls)[name])
    return limit, kind, {int} if bare is int else {int, float}


def _default(f: dataclasses.Field[Any], n: int) -> list[Any]:
    """The column of a field no row has: its default (none: _Fallback)."""
    if f.default is not dataclasses.MISSING:
        return [f.default] * n
    if f.default_factory is not dataclasses.MISSING:
        return [f.default_factory()] * n
    raise _Fallback


def _gaps(cols: list[list[Any]]) -> tuple[bool, set[int]]:
    """(whether some row of an object lacks one of its keys but has others: a damaged
    block; the rows that lack them all: no object there, as a row of a list cut shorter)."""
    rows = range(len(cols[0]))
    missing = itertools.repeat(_MISSING)
    gaps = [set(itertools.compress(rows, map(operator.is_, c, missing))) for c in cols]
    absent = set.intersection(*gaps)
    return any(g != absent for g in gaps), absent


class _Direct:
    def __init__(
        self,
        n: int,
        keys: list[tuple[Any, ...]],
        columns: list[list[Any]],
        flags: list[tuple[bool, bool]],
    ) -> None:
        self.n = n
        self.columns = columns
        self.flags = flags
        self.root = _tree(keys)
        self._processes: list[Any] | None = None  # each row's Snapshot.processes
        self._by_pid: list[dict[Any, ProcessInfo] | None] = [None] * n
        self._hosts: dict[Any, bool] = {}  # visible value -> whether there is a host
        self.suspect = False  # some value may be outside LIMITS: check_values must look

    def _scan(self, cls: type, name: str, col: list[Any], constant: bool) -> None:
        """Whether the column may hold a value outside its LIMITS (a fast test, at C speed,
        that lets a block whose every value is sane skip :func:`check_values`)."""
        if self.suspect:
            return
        if not set(map(type, col[:1] if constant else col)) <= _types(type_hints(cls)[name]):
            self.suspect = True  # a value of the wrong type or shape
            return
        found = _bounds(cls, name)
        if found is None:
            return
        (low, high, _), kind, numbers = found
        values = col[:1] if constant else col
        if None in values or _MISSING in values:
            values = [v for v in values if v is not None and v is not _MISSING]
        if name == "pid" and not INVALID_PIDS.isdisjoint(values):
            self.suspect = True  # a row the check leaves out, as the driver's lists
            return
        if values and kind == 2:  # a tuple: each item (anything else: suspect)
            tuples = [t for t in values if type(t) is tuple]
            values = [x for t in tuples for x in t] + ([None] if len(tuples) < len(values) else [])
        self.suspect = bool(values) and not (
            set(map(type, values)) <= numbers
            and low <= min(values)
            and max(values) <= high
            and sum(values) == sum(values)  # no NaN
        )

    def snapshots(self) -> list[Snapshot]:
        col, _ = self._dataclass(self.root, Snapshot)
        if any(v is _MISSING for v in col):
            raise _Fallback
        return col

    # Each builder returns (the node's value in each row, whether it is one shared object).

    def _build(self, node: _Node | None, tp: Any) -> tuple[list[Any], bool]:
        if node is None:
            raise _Fallback
        kind, tp = _classify(tp)
        if kind == 1:
            return self._dataclass(node, tp)
        if kind == 2:
            return self._tuple(node, tp)
        if node.children or node.length is not None or node.own is None:
            raise _Fallback
        col = self.columns[node.own]
        constant, floats = self.flags[node.own]
        if tp is float and not floats:  # the one conversion the plain decoder makes
            col = [decoder(float)(col[0])] * self.n if constant else list(map(decoder(float), col))
        return col, constant

    def _merge_own(self, node: _Node, built: list[Any], constant: bool) -> tuple[list[Any], bool]:
        """Rows where the path holds a value itself (a None) take it."""
        if node.own is None:
            return built, constant
        own = self.columns[node.own]
        missing = _MISSING
        return [b if o is missing else o for o, b in zip(own, built, strict=True)], False

    def _dataclass(self, node: _Node, cls: type) -> tuple[list[Any], bool]:
        if not node.children:
            if node.own is None or node.length is not None:
                raise _Fallback
            return self._merge_own(node, [_MISSING] * self.n, False)
        if node.length is not None:
            raise _Fallback
        hints = type_hints(cls)
        fields = dataclasses.fields(cls)
        given: dict[str, list[Any]] = {}  # columns built before the others
        if cls is GpuProcess:
            given = self._gpu_process_parts(node)
        elif not {f.name for f in fields}.issuperset(node.children):
            raise _Fallback
        if cls is Snapshot and "processes" in node.children:  # before the GPUs' host_ref
            self._processes = self._build(node.children["processes"], hints["processes"])[0]
            given["processes"] = self._processes
        cols: list[Any] = []
        constant = True
        n = self.n
        for f in fields:
            child = node.children.get(f.name)
            if f.name in given:
                col, same = given[f.name], False
            elif child is None:
                cols.append(_default(f, n))
                continue
            else:
                col, same = self._build(child, hints[f.name])
            cols.append(col)
            constant = constant and same
            self._scan(cls, f.name, col, same)
        absent: set[int] = set()
        if not constant:
            read = [c for f, c in zip(fields, cols, strict=True) if f.name in node.children]
            holes, absent = _gaps(read)
            self.suspect = self.suspect or holes
        if cls is GpuMemory and not self.suspect:  # used, free and reserved at most the total
            pairs = (tv for part in cols[1:] for tv in zip(cols[0], part, strict=True))
            self.suspect = any(type(t) is type(v) is int and v > t for t, v in pairs)
        make = _maker(cls)
        if constant and n:
            one = make(*(c[0] for c in cols))
            return self._merge_own(node, [one] * n, True)
        made = list(map(make, *cols))
        for r in absent:  # no object in this row, for the parent (or the row's own value)
            made[r] = _MISSING
        return self._merge_own(node, made, False)

    def _tuple(self, node: _Node, tp: Any) -> tuple[list[Any], bool]:
        n = self.n
        args = typing.get_args(tp)
        variadic = len(args) == 2 and args[1] is Ellipsis
        if node.length is None:
            if node.children or node.own is None:
                raise _Fallback
            return self._merge_own(node, [_MISSING] * n, False)
        lengths = self.columns[node.length]
        count = len(node.children)
        if set(node.children) != set(range(count)) or (not variadic and count > len(args)):
            raise _Fallback
        elements: list[list[Any]] = []
        constant = self.flags[node.length][0]
        for i in range(count):
            tp_i = args[0] if variadic else args[i]
            col, same = self._build(node.children[i], tp_i)
            if not self.suspect and not set(map(type, col[:1] if same else col)) <= _types(tp_i):
                self.suspect = True  # an item of the wrong type or shape
            elements.append(col)
            constant = constant and same
        if not variadic and any(v != len(args) for v in lengths if v is not _MISSING):
            raise _Fallback
        if constant and n:
            one = tuple(c[0] for c in elements)[: lengths[0]]
            return self._merge_own(node, [one] * n, True)
        if not elements:
            rows: list[Any] = [()] * n
        else:
            rows = list(zip(*elements, strict=True))
            if any(v != count for v in lengths):
                rows = [
                    r if v == count else (r[:v] if type(v) is int else _MISSING)
                    for r, v in zip(rows, lengths, strict=True)
                ]
        return self._merge_own(node, rows, False)

    def _gpu_process_parts(self, node: _Node) -> dict[str, list[Any]]:
        """A GpuProcess's pid and its host: from the row's host fields, or (``host_ref``)
        the snapshot's own ProcessInfo of that pid (shared)."""
        hints = type_hints(GpuProcess)
        if not _ROW_KEYS.union(HOST_FIELDS).issuperset(node.children) or "pid" not in node.children:
            raise _Fallback
        n = self.n
        pids, _ = self._build(node.children["pid"], hints["pid"])  # scanned with the others
        hosts: list[Any] = [None] * n
        if any(name in node.children for name in HOST_FIELDS):
            info_hints = type_hints(ProcessInfo)
            host_cols = [pids]
            for name in HOST_FIELDS:
                child = node.children.get(name)
                host_cols.append(
                    [None] * n if child is None else self._build(child, info_hints[name])[0]
                )
                self._scan(ProcessInfo, name, host_cols[-1], False)
            infos = map(_maker(ProcessInfo), *host_cols)
            for r, (visible, info) in enumerate(zip(host_cols[1], infos, strict=True)):
                hosts[r] = info if self._has_host(visible) else None
        ref = node.children.get("host_ref")
        if ref is not None:
            if ref.own is None or ref.children or ref.length is not None:
                raise _Fallback
            for r, is_ref in enumerate(self.columns[ref.own]):
                if is_ref is not _MISSING and is_ref:
                    info = self._info(r, pids[r])
                    hosts[r] = info if self._has_host(info.visible) else None
        return {"pid": pids, "host": hosts}

    def _has_host(self, visible: Any) -> bool:
        """Whether a row with this ``visible`` value has a host (asked once per value)."""
        has = self._hosts.get(visible)
        if has is None:
            probe = {"pid": 0} if visible is _MISSING else {"pid": 0, "visible": visible}
            has = self._hosts[visible] = host_decoder()(probe) is not None
        return has

    def _info(self, r: int, pid: Any) -> ProcessInfo:
        index = self._by_pid[r]
        if index is None:
            procs = self._processes
            row = () if procs is None or type(procs[r]) is not tuple else procs[r]
            # A row of the wrong type is the check's to report; it holds no pid.
            index = self._by_pid[r] = {p.pid: p for p in row if type(p) is ProcessInfo}
        info = index.get(pid)
        if info is None:
            raise CodecError("a process row refers to a pid the snapshot lacks")
        return info
