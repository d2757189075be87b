"""Clients built from a configuration file, through keystoneauth1 loading.

Nothing here reaches a server: building clients reads options and loads
auth plugins only; endpoints are given as overrides.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from keystoneauth1.identity import generic, v3

from swflows import conf, exceptions
from swflows.clients import loading
from swflows.clients.cloud import Clients
from swflows.clients.compute import Compute
from swflows.clients.identity import StackUser, StackUsers
from swflows.clients.messaging import Messaging
from swflows.clients.object_store import ObjectStore

ROOT = pathlib.Path(__file__).resolve().parents[2]
KEYSTONE = "http://keystone.test:5000/v3"
SECRET = "s3cr3t-never-shown"

PASSWORD_AUTH = f"""
auth_type = password
auth_url = {KEYSTONE}
username = swflows
password = {SECRET}
project_name = service
user_domain_id = default
project_domain_id = default
"""

FULL = f"""
[identity]
{PASSWORD_AUTH}
timeout = 12
cafile = /etc/ssl/cloud-ca.pem

[stack_user]
stack_user_domain_id = d0main
stack_domain_admin = heat_admin
stack_domain_admin_password = {SECRET}
stack_user_role = agent_role

[object_store]
auth_version = v1
v1_auth_url = http://swift.test:8080/auth/v1.0
v1_user = test:tester
v1_key = {SECRET}

[messaging]
auth_section = identity
endpoint_override = http://zaqar.test:8888
region_name = North

[compute]
auth_section = identity
endpoint_override = http://nova.test:8774/v2.1
interface = internal
"""


def load(tmp_path: pathlib.Path, text: str) -> Any:
    path = tmp_path / "swflows.conf"
    # options are never continuation lines here, so indentation can go
    path.write_text("\n".join(line.strip() for line in text.splitlines()))
    return conf.get_conf(config_files=[str(path)])


def built(clients: Clients, name: str) -> Any:
    return getattr(clients, name)


class TestFullConfiguration:
    def test_every_service_offered(self, tmp_path: pathlib.Path) -> None:
        clients = Clients.from_conf(load(tmp_path, FULL))
        for name in ("object_store", "messaging", "stack_users", "compute"):
            assert clients.offers(name), name
        assert clients.identity_url == KEYSTONE

    def test_object_store_uses_v1_auth(self, tmp_path: pathlib.Path) -> None:
        store = Clients.from_conf(load(tmp_path, FULL)).object_store
        assert isinstance(store, ObjectStore)
        connection = store.connection
        assert connection.authurl == "http://swift.test:8080/auth/v1.0"
        assert connection.user == "test:tester"
        assert connection.key == SECRET
        assert connection.auth_version == "1"
        assert connection.session is None
        assert connection.retries == 0  # the adapter retries, not swiftclient

    def test_messaging_shares_identity_auth(self, tmp_path: pathlib.Path) -> None:
        zaqar = Clients.from_conf(load(tmp_path, FULL)).messaging
        assert isinstance(zaqar, Messaging)
        assert zaqar.url == "http://zaqar.test:8888"
        session = zaqar.client.session
        assert isinstance(session.auth, generic.Password)  # auth_type = password
        assert session.auth.auth_url == KEYSTONE
        # [messaging] sets no timeout of its own: the default applies
        assert session.timeout == loading.DEFAULT_TIMEOUT

    def test_compute(self, tmp_path: pathlib.Path) -> None:
        nova = Clients.from_conf(load(tmp_path, FULL)).compute
        assert isinstance(nova, Compute)
        http = nova.nova.client
        assert http.endpoint_override == "http://nova.test:8774/v2.1"
        assert http.interface == "internal"

    def test_stack_users_log_in_to_their_domain(self, tmp_path: pathlib.Path) -> None:
        users = Clients.from_conf(load(tmp_path, FULL)).stack_users
        assert isinstance(users, StackUsers)
        assert users.domain_id == "d0main"
        assert users.role_name == "agent_role"
        auth = users.session.auth
        assert isinstance(auth, v3.Password)
        assert auth.auth_url == KEYSTONE
        method = auth.auth_methods[0]
        assert isinstance(method, v3.PasswordMethod)
        assert (method.username, method.user_domain_id) == ("heat_admin", "d0main")
        assert auth.domain_id == "d0main"
        # the session options of [identity] apply to the domain admin too
        assert users.session.timeout == 12.0
        assert users.session.verify == "/etc/ssl/cloud-ca.pem"

    def test_messaging_as_a_stack_user(self, tmp_path: pathlib.Path) -> None:
        clients = Clients.from_conf(load(tmp_path, FULL))
        user = StackUser("u-1", "swflows-dep", "p-1")
        zaqar = clients.messaging_for(user, "derived-password")
        assert zaqar.url == "http://zaqar.test:8888"
        auth = zaqar.client.session.auth
        assert isinstance(auth, v3.Password)
        assert auth.auth_url == KEYSTONE
        assert auth.project_id == "p-1"
        method = auth.auth_methods[0]
        assert isinstance(method, v3.PasswordMethod)
        assert method.user_id == "u-1"
        assert method.password == "derived-password"

    def test_stack_user_clients_are_reused(
        self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(loading, "STACK_USER_CLIENTS", 2)
        clients = Clients.from_conf(load(tmp_path, FULL))
        first, second = StackUser("u-1", "a", "p-1"), StackUser("u-2", "b", "p-2")
        kept = clients.messaging_for(first, "pw-1")
        # polling again reuses the client, and so the user's token
        assert clients.messaging_for(first, "pw-1") is kept
        assert clients.messaging_for(first, "other") is not kept
        clients.messaging_for(second, "pw-2")  # the oldest, kept, goes
        assert clients.messaging_for(first, "pw-1") is not kept

    def test_clients_are_built_once(self, tmp_path: pathlib.Path) -> None:
        clients = Clients.from_conf(load(tmp_path, FULL))
        assert clients.messaging is clients.messaging
        assert clients.object_store is clients.object_store


class TestPartialConfiguration:
    def test_nothing_configured_offers_nothing(self) -> None:
        clients = Clients.from_conf(conf.get_conf())
        for name in ("object_store", "messaging", "stack_users", "compute"):
            assert not clients.offers(name), name
        assert clients.identity_url is None
        with pytest.raises(exceptions.NotSupported, match="no messaging service"):
            built(clients, "messaging")
        with pytest.raises(exceptions.NotSupported, match="stack users"):
            clients.messaging_for(StackUser("u", "n", "p"), "x")

    def test_object_store_through_keystone(self, tmp_path: pathlib.Path) -> None:
        text = f"""
        [object_store]
        {PASSWORD_AUTH}
        endpoint_override = http://swift.test:8080/v1/AUTH_demo
        timeout = 5
        """
        clients = Clients.from_conf(load(tmp_path, text))
        assert not clients.offers("messaging")
        store = clients.object_store
        assert store.connection.session is not None
        assert store.connection.session.timeout == 5.0
        # no catalog look-up needed: the override is the account URL
        assert store.connection.url == "http://swift.test:8080/v1/AUTH_demo"

    def test_stack_user_domain_by_name(
        self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        text = f"""
        [identity]
        endpoint_override = {KEYSTONE}

        [stack_user]
        stack_user_domain_name = heat
        stack_domain_admin = heat_admin
        stack_domain_admin_password = {SECRET}
        """
        clients = Clients.from_conf(load(tmp_path, text))
        assert clients.identity_url == KEYSTONE
        assert not clients.offers("messaging")

        class Access:
            domain_id = "resolved-id"

        monkeypatch.setattr(v3.Password, "get_access", lambda self, session: Access)
        users = clients.stack_users
        assert users.domain_id == "resolved-id"
        auth = users.session.auth
        assert isinstance(auth, v3.Password)
        assert auth.domain_name == "heat"
        method = auth.auth_methods[0]
        assert isinstance(method, v3.PasswordMethod)
        assert method.user_domain_name == "heat"


class TestMistakes:
    @pytest.mark.parametrize(
        ("text", "field", "words"),
        [
            (
                f"[object_store]\nauth_version = v1\nv1_key = {SECRET}\n",
                "[object_store] auth_version",
                "v1_auth_url, v1_user",
            ),
            (
                "[messaging]\nauth_type = no-such-plugin\n",
                "[messaging] auth_type",
                "no-such-plugin",
            ),
            (
                f"[compute]\nauth_type = password\npassword = {SECRET}\n",
                "[compute] auth_type",
                "auth_url",
            ),
            (
                "[messaging]\nauth_section = nowhere\n",
                "[messaging] auth_section",
                "nowhere",
            ),
            (
                "[stack_user]\nstack_domain_admin = heat_admin\n"
                "stack_user_domain_id = d\n",
                "[stack_user] stack_domain_admin_password",
                "needed",
            ),
            (
                f"[stack_user]\nstack_domain_admin = heat_admin\n"
                f"stack_domain_admin_password = {SECRET}\n",
                "[stack_user] stack_user_domain_id",
                "stack_user_domain_name",
            ),
            (
                f"[stack_user]\nstack_domain_admin = heat_admin\n"
                f"stack_domain_admin_password = {SECRET}\n"
                "stack_user_domain_id = d\n",
                "[identity] auth_url",
                "endpoint_override",
            ),
        ],
    )
    def test_refused_at_once_naming_the_option(
        self, tmp_path: pathlib.Path, text: str, field: str, words: str
    ) -> None:
        with pytest.raises(exceptions.ValidationError) as caught:
            Clients.from_conf(load(tmp_path, text))
        assert caught.value.field == field
        assert words in str(caught.value)
        assert SECRET not in str(caught.value)
        assert SECRET not in repr(caught.value.fields)


def test_unregistered_conf_gets_swflows_options() -> None:
    from oslo_config import cfg

    bare = cfg.ConfigOpts()
    bare([], default_config_files=[], default_config_dirs=[])
    clients = Clients.from_conf(bare)
    assert not clients.offers("object_store")
    assert bare.stack_user.stack_user_role == "heat_stack_user"


def test_readme_example_file(tmp_path: pathlib.Path) -> None:
    """The README's example configuration configures every service."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Cloud clients from the configuration file", 1)[1]
    match = re.search(r"```ini\n(.*?)```", section, re.S)
    assert match, "README has no ini block under 'Cloud clients'"
    clients = Clients.from_conf(load(tmp_path, match.group(1)))
    for name in ("object_store", "messaging", "stack_users", "compute"):
        assert clients.offers(name), name
    assert clients.identity_url == "https://keystone.example/v3"
    # Swift through Keystone: the identity session, the catalog's endpoint
    swift = clients.object_store.connection
    assert swift.authurl is None
    assert swift.session.auth.auth_url == "https://keystone.example/v3"
    nova = clients.compute.nova.client
    assert nova.region_name == "RegionOne"
    # auth_section lends the auth; session options are each group's own
    assert nova.session.auth.auth_url == "https://keystone.example/v3"
    assert nova.session.verify == "/etc/ssl/certs/cloud-ca.pem"
