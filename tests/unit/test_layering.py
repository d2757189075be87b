"""swflows' modules import only their own layer and the ones below it.

Every import is read from the source (``ast``), wherever it stands: at
the top of a module, inside a function (imported at first use) or under
``TYPE_CHECKING``, since each is a dependency a reader must follow.  The
layers are those of docs/architecture.md; every module is placed in one.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import swflows

ROOT = pathlib.Path(swflows.__file__).parent

#: the layers, lowest first; a module is in the layer of its longest prefix
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "pure",
        (
            "swflows.exceptions",
            "swflows.states",
            "swflows.model",
            "swflows.transport_names",
            "swflows.derive",
            "swflows.signals",
            "swflows.masking",
            "swflows.rollout",
            "swflows.bootdata",
            "swflows.conf",
            "swflows.projects",
            "swflows.policies",
            "swflows.failpoints",
            "swflows.extras",
            "swflows.callbacks",
        ),
    ),
    ("persistence", ("swflows.persistence",)),
    ("clients", ("swflows.clients",)),
    ("transports", ("swflows.transports",)),
    (
        "services",
        (
            "swflows.services",
            "swflows.outcomes",
            "swflows.metadata",
            "swflows.enrollment",
            "swflows.trusts",
            "swflows.stack_users",
        ),
    ),
    ("tasks", ("swflows.tasks",)),
    ("flows", ("swflows.flows",)),
    ("engine", ("swflows.engine",)),
    ("api", ("swflows.api",)),
    (
        "front",
        (
            "swflows",
            "swflows.cli",
            "swflows.agent",
            "swflows.wsgi",
            "swflows.embedding",
            "swflows.fixture",
        ),
    ),
)


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = modules()


def layer_of(module: str) -> int:
    best, where = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(
                prefix
            ) > best:
                best, where = len(prefix), index
    if where is None:
        raise AssertionError(f"{module} is in no layer")
    return where


def _target(name: str) -> str:
    """The swflows module an imported name lives in."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> Iterator[tuple[int, str]]:
    """(line, swflows module) for every import ``module`` makes."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "swflows":
                    yield node.lineno, _target(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            if base.split(".")[0] != "swflows":
                continue
            for alias in node.names:
                yield node.lineno, _target(f"{base}.{alias.name}")


GRAPH = {
    module: {target for _, target in imports(module) if target != module}
    for module in MODULES
}


def cycles() -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(GRAPH[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_swflows() -> None:
    assert len(MODULES) > 80
    assert "swflows.engine.watcher" in GRAPH["swflows.engine.runner"]
    assert "swflows.engine.results" in GRAPH["swflows.engine.driving"]
    assert "swflows.persistence.store" in GRAPH["swflows.persistence.groups"]


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in MODULES:
        try:
            layer_of(module)
        except AssertionError:
            unplaced.append(module)
    assert unplaced == []


def test_no_import_goes_up_a_layer() -> None:
    upward = [
        f"{module}:{line} imports {target} "
        f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})"
        for module in sorted(MODULES)
        for line, target in imports(module)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


#: the layers whose modules may import tasks: tasks themselves, and the
#: flows built of them.  The engine runs flows and the API has them built;
#: what either does outside a flow (publishing a server's metadata,
#: enrolling it, ending an action) sits below tasks, in the services layer.
TASK_IMPORTERS = ("tasks", "flows")


def test_tasks_are_imported_only_to_build_flows() -> None:
    tasks = LAYERS.index(("tasks", ("swflows.tasks",)))
    outside = [
        f"{module}:{line} imports {target}"
        for module in sorted(MODULES)
        if LAYERS[layer_of(module)][0] not in TASK_IMPORTERS
        for line, target in imports(module)
        if layer_of(target) == tasks
    ]
    assert outside == []


def test_the_api_imports_no_task() -> None:
    """The facade reaches tasks only through the flows it has built."""
    found = [
        f"{module}:{line} imports {target}"
        for module in sorted(MODULES)
        if module.startswith("swflows.api")
        for line, target in imports(module)
        if target.startswith("swflows.tasks")
    ]
    assert found == []
    assert "swflows.metadata" in GRAPH["swflows.api.servers"]
    assert "swflows.enrollment" in GRAPH["swflows.api.servers"]


def test_no_import_cycle() -> None:
    assert cycles() == []


def test_the_pure_core_imports_no_framework() -> None:
    """The pure layer does no I/O: no TaskFlow, HTTP or cloud client (conf
    only declares keystoneauth1's options and parses database URLs)."""
    heavy = ("taskflow", "requests", "stevedore", "swiftclient", "zaqarclient")
    found = []
    for module in MODULES:
        if layer_of(module) != 0:
            continue
        tree = ast.parse(MODULES[module].read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{module} imports {name}"
                for name in names
                if name.split(".")[0] in heavy
            ]
    assert found == []


#: the most lines a class may take; a larger one holds more than one concept
LARGEST_CLASS = 420


def test_no_class_holds_more_than_one_concept() -> None:
    """No class over about 400 lines: a larger one is split by concept, as
    the store, the runner and the watcher were."""
    large = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > LARGEST_CLASS:
                    large.append(f"{module}.{node.name}: {lines} lines")
    assert large == []
