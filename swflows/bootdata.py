"""Boot data: the cloud-init user_data that starts a server's agent.

Built from the ``os-collect-config`` section of an enrolled server's
channel, for either swflows' agent (``/etc/swflows-agent.conf``, JSON) or
Heat's agents (``/etc/os-collect-config.conf`` with the ``request``,
``zaqar`` or ``heat`` collector).  The user_data is a MIME multipart that
cloud-init reads: a ``text/cloud-config`` part writing the agent's file
(cloud-config written as JSON, which is YAML), then a
``text/x-shellscript`` part starting the agent.  Only the section of the
server's own collector is written: no other transport's secret.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import io
import json
from collections.abc import Mapping
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from typing import Any, Final

from swflows import exceptions

SWFLOWS_AGENT: Final = "swflows"
HEAT_AGENTS: Final = "heat"
AGENTS: Final = (SWFLOWS_AGENT, HEAT_AGENTS)

SWFLOWS_AGENT_CONFIG: Final = "/etc/swflows-agent.conf"
#: the key of a server's metadata channel that names the agent reading it
CHANNEL_AGENT: Final = "agent"
OCC_CONFIG: Final = "/etc/os-collect-config.conf"
#: Nova refuses a base64 user_data longer than this
USER_DATA_LIMIT: Final = 65535

#: the collectors each agent reads
_READS: Final = {
    SWFLOWS_AGENT: ("request", "zaqar"),
    HEAT_AGENTS: ("request", "zaqar", "heat"),
}
#: what Heat's zaqar collector needs (it cannot read a signed URL)
_ZAQAR_CREDENTIALS: Final = ("user_id", "password", "auth_url", "project_id")

_SWFLOWS_START: Final = """\
#!/bin/sh
# Start swflows' agent with the configuration cloud-init wrote.
set -eu
CONF={conf}
AGENT=$(command -v swflows-agent || true)
if [ -z "$AGENT" ]; then
    echo "swflows-agent is not installed on this image" >&2
    exit 1
fi
if [ -d /run/systemd/system ]; then
    cat > /etc/systemd/system/swflows-agent.service <<UNIT
[Unit]
Description=swflows agent: runs software deployments and signals them
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=$AGENT --config-file $CONF
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
    systemctl daemon-reload
    systemctl enable --now swflows-agent.service
else
    nohup "$AGENT" --config-file "$CONF" >>/var/log/swflows-agent.log 2>&1 &
fi
"""

_HEAT_START: Final = """\
#!/bin/sh
# Start Heat's agents (os-collect-config, which runs os-refresh-config and
# the heat-config hooks) with the configuration cloud-init wrote.
set -eu
if ! command -v os-collect-config >/dev/null; then
    echo "os-collect-config is not installed on this image" >&2
    exit 1
fi
if [ -d /run/systemd/system ] && \\
        systemctl cat os-collect-config.service >/dev/null 2>&1; then
    systemctl enable os-collect-config.service
    systemctl restart os-collect-config.service
else
    nohup os-collect-config >>/var/log/os-collect-config.log 2>&1 &
fi
"""


def check_agent(agent: str) -> str:
    if agent not in AGENTS:
        raise exceptions.ValidationError(
            "agent", f"must be one of {', '.join(AGENTS)}, not {agent!r}"
        )
    return agent


def collector_of(section: Mapping[str, Any], agent: str) -> str:
    """The collector ``agent`` uses for this ``os-collect-config`` section."""
    check_agent(agent)
    for name in section.get("collectors") or ():
        if name not in _READS[agent] or not _filled(section.get(name)):
            continue
        if agent == HEAT_AGENTS and name == "zaqar":
            if not all(section[name].get(k) for k in _ZAQAR_CREDENTIALS):
                raise exceptions.NotSupported(
                    "Heat's zaqar collector logs in to Keystone and cannot "
                    "read this server's signed URL: enroll it again with "
                    "zaqar_message_auth = credentials, or on POLL_TEMP_URL, "
                    "or use swflows' agent"
                )
        return str(name)
    if agent == SWFLOWS_AGENT and _filled(section.get("heat")):
        raise exceptions.NotSupported(
            "swflows' agent does not poll a Heat API (POLL_SERVER_HEAT): "
            "use Heat's agents, or enroll the server with POLL_TEMP_URL "
            "or ZAQAR_MESSAGE"
        )
    if not [c for c in section.get("collectors") or () if c != "local"]:
        # only POLL_SERVER_HEAT makes no collector: it had no user to give
        raise exceptions.ValidationError(
            "server",
            "its channel names no collector: a POLL_SERVER_HEAT server needs "
            "a stack-user domain ([stack_user]) for the Keystone user Heat's "
            "agents log in as; configure one and enroll it again, or enroll "
            "it on POLL_TEMP_URL or ZAQAR_MESSAGE",
        )
    raise exceptions.ValidationError(
        "server", "its channel tells no agent where to poll: enroll it again"
    )


def agent_config(section: Mapping[str, Any], agent: str = SWFLOWS_AGENT) -> str:
    """The agent's configuration file: JSON for swflows' agent, INI for
    Heat's ``/etc/os-collect-config.conf``."""
    name = collector_of(section, agent)
    values = {k: v for k, v in dict(section[name]).items() if v is not None}
    if agent == SWFLOWS_AGENT:
        return json.dumps({"collectors": [name], name: values}, indent=1) + "\n"
    parser = configparser.ConfigParser(interpolation=None)
    parser["DEFAULT"] = {
        "command": "os-refresh-config",
        "collectors": name,
    }
    # oslo.config expands "$name": a literal dollar is written "$$"
    parser[name] = {k: str(v).replace("$", "$$") for k, v in values.items()}
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def config_path(agent: str) -> str:
    return SWFLOWS_AGENT_CONFIG if check_agent(agent) == SWFLOWS_AGENT else OCC_CONFIG


def user_data(section: Mapping[str, Any], agent: str = SWFLOWS_AGENT) -> str:
    """cloud-init MIME multipart user_data writing and starting the agent.

    ValidationError when its base64 form would pass Nova's limit.
    """
    content = agent_config(section, agent)
    cloud_config = {
        "write_files": [
            {
                "path": config_path(agent),
                "permissions": "0600",
                "owner": "root:root",
                "content": content,
            }
        ]
    }
    config_text = "#cloud-config\n" + json.dumps(cloud_config, indent=1) + "\n"
    script = (
        _SWFLOWS_START.format(conf=SWFLOWS_AGENT_CONFIG)
        if agent == SWFLOWS_AGENT
        else _HEAT_START
    )
    contents = (
        (config_text, "cloud-config", "agent-config.cfg"),
        (script, "x-shellscript", "start-agent.sh"),
    )
    # the same channel always gives the same bytes: a boundary from the content
    digest = hashlib.sha256("".join(c[0] for c in contents).encode()).hexdigest()
    message = MIMEMultipart(boundary=f"==swflows-{digest[:32]}==")
    for text, subtype, filename in contents:
        part = MIMEText(text, subtype, _charset(text))
        part.add_header("Content-Disposition", "attachment", filename=filename)
        message.attach(part)
    rendered = message.as_string()
    size = len(base64.b64encode(rendered.encode()))
    if size > USER_DATA_LIMIT:
        raise exceptions.ValidationError(
            "user_data",
            f"{size} bytes in base64, over Nova's limit of {USER_DATA_LIMIT}",
        )
    return rendered


def _charset(text: str) -> str:
    return "us-ascii" if text.isascii() else "utf-8"


def _filled(section: Any) -> bool:
    return isinstance(section, Mapping) and any(v is not None for v in section.values())


__all__ = [
    "AGENTS",
    "HEAT_AGENTS",
    "SWFLOWS_AGENT",
    "USER_DATA_LIMIT",
    "agent_config",
    "collector_of",
    "user_data",
]
