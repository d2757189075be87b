"""Whose Nova listing shows a server, and the server-gone check reading
each project's own listing (its trust's): pure parts and a SQLite store,
with Nova faked per login."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from oslo_context import context as oslo_context

from swflows import conf as sw_conf
from swflows import enrollment, exceptions, projects, trusts
from swflows.api import servers
from swflows.clients.cloud import Clients
from swflows.clients.compute import ServerInfo
from swflows.persistence import Store
from swflows.services import Services

#: swflows' own compute login, as the fakes below name it
OWN = "own"


class FakeNova:
    """Servers of one login's project: id -> status; ``None`` as the
    servers means Nova cannot be reached."""

    def __init__(self, who: str, servers: dict[str, str] | None) -> None:
        self.who = who
        self.servers = servers
        self.listings = 0

    def _reached(self) -> dict[str, str]:
        if self.servers is None:
            raise exceptions.CloudError("compute", f"{self.who}: unreachable")
        return self.servers

    def get_server(self, server_id: str) -> ServerInfo | None:
        status = self._reached().get(server_id)
        if status is None:
            return None
        return ServerInfo(server_id, server_id, status, {})

    def list_servers(self) -> dict[str, str]:
        self.listings += 1
        return dict(self._reached())

    def console_output(self, server_id: str, lines: int) -> str | None:
        return f"{self.who}: {server_id}" if server_id in self._reached() else None


class _Trustee(trusts.Trustee):
    """A trustee that never logs in: its logins name what they act as."""

    def __init__(self) -> None:
        super().__init__("http://keystone/v3", lambda trust: trust, _no_session)

    def caller_login(self, token: str, project_id: str) -> Any:
        return f"token:{token}@{project_id}"


def _no_session(auth: Any) -> Any:
    raise AssertionError("no login expected")


class Cloud:
    """Nova as each login sees it: swflows' own (:data:`OWN`), a trust's
    (its id) or a caller's (``token:<token>@<project>``)."""

    def __init__(self) -> None:
        self.novas: dict[str, FakeNova] = {}

    def nova(self, who: str, servers: dict[str, str] | None) -> FakeNova:
        self.novas[who] = FakeNova(who, servers)
        return self.novas[who]

    def clients(self, *, trustee: bool = True) -> Clients:
        def acting(login: Any) -> dict[str, Any]:
            return {"compute": lambda: self.novas[str(login)]}

        return Clients(
            compute=lambda: self.novas[OWN],  # type: ignore[arg-type,return-value]
            trustee=_Trustee() if trustee else None,
            acting=acting if trustee else None,
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.sqlite'}") as made:
        yield made


def services(store: Store, cloud: Cloud, *, trustee: bool = True) -> Services:
    return Services(
        store,
        sw_conf.get_conf(config_files=[]),
        cloud.clients(trustee=trustee),
        secret=b"k" * 32,
    )


def caller(project: str, *, token: bool = True) -> oslo_context.RequestContext:
    """A request of ``project``'s user, with its token ("tok") or none."""
    return oslo_context.RequestContext(
        auth_token="tok" if token else None,
        user_id="u-" + project,
        project_id=project,
        roles=["member"],
    )


def track(store: Store, server_id: str, project: str | None) -> None:
    store.set_server_channel(
        server_id, None, None, in_compute=True, compute_project=project
    )


def trust(store: Store, kind: str, ident: str, project: str, trust_id: str) -> None:
    store.set_owner(kind, ident, projects.Owner(project, "u"))
    store.set_trust(kind, ident, trust_id)


# -- the plan: which listing judges which server --------------------------------


def test_one_listing_per_project_and_none_without_a_trust() -> None:
    tracked = {"a": None, "b": "p1", "c": "p1", "d": "p2", "e": None}
    listings, unchecked = enrollment.plan_listings(tracked, {"p1": "t1", "p9": "t9"})
    assert listings == [
        enrollment.Listing(None, None, ("a", "e")),
        enrollment.Listing("p1", "t1", ("b", "c")),
    ]
    assert unchecked == ["d"]  # p2 has no trust: never judged
    assert enrollment.plan_listings({}, {"p1": "t1"}) == ([], [])


def test_a_listing_judges_its_servers_only() -> None:
    listed = {"a": "ACTIVE", "b": "ERROR", "c": "SOFT_DELETED", "z": "DELETED"}
    assert enrollment.judge(["a", "b", "c", "d"], listed) == {
        "b": "server in ERROR",
        "c": "server deleted",
        "d": "server deleted",
    }


# -- the store: what is tracked, and a project's trusts -------------------------


def test_the_project_whose_listing_shows_a_server_is_recorded(store: Store) -> None:
    track(store, "s1", "p1")
    track(store, "s2", None)
    store.set_server_channel("s3", None, None, in_compute=False)
    assert store.get_server("s1").compute_project == "p1"
    assert store.compute_servers(["s1", "s2", "s3", "s4"]) == {"s1": "p1", "s2": None}
    store.set_server_channel("s1", None, None)  # in_compute None keeps both
    assert store.get_server("s1").compute_project == "p1"
    store.set_server_channel("s1", None, None, in_compute=False)
    assert store.get_server("s1").compute_project is None
    with pytest.raises(exceptions.ValidationError):
        store.set_server_channel("s1", None, None, compute_project="p1")
    with pytest.raises(exceptions.ValidationError):
        store.set_server_channel(
            "s1", None, None, in_compute=True, compute_project="p" * 300
        )


def test_a_projects_trust_is_a_live_deployments_or_groups(store: Store) -> None:
    trust(store, projects.DEPLOYMENT, "member", "p1", trusts.group_ref("g1"))
    trust(store, projects.GROUP, "g1", "p1", "group-trust")
    trust(store, projects.DEPLOYMENT, "d2", "p2", "d2-trust")
    trust(store, trusts.CALLBACK, "x3", "p3", "callback-trust")
    trust(store, projects.DEPLOYMENT, "m4", "p4", trusts.group_ref("g4"))
    trust(store, projects.DEPLOYMENT, "gone", "p5", "released")
    store.set_trust(projects.DEPLOYMENT, "gone", None)
    found = trusts.project_trusts(store, ["p1", "p2", "p3", "p4", "p5", "p6"])
    assert found == {"p1": "group-trust", "p2": "d2-trust"}
    assert trusts.project_trusts(store, []) == {}


# -- the server-gone check --------------------------------------------------------


def test_each_server_is_judged_by_its_own_projects_listing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = Cloud()
    own = cloud.nova(OWN, {"own-1": "ACTIVE"})  # own-2 deleted
    p1 = cloud.nova("t1", {"p1-1": "ACTIVE", "p1-2": "ERROR"})  # p1-3 deleted
    broken = cloud.nova("t3", None)
    for server_id, project in {
        "own-1": None,
        "own-2": None,
        "p1-1": "p1",
        "p1-2": "p1",
        "p1-3": "p1",
        "p2-1": "p2",
        "p3-1": "p3",
    }.items():
        track(store, server_id, project)
    trust(store, projects.DEPLOYMENT, "d1", "p1", "t1")
    trust(store, projects.DEPLOYMENT, "d3", "p3", "t3")
    caplog.set_level(logging.DEBUG, logger="swflows.enrollment")
    everything = ["own-1", "own-2", "p1-1", "p1-2", "p1-3", "p2-1", "p3-1"]
    gone = enrollment.server_gone_check(services(store, cloud), everything)
    assert gone == {
        "own-2": "server deleted",
        "p1-2": "server in ERROR",
        "p1-3": "server deleted",
    }  # p2-1: no trust of p2; p3-1: p3's listing failed; neither judged
    assert (own.listings, p1.listings) == (1, 1)
    assert "project p3" in caplog.text and "p2-1" in caplog.text
    # swflows' own listing failing does not stop a project's
    own.servers = None
    gone = enrollment.server_gone_check(services(store, cloud), ["own-1", "p1-3"])
    assert gone == {"p1-3": "server deleted"}
    assert broken.listings == 1  # only the first check asked about p3-1


def test_projects_are_not_checked_without_trusts(store: Store) -> None:
    cloud = Cloud()
    own = cloud.nova(OWN, {})
    track(store, "p1-1", "p1")
    trust(store, projects.DEPLOYMENT, "d1", "p1", "t1")
    made = services(store, cloud, trustee=False)
    assert enrollment.server_gone_check(made, ["p1-1", "untracked"]) == {}
    assert own.listings == 0  # nothing swflows' own listing may judge


# -- enrolling: whose listing shows the server ------------------------------------


def test_nova_is_asked_as_the_caller_when_its_own_listing_lacks_the_server(
    store: Store,
) -> None:
    cloud = Cloud()
    cloud.nova(OWN, {"mine": "ACTIVE"})
    theirs = cloud.nova("token:tok@p1", {"theirs": "ACTIVE", "mine": "ACTIVE"})
    made = services(store, cloud)
    view = enrollment.nova_view(made, "mine", caller("p1"))
    assert (view.in_compute, view.project) == (True, None)  # own listing first
    assert theirs.listings == 0
    view = enrollment.nova_view(made, "theirs", caller("p1"))
    assert (view.in_compute, view.project) == (True, "p1")
    # without a token, or without trusts, as swflows' own login only
    for context, made_ in (
        (caller("p1", token=False), made),
        (None, made),
        (caller("p1"), services(store, cloud, trustee=False)),
    ):
        view = enrollment.nova_view(made_, "theirs", context)
        assert (view.in_compute, view.project) == (False, None)
    assert enrollment.nova_view(made, "nowhere", caller("p1")).in_compute is False


def test_a_projects_view_is_kept_unless_its_own_listing_says_otherwise(
    store: Store,
) -> None:
    cloud = Cloud()
    cloud.nova(OWN, {})
    cloud.nova("token:tok@p1", {})
    cloud.nova("token:tok@p2", {"other": "ACTIVE"})
    made = services(store, cloud)
    # no listing asked is p1's: unknown (kept), never "not in Nova"
    for context in (None, caller("p2"), caller("p1", token=False)):
        view = enrollment.nova_view(made, "theirs", context, recorded="p1")
        assert view.in_compute is None
    # p1's caller no longer lists it: now it is not
    view = enrollment.nova_view(made, "theirs", caller("p1"), recorded="p1")
    assert view.in_compute is False


def test_a_caller_nova_cannot_answer_leaves_the_view_unknown(store: Store) -> None:
    cloud = Cloud()
    cloud.nova(OWN, {})
    cloud.nova("token:tok@p1", None)
    view = enrollment.nova_view(services(store, cloud), "theirs", caller("p1"))
    assert view.in_compute is None


def test_enrolling_records_whose_listing_shows_the_server(store: Store) -> None:
    cloud = Cloud()
    cloud.nova(OWN, {})
    made = services(store, cloud)
    record = enrollment.enroll(
        made, "s1", "POLL_SERVER_HEAT", nova=True, compute_project="p1"
    )
    assert (record.in_compute, record.compute_project) == (True, "p1")
    # enrolled again without a token: Nova's own listing cannot judge it
    record = enrollment.enroll(made, "s1", "POLL_SERVER_HEAT")
    assert (record.in_compute, record.compute_project) == (True, "p1")
    record = enrollment.enroll(made, "s2", "POLL_SERVER_HEAT")
    assert (record.in_compute, record.compute_project) == (False, None)


def test_a_projects_server_console_is_read_through_its_trust(store: Store) -> None:
    cloud = Cloud()
    cloud.nova(OWN, {"own-1": "ACTIVE"})
    cloud.nova("t1", {"p1-1": "ACTIVE"})
    track(store, "own-1", None)
    track(store, "p1-1", "p1")
    track(store, "p2-1", "p2")
    trust(store, projects.DEPLOYMENT, "d1", "p1", "t1")
    sw: Any = SimpleNamespace(services=services(store, cloud), store=store)
    assert servers.console(sw, "own-1", 5) == "own: own-1"
    assert servers.console(sw, "p1-1", 5) == "t1: p1-1"
    shown = servers.console(sw, "p2-1", 5)
    assert shown is not None and "project p2 has no live trust" in shown
