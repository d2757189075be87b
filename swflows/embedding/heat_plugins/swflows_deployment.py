"""Loaded by Heat from ``plugin_dirs``: swflows' resource types."""

from typing import Any

from swflows.embedding import heat, heat_group


def resource_mapping() -> dict[str, Any]:
    return {**heat.resource_mapping(), **heat_group.resource_mapping()}


__all__ = ["resource_mapping"]
