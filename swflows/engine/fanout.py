"""Running a handful of jobs at once on the runner's idle workers and the
calling thread (the watcher's looks, and the signal reads they make)."""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")


def run_all(
    jobs: Sequence[Callable[[], _T]],
    offload: Callable[[Callable[[], object]], bool],
    workers: int,
) -> list[_T]:
    """Run ``jobs`` on this thread and, at once, on up to ``workers`` idle
    workers (``offload`` hands one a callable, or says none is idle); their
    results, in order.

    This thread takes jobs too, so busy workers never hold the caller up:
    a worker that starts once every job is taken has nothing to do.  The
    jobs must raise nothing (an error is lost: the job's result is then
    None).
    """
    if len(jobs) < 2:
        return [job() for job in jobs]
    results: list[Any] = [None] * len(jobs)
    pending = collections.deque(enumerate(jobs))
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def drain() -> None:
        while True:
            with lock:
                if not pending:
                    return
                index, job = pending.popleft()
            try:
                results[index] = job()
            except Exception:  # pragma: no cover - jobs raise nothing
                LOG.exception("a job run at once with others failed")
            finally:
                done.release()

    for _ in range(min(len(jobs) - 1, workers)):
        if not offload(drain):
            break
    drain()
    for _ in jobs:
        done.acquire()
    return results


def read_all(
    reads: Sequence[Callable[[], _T]],
    offload: Callable[[Callable[[], object]], bool],
    workers: int,
) -> list[_T]:
    """:func:`run_all` for jobs that may raise: the first error is raised
    once all are done (the transports' ``ReadAll``)."""
    outcomes = run_all(
        [functools.partial(_result_or_error, read) for read in reads], offload, workers
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes  # type: ignore[return-value]


def _result_or_error(job: Callable[[], _T]) -> _T | BaseException:
    try:
        return job()
    except Exception as exc:
        return exc


__all__ = ["read_all", "run_all"]
