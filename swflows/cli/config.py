"""``swflows config create|show|list|delete``."""

from __future__ import annotations

import argparse
from typing import Any

from swflows.cli import base, parsing

LIST_COLUMNS = ("id", "name", "group", "creation_time")


class CreateConfig(base.ShowOne):
    """Create a software config from a script (or component) file."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="NAME")
        parser.add_argument(
            "--config-file",
            metavar="FILE",
            required=True,
            help="the config itself: a script, or a component's YAML "
            "(/dev/null for an empty config)",
        )
        parser.add_argument(
            "--definition-file",
            metavar="FILE",
            help="YAML or JSON with the config's inputs, outputs and options",
        )
        parser.add_argument(
            "--group",
            default="Heat::Ungrouped",
            help="the tool that runs it: script, component, … (%(default)s)",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        body = parsing.read_config_body(parsed_args.config_file, parsed_args.group)
        definition = (
            parsing.read_definition(parsed_args.definition_file)
            if parsed_args.definition_file
            else {}
        )
        made = self.sw.create_config(
            parsed_args.name,
            body,
            group=parsed_args.group,
            context=self.ctx,
            **definition,
        )
        return base.fields(made.to_dict())


class ShowConfig(base.ShowOne):
    """Show a software config."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        parser.add_argument(
            "--config-only", action="store_true", help="only the config's body"
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        data = self.sw.get_config(parsed_args.id, context=self.ctx).to_dict()
        if parsed_args.config_only:
            data = {"config": data["config"]}
        return base.fields(data)


class ListConfigs(base.Lister):
    """List software configs (not the derived ones deployments made)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--limit", type=int, help="at most this many")
        base.add_all_projects(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        found = self.sw.list_configs(
            limit=parsed_args.limit,
            context=self.ctx,
            all_projects=parsed_args.all_projects,
        )
        return LIST_COLUMNS, [base.row(c.to_dict(), LIST_COLUMNS) for c in found]


class DeleteConfig(base.Command):
    """Delete software configs no deployment uses."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("ids", metavar="ID", nargs="+")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        for config_id in parsed_args.ids:
            self.sw.delete_config(config_id, context=self.ctx)
            self.app.stdout.write(f"config {config_id} deleted\n")
