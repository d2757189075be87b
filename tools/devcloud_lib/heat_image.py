"""The "image" the Nova stand-in boots for Heat's own agents.

A server whose user data is Heat's (``user_data_format: SOFTWARE_CONFIG``)
runs Heat's agent chain, as a Heat image built with heat-agents' elements
would: os-collect-config polls (first the boot metadata, ``heat_local``, then
what that metadata names: heat-api, a TempURL, ...), os-refresh-config runs
``20-os-apply-config`` (heat-agents' templates rendered by os-apply-config:
``/etc/os-collect-config.conf`` and the deployments file) and heat-agents'
``55-heat-config``, which runs each deployment's hook and
``heat-config-notify``.

``ensure()`` lays the image out under ``.devcloud/heat-image``:

* ``venv``: os-collect-config, os-apply-config, os-refresh-config and
  dib-utils from ``tools/heat-agents-lock.txt`` (hashes required);
* ``heat-agents``: heat-agents' sdist from PyPI, its SHA-256 checked;
* ``os-refresh-config/configure.d``: ``20-os-apply-config`` (rendering into
  the server's own root, ``$SERVER_ROOT``) and heat-agents' ``55-heat-config``;
* ``hooks``: heat-agents' script, puppet and ansible hooks;
* ``bin``: heat-agents' ``heat-config-notify``;
* ``ready``: written last; the stand-in boots Heat's agents only then.

The scripts are heat-agents' own, unchanged; only where they live differs
from an image (each server has a folder for a root, ``$SERVER_ROOT``, and
heat-agents' scripts find their folders through their environment
variables).
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import time
import urllib.request
from pathlib import Path

from . import layout, service_bed
from .procs import DevcloudError

IMAGE = layout.BASE / "heat-image"
VENV = IMAGE / "venv"
STAMP = VENV / "heat-agents-lock.sha256"
LOCK_FILE = layout.TOOLS / "heat-agents-lock.txt"
READY = IMAGE / "ready"

HEAT_AGENTS_VERSION = "13.0.0"
#: heat-agents' sdist on PyPI, and the SHA-256 PyPI's index gives for it
HEAT_AGENTS_SDIST = (
    "https://files.pythonhosted.org/packages/85/6c/"
    "e0131d7c6bdad4f2c6ff0ff2e4c81c742157dfbfea39987d12fc075aa8b0/"
    f"heat_agents-{HEAT_AGENTS_VERSION}.tar.gz"
)
HEAT_AGENTS_SHA256 = "346099c6e9f16bd5e68913b825013acdd97b6743a1764ebcfc08d6528cefa9d6"
#: where a downloaded sdist is kept between clones
CACHE = Path.home() / ".cache" / "swflows-tests"

#: heat-agents' files the image uses, by their path in heat-agents' tree
HOOKS = {
    "script": "heat-config-script/install.d/hook-script.py",
    "puppet": "heat-config-puppet/install.d/hook-puppet.py",
    "ansible": "heat-config-ansible/install.d/hook-ansible.py",
}
HEAT_CONFIG = "heat-config/os-refresh-config/configure.d/55-heat-config"
NOTIFY = "heat-config/bin/heat-config-notify"
TEMPLATES = "heat-config/os-apply-config"

#: the image's own os-apply-config step: heat-agents' is ``exec
#: os-apply-config``, which renders into ``/``; here each server's root
APPLY_CONFIG = """#!/bin/sh
set -eu
exec os-apply-config --templates "$HEAT_IMAGE/templates" --output "$SERVER_ROOT"
"""


def heat_agents_tree() -> Path:
    """heat-agents' source tree, unpacked from its sdist (fetched once from
    PyPI into ``CACHE``, its SHA-256 checked; tried three times)."""
    tree = IMAGE / f"heat_agents-{HEAT_AGENTS_VERSION}"
    if (tree / HEAT_CONFIG).is_file():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"heat_agents-{HEAT_AGENTS_VERSION}.tar.gz"
    data = archive.read_bytes() if archive.is_file() else b""
    why = ""
    for _ in range(3):
        if hashlib.sha256(data).hexdigest() == HEAT_AGENTS_SHA256:
            break
        try:
            # a constant https URL
            with urllib.request.urlopen(HEAT_AGENTS_SDIST, timeout=120) as answer:  # noqa: S310
                data = answer.read()
        except OSError as exc:
            why = f"GET {HEAT_AGENTS_SDIST}: {exc}"
            time.sleep(2)
            continue
        digest = hashlib.sha256(data).hexdigest()
        why = f"{archive.name} has SHA-256 {digest}, not {HEAT_AGENTS_SHA256}"
    else:
        raise DevcloudError(f"heat-agents' sdist could not be fetched: {why}")
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        tar.extractall(IMAGE, filter="data")
    if not (tree / HEAT_CONFIG).is_file():
        raise DevcloudError(f"{archive.name} holds no {HEAT_CONFIG}")
    return tree


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def ensure() -> float | None:
    """Lay the image out; seconds spent, None if it was ready."""
    if (
        READY.is_file()
        and service_bed.ensure_venv(VENV, STAMP, LOCK_FILE, "Heat's agents") is None
    ):
        return None
    t0 = time.monotonic()
    READY.unlink(missing_ok=True)
    IMAGE.mkdir(parents=True, exist_ok=True)
    service_bed.ensure_venv(VENV, STAMP, LOCK_FILE, "Heat's agents")
    tree = heat_agents_tree()
    python = VENV / "bin" / "python3"
    for folder in ("os-refresh-config", "hooks", "bin", "templates"):
        shutil.rmtree(IMAGE / folder, ignore_errors=True)
    shutil.copytree(tree / TEMPLATES, IMAGE / "templates")
    configure = IMAGE / "os-refresh-config" / "configure.d"
    _executable(configure / "20-os-apply-config", APPLY_CONFIG)
    # heat-agents' Python scripts, run by the image's Python (#!/usr/bin/env
    # python3 would find whichever is first on PATH)
    scripts = {
        configure / "55-heat-config": HEAT_CONFIG,
        IMAGE / "bin" / "heat-config-notify": NOTIFY,
        **{IMAGE / "hooks" / group: path for group, path in HOOKS.items()},
    }
    for target, source in scripts.items():
        body = (tree / source).read_text()
        _, _, rest = body.partition("\n") if body.startswith("#!") else ("", "", body)
        _executable(target, f"#!{python}\n{rest}")
    READY.write_text(f"heat-agents {HEAT_AGENTS_VERSION}\n")
    return time.monotonic() - t0
