"""Errors as one line an operator can act on: a YAML error's file, line,
column and problem; what is wrong with a configuration file that is not
one; the extra that installs a missing database driver; state conflicts
in plain words."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions, model, states
from swflows.api import deployments
from swflows.cli import parsing
from swflows.fixture import LocalSwflows
from swflows.persistence import database


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("a: [1, 2\nb: 3\n", ":2:2:", "expected ',' or ']', but got ':'"),
        ("configs:\n  - a: b\n   c: d\n", ":3:4:", "expected <block end>"),
        ("a: b\n\tc: d\n", ":2:1:", "found character '\\t'"),
    ],
)
def test_a_yaml_error_is_one_line_with_file_line_and_column(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for read in (
        lambda: parsing.read_config_body(str(path), "component"),
        lambda: parsing.read_definition(str(path)),
    ):
        with pytest.raises(parsing.BadInput) as caught:
            read()
        message = str(caught.value)
        assert "\n" not in message, message
        assert f"{path}{where} not YAML: " in message and problem in message


def test_a_configuration_file_that_is_not_a_file_says_what_it_is(
    tmp_path: Path,
) -> None:
    assert parsing.check_config_file(os.devnull) == (
        f"{os.devnull} is a character device, not a configuration file"
    )
    assert parsing.check_config_file(str(tmp_path)) == (
        f"{tmp_path} is a directory, not a configuration file"
    )
    assert parsing.check_config_file(str(tmp_path / "x")) == (
        f"{tmp_path / 'x'}: no such file"
    )
    empty = tmp_path / "empty.conf"
    empty.touch()
    assert parsing.check_config_file(str(empty)) is None  # every default


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Modules to be taken as not installed."""
    missing: set[str] = set()
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name in missing else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return missing


@pytest.mark.parametrize(
    ("url", "modules", "extra"),
    [
        ("postgresql://u@127.0.0.1:1/x", {"psycopg", "psycopg2"}, "postgresql"),
        ("postgresql+psycopg2://u@127.0.0.1:1/x", {"psycopg2"}, "postgresql"),
        ("mysql+pymysql://u@127.0.0.1:1/x", {"pymysql"}, "mysql"),
    ],
)
def test_a_store_without_its_driver_names_the_extra(
    without: set[str], url: str, modules: set[str], extra: str
) -> None:
    without.update(modules)
    with pytest.raises(exceptions.NotSupported) as caught:
        database.create_engine(url)
    assert str(caught.value).endswith(f"pip install 'swflows[{extra}]'")


def test_a_running_deployment_says_it_runs_an_action() -> None:
    running = model.Deployment(
        id="1234",
        server_id="s",
        config_id=None,
        source_config_id=None,
        action=model.CREATE,
        status=states.IN_PROGRESS,
    )
    with pytest.raises(exceptions.InvalidTransition) as caught:
        deployments.Deployments._refuse_running(running)
    assert str(caught.value).startswith(
        "deployment 1234 is already running an action (CREATE): "
    )


@pytest.fixture
def local() -> Iterator[LocalSwflows]:
    with LocalSwflows() as made:
        yield made


def test_cancelling_an_ended_deployment_says_there_is_nothing_to_cancel(
    local: LocalSwflows,
) -> None:
    config = local.sw.create_config("app", "#!/bin/sh\n", group="script")
    done = local.sw.deploy(local.new_server(), config.id)
    assert done.status == states.COMPLETE
    with pytest.raises(exceptions.InvalidTransition) as caught:
        local.sw.cancel(done.id)
    assert str(caught.value) == (
        f"deployment {done.id} is already COMPLETE: nothing to cancel"
    )
