"""One bad signal, or one row of broken data, never stalls other deployments.

On real PostgreSQL (which refuses NUL characters in text) with the dev
cloud: signals holding NUL characters and lone surrogates arrive through a
TempURL, a Zaqar queue, HEAT_SIGNAL (``Swflows.signal``) and the WSGI
signal endpoint, while control deployments run; the controls complete, and
the poisoned deployments end with storable values.  A parked flow whose
stored data cannot be read does not stall the others either: its
deployment ends FAILED, kind ``internal_error``.  Last, fuzzed signal
bodies go through the real watcher while control deployments complete.
"""

from __future__ import annotations

import contextlib
import json
import time
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.push import authtoken, serving
from swflows import exceptions, model, outcomes, signals, states
from swflows.api import Swflows
from swflows.persistence import Store
from swflows.wsgi.signal import make_app
from tests.functional import test_runner as runner_tests
from tests.functional.db_fixtures import *  # noqa: F403 (fixtures)
from tests.functional.db_fixtures import SECRET_KEY, unique_prefix
from tests.functional.fakeserver import FakeServer, ok_responder
from tests.functional.test_flows import script_config
from tests.functional.test_runner import signal_inputs
from tests.functional.test_wsgi_signal import stack_user_token

pytestmark = pytest.mark.xdist_group("signal-isolation")

#: what a broken agent or a hostile server may send
POISON = {
    "deploy_status_code": "1\u0000",
    "deploy_stdout": "out\u0000put \ud800",
    "deploy_stderr": "\udfff",
    "result": {"k\u0000": ["\u0000", "\ud83d"]},
    "problem": "bad\u0000",
}
#: Zaqar itself refuses to enqueue a lone surrogate (503): NUL only there
NUL_ONLY = {
    **POISON,
    "deploy_stdout": "out\u0000put \u0000",
    "deploy_stderr": "\u0000",
    "result": {"k\u0000": ["\u0000", "\u0000"]},
}
TRANSPORTS = ("TEMP_URL_SIGNAL", "ZAQAR_SIGNAL", "HEAT_SIGNAL")


@contextlib.contextmanager
def on_postgresql(
    cloud: dict[str, Any], folder: Path, pg_url: str, **overrides: Any
) -> Iterator[Swflows]:
    """A Swflows on PostgreSQL, its tables under a prefix of its own."""
    with runner_tests.instance(
        cloud,
        folder,
        pg_url,
        database__table_prefix=unique_prefix(),
        database__secret_key=SECRET_KEY.decode(),
        **overrides,
    ) as made:
        yield made


def until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    return runner_tests.until(check, timeout, what)


def finished(sw: Swflows, *deployment_ids: str) -> bool:
    """Whether each deployment ended and its flow is gone."""
    return all(
        sw.show(d).status != states.IN_PROGRESS and not sw.list_flows(deployment_id=d)
        for d in deployment_ids
    )


def poison_responder(item: dict[str, Any]) -> dict[str, Any]:
    inputs = {i["name"]: i.get("value") for i in item["inputs"]}
    zaqar = inputs.get("deploy_signal_transport") == "ZAQAR_SIGNAL"
    return dict(NUL_ONLY if zaqar else POISON)


def flow_state(sw: Swflows, flow_id: str) -> str | None:
    """The flow's state in the registry (None once its row is gone)."""
    row = sw.runner.registry.get(flow_id)
    return None if row is None else row.state


def assert_poison_stored(sw: Swflows, deployment_id: str) -> None:
    """The poisoned signal ended the deployment, its values made storable."""
    dep = sw.show(deployment_id)
    assert dep.status == states.FAILED, dep.status_reason
    reason = dep.reason or {}
    assert reason["kind"] == states.ReasonKind.EXIT_CODE.value
    assert reason["status_code"] == "1\ufffd"
    assert "output_values.deploy_status_code" in reason["altered"]["replaced"]
    assert dep.status_reason.startswith(
        "deploy_status_code : Deployment exited with non-zero status code: 1\ufffd"
    )
    assert "problem : bad\ufffd" in dep.status_reason
    assert dep.output_values["deploy_status_code"] == "1\ufffd"
    assert dep.output_values["deploy_stdout"] == "out\ufffdput \ufffd"
    assert dep.output_values["deploy_stderr"] == "\ufffd"
    assert dep.output_values["result"] == {"k\ufffd": ["\ufffd", "\ufffd"]}


def test_nul_signals_through_every_transport_stall_nothing(
    devcloud: dict[str, Any], tmp_path: Path, pg_url: str
) -> None:
    with on_postgresql(devcloud, tmp_path, pg_url) as sw:
        config = script_config(sw)
        poisoned: dict[str, str] = {}
        servers: list[FakeServer] = []
        with contextlib.ExitStack() as stack:
            for transport in TRANSPORTS:
                server_id = str(uuid.uuid4())
                dep = sw.deploy(
                    server_id,
                    config.id,
                    signal_transport=transport,
                    timeout=300,
                    wait=False,
                )
                poisoned[transport] = dep.id
                server = FakeServer(sw, server_id, poison_responder, interval=0.1)
                servers.append(stack.enter_context(server))
            for server in servers:
                server.wait_handled(1, timeout=60)
                assert server.handled, "the poisoned signal was not sent"
            # the poisoned signals are in: deployments made now must still run
            controls = []
            for transport in TRANSPORTS:
                server_id = str(uuid.uuid4())
                dep = sw.deploy(
                    server_id,
                    config.id,
                    signal_transport=transport,
                    timeout=300,
                    wait=False,
                )
                controls.append(dep.id)
                stack.enter_context(FakeServer(sw, server_id, ok_responder))
            until(
                lambda: finished(sw, *controls, *poisoned.values()),
                what="the controls and the poisoned deployments to finish",
            )
        for deployment_id in controls:
            assert sw.show(deployment_id).status == states.COMPLETE
        for deployment_id in poisoned.values():
            assert_poison_stored(sw, deployment_id)
        assert sum(sw.runner.watcher.failures.values()) == 0
        for deployment_id in [*controls, *poisoned.values()]:
            sw.undeploy(deployment_id)


def test_a_nul_signal_through_the_endpoint_is_stored(
    devcloud: dict[str, Any], tmp_path: Path, pg_url: str
) -> None:
    with (
        on_postgresql(devcloud, tmp_path, pg_url) as sw,
        serving(make_app(sw, authtoken(devcloud))) as endpoint,
    ):
        config = script_config(sw)
        dep = sw.deploy(
            str(uuid.uuid4()),
            config.id,
            signal_transport="HEAT_SIGNAL",
            timeout=300,
            wait=False,
        )
        token = stack_user_token(signal_inputs(sw, dep.id))
        response = requests.post(
            f"{endpoint}/v1/deployments/{dep.id}/signal",
            data=json.dumps(POISON).encode(),
            headers={"X-Auth-Token": token, "Content-Type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json() == {"deployment_id": dep.id, "accepted": True}
        until(lambda: finished(sw, dep.id), what="the deployment to finish")
        assert_poison_stored(sw, dep.id)
        sw.undeploy(dep.id)


def test_a_row_of_broken_data_stalls_nothing(
    devcloud: dict[str, Any], tmp_path: Path, pg_url: str
) -> None:
    with on_postgresql(devcloud, tmp_path, pg_url) as sw:
        config = script_config(sw)
        broken = sw.deploy(str(uuid.uuid4()), config.id, timeout=300, wait=False)
        row = until(
            lambda: next(iter(sw.list_flows(deployment_id=broken.id)), None),
            what="the flow to be recorded",
        )
        until(
            lambda: flow_state(sw, row.id) == "PARKED",
            what="the flow to park",
        )
        flows = sw.store.tables.flows
        with sw.store._engine.begin() as conn:
            waiting = conn.scalar(
                sa.select(flows.c.waiting).where(flows.c.id == row.id)
            )
            waiting = {**waiting, "deadline": "soon", "timeout": "never"}
            conn.execute(
                flows.update().where(flows.c.id == row.id).values(waiting=waiting)
            )
        sw.runner.wake()
        server_id = str(uuid.uuid4())
        control = sw.deploy(server_id, config.id, timeout=300, wait=False)
        with FakeServer(sw, server_id, ok_responder):
            until(lambda: finished(sw, control.id), what="the control to finish")
        assert sw.show(control.id).status == states.COMPLETE
        until(lambda: finished(sw, broken.id), what="the broken one to end")
        ended = sw.show(broken.id)
        assert ended.status == states.FAILED
        reason = ended.reason or {}
        assert reason["kind"] == states.ReasonKind.INTERNAL_ERROR.value
        assert reason["attempts"] == 3
        assert reason["detail"].startswith("ValueError: could not convert")
        assert ended.status_reason.startswith(
            "Internal error: swflows failed 3 times handling this deployment"
        )
        assert sw.runner.watcher.failures["check"] >= 3
        sw.undeploy(control.id)
        sw.undeploy(broken.id)


@pytest.mark.parametrize("payload", [POISON, {"deploy_status_code": "e" * 90_000}])
def test_every_database_stores_the_same(
    tmp_path: Path, pg_url: str, mysql_url: str, payload: dict[str, Any]
) -> None:
    """SQLite, PostgreSQL and MariaDB keep a poisoned outcome identically."""
    outcome = signals.outcome(payload, script_outputs())
    stored = []
    for url in (f"sqlite:///{tmp_path / 's.sqlite'}", pg_url, mysql_url):
        prefix = "swflows_" if url.startswith("sqlite") else unique_prefix()
        with Store(url, table_prefix=prefix, secret_key=SECRET_KEY) as store:
            dep = store.create_deployment(
                model.Deployment(
                    id=model.new_id(),
                    server_id="srv",
                    config_id=None,
                    source_config_id=None,
                    action="CREATE",
                    status=states.IN_PROGRESS,
                )
            )
            services = types.SimpleNamespace(store=store)
            assert outcomes.record_outcome(services, dep.id, 0, outcome)  # type: ignore[arg-type]
            got = store.get_deployment(dep.id)
            stored.append(
                (got.status, got.status_reason, got.reason, got.output_values)
            )
    assert stored[0] == stored[1] == stored[2]
    assert stored[0][1] == signals.storable_outcome(outcome).status_reason
    assert len(stored[0][1]) <= signals.MAX_REASON_CHARS


# ---------------------------------------------------------------- fuzzing

#: texts biased to what databases refuse: NUL, lone surrogates, controls
TEXTS = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\x00", "\ud800", "\udfff", "\x1c", "\u2028", "\ufeff"]),
        st.characters(),
    ),
    max_size=40,
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXTS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4)
    ),
    max_leaves=12,
)
SIGNALS = st.fixed_dictionaries(
    {},
    optional={
        "deploy_status_code": VALUES,
        "deploy_stdout": VALUES,
        "deploy_stderr": VALUES,
        "deploy_signal": st.just("started") | TEXTS,
        "result": VALUES,
        "problem": VALUES,
    },
).map(lambda body: json.dumps(body).encode())
BODIES = st.one_of(
    SIGNALS,
    st.binary(max_size=60),
    VALUES.map(lambda value: json.dumps(value).encode()),
    st.sampled_from([b"", b" \n", b"\x1c", b"\xef\xbb\xbf{}", b"{}", b"NaN"]),
)


# the runner's own threads (retry jitter, the watcher's poll jitter) draw
# from the random module while hypothesis runs an example
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
def test_fuzzed_signals_through_the_real_watcher(
    devcloud: dict[str, Any], tmp_path: Path, pg_url: str
) -> None:
    with on_postgresql(devcloud, tmp_path, pg_url) as sw:
        config = script_config(sw)
        sent: list[tuple[str, bytes]] = []

        @settings(
            max_examples=60,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(body=BODIES)
        def send(body: bytes) -> None:
            dep = sw.deploy(
                str(uuid.uuid4()),
                config.id,
                timeout=300,
                wait=False,
                config_transport="POLL_SERVER_HEAT",
            )
            url = signal_inputs(sw, dep.id)["deploy_signal_id"]
            requests.put(url, data=body, timeout=10).raise_for_status()
            sent.append((dep.id, body))

        started = time.monotonic()
        send()
        print(f"fuzzed signals: {len(sent)}")
        # the watcher still serves others: a control deployment completes
        server_id = str(uuid.uuid4())
        control = sw.deploy(server_id, config.id, timeout=300, wait=False)
        with FakeServer(sw, server_id, ok_responder):
            until(lambda: finished(sw, control.id), what="the control to finish")
        assert sw.show(control.id).status == states.COMPLETE

        def outcome_known(deployment_id: str, body: bytes) -> bool:
            """A final signal ended its deployment; others leave it waiting."""
            expected = expect(body)
            dep = sw.show(deployment_id)
            if expected is None:
                return dep.status == states.IN_PROGRESS
            return finished(sw, deployment_id) and dep.status == expected

        until(
            lambda: all(outcome_known(d, body) for d, body in sent),
            what="every fuzzed signal to be seen",
        )
        for deployment_id, _ in sent:
            dep = sw.show(deployment_id)
            for text in strings_of([dep.status_reason, dep.reason, dep.output_values]):
                assert "\x00" not in text, deployment_id
                text.encode("utf-8")  # no lone surrogate
        assert sum(sw.runner.watcher.failures.values()) == 0
        print(f"fuzz run took {time.monotonic() - started:.1f} s")
        for deployment_id, _ in sent:
            if sw.show(deployment_id).status == states.IN_PROGRESS:
                sw.cancel(deployment_id)
        until(lambda: finished(sw, *(d for d, _ in sent)), what="the cancels")


def strings_of(value: Any) -> list[str]:
    """Every string in ``value``, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings_of(k), *strings_of(v)]]
    if isinstance(value, list):
        return [s for item in value for s in strings_of(item)]
    return []


def expect(body: bytes) -> str | None:
    """The status a body gives, by swflows' own rules; None: still waiting."""
    try:
        payload = signals.parse_payload(body)
    except exceptions.SignalRejected:
        return states.FAILED
    if payload is None or signals.is_progress(payload):
        return None
    return signals.outcome(payload, script_outputs()).status


def script_outputs() -> tuple[Any, ...]:
    return (model.OutputSpec("result"), model.OutputSpec("problem", error_output=True))
