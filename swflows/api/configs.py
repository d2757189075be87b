"""The facade's software configs: create, read, list, delete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swflows import model
from swflows.api.base import Base


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
    ) -> model.Config:
        built = model.Config.create(
            name, config, group=group, inputs=inputs, outputs=outputs, options=options
        )
        return self.store.create_config(built)  # type: ignore[no-any-return]

    def get_config(self, config_id: str) -> model.Config:
        return self.store.get_config(config_id)  # type: ignore[no-any-return]

    def list_configs(self, **kwargs: Any) -> list[model.Config]:
        return self.store.list_configs(**kwargs)  # type: ignore[no-any-return]

    def delete_config(self, config_id: str) -> None:
        self.store.delete_config(config_id)
