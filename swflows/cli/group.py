"""``swflows group …``: create, list, show, redeploy, trigger, cancel, delete
and watch a deployment group; ``--wait`` and ``watch`` follow it with a live
progress bar on a terminal, done / running / failed / left lines elsewhere."""

from __future__ import annotations

import argparse
import datetime
import io
import time
from typing import IO, Any

from swflows import exceptions, model, states
from swflows.cli import base, parsing, progress, progress_bar
from swflows.cli.parsing import ExitCode

LIST_COLUMNS = ("id", "name", "members", "action", "status", "status_reason")
#: seconds a command without --wait lets its first members start
SETTLE_TIMEOUT = 120.0
#: seconds between two looks at the group
INTERVAL = 0.5


def add_policy(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("rollout policy")
    group.add_argument(
        "--max-concurrency",
        metavar="N|N%",
        help="members running at once (default: all)",
    )
    group.add_argument(
        "--max-errors",
        metavar="N|N%",
        help="FAILED members allowed before no new member starts (default 0)",
    )
    group.add_argument(
        "--max-batch-size", metavar="N|N%", help="members per wave (default: one wave)"
    )
    group.add_argument(
        "--batches",
        metavar="N,N%,...",
        help="a ramp of wave sizes, the last repeating (e.g. 1,5,25%%)",
    )
    group.add_argument(
        "--pause-time", metavar="SECONDS", type=float, help="pause between waves"
    )
    group.add_argument(
        "--min-in-service",
        metavar="N",
        type=int,
        help="members kept COMPLETE during a rolling redeploy",
    )


def policy_of(
    parsed_args: argparse.Namespace, base_policy: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The policy the options give, over ``base_policy``; None if none given."""
    given: dict[str, Any] = {}
    for key in ("max_concurrency", "max_errors", "max_batch_size"):
        value = getattr(parsed_args, key)
        if value is not None:
            given[key] = value
    if parsed_args.batches is not None:
        given["batches"] = [part.strip() for part in parsed_args.batches.split(",")]
    if parsed_args.pause_time is not None:
        given["pause_time"] = parsed_args.pause_time
    if parsed_args.min_in_service is not None:
        given["min_in_service"] = parsed_args.min_in_service
    if not given:
        return None
    merged = dict(base_policy or {})
    if "batches" in given or "max_batch_size" in given:
        merged.pop("batches", None)
        merged.pop("max_batch_size", None)
    return {**merged, **given}


def add_members(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "--member",
        metavar="NAME=SERVER",
        action="append",
        default=[],
        required=required,
        help="a member and its server's id; repeat for each member"
        + ("" if required else " (given: the group's new membership)"),
    )
    parser.add_argument(
        "--member-input",
        metavar="NAME:KEY=VALUE",
        action="append",
        default=[],
        help="an input value of one member only; repeat for several",
    )
    parser.add_argument(
        "--input-value",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="an input value of every member; repeat for several",
    )


def parse_members(pairs: list[str]) -> dict[str, str]:
    members: dict[str, str] = {}
    for pair in pairs:
        name, sep, server = pair.partition("=")
        if not sep or not name.strip() or not server.strip():
            raise parsing.BadInput("--member", f"{pair!r} is not NAME=SERVER")
        if name.strip() in members:
            raise parsing.BadInput("--member", f"member {name.strip()} given twice")
        members[name.strip()] = server.strip()
    return members


def parse_member_inputs(pairs: list[str]) -> dict[str, dict[str, str]]:
    values: dict[str, dict[str, str]] = {}
    for pair in pairs:
        name, sep, rest = pair.partition(":")
        key, eq, value = rest.partition("=")
        if not sep or not eq or not name.strip() or not key.strip():
            raise parsing.BadInput("--member-input", f"{pair!r} is not NAME:KEY=VALUE")
        values.setdefault(name.strip(), {})[key.strip()] = value
    return values


def add_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        action="store_true",
        help="follow the group until its operation ends; exit 0 only when COMPLETE",
    )
    parser.add_argument(
        "--wait-timeout",
        metavar="MIN",
        type=int,
        help="minutes to follow it before giving up (default: no limit)",
    )


def progress_line(shown: dict[str, Any]) -> str:
    operation = shown["operation"]
    return (
        f"group {shown['name']} {operation['kind']} {shown['status']}: "
        f"{operation['done']} done, {operation['running']} running, "
        f"{operation['failed']} failed, {operation['left']} left"
    )


def follow(
    sw: Any,
    group: str,
    out: IO[str],
    timeout: float | None = None,
    heartbeat: float = progress.HEARTBEAT,
) -> dict[str, Any] | None:
    """Follow the group's operation until it ends; the group then (None
    once a delete removed it: the caller says so).

    On a terminal a progress bar is rewritten in place at every look
    (:mod:`swflows.cli.progress_bar`); elsewhere a progress line is printed
    whenever it changes, and again as "still waiting" every ``heartbeat``
    seconds.
    """
    sw.runner  # noqa: B018 -- this process drives the group meanwhile
    tty = out.isatty()
    started = time.monotonic()
    printed = started
    last = None
    #: how long the operation ran before the first look (a watch comes late)
    before: float | None = None
    try:
        while True:
            try:
                shown: dict[str, Any] = sw.show_group(group)
            except exceptions.GroupNotFound:
                return None
            clock = time.monotonic()
            if before is None:
                before = ran_before(shown["operation"])
            if tty:
                drawn = bar(shown, before + clock - started, out)
                out.write(f"{progress_bar.REWIND}{drawn}{progress_bar.ERASE}")
                out.flush()
            else:
                line = progress_line(shown)
                if line != last or clock - printed >= heartbeat:
                    still = "still waiting: " if line == last else ""
                    out.write(f"[{clock - started:5.0f}s] {still}{line}\n")
                    out.flush()
                    last = line
                    printed = clock
            if shown["status"] != states.IN_PROGRESS:
                return shown
            if timeout is not None and time.monotonic() - started > timeout:
                raise exceptions.WaitTimeout(group, timeout, group=group)
            time.sleep(INTERVAL)
    finally:
        if tty and before is not None:
            out.write("\n")
            out.flush()


def ran_before(operation: dict[str, Any]) -> float:
    """Seconds the operation ran before now, from its ``started_at`` (0
    when it has none, or the store's clock is ahead of this one's)."""
    begun = operation.get("started_at")
    if not begun:
        return 0.0
    at = datetime.datetime.strptime(begun, "%Y-%m-%dT%H:%M:%SZ")
    return max(0.0, time.time() - at.replace(tzinfo=datetime.UTC).timestamp())


def bar(shown: dict[str, Any], elapsed: float, out: IO[str]) -> str:
    """The group's progress bar for ``out``'s terminal."""
    operation = shown["operation"]
    title = base.terminal_safe(
        f"group {shown['name']} {operation['kind']} {shown['status']}"
    )
    return progress_bar.line(
        title,
        operation,
        elapsed,
        progress_bar.columns(out),
        ended=shown["status"] != states.IN_PROGRESS,
    )


def settle(sw: Any, group: str) -> dict[str, Any] | None:
    """Let this process start the first members and their flows park; the
    rest is driven by any runner (``swflows engine``)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        try:
            shown: dict[str, Any] = sw.show_group(group)
        except exceptions.GroupNotFound:
            return None
        operation = shown["operation"]
        started = operation["running"] + operation["done"] + operation["failed"]
        if shown["status"] != states.IN_PROGRESS:
            return shown
        if started and all(row.state != "RUNNING" for row in sw.list_flows()):
            return shown
        time.sleep(0.1)
    return sw.show_group(group)  # type: ignore[no-any-return]


def summary(shown: dict[str, Any]) -> dict[str, Any]:
    """What ``show`` prints: the group, its members and outputs by member."""
    operation = dict(shown["operation"])
    members = operation.pop("members")
    return {
        "id": shown["id"],
        "name": shown["name"],
        "config_id": shown["config_id"],
        "status": shown["status"],
        "status_reason": shown["status_reason"],
        "action": shown["action"],
        "signal_transport": shown["signal_transport"],
        "policy": shown["policy"],
        "members": {
            name: {
                "server_id": m["server_id"],
                "status": m["status"],
                "status_reason": m["status_reason"],
            }
            for name, m in shown["members"].items()
        },
        "outputs": shown["outputs"],
        "operation": {**operation, "members": members},
        "creation_time": shown["creation_time"],
        "updated_time": shown["updated_time"],
    }


class _Operation(base.ShowOne):
    """A command that starts a group operation, and may follow it."""

    def sw_for(self, parsed_args: argparse.Namespace) -> Any:
        return self.app.swflows(resume=bool(getattr(parsed_args, "wait", False)))

    def finish(self, sw: Any, shown: dict[str, Any], parsed_args: Any) -> Any:
        if parsed_args.wait:
            timeout = parsing.minutes_to_seconds(parsed_args.wait_timeout)
            return self.to_the_end(sw, shown, timeout)
        settled = settle(sw, shown["name"])
        if settled is None:
            return base.fields({"name": shown["name"], "status": "DELETED"})
        return base.fields(summary(settled))

    def to_the_end(self, sw: Any, shown: dict[str, Any], timeout: float | None) -> Any:
        """Follow the group until its operation ends; exit 3 unless COMPLETE."""
        final = follow(sw, shown["name"], self.app.stderr, timeout)
        if final is None:
            return base.fields({"name": shown["name"], "status": "DELETED"})
        if final["status"] != states.COMPLETE:
            self.exit_status = int(ExitCode.FAILED)
            self.app.stderr.write(
                f"swflows: group {final['name']} {final['status']}: "
                f"{final['status_reason']}\n"
            )
        return base.fields(summary(final))


class CreateGroup(_Operation):
    """Deploy a config to a group of servers, released by a rollout policy."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="NAME")
        parser.add_argument(
            "--config", required=True, metavar="CONFIG", help="the config's id"
        )
        add_members(parser, required=True)
        parser.add_argument(
            "--signal-transport",
            metavar="TRANSPORT",
            help="TEMP_URL_SIGNAL, ZAQAR_SIGNAL, HEAT_SIGNAL, NO_SIGNAL or AUTO",
        )
        parser.add_argument(
            "--timeout",
            metavar="MIN",
            type=int,
            help=f"minutes each server has to signal, at most "
            f"{parsing.MAX_TIMEOUT_MINUTES} (7 days; default: config)",
        )
        add_policy(parser)
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        sw = self.sw_for(parsed_args)
        shown = sw.create_group(
            parsed_args.name,
            parsed_args.config,
            parse_members(parsed_args.member),
            input_values=parsing.parse_input_values(parsed_args.input_value),
            member_values=parse_member_inputs(parsed_args.member_input),
            policy=policy_of(parsed_args),
            signal_transport=parsed_args.signal_transport,
            timeout=parsing.minutes_to_seconds(parsed_args.timeout),
            wait=False,
        )
        return self.finish(sw, shown, parsed_args)


class RedeployGroup(_Operation):
    """Rolling redeploy (UPDATE) with new inputs, config or membership."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP")
        parser.add_argument(
            "--config", metavar="CONFIG", help="a new config's id (default: the same)"
        )
        add_members(parser, required=False)
        parser.add_argument(
            "--action", default=model.UPDATE, help="the action to run (%(default)s)"
        )
        add_policy(parser)
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        sw = self.sw_for(parsed_args)
        current = sw.show_group(parsed_args.name)
        shown = sw.redeploy_group(
            parsed_args.name,
            servers=parse_members(parsed_args.member) if parsed_args.member else None,
            input_values=parsing.parse_input_values(parsed_args.input_value),
            member_values=parse_member_inputs(parsed_args.member_input),
            config_id=parsed_args.config,
            policy=policy_of(parsed_args, current["policy"]),
            action=parsed_args.action,
            wait=False,
        )
        return self.finish(sw, shown, parsed_args)


class TriggerGroup(_Operation):
    """Run an action of the group's config (BACKUP, …) on every member."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP")
        parser.add_argument("action", metavar="ACTION")
        parser.add_argument(
            "--input-value",
            metavar="KEY=VALUE",
            action="append",
            default=[],
            help="an input value of every member; repeat for several",
        )
        add_policy(parser)
        add_wait(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        sw = self.sw_for(parsed_args)
        current = sw.show_group(parsed_args.name)
        shown = sw.trigger_group(
            parsed_args.name,
            parsed_args.action,
            input_values=parsing.parse_input_values(parsed_args.input_value),
            policy=policy_of(parsed_args, current["policy"]),
            wait=False,
        )
        return self.finish(sw, shown, parsed_args)


class WatchGroup(_Operation):
    """Follow a group's operation until it ends; exit as ``--wait`` does."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP")
        parser.add_argument(
            "--timeout",
            metavar="MIN",
            type=int,
            help="minutes to watch before giving up (default: no limit)",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        sw = self.app.swflows(resume=True)
        shown = sw.show_group(parsed_args.name)
        timeout = parsing.minutes_to_seconds(parsed_args.timeout)
        return self.to_the_end(sw, shown, timeout)


class CancelGroup(base.ShowOne):
    """Stop a group's operation: no new member starts, running ones are
    cancelled."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP")
        parser.add_argument("--reason", help="why, kept in its status_reason")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        sw = self.app.swflows(resume=False)
        sw.cancel_group(parsed_args.name, parsed_args.reason)
        try:
            final = follow(
                sw, parsed_args.name, io.StringIO(), timeout=SETTLE_TIMEOUT / 4
            )
        except exceptions.WaitTimeout:
            final = None
        return base.fields(summary(final or sw.show_group(parsed_args.name)))


class DeleteGroup(base.Command):
    """Undeploy every member (DELETE runs where the config has it), then
    remove the group."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP")
        add_policy(parser)
        parser.add_argument(
            "--no-wait",
            action="store_true",
            help="return once the first members are undeploying",
        )
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        sw = self.app.swflows(resume=not parsed_args.no_wait)
        current = sw.show_group(parsed_args.name)
        sw.delete_group(
            parsed_args.name,
            policy=policy_of(parsed_args, current["policy"]),
            wait=False,
        )
        if parsed_args.no_wait:
            settle(sw, current["name"])
            self.app.stdout.write(f"group {current['name']} deleting\n")
            return int(ExitCode.OK)
        final = follow(sw, current["name"], self.app.stderr)
        if final is None:
            self.app.stdout.write(f"group {current['name']} deleted\n")
            return int(ExitCode.OK)
        self.app.stderr.write(
            f"swflows: group {final['name']} {final['status']}: "
            f"{final['status_reason']}\n"
        )
        return int(ExitCode.FAILED)


class ShowGroup(base.ShowOne):
    """Show a group: its status, members, outputs by member, last operation."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("name", metavar="GROUP", help="the group's name or id")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        return base.fields(
            summary(self.sw.show_group(parsed_args.name, context=self.ctx))
        )


class ListGroups(base.Lister):
    """List deployment groups."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        base.add_all_projects(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> Any:
        found = self.sw.list_groups(
            context=self.ctx, all_projects=parsed_args.all_projects
        )
        return LIST_COLUMNS, [base.row(g, LIST_COLUMNS) for g in found]
