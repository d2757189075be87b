"""Boot data: MIME multipart user_data as cloud-init reads it, and agent files."""

from __future__ import annotations

import base64
import configparser
import email
import json
import subprocess
from email.message import Message
from typing import Any

import pytest
import yaml

from swflows import bootdata, exceptions
from swflows.agent import config as agent_config

TEMP_URL = (
    "http://swift.example/v1/AUTH_x/swflows-metadata/srv-1"
    "?temp_url_sig=sha256:abc&temp_url_expires=2147483647"
)
REQUEST = {
    "collectors": ["request", "local"],
    "request": {"metadata_url": TEMP_URL},
    "zaqar": {"signed_url": None},
}
SIGNED = {
    "signature": "f" * 64,
    "expires": "2027-01-01T00:00:00",
    "methods": ["GET"],
    "paths": ["/v2/queues/swm-srv-1/messages"],
    "project": "p1",
    "url": "http://zaqar.example",
}
ZAQAR = {"collectors": ["zaqar", "local"], "zaqar": {"signed_url": SIGNED}}
HEAT = {
    "collectors": ["heat", "local"],
    "heat": {
        "user_id": "u1",
        "password": "pa$$word",
        "auth_url": "http://keystone.example/v3",
        "project_id": "p1",
        "resource_name": "srv-1",
    },
}


def parts(user_data: str) -> list[Message]:
    message = email.message_from_string(user_data)
    assert message.is_multipart()
    assert message.get_content_type() == "multipart/mixed"
    assert message["MIME-Version"] == "1.0"
    return [p for p in message.walk() if not p.is_multipart()]


def cloud_config(part: Message) -> dict[str, Any]:
    assert part.get_content_type() == "text/cloud-config"
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    text = payload.decode()
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)  # as cloud-init reads it
    assert isinstance(doc, dict)
    return doc


def check_script(part: Message) -> str:
    assert part.get_content_type() == "text/x-shellscript"
    payload = part.get_payload(decode=True)
    assert isinstance(payload, bytes)
    text = payload.decode()
    assert text.startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n"], input=text.encode(), check=True)
    return text


@pytest.mark.parametrize("section", [REQUEST, ZAQAR], ids=["request", "zaqar"])
def test_swflows_agent_user_data(section: dict[str, Any], tmp_path: Any) -> None:
    user_data = bootdata.user_data(section, bootdata.SWFLOWS_AGENT)
    config_part, script_part = parts(user_data)
    assert config_part.get_filename() == "agent-config.cfg"
    files = cloud_config(config_part)["write_files"]
    assert [f["path"] for f in files] == ["/etc/swflows-agent.conf"]
    assert files[0]["permissions"] == "0600"
    written = tmp_path / "swflows-agent.conf"
    written.write_text(files[0]["content"])
    conf = agent_config.load([written], {"state_dir": str(tmp_path / "state")})
    name = section["collectors"][0]
    assert conf.collector()[0] == name
    script = check_script(script_part)
    assert "CONF=/etc/swflows-agent.conf" in script
    assert '"$AGENT" --config-file "$CONF"' in script


def test_only_the_collectors_section_is_written() -> None:
    """Another transport's section (even blanked) never reaches the server."""
    both = {**REQUEST, "zaqar": {"signed_url": SIGNED}}
    doc = json.loads(bootdata.agent_config(both))
    assert doc == {"collectors": ["request"], "request": REQUEST["request"]}


def test_heat_agents_request_collector() -> None:
    user_data = bootdata.user_data(REQUEST, bootdata.HEAT_AGENTS)
    config_part, script_part = parts(user_data)
    files = cloud_config(config_part)["write_files"]
    assert [f["path"] for f in files] == ["/etc/os-collect-config.conf"]
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(files[0]["content"])
    assert ini.get("DEFAULT", "collectors") == "request"
    assert ini.get("DEFAULT", "command") == "os-refresh-config"
    assert ini.get("request", "metadata_url") == TEMP_URL
    assert "os-collect-config" in check_script(script_part)


def test_heat_collector_escapes_dollars_for_oslo_config() -> None:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(bootdata.agent_config(HEAT, bootdata.HEAT_AGENTS))
    assert ini.get("DEFAULT", "collectors") == "heat"
    assert ini.get("heat", "password") == "pa$$$$word"
    assert ini.get("heat", "resource_name") == "srv-1"


def test_heat_agents_cannot_read_a_signed_url() -> None:
    with pytest.raises(exceptions.NotSupported, match="signed URL"):
        bootdata.user_data(ZAQAR, bootdata.HEAT_AGENTS)


def test_swflows_agent_does_not_poll_heat() -> None:
    with pytest.raises(exceptions.NotSupported, match="Heat API"):
        bootdata.agent_config(HEAT, bootdata.SWFLOWS_AGENT)


def test_unknown_agent_and_empty_channel() -> None:
    with pytest.raises(exceptions.ValidationError, match="agent"):
        bootdata.user_data(REQUEST, "cfn")
    with pytest.raises(exceptions.ValidationError, match="enroll"):
        bootdata.agent_config({"collectors": ["local"]})
    # POLL_SERVER_HEAT with no stack-user domain: enrolling again alone
    # would change nothing, so the message says what to configure
    with pytest.raises(exceptions.ValidationError, match="stack-user domain"):
        bootdata.agent_config({"collectors": ["local"]}, bootdata.HEAT_AGENTS)


def test_size_stays_under_novas_limit() -> None:
    user_data = bootdata.user_data(ZAQAR)
    assert len(base64.b64encode(user_data.encode())) < 8 * 1024
    huge = {"collectors": ["request"], "request": {"metadata_url": "x" * 60000}}
    with pytest.raises(exceptions.ValidationError, match="Nova's limit of 65535"):
        bootdata.user_data(huge)


def test_os_collect_config_reads_it_with_oslo_config(tmp_path: Any) -> None:
    """os-collect-config reads its file with oslo.config: the collectors are
    a list and a dollar in a value survives its interpolation."""
    from oslo_config import cfg

    path = tmp_path / "os-collect-config.conf"
    path.write_text(bootdata.agent_config(HEAT, bootdata.HEAT_AGENTS))
    conf = cfg.ConfigOpts()
    conf.register_opts([cfg.ListOpt("collectors"), cfg.StrOpt("command")])
    conf.register_opts(
        [cfg.StrOpt(k) for k in (*HEAT["heat"], "stack_id", "region_name")],
        group="heat",
    )
    conf(args=[], default_config_files=[str(path)])
    assert conf.collectors == ["heat"]
    assert conf.command == "os-refresh-config"
    assert conf.heat.password == "pa$$word"
    assert conf.heat.resource_name == "srv-1"
