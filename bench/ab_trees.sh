#!/bin/bash
# The headline costs of two checkouts, alternated in one run, each with its own bench/
# scripts:  bench/ab_trees.sh BEFORE_TREE AFTER_TREE  (python: $PYTHON or .venv/bin/python)
set -u
PY=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
for round in 1 2; do
  for tree in "$1" "$2"; do
    echo "=== round $round, $tree ($(git -C "$tree" rev-parse --short HEAD)), load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$tree" && export PYTHONPATH=$tree &&
      "$PY" bench/bench_once.py --quick | tail -6 &&
      "$PY" bench/bench_exporter_tick.py --ticks 200 | tail -1 &&
      "$PY" bench/bench_exporter_tick.py --ticks 200 --jobs | tail -1)
  done
done
for tree in "$1" "$2"; do
  echo "=== diagnosis, $tree, load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$tree" && PYTHONPATH=$tree "$PY" bench/bench_analysis.py --no-plain | tail -8)
done
for round in 1 2; do
  for tree in "$1" "$2"; do
    echo "=== dashboard, $tree, load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd "$tree" && PYTHONPATH=$tree "$PY" bench/bench_ui.py --seconds 30 --rounds 1 --tools gputop | tail -1)
  done
done
