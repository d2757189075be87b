"""``swflows-agent``: the command that runs the agent on a server."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from swflows import exceptions, stopping
from swflows.agent import config as agent_config
from swflows.agent.agent import Agent
from swflows.agent.state import AgentLocked

LOG = logging.getLogger("swflows.agent")

#: exit status for a configuration the agent cannot run with
EXIT_CONFIG = 2
#: exit status when another agent holds the state directory
EXIT_LOCKED = 3


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="swflows-agent",
        description="Run software deployments published by swflows (or Heat) "
        "on this server, and signal their outputs back.",
    )
    parse.add_argument(
        "--config-file",
        action="append",
        type=Path,
        default=[],
        help="INI or JSON configuration file; repeat to layer several "
        f"(default: {agent_config.DEFAULT_CONFIG_FILE})",
    )
    parse.add_argument("--state-dir", type=Path, help="markers and pending signals")
    parse.add_argument("--metadata-url", help="the metadata URL ([request])")
    parse.add_argument("--interval", type=float, help="seconds between polls")
    parse.add_argument(
        "--once", action="store_true", help="poll and deploy once, then exit"
    )
    parse.add_argument(
        "--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default=None
    )
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    paths = list(args.config_file)
    if not paths and agent_config.DEFAULT_CONFIG_FILE.exists():
        paths = [agent_config.DEFAULT_CONFIG_FILE]
    overrides = {
        "state_dir": args.state_dir,
        "interval": args.interval,
        "log_level": args.log_level,
    }
    try:
        extra = {"request": {"metadata_url": args.metadata_url}}
        conf = agent_config.load(
            paths, overrides, extra=extra if args.metadata_url else None
        )
    except exceptions.ValidationError as exc:
        print(f"swflows-agent: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logging.basicConfig(
        level=conf.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    stop = threading.Event()
    stopping.stop_on_signals(
        stop, (signal.SIGTERM, signal.SIGINT, signal.SIGHUP), log=LOG
    )
    try:
        return Agent(conf, stop=stop).run(once=args.once)
    except AgentLocked as exc:
        LOG.error("%s", exc)
        return EXIT_LOCKED
    except OSError as exc:
        LOG.error("cannot use state directory %s: %s", conf.state_dir, exc)
        return EXIT_CONFIG
    except exceptions.ValidationError as exc:
        LOG.error("%s", exc)
        return EXIT_CONFIG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
