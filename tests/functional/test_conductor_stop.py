"""What the chaos soak found at its end, made deterministic: a conductor told to
stop (SIGTERM) after its board went out of reach stops.

The soak's conductors reach the board through a relay, closed when the
soak ends; on ZooKeeper each then took its whole 20 s of grace before
being killed, held in tooz's leaving of the election group and in the
board's retiring, which wait for an answer without a bound.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.functional import netfault
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.test_jobboard import BOARDS, Setup

#: what a stop may take with its board gone: one deadline
#: (conductor.JOIN_SECONDS) shared by the conductor's and the runner's
#: threads, the election's leaving and the board's retiring (a second at
#: least each of those two), and slack for a loaded machine. Each had its
#: own bound before: 26.1 s at load 6 against 25
STOP_BOUND = 18.0


@pytest.mark.parametrize("kind", BOARDS)
def test_a_conductor_whose_board_went_away_stops_when_told(
    kind: str, devcloud: dict[str, Any], pg_url: str, tmp_path: Path
) -> None:
    setup = Setup(kind, devcloud, pg_url, tmp_path)
    text = setup.conf_path.read_text()
    found = re.search(r"^backend_url = (.*)$", text, re.MULTILINE)
    assert found is not None, text
    proxied, relay = netfault.through(found[1], "board")
    setup.conf_path.write_text(text.replace(found[1], proxied))
    try:
        proc = setup.conductor()  # returns once it runs
        time.sleep(2)  # claiming, heartbeats and the election under way
        relay.close()  # every connection reset, none taken again
        time.sleep(1)
        started = time.monotonic()
        proc.terminate()
        code = proc.wait(timeout=120)
        took = time.monotonic() - started
        print(f"{kind}: SIGTERM to exit {took:.1f} s")
        assert took < STOP_BOUND, f"SIGTERM took {took:.1f} s to stop the conductor"
        assert code == 0, code
    finally:
        relay.close()
        setup.conf_path.write_text(text)  # the namespace removed straight
        setup.close()
