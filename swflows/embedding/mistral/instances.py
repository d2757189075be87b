"""Which swflows an action uses: one per configuration file and process."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Final

from oslo_config import cfg

from swflows import conf as swconf
from swflows import exceptions
from swflows.api import Swflows
from swflows.embedding.completion import Completions

LOG = logging.getLogger(__name__)

#: the default configuration file
CONFIG_FILE_ENV: Final = "SWFLOWS_CONFIG_FILE"
#: where ``config_file`` inputs may point
CONFIG_DIRS_ENV: Final = "SWFLOWS_CONFIG_DIRS"
DEFAULT_CONFIG_DIR: Final = "/etc/swflows"

_LOCK = threading.Lock()
_INSTANCES: dict[str, tuple[Swflows, Completions]] = {}
_USED: list[tuple[Swflows, Completions]] = []


def use(sw: Swflows | None) -> None:
    """Have actions without ``config_file`` use ``sw`` (None: stop)."""
    with _LOCK:
        for _, completions in _USED:
            completions.close()
        _USED.clear()
        if sw is not None:
            _USED.append((sw, Completions(sw)))


def _allowed_dirs() -> list[str]:
    configured = os.environ.get(CONFIG_DIRS_ENV)
    if configured:
        dirs = [d for d in configured.split(os.pathsep) if d]
    else:
        dirs = [DEFAULT_CONFIG_DIR]
        default = os.environ.get(CONFIG_FILE_ENV)
        if default:
            dirs.append(os.path.dirname(os.path.realpath(default)))
    return [os.path.realpath(d) for d in dirs]


def _config_path(config_file: str | None) -> str | None:
    if config_file is None:
        default = os.environ.get(CONFIG_FILE_ENV)
        return os.path.realpath(default) if default else None
    if not isinstance(config_file, str) or not config_file:
        raise exceptions.ValidationError("config_file", "must be a file name")
    path = os.path.realpath(config_file)
    if not any(os.path.dirname(path) == d for d in _allowed_dirs()):
        raise exceptions.ValidationError(
            "config_file",
            f"{config_file} is not in a directory of ${CONFIG_DIRS_ENV}",
        )
    return path


def instance(config_file: str | None = None) -> tuple[Swflows, Completions]:
    """The swflows (and its completion watcher) an action uses; see above."""
    with _LOCK:
        if config_file is None and _USED:
            return _USED[0]
    path = _config_path(config_file)
    with _LOCK:
        if path is None:
            raise exceptions.ValidationError(
                "config_file",
                f"no swflows configuration: give config_file or set ${CONFIG_FILE_ENV}",
            )
        found = _INSTANCES.get(path)
        if found is not None:
            return found
        if not os.path.isfile(path):
            raise exceptions.ValidationError("config_file", f"no file {path}")
        try:
            conf = swconf.get_conf(config_files=[path])
            _check_values(conf)
        except cfg.Error as exc:  # its message may quote a secret value
            raise exceptions.ValidationError(
                "config_file", f"{path} cannot be loaded ({type(exc).__name__})"
            ) from None
        sw = Swflows.from_conf(conf)
        _INSTANCES[path] = found = (sw, Completions(sw))
        return found


def _check_values(conf: cfg.ConfigOpts) -> None:
    """Read every option once, so a bad value fails now, not mid-action."""
    for group, opts in swconf.list_opts():
        name = group if isinstance(group, str) else group.name
        section = conf if name == "DEFAULT" else conf[name]
        for opt in opts:
            try:
                getattr(section, opt.dest)
            except cfg.NoSuchOptError:  # an auth plugin's, not loaded
                continue


@atexit.register
def close_all() -> None:
    """Close every instance opened here (runs at exit)."""
    with _LOCK:
        opened = list(_INSTANCES.values())
        _INSTANCES.clear()
    for sw, completions in opened:
        completions.close()
        sw.close()
