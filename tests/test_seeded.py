"""A flaky test is a bug: every test whose draw is not fixed in its source takes the run's
fuzz seed (tests/helpers/fuzz.py), so a failure on a rare seed replays with
GPUTOP_FUZZ_SEED. Read from the tests' own source: no draw from the ``random`` module's
shared state, the system's randomness or the clock, and no hypothesis test that picks a
seed of its own (each has ``@seed(...)`` or ``derandomize=True``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: The one home of the drawn seed.
HOME = TESTS / "helpers" / "fuzz.py"
#: The ``random`` module's functions that draw from its shared, unseeded state.
SHARED_DRAWS = {
    "betavariate", "choice", "choices", "expovariate", "gauss", "getrandbits", "randbytes",
    "randint", "random", "randrange", "sample", "shuffle", "triangular", "uniform",
}  # fmt: skip


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        if path != HOME:
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def unseeded_draw(node: ast.Call) -> str | None:
    """What is wrong with a call, if it draws randomness no seed fixes."""
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        if f.value.id == "random" and f.attr in SHARED_DRAWS:
            return "the random module's shared state"
        if f.value.id == "random" and f.attr == "SystemRandom":
            return "the system's randomness"
        if f.value.id == "random" and f.attr == "Random" and not node.args:
            return "random.Random() without a seed"
    return None


def clock_seed(node: ast.AST) -> bool:
    """A clock read made into a seed (``time.time_ns() % 2**32``, ``Random(time.time())``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _reads_clock(node.left)
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Random"):
        return any(_reads_clock(n) for n in node.args)
    return False


def _reads_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and ast.unparse(n.func).startswith("time.") for n in ast.walk(node)
    )


def test_no_test_draws_randomness_no_seed_fixes() -> None:
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (why := unseeded_draw(node)):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {why}")
            elif clock_seed(node):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: a clock as a seed")
    assert not found, "take the fuzz_seed fixture or fuzz.SEED instead:\n" + "\n".join(found)


def _settings_objects(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = settings(...)``: the name and its source."""
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "settings"
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = ast.unparse(node.value)
    return out


def test_every_hypothesis_test_has_a_seed_or_is_derandomized() -> None:
    found = []
    for path, tree in sources():
        named = _settings_objects(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if not any(d.startswith(("given(", "hypothesis.given(")) for d in decorators):
                continue
            seeded = any(d.startswith(("seed(", "hypothesis.seed(")) for d in decorators)
            fixed = any("derandomize=True" in named.get(d, d) for d in decorators)
            if not (seeded or fixed):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: {node.name}")
    assert not found, "add @seed(SEED) (tests/helpers/fuzz.py):\n" + "\n".join(found)
