"""A group's progress bar on a terminal: its ETA, its drawing, its fit to
the terminal's width."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios

import pytest

from swflows.cli import progress_bar

TITLE = "group web deploy IN_PROGRESS"


def counts(done: int, running: int, failed: int, left: int) -> dict[str, int]:
    return {"done": done, "running": running, "failed": failed, "left": left}


def test_the_eta_is_unknown_until_a_member_ended() -> None:
    assert progress_bar.eta(0, 10, 30.0) is None
    assert progress_bar.eta(0, 10, 0.0) is None


def test_the_eta_goes_at_the_rate_members_ended_so_far() -> None:
    # 4 members (done or failed) in 20 s: 6 more take 30 s
    assert progress_bar.eta(4, 6, 20.0) == pytest.approx(30.0)
    assert progress_bar.eta(4, 0, 20.0) == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (0.4, "0s"), (42, "42s"), (245, "4m05s"), (7380, "2h03m")],
)
def test_durations(seconds: float | None, text: str) -> None:
    assert progress_bar.duration(seconds) == text


def test_the_drawing_gives_each_state_its_share() -> None:
    assert progress_bar.drawing(counts(2, 1, 1, 6), 10) == "##!>......"
    assert progress_bar.drawing(counts(0, 0, 0, 0), 4) == "...."
    for width in range(1, 50):
        drawn = progress_bar.drawing(counts(3, 7, 1, 2), width)
        assert len(drawn) == width


def test_a_wide_terminal_gets_the_drawing_the_counts_and_the_times() -> None:
    # 3 members ended in 12 s: 7 more take 28 s
    text = progress_bar.line(TITLE, counts(2, 3, 1, 4), 12.0, 200)
    assert text == (
        f"{TITLE} [{'#' * 8}{'!' * 4}{'>' * 12}{'.' * 16}] "
        "2 done, 3 running, 1 failed, 4 left, 12s elapsed, ETA 28s"
    )


def test_before_any_member_ended_the_eta_is_a_question_mark() -> None:
    text = progress_bar.line(TITLE, counts(0, 2, 0, 8), 3.0, 120)
    assert text.endswith("0 done, 2 running, 0 failed, 8 left, 3s elapsed, ETA ?")


def test_an_operation_that_ended_has_no_eta() -> None:
    text = progress_bar.line(
        "group web deploy FAILED", counts(0, 0, 2, 1), 9.0, 120, ended=True
    )
    assert text.endswith("0 done, 0 running, 2 failed, 1 left, 9s elapsed")


@pytest.mark.parametrize("columns", range(1, 160))
def test_the_bar_never_reaches_the_last_column(columns: int) -> None:
    """A line as wide as the terminal wraps, and the next rewrite lands a
    line lower: every width keeps short of it."""
    text = progress_bar.line(TITLE, counts(120, 30, 7, 843), 3725.0, columns)
    assert 0 < len(text) <= max(1, columns - 1)


def test_narrower_terminals_lose_the_drawing_then_the_title_then_the_words() -> None:
    many = counts(120, 30, 7, 843)
    words = "120 done, 30 running, 7 failed, 843 left, 1m05s elapsed, ETA 7m27s"
    assert progress_bar.line(TITLE, many, 65.0, 140) == (
        f"{TITLE} [#####>{'.' * 34}] {words}"
    )
    assert (
        progress_bar.line(TITLE, many, 65.0, 120) == f"{TITLE} [###{'.' * 18}] {words}"
    )
    assert progress_bar.line(TITLE, many, 65.0, 100) == f"{TITLE}: {words}"
    assert progress_bar.line(TITLE, many, 65.0, 70) == words
    assert progress_bar.line(TITLE, many, 65.0, 40) == (
        "120/1000 done, 7 failed, ETA 7m27s"
    )


def test_the_width_of_a_terminal_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "132")
    master, slave = os.openpty()
    try:
        size = struct.pack("HHHH", 24, 57, 0, 0)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
        with open(slave, "w", closefd=False) as out:
            assert progress_bar.columns(out) == 57
    finally:
        os.close(slave)
        os.close(master)


def test_the_width_off_a_terminal_is_columns_or_80(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "132")
    assert progress_bar.columns(io.StringIO()) == 132
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr("sys.__stdout__", None)
    assert progress_bar.columns(io.StringIO()) == 80
