"""Run by Python at start-up (``site``) in every Python process of ``gputop run``'s
command, torchrun's ranks and spawned DataLoader workers included: start the probe, then
run the ``sitecustomize`` this one hides, if any.

The command's Python may live in another environment than gputop (gputop in pipx, the job
in conda or a container): the probe is then loaded from the gputop that launched it (its
package only: it needs the standard library and nothing else). If that fails (a Python
too old), one line on stderr and the command runs unprobed.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _start_probe() -> None:
    try:
        if "gputop" not in sys.modules:
            package = os.path.dirname(os.path.dirname(_HERE))
            spec = importlib.util.spec_from_file_location(
                "gputop",
                os.path.join(package, "__init__.py"),
                submodule_search_locations=[package],
            )
            if spec is None or spec.loader is None:
                raise ImportError(f"no gputop package at {package}")
            module = importlib.util.module_from_spec(spec)
            sys.modules["gputop"] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules["gputop"]
                raise
        import gputop.probe  # noqa: F401  (starts it, unless GPUTOP_PROBE=0)
    except Exception as exc:
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"gputop probe: cannot start in {sys.executable} "
                f"({type(exc).__name__}: {exc}): the command runs unprobed\n"
            )


def _chain() -> None:
    """The sitecustomize Python would have run without this one."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start_probe()
_chain()
