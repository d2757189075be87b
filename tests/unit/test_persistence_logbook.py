"""The fast TaskFlow logbook: same data as the stock backend, flows resume.

:class:`LogbookContract` runs here on in-memory SQLite and in
``tests/functional/test_logbook.py`` on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from taskflow import engines, exceptions, states, task
from taskflow.patterns import linear_flow
from taskflow.persistence import models
from taskflow.persistence.backends import impl_sqlalchemy
from taskflow.types import failure

from swflows.persistence import Store, logbook, tables
from swflows.persistence import flow_registry as flow_rows

#: executions per (run id, task name), to see what a resume re-runs
EXECUTED: dict[tuple[str, str], int] = {}
_EXECUTED_LOCK = threading.Lock()


class Step(task.Task):  # type: ignore[misc]
    def execute(self, run_id: str, value: int) -> int:
        with _EXECUTED_LOCK:
            key = (run_id, self.name)
            EXECUTED[key] = EXECUTED.get(key, 0) + 1
        return value + 1


def make_flow(count: int) -> Any:
    """A linear flow step0 -> ... each adding one to the previous result."""
    flow = linear_flow.Flow("linear")
    for i in range(count):
        flow.add(
            Step(
                name=f"step{i}",
                provides=f"r{i}",
                rebind={"value": "seed" if i == 0 else f"r{i - 1}"},
            )
        )
    return flow


def snapshot(book: Any) -> dict[str, Any]:
    """Everything a logbook holds, as plain data.

    Less the book's ``updated_at``: TaskFlow stamps it with the current time
    whenever it adds a loaded flow detail to a loaded book.
    """
    book_dict = book.to_dict()
    del book_dict["updated_at"]
    return {
        "book": book_dict,
        "flows": {
            fd.uuid: {
                "flow": fd.to_dict(),
                "atoms": {ad.uuid: (type(ad).__name__, ad.to_dict()) for ad in fd},
            }
            for fd in book
        },
    }


def sample_book(name: str = "book") -> Any:
    book = models.LogBook(name)
    book.meta = {"who": "swflows", "n": [1, 2]}
    fd = models.FlowDetail("flow", uuid=models.uuidutils.generate_uuid())
    fd.meta = {"factory": {"name": "x.y", "args": [1], "kwargs": {}}}
    fd.state = states.RUNNING
    ad = models.TaskDetail("task-a", uuid=models.uuidutils.generate_uuid())
    ad.state = states.SUCCESS
    ad.intention = states.EXECUTE
    ad.results = {"a": [1, "two", None]}
    ad.version = "1.2"
    rd = models.RetryDetail("retry-b", uuid=models.uuidutils.generate_uuid())
    rd.state = states.FAILURE
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        rd.failure = failure.Failure()
    fd.add(ad)
    fd.add(rd)
    book.add(fd)
    return book


def saved_book(
    registry: flow_rows.FlowRegistry, backend: Any, name: str, owner: str
) -> Any:
    """A :func:`sample_book` saved, its flow's row naming ``owner``."""
    book = sample_book(name)
    registry.add(
        next(iter(book)).uuid,
        kind="custom",
        deployment_id="",
        server_id="",
        owner=owner,
        lease_until=time.time() + 60,
    )
    with connection(backend) as conn:
        conn.save_logbook(book)
    return book


def take_over(registry: flow_rows.FlowRegistry, flow_id: str, owner: str) -> bool:
    """``owner`` claims a running flow whose lease ran out."""
    return registry.claim(
        flow_id,
        owner,
        lease_until=time.time() + 60,
        now=time.time() + 120,
        from_states=(flow_rows.RUNNING,),
    )


def by_name(fd: Any, name: str) -> Any:
    return next(ad for ad in fd if ad.name == name)


@contextlib.contextmanager
def connection(backend: Any) -> Iterator[Any]:
    with contextlib.closing(backend.get_connection()) as conn:
        yield conn


class StockOn(impl_sqlalchemy.SQLAlchemyBackend):  # type: ignore[misc]
    """The stock backend, its connections' SQL unchanged, on ``fast``'s
    tables (the store's prefixed ones), so both read and write the same rows."""

    def __init__(self, fast: Any) -> None:
        super().__init__({}, engine=fast.engine)
        self.fast = fast

    def get_connection(self) -> Any:
        conn = super().get_connection()
        conn._metadata = self.fast.metadata
        conn._tables = self.fast.tables
        conn._converter = impl_sqlalchemy._Alchemist(self.fast.tables)
        return conn


class LogbookContract:
    """Uses the ``store`` fixture; the stock backend shares its engine."""

    @pytest.fixture
    def fast(self, store: Store) -> Any:
        return store.taskflow_backend()

    @pytest.fixture
    def stock(self, store: Store, fast: Any) -> Any:
        return StockOn(fast)

    def test_backend_is_the_fast_one_and_cached(self, store: Store, fast: Any) -> None:
        assert isinstance(fast, logbook.Backend)
        assert store.taskflow_backend() is fast
        with connection(fast) as one, connection(fast) as two:
            assert isinstance(one, logbook.Connection)
            assert one._tables is two._tables
        names = set(sa.inspect(store.engine).get_table_names())
        prefix = store.table_prefix
        assert {f"{prefix}tf_{name}" for name in logbook.TASKFLOW_TABLES} <= names
        # TaskFlow's unprefixed tables and its alembic_version are not made
        assert not names & {*logbook.TASKFLOW_TABLES, "alembic_version"}

    def test_round_trip_like_stock(self, fast: Any, stock: Any) -> None:
        book = sample_book()
        with connection(fast) as conn:
            conn.save_logbook(book)
        with connection(fast) as f, connection(stock) as s:
            assert snapshot(f.get_logbook(book.uuid)) == snapshot(
                s.get_logbook(book.uuid)
            )
            assert snapshot(f.get_logbook(book.uuid)) == snapshot(book)
        # the other way round
        other = sample_book("other")
        with connection(stock) as conn:
            conn.save_logbook(other)
        with connection(fast) as f, connection(stock) as s:
            assert snapshot(f.get_logbook(other.uuid)) == snapshot(
                s.get_logbook(other.uuid)
            )

    def test_a_logbook_read_whole_in_one_statement_is_the_stock_read(
        self, store: Store, fast: Any, stock: Any
    ) -> None:
        """A logbook of two flows (one with no atom yet), and one of none,
        read in one statement, are what the stock reads (a statement per
        table) give; a lazy read gives the logbook alone."""
        book = sample_book("two flows")
        bare = models.FlowDetail("bare", uuid=models.uuidutils.generate_uuid())
        bare.meta = {"empty": True}
        book.add(bare)
        empty = models.LogBook("no flow")
        with connection(fast) as conn:
            conn.save_logbook(book)
            conn.save_logbook(empty)
        statements: list[str] = []

        def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            statements.append(statement)

        sa.event.listen(store.engine, "before_cursor_execute", count)
        try:
            with connection(fast) as f:
                got = f.get_logbook(book.uuid)
                got_empty = f.get_logbook(empty.uuid)
                lazy = f.get_logbook(book.uuid, lazy=True)
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", count)
        assert len(statements) == 3
        with connection(stock) as s:
            assert snapshot(got) == snapshot(s.get_logbook(book.uuid))
            assert snapshot(got_empty) == snapshot(s.get_logbook(empty.uuid))
        assert snapshot(got) == snapshot(book)
        assert sorted(flow.name for flow in got) == ["bare", "flow"]
        assert list(got.find(bare.uuid)) == []
        assert list(got_empty) == []
        assert lazy.uuid == book.uuid and list(lazy) == []
        with connection(fast) as f, pytest.raises(exceptions.NotFound):
            f.get_logbook(models.uuidutils.generate_uuid())

    def test_updates_like_stock(self, fast: Any, stock: Any) -> None:
        book = sample_book()
        with connection(fast) as conn:
            conn.save_logbook(book)
        fd = next(iter(book))
        ad = by_name(fd, "task-a")
        ad.results = "changed"
        ad.state = states.REVERTED
        with connection(fast) as conn:
            conn.update_atom_details(ad)
        new_ad = models.TaskDetail("task-c", uuid=models.uuidutils.generate_uuid())
        fd.add(new_ad)
        fd.state = states.SUCCESS
        with connection(fast) as conn:
            conn.update_flow_details(fd)
        book.meta = {"updated": True}
        with connection(fast) as conn:
            conn.save_logbook(book)
        with connection(fast) as f, connection(stock) as s:
            got = f.get_logbook(book.uuid)
            assert snapshot(got) == snapshot(s.get_logbook(book.uuid))
            got_fd = next(iter(got))
            assert got_fd.state == states.SUCCESS
            assert by_name(got_fd, "task-a").results == "changed"
            assert got.meta == {"updated": True}
            assert f.get_flow_details(fd.uuid).to_dict() == (
                s.get_flow_details(fd.uuid).to_dict()
            )
            assert f.get_atom_details(ad.uuid).to_dict() == (
                s.get_atom_details(ad.uuid).to_dict()
            )
            assert sorted(a.uuid for a in f.get_atoms_for_flow(fd.uuid)) == sorted(
                a.uuid for a in s.get_atoms_for_flow(fd.uuid)
            )
            assert [x.uuid for x in f.get_flows_for_book(book.uuid)] == [fd.uuid]
            assert book.uuid in {b.uuid for b in f.get_logbooks()}

    def test_destroy_like_stock(self, fast: Any, stock: Any) -> None:
        book = sample_book()
        with connection(fast) as conn:
            conn.save_logbook(book)
            conn.destroy_logbook(book.uuid)
        for backend in (fast, stock):
            with connection(backend) as conn:
                with pytest.raises(Exception, match="No logbook found") as err:
                    conn.get_logbook(book.uuid)
                assert type(err.value).__name__ == "NotFound"
        with connection(fast) as conn:
            with pytest.raises(Exception, match="No logbook found"):
                conn.destroy_logbook(book.uuid)

    def test_a_fenced_write_lands_only_while_its_runner_owns_the_flow(
        self, store: Store, fast: Any
    ) -> None:
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        ad = by_name(fd, "task-a")
        ad.state, ad.results = states.FAILURE, "a's"
        with connection(fast.fenced(fd.uuid, "runner-a")) as conn:
            conn.update_atom_details(ad)
        # runner-b takes the flow over (runner-a's lease ran out)
        assert take_over(registry, fd.uuid, "runner-b")
        ad.results = "stale"
        ad.state = states.REVERTED
        fd.state = states.REVERTED
        with connection(fast.fenced(fd.uuid, "runner-a")) as conn:
            with pytest.raises(logbook.FlowFenced, match="runner-b"):
                conn.update_atom_details(ad)
            with pytest.raises(logbook.FlowFenced):
                conn.update_flow_details(fd)
        with connection(fast) as conn:
            got = next(iter(conn.get_logbook(book.uuid)))
        assert by_name(got, "task-a").results == "a's"
        assert got.state == states.RUNNING
        # the new owner writes; a flow with no row is nobody's
        with connection(fast.fenced(fd.uuid, "runner-b")) as conn:
            conn.update_atom_details(ad)
        registry.remove(fd.uuid)
        ad.results = "after"
        with connection(fast.fenced(fd.uuid, "runner-b")) as conn:
            with pytest.raises(logbook.FlowFenced, match="nobody"):
                conn.update_atom_details(ad)

    def test_progress_held_back_by_a_drive_that_stopped_is_never_written(
        self, store: Store, fast: Any
    ) -> None:
        """A drive stopped (its claim lost) right after a progress-only save
        that was held back to ride with its next write.  The flow's new
        owner ends the step.  Neither a later drive of another flow on the
        same thread nor a later drive of this flow here writes what was held
        back: it would put the step back to RUNNING without its result (a
        resumed flow then failed: "Expected to be able to find output
        'action_started'")."""
        registry = flow_rows.FlowRegistry(store)
        books = [saved_book(registry, fast, name, "runner-a") for name in "fg"]
        f, g = (next(iter(book)) for book in books)
        step = by_name(f, "task-a")
        step.state, step.results = states.RUNNING, None
        with connection(fast.fenced(f.uuid, "runner-a")) as conn:
            conn.update_atom_details(step)
            step.meta = {"progress": 0.5}
            conn.update_atom_details(step)  # progress alone: held back
        # the new owner ends the step
        with connection(fast) as conn:
            ended = by_name(next(iter(conn.get_logbook(books[0].uuid))), "task-a")
        ended.state, ended.results = states.SUCCESS, {"action_started": 1}
        with connection(StockOn(fast)) as conn:
            conn.update_atom_details(ended)
        # this thread drives another flow, then this one again
        other = by_name(g, "task-a")
        other.results = "g's"
        with connection(fast.fenced(g.uuid, "runner-a")) as conn:
            conn.update_atom_details(other)
            conn.update_flow_details(g)
        with connection(fast.fenced(f.uuid, "runner-a")) as conn:
            conn.update_flow_details(f)
        with connection(fast) as conn:
            got = by_name(next(iter(conn.get_logbook(books[0].uuid))), "task-a")
        assert (got.state, got.results) == (states.SUCCESS, {"action_started": 1})

    def test_a_success_rides_with_the_drives_next_write(
        self, store: Store, fast: Any
    ) -> None:
        """A task's SUCCESS (its result) is held back and written in the
        transaction of the drive's next write: the next step's RUNNING, or
        the flow's state.  A drive that stops before (its claim lost)
        leaves the step RUNNING for the next owner to run again."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        step = by_name(fd, "task-a")

        def stored() -> tuple[str, Any]:
            with connection(fast) as conn:
                got = by_name(next(iter(conn.get_logbook(book.uuid))), "task-a")
            return got.state, got.results

        def run(result: Any) -> Any:
            """A drive saves the step RUNNING, then SUCCESS with ``result``."""
            drive = fast.fenced(fd.uuid, "runner-a")
            for step.state, step.results in (
                (states.RUNNING, None),
                (states.SUCCESS, result),
            ):
                with connection(drive) as conn:
                    conn.update_atom_details(step)
            return drive

        drive = run({"made": 1})
        assert stored() == (states.RUNNING, None)  # held back
        fd.state = states.SUSPENDED
        with connection(drive) as conn:
            conn.update_flow_details(fd)  # the flow's parking carries it
        assert stored() == (states.SUCCESS, {"made": 1})

        # held back again, then the drive loses the flow: never written
        other = run({"made": 2})
        assert take_over(registry, fd.uuid, "runner-b")
        with connection(other) as conn:
            with pytest.raises(logbook.FlowFenced):
                conn.update_flow_details(fd)
        assert stored() == (states.RUNNING, None)

    def test_an_engines_stored_inputs_are_written_at_once(self, fast: Any) -> None:
        """TaskFlow saves a flow's inputs as a task that succeeded (never
        RUNNING): they are in the database as soon as the engine is
        loaded, before any step runs, for a flow without them is taken
        for one that never started (and removed) after a crash."""
        book = models.LogBook("inputs")
        with connection(fast) as conn:
            conn.save_logbook(book)
        engines.load(
            make_flow(2),
            store={"seed": 7, "run_id": "r"},
            book=book,
            backend=fast.unfenced(),
        )
        with connection(fast) as conn:
            fd = next(iter(conn.get_logbook(book.uuid)))
        injected = [ad for ad in fd if ad.name == "_TaskFlow_INJECTOR"]
        assert [(ad.state, ad.results) for ad in injected] == [
            (states.SUCCESS, {"seed": 7, "run_id": "r"})
        ]

    def test_a_held_back_success_leaves_the_note_to_be_read_again(
        self, store: Store, fast: Any
    ) -> None:
        """A custom flow is checked for a cancel after each step: with the
        step's success held back, no write read the flow's row since the
        step ran, so the note is not offered as fresh."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        step = by_name(fd, "task-a")
        drive = fast.fenced(fd.uuid, "runner-a")
        step.state, step.results = states.RUNNING, None
        with connection(drive) as conn:
            conn.update_atom_details(step)
        assert drive.take_note() == (True, None)  # the RUNNING write read it
        step.state, step.results = states.SUCCESS, 1
        with connection(drive) as conn:
            conn.update_atom_details(step)
        assert drive.take_note() == (False, None)

    def test_a_flows_start_rides_with_its_first_step_and_its_success_is_never_written(
        self, store: Store, fast: Any
    ) -> None:
        """A drive holds back the saves of its flow's preparing (its atoms
        added) and RUNNING: its first step's RUNNING carries them.  Its
        SUCCESS is never written (the runner's end removes the flow); a
        drive that loses the flow leaves what it held unwritten."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        fd.state = states.PENDING
        with connection(fast) as conn:
            conn.update_flow_details(fd)
        added = models.TaskDetail("task-c", uuid=models.uuidutils.generate_uuid())
        added.state = states.PENDING
        fd.add(added)

        def stored() -> Any:
            with connection(fast) as conn:
                return next(iter(conn.get_logbook(book.uuid)))

        drive = fast.fenced(fd.uuid, "runner-a")
        fd.state = states.RUNNING
        with connection(drive) as conn:
            conn.update_flow_details(fd)  # prepared: task-c added, held
        assert stored().state == states.PENDING
        assert "task-c" not in {ad.name for ad in stored()}
        added.state = states.RUNNING
        with connection(drive) as conn:
            conn.update_atom_details(added)
        got = stored()
        assert got.state == states.RUNNING
        assert by_name(got, "task-c").state == states.RUNNING
        fd.state = states.SUCCESS
        with connection(drive) as conn:
            conn.update_flow_details(fd)
        assert stored().state == states.RUNNING  # the end is the runner's

        # held, then the flow is another's: never written, by this drive
        # nor by a later one of this process
        fd.state = states.RUNNING
        late = fast.fenced(fd.uuid, "runner-a")
        with connection(late) as conn:
            conn.update_flow_details(fd)
        assert take_over(registry, fd.uuid, "runner-b")
        with connection(late) as conn:
            with pytest.raises(logbook.FlowFenced):
                conn.update_atom_details(by_name(fd, "task-a"))
        fd.state = states.REVERTED
        with connection(fast.fenced(fd.uuid, "runner-b")) as conn:
            conn.update_flow_details(fd)
        assert stored().state == states.REVERTED

    def test_a_step_added_with_its_flows_start_is_inserted_as_it_starts(
        self, store: Store, fast: Any
    ) -> None:
        """The first step's RUNNING carries its flow's held start, which
        adds the step: the row is inserted RUNNING, as the engine's copy
        of the step says (its flow's copy still PENDING), and not updated
        after."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        added = models.TaskDetail("task-c", uuid=models.uuidutils.generate_uuid())
        added.state = states.PENDING
        fd.add(added)
        drive = fast.fenced(fd.uuid, "runner-a")
        fd.state = states.RUNNING
        with connection(drive) as conn:
            conn.update_flow_details(fd)  # held
        running = added.copy()  # as the engine's storage passes it
        running.state = states.RUNNING
        running.intention = states.EXECUTE
        statements: list[str] = []

        def seen(*args: Any) -> None:
            statements.append(str(args[2]).lstrip().upper())

        sa.event.listen(fast.engine, "before_cursor_execute", seen)
        try:
            with connection(drive) as conn:
                conn.update_atom_details(running)
        finally:
            sa.event.remove(fast.engine, "before_cursor_execute", seen)
        atoms = store.tables.tf_atomdetails.name.upper()
        assert [s for s in statements if s.startswith(f"UPDATE {atoms}")] == []
        assert len([s for s in statements if s.startswith(f"INSERT INTO {atoms}")]) == 1
        with connection(fast) as conn:
            got = by_name(next(iter(conn.get_logbook(book.uuid))), "task-c")
        assert (got.state, got.intention) == (states.RUNNING, states.EXECUTE)
        assert by_name(fd, "task-c").state == states.PENDING  # not touched

    def test_a_flow_loaded_by_its_owner_is_not_read_again_to_add_its_atoms(
        self, store: Store, fast: Any
    ) -> None:
        """The owner that loaded a flow knows its saved atoms: the first
        write adding one inserts it without reading which are saved, and
        the saved ones are not inserted twice."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        with connection(fast) as conn:
            fd = next(iter(conn.get_logbook(book.uuid)))
        drive = fast.fenced(fd.uuid, "runner-a", loaded=fd)  # as loaded
        added = models.TaskDetail("task-c", uuid=models.uuidutils.generate_uuid())
        added.state = states.PENDING
        fd.add(added)
        statements: list[str] = []

        def seen(*args: Any) -> None:
            statements.append(str(args[2]))

        sa.event.listen(fast.engine, "before_cursor_execute", seen)
        try:
            fd.state = states.REVERTED  # a state written at once
            with connection(drive) as conn:
                conn.update_flow_details(fd)
        finally:
            sa.event.remove(fast.engine, "before_cursor_execute", seen)
        reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(reads) == 1 and "owner" in reads[0]  # the fence alone
        with connection(fast) as conn:
            got = next(iter(conn.get_logbook(book.uuid)))
        assert sorted(ad.name for ad in got) == ["retry-b", "task-a", "task-c"]

    def test_a_drive_that_stops_on_a_cancel_starts_no_step_once_asked(
        self, store: Store, fast: Any
    ) -> None:
        """The write of a step's RUNNING reads the flow's note in its
        transaction: once the row asks the flow to cancel, it raises
        :class:`CancelSeen` and writes nothing, so the step stays PENDING.
        Other writes (a revert) go on; a drive that does not stop on a
        cancel writes the RUNNING."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        step = by_name(fd, "task-a")
        step.state = states.PENDING
        with connection(fast) as conn:
            conn.update_atom_details(step)

        def stored() -> str:
            with connection(fast) as conn:
                got = conn.get_logbook(book.uuid)
            return str(by_name(next(iter(got)), "task-a").state)

        drive = fast.fenced(fd.uuid, "runner-a")
        drive.stops_on = flow_rows.is_cancel_note
        step.state = states.RUNNING
        with connection(drive) as conn:
            conn.update_atom_details(step)  # no note yet: written
        assert stored() == states.RUNNING
        step.state = states.PENDING
        with connection(fast) as conn:
            conn.update_atom_details(step)
        assert registry.request_cancel(fd.uuid, "cancelled: enough")
        step.state = states.RUNNING
        with connection(drive) as conn:
            with pytest.raises(logbook.CancelSeen, match="enough"):
                conn.update_atom_details(step)
        assert stored() == states.PENDING
        step.state = states.REVERTING
        with connection(drive) as conn:
            conn.update_atom_details(step)
        assert stored() == states.REVERTING
        step.state = states.RUNNING
        with connection(fast.fenced(fd.uuid, "runner-a")) as conn:
            conn.update_atom_details(step)
        assert stored() == states.RUNNING

    def test_the_end_of_a_flow_by_its_owner_is_fenced(
        self, store: Store, fast: Any
    ) -> None:
        """The runner's end of a flow removes it only while its row names
        the runner; else nothing is removed."""
        registry = flow_rows.FlowRegistry(store)
        book = saved_book(registry, fast, "book", "runner-a")
        fd = next(iter(book))
        assert take_over(registry, fd.uuid, "runner-b")
        with pytest.raises(logbook.FlowFenced, match="runner-b"):
            flow_rows.end_flow(registry, fd.uuid, owner="runner-a")
        assert registry.get(fd.uuid) is not None
        with connection(fast) as conn:
            assert [f.uuid for f in conn.get_logbook(book.uuid)] == [fd.uuid]
        atoms = store.tables.tf_atomdetails
        steps = sa.select(sa.func.count()).where(atoms.c.parent_uuid == fd.uuid)
        with store.engine.connect() as db:
            assert db.execute(steps).scalar_one() == len(fd)
        assert flow_rows.end_flow(registry, fd.uuid, owner="runner-b")
        assert registry.get(fd.uuid) is None
        with connection(fast) as conn:  # its steps and its detail gone
            assert list(conn.get_logbook(book.uuid)) == []
        with store.engine.connect() as db:  # no step's row left behind
            assert db.execute(steps).scalar_one() == 0
        # a flow already gone is not another's: nothing to fence
        assert not flow_rows.end_flow(registry, fd.uuid, owner="runner-a")

    def test_busy_atoms_name_the_running_step(self, fast: Any) -> None:
        seen: list[Any] = []
        flow_ids: list[str] = []

        class Probe(task.Task):  # type: ignore[misc]
            def execute(self) -> None:
                seen.append(logbook.busy_atoms(fast, flow_ids[0]))

        book = models.LogBook("probe")
        with connection(fast) as conn:
            conn.save_logbook(book)
        flow = linear_flow.Flow("probe").add(Probe(name="probe"))
        engine = engines.load(flow, book=book, backend=fast)
        flow_ids.append(engine.storage.flow_uuid)
        engine.run()
        assert seen == [[("probe", states.RUNNING)]]
        assert logbook.busy_atoms(fast, flow_ids[0]) == []
        assert logbook.busy_atoms(fast, "no-such-flow") == []

    def test_flow_suspends_and_resumes(self, fast: Any) -> None:
        run_id = models.uuidutils.generate_uuid()
        book = models.LogBook(f"run-{run_id}")
        with connection(fast) as conn:
            conn.save_logbook(book)
        engine = engines.load_from_factory(
            make_flow,
            factory_args=[5],
            store={"seed": 10, "run_id": run_id},
            book=book,
            backend=fast,
        )

        def park(state: str, details: dict[str, Any]) -> None:
            if details.get("task_name") == "step1":
                engine.suspend()

        engine.atom_notifier.register(states.SUCCESS, park)
        engine.run()
        with connection(fast) as conn:
            fd = next(iter(conn.get_logbook(book.uuid)))
        assert fd.state == states.SUSPENDED
        atom_states = {ad.name: ad.state for ad in fd}
        assert atom_states["step0"] == atom_states["step1"] == states.SUCCESS
        assert {atom_states[f"step{i}"] for i in (2, 3, 4)} == {states.PENDING}

        resumed = engines.load_from_detail(fd, backend=fast)
        resumed.run()
        assert resumed.storage.fetch("r4") == 15
        with connection(fast) as conn:
            fd = next(iter(conn.get_logbook(book.uuid)))
        assert fd.state == states.SUCCESS
        assert {EXECUTED[(run_id, f"step{i}")] for i in range(5)} == {1}

    @pytest.mark.parametrize("fail", [False, True])
    def test_a_run_stores_what_stock_stores(
        self, fast: Any, stock: Any, fail: bool
    ) -> None:
        # saves skip what the stock backend re-reads and rewrites: the rows
        # a whole run leaves must still be the same
        def run(backend: Any) -> dict[str, Any]:
            run_id = models.uuidutils.generate_uuid()
            book = models.LogBook(f"run-{run_id}")
            with connection(backend) as conn:
                conn.save_logbook(book)
            flow = make_flow(3)
            if fail:
                flow.add(Boom(name="boom"))
            engine = engines.load(
                flow, store={"seed": 1, "run_id": run_id}, book=book, backend=backend
            )
            with contextlib.suppress(RuntimeError):
                engine.run()
            with connection(backend) as conn:
                fd = next(iter(conn.get_logbook(book.uuid)))
            return {
                "flow": fd.state,
                "atoms": {
                    ad.name: (
                        ad.state,
                        ad.intention,
                        ad.results if ad.name.startswith("step") else None,
                        ad.failure is None,
                    )
                    for ad in fd
                },
            }

        got = run(fast)
        assert got == run(stock)
        assert got["flow"] == (states.REVERTED if fail else states.SUCCESS)

    def test_progress_rides_along_and_states_are_written_at_once(
        self, store: Store, fast: Any, stock: Any
    ) -> None:
        # every state change is in the database before the next step runs;
        # progress-only saves go out with the next write, so a run takes
        # fewer transactions and still leaves stock's rows, progress too
        def run(backend: Any) -> tuple[dict[str, Any], list[Any], int]:
            run_id = models.uuidutils.generate_uuid()
            book = models.LogBook(f"run-{run_id}")
            with connection(backend) as conn:
                conn.save_logbook(book)
            flow = make_flow(3)
            flow.add(Probe(name="probe", inject={"book_id": book.uuid}))
            engine = engines.load(
                flow, store={"seed": 1, "run_id": run_id}, book=book, backend=backend
            )
            PROBED[book.uuid] = (backend, [])
            commits = 0

            def count(*_: Any) -> None:
                nonlocal commits
                commits += 1

            sa.event.listen(store.engine, "commit", count)
            try:
                engine.run()
            finally:
                sa.event.remove(store.engine, "commit", count)
            with connection(backend) as conn:
                fd = next(iter(conn.get_logbook(book.uuid)))
            rows = {
                ad.name: (ad.state, ad.intention, ad.meta, ad.results)
                for ad in fd
                if ad.name.startswith(("step", "probe"))
            }
            return rows, PROBED.pop(book.uuid)[1], commits

        fast_rows, fast_seen, fast_commits = run(fast.unfenced())
        stock_rows, stock_seen, stock_commits = run(stock)
        assert fast_rows == stock_rows
        assert {row[2].get("progress") for row in fast_rows.values()} == {1.0}
        assert fast_seen == stock_seen == [{states.SUCCESS}]
        # stock saves each of the 4 tasks 4 times (RUNNING, progress 0.0,
        # SUCCESS, progress 1.0), each in a transaction; here twice
        assert fast_commits <= stock_commits - 2 * 4


#: book id -> (backend, what the probe saw)
PROBED: dict[str, tuple[Any, list[Any]]] = {}


class Probe(task.Task):  # type: ignore[misc]
    """Records the stored states of the steps before it, while it runs."""

    def execute(self, book_id: str) -> None:
        backend, seen = PROBED[book_id]
        with connection(backend) as conn:
            fd = next(iter(conn.get_logbook(book_id)))
        seen.append({ad.state for ad in fd if ad.name.startswith("step")})


class Boom(task.Task):  # type: ignore[misc]
    def execute(self) -> None:
        raise RuntimeError("boom")


class TestLogbook(LogbookContract):
    @pytest.fixture
    def store(self) -> Iterator[Store]:
        with Store("sqlite://") as store:
            yield store


def test_pinned_taskflow_internals() -> None:
    """What logbook.py relies on in taskflow's impl_sqlalchemy still exists."""
    engine = sa.create_engine("sqlite://")
    stock = impl_sqlalchemy.SQLAlchemyBackend({}, engine=engine)
    for name in ("_upgrade_lock", "_validated", "_max_retries"):
        assert hasattr(stock, name), name
    params = list(inspect.signature(impl_sqlalchemy.Connection).parameters)
    assert params == ["backend", "upgrade_lock"]
    conn = impl_sqlalchemy.Connection(stock, stock._upgrade_lock)
    fast = logbook.Connection(
        logbook.Backend(engine, tables.tables("x_")), stock._upgrade_lock
    )
    assert set(vars(fast)) == set(vars(conn)) | {"fence", "drive"}
    assert impl_sqlalchemy._Alchemist(conn._tables)._tables is conn._tables
    for name in (
        "convert_book",
        "convert_flow_detail",
        "convert_atom_detail",
        "populate_book",
        "populate_flow_detail",
        "flow_query_iter",
        "atom_query_iter",
    ):
        assert callable(getattr(impl_sqlalchemy._Alchemist, name)), name
    populate = inspect.getsource(impl_sqlalchemy._Alchemist.populate_book)
    assert "flow_query_iter" in populate  # what the converter's reads replace
    engine.dispose()
