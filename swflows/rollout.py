"""Rollout policy of a deployment group: which members start next.

Pure: no I/O.  A :class:`Policy` is parsed from the user's mapping
(:meth:`Policy.from_dict`); :func:`decide` looks at the members of one
group operation and says which to start now, and whether the operation
ended, COMPLETE or FAILED, with a reason naming what was exceeded.

The rules, taken from the peers users know:

``max_concurrency``
    at most this many members run at once: a count, or ``"N%"`` of the
    operation's members (at least 1).  None (the default): all at once, as
    a Heat group without an update policy.
``max_errors``
    the error budget, AWS SSM's MaxErrors: a count, or ``"N%"`` of the
    operation's members; default 0.  The budget is *exceeded* when more
    members than that FAILED.  From then on no new member is started; those
    running finish, and the operation ends FAILED.  Every FAILED member
    counts, whatever made it fail: a non-zero exit code, an error output, a
    delivery timeout (the server never picked the config up), an execution
    timeout, a cancel, its server gone.  (SSM leaves delivery timeouts out;
    a server that never ran the config is not in service, so it counts.)
    Unlike Ansible's ``max_fail_percentage`` the share is of the whole
    operation, not of one batch.
``max_batch_size`` or ``batches``
    members go in waves, in their order: a batch starts once every member
    of the one before ended (and ``pause_time`` seconds passed).
    ``max_batch_size: N`` is waves of N; ``batches: [1, 5, "25%"]`` is
    Ansible's ``serial`` ramp: 1, then 5, then 25 % of the members per wave
    until all are placed (the last size repeats).  ``max_concurrency``
    still bounds each wave.
``pause_time``
    seconds to wait between the end of a wave and the start of the next.
``min_in_service``
    for a rolling redeploy: never start a member whose deployment is in
    service (COMPLETE before the operation) if that would leave fewer than
    this many members in service.  Members that are not in service (new,
    or FAILED before) are not held back by it.  If the minimum cannot be
    kept (too many members FAILED) the operation ends FAILED saying so.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from swflows import exceptions

#: a member not started yet in this operation
PENDING: Final = "PENDING"
#: a member whose action runs
RUNNING: Final = "RUNNING"
COMPLETE: Final = "COMPLETE"
FAILED: Final = "FAILED"
MEMBER_STATES: Final = frozenset({PENDING, RUNNING, COMPLETE, FAILED})
ENDED: Final = frozenset({COMPLETE, FAILED})

#: the operation goes on
IN_PROGRESS: Final = "IN_PROGRESS"

#: the keys a policy mapping may hold
KEYS: Final = frozenset(
    {
        "max_concurrency",
        "max_errors",
        "max_batch_size",
        "batches",
        "pause_time",
        "min_in_service",
    }
)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


@dataclasses.dataclass(frozen=True)
class Amount:
    """A count, or a percentage of the operation's members."""

    value: float
    percent: bool = False

    @classmethod
    def parse(
        cls, field: str, given: Any, *, minimum: int = 1, percent_ok: bool = True
    ) -> Amount:
        """``given`` as an Amount: an int >= ``minimum``, or ``"N%"``."""
        if isinstance(given, bool):
            raise exceptions.ValidationError(field, f"{given!r} is not a number")
        if isinstance(given, int):
            if given < minimum:
                raise exceptions.ValidationError(
                    field, f"{given} is less than {minimum}"
                )
            return cls(given)
        if isinstance(given, str):
            text = given.strip()
            if text.isdigit():
                return cls.parse(field, int(text), minimum=minimum)
            match = _PERCENT.match(text)
            if match and percent_ok:
                value = float(match.group(1))
                if value > 100 or (minimum > 0 and value <= 0):
                    bounds = "more than 0% and at most" if minimum else "at most"
                    raise exceptions.ValidationError(
                        field, f"{given!r} must be {bounds} 100%"
                    )
                return cls(value, percent=True)
        raise exceptions.ValidationError(
            field,
            f"{given!r} is not a count"
            + (" or a percentage like '25%'" if percent_ok else ""),
        )

    def of(self, total: int) -> int:
        """The count this amount is among ``total`` members (floor, at
        least 1 for a positive percentage)."""
        if not self.percent:
            return int(self.value)
        return max(1, math.floor(self.value * total / 100)) if self.value else 0

    def exceeded_by(self, count: int, total: int) -> bool:
        """Whether ``count`` is past this budget among ``total`` (the
        share of a percentage is compared exactly: 3 of 25 is past 10%)."""
        if self.percent:
            return count * 100 > self.value * total
        return count > self.value

    def to_json(self) -> int | str:
        if self.percent:
            text = f"{self.value:g}"
            return f"{text}%"
        return int(self.value)

    def __str__(self) -> str:
        return str(self.to_json())


@dataclasses.dataclass(frozen=True)
class Policy:
    """How a group operation releases its members (see the module's text)."""

    max_concurrency: Amount | None = None
    max_errors: Amount = Amount(0)
    #: wave sizes in order, the last repeating; empty: one wave
    batches: tuple[Amount, ...] = ()
    pause_time: float = 0.0
    min_in_service: int = 0

    @classmethod
    def from_dict(cls, given: Mapping[str, Any] | None) -> Policy:
        """Parse and check a policy mapping; unknown keys are refused."""
        if given is None:
            return cls()
        if not isinstance(given, Mapping):
            raise exceptions.ValidationError(
                "policy", f"must be a mapping, not {type(given).__name__}"
            )
        unknown = sorted(set(given) - KEYS)
        if unknown:
            raise exceptions.ValidationError(
                "policy",
                f"unknown key(s) {', '.join(map(str, unknown))}; known: "
                + ", ".join(sorted(KEYS)),
            )
        concurrency = given.get("max_concurrency")
        errors = given.get("max_errors", 0)
        if "max_batch_size" in given and "batches" in given:
            raise exceptions.ValidationError(
                "policy", "give max_batch_size or batches, not both"
            )
        batches: tuple[Amount, ...] = ()
        if given.get("max_batch_size") is not None:
            batches = (Amount.parse("max_batch_size", given["max_batch_size"]),)
        elif given.get("batches") is not None:
            ramp = given["batches"]
            if isinstance(ramp, (str, int)) and not isinstance(ramp, bool):
                ramp = [ramp]
            if not isinstance(ramp, Sequence) or not ramp:
                raise exceptions.ValidationError(
                    "batches", f"{ramp!r} is not a non-empty list of sizes"
                )
            batches = tuple(
                Amount.parse(f"batches[{index}]", size)
                for index, size in enumerate(ramp)
            )
        pause = given.get("pause_time", 0) or 0
        if isinstance(pause, bool) or not isinstance(pause, (int, float)):
            raise exceptions.ValidationError(
                "pause_time", f"{pause!r} is not a number of seconds"
            )
        if pause < 0 or not math.isfinite(pause):
            raise exceptions.ValidationError("pause_time", f"{pause} is not >= 0")
        minimum = given.get("min_in_service", 0) or 0
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise exceptions.ValidationError(
                "min_in_service", f"{minimum!r} is not a count >= 0"
            )
        return cls(
            max_concurrency=(
                None
                if concurrency is None
                else Amount.parse("max_concurrency", concurrency)
            ),
            max_errors=Amount.parse("max_errors", errors, minimum=0),
            batches=batches,
            pause_time=float(pause),
            min_in_service=minimum,
        )

    def to_dict(self) -> dict[str, Any]:
        """The mapping :meth:`from_dict` reads back as this policy."""
        out: dict[str, Any] = {
            "max_concurrency": (
                None if self.max_concurrency is None else self.max_concurrency.to_json()
            ),
            "max_errors": self.max_errors.to_json(),
            "pause_time": self.pause_time,
            "min_in_service": self.min_in_service,
        }
        if self.batches:
            out["batches"] = [size.to_json() for size in self.batches]
        return out

    def concurrency(self, total: int) -> int:
        """How many members may run at once among ``total``."""
        if self.max_concurrency is None:
            return max(total, 1)
        return max(1, self.max_concurrency.of(total))

    def batch_sizes(self, total: int) -> list[int]:
        """The size of each wave for ``total`` members (they sum to it)."""
        if total <= 0:
            return []
        if not self.batches:
            return [total]
        sizes: list[int] = []
        placed = 0
        index = 0
        while placed < total:
            size = max(1, self.batches[min(index, len(self.batches) - 1)].of(total))
            size = min(size, total - placed)
            sizes.append(size)
            placed += size
            index += 1
        return sizes

    def assign_batches(self, names: Sequence[str]) -> dict[str, int]:
        """Each member's wave, by the members' order."""
        out: dict[str, int] = {}
        position = 0
        for batch, size in enumerate(self.batch_sizes(len(names))):
            for name in names[position : position + size]:
                out[name] = batch
            position += size
        return out


@dataclasses.dataclass(frozen=True)
class Member:
    """One member of an operation, as :func:`decide` sees it."""

    name: str
    state: str = PENDING
    batch: int = 0
    #: when it ended (seconds since the epoch), for ``pause_time``
    ended_at: float | None = None
    #: in service before the operation (its deployment COMPLETE): starting
    #: it takes it out of service until it ends COMPLETE again
    serving: bool = False


@dataclasses.dataclass(frozen=True)
class Decision:
    """What :func:`decide` says: members to start, and the outcome."""

    #: members to start now, in order
    start: tuple[str, ...]
    #: IN_PROGRESS, or COMPLETE / FAILED once the operation ended
    status: str
    reason: str
    #: earliest time worth deciding again when a pause holds members back
    wake_at: float | None
    complete: int
    failed: int
    running: int
    left: int

    @property
    def done(self) -> bool:
        return self.status != IN_PROGRESS

    def progress(self) -> str:
        return (
            f"{self.complete} done, {self.running} running, "
            f"{self.failed} failed, {self.left} left"
        )


def _names(members: Iterable[Member], limit: int = 5) -> str:
    listed = [m.name for m in members]
    shown = ", ".join(listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")


def decide(
    policy: Policy,
    members: Sequence[Member],
    now: float,
    *,
    cancelled: str | None = None,
) -> Decision:
    """Which of ``members`` to start now, and whether the operation ended.

    ``cancelled`` (a reason) stops new starts like an exceeded budget.
    The result never makes more than ``policy.concurrency`` run at once,
    never starts a member once the budget is exceeded, and starts members
    of a wave only after the waves before it ended.
    """
    for member in members:
        if member.state not in MEMBER_STATES:
            raise exceptions.ValidationError(
                "state", f"{member.name}: unknown member state {member.state!r}"
            )
    total = len(members)
    complete = [m for m in members if m.state == COMPLETE]
    failed = [m for m in members if m.state == FAILED]
    running = [m for m in members if m.state == RUNNING]
    pending = [m for m in members if m.state == PENDING]
    over_budget = policy.max_errors.exceeded_by(len(failed), total)
    in_service = len(complete) + sum(1 for m in pending if m.serving)

    def made(
        start: Sequence[str], status: str, reason: str, wake_at: float | None = None
    ) -> Decision:
        return Decision(
            start=tuple(start),
            status=status,
            reason=reason,
            wake_at=wake_at,
            complete=len(complete),
            failed=len(failed),
            running=len(running) + len(start),
            left=len(pending) - len(start),
        )

    stopped = None
    if cancelled is not None:
        stopped = f"cancelled: {cancelled}" if cancelled else "cancelled"
    elif over_budget:
        stopped = (
            f"max_errors {policy.max_errors} exceeded: {len(failed)} of "
            f"{total} members FAILED ({_names(failed)})"
        )
    if stopped is not None:
        if running:
            return made((), IN_PROGRESS, f"{stopped}; waiting for {len(running)}")
        tail = f"; {len(pending)} not started" if pending else ""
        return made((), FAILED, stopped + tail)
    if not pending:
        if running:
            return made((), IN_PROGRESS, "running")
        if failed:
            return made(
                (),
                COMPLETE,
                f"{len(complete)} members COMPLETE, {len(failed)} FAILED "
                f"({_names(failed)}), within max_errors {policy.max_errors}",
            )
        return made((), COMPLETE, f"{len(complete)} members COMPLETE")

    current = min(m.batch for m in [*pending, *running])
    wave = [m for m in pending if m.batch == current]
    started_in_wave = any(m.batch == current and m.state != PENDING for m in members)
    if current > 0 and not started_in_wave and policy.pause_time > 0:
        ended = [
            m.ended_at for m in members if m.batch < current and m.ended_at is not None
        ]
        resume_at = max(ended, default=now) + policy.pause_time
        if now < resume_at:
            return made(
                (), IN_PROGRESS, f"pausing before batch {current + 1}", resume_at
            )

    room = policy.concurrency(total) - len(running)
    start: list[str] = []
    serving_left = in_service
    for member in wave:
        if room <= 0:
            break
        if member.serving and policy.min_in_service:
            if serving_left - 1 < policy.min_in_service:
                continue
            serving_left -= 1
        start.append(member.name)
        room -= 1
    if not start and not running:
        return made(
            (),
            FAILED,
            f"min_in_service {policy.min_in_service} cannot be kept: "
            f"{in_service} members in service, {len(pending)} not started",
        )
    return made(start, IN_PROGRESS, "running")


__all__ = [
    "COMPLETE",
    "ENDED",
    "FAILED",
    "IN_PROGRESS",
    "PENDING",
    "RUNNING",
    "Amount",
    "Decision",
    "Member",
    "Policy",
    "decide",
]
