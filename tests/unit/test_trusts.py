"""Trusts' pure parts: what a trust delegates, its request, the clients
acting through one, and the trust kept sealed beside an owner."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from oslo_context import context as oslo_context

from swflows import conf as sw_conf
from swflows import exceptions, projects, trusts
from swflows.clients import loading
from swflows.clients.cloud import Clients
from swflows.persistence import Store
from swflows.services import Services


def test_a_trust_delegates_the_configured_roles_else_the_callers() -> None:
    assert trusts.delegated_roles(["member", "reader", "member"]) == [
        "member",
        "reader",
    ]
    assert trusts.delegated_roles(["member", "admin"], ["member"]) == ["member"]
    with pytest.raises(exceptions.ValidationError):
        trusts.delegated_roles([])


def test_the_trust_request_impersonates_the_caller_on_its_project() -> None:
    body = trusts.trust_request("u1", "swflows", "p1", ["member"])["trust"]
    assert body == {
        "trustor_user_id": "u1",
        "trustee_user_id": "swflows",
        "project_id": "p1",
        "impersonation": True,
        "roles": [{"name": "member"}],
    }
    assert "expires_at" not in body  # deleted with the deployment instead


def test_only_a_context_with_user_project_and_token_delegates() -> None:
    full = oslo_context.RequestContext(
        auth_token="t", user_id="u", project_id="p", roles=["member"]
    )
    assert trusts.carries_token(full)
    assert not trusts.carries_token(None)
    for made in (
        oslo_context.RequestContext(user_id="u", project_id="p"),
        oslo_context.RequestContext(auth_token="t", project_id="p"),
        oslo_context.RequestContext(auth_token="t", user_id="u"),
    ):
        assert not trusts.carries_token(made)


class _Trustee(trusts.Trustee):
    """A trustee that never logs in."""

    def __init__(self) -> None:
        super().__init__("http://keystone/v3/", lambda trust: trust, _no_session)


def _no_session(auth: Any) -> Any:
    raise AssertionError("no login expected")


def test_clients_through_a_trust_are_kept_and_share_swflows_own_parts() -> None:
    built: list[str] = []

    def acting(login: Any) -> dict[str, Any]:  # this trustee's login: the id
        built.append(login)
        return {"object_store": lambda: f"swift as {login}", "messaging": None}

    own = Clients(
        object_store=lambda: "own swift",  # type: ignore[arg-type,return-value]
        identity_url="http://keystone/v3",
        trustee=_Trustee(),
        acting=acting,
    )
    through = own.for_trust("t1")
    assert own.for_trust("t1") is through and built == ["t1"]
    assert through.object_store == "swift as t1"  # type: ignore[comparison-overlap]
    assert not through.offers("messaging") and not through.offers("stack_users")
    assert through.identity_url == own.identity_url
    assert through.trustee is own.trustee
    own.forget_trust("t1")
    assert own.for_trust("t1") is not through


def test_clients_without_a_trustee_refuse_a_trust() -> None:
    with pytest.raises(exceptions.NotSupported, match="trustee"):
        Clients().for_trust("t1")


def test_trusts_need_a_trustee_and_none_is_loaded_by_default() -> None:
    conf = sw_conf.get_conf(config_files=[])
    assert conf.deferred_auth_method == sw_conf.DEFERRED_SERVICE
    assert loading.client_factories(conf)["trustee"] is None
    conf.set_override("deferred_auth_method", sw_conf.DEFERRED_TRUSTS)
    with pytest.raises(exceptions.ValidationError, match=r"\[trustee\] auth_type"):
        loading.client_factories(conf)


def test_the_trust_is_kept_sealed_with_the_owner_and_goes_with_it(
    tmp_path: Path,
) -> None:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        kind = projects.DEPLOYMENT
        assert not store.set_trust(kind, "d1", "trust-1")  # no owner yet
        store.set_owner(kind, "d1", projects.Owner("p1", "u1"))
        store.set_owner(kind, "d2", projects.Owner("p1", "u1"))
        assert store.set_trust(kind, "d1", "trust-1")
        assert store.get_trust(kind, "d1") == "trust-1"
        assert store.get_trust(kind, "d2") is None
        assert store.trusts(kind, ["d1", "d2", "d3"]) == {"d1": "trust-1"}
        with store.engine.connect() as conn:
            raw = conn.execute(store._tables.owners.select()).all()
        assert "trust-1" not in repr(raw)
        store.forget_owner(kind, "d1")
        assert store.get_trust(kind, "d1") is None


def test_services_act_through_a_deployments_trust(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        clients = Clients(
            trustee=_Trustee(),
            acting=lambda login: {"compute": lambda: login},
        )
        services = Services(
            store, sw_conf.get_conf(config_files=[]), clients, secret=b"k" * 32
        )
        assert services.for_deployment("d1") is services
        assert services.project_clients is clients
        store.set_owner(projects.DEPLOYMENT, "d1", projects.Owner("p1"))
        store.set_trust(projects.DEPLOYMENT, "d1", "t1")
        acting = services.for_deployment("d1")
        assert acting.clients is clients  # server-wide work stays swflows' own
        assert acting.project_clients is clients.for_trust("t1")
        assert acting.for_trust(None).project_clients is clients


def test_the_readme_configuration_makes_a_trustee(tmp_path: Path) -> None:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("**Deferred work acts through", 1)[1]
    match = re.search(r"```ini\n(.*?)```", section, re.S)
    assert match, "README shows no [trustee] configuration"
    path = tmp_path / "swflows.conf"
    path.write_text(match.group(1))
    conf = sw_conf.get_conf(config_files=[str(path)])
    trustee = loading.client_factories(conf)["trustee"]
    assert isinstance(trustee, trusts.Trustee)
    assert trustee.auth_url == "http://keystone:5000/v3"
    scope = trustee.login("t1").get_cache_id_elements()
    assert scope["trust_id"] == "t1" and scope["project_name"] is None


class _Deleting(_Trustee):
    """A trustee that records the trusts it deletes."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete(self, trust_id: str) -> bool:
        self.deleted.append(trust_id)
        return True


def test_group_members_act_through_the_groups_trust(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        owner = projects.Owner("p1", "u1")
        for kind, ident in (
            (projects.GROUP, "g1"),
            (projects.DEPLOYMENT, "own"),
            (projects.DEPLOYMENT, "member"),
            (projects.DEPLOYMENT, "orphan"),
            (projects.DEPLOYMENT, "plain"),
        ):
            store.set_owner(kind, ident, owner)
        store.set_trust(projects.GROUP, "g1", "group-trust")
        store.set_trust(projects.DEPLOYMENT, "own", "own-trust")
        store.set_trust(projects.DEPLOYMENT, "member", trusts.group_ref("g1"))
        store.set_trust(projects.DEPLOYMENT, "orphan", trusts.group_ref("gone"))
        found = trusts.acting_trusts(store, ["own", "member", "orphan", "plain"])
        assert found == {"own": "own-trust", "member": "group-trust"}


def test_a_release_deletes_a_trust_once_and_a_members_reference_only_goes(
    tmp_path: Path,
) -> None:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        trustee = _Deleting()
        clients = Clients(trustee=trustee, acting=lambda login: {"compute": None})
        services = Services(
            store, sw_conf.get_conf(config_files=[]), clients, secret=b"k" * 32
        )
        kind = projects.DEPLOYMENT
        for ident in ("d1", "m1"):
            store.set_owner(kind, ident, projects.Owner("p1"))
        store.set_trust(kind, "d1", "t1")
        store.set_trust(kind, "m1", trusts.group_ref("g1"))
        kept = clients.for_trust("t1")
        assert trusts.release(services, kind, "m1")
        assert trustee.deleted == [] and store.get_trust(kind, "m1") is None
        assert trusts.release(services, kind, "d1")
        assert trustee.deleted == ["t1"] and store.get_trust(kind, "d1") is None
        assert clients.for_trust("t1") is not kept  # not kept past its end
        assert not trusts.release(services, kind, "d1")  # nothing left
        store.set_trust(kind, "d1", "t2")
        without = Services(
            store, sw_conf.get_conf(config_files=[]), Clients(), secret=b"k" * 32
        )
        with pytest.raises(exceptions.NotSupported):
            trusts.release(without, kind, "d1")
        assert store.get_trust(kind, "d1") == "t2"  # still recorded


def test_a_pending_results_key_names_its_deployment_once_known() -> None:
    assert trusts.callback_deployment(trusts.callback_key(None, "n1")) is None
    assert trusts.callback_deployment(trusts.callback_key("d-1", "n1")) == "d-1"
    assert trusts.callback_deployment("no-nonce") is None


def test_owner_rows_nothing_needs_are_found(tmp_path: Path) -> None:
    from swflows import states
    from swflows.persistence import flow_registry as flow_rows
    from tests.unit.test_persistence_store import deployment

    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        owner = projects.Owner("p1", "u1")
        live = store.create_deployment(deployment(id="live"))
        ended = store.create_deployment(deployment(id="ended", status=states.COMPLETE))
        flow_rows.FlowRegistry(store).add(
            "f1",
            kind="deploy",
            deployment_id="being-made",
            server_id="srv",
            owner="runner",
            lease_until=0.0,
        )
        for ident in ("live", "being-made", "reverted"):
            store.set_owner(projects.DEPLOYMENT, ident, owner)
        for deployment_id in (None, live.id, ended.id, "gone", "being-made"):
            key = trusts.callback_key(deployment_id, f"n-{deployment_id}")
            store.set_owner(trusts.CALLBACK, key, owner)
        assert sorted(trusts.unneeded(store)) == sorted(
            [
                (projects.DEPLOYMENT, "reverted"),
                (trusts.CALLBACK, trusts.callback_key(None, "n-None")),
                (trusts.CALLBACK, trusts.callback_key("ended", "n-ended")),
                (trusts.CALLBACK, trusts.callback_key("gone", "n-gone")),
            ]
        )
        # a pending result's row is kept under its deployment once known
        key = trusts.callback_key(None, "n-None")
        assert store.rename_owner(trusts.CALLBACK, key, "live/n-None")
        assert store.get_owner(trusts.CALLBACK, "live/n-None") == owner
        assert not store.rename_owner(trusts.CALLBACK, key, "x")


def test_the_sweeper_lets_go_of_unneeded_trusts_after_a_grace(
    tmp_path: Path,
) -> None:
    from swflows.engine import sweeper
    from swflows.persistence import flow_registry as flow_rows

    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as store:
        trustee = _Deleting()
        clients = Clients(trustee=trustee, acting=lambda login: {"compute": None})
        conf = sw_conf.get_conf(config_files=[])
        services = Services(store, conf, clients, secret=b"k" * 32)
        contained: list[tuple[str, BaseException]] = []
        sweep = sweeper.Sweeper(
            services,
            flow_rows.FlowRegistry(store),
            conf,
            lambda step, exc: contained.append((step, exc)),
        )
        store.set_owner(projects.DEPLOYMENT, "reverted", projects.Owner("p1"))
        store.set_trust(projects.DEPLOYMENT, "reverted", "t1")
        assert sweep.sweep_trusts() == []  # first seen: within its grace
        assert store.get_trust(projects.DEPLOYMENT, "reverted") == "t1"
        sweep.trust_grace = 0.0
        assert sweep.sweep_trusts() == [(projects.DEPLOYMENT, "reverted")]
        assert trustee.deleted == ["t1"]
        assert store.get_owner(projects.DEPLOYMENT, "reverted") is None
        assert sweep.sweep_trusts() == [] and contained == []


class _Answer:
    def __init__(self, status: int, body: dict[str, Any] | None = None) -> None:
        self.status_code = status
        self.reason = "FORBIDDEN" if status == 403 else "OK"
        self._body = body or {}

    def json(self) -> dict[str, Any]:
        return self._body


class _Keystone:
    """Validates tokens as Keystone does: a token scoped by a trust may not
    read itself (403), the trustee's own login may read it."""

    TRUSTEE = "trustee-user"

    def __init__(self) -> None:
        self.reads: list[str] = []

    def session_for(self, auth: Any) -> Any:
        keystone = self

        class Session:
            def get_user_id(self) -> str:
                return keystone.TRUSTEE

            def get(self, url: str, **kw: Any) -> _Answer:
                token = kw["headers"]["X-Subject-Token"]
                reader = "own" if "X-Auth-Token" in kw["headers"] else "trustee"
                keystone.reads.append(reader)
                body: dict[str, Any] = {
                    "user": {"id": "u1"},
                    "project": {"id": "p1"},
                    "roles": [{"name": "member"}],
                }
                if token.startswith("trust-scoped"):
                    if reader == "own":
                        return _Answer(403)
                    trustee = token.rpartition(":")[2]
                    body["OS-TRUST:trust"] = {
                        "id": "t1",
                        "trustee_user": {"id": trustee},
                        "impersonation": True,
                    }
                return _Answer(200, {"token": body})

        return Session()


def test_a_trust_scoped_caller_is_read_by_the_trustee_and_hands_on_its_trust() -> None:
    keystone = _Keystone()
    trustee = trusts.Trustee("http://keystone/v3", lambda t: t, keystone.session_for)
    plain = trustee.caller("plain-token")
    assert (plain.user_id, plain.project_id, plain.roles) == ("u1", "p1", ["member"])
    assert getattr(plain, "trust_id", None) is None and keystone.reads == ["own"]
    scoped = trustee.caller("trust-scoped:" + _Keystone.TRUSTEE)
    assert keystone.reads == ["own", "own", "trustee"]
    assert getattr(scoped, "trust_id", None) == "t1" and scoped.user_id == "u1"
    assert scoped.auth_token == "trust-scoped:" + _Keystone.TRUSTEE
    # its trust is handed on, not a new one made (Keystone forbids that)
    assert trustee.obtain(scoped) == ("t1", False)
    foreign = trustee.caller("trust-scoped:someone-else")
    with pytest.raises(exceptions.ValidationError, match="another user"):
        trustee.obtain(foreign)


def test_a_caller_whose_token_expired_is_told_so_when_delegating() -> None:
    from keystoneauth1 import exceptions as ksa_exc

    class Refusing:
        def post(self, *args: Any, **kw: Any) -> Any:
            raise ksa_exc.NotFound()  # what a login with a dead token meets

        def get_user_id(self) -> str:
            return "trustee-user"

    def refusing(auth: Any) -> Any:
        return Refusing()

    trustee = trusts.Trustee("http://keystone/v3", lambda t: t, refusing)
    caller = oslo_context.RequestContext(
        auth_token="tok-secret-1", user_id="u1", project_id="p1", roles=["member"]
    )
    with pytest.raises(exceptions.CloudError, match="expired or revoked") as raised:
        trustee.create(caller)
    assert "tok-secret-1" not in str(raised.value)
