"""Stopping on a signal must work wherever the main thread is when it comes.

Each case runs in a child interpreter: a signal handler can only be set in
a process's main thread, and a deadlocked handler must not hang the suite
(the child's own alarm ends it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent(
    """
    import logging, os, signal, sys, threading
    from swflows.stopping import stop_on_signals

    def too_late(signum, frame):
        print("deadlocked: the handler never returned", flush=True)
        os._exit(3)

    signal.signal(signal.SIGALRM, too_late)
    signal.setitimer(signal.ITIMER_REAL, 10)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(message)s")
    """
)


def run_child(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_signal_while_the_event_lock_is_held_does_not_deadlock() -> None:
    # Event.wait holds the event's lock for a moment on the way in and out;
    # a handler setting the event right there waited on its own thread
    # (an agent that logged "stopping" and never stopped)
    child = run_child(
        """
        stop = threading.Event()
        stop_on_signals(stop, (signal.SIGUSR1,))
        with stop._cond:
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(100000):
                pass
            print("handler returned", stop.is_set(), flush=True)
        print("stopped", stop.wait(5), flush=True)
        """
    )
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.splitlines() == ["handler returned False", "stopped True"]


def test_a_signal_sets_the_event_and_is_logged() -> None:
    child = run_child(
        """
        stop = threading.Event()
        stop_on_signals(stop, (signal.SIGTERM, signal.SIGHUP),
                        log=logging.getLogger("t"))
        os.kill(os.getpid(), signal.SIGHUP)
        print("stopped", stop.wait(5), flush=True)
        """
    )
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.splitlines() == [
        f"signal {int(__import__('signal').SIGHUP)}: stopping",
        "stopped True",
    ]


def test_signals_not_named_keep_their_default() -> None:
    child = run_child(
        """
        stop = threading.Event()
        stop_on_signals(stop, (signal.SIGUSR1,))
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
        """
    )
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.splitlines() == ["True"]
