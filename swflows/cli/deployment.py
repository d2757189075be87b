"""``swflows deployment …``: create, show, list, delete, redeploy, trigger,
cancel, watch, and a deployment's outputs and its server's metadata."""

from __future__ import annotations

import argparse
import io
from typing import Any

import tenacity

from swflows import exceptions, model, states
from swflows.cli import base, parsing, progress
from swflows.cli.parsing import ExitCode

#: the config the user gave (its derived config is ``config_id`` in
#: ``deployment show``)
LIST_COLUMNS = (
    "id",
    "name",
    "server_id",
    "source_config_id",
    "action",
    "status",
    "creation_time",
)
METADATA_COLUMNS = ("id", "name", "group", "action", "creation_time", "inputs")
#: seconds a command without --wait waits for its flow to publish and park
SETTLE_TIMEOUT = 120.0
#: seconds between two looks at a flow settling
SETTLE_INTERVAL = 0.1


def add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-value",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an input's value; repeat for several",
    )


def check_inputs(sw: Any, config_id: str, values: dict[str, str]) -> None:
    """Refuse an input the config does not declare (a typo would otherwise
    reach the server as an extra String input, as Heat passes it)."""
    if not values:
        return
    config = sw.get_config(config_id)
    declared = [i.name for i in config.inputs]
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise parsing.BadInput(
            "--input-value",
            f"{', '.join(unknown)}: not an input of config {config.name} "
            f"({config.id}); its inputs: {', '.join(declared) or 'none'}",
        )


def check_config_transport(sw: Any, server_id: str, asked: str | None) -> None:
    """Refuse a --config-transport other than the one the server is enrolled
    with (it keeps its channel until it is unenrolled)."""
    if not asked:
        return
    from swflows import transport_names as names

    wanted = names.normalize_config_transport(asked)
    try:
        record = sw.store.get_server(server_id)
    except exceptions.ServerNotFound:
        return
    if record.config_transport and record.config_transport != wanted:
        raise parsing.BadInput(
            "--config-transport",
            f"server {server_id} is enrolled with {record.config_transport}, "
            f"not {wanted} ('server enroll {server_id} --config-transport "
            f"{wanted}' moves it)",
        )


def add_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--timeout",
        metavar="MIN",
        type=int,
        help=f"minutes {what}, at most {parsing.MAX_TIMEOUT_MINUTES} (7 days; "
        "default: config)",
    )


def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        action="store_true",
        help="follow the deployment until it ends; exit 0 only when COMPLETE",
    )


class _Operation(base.ShowOne):
    """A command that starts a flow on a deployment, and may follow it."""

    _follows = False

    def following(self, parsed_args: argparse.Namespace) -> bool:
        return bool(getattr(parsed_args, "wait", False))

    def run(self, parsed_args: argparse.Namespace) -> int:
        self._follows = self.following(parsed_args)
        return super().run(parsed_args)

    @property
    def sw(self) -> Any:
        # a process that follows a flow drives it, and takes over
        # interrupted flows as an engine would
        return self.app.swflows(resume=self._follows)

    def finish(
        self,
        deployment: model.Deployment,
        parsed_args: argparse.Namespace,
        timeout: float | None = None,
    ) -> Any:
        """Follow (with --wait) or let the flow publish; the ShowOne result."""
        if self.following(parsed_args):
            final = progress.follow(
                self.sw, deployment.id, self.app.stderr, timeout=timeout
            )
            if final is None:
                # removed while followed (a delete beside it): its outcome
                # is not known, and an unknown outcome is never success
                self.exit_status = int(ExitCode.FAILED)
                self.app.stderr.write(
                    f"swflows: deployment {deployment.id} no longer exists: it "
                    "was deleted while this waited, so its outcome is unknown\n"
                )
                return base.fields(deployment.to_dict())
            deployment = final
            self.exit_status = int(parsing.exit_code(final))
            if self.exit_status:
                self.app.stderr.write(f"swflows: {outcome_line(deployment)}\n")
        else:
            deployment = settle(self.sw, deployment.id) or deployment
        return base.fields(deployment.to_dict())


def outcome_line(deployment: model.Deployment) -> str:
    kind = (deployment.reason or {}).get("kind", "unknown")
    return (
        f"deployment {deployment.id} {deployment.status} ({kind}): "
        f"{deployment.status_reason}"
    )


def settle(sw: Any, deployment_id: str) -> model.Deployment | None:
    """Wait until the deployment's flow parked (published) or ended.

    A flow left running when this process exits is taken over by the next
    runner (``swflows engine``); a parked one waits for any runner's watcher.
    """

    def running() -> bool:
        rows = sw.list_flows(deployment_id=deployment_id)
        return any(r.state == "RUNNING" for r in rows)

    tenacity.Retrying(
        retry=tenacity.retry_if_result(bool),
        wait=tenacity.wait_fixed(SETTLE_INTERVAL),
        stop=tenacity.stop_after_delay(SETTLE_TIMEOUT),
        retry_error_callback=lambda state: True,  # still running: shown as it is
    )(running)
    try:
        return sw.show(deployment_id)  # type: ignore[no-any-return]
    except exceptions.DeploymentNotFound:
        return None


class CreateDeployment(_Operation):
    """Deploy a config to a server (its CREATE action, or --action)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="NAME")
        parser.add_argument(
            "--server",
            required=True,
            metavar="SERVER",
            help="the server's id (Nova's, or any id its agent was given)",
        )
        parser.add_argument(
            "--config", required=True, metavar="CONFIG", help="the config's id"
        )
        add_inputs(parser)
        parser.add_argument(
            "--action",
            default=model.CREATE,
            help="the action to run first (%(default)s)",
        )
        parser.add_argument(
            "--signal-transport",
            metavar="TRANSPORT",
            help="TEMP_URL_SIGNAL, ZAQAR_SIGNAL, HEAT_SIGNAL, NO_SIGNAL or AUTO",
        )
        parser.add_argument(
            "--config-transport",
            metavar="TRANSPORT",
            help="POLL_TEMP_URL, ZAQAR_MESSAGE or POLL_SERVER_HEAT",
        )
        parser.add_argument(
            "--id",
            metavar="ID",
            help="the deployment's id (a new one by default); the same command "
            "run again with this id does not deploy twice",
        )
        add_timeout(parser, "the server has to signal")
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        values = parsing.parse_input_values(parsed_args.input_value)
        check_inputs(self.sw, parsed_args.config, values)
        check_config_transport(
            self.sw, parsed_args.server, parsed_args.config_transport
        )
        made = self.sw.deploy(
            parsed_args.server,
            parsed_args.config,
            input_values=values,
            name=parsed_args.name,
            action=parsed_args.action,
            signal_transport=parsed_args.signal_transport,
            config_transport=parsed_args.config_transport,
            timeout=parsing.minutes_to_seconds(parsed_args.timeout),
            deployment_id=parsed_args.id,
            wait=False,
            context=self.ctx,
        )
        return self.finish(made, parsed_args)


class RedeployDeployment(_Operation):
    """Run a deployment again (UPDATE) with new inputs or another config."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        parser.add_argument(
            "--config", metavar="CONFIG", help="a new config's id (default: the same)"
        )
        add_inputs(parser)
        parser.add_argument(
            "--action",
            default=model.UPDATE,
            help="UPDATE, SUSPEND, RESUME, or another of the config's actions "
            "(%(default)s)",
        )
        add_timeout(parser, "the server has to signal")
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        values = parsing.parse_input_values(parsed_args.input_value)
        timeout = parsing.minutes_to_seconds(parsed_args.timeout)
        if values:
            config = parsed_args.config or self.sw.show(parsed_args.id).source_config_id
            check_inputs(self.sw, config or "", values)
        made = self.sw.redeploy(
            parsed_args.id,
            input_values=values,
            config_id=parsed_args.config,
            action=parsed_args.action,
            timeout=timeout,
            wait=False,
            context=self.ctx,
        )
        return self.finish(made, parsed_args)


class TriggerDeployment(_Operation):
    """Run another action of a deployment's config (BACKUP, …) now."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        parser.add_argument(
            "action",
            metavar="ACTION",
            help="a component's action (BACKUP, …), or one of the deployment's "
            "actions for another config",
        )
        add_inputs(parser)
        parser.add_argument(
            "--signal-transport",
            metavar="TRANSPORT",
            help="how the server answers (default: the deployment's)",
        )
        add_timeout(parser, "the server has to signal")
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        values = parsing.parse_input_values(parsed_args.input_value)
        if values:
            config = self.sw.show(parsed_args.id).source_config_id
            check_inputs(self.sw, config or "", values)
        made = self.sw.trigger(
            parsed_args.id,
            parsed_args.action,
            input_values=values,
            signal_transport=parsed_args.signal_transport,
            timeout=parsing.minutes_to_seconds(parsed_args.timeout),
            wait=False,
            context=self.ctx,
        )
        return self.finish(made, parsed_args)


class WatchDeployment(_Operation):
    """Follow a deployment until no flow works on it; its final state."""

    def following(self, parsed_args: argparse.Namespace) -> bool:
        return True

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        add_timeout(parser, "to watch before giving up")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        current = self.sw.show(parsed_args.id, context=self.ctx)
        return self.finish(
            current, parsed_args, parsing.minutes_to_seconds(parsed_args.timeout)
        )


class CancelDeployment(base.ShowOne):
    """End a running deployment FAILED (kind ``cancelled``)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        parser.add_argument(
            "--reason",
            help='why, kept in its status_reason ("Deployment cancelled: REASON.")',
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        self.sw.cancel(parsed_args.id, parsed_args.reason, context=self.ctx)
        # let a watcher (this process's, or an engine's) finish the flow: it
        # removes the signal store
        try:
            final = progress.follow(
                self.sw, parsed_args.id, io.StringIO(), timeout=SETTLE_TIMEOUT / 4
            )
        except exceptions.WaitTimeout:
            final = None
        return base.fields((final or self.sw.show(parsed_args.id)).to_dict())


class ShowDeployment(base.ShowOne):
    """Show a deployment."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return base.fields(self.sw.show(parsed_args.id, context=self.ctx).to_dict())


class ListDeployments(base.Lister):
    """List deployments, of one server or in one status."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("--server", metavar="SERVER", help="one server's")
        parser.add_argument(
            "--status", choices=sorted(states.STATUSES), help="in this status only"
        )
        parser.add_argument("--limit", type=int, help="at most this many")
        base.add_all_projects(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        found = self.sw.list_deployments(
            server_id=parsed_args.server,
            status=parsed_args.status,
            limit=parsed_args.limit,
            context=self.ctx,
            all_projects=parsed_args.all_projects,
        )
        if parsed_args.server and not found:
            try:
                self.sw.store.get_server(parsed_args.server)
            except exceptions.ServerNotFound:
                raise parsing.BadInput(
                    "--server",
                    f"no server {parsed_args.server}: neither enrolled nor deployed to",
                ) from None
        return LIST_COLUMNS, [base.row(d.to_dict(), LIST_COLUMNS) for d in found]


class DeleteDeployment(base.Command):
    """Undeploy: run the config's DELETE action if it has one, then remove it."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("ids", metavar="ID", nargs="+")
        add_timeout(parser, "the server has to signal DELETE")
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help="return once the DELETE action is published",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        sw = self.app.swflows(resume=not parsed_args.no_wait)
        status = ExitCode.OK
        for deployment_id in parsed_args.ids:
            sw.undeploy(
                deployment_id,
                timeout=parsing.minutes_to_seconds(parsed_args.timeout),
                wait=False,
                context=self.ctx,
            )
            if parsed_args.no_wait:
                settle(sw, deployment_id)
                self.app.stdout.write(f"deployment {deployment_id} deleting\n")
                continue
            left = progress.follow(sw, deployment_id, self.app.stderr)
            if left is None:
                self.app.stdout.write(f"deployment {deployment_id} deleted\n")
            else:
                status = max(status, parsing.exit_code(left)) or ExitCode.FAILED
                self.app.stderr.write(f"swflows: {outcome_line(left)}\n")
        return int(status)


class ShowOutput(base.ShowOne):
    """Show one output of a deployment, or all of them."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("id", metavar="ID")
        parser.add_argument("output", metavar="OUTPUT", nargs="?")
        parser.add_argument("--all", action="store_true", help="every output")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        if bool(parsed_args.output) == bool(parsed_args.all):
            raise parsing.BadInput("OUTPUT", "give an output name or --all")
        values = self.sw.outputs(parsed_args.id, context=self.ctx)
        if parsed_args.all:
            return base.fields(values)
        if parsed_args.output not in values:
            raise parsing.BadInput(
                "OUTPUT",
                f"deployment {parsed_args.id} has no output {parsed_args.output!r}",
            )
        return base.fields({parsed_args.output: values[parsed_args.output]})


class ShowMetadata(base.Lister):
    """The derived configs a server's metadata holds (read only)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("server", metavar="SERVER")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        # the store's copy: serving it through the API would count as the
        # server picking its deployments up
        items = self.sw.store.server_metadata(parsed_args.server).deployments
        rows = []
        for item in items:
            inputs = {
                i["name"]: model.HIDDEN_SHOWN if i.get("hidden") else i.get("value")
                for i in item.get("inputs", ())
            }
            shown = {
                **item,
                "action": inputs.get("deploy_action"),
                "inputs": {
                    k: v for k, v in inputs.items() if not k.startswith("deploy_")
                },
            }
            rows.append(base.row(shown, METADATA_COLUMNS))
        return METADATA_COLUMNS, rows
