"""Swift: proxy, account, container and object servers behind Keystone
(authtoken and keystoneauth, accounts ``AUTH_<project id>``, registered in
the catalog as ``object-store`` by keystone.py), with tempurl.

Tempauth (Fernet tokens, so no memcached) runs beside it under its own
reseller prefix, ``TEMPAUTH_``, as devstack sets it up: only for the tests
of swflows' ``[object_store] auth_version = v1`` (Swift's own auth, which
small clouds without Keystone use).  Everything else goes through Keystone.
(Swift 2.38 answers 500 to a Keystone token sent to a ``TEMPAUTH_`` account:
tempauth then reads keystoneauth's REMOTE_USER; nothing here does that.)
"""

from __future__ import annotations

import base64
import os
import pwd
from pathlib import Path

from . import httpjson, layout
from .context import Cloud
from .procs import Check, spawn

BACKENDS = ("account", "container", "object")
#: the Keystone user the proxy validates tokens with (role service)
SERVICE_USER = "swift"
#: Keystone roles that own their project's account (admin implies member)
OPERATOR_ROLES = ("admin", "member")
#: Keystone role that may act on every account; no one holds it here
RESELLER_ADMIN_ROLE = "ResellerAdmin"
#: the account prefix of Keystone projects, as in the catalog's endpoints
RESELLER_PREFIX = "AUTH_"
#: tempauth's one account (TEMPAUTH_test) and its user (account:user)
TEMPAUTH_PREFIX = "TEMPAUTH"
TEMPAUTH_USER = "test:tester"

SWIFT_CONF = """\
[swift-hash]
swift_hash_path_suffix = devcloud
swift_hash_path_prefix = devcloud

[storage-policy:0]
name = gold
default = yes
"""

# swift_dir everywhere: otherwise /etc/swift is read. Every path is absolute
# because the servers chdir("/").
COMMON = """\
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
user = {user}
swift_dir = {etc}
devices = {devices}
mount_check = false
workers = 0
log_level = WARNING
"""

BACKEND = """\
[pipeline:main]
pipeline = healthcheck {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}
{extra}
[filter:healthcheck]
use = egg:swift#healthcheck
"""

# No object-updater runs here: a container update that times out would
# never reach the listing, so give it time even under load.
OBJECT_EXTRA = """\
container_update_timeout = 10
node_timeout = 10
conn_timeout = 2
"""

# tempurl before the auth middlewares, so a TempURL request needs no token;
# authtoken before keystoneauth; tempauth last, for its own prefix only.
PIPELINE = (
    "catch_errors gatekeeper healthcheck proxy-logging cache listing_formats"
    " tempurl authtoken keystoneauth tempauth copy dlo versioned_writes"
    " proxy-logging proxy-server"
)

PROXY = """\
[pipeline:main]
pipeline = {pipeline}

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:cache]
# account and container info (and TempURL keys) cached, as in every Swift
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{memcached_port}

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
www_authenticate_uri = {auth_url}
auth_url = {auth_url}
auth_type = password
username = {service_user}
password = {service_password}
user_domain_id = default
project_name = service
project_domain_id = default
# tempurl (and tempauth's tokens) decide for themselves further on
delay_auth_decision = true
include_service_catalog = false

[filter:keystoneauth]
use = egg:swift#keystoneauth
reseller_prefix = {reseller_prefix}
operator_roles = {operator_roles}
reseller_admin_role = {reseller_admin_role}
# tempurl overrides the authorization of the requests it signed
allow_overrides = true

[filter:tempauth]
use = egg:swift#tempauth
reseller_prefix = {tempauth_prefix}
fernet_key_devcloud = {fernet_key}
active_fernet_key_id = devcloud
user_{user} = {key} .admin

[filter:tempurl]
use = egg:swift#tempurl
methods = GET HEAD PUT POST DELETE
allowed_digests = sha256 sha512

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:proxy-logging]
use = egg:swift#proxy_logging
# each request's access line, as syslog datagrams to a port nobody need
# listen on: what a bench counts Swift's requests by (cloud.json's
# swift.access_log)
access_log_level = INFO
access_log_udp_host = 127.0.0.1
access_log_udp_port = {access_log_port}

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:dlo]
use = egg:swift#dlo

[filter:versioned_writes]
use = egg:swift#versioned_writes
"""


def etc_dir(cloud: Cloud) -> Path:
    return cloud.dir("swift") / "etc"


def configure(cloud: Cloud) -> None:
    """Write the configs; the rings are built by in_venv/prepare.py."""
    etc = etc_dir(cloud)
    devices = cloud.dir("swift") / "node"
    etc.mkdir()
    (devices / "sdb1").mkdir(parents=True)
    (etc / "swift.conf").write_text(SWIFT_CONF)
    user = pwd.getpwuid(os.getuid()).pw_name
    for kind in BACKENDS:
        text = COMMON.format(
            port=cloud.ports["swift-" + kind], user=user, etc=etc, devices=devices
        )
        extra = OBJECT_EXTRA if kind == "object" else ""
        (etc / f"{kind}-server.conf").write_text(
            text + BACKEND.format(kind=kind, extra=extra)
        )
    text = COMMON.format(
        port=cloud.ports["swift-proxy"], user=user, etc=etc, devices=devices
    )
    layout.write_private(
        etc / "proxy-server.conf",
        text
        + PROXY.format(
            pipeline=PIPELINE,
            memcached_port=cloud.ports["memcached"],
            access_log_port=cloud.access_log_port,
            auth_url=cloud.auth_url,
            service_user=SERVICE_USER,
            service_password=cloud.password(SERVICE_USER),
            reseller_prefix=RESELLER_PREFIX.rstrip("_"),
            operator_roles=", ".join(OPERATOR_ROLES),
            reseller_admin_role=RESELLER_ADMIN_ROLE,
            tempauth_prefix=TEMPAUTH_PREFIX,
            fernet_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
            user=TEMPAUTH_USER.replace(":", "_"),
            key=cloud.password(TEMPAUTH_USER),
        ),
    )


def endpoint(cloud: Cloud) -> str:
    """The catalog's object-store URL (Keystone fills in the project id)."""
    return f"{cloud.url('swift-proxy')}/v1/{RESELLER_PREFIX}%(project_id)s"


def account_url(cloud: Cloud, project_id: str) -> str:
    return f"{cloud.url('swift-proxy')}/v1/{RESELLER_PREFIX}{project_id}"


def start(cloud: Cloud) -> Check:
    """Start the four servers; ready once a Keystone token of the demo user
    works through all of them (so only after keystone.register)."""
    started = []
    for kind in (*BACKENDS, "proxy"):
        name = "swift-" + kind
        server = layout.venv_bin(f"swift-{kind}-server")
        argv = [str(server), str(etc_dir(cloud) / f"{kind}-server.conf"), "-v"]
        started.append(spawn(name, argv, port=cloud.ports[name], records=cloud.records))

    def ready() -> bool:
        if cloud.demo_token is None:  # Keystone is not set up yet
            return False
        url = account_url(cloud, cloud.ids["demo_project"])
        return probe(url, cloud.demo_token)

    return Check("swift", started, ready)


def probe(url: str, token: str) -> bool:
    """Ready when a token works through all four servers: a container and
    an object made and removed in the account at ``url``."""
    headers = {"X-Auth-Token": token}
    url += "/devcloud-probe"
    for method, path, body, codes in (
        ("PUT", "", None, (201, 202)),
        ("PUT", "/o", b"x", (201,)),
        ("DELETE", "/o", None, (204,)),
        ("DELETE", "", None, (204,)),
    ):
        httpjson.expect(
            httpjson.call(method, url + path, body=body, headers=headers, timeout=15),
            *codes,
            what=f"{method} probe{path}",
        )
    return True
