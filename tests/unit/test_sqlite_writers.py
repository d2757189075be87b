"""A SQLite file's writers of one process queue on a lock, not on SQLite's
busy handler (which sleeps and retries), and a transaction that ends in
any way gives the lock up."""

from __future__ import annotations

import pathlib
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from swflows.persistence import database

#: far below the busy timeout: a lock kept by mistake would make a writer
#: wait the whole busy timeout (30 s) before it went on
PROMPT = 10.0


def impatient_engine(path: pathlib.Path) -> sa.Engine:
    """The store's engine for a file, whose connections give up at once
    when SQLite finds the database locked (no busy handler to hide behind)."""
    engine = database.create_engine(f"sqlite:///{path / 'store.sqlite'}")

    @event.listens_for(engine, "connect")
    def _no_busy_timeout(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout=0")

    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE counter (n INTEGER)")
        conn.exec_driver_sql("INSERT INTO counter VALUES (0)")
    return engine


def bump(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        n = conn.exec_driver_sql("SELECT n FROM counter").scalar_one()
        conn.exec_driver_sql("UPDATE counter SET n = ?", (n + 1,))


def count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT n FROM counter").scalar_one())


def in_thread(fn: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_a_writer_waits_for_the_one_writing_instead_of_failing(
    tmp_path: pathlib.Path,
) -> None:
    engine = impatient_engine(tmp_path)
    writing = threading.Event()
    release = threading.Event()

    def long_write() -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE counter SET n = n + 1")
            writing.set()
            assert release.wait(PROMPT)

    holder, holder_errors = in_thread(long_write)
    assert writing.wait(PROMPT)
    # with no busy timeout, SQLite would answer "database is locked" at once
    waiter, waiter_errors = in_thread(lambda: bump(engine))
    time.sleep(0.2)
    assert waiter.is_alive(), "the second writer did not wait for the first"
    release.set()
    holder.join(PROMPT)
    waiter.join(PROMPT)
    assert not holder_errors and not waiter_errors, holder_errors + waiter_errors
    assert count(engine) == 2


def test_many_threads_write_without_a_lock_error(tmp_path: pathlib.Path) -> None:
    engine = impatient_engine(tmp_path)

    def writes() -> None:
        for _ in range(25):
            bump(engine)

    started = [in_thread(writes) for _ in range(8)]
    for thread, _ in started:
        thread.join(60)
    errors = [e for _, errs in started for e in errs]
    assert not errors, errors[0]
    assert count(engine) == 200


def test_a_rolled_back_write_gives_the_lock_up(tmp_path: pathlib.Path) -> None:
    engine = impatient_engine(tmp_path)
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.exec_driver_sql("UPDATE counter SET n = n + 1")
        raise RuntimeError("the write's own error")
    started = time.monotonic()
    thread, errors = in_thread(lambda: bump(engine))
    thread.join(60)
    assert not errors, errors
    assert time.monotonic() - started < PROMPT
    assert count(engine) == 1


def test_a_failed_begin_gives_the_lock_up(tmp_path: pathlib.Path) -> None:
    """Another process holds the database: the BEGIN fails (no busy
    timeout), and this process's next writer is not kept waiting."""
    engine = impatient_engine(tmp_path)
    other = sa.create_engine(f"sqlite:///{tmp_path / 'store.sqlite'}")
    with other.connect() as outside:
        outside.exec_driver_sql("BEGIN IMMEDIATE")
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            bump(engine)
        outside.exec_driver_sql("ROLLBACK")
    started = time.monotonic()
    thread, errors = in_thread(lambda: bump(engine))
    thread.join(60)
    assert not errors, errors
    assert time.monotonic() - started < PROMPT
    assert count(engine) == 1


def test_a_connection_lost_mid_write_gives_the_lock_up(tmp_path: pathlib.Path) -> None:
    engine = impatient_engine(tmp_path)
    with engine.connect() as conn:
        transaction = conn.begin()
        conn.exec_driver_sql("UPDATE counter SET n = n + 1")
        conn.invalidate()  # as SQLAlchemy does when the connection is lost
        transaction.rollback()
    started = time.monotonic()
    thread, errors = in_thread(lambda: bump(engine))
    thread.join(60)
    assert not errors, errors
    assert time.monotonic() - started < PROMPT
    assert count(engine) == 1
