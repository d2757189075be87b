"""In-process wake-ups of a reader waiting for a row (persistence.written)."""

from __future__ import annotations

import threading

from swflows.persistence.written import Written


def test_a_write_sets_the_event_of_its_key_only() -> None:
    written = Written()
    with written.awaiting("a") as a, written.awaiting("b") as b:
        written.wrote("a")
        assert a.is_set() and not b.is_set()


def test_a_write_wakes_a_waiting_thread() -> None:
    written = Written()
    with written.awaiting("a") as event:
        threading.Timer(0.05, written.wrote, args=("a",)).start()
        assert event.wait(5)


def test_nothing_is_kept_once_no_one_waits() -> None:
    written = Written()
    with written.awaiting("a"), written.awaiting("a"):
        pass
    written.wrote("a")  # no one to wake
    assert written._waiting == {}
