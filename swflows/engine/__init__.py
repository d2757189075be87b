"""The runner and its signal watcher (see :mod:`swflows.engine.runner`)."""

from swflows.engine.runner import META_KEY, Runner, parks_after
from swflows.engine.watcher import Watcher

__all__ = ["META_KEY", "Runner", "Watcher", "parks_after"]
