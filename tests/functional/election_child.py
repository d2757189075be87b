"""A candidate of an election, in a process of its own, until killed.

``python -m tests.functional.election_child URL ROLE MEMBER TIMEOUT`` prints
``elected <time>`` and ``revoked <time>`` (wall clock) as its election
tells it, and ``leader <time>`` every tenth of a second while it leads.
"""

from __future__ import annotations

import sys
import time

from swflows.engine.election import Election


def say(what: str) -> None:
    print(f"{what} {time.time():.3f}", flush=True)


def main(url: str, role: str, member: str, timeout: str) -> None:
    election = Election(
        url,
        role,
        member_id=member,
        timeout=int(timeout),
        on_elected=lambda: say("elected"),
        on_revoked=lambda: say("revoked"),
    )
    election.start()
    say("started")
    while True:
        if election.is_leader:
            say("leader")
        time.sleep(0.1)


if __name__ == "__main__":
    main(*sys.argv[1:])
