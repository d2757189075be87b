"""The facade's software configs: create, read, list, delete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from swflows import model, projects
from swflows.api.base import Base

if TYPE_CHECKING:
    from oslo_context.context import RequestContext


class Configs(Base):
    """Software configs, stored as they are given (immutable once made)."""

    def create_config(
        self,
        name: str,
        config: Any = "",
        *,
        group: str | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
        config_id: str | None = None,
        context: RequestContext | None = None,
    ) -> model.Config:
        """Store a new config; with ``context``, owned by its project.

        ``config_id``: the id to store it under (default: a new one), e.g.
        the id of the embedder's own copy; creating the same id with the
        same content again returns the stored config, other content is
        refused (configs are immutable).
        """
        self._allow(context, "swflows:config:create")
        model.check_name("name", name)
        built = model.Config.create(
            name,
            config,
            group=group,
            inputs=inputs,
            outputs=outputs,
            options=options,
            id=config_id,
        )
        self._own(context, projects.CONFIG, built.id)
        return self.store.create_config(built)  # type: ignore[no-any-return]

    def get_config(
        self, config_id: str, *, context: RequestContext | None = None
    ) -> model.Config:
        found: model.Config = self.store.get_config(config_id)
        self._visible(context, projects.CONFIG, config_id, "swflows:config:show")
        return found

    def list_configs(
        self,
        *,
        context: RequestContext | None = None,
        all_projects: bool = False,
        **kwargs: Any,
    ) -> list[model.Config]:
        """Configs (with ``context``, its project's unless ``all_projects``)."""
        self._allow(context, "swflows:config:list")
        listing = self._listing(context, all_projects)
        found: list[model.Config] = self.store.list_configs(**kwargs, **listing)
        return found

    def delete_config(
        self, config_id: str, *, context: RequestContext | None = None
    ) -> None:
        self.store.get_config(config_id)
        self._visible(context, projects.CONFIG, config_id, "swflows:config:delete")
        self.store.delete_config(config_id)
