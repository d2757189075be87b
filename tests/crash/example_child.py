"""The crash child of the examples' kill-and-resume tests: runs one custom
flow and SIGKILLs itself at one step's boundary (see
:mod:`tests.crash.test_examples`).  Exit codes are :mod:`tests.crash.child`'s.
"""

from __future__ import annotations

import functools
import os
import traceback
from pathlib import Path
from typing import Any

from swflows import conf as sw_conf
from swflows.api import Swflows
from swflows.engine import runner as runner_mod
from swflows.flows import compose
from tests.crash import child


def atoms(flow: Any) -> list[Any]:
    """Every atom of ``flow``, nested flows opened."""
    found = []
    for node, _ in flow.iter_nodes():
        found.extend(atoms(node) if hasattr(node, "iter_nodes") else [node])
    return found


def install_hook(flow: Any, atom: str, phase: str) -> None:
    """SIGKILL this process before or after ``atom`` executes."""
    [target] = [type(a) for a in atoms(flow) if a.name == atom]
    real = target.execute

    @functools.wraps(real)
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.name == atom and phase == "before":
            child.die()
        result = real(self, *args, **kwargs)
        if self.name == atom:
            child.die()
        return result

    target.execute = execute


def main(spec: dict[str, Any]) -> None:
    report = Path(spec["report"])
    try:
        sw = Swflows.from_conf(sw_conf.get_conf(config_files=[spec["conf"]]))
        factory = runner_mod.load_factory(spec["factory"])
        with compose.planning(sw._plans()):
            install_hook(factory(**spec["kwargs"]), spec["atom"], spec["phase"])
        sw.run_flow(spec["factory"], wait=True, wait_timeout=60, **spec["kwargs"])
    except BaseException:
        report.write_text(traceback.format_exc())
        os._exit(child.RAISED)
    report.write_text("the flow ended without reaching its kill point")
    os._exit(child.MISSED)
