"""The server virtualenv, installed with uv from the hashed lock file.

``.devcloud/boot`` holds uv (from PyPI); ``.devcloud/venv`` holds the
servers, synced from ``tools/devcloud-lock.txt``. The lock's sha256 is kept
in a stamp file: an unchanged lock means nothing to do.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import layout
from .procs import DevcloudError

UV_REQUIREMENT = "uv==0.13.9"
PYTHON_VERSION = (3, 11)  # the lock is resolved for Python 3.11


def lock_digest() -> str:
    return hashlib.sha256(layout.LOCK_FILE.read_bytes()).hexdigest()


def is_current() -> bool:
    return (
        layout.venv_bin("python").exists()
        and layout.VENV_STAMP.exists()
        and layout.VENV_STAMP.read_text().strip() == lock_digest()
    )


def server_python() -> str:
    """A Python 3.11 interpreter (not a virtualenv's) for the server venv."""
    candidates = [os.environ.get("DEVCLOUD_PYTHON")]
    if sys.version_info[:2] == PYTHON_VERSION:
        candidates.append(getattr(sys, "_base_executable", sys.executable))
    version = "{}.{}".format(*PYTHON_VERSION)
    candidates.append(shutil.which(f"python{version}"))
    for candidate in filter(None, candidates):
        return candidate
    raise DevcloudError(f"no Python {version} found: set DEVCLOUD_PYTHON")


def _run(argv: list[str | Path], what: str, env: dict[str, str] | None = None) -> None:
    res = subprocess.run(
        [str(a) for a in argv],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if res.returncode != 0:
        raise DevcloudError(
            f"{what} failed (exit {res.returncode}):\n{res.stdout[-3000:]}"
        )


def _bootstrap_uv(python: str) -> Path:
    uv = layout.BOOT_VENV / "bin" / "uv"
    if uv.exists():
        return uv
    boot_python = str(layout.BOOT_VENV / "bin" / "python")
    pip = ["-m", "pip", "--disable-pip-version-check", "-q"]
    # Fast path (~3 s): a venv without pip, filled by the interpreter's pip.
    venv = [python, "-m", "venv", "--clear"]
    _run([*venv, "--without-pip", layout.BOOT_VENV], "creating the bootstrap venv")
    fast = [python, *pip, "--python", boot_python, "install", UV_REQUIREMENT]
    if subprocess.run(fast, capture_output=True).returncode != 0:
        # No pip there, or one older than 22.3 (no --python): ~8 s.
        _run([*venv, layout.BOOT_VENV], "creating the bootstrap venv")
        _run([boot_python, *pip, "install", UV_REQUIREMENT], "installing uv")
    return uv


def ensure() -> float | None:
    """Install or update the server venv; seconds spent, None if current."""
    if is_current():
        return None
    t0 = time.monotonic()
    python = server_python()
    uv = _bootstrap_uv(python)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON"))
    }
    env["UV_PYTHON_DOWNLOADS"] = "never"
    layout.VENV_STAMP.unlink(missing_ok=True)
    if not layout.venv_bin("python").exists():
        _run(
            [uv, "venv", "-q", "--clear", "--python", python, layout.VENV],
            "creating the server venv",
            env,
        )
    sync = [uv, "pip", "sync", "-q", "--python", layout.venv_bin("python")]
    sync += ["--require-hashes", "--only-binary", ":all:", "--compile-bytecode"]
    lock = layout.LOCK_FILE
    _run([*sync, lock], f"installing the servers from {lock.name}", env)
    layout.VENV_STAMP.write_text(lock_digest() + "\n")
    return time.monotonic() - t0


def swflows_digest() -> str:
    digest = hashlib.sha256()
    for path in layout.REQUIREMENTS:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def swflows_python() -> Path:
    return layout.SWFLOWS_VENV / "bin" / "python"


def swflows_is_current() -> bool:
    return (
        swflows_python().exists()
        and layout.SWFLOWS_STAMP.exists()
        and layout.SWFLOWS_STAMP.read_text().strip() == swflows_digest()
    )


def ensure_swflows() -> float | None:
    """Install swflows from this tree (editable, with its requirements) into
    ``.devcloud/swflows``; seconds spent, None if current.

    Its ``swflows`` and ``swflows-agent`` are the operator shell's, and its
    Python runs the agents of servers the Nova stand-in boots, whoever
    started the cloud and with whichever interpreter.
    """
    if swflows_is_current():
        return None
    t0 = time.monotonic()
    python = server_python()
    uv = _bootstrap_uv(python)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHON"))
    }
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.setdefault("PBR_VERSION", "0.1.0")  # a shallow or exported tree has no tags
    layout.SWFLOWS_STAMP.unlink(missing_ok=True)
    if not swflows_python().exists():
        _run(
            [uv, "venv", "-q", "--clear", "--python", python, layout.SWFLOWS_VENV],
            "creating the swflows venv",
            env,
        )
    # compiled now: the shell's first command does not pay for it
    install = [uv, "pip", "install", "-q", "--compile-bytecode"]
    install += ["--python", swflows_python()]
    install += ["-c", layout.REPO / "constraints.txt", "-e", layout.REPO]
    _run(install, "installing swflows into the shell's venv", env)
    layout.SWFLOWS_STAMP.write_text(swflows_digest() + "\n")
    return time.monotonic() - t0
