"""The ``swflows`` application: global options, commands, and the one
Swflows instance a command talks to."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cliff import app, commandmanager
from oslo_config import cfg

from swflows.cli import (
    base,
    conductor,
    config,
    deployment,
    engine,
    flow,
    group,
    parsing,
    server,
)

#: read when neither --config-file nor $SWFLOWS_CONFIG names a file
DEFAULT_CONFIG_FILE = Path("/etc/swflows/swflows.conf")

COMMANDS: dict[str, type] = {
    "config create": config.CreateConfig,
    "config show": config.ShowConfig,
    "config list": config.ListConfigs,
    "config delete": config.DeleteConfig,
    "deployment create": deployment.CreateDeployment,
    "deployment show": deployment.ShowDeployment,
    "deployment list": deployment.ListDeployments,
    "deployment delete": deployment.DeleteDeployment,
    "deployment redeploy": deployment.RedeployDeployment,
    "deployment trigger": deployment.TriggerDeployment,
    "deployment cancel": deployment.CancelDeployment,
    "deployment watch": deployment.WatchDeployment,
    "deployment output show": deployment.ShowOutput,
    "deployment metadata show": deployment.ShowMetadata,
    "server enroll": server.EnrollServer,
    "server unenroll": server.UnenrollServer,
    "server show": server.ShowServer,
    "server list": server.ListServers,
    "server set": server.SetServer,
    "server boot-data": server.BootData,
    "server agent-config": server.AgentConfig,
    "server create": server.CreateServer,
    "server delete": server.DeleteServer,
    "group create": group.CreateGroup,
    "group list": group.ListGroups,
    "group show": group.ShowGroup,
    "group redeploy": group.RedeployGroup,
    "group trigger": group.TriggerGroup,
    "group cancel": group.CancelGroup,
    "group watch": group.WatchGroup,
    "group delete": group.DeleteGroup,
    "flow list": flow.ListFlows,
    "flow resume": flow.ResumeFlows,
    "engine": engine.Engine,
    "conductor": conductor.Conductor,
    "conductor list": conductor.ListConductors,
}


class _GlobalParser(argparse.ArgumentParser):
    """Reads global options only before the command's name.

    A command's own options may share a global's name (``config create
    --config-file`` is the script, the global one swflows' configuration).
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        argv = list(sys.argv[1:] if args is None else args)
        index = 0
        while index < len(argv):
            arg = argv[index]
            if not arg.startswith("-") or arg == "--":
                break
            action = self._option_string_actions.get(arg.split("=", 1)[0])
            takes_value = action is not None and action.nargs != 0
            index += 2 if takes_value and "=" not in arg else 1
        known, rest = super().parse_known_args(argv[:index], namespace)
        return known, rest + argv[index:]


class OneLineFormatter(logging.Formatter):
    """A log record as one line: ``swflows: warning: what (Error: why)``.

    The traceback is left out (``--debug`` keeps the usual format)."""

    def format(self, record: logging.LogRecord) -> str:
        message = (record.getMessage().splitlines() or [""])[0]
        text = f"swflows: {record.levelname.lower()}: {message}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            first = (str(exc).splitlines() or [""])[0]
            text += f" ({type(exc).__name__}: {first})"
        return text


class SwflowsApp(app.App):
    #: the program's name in usages and hints, however it was started
    #: (``python -m swflows.cli`` would be "cli")
    NAME = "swflows"

    def __init__(self) -> None:
        manager = commandmanager.CommandManager("swflows.cli")
        for name, command in COMMANDS.items():
            manager.add_command(name, command)
        super().__init__(
            description="Software-config deployments as TaskFlow flows.",
            version=_version(),
            command_manager=manager,
            deferred_help=True,
        )
        self._sw: Any = None
        self._context: Any = None

    def build_option_parser(
        self, description: str | None, version: str | None, argparse_kwargs: Any = None
    ) -> argparse.ArgumentParser:
        argparse_kwargs = {**(argparse_kwargs or {}), "prog": self.NAME}
        parser = super().build_option_parser(description, version, argparse_kwargs)
        parser.__class__ = _GlobalParser
        for action in parser._actions:
            if isinstance(action, argparse._VersionAction):
                action.version = f"{self.NAME} {version}"
        base.one_line_errors(parser, self.stderr)
        parser.add_argument(
            "--config-file",
            dest="swflows_config",
            metavar="FILE",
            action="append",
            default=[],
            help="swflows' configuration; repeat to layer several (default: "
            f"$SWFLOWS_CONFIG, else {DEFAULT_CONFIG_FILE} when it exists)",
        )
        parser.add_argument(
            "--os-cloud",
            metavar="NAME",
            default=os.environ.get("OS_CLOUD"),
            help="a cloud of clouds.yaml for swflows' own login ([identity]); "
            "default $OS_CLOUD",
        )
        parser.add_argument(
            "--scoped",
            action="store_true",
            help="act as the login's Keystone user ([identity] or --os-cloud): "
            "see and change only its project's configs, deployments, servers "
            "and groups (all of them for an admin with --all-projects)",
        )
        return parser

    def configure_logging(self) -> None:
        """Warnings and errors on stderr; ``-v`` adds INFO, ``-vv`` DEBUG."""
        super().configure_logging()
        level = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO}.get(
            self.options.verbose_level, logging.DEBUG
        )
        root = logging.getLogger()
        for handler in root.handlers:
            if getattr(handler, "stream", None) is self.stderr:
                handler.setLevel(level)
                if not self.options.debug:
                    handler.setFormatter(OneLineFormatter())
        if not self.options.log_file:
            root.setLevel(level)

    def run_subcommand(self, argv: list[str]) -> int:
        """An unknown command is one line on stderr, with what it may mean."""
        try:
            self.command_manager.find_command(argv)
        except ValueError:
            guesses = self.get_fuzzy_matches(argv[0]) if argv else []
            hint = f"; did you mean: {', '.join(guesses)}?" if guesses else ""
            self.stderr.write(
                f"swflows: error: {' '.join(argv)!r} is not a swflows command"
                f"{hint} (see: {self.NAME} help)\n"
            )
            return int(parsing.ExitCode.BAD_INPUT)
        return int(super().run_subcommand(argv))

    def run(self, argv: list[str]) -> int:
        """Run one command; global options alone, or with ``-h``/``--help``,
        show the program's usage and its commands.

        cliff would start an interactive shell reading commands from stdin
        when no command follows the global options (``swflows -v``), and
        turn ``swflows --help`` into the help of the ``help`` command.
        """
        argv = list(argv)
        _, rest = self.parser.parse_known_args(argv)
        if not rest:
            argv = [a for a in argv if a not in ("-h", "--help")] + ["help"]
        return int(super().run(argv))

    # -- the Swflows instance ----------------------------------------------
    def config_files(self) -> list[str]:
        paths = list(self.options.swflows_config)
        if not paths and os.environ.get("SWFLOWS_CONFIG"):
            paths = os.environ["SWFLOWS_CONFIG"].split(os.pathsep)
        if not paths and DEFAULT_CONFIG_FILE.exists():
            paths = [str(DEFAULT_CONFIG_FILE)]
        named_by = "--config-file" if self.options.swflows_config else "SWFLOWS_CONFIG"
        for path in paths:
            wrong = parsing.check_config_file(path)
            if wrong is not None:
                raise parsing.BadInput(named_by, wrong)
        return paths

    def swflows(self, *, resume: bool) -> Any:
        """The Swflows of this command, made at first use.

        ``resume=False`` keeps a short-lived command from taking over
        interrupted flows when it starts (an engine's or a watcher's job).
        """
        if self._sw is None:
            from swflows import conf as sw_conf
            from swflows.api import Swflows
            from swflows.cli import cloud

            try:
                options = sw_conf.get_conf(config_files=self.config_files())
            except cfg.Error as exc:
                raise parsing.BadInput("--config-file", str(exc)) from None
            if self.options.os_cloud:
                cloud.apply(options, self.options.os_cloud)
            if not resume:
                options.set_override("resume_on_start", False, group="runner")
            # the runner starts at the first command that needs it
            self._sw = Swflows.from_conf(options, start=False)
        return self._sw

    def request_context(self) -> Any:
        """With ``--scoped``, the request context of the login (its
        project, user and roles, from a token it gets once); else None."""
        if not getattr(self.options, "scoped", False):
            return None
        if self._context is None:
            from swflows.cli import cloud

            self._context = cloud.request_context(self.swflows(resume=False).conf)
        return self._context

    def close_swflows(self) -> None:
        made, self._sw = self._sw, None
        if made is not None:
            made.close()
            made.store.close()

    def clean_up(self, cmd: Any, result: int, err: BaseException | None) -> None:
        self.close_swflows()


def _version() -> str:
    try:
        from importlib import metadata

        return metadata.version("swflows")
    except Exception:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["help"]  # no interactive shell
    return SwflowsApp().run(args)
