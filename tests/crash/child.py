"""The crash child: runs one operation and SIGKILLs itself at a kill point.

Runs in a process forked from a fork server that imported this module
(and so swflows, TaskFlow and the clients) once; see
:func:`tests.crash.scenarios.run_child`.  The kill hook wraps the task
classes' ``execute`` / ``revert`` in this process only: nothing test-only
goes into swflows.

Exit codes other than death by SIGKILL tell the parent why the kill point
was never reached; the details are written to ``spec["report"]``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import traceback
from pathlib import Path
from typing import Any

from swflows import conf as sw_conf
from swflows import model
from swflows.api import Swflows
from swflows.flows import common
from tests.crash import matrix

#: the operation returned: the kill point was never reached
MISSED = 3
#: the operation raised (and the kill point was never reached)
RAISED = 4
#: the flow launched is not the graph the kill point was derived from
OTHER_GRAPH = 5


class Injected(RuntimeError):
    """The failure injected after the flow's last atom, so that it reverts."""


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(cls: type, method: str, wrapper: Any) -> None:
    real = getattr(cls, method)
    # functools.wraps keeps the signature TaskFlow reads requirements from
    setattr(cls, method, functools.wraps(real)(wrapper(real)))


def install_hooks(flow: Any, atom: str, phase: str, fail_atom: str | None) -> None:
    """Kill this process at ``atom``'s ``phase``; fail ``fail_atom`` after
    its work."""
    classes = {task.name: type(task) for task in flow}
    target = classes[atom]
    if phase == "before":

        def before(real: Any) -> Any:
            def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
                if self.name == atom:
                    die()
                return real(self, *args, **kwargs)

            return execute

        _wrap(target, "execute", before)
    elif phase == "after":

        def after(real: Any) -> Any:
            def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
                result = real(self, *args, **kwargs)
                if self.name == atom:
                    die()
                return result

            return execute

        _wrap(target, "execute", after)
    elif phase == "revert":

        def reverting(real: Any) -> Any:
            def revert(self: Any, *args: Any, **kwargs: Any) -> Any:
                result = real(self, *args, **kwargs)
                if self.name == atom:
                    die()
                return result

            return revert

        _wrap(target, "revert", reverting)
    else:
        raise ValueError(phase)
    if fail_atom is not None:

        def failing(real: Any) -> Any:
            def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
                result = real(self, *args, **kwargs)
                if self.name == fail_atom:
                    raise Injected(f"injected after {fail_atom}")
                return result

            return execute

        _wrap(classes[fail_atom], "execute", failing)


def main(spec: dict[str, Any]) -> None:
    """Run ``spec``'s operation; die at its kill point."""
    report = Path(spec["report"])
    variant = matrix.Variant(spec["kind"], tuple(tuple(a) for a in spec["args"]))
    plan = matrix.ALL_PLANS[spec["plan"]]
    install_hooks(variant.build(plan), spec["atom"], spec["phase"], spec["fail_atom"])
    ids = iter(spec.get("new_ids", []))
    real_new_id = model.new_id
    model.new_id = lambda: next(ids, None) or real_new_id()
    try:
        sw = Swflows.from_conf(sw_conf.get_conf(config_files=[spec["conf"]]))
        real_launch = sw.runner.launch

        def launch(kind: str, plan: dict[str, Any], inputs: dict[str, Any]) -> Any:
            fields = {field.name for field in dataclasses.fields(common.Plan)}
            own = {k: v for k, v in plan.items() if k not in fields}
            given = common.Plan.from_kwargs({k: plan[k] for k in fields & set(plan)})
            built = matrix.Variant(kind, tuple(own.items())).atoms(given)
            if (kind, own) != (variant.kind, dict(variant.args)) or built != list(
                spec["atoms"]
            ):
                report.write_text(
                    f"launched {kind} {own} with atoms {built}, expected "
                    f"{variant.label} with {spec['atoms']}"
                )
                os._exit(OTHER_GRAPH)
            return real_launch(kind, plan, inputs)

        sw.runner.launch = launch  # type: ignore[method-assign]
        getattr(sw, spec["operation"])(*spec["op_args"], **spec["op_kwargs"])
    except BaseException:
        report.write_text(traceback.format_exc())
        os._exit(RAISED)
    report.write_text("the operation ended without reaching its kill point")
    os._exit(MISSED)
