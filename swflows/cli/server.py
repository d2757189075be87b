"""``swflows server …``: enroll, unenroll, show, boot data and agent
configuration, and servers booted and deleted through Nova."""

from __future__ import annotations

import argparse
import os
from typing import Any

from swflows import bootdata, exceptions, projects
from swflows.cli import base


def add_server(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("server", metavar="SERVER", help="the server's id")


def add_agent(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    parser.add_argument(
        "--agent",
        choices=bootdata.AGENTS,
        default=default,
        help="swflows' agent, or Heat's agents (os-collect-config); recorded "
        "as the agent the server runs, which decides the form of its metadata "
        "and the signal transports it can use (default: "
        + (default or "the one the server was enrolled for, else swflows")
        + ")",
    )


def add_transport(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-transport",
        metavar="TRANSPORT",
        help="POLL_TEMP_URL, ZAQAR_MESSAGE or POLL_SERVER_HEAT "
        "(default: the server's, else the configuration's)",
    )


def add_deploy_policy(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "--deploy-policy",
        metavar="POLICY",
        required=required,
        help="who may deploy to the server: 'project' (its own project, the "
        "default), 'projects:ID[,ID...]' (its own and those) or 'any'",
    )
    parser.add_argument(
        "--deploy-config",
        metavar="CONFIG_ID",
        action="append",
        default=[],
        help="with --deploy-policy: only this source config may be deployed "
        "(repeat for several; default: any)",
    )


def deploy_policy(parsed_args: argparse.Namespace) -> dict[str, Any] | None:
    if parsed_args.deploy_policy is None:
        if parsed_args.deploy_config:
            raise exceptions.ValidationError("--deploy-config", "needs --deploy-policy")
        return None
    return projects.DeployPolicy.parse(
        parsed_args.deploy_policy, parsed_args.deploy_config
    ).to_dict()


class EnrollServer(base.ShowOne):
    """Give a server its metadata channel (again, or on another transport)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        add_transport(parser)
        add_agent(parser)
        add_deploy_policy(parser, required=False)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        shown = self.sw.enroll_server(
            parsed_args.server,
            parsed_args.config_transport,
            parsed_args.agent,
            deploy_policy=deploy_policy(parsed_args),
            context=self.ctx,
        )
        return base.fields(shown)


class SetServer(base.ShowOne):
    """Change a server's deployment policy (the change is recorded)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        add_deploy_policy(parser, required=True)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        wanted = deploy_policy(parsed_args)
        assert wanted is not None  # --deploy-policy is required
        return base.fields(
            self.sw.set_deploy_policy(parsed_args.server, wanted, context=self.ctx)
        )


class UnenrollServer(base.Command):
    """Remove a server's metadata channel and record."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        parser.add_argument(
            "--force",
            action="store_true",
            help="undeploy what is on the server first (waiting deployments "
            "are cancelled)",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        removed = self.sw.unenroll_server(
            parsed_args.server, force=parsed_args.force, context=self.ctx
        )
        what = "unenrolled" if removed else "was not enrolled"
        self.app.stdout.write(f"server {parsed_args.server} {what}\n")
        return 0


class ShowServer(base.ShowOne):
    """Show a server's enrollment, channel (no secret) and deployments."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        parser.add_argument(
            "--console-lines",
            type=int,
            default=5,
            metavar="N",
            help="the last N lines of a Nova server's console log, where an "
            "agent that failed says why (default 5; 0: none)",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        lines = max(0, parsed_args.console_lines)
        return base.fields(
            self.sw.show_server(
                parsed_args.server, console_lines=lines, context=self.ctx
            )
        )


class _Secret(base.Command):
    """A command printing a file that holds the channel's credentials."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        add_agent(parser)
        parser.add_argument(
            "--output",
            metavar="FILE",
            help="write it to FILE (mode 0600) instead of standard output",
        )
        return parser

    def text(self, parsed_args: argparse.Namespace) -> str:
        raise NotImplementedError

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        text = self.text(parsed_args)
        if not parsed_args.output:
            self.app.stdout.write(text)
            return 0
        fd = os.open(parsed_args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        # a file that existed keeps its mode unless told: 0600 before the secret
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        return 0


class BootData(_Secret):
    """Print the cloud-init user_data that starts the server's agent."""

    def text(self, parsed_args: argparse.Namespace) -> str:
        return self.sw.boot_data(parsed_args.server, parsed_args.agent)


class AgentConfig(_Secret):
    """Print the agent's configuration file, for a server already running."""

    def text(self, parsed_args: argparse.Namespace) -> str:
        return self.sw.agent_config(parsed_args.server, parsed_args.agent)


class CreateServer(base.ShowOne):
    """Boot a server through Nova with boot data for its agent, and enroll it."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="NAME", help="the new server's name")
        parser.add_argument("--image", required=True, help="image name or id")
        parser.add_argument("--flavor", required=True, help="flavor name or id")
        add_transport(parser)
        add_agent(parser, bootdata.SWFLOWS_AGENT)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        shown = self.sw.create_server(
            parsed_args.name,
            parsed_args.image,
            parsed_args.flavor,
            config_transport=parsed_args.config_transport,
            agent=parsed_args.agent,
            context=self.ctx,
        )
        return base.fields(shown)


class DeleteServer(base.Command):
    """Undeploy what is on a server, unenroll it, and delete it in Nova."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        add_server(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        self.sw.delete_server(parsed_args.server, context=self.ctx)
        self.app.stdout.write(f"server {parsed_args.server} deleted\n")
        return 0


class ListServers(base.Lister):
    """List servers: enrollment, agent, deployments, when last seen."""

    COLUMNS = (
        "server_id",
        "config_transport",
        "agent",
        "enrolled",
        "deployments",
        "last_seen",
    )

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        base.add_all_projects(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        found = self.sw.list_servers(
            context=self.ctx, all_projects=parsed_args.all_projects
        )
        return self.COLUMNS, [base.row(s, self.COLUMNS) for s in found]
