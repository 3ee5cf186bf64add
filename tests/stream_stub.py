"""Stand-in for ``gputop --demo --stream`` until that lands: demo snapshots with their
verdicts, one compact JSON line per interval. Usage: stream_stub.py [--seed N] --stream
--interval S [--count N]."""

from __future__ import annotations

import argparse
import json
import sys
import time

from gputop.diagnosis import diagnose
from gputop.sources.demo import DemoSource
from gputop.textout import to_json_dict


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stream", action="store_true")
    p.add_argument("--demo", action="store_true")
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=0)
    args = p.parse_args()
    source = DemoSource(args.seed, clock=time.time)
    history = []
    n = 0
    while True:
        snap = source.snapshot()
        history = [*history[-30:], snap]
        line = json.dumps(to_json_dict(snap, diagnose(history)), separators=(",", ":"))
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            return 0
        n += 1
        if args.count and n >= args.count:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
