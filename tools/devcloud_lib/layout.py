"""Where the dev cloud keeps its files (all absolute, all under ``.devcloud/``)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
LOCK_FILE = TOOLS / "devcloud-lock.txt"
NOVA_STANDIN = TOOLS / "nova_standin.py"
LIB = TOOLS / "devcloud_lib"
IN_VENV = LIB / "in_venv"            # run by the server venv's Python
PREPARE = IN_VENV / "prepare.py"

BASE = REPO / ".devcloud"
BOOT_VENV = BASE / "boot"            # holds uv only
VENV = BASE / "venv"                 # keystone, zaqar, swift, gunicorn
VENV_STAMP = VENV / "devcloud-lock.sha256"
STATE = BASE / "state"               # wiped by every clean start
RECORDS = STATE / "servers.json"     # pid records of running servers
LOGS = STATE / "logs"
CLOUD_JSON = BASE / "cloud.json"
LOCK = BASE / "devcloud.lock"        # serialises up/down


def venv_bin(name: str) -> Path:
    return VENV / "bin" / name
