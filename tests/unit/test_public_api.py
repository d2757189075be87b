"""The public API: what ``from swflows import ...`` gives, what importing
it costs, and that the README, docs and examples import from it."""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

import swflows

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: subpackages with a public API of their own (documented as such)
PUBLIC_SUBPACKAGES = frozenset(
    {"swflows.embedding", "swflows.fixture", "swflows.wsgi.signal"}
)
#: modules users may import as ``from swflows import <module>``
PUBLIC_MODULES = frozenset({"conf", "embedding", "exceptions", "fixture", "states"})


def test_every_public_name_resolves() -> None:
    for name in swflows.__all__:
        value = getattr(swflows, name)
        assert value is not None, name
        owner = getattr(value, "__module__", None)
        if owner is not None:
            # the object users get is the one its own module defines
            assert getattr(sys.modules[owner], name) is value, name
    assert len(set(swflows.__all__)) == len(swflows.__all__)
    assert set(swflows.__all__) <= set(dir(swflows))


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        swflows.no_such_thing  # noqa: B018


def test_errors_and_statuses_are_those_of_their_modules() -> None:
    from swflows import exceptions, states

    assert swflows.NotFound is exceptions.NotFound
    assert issubclass(swflows.DeploymentNotFound, LookupError)
    assert swflows.COMPLETE == states.COMPLETE
    assert swflows.ReasonKind("timeout") is states.ReasonKind.TIMEOUT


@pytest.mark.parametrize(
    "statement",
    ["import swflows", "from swflows import exceptions, states, SwflowsError"],
)
def test_importing_the_package_is_cheap(statement: str) -> None:
    program = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    modules = json.loads(done.stdout)
    heavy = ("taskflow", "sqlalchemy", "networkx", "alembic", "oslo_config")
    assert [m for m in modules if m.startswith(heavy)] == []


def _python_sources() -> list[tuple[str, str]]:
    """(where, code) of every example users copy from."""
    sources = [
        (str(path.relative_to(ROOT)), path.read_text())
        for path in sorted((ROOT / "examples").glob("*.py"))
    ]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            sources.append((f"{doc.relative_to(ROOT)} block {index + 1}", block))
    return sources


def _swflows_imports(code: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from swflows... import name``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a signature or a fragment: its import lines only
        lines = re.findall(r"^(?:from|import) swflows.*$", code, re.M)
        tree = ast.parse("\n".join(lines))
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "swflows"
        ):
            found.extend((node.module or "", alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(
                (alias.name, "")
                for alias in node.names
                if alias.name.startswith("swflows")
            )
    return found


def test_readme_docs_and_examples_import_the_public_api() -> None:
    sources = _python_sources()
    assert len(sources) > 10
    seen = 0
    for where, code in sources:
        for module, name in _swflows_imports(code):
            seen += 1
            if module == "swflows":
                assert name in swflows.__all__ or name in PUBLIC_MODULES, (where, name)
            else:
                assert module in PUBLIC_SUBPACKAGES, (where, module, name)
    assert seen >= 8
