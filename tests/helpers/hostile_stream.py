"""A stand-in for a remote ``gputop --stream`` (``gputop fleet --local --remote-command``):
a demo host's lines carrying the values of issue 21, item 1, one a second."""

from __future__ import annotations

import json
import time

from gputop.present import to_json_dict
from gputop.sources.demo import DemoSource


def hostile(data: dict) -> dict:  # type: ignore[type-arg]
    data["gpus"][0]["utilization"]["gpu"] = 1e308
    data["gpus"][1]["memory"].update(used=2**63 - 1, total=1)
    data["gpus"][2]["index"] = -3
    data["host"]["load_average"] = [1e120, 1.0, 1.0]
    data["processes"][0]["pid"] = -42
    data["tick_seconds"] = 1e308
    return data


def main() -> None:
    source = DemoSource(seed=5)
    while True:
        line = json.dumps(hostile(to_json_dict(source.snapshot())))
        print(line, flush=True)
        time.sleep(1.0)


if __name__ == "__main__":
    main()
