"""Where the dev cloud keeps its files (all absolute, all under ``.devcloud/``)."""

import hashlib
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
LOCK_FILE = TOOLS / "devcloud-lock.txt"
NOVA_STANDIN = TOOLS / "nova_standin.py"
IN_VENV = TOOLS / "devcloud_lib" / "in_venv"  # run by the server venv's Python
PREPARE = IN_VENV / "prepare.py"
KEYSTONE_INIT = IN_VENV / "keystone_init.py"

BASE = REPO / ".devcloud"
BOOT_VENV = BASE / "boot"  # holds uv only
VENV = BASE / "venv"  # keystone, zaqar, swift, gunicorn
VENV_STAMP = VENV / "devcloud-lock.sha256"
STATE = BASE / "state"  # wiped by every clean start
RECORDS = STATE / "servers.json"  # pid records of running servers
LOGS = STATE / "logs"
CLOUD_JSON = BASE / "cloud.json"
LOCK = BASE / "devcloud.lock"  # serialises up and down

# swflows itself, installed from this tree: the operator shell's commands and
# the Python the Nova stand-in starts booted servers' agents with
SWFLOWS_VENV = BASE / "swflows"
SWFLOWS_STAMP = SWFLOWS_VENV / "swflows-requirements.sha256"
REQUIREMENTS = (REPO / "requirements.txt", REPO / "constraints.txt", REPO / "setup.cfg")
# what each start writes for the shell (see swflowsconf.py)
SWFLOWS_CONF = BASE / "swflows.conf"
CLOUDS_YAML = BASE / "clouds.yaml"
ENV_SH = BASE / "env.sh"
SHELL_DB = BASE / "swflows.sqlite"


def clone_tag() -> str:
    """What names this checkout's databases and vhost (one per clone)."""
    return hashlib.sha256(str(REPO).encode()).hexdigest()[:8]


def venv_bin(name: str) -> Path:
    return VENV / "bin" / name


def write_private(path: Path, text: str) -> None:
    """Write a file that holds secrets: mode 0600 from the start."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


def write_private_json(path: Path, doc: Any) -> None:
    write_private(path, json.dumps(doc, indent=2) + "\n")
