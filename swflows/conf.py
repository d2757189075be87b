"""Every swflows option, as typed oslo.config options.

swflows never uses oslo.config's global ``CONF``: :func:`get_conf` builds a
new :class:`~oslo_config.cfg.ConfigOpts` with everything registered, so an
embedder (or a test) may hold several.  :func:`list_opts` is the
``oslo.config.opts`` entry point, for ``oslo-config-generator --namespace
swflows``.  Reading the environment for default paths is the only I/O here.

Transport names are checked and normalised by the option types (any case,
blueprint aliases mapped), so a bad name fails when the configuration is
loaded, not when a deployment first uses it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Final

from keystoneauth1 import loading
from oslo_config import cfg, types

from swflows import exceptions
from swflows import transport_names as names

PROJECT: Final = "swflows"
#: the client groups, one per cloud service swflows calls
CLIENT_GROUPS: Final = ("identity", "object_store", "messaging", "compute")


#: ``deferred_auth_method`` choices
DEFERRED_SERVICE: Final = "service"
DEFERRED_TRUSTS: Final = "trusts"

_SIGNAL_CHOICES: Final = {
    names.TEMP_URL_SIGNAL: "the agent PUTs to a Swift TempURL; no Keystone user",
    names.ZAQAR_SIGNAL: "the agent posts to a Zaqar queue",
    names.HEAT_SIGNAL: "the agent signals the embedder's API as a stack user",
    names.CFN_SIGNAL: "the agent POSTs to an EC2-signed URL (expires quickly)",
    names.NO_SIGNAL: "nothing signals; COMPLETE once published",
    names.AUTO: "the first usable of auto_signal_transport_order",
}
_CONFIG_CHOICES: Final = {
    names.POLL_TEMP_URL: "the agent polls a Swift TempURL object; no Keystone user",
    names.ZAQAR_MESSAGE: "the agent reads a Zaqar queue",
    names.POLL_SERVER_HEAT: "the agent polls the embedder's API as a stack user",
}


class SignalTransportType(types.String):
    """A signal transport name, returned as Heat spells it."""

    def __init__(self, allow_auto: bool = True) -> None:
        allowed = (
            names.SIGNAL_TRANSPORTS if allow_auto else names.CONCRETE_SIGNAL_TRANSPORTS
        )
        super().__init__(
            choices=[(n, _SIGNAL_CHOICES[n]) for n in allowed],
            type_name="signal transport",
        )
        self.allow_auto = allow_auto

    def __call__(self, value: Any) -> str:
        try:
            name = names.normalize_signal_transport(value)
        except exceptions.ValidationError as exc:
            raise ValueError(exc.reason) from None
        return super().__call__(name)


class ConfigTransportType(types.String):
    """A config (metadata) transport name, returned as Heat spells it."""

    def __init__(self) -> None:
        super().__init__(
            choices=list(_CONFIG_CHOICES.items()), type_name="config transport"
        )

    def __call__(self, value: Any) -> str:
        try:
            name = names.normalize_config_transport(value)
        except exceptions.ValidationError as exc:
            raise ValueError(exc.reason) from None
        return super().__call__(name)


default_opts: Final[list[cfg.Opt]] = [
    cfg.Opt(
        "default_deployment_signal_transport",
        type=SignalTransportType(),
        default=names.TEMP_URL_SIGNAL,
        help="Signal transport of a deployment that names none. TEMP_URL_SIGNAL "
        "needs no Keystone user; AUTO picks the first usable transport of "
        "auto_signal_transport_order. Aliases TEMP_URL_POLL and ZAQAR_MESSAGE "
        "are accepted.",
    ),
    cfg.Opt(
        "default_software_config_transport",
        type=ConfigTransportType(),
        default=names.POLL_TEMP_URL,
        help="How a server that names no transport receives its metadata.",
    ),
    cfg.ListOpt(
        "auto_signal_transport_order",
        item_type=SignalTransportType(allow_auto=False),
        default=[names.TEMP_URL_SIGNAL, names.ZAQAR_SIGNAL, names.HEAT_SIGNAL],
        help="Signal transports AUTO tries, in order; the first whose service "
        "is available is used.",
    ),
    cfg.StrOpt(
        "default_project",
        default="default",
        help="The Keystone project that owns every config, deployment, server "
        "and group made without a request context (an embedder's own calls, "
        "the command line without cloud credentials) or before projects were "
        "recorded.",
    ),
    cfg.IntOpt(
        "deployment_timeout",
        default=3600,
        min=1,
        max=604800,
        help="Seconds a deployment action may run before it is marked FAILED "
        "(timeout), unless the deployment sets its own timeout; at most "
        "604800 (7 days), as a deployment's own.",
    ),
    cfg.IntOpt(
        "delivery_timeout",
        default=600,
        min=0,
        help="Seconds after which a deployment whose server has neither read "
        "its metadata nor sent a 'started' signal is marked FAILED (never "
        "picked up). 0 disables the check.",
    ),
    cfg.IntOpt(
        "tempurl_grace_period",
        default=600,
        min=0,
        help="Seconds a Swift TempURL stays valid after the deployment's "
        "timeout, so it never expires while the deployment can still finish.",
    ),
    cfg.StrOpt(
        "tempurl_digest",
        default="sha256",
        choices=[
            ("sha256", "HMAC-SHA256, accepted by every current Swift"),
            ("sha512", "HMAC-SHA512, if the cluster allows it"),
        ],
        help="Digest used to sign Swift TempURLs.",
    ),
    cfg.StrOpt(
        "signal_container",
        default="swflows-signals",
        regex=r"^[^/]{1,200}$",
        help="Name, or name prefix, of the Swift container(s) holding "
        "TEMP_URL_SIGNAL objects.",
    ),
    cfg.StrOpt(
        "metadata_container",
        default="swflows-metadata",
        regex=r"^[^/]{1,200}$",
        help="Swift container holding POLL_TEMP_URL server metadata objects.",
    ),
    cfg.StrOpt(
        "zaqar_signal_auth",
        default=names.ZAQAR_AUTH_SIGNED_URL,
        choices=[
            (
                names.ZAQAR_AUTH_SIGNED_URL,
                "the agent posts with a signed URL; no Keystone user",
            ),
            (
                names.ZAQAR_AUTH_CREDENTIALS,
                "the agent authenticates as a stack user, as in Heat",
            ),
        ],
        help="How a ZAQAR_SIGNAL agent is allowed to post to its queue.",
    ),
    cfg.StrOpt(
        "zaqar_message_auth",
        default=names.ZAQAR_AUTH_SIGNED_URL,
        choices=[
            (
                names.ZAQAR_AUTH_SIGNED_URL,
                "the agent reads with a signed URL (swflows' agent only)",
            ),
            (
                names.ZAQAR_AUTH_CREDENTIALS,
                "the server gets a Keystone user and the queue lives in its "
                "project, as in Heat (Heat's zaqar collector needs it)",
            ),
        ],
        help="How a ZAQAR_MESSAGE server reads its metadata queue.",
    ),
    cfg.IntOpt(
        "zaqar_max_message_size",
        default=262144,
        min=1024,
        help="The largest POST Zaqar accepts, in bytes (Zaqar's [transport] "
        "max_messages_post_size, 262144 by default). A ZAQAR_MESSAGE server's "
        "whole metadata document is one message: a document that would not "
        "fit fails the publish with an error naming the server, its size "
        "and this limit, before anything is posted.",
    ),
    cfg.StrOpt(
        "deferred_auth_method",
        default=DEFERRED_SERVICE,
        choices=[
            (
                DEFERRED_SERVICE,
                "swflows' own identity does everything (the client groups)",
            ),
            (
                DEFERRED_TRUSTS,
                "a request that carries the caller's token delegates the "
                "caller's roles on its project to the [trustee] user through a "
                "Keystone trust; that deployment's signal stores live in the "
                "caller's project and its flows reach them through the trust",
            ),
        ],
        help="How work that outlives a request (a resume after a restart, a "
        "timeout, an undeploy) acts on the caller's project. The trust is "
        "deleted with the deployment.",
    ),
    cfg.ListOpt(
        "trusts_delegated_roles",
        default=[],
        help="Roles a trust delegates (with deferred_auth_method = trusts); "
        "empty: every role of the caller's request context.",
    ),
    cfg.IntOpt(
        "max_signal_bytes",
        default=1048576,
        min=1024,
        help="Largest signal payload accepted, in bytes; larger ones are "
        "refused. Agents trim theirs to 950000 bytes.",
    ),
]

watcher_group: Final = cfg.OptGroup(
    "watcher", help="The signal watcher that checks every waiting deployment."
)
watcher_opts: Final[list[cfg.Opt]] = [
    cfg.FloatOpt(
        "poll_interval",
        default=0.5,
        min=0.1,
        help="Seconds between the starts of two looks at the signal stores. "
        "A look costs one Swift container listing for TEMP_URL_SIGNAL, "
        "whatever the number of waiting deployments, so 0.5 s is 2 requests "
        "per second while idle; signals then land in about half a second.",
    ),
    cfg.FloatOpt(
        "poll_jitter",
        default=0.1,
        min=0.0,
        max=1.0,
        help="Random fraction added to or taken from each interval, so that "
        "watchers do not poll in lockstep.",
    ),
    cfg.FloatOpt(
        "max_poll_interval",
        default=30.0,
        min=0.1,
        help="Cap, in seconds, of the interval when backing off from a "
        "failing or idle service.",
    ),
    cfg.FloatOpt(
        "backoff_multiplier",
        default=1.5,
        min=1.0,
        help="Factor the interval grows by at each back-off step.",
    ),
    cfg.URIOpt(
        "zaqar_push_url",
        schemes=["http", "https"],
        help="Base URL at which Zaqar reaches swflows' signal endpoint "
        "(swflows.wsgi.signal), e.g. http://swflows.example.com:8004. When "
        "set, each ZAQAR_SIGNAL queue (signed_url mode) gets a Zaqar "
        "subscription that posts its messages to <url>/v1/push/<queue>, so "
        "a signal completes its deployment without waiting for a poll; the "
        "watcher still polls the queues and catches a push that was lost. "
        "The subscription is removed with the queue. Unset: polling only. "
        "Zaqar must run its notifier ([storage] message_pipeline = "
        "zaqar.notification.notifier).",
    ),
    cfg.FloatOpt(
        "sweep_interval",
        default=60.0,
        min=1.0,
        help="Seconds between two sweeps for signal stores no deployment "
        "waits on (a TempURL object or queue recreated by a signal sent "
        "after its deployment ended), and for metadata channels no server "
        "owns.",
    ),
    cfg.FloatOpt(
        "orphan_grace",
        default=300.0,
        min=1.0,
        help="Seconds an IN_PROGRESS deployment that no running or parked "
        "flow drives must have stayed unchanged before the elected watcher's "
        "sweep ends it FAILED (reason kind 'orphaned', or 'flow_broken' when "
        "a BROKEN flow names it) instead of leaving it waiting forever.",
    ),
    cfg.FloatOpt(
        "channel_sweep_grace",
        default=900.0,
        min=0.0,
        help="Seconds a metadata object or queue must have been seen owned "
        "by no server of the store, at every sweep, before the sweep removes "
        "it: longer than an enrollment takes from making a channel to "
        "recording it (a boot through Nova included).",
    ),
    cfg.BoolOpt(
        "sweep_untagged_channels",
        default=False,
        help="Also sweep metadata objects and queues that carry no owner tag "
        "(written before swflows tagged them). Only for an installation that "
        "shares its metadata container and Zaqar project with no other: "
        "another installation's untagged channels look the same.",
    ),
]

runner_group: Final = cfg.OptGroup(
    "runner", help="The in-process runner that drives flows and resumes them."
)
runner_opts: Final[list[cfg.Opt]] = [
    cfg.IntOpt(
        "workers",
        default=8,
        min=1,
        help="Threads running flow steps. Waiting deployments hold none: "
        "they are parked until the watcher resumes them.",
    ),
    cfg.FloatOpt(
        "lease_seconds",
        default=30.0,
        min=1.0,
        help="Seconds a runner's claim on a flow lasts unless renewed; a "
        "runner renews its claims every third of it. A flow whose runner "
        "died is taken over once its claim ran out (at once when the dead "
        "runner was on the same host).",
    ),
    cfg.IntOpt(
        "launch_batch",
        default=64,
        min=0,
        help="New deployments (deploy flows that wait for their signal) are "
        "launched together, up to this many in a round: their flows' rows and "
        "logbooks written in one transaction, each server's metadata "
        "published once for all of them, and their flows parked in one "
        "transaction. A flow that fails in a round goes on in an engine of "
        "its own. 0: every new flow runs in an engine of its own from its "
        "start. A conductor launches the new deploys it claims in rounds "
        "too, holding up to this many of them beside its workers' flows.",
    ),
    cfg.BoolOpt(
        "resume_on_start",
        default=True,
        help="Resume interrupted flows when the runner starts, and take over "
        "those of runners that died while it runs.",
    ),
]

database_group: Final = cfg.OptGroup(
    "database", help="The store of configs, deployments and flow logbooks."
)
database_opts: Final[list[cfg.Opt]] = [
    cfg.StrOpt(
        "connection",
        secret=True,
        sample_default="sqlite:///$XDG_STATE_HOME/swflows/swflows.sqlite",
        help="SQLAlchemy URL of the store (PostgreSQL, MySQL or SQLite). "
        "Unset: a SQLite file swflows.sqlite in $XDG_STATE_HOME/swflows, "
        "else ~/.local/state/swflows.",
    ),
    cfg.StrOpt(
        "table_prefix",
        default="swflows_",
        regex=r"^([A-Za-z][A-Za-z0-9_]{0,31})?$",
        help="Prefix of every table name, so several installations can share "
        "one database.",
    ),
    cfg.StrOpt(
        "secret_key",
        secret=True,
        help="Fernet key (urlsafe base64, 32 bytes) encrypting secrets at "
        "rest. Beats secret_key_file.",
    ),
    cfg.StrOpt(
        "secret_key_file",
        sample_default="$XDG_STATE_HOME/swflows/secret.key",
        help="File holding the Fernet key when secret_key is unset. Unset: "
        "secret.key beside the default database, created with mode 0600 on "
        "first use.",
    ),
    cfg.IntOpt(
        "max_retries",
        default=10,
        min=-1,
        help="How many more times opening a PostgreSQL or MySQL store tries "
        "to reach its database when it cannot (a restart, a reset "
        "connection), retry_interval apart; -1: for ever.  A process "
        "started while its database restarts waits for it instead of "
        "exiting.  Once open, each transaction has its own quick retries.",
    ),
    cfg.FloatOpt(
        "retry_interval",
        default=2.0,
        min=0,
        help="Seconds between the tries of max_retries.",
    ),
    cfg.IntOpt(
        "max_pool_size",
        default=5,
        min=1,
        help="PostgreSQL and MySQL: connections a process keeps open to the "
        "store.  With max_overflow, the most it holds at once: size the "
        "server's own limit (PostgreSQL's max_connections) for every "
        "process, a Heat plugin's once per heat-engine worker.",
    ),
    cfg.IntOpt(
        "max_overflow",
        default=10,
        min=0,
        help="PostgreSQL and MySQL: connections a process may open past "
        "max_pool_size while all of those are in use; closed once given back.",
    ),
    cfg.FloatOpt(
        "pool_timeout",
        default=30.0,
        min=0.1,
        help="Seconds a thread waits for one of the process's store "
        "connections once max_pool_size + max_overflow are in use, before "
        "its transaction fails with SQLAlchemy's TimeoutError (which a "
        "runner takes for an outage and tries again).",
    ),
]

stack_user_group: Final = cfg.OptGroup(
    "stack_user",
    help="Keystone users the agents of HEAT_SIGNAL, CFN_SIGNAL and credential "
    "ZAQAR_SIGNAL deployments authenticate as (Heat's stack domain users).",
)
stack_user_opts: Final[list[cfg.Opt]] = [
    cfg.StrOpt(
        "stack_user_domain_id",
        help="Id of the domain holding stack users; beats stack_user_domain_name.",
    ),
    cfg.StrOpt(
        "stack_user_domain_name",
        help="Name of the domain holding stack users.",
    ),
    cfg.StrOpt(
        "stack_domain_admin",
        help="Keystone user that administers the stack user domain.",
    ),
    cfg.StrOpt(
        "stack_domain_admin_password",
        secret=True,
        help="Password of stack_domain_admin.",
    ),
    cfg.StrOpt(
        "stack_user_role",
        default="heat_stack_user",
        help="Role given to stack users in their project.",
    ),
]

#: swflows' own Keystone user, the trustee of the trusts callers make
TRUSTEE_GROUP: Final = "trustee"
_TRUSTEE_HELP: Final = (
    "The Keystone user callers delegate to with deferred_auth_method = "
    "trusts (keystoneauth1 auth options, usually auth_type = password). It "
    "must name no project: each login is scoped by a trust."
)
#: swflows' own options of the ``[trustee]`` group (beside its auth's)
trustee_opts: Final[list[cfg.Opt]] = [
    cfg.FloatOpt(
        "result_trust_keep",
        default=3600.0,
        min=0,
        help="Seconds the trust an asynchronous action's result was sent "
        "through (a Mistral action's, to its action execution) is kept "
        "after the result was sent. Mistral goes on with the workflow in "
        "the context of that request, handing a token of the trust to the "
        "next action, and a trust's tokens die with it: keep it at least "
        "as long as Keystone's token lifetime ([token] expiration, 3600 by "
        "default). A deployment that next action makes acts through the "
        "same trust, which then goes with the last of them.",
    ),
]

jobboard_group: Final = cfg.OptGroup(
    "jobboard", help="Running flows on several hosts through a TaskFlow jobboard."
)
jobboard_opts: Final[list[cfg.Opt]] = [
    cfg.BoolOpt(
        "enabled",
        default=False,
        help="Post flows as jobs to a jobboard, for `swflows conductor` "
        "processes to claim and drive, instead of running them in-process. "
        "Every process of an installation (posters and conductors) must "
        "agree on it.",
    ),
    cfg.StrOpt(
        "backend_url",
        default="redis://127.0.0.1:6379/0",
        secret=True,
        help="Jobboard backend: redis://[:password@]host[:port][/db]"
        "[?namespace=N] (namespace swflows by default) or "
        "zookeeper://host[:port][,host:port...][/path][?timeout=S] (path "
        "/swflows and kazoo's 10 s session by default).",
    ),
    cfg.IntOpt(
        "claim_expiry",
        default=30,
        min=1,
        help="Seconds a conductor's claim on a Redis job lasts unless it is "
        "extended (every third of it, while the conductor lives): a dead, "
        "paused or cut-off conductor's flows are taken over within this "
        "bound plus half a second (on ZooKeeper the session timeout is the "
        "bound). A flow posted and unclaimed for twice this, whose job the "
        "board no longer holds, is posted again.",
    ),
]

coordination_group: Final = cfg.OptGroup(
    "coordination",
    help="Electing one signal watcher among the runners that share a database.",
)
coordination_opts: Final[list[cfg.Opt]] = [
    cfg.StrOpt(
        "backend_url",
        secret=True,
        help="tooz URL of the Redis or ZooKeeper on which the runners sharing "
        "this database elect the one that watches for signals, the others "
        "standing by: redis://host:port?db=N or zookeeper://host:port. "
        "Unset: with [jobboard] enabled, the jobboard's server; else every "
        "runner watches, as one process alone does.",
    ),
    cfg.IntOpt(
        "leader_timeout",
        default=10,
        min=2,
        help="Seconds the elected watcher's lease lasts unrenewed (renewed "
        "every fifth of it, at most every second). Its process dead, a "
        "standby watches within this plus a renewal interval (plus "
        "ZooKeeper's tickTime); cut from the backend, it stops watching "
        "before that. On ZooKeeper it is the session timeout: within the "
        "server's minSessionTimeout and maxSessionTimeout.",
    ),
]


def _client_opts() -> list[cfg.Opt]:
    return [
        cfg.StrOpt("region_name", help="Region of the service's endpoint."),
        cfg.StrOpt(
            "interface",
            default="public",
            choices=["public", "internal", "admin"],
            help="Endpoint interface taken from the service catalog.",
        ),
        cfg.StrOpt(
            "endpoint_override",
            help="Endpoint URL to use instead of the service catalog's.",
        ),
    ]


_CLIENT_HELP: Final = {
    "identity": "Keystone: stack users and the catalog.",
    "object_store": "Swift: TempURL signals and metadata.",
    "messaging": "Zaqar: queue signals and metadata.",
    "compute": "Nova: server existence and status.",
}

object_store_opts: Final[list[cfg.Opt]] = [
    cfg.StrOpt(
        "auth_version",
        default="keystone",
        choices=[
            ("keystone", "authenticate through Keystone (this group's auth)"),
            ("v1", "Swift's own v1 auth (tempauth), for small clouds"),
        ],
        help="How swflows authenticates to Swift.",
    ),
    cfg.StrOpt("v1_auth_url", help="v1 auth URL, e.g. http://127.0.0.1:8080/auth/v1.0"),
    cfg.StrOpt("v1_user", help="v1 user, as account:user."),
    cfg.StrOpt("v1_key", secret=True, help="v1 key (password)."),
]

messaging_opts: Final[list[cfg.Opt]] = [
    cfg.StrOpt(
        "url",
        help="Zaqar endpoint given to agents (in signed URLs and collector "
        "settings). Unset: the endpoint swflows itself uses.",
    ),
]

_EXTRA_CLIENT_OPTS: Final = {
    "object_store": object_store_opts,
    "messaging": messaging_opts,
}


def _client_group(name: str) -> cfg.OptGroup:
    return cfg.OptGroup(name, help=_CLIENT_HELP[name])


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every swflows option on ``conf``.

    For the client groups this registers keystoneauth1's session options
    and ``auth_type``/``auth_section``; the chosen auth plugin registers its
    own options when it is loaded.
    """
    conf.register_opts(default_opts)
    for group, opts in (
        (watcher_group, watcher_opts),
        (runner_group, runner_opts),
        (database_group, database_opts),
        (stack_user_group, stack_user_opts),
        (jobboard_group, jobboard_opts),
        (coordination_group, coordination_opts),
    ):
        # a fresh group per ConfigOpts: register_group copies it shallowly,
        # so a shared group would share option state (and overrides)
        conf.register_group(cfg.OptGroup(group.name, help=group.help))
        conf.register_opts(opts, group=group.name)
    conf.register_group(cfg.OptGroup(TRUSTEE_GROUP, help=_TRUSTEE_HELP))
    loading.register_session_conf_options(conf, TRUSTEE_GROUP)
    loading.register_auth_conf_options(conf, TRUSTEE_GROUP)
    conf.register_opts(trustee_opts, group=TRUSTEE_GROUP)
    for name in CLIENT_GROUPS:
        group = _client_group(name)
        conf.register_group(group)
        loading.register_session_conf_options(conf, name)
        loading.register_auth_conf_options(conf, name)
        conf.register_opts(_client_opts(), group=group)
        conf.register_opts(_EXTRA_CLIENT_OPTS.get(name, []), group=group)


def list_opts() -> list[tuple[str | cfg.OptGroup, list[cfg.Opt]]]:
    """Every option by group, for ``oslo-config-generator``.

    Client groups list the ``password`` auth plugin's options, the usual
    choice; other plugins' options apply when ``auth_type`` selects them.
    """
    listed: list[tuple[str | cfg.OptGroup, list[cfg.Opt]]] = [
        ("DEFAULT", list(default_opts)),
        (watcher_group, list(watcher_opts)),
        (runner_group, list(runner_opts)),
        (database_group, list(database_opts)),
        (stack_user_group, list(stack_user_opts)),
        (jobboard_group, list(jobboard_opts)),
        (coordination_group, list(coordination_opts)),
    ]
    for name in CLIENT_GROUPS:
        opts: list[cfg.Opt] = [
            *loading.get_session_conf_options(),
            *loading.get_auth_common_conf_options(),
            *loading.get_auth_plugin_conf_options("password"),
            *_client_opts(),
            *_EXTRA_CLIENT_OPTS.get(name, []),
        ]
        listed.append((_client_group(name), opts))
    listed.append(
        (
            cfg.OptGroup(TRUSTEE_GROUP, help=_TRUSTEE_HELP),
            [
                *loading.get_session_conf_options(),
                *loading.get_auth_common_conf_options(),
                *loading.get_auth_plugin_conf_options("password"),
                *trustee_opts,
            ],
        )
    )
    return listed


def get_conf(
    args: Sequence[str] | None = None,
    config_files: Sequence[str] | None = None,
    *,
    use_env: bool = False,
) -> cfg.ConfigOpts:
    """A new, loaded ConfigOpts with every swflows option registered.

    Only the ``config_files`` given are read (no search of /etc or ~), and
    ``args`` may add ``--config-file``/``--config-dir``.  With ``use_env``,
    ``OS_<GROUP>__<OPTION>`` environment variables are read too.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    conf(
        args=list(args or []),
        project=PROJECT,
        default_config_files=list(config_files or []),
        default_config_dirs=[],
        validate_default_values=True,
        use_env=use_env,
    )
    return conf


def check_values(conf: cfg.ConfigOpts) -> None:
    """Read every registered option once, so that a value its type refuses
    fails now, naming it, rather than when some code path first reads it.

    Raises :class:`~swflows.exceptions.ValidationError` whose ``field`` is
    ``[group] option`` and whose reason names the file that set it and why
    the value was refused; a ``[database] connection`` that is not a
    database URL too (its text is not repeated: it may hold a password).
    """
    for name in list(conf):
        try:
            found = conf[name]
        except cfg.ConfigFileValueError as exc:
            raise _refused(conf, None, name, exc) from None
        if not isinstance(found, cfg.ConfigOpts.GroupAttr):
            continue
        for option in list(found):
            try:
                getattr(found, option)
            except cfg.ConfigFileValueError as exc:
                raise _refused(conf, name, option, exc) from None
    if "database" in conf and conf.database.connection:
        _check_connection(conf, conf.database.connection)


def _check_connection(conf: cfg.ConfigOpts, text: str) -> None:
    from sqlalchemy import exc as sa_exc
    from sqlalchemy.engine import make_url

    where = _where(conf, "database", "connection")
    try:
        url = make_url(text)
    except (sa_exc.ArgumentError, ValueError):
        raise exceptions.ValidationError(
            "[database] connection",
            f"{where}: not a database URL (dialect+driver://user:password@host"
            "/database, or sqlite:///path)",
        ) from None
    try:
        url.get_dialect()
    except sa_exc.NoSuchModuleError:
        raise exceptions.ValidationError(
            "[database] connection",
            f"{where}: no database driver for {url.drivername!r} (postgresql, "
            "mysql+pymysql, sqlite, …)",
        ) from None


def _where(conf: cfg.ConfigOpts, group: str | None, name: str) -> str:
    try:
        found = conf.get_location(name, group)
    except cfg.Error:
        found = None
    detail = getattr(found, "detail", None)
    return f"in {detail}" if detail else "set"


#: how oslo.config names the file of a refused value
_DETAIL: Final = re.compile(r"detail='([^']*)'")


def _refused(
    conf: cfg.ConfigOpts, group: str | None, name: str, exc: Exception
) -> exceptions.ValidationError:
    text = str(exc)
    why = text.partition(" is not valid: ")[2] or text
    detail = _DETAIL.search(text)
    where = f"in {detail.group(1)}" if detail else "set"
    return exceptions.ValidationError(
        f"[{group or 'DEFAULT'}] {name}", f"{where}: {why}"
    )


def default_state_dir() -> str:
    """Where swflows keeps its default database and key file.

    ``$XDG_STATE_HOME/swflows`` when that is an absolute path (as the XDG
    spec requires), else ``~/.local/state/swflows``.  Nothing is created.
    """
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, PROJECT)


def database_connection(conf: cfg.ConfigOpts) -> str:
    """The store URL: ``[database] connection``, else the default SQLite file."""
    configured: str | None = conf.database.connection
    if configured:
        return configured
    return "sqlite:///" + os.path.join(default_state_dir(), "swflows.sqlite")


def secret_key_file(conf: cfg.ConfigOpts) -> str:
    """The Fernet key file: ``[database] secret_key_file``, else the default."""
    configured: str | None = conf.database.secret_key_file
    if configured:
        return configured
    return os.path.join(default_state_dir(), "secret.key")
