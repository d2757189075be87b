"""from_session's bad input: refused with the field named, nothing made."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from swflows import exceptions
from swflows.embedding import from_session, session_clients


def session() -> ks_session.Session:
    # never used to reach anything here: clients are built on first use
    return ks_session.Session(
        auth=v3.Password(
            auth_url="http://keystone.invalid/v3",
            username="svc",
            password="pw",
            project_name="p",
            user_domain_id="default",
            project_domain_id="default",
        )
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"services": ("object_store", "dns")}, "services"),
        ({"endpoint_overrides": {"queue": "http://x"}}, "endpoint_overrides"),
        ({"stack_user_domain_id": "d"}, "stack_domain_session"),
        ({"stack_domain_session": session()}, "stack_domain_session"),
    ],
)
def test_bad_clients(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(exceptions.ValidationError) as raised:
        session_clients(session(), **kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_what_the_session_offers() -> None:
    clients = session_clients(session(), services=("compute",))
    assert clients.offers("compute")
    assert not clients.offers("object_store") and not clients.offers("messaging")
    assert not clients.offers("stack_users")
    assert clients.identity_url == "http://keystone.invalid/v3"
    given = session_clients(session(), identity_url="http://agents.example/v3")
    assert given.identity_url == "http://agents.example/v3"


def test_url_and_engine_together_are_refused_before_anything_is_made(
    tmp_path: Path,
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'theirs.sqlite'}")
    with pytest.raises(exceptions.ValidationError) as raised:
        from_session(session(), f"sqlite:///{tmp_path / 'ours.sqlite'}", engine=engine)
    assert raised.value.field == "engine"
    assert not (tmp_path / "ours.sqlite").exists()
    with engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == []
    engine.dispose()


def test_an_embedders_sqlite_engine_hosts_swflows_under_its_prefix(
    tmp_path: Path,
) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'theirs.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE stack (id TEXT PRIMARY KEY)")
    sw = from_session(session(), engine=engine, table_prefix="theirs_sw_", services=())
    try:
        config = sw.create_config("c", "#!/bin/sh\n", group="script")
        assert sw.get_config(config.id).name == "c"
    finally:
        sw.close()
    with engine.connect() as conn:  # the embedder's engine stays usable
        names = set(sa.inspect(conn).get_table_names())
    assert {"stack", "theirs_sw_configs", "theirs_sw_deployments"} <= names
    engine.dispose()
