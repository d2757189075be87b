"""A process that starts a group's deployment, then waits to be killed.

``python -m tests.functional.group_child SPEC`` where SPEC is a JSON file:
``{"conf": path, "overrides": {"group__name": value}, "create": {...}}``;
it prints ``started`` once the group is recorded, and lets its runner
drive the rollout until the test kills it (SIGKILL).
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
    sw.create_group(**spec["create"], wait=False)
    print("started", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1])
