"""Loaded by Heat from ``plugin_dirs``: swflows' resource types; each
heat-engine worker forked after it makes its swflows as it starts."""

from typing import Any

from swflows.embedding import heat, heat_group

heat.start_with_workers()


def resource_mapping() -> dict[str, Any]:
    return {**heat.resource_mapping(), **heat_group.resource_mapping()}


__all__ = ["resource_mapping"]
