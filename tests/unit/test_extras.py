"""A missing optional package is named with the command installing it,
where it is first needed (a jobboard, an election), not met as an
ImportError inside TaskFlow or tooz."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from swflows import exceptions, extras
from swflows.engine import election, jobboard


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
    ("url", "module", "extra"),
    [
        ("redis://127.0.0.1:1/0", "redis", "redis"),
        ("zookeeper://127.0.0.1:1", "kazoo", "zookeeper"),
    ],
)
def test_a_board_without_its_client_names_the_extra(
    without: set[str], url: str, module: str, extra: str
) -> None:
    without.add(module)
    with pytest.raises(exceptions.NotSupported) as caught:
        jobboard.Board(url, claim_expiry=10)
    assert f"pip install 'swflows[{extra}]'" in str(caught.value)
    assert f"{extra} jobboard" in str(caught.value)
    with pytest.raises(exceptions.NotSupported, match=rf"swflows\[{extra}\]"):
        election.Election(url, "watcher", timeout=5)


def test_every_extra_names_a_module_of_setup_cfg() -> None:
    import configparser
    import pathlib

    setup = configparser.ConfigParser()
    setup.read(pathlib.Path(__file__).parents[2] / "setup.cfg")
    assert set(extras.MODULES) == set(setup["extras"])
    for extra in extras.MODULES:
        extras.require(extra, "this test")  # the test environment has them all
