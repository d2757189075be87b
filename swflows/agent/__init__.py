"""The reference agent: runs a server's software deployments.

It reads the server's metadata document (a Swift TempURL or a Zaqar queue),
runs each derived config it has not run yet with the hook of its group,
and signals the outputs back where the config's ``deploy_*`` inputs say,
speaking the formats of Heat's agents.  It imports only swflows' pure
modules and ``requests``: a server needs neither the store, TaskFlow nor
any OpenStack client library.  Run it with ``swflows-agent`` or
``python -m swflows.agent``.
"""

from swflows.agent.agent import Agent, Schedule
from swflows.agent.collectors import Collector, RequestCollector, ZaqarCollector
from swflows.agent.config import AgentConfig
from swflows.agent.hooks import Hook, HookContext, Hooks, ScriptHook
from swflows.agent.items import Item
from swflows.agent.notify import Notifier, Notifiers, Target
from swflows.agent.state import StateDir

__all__ = [
    "Agent",
    "AgentConfig",
    "Collector",
    "Hook",
    "HookContext",
    "Hooks",
    "Item",
    "Notifier",
    "Notifiers",
    "RequestCollector",
    "Schedule",
    "ScriptHook",
    "StateDir",
    "Target",
    "ZaqarCollector",
]
