"""Data flows one way: sources -> model -> sampler -> diagnosis (analysis) -> consumers.

Each rule below is checked on the import statements of every module in gputop/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gputop"


def _from_imports(name: str) -> list[tuple[str, str]]:
    """(module, name) of each ``from module import name`` in module ``name`` (relative
    ones resolved; ``import a.b`` gives ("a.b", ""))."""
    path = PACKAGE.parent / Path(*name.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.extend((mod, alias.name) for alias in node.names)
    return out


def _modules() -> dict[str, set[str]]:
    """Module name -> every module it imports (absolute names, relative ones resolved)."""
    result: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        found = _from_imports(name)
        result[name] = {m for m, _ in found} | {f"{m}.{n}" for m, n in found if n}
    return result


MODULES = _modules()


def _gputop_imports(name: str) -> set[str]:
    return {m for m in MODULES[name] if m == "gputop" or m.startswith("gputop.")}


def _is_under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_package_was_found() -> None:
    assert "gputop.model" in MODULES
    assert "gputop.fmt" in MODULES


def test_model_imports_nothing_of_gputop() -> None:
    assert _gputop_imports("gputop.model") == set()


def test_fmt_imports_only_the_model() -> None:
    # clean_text lives with the checked decoding of untrusted snapshots; fmt re-exports it
    assert {m for m in _gputop_imports("gputop.fmt") if not _is_under(m, "gputop.model")} == set()


#: Leaves every stage may import: they import nothing of gputop but the model.
LEAVES = (
    "gputop.model",
    "gputop.fmt",
    "gputop.pcie",
    "gputop.cells",
    "gputop.argtypes",
    "gputop.probefile",
)


@pytest.mark.parametrize("name", [m for m in LEAVES if m in MODULES])
def test_leaves_import_nothing_of_gputop(name: str) -> None:
    assert {m for m in _gputop_imports(name) if not _is_under(m, "gputop.model")} == set()


@pytest.mark.parametrize("name", [m for m in MODULES if _is_under(m, "gputop.sources")])
def test_sources_import_only_model_fmt_and_sources(name: str) -> None:
    bad = {m for m in _gputop_imports(name) if not _is_under(m, *LEAVES, "gputop.sources")}
    assert bad == set(), f"{name} imports {bad}"


@pytest.mark.parametrize("name", [m for m in MODULES if _is_under(m, "gputop.analysis")])
def test_analysis_never_imports_a_source_or_a_probe(name: str) -> None:
    bad = {m for m in _gputop_imports(name) if not _is_under(m, *LEAVES, "gputop.analysis")}
    assert bad == set(), f"{name} imports {bad}"
    probes = {m for m in MODULES[name] if _is_under(m, "pynvml", "psutil", "textual", "rich")}
    assert probes == set(), f"{name} imports {probes}"


@pytest.mark.parametrize("name", [m for m in MODULES if _is_under(m, "gputop.ui")])
def test_ui_never_calls_nvml_or_psutil(name: str) -> None:
    probes = {m for m in MODULES[name] if _is_under(m, "pynvml", "psutil", "gputop.sources.nvml")}
    probes |= {m for m in MODULES[name] if _is_under(m, "gputop.sources.host")}
    assert probes == set(), f"{name} imports {probes}"


#: Command-line entry points (``gputop`` and its subcommands) may start the UI.
CLI = ("gputop.cli", "gputop.fleet", "gputop.record.replay_cli")
NOT_UI = [m for m in MODULES if not _is_under(m, "gputop.ui", *CLI)]
#: The pure views (a snapshot in, text parts out): what the dashboard draws and the
#: ``--once`` text is built on, so they belong to no one consumer. One stage, one package.
VIEWS = "gputop.views"
#: What the views are made from: the model and the leaves, the diagnosis and the analysis
#: whose results they show, and the sources' pure helpers (owner labels, remote cells).
VIEWS_MAY_IMPORT = (*LEAVES, "gputop.analysis", "gputop.diagnosis", "gputop.sources", VIEWS)


@pytest.mark.parametrize("name", NOT_UI)
def test_only_the_cli_reaches_into_the_ui(name: str) -> None:
    ui = {m for m in _gputop_imports(name) if _is_under(m, "gputop.ui")}
    assert ui == set(), f"{name} imports {ui}"


def test_the_text_output_draws_with_the_views_not_the_ui() -> None:
    """``--once`` shares the dashboard's pure views, which live below both consumers."""
    mine = _gputop_imports("gputop.textout")
    assert {m for m in mine if _is_under(m, VIEWS)}, "textout no longer uses the views?"
    assert {m for m in mine if _is_under(m, "gputop.ui")} == set()


VIEW_MODULES = [m for m in MODULES if _is_under(m, VIEWS)]


@pytest.mark.parametrize("name", VIEW_MODULES)
def test_the_pure_views_import_no_widget_library_and_no_consumer(name: str) -> None:
    bad = {m for m in MODULES[name] if _is_under(m, "textual", "rich")}
    # ``from gputop import fmt`` names the package and gputop.fmt; the latter is checked
    mine = _gputop_imports(name) - {"gputop"}
    bad |= {m for m in mine if not _is_under(m, *VIEWS_MAY_IMPORT)}
    assert bad == set(), f"{name} imports {bad}"


def test_every_pure_view_lives_in_the_views_package() -> None:
    """A module of the dashboard that needs no Textual and no Rich is a pure view: it
    belongs in the views package, where ``--once`` may use it, not hidden in ``ui/``."""
    assert len(VIEW_MODULES) > 1
    pure_in_ui = [
        m
        for m in MODULES
        if _is_under(m, "gputop.ui")
        and PACKAGE.parent.joinpath(*m.split(".")).with_suffix(".py").is_file()
        and not {i for i in MODULES[m] if _is_under(i, "textual", "rich")}
    ]
    assert pure_in_ui == [], f"pure views under gputop/ui: {pure_in_ui}"


# --- diagnosis: the one place where snapshots become jobs and verdicts ----------------------

#: What judges: only gputop.diagnosis (and the analysis itself) may call these. Each is a
#: real name (``test_each_judge_listed_exists``): a name renamed away would check nothing.
JUDGES = {
    "gputop.analysis.verdict.Analyzer",
    "gputop.analysis.verdict.gpu_verdicts_of",
    "gputop.analysis.verdict.job_verdict",
    "gputop.analysis.verdict.judge",
    "gputop.analysis.kinds.PRECEDENCE",
    "gputop.analysis.kinds.Precedence",
    "gputop.analysis.jobs.build_jobs",
    "gputop.analysis.jobs.build_jobs_reusing",
}


def _top_level_names(module: str) -> set[str]:
    """The names ``module`` defines at its top level: functions, classes, assignments."""
    path = PACKAGE.parent / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_each_judge_listed_exists(name: str) -> None:
    module, _, attr = name.rpartition(".")
    assert module in MODULES, f"{name}: no module {module}"
    assert attr in _top_level_names(module), f"{name}: {module} defines no {attr}"


def test_diagnosis_imports_only_model_fmt_and_analysis() -> None:
    bad = {
        m
        for m in _gputop_imports("gputop.diagnosis")
        if not _is_under(m, *LEAVES, "gputop.analysis")
    }
    assert bad == set(), f"gputop.diagnosis imports {bad}"
    probes = {
        m
        for m in MODULES["gputop.diagnosis"]
        if _is_under(m, "pynvml", "psutil", "textual", "rich")
    }
    assert probes == set()


@pytest.mark.parametrize("name", [m for m in MODULES if not _is_under(m, "gputop.analysis")])
def test_only_diagnosis_turns_snapshots_into_jobs_and_verdicts(name: str) -> None:
    if name == "gputop.diagnosis":
        assert JUDGES & MODULES[name]  # the rule below is about something real
        return
    used = JUDGES & MODULES[name]
    assert used == set(), f"{name} judges on its own ({used}): use gputop.diagnosis"


@pytest.mark.parametrize(
    "name", [m for m in MODULES if _is_under(m, "gputop.sources", "gputop.sampler", "gputop.model")]
)
def test_earlier_stages_never_import_the_diagnosis(name: str) -> None:
    assert not {m for m in _gputop_imports(name) if _is_under(m, "gputop.diagnosis")}


# --- no import circle, no private name across modules ---------------------------------------
# Written for any package (the lead widens them to all of gputop/): each takes the
# package's directory.


def package_imports(package: Path) -> dict[str, list[tuple[str, str]]]:
    """Module -> (module, name) of every ``import`` and ``from ... import`` in it, at module
    level, in functions and under TYPE_CHECKING alike (relative ones resolved; ``name`` is
    "" for ``import module``). Modules of ``package`` and its sub-packages only."""
    top = package
    while (top.parent / "__init__.py").exists():
        top = top.parent
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(top.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: list[tuple[str, str]] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(alias.name, "") for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    mod = ".".join([*base, mod] if mod else base)
                found += [(mod, alias.name) for alias in node.names]
        out[name] = found
    return out


def _edges(imports: dict[str, list[tuple[str, str]]]) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (``from pkg import module``
    counts as importing that module)."""
    return {
        name: {
            f"{mod}.{what}" if f"{mod}.{what}" in imports else mod
            for mod, what in found
            if (f"{mod}.{what}" in imports or mod in imports) and mod != name
        }
        for name, found in imports.items()
    }


def import_cycles(package: Path) -> list[list[str]]:
    """Every import circle among the modules of ``package`` (each as a path back to its
    start), found by a depth-first walk."""
    edges = _edges(package_imports(package))
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(name: str) -> None:
        state[name] = 1
        path.append(name)
        for nxt in sorted(edges.get(name, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            walk(name)
    return cycles


def private_imports(package: Path) -> list[str]:
    """Every ``from module import _name`` between two modules of ``package``."""
    imports = package_imports(package)
    return [
        f"{name} imports {what} from {mod}"
        for name, found in imports.items()
        for mod, what in found
        if mod in imports and mod != name and what.startswith("_") and not what.startswith("__")
    ]


def test_the_checks_see_circles_and_private_names(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import _x\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert import_cycles(pkg) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert private_imports(pkg) == ["pkg.a imports _x from pkg.b"]


def test_there_is_no_import_circle_anywhere_in_gputop() -> None:
    """Module-level, function-level and TYPE_CHECKING imports alike."""
    assert import_cycles(PACKAGE) == []


def test_no_underscore_name_is_imported_from_another_module() -> None:
    """``from gputop.x import _name`` between two modules; dunders such as
    ``__version__`` are public."""
    assert private_imports(PACKAGE) == []


# --- layers: commands compose consumers; consumers never import each other -----------------


def _imported_modules(name: str) -> set[str]:
    """The gputop modules ``name`` imports (``from pkg import mod`` counts as ``pkg.mod``)."""
    out: set[str] = set()
    for mod, what in _from_imports(name):
        if f"{mod}.{what}" in MODULES:
            out.add(f"{mod}.{what}")
        elif mod in MODULES:
            out.add(mod)
    return out


#: The layers above the pipeline, as data: each consumer (a subscriber of a feed's frames)
#: by the modules that make it; the commands, which sit above the consumers and compose
#: them. A module's layer is its longest matching entry.
CONSUMERS: dict[str, tuple[str, ...]] = {
    "dashboard": ("gputop.ui",),
    "text output": ("gputop.textout",),
    "stream": ("gputop.stream",),
    "exporter": ("gputop.exporter",),
    "recorder": ("gputop.record.store", "gputop.record.codec"),
}
COMMANDS: tuple[str, ...] = (
    "gputop.__main__",
    "gputop.launch",  # the `gputop` script: holds the collector, then gputop.cli
    "gputop.cli",
    "gputop.exporter",  # the package itself: ``gputop export``'s main (not its modules)
    "gputop.fleet",
    "gputop.record.record_cli",
    "gputop.record.replay_cli",
)


def _layer(module: str) -> str | None:
    """ "command", a consumer's name, or None (the pipeline and what it is made of, and
    the pure views every consumer may draw with)."""
    if module in COMMANDS:
        return "command"
    if _is_under(module, VIEWS):
        return None
    best: tuple[int, str | None] = (0, None)
    for consumer, prefixes in CONSUMERS.items():
        for p in prefixes:
            if _is_under(module, p) and len(p) > best[0]:
                best = (len(p), consumer)
    return best[1]


def test_the_layers_name_real_modules() -> None:
    for module in COMMANDS:
        assert module in MODULES, module
    for prefixes in CONSUMERS.values():
        assert all(any(_is_under(m, p) for m in MODULES) for p in prefixes), prefixes


@pytest.mark.parametrize("name", [m for m in MODULES if _layer(m) not in (None, "command")])
def test_a_consumer_imports_no_other_consumer_and_no_command(name: str) -> None:
    mine = _layer(name)
    bad = {m for m in _imported_modules(name) if (layer := _layer(m)) is not None and layer != mine}
    assert bad == set(), f"{name} ({mine}) imports {bad}: compose them in a command"


@pytest.mark.parametrize("name", [m for m in MODULES if _layer(m) != "command"])
def test_only_a_command_imports_a_command(name: str) -> None:
    bad = {m for m in _imported_modules(name) if _layer(m) == "command"}
    assert bad == set(), f"{name} imports {bad}"
