"""Run as a script: import every module of gputop through its CLI's start, end the start,
and print (JSON) what every dataclass of the process got from ``dataclasses``: each
generated method's code, field by field, and for gputop's own classes how an instance
behaves (made, compared, hashed, shown, assigned to). Also how many texts the cache's
layer compiled (``gputop.codecache``'s calls of ``compile``) and whether ``dataclasses``
still has a global ``exec`` once the start is over (``--at-exit``: ended by the exit
handler, the output then written from it).

``tests/cli/test_codecache.py`` compares the output with the cache off, cold and warm.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import importlib
import json
import pkgutil
import re
import sys
from types import CodeType
from typing import Any

compiled = 0
_real_compile = builtins.compile


def _counting_compile(source: Any, filename: Any, *args: Any, **kwargs: Any) -> Any:
    global compiled
    if sys._getframe(1).f_globals.get("__name__") == "gputop.codecache":
        compiled += 1
    return _real_compile(source, filename, *args, **kwargs)


#: Methods ``dataclasses`` may generate from a text.
METHODS = (
    "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
    "__lt__", "__le__", "__gt__", "__ge__",
)  # fmt: skip
#: Code attributes compared one by one (co_consts recursively).
ATTRIBUTES = (
    "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals", "co_stacksize",
    "co_flags", "co_firstlineno", "co_name", "co_qualname", "co_filename", "co_names",
    "co_varnames", "co_freevars", "co_cellvars",
)  # fmt: skip
ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def code_print(code: CodeType) -> dict[str, Any]:
    out: dict[str, Any] = {a: repr(getattr(code, a, None)) for a in ATTRIBUTES}
    for a in ("co_code", "co_linetable", "co_exceptiontable", "co_lnotab"):
        value = getattr(code, a, None)
        out[a] = value.hex() if isinstance(value, bytes) else repr(value)
    out["co_consts"] = [
        code_print(c) if isinstance(c, CodeType) else f"{type(c).__name__}:{c!r}"
        for c in code.co_consts
    ]
    return out


def outcome(run: Any) -> str:
    try:
        return "ok: " + ADDRESS.sub(" at 0x?", repr(run()))
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def behaviour(cls: type) -> dict[str, str]:
    """An instance made of small ints for its required fields, twice, and what it does."""
    args = {
        f.name: i
        for i, f in enumerate(dataclasses.fields(cls))
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    out = {"init": outcome(lambda: cls(**args))}
    try:
        a, b = cls(**args), cls(**args)
    except Exception:
        return out
    names = [f.name for f in dataclasses.fields(cls)]
    out["repr"] = outcome(lambda: repr(a))
    out["eq"] = outcome(lambda: a == b)
    out["ne other"] = outcome(lambda: a != object())
    out["hash"] = outcome(lambda: hash(a) == hash(b))
    out["lt"] = outcome(lambda: a < b)
    if names:
        out["set"] = outcome(lambda: setattr(a, names[0], 99))
        out["del"] = outcome(lambda: delattr(b, names[-1]))
        out["after"] = outcome(lambda: repr(a))
    return out


def report() -> None:
    codes: dict[str, Any] = {}
    behaviours: dict[str, Any] = {}
    for name, module in sorted(sys.modules.items()):
        if module is None or not name.startswith(("gputop", "textual", "rich")):
            continue
        for cls in list(vars(module).values()):
            if not (
                isinstance(cls, type)
                and cls.__module__ == name
                and "__dataclass_fields__" in vars(cls)
            ):
                continue
            key = f"{name}.{cls.__qualname__}"
            for method in METHODS:
                fn = vars(cls).get(method)
                code = getattr(fn, "__code__", None)
                if isinstance(code, CodeType) and code.co_filename == "<string>":
                    codes[f"{key}.{method}"] = code_print(code)
            if name.startswith("gputop"):
                behaviours[key] = behaviour(cls)
    print(
        json.dumps(
            {
                "compiled": compiled,
                "exec left": "exec" in vars(dataclasses),
                "codes": codes,
                "behaviours": behaviours,
            }
        )
    )


def main() -> None:
    at_exit = "--at-exit" in sys.argv
    if at_exit:  # runs after the cache's own exit handler, registered later
        atexit.register(report)
    builtins.compile = _counting_compile
    import gputop.cli

    for found in pkgutil.walk_packages(gputop.__path__, "gputop."):
        if found.name.rsplit(".", 1)[-1] in ("__main__", "sitecustomize"):
            continue
        importlib.import_module(found.name)
    importlib.import_module("gputop.ui.app")
    if not at_exit:
        from gputop import codecache

        codecache.stop()
        report()


if __name__ == "__main__":
    main()
