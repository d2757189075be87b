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


class SaysItWaits(logging.Handler):
    """Sets ``event`` when the store says it tries again."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "trying again" in record.getMessage():
            self.event.set()


def test_a_store_opened_while_its_database_is_down_waits_for_it(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    relays: list[netfault.FaultProxy] = []
    met_down = threading.Event()

    def database_comes_back() -> None:
        met_down.wait(60)
        relays.append(netfault.FaultProxy(*netfault.address(pg_url), "pg", port))

    caplog.set_level(logging.WARNING, "swflows.persistence.database")
    thread = threading.Thread(target=database_comes_back)
    thread.start()
    try:
        # the database comes back once the store has met it down
        handler = SaysItWaits(met_down)
        logging.getLogger("swflows.persistence.database").addHandler(handler)
        try:
            store = Store(
                netfault.on_port(pg_url, port),
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
        met_down.set()
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
            netfault.on_port(pg_url, free_port()),
            secret_key=fernet.Fernet.generate_key(),
            max_retries=2,
            retry_interval=0.1,
        )
    waits = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert [w.rpartition("(")[2] for w in waits] == ["1 of 2)", "2 of 2)"]


def test_no_retries_fails_at_once(pg_url: str) -> None:
    with pytest.raises((sa.exc.OperationalError, exceptions.ConcurrentUpdate)):
        Store(
            netfault.on_port(pg_url, free_port()),
            secret_key=fernet.Fernet.generate_key(),
            max_retries=0,
        )
