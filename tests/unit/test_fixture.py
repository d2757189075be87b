"""swflows.fixture: a real Swflows on SQLite whose servers are answered
in-process; the README's "Testing your code" example runs on it."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from swflows import COMPLETE, FAILED, ReasonKind
from swflows.agent.items import Item
from swflows.fixture import LocalSwflows, echo, local_swflows, run_hooks  # noqa: F401

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"

COMPONENT = {
    "configs": [
        {"actions": ["CREATE", "UPDATE"], "config": "#!/bin/sh\n", "tool": "script"},
        {"actions": ["BACKUP"], "config": "#!/bin/sh\n", "tool": "script"},
        {"actions": ["VERIFY"], "config": "#!/bin/sh\n", "tool": "script"},
    ]
}


def readme_tests() -> dict[str, Any]:
    section = README.read_text().split("## Testing your code", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README has no python block under 'Testing your code'"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), str(README), "exec"), namespace)  # noqa: S102
    return {name: fn for name, fn in namespace.items() if name.startswith("test_")}


def test_the_readme_example(local_swflows: LocalSwflows) -> None:  # noqa: F811
    (example,) = readme_tests().values()
    example(local_swflows)


def test_deploy_trigger_and_undeploy_of_a_component(
    local_swflows: LocalSwflows,  # noqa: F811
) -> None:
    sw = local_swflows.sw
    config = sw.create_config(
        "db",
        COMPONENT,
        group="component",
        inputs=[{"name": "label", "default": "x"}],
        outputs=[{"name": "label"}],
    )
    server = local_swflows.new_server()
    dep = sw.deploy(server, config.id, input_values={"label": "first"})
    assert (dep.status, dep.output_values["label"]) == (COMPLETE, "first")
    backup = sw.trigger(dep.id, "BACKUP", input_values={"label": "nightly"})
    assert backup.name == "db-BACKUP"
    assert (backup.status, backup.output_values["label"]) == (COMPLETE, "nightly")
    assert sw.show(dep.id).output_values["label"] == "first"
    sw.undeploy(backup.id)
    sw.undeploy(dep.id)
    assert sw.list_deployments(server_id=server) == []
    ran = local_swflows.agent.ran
    assert [(item.group, item.action) for item in ran] == [
        ("script", "CREATE"),
        ("script", "BACKUP"),
    ]


def test_what_the_answer_raises_fails_the_deployment(tmp_path: pathlib.Path) -> None:
    def broken(item: Item) -> dict[str, Any]:
        raise RuntimeError("the hook crashed")

    with LocalSwflows(tmp_path, answer=broken) as local:
        config = local.sw.create_config("app", "#!/bin/sh\n", group="script")
        dep = local.sw.deploy(local.new_server(), config.id)
        assert dep.status == FAILED
        assert dep.reason == {"kind": ReasonKind.EXIT_CODE.value, "exit_code": 1}
        assert "RuntimeError: the hook crashed" in dep.output_values["deploy_stderr"]
        assert [str(e) for e in local.agent.errors] == ["the hook crashed"]


def test_no_signal_completes_without_an_answer(local_swflows: LocalSwflows) -> None:  # noqa: F811
    sw = local_swflows.sw
    config = sw.create_config("app", "#!/bin/sh\n", group="script")
    dep = sw.deploy(local_swflows.new_server(), config.id, signal_transport="NO_SIGNAL")
    assert dep.status == COMPLETE
    assert dep.reason == {"kind": ReasonKind.NOT_WAITING.value}
    assert len(local_swflows.agent.ran) == 1


def test_a_composed_flow_runs_parks_and_ends(local_swflows: LocalSwflows) -> None:  # noqa: F811
    from examples import backup_verify

    def archive(item: Item) -> dict[str, Any]:
        if item.action == "BACKUP":
            return {"archive": f"tape-{item.values['label']}"}
        return {"checksum": f"ok:{item.values.get('archive')}"}

    local_swflows.agent.answer = archive
    sw = local_swflows.sw
    config = sw.create_config(
        "db",
        COMPONENT,
        group="component",
        inputs=[{"name": "label", "default": ""}, {"name": "archive", "default": ""}],
        outputs=[{"name": "archive"}, {"name": "checksum"}],
    )
    db = sw.deploy(local_swflows.new_server(), config.id)
    checker = sw.deploy(local_swflows.new_server(), config.id)
    flow_id = sw.run_flow(
        backup_verify.make_flow, database=db.id, verifier=checker.id, label="nightly"
    )
    result = sw.wait_flow(flow_id, timeout=60)["result"]
    assert result["verify"]["outputs"]["checksum"] == "ok:tape-nightly"


def test_echo_gives_outputs_named_like_inputs() -> None:
    item = Item(
        id="c",
        name="c",
        group="script",
        config="",
        inputs=({"name": "a", "value": 1}, {"name": "b", "value": 2}),
        outputs=({"name": "a"}, {"name": "z"}),
        options={},
        source={},
    )
    assert echo(item) == {"a": 1, "deploy_status_code": 0}


def test_a_temporary_directory_is_removed_on_close() -> None:
    with LocalSwflows() as local:
        directory = local.directory
        assert (directory / "swflows.sqlite").exists()
    assert not directory.exists()


def test_a_write_to_a_foreign_url_is_refused() -> None:
    from swflows.fixture import MemoryObjectStore

    with pytest.raises(ValueError, match="not a TempURL"):
        MemoryObjectStore().write_url("http://elsewhere/v1/c/o", b"{}")


def test_configs_run_by_the_agents_hooks(tmp_path: pathlib.Path) -> None:
    script = '#!/bin/sh\nprintf "hello %s" "$name" > "$heat_outputs_path.greeting"\n'
    answer = run_hooks(tmp_path / "agent")
    with LocalSwflows(tmp_path / "sw", answer=answer) as local:
        config = local.sw.create_config(
            "app",
            script,
            group="script",
            inputs=[{"name": "name"}],
            outputs=[{"name": "greeting"}],
        )
        dep = local.sw.deploy(local.new_server(), config.id, input_values={"name": "x"})
        assert dep.status == COMPLETE, dep.status_reason
        assert dep.output_values["greeting"] == "hello x"
        odd = local.sw.create_config("odd", "", group="no-such-group")
        failed = local.sw.deploy(local.new_server(), odd.id)
        assert failed.status == FAILED
        assert failed.reason == {"kind": ReasonKind.EXIT_CODE.value, "exit_code": 127}


def test_the_modules_example() -> None:
    import textwrap

    from swflows import fixture

    assert fixture.__doc__ is not None
    block = fixture.__doc__.split("::\n", 1)[1].split("\nWith pytest", 1)[0]
    exec(compile(textwrap.dedent(block), fixture.__file__, "exec"), {**vars(fixture)})  # noqa: S102
