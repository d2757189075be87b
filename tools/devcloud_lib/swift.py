"""Swift: proxy, account, container and object servers with tempauth
(Fernet tokens, so no memcached) and tempurl."""

from __future__ import annotations

import base64
import os
import pwd
from pathlib import Path

from . import httpjson, layout
from .context import Cloud
from .procs import Check, spawn

BACKENDS = ("account", "container", "object")
USERS = {"test:tester": "testing", "test2:tester2": "testing2"}

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

# tempurl before tempauth, so a TempURL request needs no token.
PIPELINE = (
    "catch_errors gatekeeper healthcheck proxy-logging listing_formats"
    " tempurl tempauth copy dlo versioned_writes proxy-logging proxy-server"
)

PROXY = """\
[pipeline:main]
pipeline = {pipeline}

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:tempauth]
use = egg:swift#tempauth
fernet_key_devcloud = {fernet_key}
active_fernet_key_id = devcloud
user_admin_admin = {admin_key} .admin .reseller_admin
{users}

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
            fernet_key=base64.urlsafe_b64encode(os.urandom(32)).decode(),
            admin_key=cloud.password("swift-admin"),
            users="\n".join(
                f"user_{name.replace(':', '_')} = {key} .admin"
                for name, key in USERS.items()
            ),
        ),
    )


def start(cloud: Cloud) -> Check:
    started = []
    for kind in (*BACKENDS, "proxy"):
        name = "swift-" + kind
        server = layout.venv_bin(f"swift-{kind}-server")
        argv = [str(server), str(etc_dir(cloud) / f"{kind}-server.conf"), "-v"]
        started.append(spawn(name, argv, port=cloud.ports[name], records=cloud.records))
    return Check("swift", started, lambda: probe(cloud.url("swift-proxy")))


def probe(proxy: str) -> bool:
    """Ready when a token works through all four servers."""
    user, key = next(iter(USERS.items()))
    resp = httpjson.call(
        "GET",
        proxy + "/auth/v1.0",
        timeout=5,
        headers={"X-Auth-User": user, "X-Auth-Key": key},
    )
    httpjson.expect(resp, 200, what="tempauth")
    token = {"X-Auth-Token": resp.headers["X-Auth-Token"]}
    url = resp.headers["X-Storage-Url"] + "/devcloud-probe"
    for method, path, body, codes in (
        ("PUT", "", None, (201, 202)),
        ("PUT", "/o", b"x", (201,)),
        ("DELETE", "/o", None, (204,)),
        ("DELETE", "", None, (204,)),
    ):
        httpjson.expect(
            httpjson.call(method, url + path, body=body, headers=token, timeout=15),
            *codes,
            what=f"{method} probe{path}",
        )
    return True
