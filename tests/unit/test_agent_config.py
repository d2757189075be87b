"""The agent's configuration: INI, JSON, and os-collect-config's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from swflows import exceptions
from swflows.agent import config

SIGNED = {
    "signature": "sig",
    "expires": "2030-01-01T00:00:00",
    "methods": ["GET"],
    "paths": ["/v2/queues/swm-s1/messages"],
    "project": "p1",
    "url": "http://zaqar:8888",
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ini(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "agent.conf",
        "[agent]\n"
        "state_dir = /srv/agent\n"
        "interval = 5\n"
        "hook_timeout = 600\n"
        "hook_dirs = /a, /b\n"
        "notify_attempts = 4\n"
        "\n[request]\n"
        "metadata_url = http://swift/v1/AUTH_x/c/o?temp_url_sig=a%2Fb&temp_url_expires=1\n",
    )
    conf = config.load([path])
    assert conf.state_dir == Path("/srv/agent")
    assert conf.interval == 5.0 and conf.hook_timeout == 600.0
    assert conf.hook_dirs == (Path("/a"), Path("/b"))
    assert conf.notify_attempts == 4
    name, section = conf.collector()
    assert name == "request"
    assert section["metadata_url"].endswith("temp_url_sig=a%2Fb&temp_url_expires=1")


def test_defaults() -> None:
    conf = config.AgentConfig()
    assert conf.state_dir == Path("/var/lib/swflows-agent")
    assert conf.interval == 30 and conf.hook_timeout == 0
    assert conf.notify_attempts == 3


def test_os_collect_config_file(tmp_path: Path) -> None:
    """Heat's /etc/os-collect-config.conf, as heat-agents renders it."""
    path = write(
        tmp_path,
        "os-collect-config.conf",
        "[DEFAULT]\n"
        "command = os-refresh-config\n"
        "collectors = ec2\n    zaqar\n    local\n"
        "polling_interval = 30\n"
        "min_polling_interval = 2\n"
        "\n[cfn]\nmetadata_url = http://cfn\n"
        "\n[zaqar]\n"
        "user_id = u1\npassword = pw\nauth_url = http://ks/v3\n"
        "project_id = p1\nqueue_id = q1\nregion_name = r\n",
    )
    conf = config.load([path])
    assert conf.collectors == ("ec2", "zaqar", "local")
    assert conf.interval == 30 and conf.min_interval == 2
    name, section = conf.collector()
    assert name == "zaqar" and section["queue_id"] == "q1"


def test_json_with_the_servers_collect_section(tmp_path: Path) -> None:
    """The os-collect-config section of a metadata document, used as is."""
    doc = {
        "os-collect-config": {"collectors": ["zaqar"], "zaqar": {"signed_url": SIGNED}},
        "agent": {"state_dir": str(tmp_path / "s"), "interval": 0.2},
    }
    conf = config.load([write(tmp_path, "a.json", json.dumps(doc))])
    name, section = conf.collector()
    assert name == "zaqar" and section["signed_url"] == SIGNED
    assert conf.interval == 0.2


def test_signed_url_as_json_text_in_ini(tmp_path: Path) -> None:
    path = write(tmp_path, "a.conf", f"[zaqar]\nsigned_url = {json.dumps(SIGNED)}\n")
    assert config.load([path]).zaqar["signed_url"] == SIGNED


def test_layers_and_overrides(tmp_path: Path) -> None:
    first = write(tmp_path, "1.conf", "[agent]\ninterval = 5\nsplay = 3\n")
    second = write(
        tmp_path,
        "2.json",
        json.dumps({"agent": {"interval": 7}, "request": {"metadata_url": "u"}}),
    )
    conf = config.load([first, second], {"interval": None, "state_dir": tmp_path})
    assert conf.interval == 7 and conf.splay == 3 and conf.state_dir == tmp_path
    conf = config.load([first], extra={"request": {"metadata_url": "http://m"}})
    assert conf.request["metadata_url"] == "http://m"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[agent]\ninterval = 5\n", "no metadata source"),
        ("[agent]\nintervall = 5\n[request]\nmetadata_url = u\n", "unknown option"),
        ("[agent]\ninterval = soon\n[request]\nmetadata_url = u\n", "must be a number"),
        ("[agent]\ninterval = 0\n[request]\nmetadata_url = u\n", "above 0"),
        ("[agent]\ninterval = -1\n[request]\nmetadata_url = u\n", "at least 0"),
        ("[agent]\njitter = 1\n[request]\nmetadata_url = u\n", "below 1"),
        ("[agent]\nlog_level = LOUD\n[request]\nmetadata_url = u\n", "log_level"),
        ("[zaqar]\nsigned_url = {not json\n", "JSON object"),
        ('[zaqar]\nsigned_url = {"url": "x"}\n', "missing key"),
        ("not an ini file", "config_file"),
        ('{"agent": 3}', "must be an object"),
        ("{broken", "not JSON"),
        ("[zaqar]\nuser_id = u\n", "no metadata source"),
    ],
)
def test_errors(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(exceptions.ValidationError, match=says):
        config.load([write(tmp_path, "bad.conf", text)])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(exceptions.ValidationError, match="cannot read"):
        config.load([tmp_path / "nope.conf"])


@pytest.mark.parametrize("value", [True, [1], "nan", "inf"])
def test_numbers_must_be_numbers(value: Any) -> None:
    with pytest.raises(exceptions.ValidationError):
        config.build({"interval": value})


# found by tests/unit/test_fuzz_metadata.py
@pytest.mark.parametrize("key", ["interval", "notify_attempts"])
def test_a_number_too_large_for_a_float_is_refused(tmp_path: Path, key: str) -> None:
    path = tmp_path / "agent.json"
    path.write_text(
        json.dumps(
            {"agent": {key: 10**400}, "request": {"metadata_url": "https://x/m"}}
        )
    )
    with pytest.raises(exceptions.ValidationError, match="must be a number") as exc:
        config.load([path])
    assert exc.value.field == f"agent.{key}"
