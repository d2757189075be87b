"""A process started while its database is down (a restart) waits for it:
opening a server store tries again ``[database] max_retries`` times."""

from __future__ import annotations

import logging
import socket
import threading

import pytest
import sqlalchemy as sa
from cryptography import fernet

from swflows import exceptions
from swflows.persistence import Store
from tests.functional import netfault
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def on_port(url: str, port: int) -> str:
    """``url`` with its ``host:port`` replaced by 127.0.0.1:``port``."""
    match = netfault.NETLOC.search(url)
    assert match is not None
    return f"{url[: match.span('host')[0]]}127.0.0.1:{port}{url[match.end() :]}"


def test_a_store_opened_while_its_database_is_down_waits_for_it(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    target = netfault.NETLOC.search(pg_url)
    assert target is not None
    relays: list[netfault.FaultProxy] = []
    came_back = threading.Event()

    def database_comes_back() -> None:
        came_back.wait(60)
        relays.append(
            netfault.FaultProxy(target["host"], int(target["port"]), "pg", port)
        )

    caplog.set_level(logging.WARNING, "swflows.persistence.database")
    thread = threading.Thread(target=database_comes_back)
    thread.start()
    try:
        # the database comes back once the store has met it down twice
        handler = logging.Handler()
        handler.emit = lambda record: (  # type: ignore[method-assign]
            came_back.set() if "trying again" in record.getMessage() else None
        )
        logging.getLogger("swflows.persistence.database").addHandler(handler)
        try:
            store = Store(
                on_port(pg_url, port),
                secret_key=fernet.Fernet.generate_key(),
                max_retries=-1,
                retry_interval=0.2,
            )
        finally:
            logging.getLogger("swflows.persistence.database").removeHandler(handler)
        try:
            assert store.list_deployments() == []
        finally:
            store.close()
    finally:
        came_back.set()
        thread.join(60)
        for relay in relays:
            relay.close()
    waits = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert waits, "the store did not say it waits for its database"
    assert f"127.0.0.1:{port}" in waits[0]
    assert "(1 of ever)" in waits[0]


def test_a_store_gives_up_after_its_retries(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "swflows.persistence.database")
    with pytest.raises((sa.exc.OperationalError, exceptions.ConcurrentUpdate)):
        Store(
            on_port(pg_url, free_port()),
            secret_key=fernet.Fernet.generate_key(),
            max_retries=2,
            retry_interval=0.1,
        )
    waits = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert [w.rpartition("(")[2] for w in waits] == ["1 of 2)", "2 of 2)"]


def test_no_retries_fails_at_once(pg_url: str) -> None:
    with pytest.raises((sa.exc.OperationalError, exceptions.ConcurrentUpdate)):
        Store(
            on_port(pg_url, free_port()),
            secret_key=fernet.Fernet.generate_key(),
            max_retries=0,
        )
