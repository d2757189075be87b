"""Keystone under gunicorn on PostgreSQL, and the users swflows needs in it.

Two workers, as Keystone runs anywhere it is used: one worker was a queue
every test's logins, token checks and stack users waited in (busy all
through a 100-deployment run). Hence a database with row locks (SQLite
refused concurrent writers: "database is locked") and a cache the workers
share (Redis): each worker invalidates it on every role grant.
"""

from __future__ import annotations

import grp
import hashlib
import hmac
import os
import pwd

from . import httpjson, layout, swift
from .context import Cloud
from .procs import Check, access_log, run_sql, server_env, spawn

REGION = "RegionOne"
#: this machine's PostgreSQL (tools/services starts it); Keystone's database
#: is made afresh on it at every clean start
PG = os.environ.get(
    "SWFLOWS_DEVCLOUD_PG", "postgresql+psycopg2://postgres@127.0.0.1:5432"
)
STACK_DOMAIN = "swflows_stack"
STACK_DOMAIN_ADMIN = "swflows_domain_admin"
STACK_USER_ROLE = "heat_stack_user"
#: swflows' own service user, the trustee of the trusts callers delegate
TRUSTEE = "swflows_trustee"

CONF = """\
[DEFAULT]
use_stderr = true

[database]
connection = {database}

[token]
provider = fernet

[fernet_tokens]
key_repository = {dir}/fernet-keys

[fernet_receipts]
key_repository = {dir}/fernet-keys

[credential]
key_repository = {dir}/credential-keys

[identity]
# bcrypt's default cost (12) makes every login take ~230 ms; 4 is for tests
# only. It must be set before bootstrap hashes the admin password.
password_hash_rounds = 4

[cache]
# Without a cache every authenticated request costs ~200 SQL queries. The
# cache lives in the dev cloud's Redis, shared by the gunicorn workers.
enabled = true
backend = dogpile.cache.redis
backend_argument = url:redis://127.0.0.1:{redis_port}/3
"""


def _dir(cloud: Cloud):
    return cloud.dir("keystone")


def database() -> str:
    """This checkout's Keystone database (one per clone)."""
    return f"{PG}/devcloud_keystone_{layout.clone_tag()}"


def drop_database() -> str | None:
    """Drop this checkout's Keystone database; what went wrong, if anything
    (the cloud is down either way: the next start makes it afresh)."""
    python = layout.venv_bin("python")
    if not python.exists():
        return None
    name = database().rsplit("/", 1)[1]
    return run_sql(
        python, f"{PG}/postgres", [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)']
    )


def configure(cloud: Cloud) -> None:
    text = CONF.format(
        dir=_dir(cloud), redis_port=cloud.ports["redis"], database=database()
    )
    (_dir(cloud) / "keystone.conf").write_text(text)


def init_command(cloud: Cloud) -> tuple[list[str], dict[str, str]]:
    """keystone-manage db_sync, fernet_setup, credential_setup, then bootstrap
    (admin user and project, roles, identity endpoints), in one interpreter."""
    url = cloud.auth_url
    argv = [str(layout.venv_bin("python")), str(layout.KEYSTONE_INIT)]
    argv += [str(_dir(cloud) / "keystone.conf"), str(layout.LOGS)]
    argv += [pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name]
    argv += ["--bootstrap-region-id", REGION, "--bootstrap-admin-url", url]
    argv += ["--bootstrap-public-url", url, "--bootstrap-internal-url", url]
    # The password goes through the environment, not the command line.
    return argv, server_env(OS_BOOTSTRAP_PASSWORD=cloud.password("admin"))


def start(cloud: Cloud) -> Check:
    port = cloud.ports["keystone"]
    argv = [str(layout.venv_bin("gunicorn")), "--bind", f"127.0.0.1:{port}"]
    argv += ["--workers", "2", "--worker-class", "sync"]  # see [cache]
    argv += access_log("keystone")
    argv += ["--timeout", "120", "--graceful-timeout", "5"]
    # Without it every gunicorn of a user shares ~/.gunicorn/gunicorn.ctl.
    argv += ["--no-control-socket"]
    argv += ["--pythonpath", str(layout.IN_VENV), "--chdir", str(_dir(cloud))]
    argv += ["keystone_app:application"]
    env = server_env(OS_KEYSTONE_CONFIG_DIR=str(_dir(cloud)))
    started = spawn("keystone", argv, port=port, records=cloud.records, env=env)

    def probe() -> bool:
        return httpjson.call("GET", cloud.auth_url, timeout=5).status == 200

    return Check("keystone", [started], probe)


# ------------------------------------------------------------ REST helpers


def password_token(auth_url: str, username: str, password: str, project: str) -> str:
    """A project-scoped token of a user of the default domain."""
    default = {"id": "default"}
    user = {"name": username, "password": password, "domain": default}
    auth = {
        "identity": {"methods": ["password"], "password": {"user": user}},
        "scope": {"project": {"name": project, "domain": default}},
    }
    resp = httpjson.call(
        "POST", auth_url + "/auth/tokens", body={"auth": auth}, timeout=30
    )
    httpjson.expect(resp, 201, what=f"token for {username}")
    return resp.headers["X-Subject-Token"]


class Api:
    """Keystone's v3 API with one token."""

    def __init__(self, auth_url: str, token: str) -> None:
        self.auth_url = auth_url
        self.token = token

    def __call__(self, method: str, path: str, body: dict | None = None):
        resp = httpjson.call(
            method,
            self.auth_url + path,
            body=body,
            headers={"X-Auth-Token": self.token},
            timeout=30,
        )
        httpjson.expect(resp, 200, 201, 204, what=f"{method} {path}")
        return resp.json() if resp.data else None

    def create(self, kind: str, **fields) -> str:
        return self("POST", f"/{kind}s", {kind: fields})[kind]["id"]


def register(cloud: Cloud) -> None:
    """Create what swflows and the other servers need, as Heat sets it up:
    a stack-user domain with its domain admin, the stack user role, two
    tenants (``demo`` and ``demo2``, each with its own member user, for
    tests of project scoping), service users for Zaqar, Swift's proxy and
    the Nova stand-in, and the catalog (Swift's endpoints name each project's account).
    """
    api = Api(
        cloud.auth_url,
        password_token(cloud.auth_url, "admin", cloud.password("admin"), "admin"),
    )
    roles = {r["name"]: r["id"] for r in api("GET", "/roles")["roles"]}
    if STACK_USER_ROLE not in roles:
        roles[STACK_USER_ROLE] = api.create("role", name=STACK_USER_ROLE)

    def user(
        name: str,
        domain: str = "default",
        project: str | None = None,
        role: str | None = None,
    ) -> str:
        fields = {"name": name, "password": cloud.password(name), "domain_id": domain}
        if project:
            fields["default_project_id"] = project
        user_id = api.create("user", **fields)
        if project and role:
            api("PUT", f"/projects/{project}/users/{user_id}/roles/{roles[role]}")
        return user_id

    domain = api.create(
        "domain",
        name=STACK_DOMAIN,
        description="Users that swflows creates for servers",
    )
    domain_admin = user(STACK_DOMAIN_ADMIN, domain=domain)
    api("PUT", f"/domains/{domain}/users/{domain_admin}/roles/{roles['admin']}")

    demo = api.create("project", name="demo", domain_id="default")
    demo_user = user("demo", project=demo, role="member")
    demo2 = api.create("project", name="demo2", domain_id="default")
    demo2_user = user("demo2", project=demo2, role="member")
    service = api.create("project", name="service", domain_id="default")
    for name in ("zaqar", swift.SERVICE_USER, "nova"):
        user(name, project=service, role="service")
    ensure_trustee(cloud.auth_url, cloud.password("admin"))

    for kind, name, url in (
        ("messaging", "zaqar", cloud.url("zaqar")),
        ("object-store", "swift", swift.endpoint(cloud)),
        ("compute", "nova", cloud.url("nova") + "/v2.1"),
        ("image", "glance", cloud.url("nova") + "/image"),
    ):
        service_id = api.create("service", type=kind, name=name)
        for interface in ("public", "internal", "admin"):
            api.create(
                "endpoint",
                service_id=service_id,
                interface=interface,
                url=url,
                region_id=REGION,
            )

    [admin] = api("GET", "/projects?name=admin&domain_id=default")["projects"]
    cloud.ids.update(
        stack_user_domain=domain,
        demo_project=demo,
        demo_user=demo_user,
        demo2_project=demo2,
        demo2_user=demo2_user,
        admin_project=admin["id"],
    )
    cloud.demo_token = password_token(
        cloud.auth_url, "demo", cloud.password("demo"), "demo"
    )


def trustee_password(admin_password: str) -> str:
    """The trustee's password, derived from the admin's: making the user
    again (a running cloud, a test) is idempotent and needs no new secret."""
    digest = hmac.new(admin_password.encode(), TRUSTEE.encode(), hashlib.sha256)
    return digest.hexdigest()[:32]


def ensure_trustee(auth_url: str, admin_password: str) -> dict[str, str]:
    """Make swflows' trustee user (role ``service`` on project ``service``)
    unless it exists, through Keystone's API as the admin; its credentials
    for a ``[trustee]`` group (no project: trusts scope its logins)."""
    api = Api(auth_url, password_token(auth_url, "admin", admin_password, "admin"))
    password = trustee_password(admin_password)
    query = f"/users?name={TRUSTEE}&domain_id=default"
    found = api("GET", query)["users"]
    if found:  # made here, with this password (a new cloud has a new admin's)
        user_id = found[0]["id"]
    else:
        try:
            user_id = api.create(
                "user", name=TRUSTEE, password=password, domain_id="default"
            )
        except RuntimeError:  # made meanwhile by another caller
            user_id = api("GET", query)["users"][0]["id"]
    [service] = api("GET", "/projects?name=service&domain_id=default")["projects"]
    [role] = api("GET", "/roles?name=service")["roles"]
    api("PUT", f"/projects/{service['id']}/users/{user_id}/roles/{role['id']}")
    return {
        "auth_url": auth_url,
        "username": TRUSTEE,
        "password": password,
        "user_domain_id": "default",
    }


def service_credentials(cloud: Cloud, name: str) -> dict[str, str]:
    """How a service user (``zaqar``, ``nova``) authenticates."""
    return {
        "auth_url": cloud.auth_url,
        "username": name,
        "password": cloud.password(name),
        "project_name": "service",
        "user_domain_id": "default",
        "project_domain_id": "default",
    }
