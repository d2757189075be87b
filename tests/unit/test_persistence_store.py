"""The store's API rules, backend-agnostic.

:class:`StoreContract` runs here on in-memory SQLite, and in
``tests/functional/test_store.py`` on a SQLite file and on PostgreSQL: every
test uses only the ``store`` fixture and the store's own engine.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from swflows import exceptions, model, states
from swflows.persistence import ServerMetadata, Store

PASSWORD = "s3cr3t-Pa55w0rd-never-in-clear"
T0 = dt.datetime(2026, 1, 2, 3, 4, 5)


def source_config(name: str = "source", **kw: Any) -> model.Config:
    kw.setdefault("inputs", [{"name": "foo", "default": "bar"}])
    kw.setdefault("outputs", [{"name": "result"}])
    return model.Config.create(name, "#!/bin/sh\necho hi\n", **kw)


def derived_config(
    name: str = "derived", *, password: str | None = PASSWORD, **kw: Any
) -> model.Config:
    inputs: list[dict[str, Any]] = [
        {"name": "foo", "value": "baz"},
        {"name": "deploy_server_id", "value": "srv"},
        {"name": "deploy_action", "value": "CREATE"},
    ]
    if password is not None:
        inputs.append({"name": "deploy_password", "value": password})
    return model.Config.create(
        name,
        "#!/bin/sh\necho hi\n",
        inputs=inputs,
        outputs=[{"name": "result", "error_output": False}],
        options={"timeout": 5},
        **kw,
    )


def deployment(
    server_id: str = "srv",
    config_id: str | None = None,
    source_config_id: str | None = None,
    **kw: Any,
) -> model.Deployment:
    kw.setdefault("id", model.new_id())
    kw.setdefault("action", "CREATE")
    kw.setdefault("status", states.IN_PROGRESS)
    return model.Deployment(
        server_id=server_id,
        config_id=config_id,
        source_config_id=source_config_id,
        **kw,
    )


def input_of(config: model.Config, name: str) -> model.InputSpec:
    """The config's input ``name``, which it must have."""
    spec = config.input(name)
    assert spec is not None, name
    return spec


def raw_rows(store: Store, table: sa.Table) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(sa.select(table))]


def raw_text(store: Store, table: sa.Table) -> str:
    """Every value of every row, as the database returns it, in one string."""
    return json.dumps(raw_rows(store, table), default=str)


class StoreContract:
    """API rules every backend must keep (uses the ``store`` fixture)."""

    # -- configs -----------------------------------------------------------

    def test_config_round_trip(self, store: Store) -> None:
        config = source_config(options={"a": [1, 2]})
        assert store.create_config(config) == config
        assert store.get_config(config.id) == config

    def test_component_config_round_trip(self, store: Store) -> None:
        config = model.Config.create(
            "comp",
            {"configs": [{"actions": ["BACKUP"], "config": "x", "tool": "script"}]},
            group=model.COMPONENT,
        )
        store.create_config(config)
        assert store.get_config(config.id) == config

    def test_configs_are_immutable(self, store: Store) -> None:
        public = {name for name in dir(Store) if not name.startswith("_")}
        assert not {n for n in public if "config" in n and n.startswith("update")}
        assert {n for n in public if n.startswith("update")} == {"update_deployment"}

    def test_create_config_again_is_idempotent(self, store: Store) -> None:
        config = source_config(creation_time=T0)
        first = store.create_config(config)
        again = model.Config.from_dict({**config.to_dict(), "creation_time": None})
        assert again.creation_time != T0
        assert store.create_config(again) == first
        assert first.creation_time == T0
        assert len(store.list_configs()) == 1

    def test_create_config_same_id_other_content_refused(self, store: Store) -> None:
        config = source_config()
        store.create_config(config)
        other = model.Config.create("other", "echo", id=config.id)
        with pytest.raises(exceptions.ValidationError) as err:
            store.create_config(other)
        assert err.value.field == "id"
        with pytest.raises(exceptions.ValidationError):
            store.create_config(config, derived=True)
        assert store.get_config(config.id) == config

    def test_get_unknown_config(self, store: Store) -> None:
        with pytest.raises(exceptions.ConfigNotFound) as err:
            store.get_config("nope")
        assert isinstance(err.value, LookupError)
        assert err.value.ident == "nope"

    def test_config_id_too_long(self, store: Store) -> None:
        with pytest.raises(exceptions.ValidationError) as err:
            store.create_config(source_config(id="x" * 37))
        assert err.value.field == "id"

    def test_list_configs_order_and_pages(self, store: Store) -> None:
        later = T0 + dt.timedelta(seconds=1)
        made = [
            store.create_config(
                source_config(f"c{i}", id=f"id-{9 - i}", creation_time=t)
            )
            for i, t in enumerate([later, T0, T0, later, T0, T0, later])
        ]
        expected = sorted(made, key=lambda c: (c.creation_time, c.id))
        assert [c.id for c in store.list_configs()] == [c.id for c in expected]
        pages: list[list[str]] = []
        marker = None
        while True:
            page = store.list_configs(limit=3, marker=marker)
            if not page:
                break
            pages.append([c.id for c in page])
            marker = page[-1].id
        assert [len(p) for p in pages] == [3, 3, 1]
        assert list(itertools.chain(*pages)) == [c.id for c in expected]
        assert store.list_configs(limit=0) == []

    def test_list_configs_derived_only_on_request(self, store: Store) -> None:
        source = store.create_config(source_config(creation_time=T0))
        derived = store.create_config(derived_config(creation_time=T0), derived=True)
        assert [c.id for c in store.list_configs()] == [source.id]
        listed = store.list_configs(include_derived=True)
        assert {c.id for c in listed} == {source.id, derived.id}

    def test_list_configs_unknown_marker(self, store: Store) -> None:
        with pytest.raises(exceptions.ConfigNotFound):
            store.list_configs(marker="nope")

    @pytest.mark.parametrize("limit", [-1, "3", True])
    def test_list_bad_limit(self, store: Store, limit: Any) -> None:
        with pytest.raises(exceptions.ValidationError) as err:
            store.list_configs(limit=limit)
        assert err.value.field == "limit"

    def test_delete_config(self, store: Store) -> None:
        config = store.create_config(source_config())
        store.delete_config(config.id)
        with pytest.raises(exceptions.ConfigNotFound):
            store.get_config(config.id)
        with pytest.raises(exceptions.ConfigNotFound):
            store.delete_config(config.id)

    @pytest.mark.parametrize("field", ["config_id", "source_config_id"])
    def test_delete_config_in_use(self, store: Store, field: str) -> None:
        config = store.create_config(source_config())
        dep = store.create_deployment(deployment(**{field: config.id}))
        with pytest.raises(exceptions.ConfigInUse) as err:
            store.delete_config(config.id)
        assert err.value.deployment_ids == [dep.id]
        assert store.get_config(config.id) == config
        store.delete_deployment(dep.id)
        store.delete_config(config.id)

    # -- deployments -------------------------------------------------------

    def test_deployment_round_trip(self, store: Store) -> None:
        source = store.create_config(source_config())
        derived = store.create_config(derived_config(), derived=True)
        dep = deployment(
            config_id=derived.id,
            source_config_id=source.id,
            status_reason="Deploy data available",
            reason={"kind": "x", "n": 1},
            input_values={"foo": "baz", "n": [1, {"a": None}]},
            output_values={"result": "ok"},
            signal_transport="TEMP_URL_SIGNAL",
            name="my-deployment",
            actions=("CREATE", "BACKUP"),
            generation=3,
            timeout=600,
            parent_id=model.new_id(),
            creation_time=T0,
        )
        stored = store.create_deployment(dep)
        assert stored == dep
        assert store.get_deployment(dep.id) == dep
        assert store.get_deployment(dep.id).actions == ("CREATE", "BACKUP")

    def test_deployment_defaults_round_trip(self, store: Store) -> None:
        stored = store.create_deployment(deployment())
        got = store.get_deployment(stored.id)
        assert got == stored
        assert got.reason is None and got.timeout is None and got.config_id is None
        assert got.creation_time is not None and got.updated_time is None

    @pytest.mark.parametrize("field", ["config_id", "source_config_id"])
    def test_create_deployment_unknown_config_writes_nothing(
        self, store: Store, field: str
    ) -> None:
        dep = deployment(server_id="lonely", **{field: "missing"})
        with pytest.raises(exceptions.ConfigNotFound) as err:
            store.create_deployment(dep)
        assert err.value.field == field
        assert err.value.ident == "missing"
        assert field in str(err.value)
        assert raw_rows(store, store.tables.deployments) == []
        assert raw_rows(store, store.tables.servers) == []
        with pytest.raises(exceptions.ServerNotFound):
            store.get_server("lonely")

    def test_create_deployment_in_terminal_status_refused(self, store: Store) -> None:
        with pytest.raises(exceptions.InvalidTransition):
            store.create_deployment(deployment(status=states.FAILED))
        assert raw_rows(store, store.tables.deployments) == []
        assert raw_rows(store, store.tables.servers) == []

    def test_create_deployment_complete_is_allowed(self, store: Store) -> None:
        dep = store.create_deployment(deployment(status=states.COMPLETE))
        assert store.get_deployment(dep.id).status == states.COMPLETE

    def test_create_deployment_again_is_idempotent(self, store: Store) -> None:
        dep = deployment(input_values={"deploy_password": PASSWORD})
        first = store.create_deployment(dep)
        assert store.create_deployment(dep) == first
        assert store.get_server("srv").metadata_version == 1
        changed = deployment(id=dep.id, action="UPDATE")
        with pytest.raises(exceptions.ValidationError) as err:
            store.create_deployment(changed)
        assert err.value.field == "id"

    def test_get_unknown_deployment(self, store: Store) -> None:
        with pytest.raises(exceptions.DeploymentNotFound):
            store.get_deployment("nope")
        with pytest.raises(exceptions.DeploymentNotFound):
            store.update_deployment("nope", status=states.COMPLETE)

    def test_update_deployment(self, store: Store) -> None:
        dep = store.create_deployment(deployment())
        updated = store.update_deployment(
            dep.id,
            status=states.COMPLETE,
            status_reason="Outputs received",
            reason={"kind": "outputs_received"},
            output_values={"deploy_stdout": "hi", "deploy_status_code": 0},
            actions=["CREATE"],
            generation=1,
        )
        assert updated.status == states.COMPLETE
        assert updated.actions == ("CREATE",)
        assert updated.updated_time is not None
        assert store.get_deployment(dep.id) == updated
        rows = raw_rows(store, store.tables.deployments)
        assert rows[0]["version"] == 2

    @pytest.mark.parametrize(
        ("field", "value"),
        [("server_id", "other"), ("id", "x"), ("creation_time", T0), ("bogus", 1)],
    )
    def test_update_refuses_fixed_or_unknown_fields(
        self, store: Store, field: str, value: Any
    ) -> None:
        dep = store.create_deployment(deployment())
        with pytest.raises(exceptions.ValidationError) as err:
            store.update_deployment(dep.id, **{field: value})
        assert err.value.field == field
        assert store.get_deployment(dep.id) == dep

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("status", "DONE"),
            ("generation", -1),
            ("timeout", "10"),
            ("output_values", [1]),
            ("input_values", "x"),
            ("actions", "CREATE"),
        ],
    )
    def test_update_validates_values(
        self, store: Store, field: str, value: Any
    ) -> None:
        dep = store.create_deployment(deployment())
        with pytest.raises(exceptions.ValidationError):
            store.update_deployment(dep.id, **{field: value})
        assert store.get_deployment(dep.id) == dep

    def test_update_refuses_forbidden_transition(self, store: Store) -> None:
        dep = store.create_deployment(deployment())
        store.update_deployment(dep.id, status=states.COMPLETE)
        with pytest.raises(exceptions.InvalidTransition) as err:
            store.update_deployment(dep.id, status=states.FAILED, action="X")
        assert err.value.current == states.COMPLETE and err.value.new == states.FAILED
        # nothing of the refused update was written
        again = store.update_deployment(dep.id, status=states.IN_PROGRESS)
        assert again.action == "CREATE"
        # the same status again is not a change
        assert store.update_deployment(dep.id, status=states.IN_PROGRESS).status == (
            states.IN_PROGRESS
        )

    def test_update_expected_status_and_generation(self, store: Store) -> None:
        dep = store.create_deployment(deployment(generation=2))
        with pytest.raises(exceptions.ConcurrentUpdate) as err:
            store.update_deployment(
                dep.id, expected_status=states.COMPLETE, status=states.FAILED
            )
        assert err.value.retryable
        assert err.value.fields["status"] == states.IN_PROGRESS
        assert err.value.fields["generation"] == 2
        with pytest.raises(exceptions.ConcurrentUpdate) as err:
            store.update_deployment(
                dep.id,
                expected_status=states.IN_PROGRESS,
                expected_generation=1,
                status=states.FAILED,
            )
        assert err.value.fields["generation"] == 2
        assert store.get_deployment(dep.id) == dep
        done = store.update_deployment(
            dep.id,
            expected_status=states.IN_PROGRESS,
            expected_generation=2,
            status=states.COMPLETE,
            generation=3,
        )
        assert (done.status, done.generation) == (states.COMPLETE, 3)

    def test_config_change_bumps_metadata_version(self, store: Store) -> None:
        one = store.create_config(derived_config("one"), derived=True)
        two = store.create_config(derived_config("two"), derived=True)
        dep = store.create_deployment(deployment(config_id=one.id))
        assert store.get_server("srv").metadata_version == 1
        store.update_deployment(dep.id, status=states.COMPLETE)
        store.update_deployment(dep.id, config_id=one.id)
        assert store.get_server("srv").metadata_version == 1
        store.update_deployment(dep.id, config_id=two.id)
        assert store.get_server("srv").metadata_version == 2
        store.update_deployment(dep.id, config_id=None)
        assert store.get_server("srv").metadata_version == 3

    def test_update_to_unknown_config_writes_nothing(self, store: Store) -> None:
        one = store.create_config(derived_config("one"), derived=True)
        dep = store.create_deployment(deployment(config_id=one.id))
        with pytest.raises(exceptions.ConfigNotFound) as err:
            store.update_deployment(dep.id, config_id="missing", status=states.FAILED)
        assert err.value.field == "config_id"
        assert store.get_deployment(dep.id) == dep
        assert store.get_server("srv").metadata_version == 1

    def test_list_deployments(self, store: Store) -> None:
        parent = model.new_id()
        a = store.create_deployment(deployment("s1", id="b", creation_time=T0))
        b = store.create_deployment(
            deployment("s2", id="a", creation_time=T0, parent_id=parent)
        )
        c = store.create_deployment(
            deployment("s1", creation_time=T0 - dt.timedelta(seconds=5))
        )
        store.update_deployment(a.id, status=states.COMPLETE)
        assert [d.id for d in store.list_deployments()] == [c.id, b.id, a.id]
        assert [d.id for d in store.list_deployments(server_id="s1")] == [c.id, a.id]
        assert [d.id for d in store.list_deployments(status=states.COMPLETE)] == [a.id]
        assert [d.id for d in store.list_deployments(parent_id=parent)] == [b.id]
        assert [d.id for d in store.list_deployments(limit=2)] == [c.id, b.id]
        assert store.list_deployments(server_id="s1", status=states.FAILED) == []

    def test_delete_deployment(self, store: Store) -> None:
        dep = store.create_deployment(deployment())
        store.delete_deployment(dep.id)
        assert store.get_server("srv").metadata_version == 2
        with pytest.raises(exceptions.DeploymentNotFound):
            store.get_deployment(dep.id)
        with pytest.raises(exceptions.DeploymentNotFound):
            store.delete_deployment(dep.id)
        store.delete_deployment(dep.id, missing_ok=True)
        assert store.get_server("srv").metadata_version == 2

    # -- server metadata -----------------------------------------------------

    def test_metadata_sorted_by_name_ties_by_creation(self, store: Store) -> None:
        # config ids sort against creation order, so ties must use creation
        names = ["b", "a", "b", "c", "a", "b"]
        ids = [f"{9 - i}-derived" for i in range(len(names))]
        deps = []
        for i, (name, config_id) in enumerate(zip(names, ids, strict=True)):
            config = store.create_config(
                derived_config(name, id=config_id, creation_time=T0), derived=True
            )
            deps.append(
                store.create_deployment(
                    deployment(config_id=config.id, id=f"{i}-dep", creation_time=T0)
                )
            )
        store.create_deployment(deployment(config_id=None))  # skipped
        metadata = store.server_metadata("srv")
        assert [item["id"] for item in metadata.deployments] == [
            ids[1],
            ids[4],
            ids[0],
            ids[2],
            ids[5],
            ids[3],
        ]
        assert metadata.version == len(names) + 1

    def test_metadata_item_is_heats_shape(self, store: Store) -> None:
        config = store.create_config(derived_config("only"), derived=True)
        dep = store.create_deployment(deployment(config_id=config.id))
        metadata = store.server_metadata("srv")
        assert isinstance(metadata, ServerMetadata)
        assert metadata.server_id == "srv"
        [item] = metadata.deployments
        assert item == config.to_dict()
        assert item["id"] == config.id != dep.id
        assert list(item) == [
            "id",
            "name",
            "group",
            "creation_time",
            "config",
            "inputs",
            "outputs",
            "options",
        ]
        assert item["creation_time"] == model.isotime(config.creation_time)
        assert {"name": "deploy_password", "type": "String", "value": PASSWORD} in (
            item["inputs"]
        )
        assert item["outputs"] == [
            {"name": "result", "type": "String", "error_output": False}
        ]
        json.dumps(item)  # the document is plain JSON

    def test_metadata_of_unknown_server(self, store: Store) -> None:
        assert store.server_metadata("ghost") == ServerMetadata("ghost", 0, [])

    def test_metadata_follows_writes(self, store: Store) -> None:
        one = store.create_config(derived_config("one"), derived=True)
        two = store.create_config(derived_config("two"), derived=True)
        dep = store.create_deployment(deployment(config_id=one.id))
        other = store.create_deployment(deployment("other", config_id=one.id))
        store.update_deployment(dep.id, config_id=two.id)
        metadata = store.server_metadata("srv")
        assert [i["id"] for i in metadata.deployments] == [two.id]
        assert metadata.version == 2
        store.delete_deployment(dep.id)
        assert store.server_metadata("srv") == ServerMetadata("srv", 3, [])
        assert store.server_metadata("other").deployments[0]["id"] == one.id
        assert other.server_id == "other"

    def test_cancelled_action_leaves_the_metadata(self, store: Store) -> None:
        """A cancel withdraws the derived config (and bumps the version, so
        it is published again); the next action brings the server a config
        again; other failures stay, as in Heat."""
        one = store.create_config(derived_config("one"), derived=True)
        two = store.create_config(derived_config("two"), derived=True)
        kept = store.create_config(derived_config("kept"), derived=True)
        dep = store.create_deployment(deployment(config_id=one.id))
        failed = store.create_deployment(deployment(config_id=kept.id))
        store.update_deployment(
            failed.id,
            status=states.FAILED,
            reason={"kind": states.ReasonKind.EXIT_CODE.value},
        )
        assert store.server_metadata("srv").version == 2
        store.update_deployment(
            dep.id,
            expected_status=states.IN_PROGRESS,
            status=states.FAILED,
            status_reason="Deployment cancelled.",
            reason={"kind": states.ReasonKind.CANCELLED.value, "by": None},
        )
        metadata = store.server_metadata("srv")
        assert [i["id"] for i in metadata.deployments] == [kept.id]
        assert metadata.version == 3
        store.update_deployment(dep.id, status_reason="still cancelled")
        assert store.server_metadata("srv").version == 3
        store.update_deployment(
            dep.id, status=states.IN_PROGRESS, reason=None, config_id=two.id
        )
        metadata = store.server_metadata("srv")
        assert [i["id"] for i in metadata.deployments] == [kept.id, two.id]
        assert metadata.version == 4

    # -- publishing ----------------------------------------------------------

    def test_mark_published_is_compare_and_swap(self, store: Store) -> None:
        assert not store.mark_published("srv", 1)  # unknown server
        dep = store.create_deployment(deployment())
        store.create_deployment(deployment())
        assert store.get_server("srv").metadata_version == 2
        assert not store.mark_published("srv", 1)  # stale
        assert not store.mark_published("srv", 3)  # not reached yet
        assert store.mark_published("srv", 2)
        assert store.get_server("srv").published_version == 2
        assert not store.mark_published("srv", 2)  # already
        store.delete_deployment(dep.id)
        assert store.mark_published("srv", 3)
        assert store.get_server("srv").published_version == 3

    def test_publish_repeats_when_a_write_lands_meanwhile(self, store: Store) -> None:
        config = store.create_config(derived_config(), derived=True)
        store.create_deployment(deployment(config_id=config.id))
        published: list[ServerMetadata] = []

        def put(metadata: ServerMetadata) -> None:
            published.append(metadata)
            if len(published) == 1:  # a write lands while the PUT is in flight
                store.create_deployment(deployment(config_id=config.id))

        last = store.publish("srv", put)
        assert [m.version for m in published] == [1, 2]
        assert last == published[-1] == store.server_metadata("srv")
        assert store.get_server("srv").published_version == 2

    def test_publish_stops_when_someone_else_confirmed(self, store: Store) -> None:
        store.create_deployment(deployment())
        calls: list[int] = []

        def put(metadata: ServerMetadata) -> None:
            calls.append(metadata.version)
            store.mark_published("srv", metadata.version)  # another publisher

        assert store.publish("srv", put).version == 1
        assert calls == [1]

    # -- servers and secrets ---------------------------------------------------

    def test_server_channel_encrypted(self, store: Store) -> None:
        channel = {"user_id": "u", "password": PASSWORD, "queue_id": "q"}
        record = store.set_server_channel("srv", "ZAQAR_MESSAGE", channel)
        assert record.channel == channel
        assert record.config_transport == "ZAQAR_MESSAGE"
        assert record.metadata_version == 0
        assert PASSWORD not in raw_text(store, store.tables.servers)
        assert PASSWORD not in repr(record)
        assert store.get_server("srv").channel == channel
        assert [s.server_id for s in store.list_servers()] == ["srv"]

    def test_new_channel_resets_published_version(self, store: Store) -> None:
        store.create_deployment(deployment())
        store.set_server_channel("srv", "POLL_TEMP_URL", {"put_url": "a"})
        assert store.mark_published("srv", 1)
        same = store.set_server_channel("srv", "POLL_TEMP_URL", {"put_url": "a"})
        assert same.published_version == 1
        moved = store.set_server_channel("srv", "POLL_TEMP_URL", {"put_url": "b"})
        assert moved.published_version == 0
        assert store.mark_published("srv", 1)
        cleared = store.set_server_channel("srv", None, None)
        assert (cleared.channel, cleared.published_version) == (None, 0)

    def test_secret_inputs_encrypted_at_rest(self, store: Store) -> None:
        source = store.create_config(
            source_config(
                inputs=[{"name": "deploy_password", "default": PASSWORD + "-default"}]
            )
        )
        derived = store.create_config(derived_config(), derived=True)
        dep = store.create_deployment(
            deployment(
                config_id=derived.id,
                source_config_id=source.id,
                input_values={"deploy_password": PASSWORD, "foo": "visible"},
            )
        )
        configs = raw_text(store, store.tables.configs)
        deployments = raw_text(store, store.tables.deployments)
        assert PASSWORD not in configs and PASSWORD not in deployments
        assert "visible" in deployments and "baz" in configs  # others stay clear
        assert (
            input_of(store.get_config(derived.id), "deploy_password").value == PASSWORD
        )
        assert input_of(store.get_config(source.id), "deploy_password").default == (
            PASSWORD + "-default"
        )
        assert store.get_deployment(dep.id).input_values["deploy_password"] == PASSWORD
        [item] = store.server_metadata("srv").deployments
        assert {"name": "deploy_password", "type": "String", "value": PASSWORD} in (
            item["inputs"]
        )

    def test_signal_url_encrypted_at_rest(self, store: Store) -> None:
        # a TempURL's signature lets whoever holds it forge the signal
        url = "http://swift/v1/AUTH_x/c/o?temp_url_sig=0123456789abcdef&x=1"
        config = store.create_config(
            model.Config.create(
                "d", "", inputs=[{"name": "deploy_signal_id", "value": url}]
            ),
            derived=True,
        )
        assert "0123456789abcdef" not in raw_text(store, store.tables.configs)
        assert input_of(store.get_config(config.id), "deploy_signal_id").value == url

    def test_values_shaped_like_sealed_ones_round_trip(self, store: Store) -> None:
        lookalike = {"$swflows_secret": "not a token"}
        config = store.create_config(
            model.Config.create(
                "json", "", inputs=[{"name": "j", "type": "Json", "value": lookalike}]
            )
        )
        assert input_of(store.get_config(config.id), "j").value == lookalike
        dep = store.create_deployment(deployment(input_values={"x": lookalike}))
        assert store.get_deployment(dep.id).input_values == {"x": lookalike}


class TestStore(StoreContract):
    """The contract on in-memory SQLite."""

    @pytest.fixture
    def store(self) -> Iterator[Store]:
        with Store("sqlite://") as store:
            yield store
