#!/usr/bin/env bash
# Build the sdist and the wheel, check them with twine, then install the wheel with pipx
# into a fresh, throw-away pipx home and run it as a user would.
# Usage: scripts/check_dist.sh [PYTHON]   (default .venv/bin/python; needs build, twine, pipx)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$PY" -m build --sdist --wheel --outdir "$OUT/dist" . >"$OUT/build.log" 2>&1 || {
    cat "$OUT/build.log"; exit 1; }
ls "$OUT/dist"
"$PY" -m twine check --strict "$OUT"/dist/*
# pipx: its own home and bin dir, so nothing of the user's is touched or reused.
export PIPX_HOME="$OUT/pipx" PIPX_BIN_DIR="$OUT/bin" PIPX_MAN_DIR="$OUT/man"
"$PY" -m pipx install --python "$(command -v python3)" "$OUT"/dist/*.whl >"$OUT/pipx.log" 2>&1 || {
    cat "$OUT/pipx.log"; exit 1; }
GPUTOP="$OUT/bin/gputop"
"$GPUTOP" --version
"$GPUTOP" --demo --once >"$OUT/once.txt"
head -3 "$OUT/once.txt"
"$GPUTOP" export --help >"$OUT/export-help.txt"
grep -q -- "--listen" "$OUT/export-help.txt"
# The installed command is ours, not the unrelated "gputop" distribution on PyPI.
"$OUT/pipx/venvs/"*/bin/python -c 'import importlib.metadata as m; print("installed:", m.version("gputop-dashboard"))'
echo "== dist ok"
