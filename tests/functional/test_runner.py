"""The runner on the dev cloud: parking, the watcher, timeouts, cancel, resume."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from swflows import conf as sw_conf
from swflows import exceptions, failpoints, outcomes, signals, states
from swflows.api import Swflows
from swflows.clients.messaging import SignedUrlClient
from swflows.engine import batching
from swflows.persistence import flow_registry as flow_rows
from swflows.stack_users import user_name
from swflows.tasks.identity import EnsureStackUser
from tests.functional import db_fixtures, flowkit
from tests.functional.db_fixtures import mysql_url, pg_url  # noqa: F401 (fixtures)
from tests.functional.fakeserver import FakeServer
from tests.functional.flowkit import leftovers
from tests.functional.test_flows import script_config

sw = flowkit.sw


@contextlib.contextmanager
def instance(
    cloud: dict[str, Any],
    folder: Path,
    database: str | None = None,
    **overrides: Any,
) -> Iterator[Swflows]:
    """A Swflows on ``database`` (default: a SQLite file in ``folder``);
    ``group__name=value`` overrides options."""
    path = flowkit.write_conf(
        cloud,
        folder / "swflows.conf",
        database=database or f"sqlite:///{folder / 'swflows.sqlite'}",
    )
    conf = sw_conf.get_conf(config_files=[str(path)])
    for key, value in overrides.items():
        group, _, name = key.rpartition("__")
        conf.set_override(name, value, group or None)
    made = Swflows.from_conf(conf)
    try:
        yield made
    finally:
        made.close()
        made.store.close()


def until(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


def parked(sw: Swflows, deployment_id: str) -> flow_rows.FlowRow | None:
    for row in sw.list_flows(deployment_id=deployment_id):
        if row.state == flow_rows.PARKED:
            return row
    return None


def signal_inputs(sw: Swflows, deployment_id: str) -> dict[str, Any]:
    dep = sw.show(deployment_id)
    assert dep.config_id is not None
    config = sw.get_config(dep.config_id)
    return {i.name: i.value for i in config.inputs}


def put_signal(sw: Swflows, deployment_id: str, body: dict[str, Any]) -> None:
    """PUT a signal to a TEMP_URL_SIGNAL deployment's TempURL, as an agent."""
    inputs = signal_inputs(sw, deployment_id)
    resp = requests.put(inputs["deploy_signal_id"], data=json.dumps(body), timeout=10)
    resp.raise_for_status()


FINAL = {"deploy_status_code": 0, "deploy_stdout": "ok", "result": "r"}
#: the "started" progress signal an agent may send first (not a final one)
STARTED = {"deploy_signal": "started"}


def test_parked_deployment_holds_no_thread(sw: Swflows) -> None:
    config = script_config(sw)
    server = str(uuid.uuid4())
    dep = sw.deploy(server, config.id, timeout=60, wait=False)
    row = until(lambda: parked(sw, dep.id), what="the flow to park")
    assert row.owner is None and row.waiting is not None
    assert row.waiting["transport"] == "TEMP_URL_SIGNAL"
    assert sw.runner.driving == 0
    assert sw.show(dep.id).status == states.IN_PROGRESS
    put_signal(sw, dep.id, FINAL)
    done = sw.wait(dep.id, timeout=30)
    assert done.status == states.COMPLETE
    assert done.output_values["result"] == "r"
    assert sw.list_flows(deployment_id=dep.id) == []
    assert leftovers(sw, dep.id) == {}  # the signal object went with the flow
    sw.undeploy(dep.id)


def test_execution_timeout(sw: Swflows) -> None:
    config = script_config(sw)
    dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=1, wait=True)
    assert dep.status == states.FAILED
    assert (dep.reason or {})["kind"] == states.ReasonKind.TIMEOUT.value
    assert sw.list_flows(deployment_id=dep.id) == []
    assert leftovers(sw, dep.id) == {}
    sw.undeploy(dep.id)


def test_never_picked_up(devcloud: dict[str, Any], tmp_path: Path) -> None:
    with instance(devcloud, tmp_path, delivery_timeout=1) as sw:
        config = script_config(sw)
        dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=True)
        assert dep.status == states.FAILED
        assert (dep.reason or {})["kind"] == states.ReasonKind.NEVER_PICKED_UP.value
        assert leftovers(sw, dep.id) == {}
        sw.undeploy(dep.id)


def test_started_signal_counts_as_picked_up(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path, delivery_timeout=2) as sw:
        config = script_config(sw)
        dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(sw, dep.id), what="the flow to park")
        put_signal(sw, dep.id, signals.progress_payload())
        until(
            lambda: (
                (row := parked(sw, dep.id)) is not None
                and (row.waiting or {}).get("picked_up")
            ),
            what="the started signal to be seen",
        )
        time.sleep(2.5)  # past the delivery deadline: it was picked up
        assert sw.show(dep.id).status == states.IN_PROGRESS
        put_signal(sw, dep.id, FINAL)
        assert sw.wait(dep.id, timeout=30).status == states.COMPLETE
        sw.undeploy(dep.id)


def test_metadata_read_through_the_api_counts_as_picked_up(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path, delivery_timeout=2) as sw:
        config = script_config(sw)
        server = str(uuid.uuid4())
        dep = sw.deploy(
            server,
            config.id,
            timeout=60,
            wait=False,
            signal_transport="HEAT_SIGNAL",
            config_transport="POLL_SERVER_HEAT",
        )
        until(lambda: parked(sw, dep.id), what="the flow to park")
        assert [d["id"] for d in sw.server_metadata(server)] == [
            sw.show(dep.id).config_id
        ]
        time.sleep(2.5)
        assert sw.show(dep.id).status == states.IN_PROGRESS
        assert sw.signal(dep.id, FINAL)
        assert sw.wait(dep.id, timeout=30).status == states.COMPLETE
        sw.undeploy(dep.id)
        assert leftovers(sw, dep.id) == {}


def test_cancel_then_late_signal_is_ignored_and_swept(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    # sweeps only when the test asks for one
    with instance(devcloud, tmp_path, watcher__sweep_interval=3600.0) as sw:
        config = script_config(sw)
        dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(sw, dep.id), what="the flow to park")
        url = signal_inputs(sw, dep.id)["deploy_signal_id"]
        cancelled = sw.cancel(dep.id, "operator")
        assert cancelled.status == states.FAILED
        assert (cancelled.reason or {})["kind"] == states.ReasonKind.CANCELLED.value
        sw.wait(dep.id, timeout=30)
        assert leftovers(sw, dep.id) == {}
        with pytest.raises(exceptions.InvalidTransition):
            sw.cancel(dep.id)
        # a late agent PUTs anyway: the TempURL is still valid and Swift
        # recreates the object; the deployment keeps its outcome and the
        # watcher's sweep removes the object
        requests.put(url, data=json.dumps(FINAL), timeout=10).raise_for_status()
        assert leftovers(sw, dep.id) != {}
        assert sw.runner.watcher.sweeper.sweep() == [f"{dep.id}/1"]
        assert leftovers(sw, dep.id) == {}
        assert (sw.show(dep.id).reason or {})["kind"] == (
            states.ReasonKind.CANCELLED.value
        )
        sw.undeploy(dep.id)


def test_stores_late_signals_bring_back_after_an_undeploy_are_swept(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    # an agent's signal sent again (its first went through, the answer was
    # lost) or in flight while the undeploy removed the store: the TempURL
    # and the signed queue URL are still valid, and Swift and Zaqar make
    # the object and the queue again, for a deployment no longer in the
    # store
    with instance(devcloud, tmp_path, watcher__sweep_interval=3600.0) as sw:
        config = script_config(sw)
        deps = {
            transport: sw.deploy(
                str(uuid.uuid4()),
                config.id,
                timeout=60,
                wait=False,
                signal_transport=transport,
            ).id
            for transport in ("TEMP_URL_SIGNAL", "ZAQAR_SIGNAL")
        }
        swift_dep, zaqar_dep = deps["TEMP_URL_SIGNAL"], deps["ZAQAR_SIGNAL"]
        until(
            lambda: all(parked(sw, dep_id) for dep_id in deps.values()),
            what="the flows to park",
        )
        url = signal_inputs(sw, swift_dep)["deploy_signal_id"]
        signed = signal_inputs(sw, zaqar_dep)["deploy_queue_signed_url"]
        if isinstance(signed, str):
            signed = json.loads(signed)
        requests.put(url, data=json.dumps(FINAL), timeout=10).raise_for_status()
        SignedUrlClient(signed).post(FINAL, ttl=600)
        for dep_id in deps.values():
            assert sw.wait(dep_id, timeout=60).status == states.COMPLETE
            sw.undeploy(dep_id)
        assert leftovers(sw, *deps.values()) == {}

        requests.put(url, data=json.dumps(FINAL), timeout=10).raise_for_status()
        SignedUrlClient(signed).post(FINAL, ttl=600)
        assert set(leftovers(sw, *deps.values())) == {"objects", "queues"}
        swept = sw.runner.watcher.sweeper.sweep()
        assert sorted(swept) == sorted([f"{swift_dep}/1", f"{zaqar_dep}/1"])
        assert leftovers(sw, *deps.values()) == {}


def test_a_stack_user_made_again_after_its_undeploy_is_swept(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    # a conductor paused between EnsureStackUser's fence check and its
    # Keystone request makes the user again once its flow's new owner has
    # undeployed the deployment: the sweep removes it, and only it
    with instance(
        devcloud,
        tmp_path,
        watcher__sweep_interval=3600.0,
        zaqar_signal_auth="credentials",  # a stack user per deployment
    ) as sw:
        config = script_config(sw)
        gone, kept = (
            sw.deploy(
                str(uuid.uuid4()),
                config.id,
                timeout=60,
                wait=False,
                signal_transport="ZAQAR_SIGNAL",
            ).id
            for _ in range(2)
        )
        until(lambda: parked(sw, gone) and parked(sw, kept), what="both to park")
        sw.cancel(gone)
        sw.wait(gone, timeout=30)
        sw.undeploy(gone)
        assert leftovers(sw, gone) == {}
        assert set(leftovers(sw, kept)) >= {"users", "projects"}
        sweeper = sw.runner.watcher.sweeper
        assert sweeper.sweep_stack_users() == []
        # the paused step goes on: its request reaches Keystone now
        EnsureStackUser("undeploy").execute(sw.services, gone)
        # and another installation sharing the domain has one of its own
        stranger = str(uuid.uuid4())
        users = sw.services.clients.stack_users
        project = users.ensure_project(user_name(stranger))
        users.ensure_user(user_name(stranger), project, "Aa1-" + uuid.uuid4().hex)
        assert set(leftovers(sw, gone)) == {"users", "projects"}
        assert sweeper.sweep_stack_users() == [gone]
        assert leftovers(sw, gone) == {}
        assert leftovers(sw, kept)["users"] == [user_name(kept)]
        assert leftovers(sw, stranger)["users"] == [user_name(stranger)]
        assert sweeper.sweep_stack_users() == []
        found = users.find_user(user_name(stranger))
        assert found is not None
        users.delete_user(found.id)
        users.delete_project(project)
        sw.cancel(kept)
        sw.wait(kept, timeout=30)
        sw.undeploy(kept)
        assert leftovers(sw, kept, stranger) == {}


def test_two_signals_within_one_second_are_both_seen(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    # the watcher only cycles when told to: each cycle below is ours
    with instance(devcloud, tmp_path, watcher__poll_interval=3600.0) as sw:
        config = script_config(sw)
        dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(sw, dep.id), what="the flow to park")
        watcher = sw.runner.watcher
        for _ in range(10):
            # both PUTs must land within one whole second (Last-Modified's
            # resolution); start right after a second ticks over.  On a
            # loaded machine the pair may straddle a second: the next try's
            # progress PUT overwrites the final one before any cycle sees it.
            until(lambda: time.time() % 1 < 0.3, what="a fresh second")
            second = int(time.time())
            put_signal(sw, dep.id, signals.progress_payload())
            assert watcher.cycle() == []
            put_signal(sw, dep.id, FINAL)
            if int(time.time()) == second:
                break
        else:  # pragma: no cover
            pytest.fail("could not PUT twice within one second in 10 tries")
        assert watcher.cycle(), "the final signal, in the same second, was missed"
        assert sw.wait(dep.id, timeout=30).status == states.COMPLETE
        sw.undeploy(dep.id)


def test_a_new_runner_resumes_parked_flows(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    with instance(devcloud, tmp_path) as first:
        config = script_config(first)
        server = str(uuid.uuid4())
        dep = first.deploy(server, config.id, timeout=60, wait=False)
        until(lambda: parked(first, dep.id), what="the flow to park")
    # the first runner is gone; its flow waits in the database alone
    with instance(devcloud, tmp_path) as second:
        assert parked(second, dep.id) is not None
        with FakeServer(second, server):
            done = second.wait(dep.id, timeout=30)
        assert done.status == states.COMPLETE
        assert second.list_flows() == []
        second.undeploy(dep.id)
        assert leftovers(second, dep.id) == {}


@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_park_and_resume_on_a_server_database(
    devcloud: dict[str, Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    backend: str,
) -> None:
    """A flow parks in PostgreSQL or MariaDB, and a new runner there
    resumes it when its signal lands."""
    url = request.getfixturevalue("pg_url" if backend == "postgresql" else "mysql_url")
    database = {
        "database__table_prefix": db_fixtures.unique_prefix(),
        "database__secret_key": db_fixtures.SECRET_KEY.decode(),
    }
    with instance(devcloud, tmp_path, url, **database) as first:
        config = script_config(first)
        dep = first.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(first, dep.id), what="the flow to park")
    with instance(devcloud, tmp_path, url, **database) as second:
        put_signal(second, dep.id, FINAL)
        done = second.wait(dep.id, timeout=30)
        assert done.status == states.COMPLETE
        assert done.output_values["result"] == "r"
        assert second.list_flows() == []
        second.undeploy(dep.id)
        assert leftovers(second, dep.id) == {}


def test_two_runners_never_drive_one_flow(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    count = 8
    with (
        instance(devcloud, tmp_path) as one,
        instance(devcloud, tmp_path) as two,
    ):
        resumed: dict[str, list[str]] = {}
        lock = threading.Lock()
        for runner in (one.runner, two.runner):
            original = runner._load_and_submit

            def counted(
                flow_id: str,
                claim: Any = None,
                _original: Any = original,
                _owner: str = runner.owner,
            ) -> bool:
                with lock:
                    resumed.setdefault(flow_id, []).append(_owner)
                return bool(_original(flow_id, claim))

            runner._load_and_submit = counted  # type: ignore[method-assign]
        config = script_config(one)
        deps = [
            one.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
            for _ in range(count)
        ]
        until(lambda: all(parked(one, d.id) for d in deps), what="every flow to park")
        for dep in deps:
            put_signal(one, dep.id, FINAL)
        for dep in deps:
            assert one.wait(dep.id, timeout=60).status == states.COMPLETE
        assert len(resumed) == count
        assert all(len(owners) == 1 for owners in resumed.values()), resumed
        for dep in deps:
            one.undeploy(dep.id)
        assert leftovers(one, *(d.id for d in deps)) == {}


def runner_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("swflows-"))


@pytest.mark.xdist_group("scale")
def test_a_thousand_parked_deployments_on_a_few_threads(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    """1,000 deployments wait at once; the runner's threads stay few.

    A sample of them is then signalled: the watcher finds each among the
    thousand with one container listing per cycle, and resumes it.  The
    rest are left parked in the test's database, which is thrown away with
    the test's own signal container.
    """
    count, servers, workers, sample = 1000, 50, 4, 40
    container = f"scale-{uuid.uuid4().hex[:8]}"
    with instance(
        devcloud,
        tmp_path,
        runner__workers=workers,
        # the watcher cycles when woken (on each park, and by the test);
        # it is held between cycles while the test counts its own, and
        # sweeps (which list containers too) come at none of them
        watcher__poll_interval=3600.0,
        watcher__sweep_interval=3600.0,
        # the test's own container: the listing holds these objects only
        signal_container=container,
    ) as sw:
        swift = sw.services.clients.object_store
        try:
            config = script_config(sw)
            hosts = [str(uuid.uuid4()) for _ in range(servers)]
            peak = runner_threads()
            started = time.monotonic()

            def launch(i: int) -> Any:
                nonlocal peak
                dep = sw.deploy(
                    hosts[i % servers],
                    config.id,
                    timeout=600,
                    wait=False,
                    config_transport="POLL_SERVER_HEAT",
                )
                peak = max(peak, runner_threads())
                return dep

            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                deps = list(pool.map(launch, range(count)))

            def all_parked() -> bool:
                nonlocal peak
                peak = max(peak, runner_threads())
                rows = sw.list_flows()
                return len(rows) == count and all(
                    r.state == flow_rows.PARKED for r in rows
                )

            until(all_parked, timeout=900, what="every flow to park")
            parked_after = time.monotonic() - started
            # its workers, the watcher, the lease renewer, the groups'
            # driver, the rounds' threads (its steps' and its publishes'):
            # nothing per flow
            assert peak <= workers + 3 + 2 * batching.ROUND_THREADS, peak
            assert sw.runner.driving == 0
            with sw.runner.watcher.paused():  # the cycles below are the test's
                before = swift.listing_requests
                assert sw.runner.watcher.cycle() == []
                assert swift.listing_requests - before == 1  # one listing for all

                chosen = deps[:: count // sample]
                signalled = time.monotonic()
                for dep in chosen:
                    put_signal(sw, dep.id, FINAL)
                before = swift.listing_requests
                resumed = sw.runner.watcher.cycle()
                assert swift.listing_requests - before == 1
            assert len(resumed) == len(chosen)
            for dep in chosen:
                assert sw.wait(dep.id, timeout=300).status == states.COMPLETE
            finished = time.monotonic() - signalled
            rows = sw.list_flows()
            assert len(rows) == count - len(chosen)
            assert {r.state for r in rows} == {flow_rows.PARKED}
            assert leftovers(sw, *(d.id for d in chosen)) == {}
            print(
                f"\n{count} deployments parked in {parked_after:.1f} s; "
                f"{len(chosen)} of them finished {finished:.1f} s after their "
                f"signals; runner threads at most {peak}"
            )
        finally:
            swift.delete_container(container, force=True)


def test_a_flow_stored_by_another_version_is_set_aside(
    devcloud: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with instance(devcloud, tmp_path) as first:
        config = script_config(first)
        dep = first.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(first, dep.id), what="the flow to park")
        url = signal_inputs(first, dep.id)["deploy_signal_id"]
    # the signal lands while no runner runs
    requests.put(url, data=json.dumps(FINAL), timeout=10).raise_for_status()
    from swflows import flows

    monkeypatch.setitem(flows.VERSIONS, "deploy", flows.VERSIONS["deploy"] + 1)
    with instance(devcloud, tmp_path) as second:
        [row] = until(
            lambda: [r for r in second.list_flows() if r.state == flow_rows.BROKEN],
            what="the flow to be set aside",
        )
        assert "version" in (row.note or "")
        assert [r.id for r in second.list_interrupted()] == [row.id]
        with pytest.raises(exceptions.FlowError, match="version"):
            second.wait(dep.id, timeout=5)
        # the outcome was recorded; only the flow's own cleanup is held back
        assert second.show(dep.id).status == states.COMPLETE
        assert second.resume() == []  # a BROKEN flow is never resumed blindly


def test_a_sweep_leaves_another_installations_stores(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    shared = f"shared-{uuid.uuid4().hex[:8]}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        instance(devcloud, tmp_path / "a", signal_container=shared) as one,
        instance(devcloud, tmp_path / "b", signal_container=shared) as two,
    ):
        config = script_config(two)
        dep = two.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        until(lambda: parked(two, dep.id), what="the flow to park")
        # its agent said it started: that object is in the shared container
        put_signal(two, dep.id, STARTED)
        assert one.runner.watcher.sweeper.sweep() == []
        assert leftovers(two, dep.id) != {}  # still there, waiting
        put_signal(two, dep.id, FINAL)
        assert two.wait(dep.id, timeout=30).status == states.COMPLETE
        two.undeploy(dep.id)
        assert leftovers(two, dep.id) == {}
        one.services.clients.object_store.delete_container(shared, force=True)


def looking_hourly(
    cloud: dict[str, Any], folder: Path
) -> contextlib.AbstractContextManager[Swflows]:
    """An instance whose watcher polls once an hour: a look the test sees
    is one something asked for."""
    return instance(
        cloud,
        folder,
        watcher__poll_interval=3600.0,
        watcher__max_poll_interval=3600.0,
    )


def test_an_undeploy_right_after_a_cancel_leaves_the_deploy_flow_to_end(
    devcloud: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a cancel records the outcome and wakes the parked flow; an undeploy
    # may remove the row before that flow reads it.  Its action ended
    # (cancelled): the flow only removes its store and ends, it does not
    # revert (which would publish the server again, after its removal)
    with looking_hourly(devcloud, tmp_path) as sw:
        config = script_config(sw)
        dep = sw.deploy(str(uuid.uuid4()), config.id, timeout=60, wait=False)
        row = until(lambda: parked(sw, dep.id), what="the flow to park")
        wake = sw.runner.wake
        monkeypatch.setattr(sw.runner, "wake", lambda: None)
        sw.cancel(dep.id, "operator")
        sw.undeploy(dep.id, wait_timeout=60)
        assert sw.runner.registry.get(row.id) is not None, "it is still parked"
        monkeypatch.setattr(sw.runner, "wake", wake)
        with caplog.at_level("WARNING", logger="swflows"):
            wake()
            sw.runner.wait(row.id, 60)
        assert not [
            r.getMessage() for r in caplog.records if "revert" in r.getMessage()
        ]
        assert leftovers(sw, dep.id) == {}


def test_a_park_looks_at_once_only_when_its_action_ended_already(
    devcloud: dict[str, Any], tmp_path: Path
) -> None:
    # a new flow's signal is read by the next poll, as every waiting one's
    # is: a burst of launches costs no listing per park.  An action ended
    # before its flow parked (here a cancel recorded while its metadata is
    # published) is looked at once, not a poll interval later
    with looking_hourly(devcloud, tmp_path) as sw:
        config = script_config(sw)
        swift = sw.services.clients.object_store
        time.sleep(0.5)  # the watcher's first look, at its start

        def launch(**extra: Any) -> str:
            return sw.deploy(
                str(uuid.uuid4()),
                config.id,
                timeout=60,
                wait=False,
                signal_transport="TEMP_URL_SIGNAL",
                **extra,
            ).id

        before = swift.listing_requests
        deps = [launch() for _ in range(4)]
        until(lambda: all(parked(sw, d) for d in deps), what="the flows to park")
        time.sleep(0.5)  # more than a park's look would take to come
        assert swift.listing_requests == before

        ended = str(uuid.uuid4())

        def cancel_first(name: str) -> None:
            generation = sw.store.get_deployment(ended).generation
            outcomes.record_outcome(
                sw.services, ended, generation, signals.cancelled_outcome("early")
            )

        with failpoints.armed("publish_metadata", cancel_first):
            launch(deployment_id=ended)
            found = until(
                lambda: not sw.list_flows(deployment_id=ended),
                timeout=30,
                what="the flow of the action ended before its park to finish",
            )
        assert found
        assert (sw.show(ended).reason or {})["kind"] == states.ReasonKind.CANCELLED
        for dep in [*deps, ended]:
            if sw.show(dep).status == states.IN_PROGRESS:
                sw.cancel(dep)
            sw.undeploy(dep, wait_timeout=60)
