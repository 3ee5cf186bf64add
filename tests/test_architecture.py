"""Data flows one way: sources -> model -> sampler -> diagnosis (analysis) -> consumers.

Each rule below is checked on the import statements of every module in gputop/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gputop"


def _modules() -> dict[str, set[str]]:
    """Module name -> every module it imports (absolute names, relative ones resolved)."""
    result: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imports: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imports.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ""
                imports.add(mod)
                imports.update(f"{mod}.{alias.name}" for alias in node.names)
        result[name] = imports
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


@pytest.mark.parametrize("name", NOT_UI)
def test_only_the_cli_reaches_into_the_ui(name: str) -> None:
    ui = {m for m in _gputop_imports(name) if _is_under(m, "gputop.ui")}
    assert ui == set(), f"{name} imports {ui}"


# --- diagnosis: the one place where snapshots become jobs and verdicts ----------------------

#: What judges: only gputop.diagnosis (and the analysis itself) may call these.
JUDGES = {
    "gputop.analysis.verdict.Analyzer",
    "gputop.analysis.verdict.all_verdicts",
    "gputop.analysis.verdict.gpu_verdicts",
    "gputop.analysis.verdict.job_verdicts",
    "gputop.analysis.jobs.build_jobs",
    "gputop.analysis.jobs.build_jobs_reusing",
}


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
