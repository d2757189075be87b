"""Flows as jobs on a TaskFlow jobboard (Redis or ZooKeeper).

With ``[jobboard] enabled``, a runner does not drive the flows it starts:
it writes the flow's row and logbook as always, then posts a job naming
the flow.  ``swflows conductor`` processes (:mod:`swflows.engine.
conductor`) claim jobs and drive the flows.  A job lives while its flow
runs: it is consumed when the flow ends *or parks* (a parked flow holds no
claim), and a new job is posted when a parked flow may go on
(:meth:`Jobs.requeue`).

:class:`Board` is a small typed adapter over TaskFlow's board: claims on
Redis carry an expiry (TaskFlow's Redis board would otherwise keep a dead
owner's claim for ever), and both backends record the live conductors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, Protocol

from taskflow import exceptions as tf_exceptions
from taskflow.jobs import backends as job_backends
from taskflow.jobs import base as tf_jobs_base

from swflows import exceptions, extras
from swflows.persistence import flow_registry as flow_rows

if TYPE_CHECKING:
    from oslo_config import cfg

LOG = logging.getLogger(__name__)

#: the job detail naming the flow a job drives
FLOW_KEY: Final = "swflows_flow"
#: the job detail naming the server its flow works on, when it has one
SERVER_KEY: Final = "swflows_server"
#: the schemes ``[jobboard] backend_url`` accepts
SCHEMES: Final = ("redis", "zookeeper")
#: default key prefix (Redis) and path (ZooKeeper) of the board
DEFAULT_NAMESPACE: Final = "swflows"
#: errors of a board operation that lost a race (the job is gone or owned
#: by another): not failures of the board itself
RACES: Final = (tf_exceptions.NotFound, tf_exceptions.UnclaimableJob)
#: the first and the longest pause between two attempts to connect to a
#: board (:meth:`Board.connect` with patience), in seconds
CONNECT_PAUSE: Final = 0.5
CONNECT_PAUSE_MOST: Final = 4.0
#: the claims a Redis board is asked for in one call (:meth:`Board.owned`)
OWNERS_AT_ONCE: Final = 1000


def board_conf(url: str) -> dict[str, Any]:
    """TaskFlow's board configuration for ``url``.

    ``redis://[:password@]host[:port][/db][?namespace=N]`` or
    ``zookeeper://host[:port][,host:port...][/path][?timeout=S]``.
    """
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in SCHEMES:
        raise exceptions.ValidationError(
            "backend_url",
            f"{parsed.scheme or url!r} is not a jobboard backend "
            f"(one of {', '.join(s + '://' for s in SCHEMES)})",
        )
    query = dict(urllib.parse.parse_qsl(parsed.query))
    if parsed.scheme == "redis":
        db = parsed.path.strip("/") or "0"
        if not db.isdigit():
            raise exceptions.ValidationError(
                "backend_url", f"redis database {db!r} is not a number"
            )
        conf: dict[str, Any] = {
            "board": "redis",
            "host": parsed.hostname or "127.0.0.1",
            "port": parsed.port or 6379,
            "db": int(db),
            "namespace": query.get("namespace", DEFAULT_NAMESPACE),
        }
        if parsed.password:
            conf["password"] = urllib.parse.unquote(parsed.password)
        return conf
    hosts = parsed.netloc.rpartition("@")[2] or "127.0.0.1:2181"
    path = parsed.path.rstrip("/") or f"/{DEFAULT_NAMESPACE}"
    return {
        "board": "zookeeper",
        "hosts": hosts,
        "path": f"{path}/jobs",
        "timeout": float(query.get("timeout", 10.0)),
        # ZooKeeper 3.5+ answers only whitelisted four-letter words
        "check_compatible": False,
    }


def election_url(url: str) -> str:
    """The tooz URL of the jobboard server ``url`` names, for the signal
    watchers' election (:mod:`swflows.engine.election`) when
    ``[coordination] backend_url`` is unset: one server for both."""
    conf = board_conf(url)
    if conf["board"] == "zookeeper":
        return f"zookeeper://{conf['hosts']}"
    login = ""
    if "password" in conf:
        login = ":" + urllib.parse.quote(str(conf["password"]), safe="") + "@"
    return f"redis://{login}{conf['host']}:{conf['port']}?db={conf['db']}"


class Board:
    """One connection to the jobboard ``url`` names."""

    def __init__(self, url: str, claim_expiry: float, name: str = "swflows") -> None:
        self.conf = board_conf(url)
        self.kind = str(self.conf["board"])
        self.claim_expiry = float(claim_expiry)
        extras.require(self.kind, f"a {self.kind} jobboard ([jobboard] backend_url)")
        self._name = name
        self._board: Any = job_backends.fetch(name, dict(self.conf))
        self._presence: Any = None

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Board:
        return cls(conf.jobboard.backend_url, conf.jobboard.claim_expiry)

    def connect(self, patience: float = 0.0) -> Board:
        """Connect; SwflowsError naming the board if it cannot be reached.

        With ``patience`` (seconds), a failed attempt is made again, on a
        new client, until that much time has passed: a conductor started
        while its board's connections are being reset (ZooKeeper losing
        the connection during TaskFlow's set-up after it) starts all the
        same instead of exiting."""
        deadline = time.monotonic() + patience
        pause = CONNECT_PAUSE
        while True:
            try:
                self._board.connect()
                return self
            except Exception as exc:
                where = (
                    self.conf.get("hosts") or f"{self.conf['host']}:{self.conf['port']}"
                )
                failed = f"jobboard {self.kind} at {where} unreachable: {exc}"
                left = deadline - time.monotonic()
                if left <= 0:
                    raise exceptions.SwflowsError(failed) from None
            LOG.warning("trying again for %.0f s more: %s", left, failed)
            with contextlib.suppress(Exception):
                self._board.close()
            time.sleep(min(pause, left))
            pause = min(pause * 2, CONNECT_PAUSE_MOST)
            self._board = job_backends.fetch(self._name, dict(self.conf))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._board.close()
        if self._presence is not None:
            with contextlib.suppress(Exception):
                self._presence.close()

    # -- jobs -------------------------------------------------------------
    def post(self, flow_id: str, name: str, server: str = "") -> str:
        """Post a job driving flow ``flow_id`` (on ``server``); its id."""
        details = {FLOW_KEY: flow_id, **({SERVER_KEY: server} if server else {})}
        job = self._board.post(name, details=details)
        return str(job.uuid)

    def jobs(self, *, only_unclaimed: bool = False) -> list[Any]:
        """The jobs on the board now, oldest first.

        Sorted here: TaskFlow's Redis board lists the newest first, so
        conductors that claim in its order starve an old job for as long as
        new ones keep coming (seen: a deployment waiting minutes to start
        while later ones ran).  Every job is posted with the same priority;
        its sequence is the order it was posted in, on both boards.
        """
        found = self._board.iterjobs(only_unclaimed=only_unclaimed, ensure_fresh=True)
        return sorted(found, key=lambda job: job.sequence)

    def claimable(self, who: str) -> tuple[list[Any], set[str]]:
        """The jobs ``who`` may try to claim, oldest first, and the servers
        of the jobs another holds.

        On Redis, the board's listing and every claim at once (two calls,
        :meth:`owned`): TaskFlow's iterator asks each job's state in a
        transaction of its own (two calls a job, for every job on the
        board), and a claim tried on each job someone holds would fail, one
        call each.  On ZooKeeper, the unclaimed jobs (its board keeps them
        in memory, watched); the servers others hold are learnt from the
        claims that fail.
        """
        if self.kind != "redis":
            return self.jobs(only_unclaimed=True), set()
        free: list[Any] = []
        elsewhere: set[str] = set()
        for job, owner in self.owned():
            if owner is None:
                free.append(job)
            elif owner != who:
                elsewhere.add(self.server_of(job))
        elsewhere.discard("")  # a job of no server keeps no other from a claim
        return free, elsewhere

    def listed(self) -> list[Any]:
        """Every job on the board, claimed or not, oldest first: on Redis
        its listing in one call (no state asked per job, as
        :meth:`jobs` asks it)."""
        if self.kind != "redis":
            return self.jobs()
        return sorted(self._board._fetch_jobs(), key=lambda job: job.sequence)

    def owned(self) -> list[tuple[Any, str | None]]:
        """Every job on the board with who holds its claim (None: nobody),
        oldest first.  On Redis in two calls whatever the number of jobs
        (the listing, then every claim at once), where a job's state and
        its owner asked one by one cost several calls a job: a conductor
        looking over a board of thousands stalled its claiming for
        seconds."""
        jobs = self.listed()
        if self.kind != "redis":
            return [(job, self.owner(job)) for job in jobs]
        board = self._board
        found: list[tuple[Any, str | None]] = []
        for start in range(0, len(jobs), OWNERS_AT_ONCE):
            chunk = jobs[start : start + OWNERS_AT_ONCE]
            raws = board._client.mget([job.owner_key for job in chunk])
            for job, raw in zip(chunk, raws, strict=True):
                who = board._decode_owner(raw) if raw is not None else None
                found.append((job, str(who) if who else None))
        return found

    def posted(self) -> int | None:
        """How many jobs were ever posted to a Redis board (its sequence,
        one GET): a conductor with room probes it to claim a new job at
        once rather than at its next listing.  None on ZooKeeper, whose
        board tells of a new job itself (:meth:`on_posted`)."""
        if self.kind != "redis":
            return None
        board = self._board
        return int(board._client.get(board.sequence_key) or 0)

    def on_posted(self, callback: Callable[[], None]) -> bool:
        """Have ``callback`` called (in a thread of the board) when the
        board sees a job posted; False where it cannot tell (Redis)."""
        if self.kind == "redis":
            return False
        self._board.notifier.register(
            tf_jobs_base.POSTED, lambda _event, details=None: callback()
        )
        return True

    @staticmethod
    def flow_of(job: Any) -> str | None:
        flow_id = (job.details or {}).get(FLOW_KEY)
        return str(flow_id) if flow_id else None

    @staticmethod
    def server_of(job: Any) -> str:
        """The server the job's flow works on ('' if unknown)."""
        return str((job.details or {}).get(SERVER_KEY) or "")

    def claim(self, job: Any, who: str) -> bool:
        """Claim ``job`` for ``who``; False if someone else has it or it is gone.

        On Redis the claim expires unless renewed (:meth:`extend`)."""
        try:
            if self.kind == "redis":
                self._board.claim(job, who, expiry=self.claim_expiry)
            else:
                self._board.claim(job, who)
        except RACES:
            return False
        return True

    def owner(self, job: Any) -> str | None:
        """Who holds ``job``'s claim; None if nobody does."""
        try:
            found = self._board.find_owner(job)
        except TypeError:  # Redis: no owner key to decode
            return None
        return str(found) if found else None

    def extend(self, job: Any, who: str) -> bool:
        """Keep ``who``'s claim on ``job`` alive; False if it is not ``who``'s.

        ZooKeeper's claim lives as long as the session: checking the owner
        is all there is to do."""
        if self.owner(job) != who:
            return False
        if self.kind == "redis":
            return bool(job.extend_expiry(self.claim_expiry))
        return True

    def consume(self, job: Any, who: str) -> bool:
        """Remove a job its flow no longer needs; False if not ``who``'s."""
        return self._settle(self._board.consume, job, who)

    def abandon(self, job: Any, who: str) -> bool:
        """Give a job back to the board for any conductor."""
        return self._settle(self._board.abandon, job, who)

    def trash(self, job: Any, who: str) -> bool:
        """Set a job aside for good (a poison job)."""
        return self._settle(self._board.trash, job, who)

    @staticmethod
    def _settle(op: Any, job: Any, who: str) -> bool:
        try:
            op(job, who)
        except RACES:
            return False
        except tf_exceptions.JobFailure as exc:
            LOG.info("job %s: %s", job.uuid, exc)
            return False
        return True

    # -- conductors -------------------------------------------------------
    def announce(self, name: str, info: dict[str, Any]) -> None:
        """Record conductor ``name`` as live for ``claim_expiry`` seconds
        (Redis; renewed by calling again) or for its session (ZooKeeper),
        with ``info`` (replaced by each call)."""
        data = json.dumps({"name": name, **info})
        if self.kind == "redis":
            client = self._redis()
            key = self._presence_key()
            now = time.time()
            with client.pipeline() as pipe:
                pipe.zadd(key, {name: now + self.claim_expiry})
                pipe.hset(key + ":info", name, data)
                pipe.execute()
            return
        client = self._kazoo()
        path = f"{self._presence_path()}/{name}"
        client.ensure_path(self._presence_path())
        if client.exists(path) is None:
            client.create(path, data.encode(), ephemeral=True)
        else:  # what it announces changes (its loops' health)
            client.set(path, data.encode())

    def retire(self, name: str) -> None:
        """Forget conductor ``name`` (it stops)."""
        with contextlib.suppress(Exception):
            if self.kind == "redis":
                client = self._redis()
                client.zrem(self._presence_key(), name)
                client.hdel(self._presence_key() + ":info", name)
            else:
                self._kazoo().delete(f"{self._presence_path()}/{name}")

    def conductors(self) -> dict[str, dict[str, Any]]:
        """The live conductors by name, with what each announced."""
        found: dict[str, dict[str, Any]] = {}
        if self.kind == "redis":
            client = self._redis()
            key = self._presence_key()
            now = time.time()
            client.zremrangebyscore(key, "-inf", now)
            names = [n.decode() for n in client.zrangebyscore(key, now, "+inf")]
            infos = client.hmget(key + ":info", names) if names else []
            for name, raw in zip(names, infos, strict=True):
                found[name] = json.loads(raw) if raw else {"name": name}
            stale = set(client.hkeys(key + ":info")) - {n.encode() for n in names}
            if stale:
                client.hdel(key + ":info", *stale)
            return found
        client = self._kazoo()
        path = self._presence_path()
        if client.exists(path) is None:
            return found
        for name in client.get_children(path):
            with contextlib.suppress(Exception):
                raw, _ = client.get(f"{path}/{name}")
                found[name] = json.loads(raw) if raw else {"name": name}
        return found

    def is_live(self, owner: str, live: dict[str, Any]) -> bool:
        """Whether a claim's ``owner`` is a conductor that still runs."""
        return owner in live and not flow_rows.owner_is_dead(owner)

    def _presence_key(self) -> str:
        return f"{self.conf['namespace']}.conductors"

    def _presence_path(self) -> str:
        return str(self.conf["path"]).rpartition("/")[0] + "/conductors"

    def _redis(self) -> Any:
        if self._presence is None:
            import redis

            conf = self.conf
            self._presence = redis.Redis(
                host=conf["host"],
                port=conf["port"],
                db=conf["db"],
                password=conf.get("password"),
            )
        return self._presence

    def _kazoo(self) -> Any:
        return self._board._client


class Driver(Protocol):
    """What the jobboard needs of the runner it posts for (a
    :class:`swflows.engine.runner.Runner`)."""

    @property
    def registry(self) -> flow_rows.FlowRegistry: ...


class Jobs:
    """A runner's side of the jobboard: posting flows, re-posting parked
    ones that may go on, re-posting flows whose job was lost."""

    #: a posted flow not claimed within this many claim expiries, with no
    #: job on the board, gets a new job (its poster died before posting)
    REPOST_AFTER: Final = 2.0

    def __init__(self, runner: Driver, board: Board) -> None:
        self.runner: Driver = runner
        self.board = board

    @property
    def registry(self) -> flow_rows.FlowRegistry:
        return self.runner.registry

    def deadline(self) -> float:
        return time.time() + self.REPOST_AFTER * self.board.claim_expiry

    def post(self, flow_id: str, *, kind: str | None = None, server: str = "") -> None:
        """Post a job for a flow whose row and logbook are written: of
        ``kind`` on ``server`` (read from its row when the kind is not
        given)."""
        if kind is None:
            row = self.registry.get(flow_id)
            kind = row.kind if row else "flow"
            server = (row.server_id if row else "") or ""
        self.board.post(flow_id, f"swflows-{kind}-{flow_id}", server)

    def requeue(self, flow_id: str) -> bool:
        """A parked flow may go on: post a job for it, once (the row's
        compare-and-set from PARKED decides who posts)."""
        if not self.registry.requeue(flow_id, lease_until=self.deadline()):
            return False
        self.post(flow_id)
        return True

    def reap(self, flow_id: str | None = None) -> list[str]:
        """Re-post the RUNNING flows nobody drives and no job names: their
        poster died before posting, or their job was lost.  Ids re-posted."""
        now = time.time()
        rows = [
            row
            for row in self.registry.find(states=[flow_rows.RUNNING])
            if (flow_id is None or row.id == flow_id) and row.lease_expired(now)
        ]
        if not rows:
            return []
        posted = {self.board.flow_of(job) for job in self.board.listed()}
        reposted = []
        for row in rows:
            if row.id in posted:
                continue
            if self.registry.requeue(
                row.id,
                lease_until=self.deadline(),
                from_state=flow_rows.RUNNING,
                expired_by=now,
            ):
                LOG.warning("flow %s (%s) had no job: posted again", row.id, row.kind)
                self.post(row.id)
                reposted.append(row.id)
        return reposted

    def fence_for(self, flow_id: str) -> Any:
        """The ownership check run before each step of ``flow_id`` (None:
        this process posts flows, it does not drive them)."""
        return None

    def drive_done(self, flow_id: str, *, settled: bool = False) -> None:
        """The runner stopped driving ``flow_id`` (it ended, parked, was
        lost or released; ``settled``: its end or parking was recorded)."""

    def close_board(self) -> None:
        """The runner stopped: let go of the board."""
        self.board.close()


def iter_flow_jobs(board: Board) -> Iterator[tuple[Any, str | None, str | None]]:
    """Every job with its flow and its owner."""
    for job, owner in board.owned():
        yield job, board.flow_of(job), owner


__all__ = [
    "FLOW_KEY",
    "Board",
    "Driver",
    "Jobs",
    "board_conf",
    "election_url",
    "iter_flow_jobs",
]
