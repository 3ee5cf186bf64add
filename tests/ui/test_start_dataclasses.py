"""Every dataclass in gputop says what it is in a docstring.

On Python before 3.13, ``dataclasses`` gives a class without one ``Name(signature)`` as its
``__doc__``, made with ``inspect.signature`` while the module is imported: work at every
start for a text nobody reads (bench/README.md §5, "The first frame: the model's classes
and the diagnosis"). Checked by the source, not timed.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "dataclass"


def dataclasses_without_docstring(package: Path) -> list[str]:
    """``path:line Name`` of each class in ``package`` declared with ``@dataclass`` and
    no docstring of its own."""
    missing = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ClassDef)
                and any(_is_dataclass_decorator(d) for d in node.decorator_list)
                and ast.get_docstring(node) is None
            ):
                missing.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}")
    return missing


def test_every_dataclass_in_gputop_has_a_docstring() -> None:
    missing = dataclasses_without_docstring(ROOT / "gputop")
    assert missing == [], f"dataclasses without a docstring: {missing}"


def test_the_check_sees_every_spelling_of_the_decorator(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "import dataclasses\nfrom dataclasses import dataclass\n"
        "@dataclass\nclass A:\n    x: int\n"
        "@dataclass(frozen=True, slots=True)\nclass B:\n    x: int\n"
        "@dataclasses.dataclass(eq=False)\nclass C:\n    x: int\n"
        '@dataclass\nclass D:\n    """Said."""\n\n    x: int\n'
        "class E:\n    x: int\n"
    )
    found = dataclasses_without_docstring(package)
    assert found == ["pkg/m.py:4 A", "pkg/m.py:7 B", "pkg/m.py:10 C"]


def test_the_model_on_the_start_path_makes_no_signature_doc() -> None:
    """The model's classes, as imported: none has the ``Name(...)`` doc dataclasses makes."""
    import gputop.model as model

    assert "gputop.model" in sys.modules
    made = [
        name
        for name, cls in vars(model).items()
        if isinstance(cls, type)
        and cls.__module__ == model.__name__
        and dataclasses.is_dataclass(cls)
        and (cls.__doc__ or "").startswith(f"{cls.__name__}(")
    ]
    assert made == []
