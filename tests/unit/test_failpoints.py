"""Failpoints: armed, fired, counted, read from the environment."""

from __future__ import annotations

import threading
import time

import pytest

from swflows import failpoints


def test_an_unarmed_point_does_nothing_but_count() -> None:
    before = failpoints.hits("unit.nothing")
    failpoints.hit("unit.nothing")
    assert failpoints.hits("unit.nothing") == before + 1


def test_fail_times_raises_then_lets_through() -> None:
    with failpoints.armed("unit.twice", failpoints.fail_times(2)):
        for _ in range(2):
            with pytest.raises(failpoints.FailpointError, match=r"unit\.twice"):
                failpoints.hit("unit.twice")
        failpoints.hit("unit.twice")
    failpoints.hit("unit.twice")


def test_fail_raises_the_given_error_until_disarmed() -> None:
    with failpoints.armed("unit.always", failpoints.fail(lambda: KeyError("x"))):
        for _ in range(3):
            with pytest.raises(KeyError):
                failpoints.hit("unit.always")
    failpoints.hit("unit.always")


def test_stall_blocks_until_released() -> None:
    release = threading.Event()
    done = threading.Event()

    def run() -> None:
        failpoints.hit("unit.stall")
        done.set()

    with failpoints.armed("unit.stall", failpoints.stall(until=release)):
        thread = threading.Thread(target=run)
        thread.start()
        assert not done.wait(0.2)
        release.set()
        assert done.wait(5)
        thread.join()


def test_parse_reads_the_environment_syntax() -> None:
    points = failpoints.parse("a.b=fail:1; c=stall:0.01")
    with pytest.raises(failpoints.FailpointError):
        points["a.b"]("a.b")
    points["a.b"]("a.b")
    started = time.monotonic()
    points["c"]("c")
    assert time.monotonic() - started >= 0.01


@pytest.mark.parametrize("spec", ["nope", "x=explode", "x=fail:two", "=fail"])
def test_parse_names_a_bad_entry(spec: str) -> None:
    with pytest.raises(ValueError, match="SWFLOWS_FAILPOINTS: bad entry"):
        failpoints.parse(spec)
