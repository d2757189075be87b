"""ZooKeeper from Debian's packages, standalone on 127.0.0.1.

The package (``zookeeper``, with a Java runtime) is installed with apt-get
when it is missing and the dev cloud runs as root, as ``tools/services``
installs PostgreSQL, MariaDB and Redis. The server runs straight from the
package's jar with a configuration of its own under ``.devcloud/state``: no
init script, no system-wide data directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .context import Cloud
from .procs import Check, DevcloudError, spawn

PACKAGE = "zookeeper"
JAR = Path("/usr/share/java/zookeeper.jar")
# the package's jar finds its dependencies through its manifest; a logging
# binding (from libslf4j-java, which the package pulls) makes its log readable
LOGGER_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# ``envi``: kazoo reads the server's version with it before anything else
FOUR_LETTER_WORDS = "srvr,envi,ruok"
TICK_MS = 500  # sessions may be 2 ticks (1 s) to 120 ticks (60 s)


def java() -> str | None:
    return shutil.which("java")


def is_installed() -> bool:
    return JAR.exists() and java() is not None


def ensure() -> float | None:
    """Install the package if it is missing; seconds spent, None if present."""
    if is_installed():
        return None
    if os.geteuid() != 0:
        raise DevcloudError(
            f"ZooKeeper is not installed, and installing it needs root: "
            f"apt-get install {PACKAGE}"
        )
    if shutil.which("apt-get") is None:
        raise DevcloudError(
            f"ZooKeeper is not installed ({JAR} is missing) and this is not a "
            "Debian system: install it"
        )
    t0 = time.monotonic()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    update = ["apt-get", "update", "-qq"]
    for argv in (update, ["apt-get", "install", "-y", "-qq", PACKAGE]):
        res = subprocess.run(
            argv, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        if res.returncode != 0:
            command = " ".join(argv)
            raise DevcloudError(
                f"{command} failed (exit {res.returncode}):\n{res.stdout[-3000:]}"
            )
    if not is_installed():
        raise DevcloudError(f"{PACKAGE} installed, but {JAR} or java is missing")
    return time.monotonic() - t0


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """The server's answer to a four-letter command (it closes after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def ruok(port: int) -> bool:
    return four_letter_word(port, "ruok") == "imok"


def write_config(home: Path, port: int) -> Path:
    data = home / "data"
    data.mkdir(parents=True, exist_ok=True)
    config = home / "zoo.cfg"
    config.write_text(
        "\n".join(
            [
                f"tickTime={TICK_MS}",
                f"dataDir={data}",
                f"clientPort={port}",
                "clientPortAddress=127.0.0.1",
                f"minSessionTimeout={2 * TICK_MS}",
                f"maxSessionTimeout={120 * TICK_MS}",
                f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
                "admin.enableServer=false",  # its Jetty would take port 8080
                "autopurge.purgeInterval=1",
                "",
            ]
        )
    )
    return config


def start(cloud: Cloud) -> Check:
    binary = java()
    if binary is None or not JAR.exists():
        raise DevcloudError(f"ZooKeeper is not installed: apt-get install {PACKAGE}")
    port = cloud.ports["zookeeper"]
    config = write_config(cloud.dir("zookeeper"), port)
    classpath = [str(JAR)] + ([str(LOGGER_JAR)] if LOGGER_JAR.exists() else [])
    # A small heap and a quick JIT: it serves a handful of test clients.
    argv = [binary, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
    argv += ["-Dorg.slf4j.simpleLogger.showDateTime=true"]
    argv += ["-cp", ":".join(classpath), MAIN_CLASS, str(config)]
    started = spawn("zookeeper", argv, port=port, records=cloud.records)
    return Check("zookeeper", [started], lambda: ruok(port))
