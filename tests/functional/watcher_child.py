"""A runner whose watcher is elected among others, until killed.

``python -m tests.functional.watcher_child SPEC`` where SPEC is a JSON file
``{"conf": path, "overrides": {"group__name": value}}``; it starts the
runner (which joins the election) and prints, every tenth of a second,
``state <time> <leader> <cycles>``: whether its watcher is elected, and
how many cycles it has run.
"""

from __future__ import annotations

import json
import sys
import time

from swflows import conf as sw_conf
from swflows.api import Swflows


def main(spec_path: str) -> None:
    spec = json.loads(open(spec_path).read())
    conf = sw_conf.get_conf(config_files=[spec["conf"]])
    for key, value in spec["overrides"].items():
        group, _, name = key.rpartition("__")
        conf.set_override(name, value, group or None)
    sw = Swflows.from_conf(conf)
    watcher = sw.runner.watcher
    while True:
        leader = int(watcher.active)
        print(f"state {time.time():.3f} {leader} {watcher.cycles}", flush=True)
        time.sleep(0.1)


if __name__ == "__main__":
    main(sys.argv[1])
