"""A group's live progress bar, as ``group … --wait`` and ``group watch``
rewrite it in place on a terminal: done, running, failed and left members,
the time elapsed and an ETA, fitted to the terminal's width.

Off a terminal no bar is drawn: :func:`swflows.cli.group.follow` prints
plain lines instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import IO, Final

#: the bar's cells, in the order they are drawn: a member's state, its mark
CELLS: Final = (("done", "#"), ("failed", "!"), ("running", ">"), ("left", "."))
#: the drawing's widest; narrower terminals get a narrower one
MAX_DRAWING: Final = 40
#: below this many cells no drawing is made (the counts still are)
MIN_DRAWING: Final = 10
#: go back to the line's start, and erase what is left of an older, longer line
REWIND: Final = "\r"
ERASE: Final = "\x1b[K"


def eta(finished: int, remaining: int, elapsed: float) -> float | None:
    """Seconds until the ``remaining`` members end, at the rate the
    ``finished`` ones did over ``elapsed`` seconds; None before any ended."""
    if remaining <= 0:
        return 0.0
    if finished <= 0 or elapsed <= 0:
        return None
    return remaining * elapsed / finished


def duration(seconds: float | None) -> str:
    """``42s``, ``4m05s``, ``2h03m``; ``?`` for None."""
    if seconds is None:
        return "?"
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole // 60 % 60:02d}m"


def drawing(counts: Mapping[str, int], width: int) -> str:
    """``width`` cells, each state's share of the members in its mark:
    ``####!>>>......``."""
    total = sum(counts[state] for state, _ in CELLS)
    if total <= 0:
        return CELLS[-1][1] * width
    cells = []
    reached = drawn = 0
    for state, mark in CELLS:
        reached += counts[state]
        upto = round(width * reached / total)
        cells.append(mark * (upto - drawn))
        drawn = upto
    return "".join(cells)


def line(
    title: str,
    counts: Mapping[str, int],
    elapsed: float,
    columns: int,
    *,
    ended: bool = False,
) -> str:
    """The bar for a terminal ``columns`` wide, short of its last column
    (where a terminal would wrap, and the next rewrite land a line lower).

    ``title`` says whose it is (``group web deploy IN_PROGRESS``); ``counts``
    has ``done``, ``running``, ``failed`` and ``left``.  Once the operation
    ``ended`` there is no ETA (members left then never start).  Narrow
    terminals lose the drawing, then the title, then the words.
    """
    done, running = counts["done"], counts["running"]
    failed, left = counts["failed"], counts["left"]
    tally = f"{done} done, {running} running, {failed} failed, {left} left"
    when = eta(done + failed, running + left, elapsed)
    times = f"{duration(elapsed)} elapsed"
    if not ended:
        times += f", ETA {duration(when)}"
    room = max(1, columns - 1)
    width = min(MAX_DRAWING, room - len(f"{title} [] {tally}, {times}"))
    if width >= MIN_DRAWING:
        return f"{title} [{drawing(counts, width)}] {tally}, {times}"
    total = done + running + failed + left
    shorter = (
        f"{title}: {tally}, {times}",
        f"{tally}, {times}",
        f"{done}/{total} done, {failed} failed"
        + ("" if ended else f", ETA {duration(when)}"),
    )
    for text in shorter:
        if len(text) <= room:
            return text
    return shorter[-1][:room]


def columns(out: IO[str]) -> int:
    """How wide ``out``'s terminal is (``$COLUMNS``, else 80, when it
    does not say)."""
    try:
        width = os.get_terminal_size(out.fileno()).columns
    except (AttributeError, OSError, ValueError):
        width = 0
    return width or shutil.get_terminal_size().columns
