"""A Zaqar of its own with notifications on, for push tests and the bench.

The dev cloud's Zaqar stores messages but has no notifier in its message
pipeline, so it never calls a subscription's webhook.  This one runs the
same Zaqar (the dev cloud's virtualenv and Keystone, its Redis under
another database number, a copy of its queue catalogue) with
``[storage] message_pipeline = zaqar.notification.notifier``, on a port of
its own, for as long as the context lasts.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from bench import cloud as bcloud

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / ".devcloud"
#: the Redis database this Zaqar keeps its messages in (the dev cloud's is 0)
REDIS_DB = 13


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def notifying_zaqar(workdir: Path, base: Path = BASE) -> Iterator[str]:
    """Start the Zaqar; its URL."""
    source = base / "state" / "zaqar"
    workdir.mkdir(parents=True, exist_ok=True)
    catalogue = workdir / "zaqar-management.db"
    with (
        contextlib.closing(sqlite3.connect(source / "zaqar-management.db")) as src,
        contextlib.closing(sqlite3.connect(catalogue)) as dst,
    ):
        src.backup(dst)
    port = _free_port()
    text = (source / "zaqar.conf").read_text()
    text = re.sub(r"(uri = redis://[^/]+/\?dbid=)\d+", rf"\g<1>{REDIS_DB}", text)
    text = re.sub(r"uri = sqlite:///\S+", f"uri = sqlite:///{catalogue}", text, count=1)
    text += "\n[storage]\nmessage_pipeline = zaqar.notification.notifier\n"
    conf = bcloud.write_private(workdir / "zaqar.conf", text)
    in_venv = REPO / "tools" / "devcloud_lib" / "in_venv"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(ZAQAR_CONFIG_FILE=str(conf), PYTHONUNBUFFERED="1")
    argv = [
        str(base / "venv" / "bin" / "gunicorn"),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--threads",
        "4",
        "--timeout",
        "120",
        "--graceful-timeout",
        "5",
        "--no-control-socket",
        "--pythonpath",
        str(in_venv),
        "--chdir",
        str(workdir),
        "zaqar_app:application",
    ]
    with open(workdir / "zaqar.log", "ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(url + "/", timeout=5).status_code < 500:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the notifying Zaqar did not start: see {workdir / 'zaqar.log'}"
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = ["notifying_zaqar"]
