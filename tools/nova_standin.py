#!/usr/bin/env python3
"""A small stand-in for the OpenStack Compute (Nova) API, for swflows tests.

Nova cannot run on this machine: it needs conductor, scheduler, placement,
glance and a message bus. This small protocol-faithful stand-in serves only
the compute calls swflows uses, answering python-novaclient exactly as Nova
would: the same URLs, status codes, bodies, error envelopes and microversion
headers (it implements microversion 2.1 only, and answers 406 for any other,
as Nova does for a version outside its range).

Served (all under ``/v2.1``, plus the version documents at ``/``):

* ``GET /`` and ``GET /v2.1/``: version documents (no token needed);
* ``GET /servers``, ``GET /servers/detail`` (``name``, ``status``,
  ``marker``, ``limit``, ``all_tenants`` for admins);
* ``POST /servers`` (202; ``user_data`` must be base64 and is stored),
  ``GET|PUT|DELETE /servers/{id}``;
* ``GET|PUT|POST /servers/{id}/metadata``,
  ``GET|PUT|DELETE /servers/{id}/metadata/{key}``;
* ``POST /servers/{id}/action`` with ``os-stop``, ``os-start`` or
  ``os-getConsoleOutput`` (the console log: the agent's output, a line
  saying why no agent started, or the status it exited with);
* ``GET /servers/{id}/os-interface``: always empty (no network service);
* ``GET /flavors``, ``GET /flavors/detail``, ``GET /flavors/{id}``: a fixed
  set (``m1.tiny`` id 1, ``m1.small`` id 2), what Heat's
  ``OS::Nova::Server`` looks its flavor up with.

Images: a stand-in for the Image service (Glance) is served under
``/image`` (registered in Keystone's catalog as ``image``), only what
python-glanceclient's v2 client does when Heat's ``OS::Nova::Server``
validates and resolves its image: ``GET /image/v2/images`` (``name`` and
``id`` filters), ``GET /image/v2/images/{id}`` and ``GET
/image/v2/schemas/image``, with one fixed image, ``cirros``.  Token
checked as for compute; nothing can be uploaded.

Tokens: every compute call needs ``X-Auth-Token``. With ``--keystone-config``
the token is validated against Keystone (``GET /v3/auth/tokens`` with a
service token), as keystonemiddleware does for Nova; a validation is cached
for ``TOKEN_CACHE_SECONDS``. A server belongs to the token's project: other
projects get 404, users with the ``admin`` role see every server. Without
``--keystone-config`` any non-empty token is accepted and not checked, and
every server is visible.

Not Nova: a server's image and flavor are not looked up (any reference is
accepted); a new server is BUILD for ``--build-seconds`` (default 0), then ACTIVE.

Booting: no machine starts, but the server's agent does, as cloud-init
would start it. The ``user_data`` a server is created with is read as
cloud-init reads it: a MIME multipart whose ``text/cloud-config`` part
(here it must be written as JSON, which is YAML; swflows' boot data is)
writes ``/etc/swflows-agent.conf`` and whose ``text/x-shellscript`` part
starts ``swflows-agent``. The stand-in then starts
``<--agent-python> -m swflows.agent`` with that configuration, written under
``--agents-dir/<server id>/`` (its state directory and log there too), and
with ``--interval`` when ``--agent-interval`` is given. Deleting the server
stops its agent (SIGTERM) and removes that folder; stopping the stand-in
(SIGTERM or SIGINT) stops every agent, and a restarted stand-in starts the
agents of the servers it still holds.

Heat's user data (``user_data_format: SOFTWARE_CONFIG``: a multipart whose
``x-cfninitdata`` part ``cfn-init-data`` holds the server's metadata with
its ``os-collect-config`` section) boots Heat's own agents instead, when
``--heat-image`` names a laid-out image (``tools/devcloud_lib/heat_image``):
the ``x-cfninitdata`` parts are written where Heat's part handler writes
them, under the server's folder standing for its root (``root/``), and
os-collect-config starts there with the ``heat_local`` collector, as a Heat
image's first boot does; what the metadata names (heat-api, a TempURL,
Zaqar) it follows after rewriting its own configuration, and
os-refresh-config runs heat-agents' ``55-heat-config``, hooks and
``heat-config-notify``. Other user data, or none, boots a server with no
agent; ``GET /_standin/servers/{id}`` says why under ``agent``.

Test-only control paths, with no token and not part of Nova:

* ``PUT /_standin/servers/{id}`` with a JSON object: creates the server with
  that id (201) or updates it (200). Fields: ``name``, ``status`` (ACTIVE,
  BUILD, ERROR, SHUTOFF), ``metadata``, ``tenant_id``, ``user_id``,
  ``user_data``. The owner defaults to ``--default-project-id`` and
  ``--default-user-id``.
* ``GET /_standin/servers[/{id}]``: the stored records, ``user_data``
  included; ``DELETE /_standin/servers/{id}``.
* ``GET /_standin/agents``: the agents started, by server id (pid,
  running, exit status).

Servers are kept in the JSON file given by ``--data``, so a restarted
stand-in still has them. Standard library only.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime
import email
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

MIN_VERSION = "2.1"
MAX_VERSION = "2.1"
VERSION_UPDATED = "2013-07-23T11:33:21Z"
TOKEN_CACHE_SECONDS = 5.0
MAX_LIMIT = 1000
METADATA_ITEMS_QUOTA = 128
USER_DATA_MAX = 65535

# status -> (vm_state, power_state, task_state), as Nova reports them
STATES = {
    "ACTIVE": ("active", 1, None),
    "BUILD": ("building", 0, "spawning"),
    "ERROR": ("error", 0, None),
    "SHUTOFF": ("stopped", 4, None),
}

FAULT_NAMES = {
    400: "badRequest",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    411: "lengthRequired",
}


class ApiError(Exception):
    """An error answered in Nova's fault envelope."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        name = FAULT_NAMES.get(self.code, "computeFault")
        return {name: {"code": self.code, "message": self.message}}


def not_found(server_id: str) -> ApiError:
    return ApiError(404, f"Instance {server_id} could not be found.")


def bad_input(field: str, detail: str) -> ApiError:
    return ApiError(400, f"Invalid input for field/attribute {field}. {detail}")


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- versions


def parse_version(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    if not match:
        raise ApiError(
            400,
            f"API Version String {text} is of invalid format. "
            "Must be of format MajorNum.MinorNum.",
        )
    return int(match.group(1)), int(match.group(2))


def requested_version(headers: Any) -> str:
    """The microversion asked for; the newer header wins, as in Nova."""
    asked = None
    for value in headers.get_all("OpenStack-API-Version") or []:
        for item in value.split(","):
            service, _, version = item.strip().partition(" ")
            if service.lower() == "compute" and version:
                asked = version.strip()
    if asked is None:
        asked = headers.get("X-OpenStack-Nova-API-Version")
    if not asked:
        return MIN_VERSION
    if asked.lower() == "latest":
        return MAX_VERSION
    wanted = parse_version(asked)
    if not parse_version(MIN_VERSION) <= wanted <= parse_version(MAX_VERSION):
        raise ApiError(
            406,
            f"Version {asked} is not supported by the API. Minimum "
            f"is {MIN_VERSION} and maximum is {MAX_VERSION}.",
        )
    return "{}.{}".format(*wanted)


def version_doc(base: str) -> dict[str, Any]:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": MAX_VERSION,
        "min_version": MIN_VERSION,
        "updated": VERSION_UPDATED,
        "links": [
            {"rel": "self", "href": base + "/v2.1/"},
            {
                "rel": "describedby",
                "type": "text/html",
                "href": "http://docs.openstack.org/",
            },
        ],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }
        ],
    }


# ------------------------------------------------------------------ tokens


class Caller:
    """Who makes a request: the token's project, user and roles. Without
    token validation the caller is unknown (``checked`` false) and may see
    every server."""

    def __init__(
        self,
        project_id: str | None = None,
        user_id: str | None = None,
        roles: tuple[str, ...] = (),
        checked: bool = False,
    ) -> None:
        self.project_id = project_id
        self.user_id = user_id
        self.is_admin = "admin" in roles
        self.checked = checked

    def may_see(self, server: dict[str, Any]) -> bool:
        return (
            not self.checked or self.is_admin or server["tenant_id"] == self.project_id
        )


class TokenValidator:
    """Validates tokens against Keystone with a service token."""

    def __init__(self, conf: dict[str, str]) -> None:
        self._conf = conf
        self._lock = threading.Lock()
        self._service_token: str | None = None
        self._cache: dict[str, tuple[float, Caller]] = {}

    def _request(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: dict[str, Any] | None = None,
    ) -> tuple[int, Any, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(headers)
        headers.update(
            {"Content-Type": "application/json", "Accept": "application/json"}
        )
        req = urllib.request.Request(  # noqa: S310 (auth_url is http(s), from config)
            self._conf["auth_url"].rstrip("/") + path,
            data=data,
            method=method,
            headers=headers,
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310
                return resp.status, resp.headers, json.load(resp)
        except urllib.error.HTTPError as err:
            return err.code, err.headers, {}

    def _issue_service_token(self) -> str:
        conf = self._conf
        status, headers, _ = self._request(
            "POST",
            "/auth/tokens",
            {},
            {
                "auth": {
                    "identity": {
                        "methods": ["password"],
                        "password": {
                            "user": {
                                "name": conf["username"],
                                "password": conf["password"],
                                "domain": {"id": conf["user_domain_id"]},
                            }
                        },
                    },
                    "scope": {
                        "project": {
                            "name": conf["project_name"],
                            "domain": {"id": conf["project_domain_id"]},
                        }
                    },
                }
            },
        )
        if status != 201:
            raise ApiError(
                503, f"The stand-in cannot authenticate to Keystone (HTTP {status})."
            )
        return headers["X-Subject-Token"]

    def validate(self, token: str) -> Caller | None:
        with self._lock:
            cached = self._cache.get(token)
            if cached and cached[0] > time.monotonic():
                return cached[1]
            for _attempt in range(2):
                if self._service_token is None:
                    self._service_token = self._issue_service_token()
                status, _, body = self._request(
                    "GET",
                    "/auth/tokens",
                    {"X-Auth-Token": self._service_token, "X-Subject-Token": token},
                )
                if status != 401:
                    break
                self._service_token = None  # expired service token
            if status != 200:
                self._cache.pop(token, None)
                return None
            tok = body["token"]
            if "project" not in tok:
                # Nova's policies need a project: a domain or system token
                # gets 403 from every compute call swflows makes.
                raise ApiError(403, "Policy doesn't allow a token without a project.")
            caller = Caller(
                tok["project"]["id"],
                tok["user"]["id"],
                tuple(r["name"] for r in tok.get("roles", [])),
                checked=True,
            )
            if len(self._cache) > 1000:
                self._cache.clear()
            self._cache[token] = (time.monotonic() + TOKEN_CACHE_SECONDS, caller)
            return caller


# ------------------------------------------------------------------ agents

AGENT_CONFIG_PATH = "/etc/swflows-agent.conf"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def agent_config_from_user_data(user_data: str | None) -> tuple[str | None, str]:
    """The swflows agent configuration cloud-init would write, and why not.

    ``user_data`` is Nova's base64 text: a MIME multipart with a
    ``text/cloud-config`` part (JSON) writing the agent's file and a
    ``text/x-shellscript`` part that starts ``swflows-agent``.
    """
    return written_by_user_data(user_data, AGENT_CONFIG_PATH, "swflows-agent")


def written_by_user_data(
    user_data: str | None, path: str, starter: str
) -> tuple[str | None, str]:
    """The file at ``path`` that cloud-init would write from the user
    data's ``text/cloud-config`` part, when a ``text/x-shellscript`` part
    starts ``starter``; else None and why."""
    if not user_data:
        return None, "no user_data"
    raw = base64.b64decode(user_data)
    message = email.message_from_bytes(raw)
    if not message.is_multipart():
        return None, "the user_data is not a MIME multipart"
    config, starts = None, False
    for part in message.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True) or b""
        text = payload.decode("utf-8", "replace")
        kind = part.get_content_type()
        if kind == "text/x-shellscript" and starter in text:
            starts = True
        if kind != "text/cloud-config":
            continue
        header, _, body = text.partition("\n")
        if header.strip() != "#cloud-config":
            return None, "a text/cloud-config part without its #cloud-config line"
        try:
            doc = json.loads(body)
        except ValueError:
            return None, "the stand-in reads cloud-config written as JSON only"
        for item in doc.get("write_files") or ():
            if item.get("path") == path:
                content = item.get("content", "")
                if item.get("encoding") in ("b64", "base64"):
                    content = base64.b64decode(content).decode()
                config = content
    if config is None:
        return None, f"no cloud-config part writes {path}"
    if not starts:
        return None, f"no shell script part starts {starter}"
    return config, "started"


#: where swflows' boot data for Heat's agents puts os-collect-config's file
OCC_CONFIG_PATH = "/etc/os-collect-config.conf"


HEAT_INIT_DATA = "cfn-init-data"
#: os-collect-config's configuration as a Heat image has it before its first
#: run rewrites it from the boot metadata
FIRST_BOOT_CONF = "[DEFAULT]\ncommand = os-refresh-config\ncollectors = heat_local\n"


def heat_parts_from_user_data(user_data: str | None) -> dict[str, bytes] | None:
    """The ``x-cfninitdata`` parts of Heat's user data, by file name, when
    one is Heat's ``cfn-init-data`` with an ``os-collect-config`` section."""
    if not user_data:
        return None
    message = email.message_from_bytes(base64.b64decode(user_data))
    if not message.is_multipart():
        return None
    parts = {
        str(part.get_filename() or ""): part.get_payload(decode=True) or b""
        for part in message.walk()
        if not part.is_multipart() and part.get_content_subtype() == "x-cfninitdata"
    }
    try:
        metadata = json.loads(parts.get(HEAT_INIT_DATA) or b"null")
    except ValueError:
        return None
    if not isinstance(metadata, dict) or "os-collect-config" not in metadata:
        return None
    return parts


def write_private(path: str, data: bytes) -> None:
    """Write a file only its owner may read (it holds credentials)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def heat_agent_env(image: str, root: str) -> dict[str, str]:
    """Where heat-agents' scripts find their folders: the server's root."""

    def at(*parts: str) -> str:
        return os.path.join(root, *parts)

    return {
        "HEAT_IMAGE": image,
        "SERVER_ROOT": root,
        "OS_REFRESH_CONFIG_BASE_DIR": os.path.join(image, "os-refresh-config"),
        "HEAT_SHELL_CONFIG": at("var", "run", "heat-config", "heat-config"),
        "HEAT_CONFIG_DEPLOYED": at("var", "lib", "heat-config", "deployed"),
        "HEAT_CONFIG_DEPLOYED_OLD": at("var", "run", "heat-config", "deployed"),
        "HEAT_CONFIG_HOOKS": os.path.join(image, "hooks"),
        "HEAT_SCRIPT_WORKING": at("var", "lib", "heat-config", "heat-config-script"),
        "HEAT_SCRIPT_OUTPUTS": at("var", "run", "heat-config", "heat-config-script"),
        "HEAT_PUPPET_WORKING": at("var", "lib", "heat-config", "heat-config-puppet"),
        "HEAT_PUPPET_OUTPUTS": at("var", "run", "heat-config", "heat-config-puppet"),
        "HEAT_PUPPET_LOGDIR": at("var", "run", "heat-config", "deployed"),
        "HEAT_ANSIBLE_WORKING": at("var", "lib", "heat-config", "heat-config-ansible"),
        "HEAT_ANSIBLE_OUTPUTS": at("var", "run", "heat-config", "heat-config-ansible"),
    }


class Agents:
    """The agent processes of the servers this stand-in "booted"."""

    def __init__(
        self,
        folder: str,
        python: str,
        interval: float | None,
        heat_image: str | None = None,
    ) -> None:
        self.folder = folder
        self.python = python
        self.interval = interval
        self.heat_image = heat_image
        self.lock = threading.Lock()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: servers whose agents lead a session of their own (Heat's)
        self.sessions: set[str] = set()

    def boot(self, server: dict[str, Any]) -> dict[str, Any]:
        """Start the server's agent if its user_data says to; what happened."""
        sid = server["id"]
        try:
            config, why = agent_config_from_user_data(server.get("user_data"))
            heat_parts = (
                heat_parts_from_user_data(server.get("user_data"))
                if config is None
                else None
            )
        except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
            config, heat_parts, why = None, None, f"unreadable user_data: {exc}"
        if heat_parts is not None:
            return self.boot_heat(sid, heat_parts)
        if config is None:
            # swflows' boot data for Heat's agents: os-collect-config's file
            # written by cloud-init, and a script that starts it
            try:
                occ, _ = written_by_user_data(
                    server.get("user_data"), OCC_CONFIG_PATH, "os-collect-config"
                )
            except (binascii.Error, ValueError, UnicodeDecodeError):
                occ = None
            if occ is not None:
                return self.boot_heat(sid, {}, occ)
            return {"running": False, "why": why}
        home = os.path.join(self.folder, sid)
        os.makedirs(home, mode=0o700, exist_ok=True)
        conf = os.path.join(home, "swflows-agent.conf")
        write_private(conf, config.encode("utf-8"))
        argv = [self.python, "-m", "swflows.agent", "--config-file", conf]
        argv += ["--state-dir", os.path.join(home, "state")]
        if self.interval is not None:
            argv += ["--interval", str(self.interval)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (REPO, env.get("PYTHONPATH")) if p
        )
        return self.spawn(sid, home, argv, env, why)

    def boot_heat(
        self, sid: str, parts: dict[str, bytes], conf_text: str = FIRST_BOOT_CONF
    ) -> dict[str, Any]:
        """Start Heat's agents on a server booted with Heat's user data
        (its ``x-cfninitdata`` ``parts``), or with os-collect-config's own
        file (``conf_text``) written by cloud-init."""
        image = self.heat_image
        if not image or not os.path.isfile(os.path.join(image, "ready")):
            return {
                "running": False,
                "why": "Heat's user data, but Heat's agents are not installed "
                "(tools/devcloud heat-up lays their image out)",
            }
        home = os.path.join(self.folder, sid)
        root = os.path.join(home, "root")
        shutil.rmtree(root, ignore_errors=True)
        init_dir = os.path.join(root, "var", "lib", "heat-cfntools")
        os.makedirs(init_dir, mode=0o700)
        for name, body in parts.items():
            # as Heat's part handler: each x-cfninitdata part, by its name
            if name and "/" not in name and name not in (".", ".."):
                write_private(os.path.join(init_dir, name), body)
        conf = os.path.join(root, "etc", "os-collect-config.conf")
        os.makedirs(os.path.dirname(conf))
        # the image's own configuration: read the boot metadata first
        with open(conf, "w", encoding="utf-8") as out:
            out.write(conf_text)
        interval = str(self.interval or 30)
        run = os.path.join(root, "var", "run")
        os.makedirs(run)
        argv = [
            os.path.join(image, "venv", "bin", "os-collect-config"),
            "--config-file",
            conf,
            "--cachedir",
            os.path.join(root, "var", "lib", "os-collect-config"),
            "--backup-cachedir",
            os.path.join(root, "var", "lib", "os-collect-config-backup"),
            "--heat_local-path",
            os.path.join(init_dir, HEAT_INIT_DATA),
            "--command",
            "os-refresh-config --lockfile " + os.path.join(run, "orc.lock"),
            "--local-path",
            os.path.join(root, "var", "lib", "os-collect-config", "local-data"),
            # this cloud has no EC2 metadata service: the ec2 collector
            # Heat names finds none at once instead of waiting on 169.254.*
            "--ec2-metadata-url",
            "http://127.0.0.1:9/",
            "--polling-interval",
            interval,
            "--min-polling-interval",
            interval,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PATH"] = os.pathsep.join(
            [
                os.path.join(image, "bin"),
                os.path.join(image, "venv", "bin"),
                env.get("PATH", "/usr/bin:/bin"),
            ]
        )
        env.update(heat_agent_env(image, root))
        # os-collect-config's local collector saves and restores the locale:
        # under C.UTF-8 Python names it en_US.UTF-8, which may not exist
        env["LC_ALL"] = "C"
        why = "Heat's agents (os-collect-config)"
        return self.spawn(sid, home, argv, env, why, session=True)

    def spawn(
        self,
        sid: str,
        home: str,
        argv: list[str],
        env: dict[str, str],
        why: str,
        session: bool = False,
    ) -> dict[str, Any]:
        """Start a server's agent (in place of one still running), its
        output in ``home/agent.log``; ``session``: it leads a session of its
        own, stopped as a whole (Heat's agents start more processes)."""
        log = os.path.join(home, "agent.log")
        with self.lock, open(log, "ab") as out:
            self.stop_locked(sid)
            proc = subprocess.Popen(
                argv,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=session,
            )
            self.procs[sid] = proc
            if session:
                self.sessions.add(sid)
        return {"running": True, "why": why, "pid": proc.pid, "log": log}

    def status(self, sid: str) -> dict[str, Any] | None:
        proc = self.procs.get(sid)
        if proc is None:
            return None
        code = proc.poll()
        return {"pid": proc.pid, "running": code is None, "exit_status": code}

    def stop_locked(self, sid: str) -> None:
        proc = self.procs.pop(sid, None)
        if proc is None:
            return
        if sid in self.sessions:
            # Heat's agents: os-collect-config and whatever it runs
            self.sessions.discard(sid)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def remove(self, sid: str) -> None:
        """Stop the server's agent and remove its folder."""
        with self.lock:
            self.stop_locked(sid)
        shutil.rmtree(os.path.join(self.folder, sid), ignore_errors=True)

    def stop_all(self) -> None:
        with self.lock:
            for sid in list(self.procs):
                self.stop_locked(sid)


# ------------------------------------------------------------------- store


class Store:
    """The servers, kept in memory and mirrored to a JSON file."""

    def __init__(self, path: str, build_seconds: float) -> None:
        self.path = path
        self.build_seconds = build_seconds
        self.lock = threading.RLock()
        self.servers: dict[str, dict[str, Any]] = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                self.servers = json.load(f)["servers"]

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"servers": self.servers}, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)

    def get(self, server_id: str) -> dict[str, Any] | None:
        server = self.servers.get(server_id)
        if (
            server
            and server["status"] == "BUILD"
            and server.get("build_until")
            and time.time() >= server["build_until"]
        ):
            server.update(status="ACTIVE", build_until=None, launched_at=now_iso())
            self.save()
        return server

    def new(self, server_id: str, **fields: Any) -> dict[str, Any]:
        stamp = now_iso()
        server = {
            "id": server_id,
            "name": "",
            "status": "ACTIVE",
            "tenant_id": None,
            "user_id": None,
            "metadata": {},
            "image_id": "",
            "flavor_id": "1",
            "user_data": None,
            "created": stamp,
            "updated": stamp,
            "launched_at": stamp,
            "build_until": None,
        }
        server.update(fields)
        self.servers[server_id] = server
        return server


def touch(server: dict[str, Any]) -> None:
    server["updated"] = now_iso()


def check_metadata(metadata: Any, field: str = "metadata") -> dict[str, str]:
    if not isinstance(metadata, dict):
        raise bad_input(field, f"{metadata!r} is not of type 'object'")
    for key, value in metadata.items():
        if not 1 <= len(key) <= 255:
            raise bad_input(field, "Metadata keys must be 1 to 255 characters long.")
        if not isinstance(value, str) or len(value) > 255:
            raise bad_input(
                field, "Metadata values must be strings of at most 255 characters."
            )
    return metadata


def check_quota(metadata: dict[str, str]) -> None:
    if len(metadata) > METADATA_ITEMS_QUOTA:
        raise ApiError(
            403,
            f"Quota exceeded for metadata_items: Requested {len(metadata)}, "
            f"but already used 0 of {METADATA_ITEMS_QUOTA} metadata_items",
        )


def check_user_data(user_data: Any) -> str | None:
    if user_data is None:
        return None
    if not isinstance(user_data, str) or len(user_data) > USER_DATA_MAX:
        raise bad_input(
            "user_data",
            f"It must be a base64 string of at most {USER_DATA_MAX} characters.",
        )
    try:
        base64.b64decode(user_data, validate=True)
    except binascii.Error:
        raise bad_input("user_data", f"{user_data!r} is not a 'base64'.") from None
    return user_data


def server_view(server: dict[str, Any], base: str) -> dict[str, Any]:
    vm_state, power_state, task_state = STATES[server["status"]]
    sid = server["id"]
    host_id = hashlib.sha224(
        ((server["tenant_id"] or "") + "standin").encode()
    ).hexdigest()

    def ref(kind: str, ref_id: str) -> dict[str, Any]:
        return {
            "id": ref_id,
            "links": [{"rel": "bookmark", "href": f"{base}/{kind}/{ref_id}"}],
        }

    view = {
        "id": sid,
        "name": server["name"],
        "status": server["status"],
        "tenant_id": server["tenant_id"],
        "user_id": server["user_id"],
        "metadata": dict(server["metadata"]),
        "hostId": host_id,
        "image": ref("images", server["image_id"]) if server["image_id"] else "",
        "flavor": ref("flavors", server["flavor_id"]),
        "created": server["created"],
        "updated": server["updated"],
        "addresses": {},
        "accessIPv4": "",
        "accessIPv6": "",
        "links": server_links(base, sid),
        "key_name": None,
        "config_drive": "",
        "security_groups": [{"name": "default"}],
        "OS-DCF:diskConfig": "MANUAL",
        "OS-EXT-AZ:availability_zone": "nova",
        "OS-EXT-STS:vm_state": vm_state,
        "OS-EXT-STS:power_state": power_state,
        "OS-EXT-STS:task_state": task_state,
        "OS-SRV-USG:launched_at": server["launched_at"],
        "OS-SRV-USG:terminated_at": None,
        "os-extended-volumes:volumes_attached": [],
    }
    if server["status"] in ("ACTIVE", "BUILD"):
        view["progress"] = 0
    return view


#: the flavors served (fixed: flavors cannot be created here)
FLAVORS: list[dict[str, Any]] = [
    {"id": "1", "name": "m1.tiny", "ram": 512, "disk": 1, "vcpus": 1},
    {"id": "2", "name": "m1.small", "ram": 2048, "disk": 20, "vcpus": 1},
]

#: the images served (fixed: images cannot be uploaded here)
IMAGES: list[dict[str, Any]] = [
    {
        "id": "9e2c1c5e-7e0b-4a43-9a53-5d1b3c1c0a11",
        "name": "cirros",
        "disk_format": "qcow2",
        "size": 21430272,
    },
]

#: Glance's image schema, as far as the served images need it (glanceclient
#: builds its image model from it)
IMAGE_SCHEMA: dict[str, Any] = {
    "name": "image",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": ["null", "string"]},
        "status": {"type": "string"},
        "visibility": {"type": "string"},
        "protected": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "container_format": {"type": ["null", "string"]},
        "disk_format": {"type": ["null", "string"]},
        "min_ram": {"type": "integer"},
        "min_disk": {"type": "integer"},
        "size": {"type": ["null", "integer"]},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "self": {"type": "string"},
        "file": {"type": "string"},
        "schema": {"type": "string"},
    },
    "additionalProperties": {"type": "string"},
    "links": [
        {"rel": "self", "href": "{self}"},
        {"rel": "enclosure", "href": "{file}"},
        {"rel": "describedby", "href": "{schema}"},
    ],
}


def flavor_view(flavor: dict[str, Any], base: str, detail: bool) -> dict[str, Any]:
    fid = flavor["id"]
    view: dict[str, Any] = {
        "id": fid,
        "name": flavor["name"],
        "links": [
            {"rel": "self", "href": f"{base}/v2.1/flavors/{fid}"},
            {"rel": "bookmark", "href": f"{base}/flavors/{fid}"},
        ],
    }
    if detail:
        view.update(
            ram=flavor["ram"],
            disk=flavor["disk"],
            vcpus=flavor["vcpus"],
            swap="",
            rxtx_factor=1.0,
            **{
                "OS-FLV-EXT-DATA:ephemeral": 0,
                "OS-FLV-DISABLED:disabled": False,
                "os-flavor-access:is_public": True,
            },
        )
    return view


def image_view(image: dict[str, Any]) -> dict[str, Any]:
    iid = image["id"]
    return {
        "id": iid,
        "name": image["name"],
        "status": "active",
        "visibility": "public",
        "protected": False,
        "tags": [],
        "container_format": "bare",
        "disk_format": image["disk_format"],
        "min_ram": 0,
        "min_disk": 0,
        "size": image["size"],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "self": f"/v2/images/{iid}",
        "file": f"/v2/images/{iid}/file",
        "schema": "/v2/schemas/image",
    }


def server_links(base: str, sid: str) -> list[dict[str, str]]:
    return [
        {"rel": "self", "href": f"{base}/v2.1/servers/{sid}"},
        {"rel": "bookmark", "href": f"{base}/servers/{sid}"},
    ]


# ----------------------------------------------------------------- handler


class Reply:
    def __init__(
        self, code: int, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        self.code = code
        self.body = body
        self.headers = headers or {}


ROUTES: list[tuple[str, re.Pattern[str], str]] = []


def route(method: str, pattern: str):
    def register(func):
        ROUTES.append((method, re.compile(pattern + r"/?$"), func.__name__))
        return func

    return register


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nova-standin"
    server: StandinServer

    # -- plumbing
    def do_GET(self) -> None:
        self.dispatch("GET")

    def do_POST(self) -> None:
        self.dispatch("POST")

    def do_PUT(self) -> None:
        self.dispatch("PUT")

    def do_DELETE(self) -> None:
        self.dispatch("DELETE")

    def do_HEAD(self) -> None:
        self.dispatch("HEAD")

    @property
    def base(self) -> str:
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address)
        return "http://" + host

    def read_body(self) -> None:
        """Read the whole body first: on a kept-alive connection an unread
        body would be taken for the next request."""
        self.body = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise ApiError(411, "Send a Content-Length; chunked bodies are refused.")
        length = int(self.headers.get("Content-Length") or 0)
        if length > 0:
            self.body = self.rfile.read(length)

    def read_json(self) -> Any:
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            raise ApiError(400, "Malformed request body") from None

    def body_object(self, key: str) -> dict[str, Any]:
        body = self.read_json()
        if not isinstance(body, dict) or not isinstance(body.get(key), dict):
            raise bad_input(key, f"'{key}' is a required property")
        return body[key]

    def dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        path = split.path.rstrip("/") or "/"
        version = None
        try:
            self.read_body()
            allowed = False
            for verb, pattern, name in ROUTES:
                match = pattern.match(path)
                if not match:
                    continue
                allowed = True
                if verb == method or (verb == "GET" and method == "HEAD"):
                    if path.startswith("/v2.1") and path != "/v2.1":
                        version = requested_version(self.headers)
                        self.caller = self.authenticate()
                    reply = getattr(self, name)(*match.groups())
                    break
            else:
                if allowed:
                    raise ApiError(
                        405, "The method is not allowed for the requested URL."
                    )
                raise ApiError(404, "The resource could not be found.")
        except ApiError as err:
            if err.code == 401:
                reply = Reply(
                    401,
                    {
                        "error": {
                            "code": 401,
                            "title": "Unauthorized",
                            "message": err.message,
                        }
                    },
                    {"WWW-Authenticate": f'Keystone uri="{self.server.auth_url}"'},
                )
            else:
                reply = Reply(err.code, err.body())
        except Exception as err:  # a bug here must still answer
            self.log_error("internal error: %r", err)
            reply = Reply(500, ApiError(500, "Unexpected API Error.").body())
        self.send(reply, version, method == "HEAD")

    def send(self, reply: Reply, version: str | None, head: bool) -> None:
        data = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.code)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "0" if head else str(len(data)))
        self.send_header("X-Compute-Request-Id", "req-" + str(uuid.uuid4()))
        if version:
            self.send_header("OpenStack-API-Version", "compute " + version)
            self.send_header("X-OpenStack-Nova-API-Version", version)
            self.send_header(
                "Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
            )
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if data and not head:
            self.wfile.write(data)

    def authenticate(self) -> Caller:
        token = self.headers.get("X-Auth-Token", "").strip()
        if not token:
            raise ApiError(401, "The request you have made requires authentication.")
        validator = self.server.validator
        if validator is None:
            return Caller()
        caller = validator.validate(token)
        if caller is None:
            raise ApiError(401, "The request you have made requires authentication.")
        return caller

    def visible(self, server_id: str) -> dict[str, Any]:
        server = self.server.store.get(server_id)
        if server is None or not self.caller.may_see(server):
            raise not_found(server_id)
        return server

    # -- version documents
    @route("GET", r"/")
    def versions(self) -> Reply:
        doc = version_doc(self.base)
        doc["links"] = doc["links"][:1]
        del doc["media-types"]
        return Reply(200, {"versions": [doc]})

    @route("GET", r"/v2\.1")
    def version(self) -> Reply:
        return Reply(200, {"version": version_doc(self.base)})

    # -- servers
    @route("GET", r"/v2\.1/servers")
    def list_servers(self) -> Reply:
        return self.listing(detail=False)

    @route("GET", r"/v2\.1/servers/detail")
    def list_servers_detail(self) -> Reply:
        return self.listing(detail=True)

    def listing(self, detail: bool) -> Reply:
        q = {k: v[-1] for k, v in self.query.items()}
        # As in Nova: admins list their own project's servers unless they
        # ask for all_tenants, which others may not (it is ignored).
        caller = self.caller
        every = not caller.checked or (
            caller.is_admin
            and q.get("all_tenants", "0").lower() not in ("0", "false", "off", "no")
        )
        store = self.server.store
        with store.lock:
            servers = [store.get(sid) for sid in list(store.servers)]
            servers = [
                s
                for s in servers
                if s is not None and (every or s["tenant_id"] == caller.project_id)
            ]
            if "name" in q:
                try:
                    name_re = re.compile(q["name"])
                except re.error:
                    raise bad_input("name", "Invalid regular expression.") from None
                servers = [s for s in servers if name_re.search(s["name"])]
            if "status" in q:
                servers = [s for s in servers if s["status"] == q["status"].upper()]
            servers.sort(key=lambda s: (s["created"], s["id"]), reverse=True)
            if "marker" in q:
                ids = [s["id"] for s in servers]
                if q["marker"] not in ids:
                    raise ApiError(400, f"marker [{q['marker']}] not found")
                servers = servers[ids.index(q["marker"]) + 1 :]
            try:
                limit = min(int(q.get("limit", MAX_LIMIT)), MAX_LIMIT)
            except ValueError:
                raise bad_input("limit", "It must be an integer.") from None
            if limit < 0:
                raise bad_input("limit", "It must be >= 0.")
            servers = servers[:limit]
            if detail:
                items = [server_view(s, self.base) for s in servers]
            else:
                items = [
                    {
                        "id": s["id"],
                        "name": s["name"],
                        "links": server_links(self.base, s["id"]),
                    }
                    for s in servers
                ]
        return Reply(200, {"servers": items})

    @route("POST", r"/v2\.1/servers")
    def create_server(self) -> Reply:
        spec = self.body_object("server")
        name = spec.get("name")
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 255:
            raise bad_input(
                "name",
                "'name' is a required property and must be 1 to 255 characters long.",
            )
        if not isinstance(spec.get("flavorRef"), (str, int)) or spec["flavorRef"] == "":
            raise bad_input("flavorRef", "'flavorRef' is a required property")
        image = spec.get("imageRef", "")
        if not isinstance(image, str):
            raise bad_input("imageRef", f"{image!r} is not of type 'string'")
        metadata = check_metadata(spec.get("metadata", {}))
        check_quota(metadata)
        user_data = check_user_data(spec.get("user_data"))
        store = self.server.store
        sid = str(uuid.uuid4())
        build = store.build_seconds
        with store.lock:
            server = store.new(
                sid,
                name=name,
                tenant_id=self.caller.project_id,
                user_id=self.caller.user_id,
                metadata=metadata,
                image_id=image,
                flavor_id=str(spec["flavorRef"]),
                user_data=user_data,
                status="BUILD" if build > 0 else "ACTIVE",
                build_until=time.time() + build if build > 0 else None,
                launched_at=None if build > 0 else now_iso(),
            )
            server["agent"] = self.server.agents.boot(server)
            store.save()
        return Reply(
            202,
            {
                "server": {
                    "id": sid,
                    "links": server_links(self.base, sid),
                    "OS-DCF:diskConfig": "MANUAL",
                    "security_groups": [{"name": "default"}],
                    "adminPass": secrets.token_urlsafe(9),
                }
            },
            {"Location": f"{self.base}/v2.1/servers/{sid}"},
        )

    @route("GET", r"/v2\.1/servers/([^/]+)")
    def show_server(self, sid: str) -> Reply:
        with self.server.store.lock:
            return Reply(200, {"server": server_view(self.visible(sid), self.base)})

    @route("PUT", r"/v2\.1/servers/([^/]+)")
    def update_server(self, sid: str) -> Reply:
        spec = self.body_object("server")
        unknown = set(spec) - {"name"}
        if unknown:
            names = ", ".join(map(repr, sorted(unknown)))
            raise ApiError(
                400, f"Additional properties are not allowed ({names} were unexpected)"
            )
        store = self.server.store
        with store.lock:
            server = self.visible(sid)
            if "name" in spec:
                if (
                    not isinstance(spec["name"], str)
                    or not 1 <= len(spec["name"].strip()) <= 255
                ):
                    raise bad_input("name", "It must be 1 to 255 characters long.")
                server["name"] = spec["name"]
            touch(server)
            store.save()
            return Reply(200, {"server": server_view(server, self.base)})

    @route("DELETE", r"/v2\.1/servers/([^/]+)")
    def delete_server(self, sid: str) -> Reply:
        store = self.server.store
        with store.lock:
            self.visible(sid)
            del store.servers[sid]
            store.save()
        self.server.agents.remove(sid)
        return Reply(204)

    @route("POST", r"/v2\.1/servers/([^/]+)/action")
    def server_action(self, sid: str) -> Reply:
        body = self.read_json()
        if not isinstance(body, dict) or len(body) != 1:
            raise ApiError(400, "Malformed request body")
        action = next(iter(body))
        if action == "os-getConsoleOutput":
            return self.console_output(sid, body[action])
        moves = {
            "os-stop": (("ACTIVE", "ERROR"), "SHUTOFF", "stop"),
            "os-start": (("SHUTOFF",), "ACTIVE", "start"),
        }
        if action not in moves:
            raise ApiError(400, f"There is no such action: {action}")
        allowed, target, verb = moves[action]
        store = self.server.store
        with store.lock:
            server = self.visible(sid)
            if server["status"] not in allowed:
                vm_state = STATES[server["status"]][0]
                raise ApiError(
                    409,
                    f"Cannot '{verb}' instance {sid} while it is in "
                    f"vm_state {vm_state}",
                )
            server["status"] = target
            touch(server)
            store.save()
        return Reply(202)

    def console_output(self, sid: str, args: Any) -> Reply:
        """The server's console log: its agent's output (what cloud-init's
        console shows of a real server), and why no agent runs, if none."""
        length = args.get("length") if isinstance(args, dict) else None
        try:
            lines = None if length in (None, -1, "-1") else int(length)
        except (TypeError, ValueError):
            raise ApiError(400, f"Invalid length: {length!r}") from None
        if lines is not None and lines < 0:
            raise ApiError(400, f"Invalid length: {length!r}")
        with self.server.store.lock:
            server = dict(self.visible(sid))
        booted = dict(server.get("agent") or {})
        status = self.server.agents.status(sid) or {}
        text = ""
        if booted.get("log") and os.path.exists(booted["log"]):
            with open(booted["log"], encoding="utf-8", errors="replace") as log:
                text = log.read()
        if not booted.get("running") and booted.get("why"):
            text += f"[no swflows-agent started: {booted['why']}]\n"
        if status and not status.get("running"):
            text += f"[swflows-agent exited with status {status['exit_status']}]\n"
        kept = text.splitlines(keepends=True)
        if lines is not None:
            kept = kept[-lines:] if lines else []
        return Reply(200, {"output": "".join(kept)})

    # -- metadata
    @route("GET", r"/v2\.1/servers/([^/]+)/metadata")
    def get_metadata(self, sid: str) -> Reply:
        with self.server.store.lock:
            return Reply(200, {"metadata": dict(self.visible(sid)["metadata"])})

    @route("PUT", r"/v2\.1/servers/([^/]+)/metadata")
    def replace_metadata(self, sid: str) -> Reply:
        return self.write_metadata(sid, replace=True)

    @route("POST", r"/v2\.1/servers/([^/]+)/metadata")
    def update_metadata(self, sid: str) -> Reply:
        return self.write_metadata(sid, replace=False)

    def write_metadata(self, sid: str, replace: bool) -> Reply:
        items = check_metadata(self.body_object("metadata"))
        store = self.server.store
        with store.lock:
            server = self.visible(sid)
            merged = dict(items) if replace else dict(server["metadata"], **items)
            check_quota(merged)
            server["metadata"] = merged
            touch(server)
            store.save()
            return Reply(200, {"metadata": dict(merged)})

    @route("GET", r"/v2\.1/servers/([^/]+)/metadata/([^/]+)")
    def get_metadata_item(self, sid: str, key: str) -> Reply:
        key = unquote(key)
        with self.server.store.lock:
            metadata = self.visible(sid)["metadata"]
            if key not in metadata:
                raise ApiError(404, "Metadata item was not found")
            return Reply(200, {"meta": {key: metadata[key]}})

    @route("PUT", r"/v2\.1/servers/([^/]+)/metadata/([^/]+)")
    def set_metadata_item(self, sid: str, key: str) -> Reply:
        key = unquote(key)
        meta = check_metadata(self.body_object("meta"), "meta")
        if len(meta) > 1:
            raise ApiError(400, "Request body contains too many items")
        if key not in meta:
            raise ApiError(400, "Request body and URI mismatch")
        store = self.server.store
        with store.lock:
            server = self.visible(sid)
            merged = dict(server["metadata"], **meta)
            check_quota(merged)
            server["metadata"] = merged
            touch(server)
            store.save()
        return Reply(200, {"meta": meta})

    @route("DELETE", r"/v2\.1/servers/([^/]+)/metadata/([^/]+)")
    def delete_metadata_item(self, sid: str, key: str) -> Reply:
        key = unquote(key)
        store = self.server.store
        with store.lock:
            server = self.visible(sid)
            if key not in server["metadata"]:
                raise ApiError(404, "Metadata item was not found")
            del server["metadata"][key]
            touch(server)
            store.save()
        return Reply(204)

    # -- flavors (a fixed set, as a fresh cloud's operator would create)
    @route("GET", r"/v2\.1/flavors")
    def list_flavors(self) -> Reply:
        return Reply(
            200, {"flavors": [flavor_view(f, self.base, False) for f in FLAVORS]}
        )

    @route("GET", r"/v2\.1/flavors/detail")
    def list_flavors_detail(self) -> Reply:
        return Reply(
            200, {"flavors": [flavor_view(f, self.base, True) for f in FLAVORS]}
        )

    @route("GET", r"/v2\.1/flavors/([^/]+)")
    def show_flavor(self, flavor_id: str) -> Reply:
        for flavor in FLAVORS:
            if flavor["id"] == flavor_id:
                return Reply(200, {"flavor": flavor_view(flavor, self.base, True)})
        raise ApiError(404, f"Flavor {flavor_id} could not be found.")

    # -- a server's interfaces: no network service here, so none
    @route("GET", r"/v2\.1/servers/([^/]+)/os-interface")
    def list_interfaces(self, sid: str) -> Reply:
        self.visible(sid)
        return Reply(200, {"interfaceAttachments": []})

    # -- images (Glance's v2 API, under /image: see the module's docstring)
    @route("GET", r"/image")
    def image_versions(self) -> Reply:
        return Reply(
            300,
            {
                "versions": [
                    {
                        "id": "v2.0",
                        "status": "CURRENT",
                        "links": [{"rel": "self", "href": self.base + "/image/v2/"}],
                    }
                ]
            },
        )

    @route("GET", r"/image/v2/schemas/image")
    def image_schema(self) -> Reply:
        self.authenticate()
        return Reply(200, IMAGE_SCHEMA)

    @route("GET", r"/image/v2/images")
    def list_images(self) -> Reply:
        self.authenticate()
        q = {k: v[-1] for k, v in self.query.items()}
        found = [
            image_view(i)
            for i in IMAGES
            if all(str(i.get(k)) == v for k, v in q.items() if k in ("name", "id"))
        ]
        return Reply(
            200,
            {
                "images": found,
                "first": "/v2/images",
                "schema": "/v2/schemas/images",
            },
        )

    @route("GET", r"/image/v2/images/([^/]+)")
    def show_image(self, image_id: str) -> Reply:
        self.authenticate()
        for image in IMAGES:
            if image["id"] == image_id:
                return Reply(200, image_view(image))
        raise ApiError(404, f"No image found with ID {image_id}")

    # -- test-only control paths (not Nova)
    @route("GET", r"/_standin/agents")
    def control_agents(self) -> Reply:
        agents = self.server.agents
        with agents.lock:
            found = {sid: agents.status(sid) for sid in list(agents.procs)}
        return Reply(200, {"agents": found})

    @route("GET", r"/_standin/servers")
    def control_list(self) -> Reply:
        store = self.server.store
        with store.lock:
            return Reply(200, {"servers": [store.get(s) for s in list(store.servers)]})

    @route("GET", r"/_standin/servers/([^/]+)")
    def control_show(self, sid: str) -> Reply:
        with self.server.store.lock:
            server = self.server.store.get(sid)
            if server is None:
                raise not_found(sid)
            agent = dict(server.get("agent") or {})
            agent.update(self.server.agents.status(sid) or {})
            return Reply(200, {"server": {**server, "agent": agent}})

    @route("PUT", r"/_standin/servers/([^/]+)")
    def control_put(self, sid: str) -> Reply:
        spec = self.read_json() or {}
        if not isinstance(spec, dict):
            raise ApiError(400, "The body must be a JSON object.")
        known = {"name", "status", "metadata", "tenant_id", "user_id", "user_data"}
        unknown = set(spec) - known
        if unknown:
            raise ApiError(400, f"Unknown fields: {sorted(unknown)}")
        if "status" in spec and spec["status"] not in STATES:
            raise ApiError(400, f"status must be one of {sorted(STATES)}")
        if "metadata" in spec:
            check_metadata(spec["metadata"])
        if "user_data" in spec:
            check_user_data(spec["user_data"])
        store = self.server.store
        with store.lock:
            server = store.get(sid)
            created = server is None
            if created:
                server = store.new(
                    sid,
                    tenant_id=self.server.default_project,
                    user_id=self.server.default_user,
                )
            server.update(spec)
            if "status" in spec:
                server["build_until"] = None
            touch(server)
            store.save()
            return Reply(201 if created else 200, {"server": server})

    @route("DELETE", r"/_standin/servers/([^/]+)")
    def control_delete(self, sid: str) -> Reply:
        store = self.server.store
        with store.lock:
            if store.servers.pop(sid, None) is None:
                raise not_found(sid)
            store.save()
        self.server.agents.remove(sid)
        return Reply(204)


class StandinServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        store: Store,
        validator: TokenValidator | None,
        auth_url: str,
        default_project: str | None,
        default_user: str | None,
        agents: Agents,
    ) -> None:
        super().__init__(address, Handler)
        self.agents = agents
        self.store = store
        self.validator = validator
        self.auth_url = auth_url
        self.default_project = default_project
        self.default_user = default_user


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--data", required=True, help="JSON file that keeps the servers"
    )
    parser.add_argument(
        "--keystone-config",
        help="JSON file: auth_url, username, password, "
        "project_name, user_domain_id, "
        "project_domain_id of a service user that may "
        "validate tokens",
    )
    parser.add_argument("--default-project-id")
    parser.add_argument("--default-user-id")
    parser.add_argument("--build-seconds", type=float, default=0.0)
    parser.add_argument(
        "--agent-python",
        default=sys.executable,
        help="the Python that runs booted servers' agents (swflows importable)",
    )
    parser.add_argument(
        "--agents-dir", help="booted servers' agent folders (default: beside --data)"
    )
    parser.add_argument(
        "--agent-interval", type=float, help="seconds between an agent's polls"
    )
    parser.add_argument(
        "--heat-image",
        help="the folder of Heat's agents for servers booted with Heat's "
        "user data (booted only once it holds a 'ready' file)",
    )
    args = parser.parse_args(argv)

    validator, auth_url = None, ""
    if args.keystone_config:
        with open(args.keystone_config, encoding="utf-8") as f:
            conf = json.load(f)
        validator, auth_url = TokenValidator(conf), conf["auth_url"]
    store = Store(os.path.abspath(args.data), args.build_seconds)
    agents = Agents(
        os.path.abspath(
            args.agents_dir or os.path.join(os.path.dirname(store.path), "agents")
        ),
        args.agent_python,
        args.agent_interval,
        args.heat_image,
    )
    server = StandinServer(
        (args.host, args.port),
        store,
        validator,
        auth_url,
        args.default_project_id,
        args.default_user_id,
        agents,
    )

    def stop(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with store.lock:
        for held in store.servers.values():
            if held.get("user_data"):
                held["agent"] = agents.boot(held)
    print(
        f"nova stand-in listening on http://{args.host}:{args.port}"
        f" ({len(store.servers)} servers loaded)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        agents.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
