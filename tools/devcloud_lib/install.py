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
PYTHON_VERSION = (3, 11)    # the lock is resolved for Python 3.11


def lock_digest() -> str:
    return hashlib.sha256(layout.LOCK_FILE.read_bytes()).hexdigest()


def is_current() -> bool:
    return (layout.venv_bin("python").exists()
            and layout.VENV_STAMP.exists()
            and layout.VENV_STAMP.read_text().strip() == lock_digest())


def server_python() -> str:
    """A Python 3.11 interpreter (not a virtualenv's) for the server venv."""
    candidates = [os.environ.get("DEVCLOUD_PYTHON")]
    if sys.version_info[:2] == PYTHON_VERSION:
        candidates.append(getattr(sys, "_base_executable", sys.executable))
    candidates.append(shutil.which("python%d.%d" % PYTHON_VERSION))
    for candidate in filter(None, candidates):
        return candidate
    raise DevcloudError("no Python %d.%d found: set DEVCLOUD_PYTHON"
                        % PYTHON_VERSION)


def _run(argv: list[str | Path], what: str,
         env: dict[str, str] | None = None) -> None:
    res = subprocess.run([str(a) for a in argv], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if res.returncode != 0:
        raise DevcloudError("%s failed (exit %d):\n%s" % (
            what, res.returncode, res.stdout[-3000:]))


def _bootstrap_uv(python: str) -> Path:
    uv = layout.BOOT_VENV / "bin" / "uv"
    if uv.exists():
        return uv
    shutil.rmtree(layout.BOOT_VENV, ignore_errors=True)
    # Fast path: a pip-less venv filled by the interpreter's own pip.
    _run([python, "-m", "venv", "--without-pip", layout.BOOT_VENV],
         "creating the bootstrap venv")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q",
           "--python", layout.BOOT_VENV / "bin" / "python", "install",
           UV_REQUIREMENT]
    if subprocess.run([str(a) for a in pip], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        # That interpreter has no pip, or one too old for --python.
        shutil.rmtree(layout.BOOT_VENV)
        _run([python, "-m", "venv", layout.BOOT_VENV],
             "creating the bootstrap venv")
        _run([layout.BOOT_VENV / "bin" / "python", "-m", "pip",
              "--disable-pip-version-check", "-q", "install", UV_REQUIREMENT],
             "installing uv")
    return uv


def ensure() -> float | None:
    """Install or update the server venv; seconds spent, None if current."""
    if is_current():
        return None
    t0 = time.monotonic()
    python = server_python()
    uv = _bootstrap_uv(python)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    layout.VENV_STAMP.unlink(missing_ok=True)
    if not layout.venv_bin("python").exists():
        _run([uv, "venv", "-q", "--clear", "--python", python, layout.VENV],
             "creating the server venv", env)
    _run([uv, "pip", "sync", "-q", "--python", layout.venv_bin("python"),
          "--require-hashes", "--only-binary", ":all:", "--compile-bytecode",
          layout.LOCK_FILE], "installing the servers from %s"
         % layout.LOCK_FILE.relative_to(layout.REPO), env)
    layout.VENV_STAMP.write_text(lock_digest() + "\n")
    return time.monotonic() - t0
