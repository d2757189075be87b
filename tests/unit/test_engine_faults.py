"""Outage or the data's own fault: how a failure in a shared loop is judged."""

from __future__ import annotations

import psycopg2
import pytest
import sqlalchemy as sa
from taskflow import exceptions as tf_exc

from swflows import exceptions
from swflows.engine import faults


def wrapped(orig: BaseException, kind: type[sa.exc.DBAPIError]) -> BaseException:
    return kind("UPDATE deployments SET x=%(x)s", {"x": "secret"}, orig)


def raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as exc:
        return exc


OUTAGES = [
    wrapped(
        psycopg2.OperationalError("could not connect to server"),
        sa.exc.OperationalError,
    ),
    wrapped(
        psycopg2.InterfaceError("connection already closed"), sa.exc.InterfaceError
    ),
    psycopg2.OperationalError("server closed the connection unexpectedly"),
    sa.exc.TimeoutError("QueuePool limit reached"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError("timed out"),
    exceptions.ConcurrentUpdate("the database stayed busy", operation="x"),
    exceptions.CloudError("object_store", "503", retryable=True),
    raised_from(
        tf_exc.StorageFailure("Failed saving atom details"),
        wrapped(
            psycopg2.OperationalError("terminating connection"), sa.exc.OperationalError
        ),
    ),
    raised_from(
        exceptions.SwflowsError("could not record"), ConnectionResetError("reset")
    ),
]

DATA = [
    ValueError("A string literal cannot contain NUL (0x00) characters."),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
    wrapped(psycopg2.DataError("invalid input syntax for type json"), sa.exc.DataError),
    wrapped(Exception("duplicate key"), sa.exc.IntegrityError),
    KeyError("generation"),
    TypeError("int() argument must be a string"),
    exceptions.ValidationError("reason", "must be a mapping"),
    tf_exc.StorageFailure("Failed saving atom details"),
    raised_from(
        tf_exc.StorageFailure("Failed saving"),
        wrapped(psycopg2.DataError("bad"), sa.exc.DataError),
    ),
]


@pytest.mark.parametrize("exc", OUTAGES, ids=lambda e: type(e).__name__)
def test_outages(exc: BaseException) -> None:
    assert faults.classify(exc) == faults.OUTAGE
    assert faults.is_outage(exc)


@pytest.mark.parametrize("exc", DATA, ids=lambda e: type(e).__name__)
def test_data_faults(exc: BaseException) -> None:
    assert faults.classify(exc) == faults.DATA
    assert not faults.is_outage(exc)


def test_an_invalidated_connection_is_an_outage() -> None:
    exc = sa.exc.DBAPIError(
        "SELECT 1", {}, Exception("gone"), connection_invalidated=True
    )
    assert faults.is_outage(exc)


def test_describe_is_one_short_line_without_the_statement() -> None:
    exc = wrapped(psycopg2.DataError("bad value\nDETAIL: more"), sa.exc.DataError)
    text = faults.describe(exc)
    assert text.startswith("DataError: (psycopg2.DataError) bad value")
    assert "\n" not in text and "secret" not in text and "UPDATE" not in text
    assert faults.describe(ValueError("x" * 1000)).endswith("...")
    assert len(faults.describe(ValueError("x" * 1000))) == faults.DESCRIBE_CHARS
    assert faults.describe(KeyError()) == "KeyError"


def test_a_cycle_in_the_chain_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert faults.classify(first) == faults.DATA
