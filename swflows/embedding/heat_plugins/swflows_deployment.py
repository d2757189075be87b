"""Loaded by Heat from ``plugin_dirs``: swflows' resource type."""

from swflows.embedding.heat import resource_mapping

__all__ = ["resource_mapping"]
