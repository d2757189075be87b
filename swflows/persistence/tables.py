"""The store's tables, named with a configurable prefix.

The prefix (default ``swflows_``) lets an embedder keep swflows' tables in
its own database next to its own.  Index and constraint names carry it too,
because PostgreSQL index names share one namespace per schema.  The
migrations in :mod:`swflows.persistence.migrations` create exactly these
tables; a unit test compares the two.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from swflows import exceptions

DEFAULT_PREFIX: Final = "swflows_"
#: 32 leaves room for the longest derived name within PostgreSQL's 63 bytes
MAX_PREFIX_LENGTH: Final = 32
_PREFIX_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

ID_LENGTH: Final = 36
NAME_LENGTH: Final = 255
STATUS_LENGTH: Final = 32
#: a trust reference: a hex SHA-256 HMAC
TRUST_REF_LENGTH: Final = 64
TRANSPORT_LENGTH: Final = 64
#: TaskFlow's lengths for its logbook's ids and versions
TF_UUID_LENGTH: Final = 64
TF_VERSION_LENGTH: Final = 64


def epoch_seconds() -> sa.types.TypeEngine[float]:
    """Seconds since the epoch, as a float: double precision everywhere
    (MySQL's and MariaDB's plain FLOAT is single precision, about 128 s
    apart at today's times; see migration 0007)."""
    return sa.Float().with_variant(mysql.DOUBLE(asdecimal=False), "mysql", "mariadb")


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe SQL identifier start, else raise.

    An empty prefix is refused: the version table would then be
    ``alembic_version``, which TaskFlow's logbook (and many embedders) use.
    """
    if not isinstance(prefix, str) or not prefix:
        raise exceptions.ValidationError(
            "table_prefix",
            "must not be empty (alembic_version is TaskFlow's version table)",
        )
    if not _PREFIX_RE.match(prefix):
        raise exceptions.ValidationError(
            "table_prefix",
            "must be letters, digits and underscores, not starting with a digit",
        )
    if len(prefix) > MAX_PREFIX_LENGTH:
        raise exceptions.ValidationError(
            "table_prefix", f"must be at most {MAX_PREFIX_LENGTH} characters"
        )
    return prefix


def version_table(prefix: str) -> str:
    """The name of the store's alembic version table."""
    return f"{prefix}alembic_version"


def timestamp() -> sa.types.TypeEngine[Any]:
    """A date and time to the microsecond on every database: MySQL's and
    MariaDB's DATETIME keeps whole seconds unless told otherwise."""
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def json_type() -> sa.JSON:
    """JSON column type; a Python ``None`` is SQL NULL, not JSON ``null``."""
    return sa.JSON(none_as_null=True)


@dataclasses.dataclass(frozen=True)
class Tables:
    """The table objects for one prefix, built once and reused."""

    prefix: str
    metadata: sa.MetaData
    configs: sa.Table
    deployments: sa.Table
    servers: sa.Table
    flows: sa.Table
    groups: sa.Table
    #: who made each config, deployment, server and group; servers' policies
    owners: sa.Table
    #: deployments deleted lately: their late signal stores are still ours
    deleted: sa.Table
    #: one row: what names this store wherever it is reached from
    installation: sa.Table
    #: results an embedder's caller waits for (a Mistral action's)
    results: sa.Table
    #: TaskFlow's logbook, under the same prefix (see :func:`logbook_tables`)
    tf_logbooks: sa.Table
    tf_flowdetails: sa.Table
    tf_atomdetails: sa.Table


@functools.cache
def tables(prefix: str = DEFAULT_PREFIX) -> Tables:
    """The (cached) tables for ``prefix``."""
    p = check_prefix(prefix)
    metadata = sa.MetaData()
    configs = sa.Table(
        f"{p}configs",
        metadata,
        sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
        sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("group", sa.String(NAME_LENGTH), nullable=False),
        # {config, inputs, outputs, options}; secret input values encrypted
        sa.Column("body", json_type(), nullable=False),
        sa.Column("derived", sa.Boolean(), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Index(f"ix_{p}configs_created_at_id", "created_at", "id"),
    )
    servers = sa.Table(
        f"{p}servers",
        metadata,
        sa.Column("server_id", sa.String(NAME_LENGTH), primary_key=True),
        sa.Column("metadata_version", sa.Integer(), nullable=False),
        sa.Column("published_version", sa.Integer(), nullable=False),
        sa.Column("config_transport", sa.String(TRANSPORT_LENGTH), nullable=True),
        # a Fernet token of the channel's JSON: it may hold credentials
        sa.Column("channel", sa.Text(), nullable=True),
        sa.Column("updated_at", timestamp(), nullable=True),
        # set by an explicit enrollment (not by a first deployment)
        sa.Column("enrolled_at", timestamp(), nullable=True),
        # Nova knows the server: the watcher fails its waiting deployments
        # when Nova deletes it or reports it in ERROR
        sa.Column("in_compute", sa.Boolean(), nullable=True),
        # whose Nova listing shows it: a project's (read through a trust of
        # that project), or NULL, swflows' own compute login's
        sa.Column("compute_project", sa.String(NAME_LENGTH), nullable=True),
        # when the server last read its metadata through swflows or signalled
        sa.Column("last_seen_at", timestamp(), nullable=True),
    )
    deployments = sa.Table(
        f"{p}deployments",
        metadata,
        sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
        sa.Column(
            "server_id",
            sa.String(NAME_LENGTH),
            sa.ForeignKey(f"{p}servers.server_id", name=f"fk_{p}deployments_server_id"),
            nullable=False,
        ),
        sa.Column(
            "config_id",
            sa.String(ID_LENGTH),
            sa.ForeignKey(f"{p}configs.id", name=f"fk_{p}deployments_config_id"),
            nullable=True,
        ),
        sa.Column(
            "source_config_id",
            sa.String(ID_LENGTH),
            sa.ForeignKey(f"{p}configs.id", name=f"fk_{p}deployments_source_config_id"),
            nullable=True,
        ),
        sa.Column("action", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("status", sa.String(STATUS_LENGTH), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        sa.Column("reason", json_type(), nullable=True),
        sa.Column("input_values", json_type(), nullable=False),
        sa.Column("output_values", json_type(), nullable=False),
        sa.Column("signal_transport", sa.String(TRANSPORT_LENGTH), nullable=False),
        sa.Column("name", sa.String(NAME_LENGTH), nullable=True),
        sa.Column("actions", json_type(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("parent_id", sa.String(ID_LENGTH), nullable=True),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("updated_at", timestamp(), nullable=True),
        # optimistic concurrency: bumped by every update of the row
        sa.Column("version", sa.Integer(), nullable=False),
        # the server's metadata_version this row was created at: an exact
        # creation order among one server's deployments (timestamps tie)
        sa.Column("server_seq", sa.Integer(), nullable=False),
        sa.Index(f"ix_{p}deployments_server_id", "server_id"),
        sa.Index(f"ix_{p}deployments_status", "status"),
        sa.Index(f"ix_{p}deployments_created_at", "created_at"),
        sa.Index(f"ix_{p}deployments_parent_id", "parent_id"),
        sa.Index(f"ix_{p}deployments_config_id", "config_id"),
        sa.Index(f"ix_{p}deployments_source_config_id", "source_config_id"),
    )
    flows = sa.Table(
        f"{p}flows",
        metadata,
        # the flow's id, which is also its TaskFlow logbook's and flow detail's
        sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
        sa.Column("kind", sa.String(TRANSPORT_LENGTH), nullable=False),
        sa.Column("deployment_id", sa.String(ID_LENGTH), nullable=False),
        sa.Column("server_id", sa.String(NAME_LENGTH), nullable=False),
        # RUNNING (driven by its owner), PARKED (waiting; nobody drives it)
        # or BROKEN (cannot be resumed; an operator must look)
        sa.Column("state", sa.String(STATUS_LENGTH), nullable=False),
        # the runner driving it ("host:pid:token"), while it holds the lease
        sa.Column("owner", sa.String(NAME_LENGTH), nullable=True),
        # seconds since the epoch until which the owner's lease holds
        sa.Column("lease_until", epoch_seconds(), nullable=True),
        # what a parked flow waits for: its signal store, deadlines, progress
        sa.Column("waiting", json_type(), nullable=True),
        # how often it was taken over after its owner died
        sa.Column("takeovers", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("updated_at", timestamp(), nullable=True),
        sa.Index(f"ix_{p}flows_state", "state"),
        sa.Index(f"ix_{p}flows_deployment_id", "deployment_id"),
        sa.Index(f"ix_{p}flows_server_id", "server_id"),
    )
    groups = group_table(metadata, p)
    owners = owner_table(metadata, p)
    deleted = deleted_table(metadata, p)
    installation = installation_table(metadata, p)
    results = results_table(metadata, p)
    logbooks, flowdetails, atomdetails = logbook_tables(metadata, p)
    return Tables(
        p,
        metadata,
        configs,
        deployments,
        servers,
        flows,
        groups,
        owners,
        deleted,
        installation,
        results,
        logbooks,
        flowdetails,
        atomdetails,
    )


def group_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    """The deployment groups (:mod:`swflows.persistence.groups`)."""
    p = prefix
    return sa.Table(
        f"{p}groups",
        metadata,
        sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
        sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
        # the source config the members deploy
        sa.Column("config_id", sa.String(ID_LENGTH), nullable=False),
        # member name -> server id
        sa.Column("servers", json_type(), nullable=False),
        # shared input values, and member name -> that member's own values
        # (secret-named values encrypted as a deployment's are)
        sa.Column("input_values", json_type(), nullable=False),
        sa.Column("member_values", json_type(), nullable=False),
        sa.Column("signal_transport", sa.String(TRANSPORT_LENGTH), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        # the members' deployments' actions (None: the default ones)
        sa.Column("actions", json_type(), nullable=True),
        # the rollout policy (swflows.rollout.Policy.to_dict)
        sa.Column("policy", json_type(), nullable=False),
        # member name -> id of the member's deployment
        sa.Column("deployments", json_type(), nullable=False),
        # the last operation: its kind, action, and each member's progress
        sa.Column("operation", json_type(), nullable=False),
        sa.Column("action", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("status", sa.String(STATUS_LENGTH), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=False),
        # the runner driving the operation ("host:pid:token") and its lease
        sa.Column("owner", sa.String(NAME_LENGTH), nullable=True),
        sa.Column("lease_until", epoch_seconds(), nullable=True),
        # optimistic concurrency: bumped by every update of the row
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
        sa.Column("updated_at", timestamp(), nullable=True),
        sa.UniqueConstraint("name", name=f"uq_{p}groups_name"),
        sa.Index(f"ix_{p}groups_status", "status"),
    )


def owner_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    """The Keystone project and user that made each object, and each
    server's deployment policy (:mod:`swflows.persistence.owners`).

    An object without a row here belongs to the configured
    ``default_project``: everything made before projects were recorded, and
    everything an embedder makes without a request context.
    """
    p = prefix
    return sa.Table(
        f"{p}owners",
        metadata,
        # config, deployment, server or group
        sa.Column("kind", sa.String(STATUS_LENGTH), primary_key=True),
        sa.Column("object_id", sa.String(NAME_LENGTH), primary_key=True),
        sa.Column("project_id", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("user_id", sa.String(NAME_LENGTH), nullable=True),
        # a server's deployment policy (swflows.projects.DeployPolicy.to_dict)
        sa.Column("deploy_policy", json_type(), nullable=True),
        # who changed the policy last ("user@project"), and when
        sa.Column("policy_changed_by", sa.String(NAME_LENGTH), nullable=True),
        sa.Column("policy_changed_at", timestamp(), nullable=True),
        sa.Column("created_at", timestamp(), nullable=False),
        # the Keystone trust deferred work acts through (swflows.trusts),
        # sealed like every secret; removed with the row
        sa.Column("trust", json_type(), nullable=True),
        # a keyed digest of the trust id (the sealed value differs at each
        # write): rows acting through one trust are found by it, and the
        # trust is deleted only with the last of them
        sa.Column("trust_ref", sa.String(TRUST_REF_LENGTH), nullable=True),
        sa.Index(f"ix_{p}owners_kind_project_id", "kind", "project_id"),
        sa.Index(f"ix_{p}owners_trust_ref", "trust_ref"),
    )


def deleted_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    """Deployments deleted lately (:meth:`swflows.persistence.deployments.
    DeploymentsMixin.delete_deployment`), each kept until no signal URL it
    handed out can still be used: a signal sent late (an agent's retry, a
    post in flight while the undeploy removed the store) recreates a store
    that only this row still shows to be this installation's, so the
    sweeper removes it (:mod:`swflows.engine.sweeper`)."""
    p = prefix
    return sa.Table(
        f"{p}deleted",
        metadata,
        sa.Column("deployment_id", sa.String(ID_LENGTH), primary_key=True),
        # the generation it ended at (its stores are named by generation)
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("deleted_at", epoch_seconds(), nullable=False),
        # when the row goes: no URL it signed is valid any more
        sa.Column("forget_at", epoch_seconds(), nullable=False),
        sa.Index(f"ix_{p}deleted_forget_at", "forget_at"),
    )


def installation_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    """One row, written by the migration that made the table: the store's
    own id, the same for every process whatever URL it reaches the
    database by (a proxy, another host name).  The watcher election's role
    is named from it (:func:`swflows.engine.watcher.watcher_role`)."""
    return sa.Table(
        f"{prefix}installation",
        metadata,
        # always "installation": a second row cannot be written
        sa.Column("name", sa.String(STATUS_LENGTH), primary_key=True),
        sa.Column("id", sa.String(ID_LENGTH), nullable=False),
        sa.Column("created_at", timestamp(), nullable=False),
    )


def results_table(metadata: sa.MetaData, prefix: str) -> sa.Table:
    """Results a caller outside swflows waits for, written when its action
    started (a Mistral action's callback: :mod:`swflows.engine.outbox`).
    Whichever process sees the deployment end sends the result, once, and
    marks the row delivered; a delivered row (and the trust it was sent
    through) is kept until ``keep_until``: what the caller did next may
    still act through that trust.  No process holds a result in memory
    only: one that dies leaves the row to the next."""
    p = prefix
    return sa.Table(
        f"{p}results",
        metadata,
        sa.Column("id", sa.String(ID_LENGTH), primary_key=True),
        sa.Column("deployment_id", sa.String(ID_LENGTH), nullable=False),
        # how the deployment's end reads as a result (swflows.callbacks)
        sa.Column("shape", sa.String(STATUS_LENGTH), nullable=False),
        # where the result goes (an HTTP PUT)
        sa.Column("url", sa.Text(), nullable=False),
        # the caller's token when no trust carries the result, sealed
        sa.Column("token", json_type(), nullable=True),
        # the owner row (kind swflows.trusts.CALLBACK) of the trust it is
        # sent through
        sa.Column("trust_key", sa.String(NAME_LENGTH), nullable=True),
        sa.Column("created_at", epoch_seconds(), nullable=False),
        # a process sending it holds it until then
        sa.Column("claimed_until", epoch_seconds(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, default=0),
        sa.Column("delivered_at", epoch_seconds(), nullable=True),
        # what became of it: delivered, refused (HTTP 4xx) or given up
        sa.Column("outcome", sa.String(STATUS_LENGTH), nullable=True),
        # when a delivered row, and the trust it was sent through, go
        sa.Column("keep_until", epoch_seconds(), nullable=True),
        sa.Index(f"ix_{p}results_deployment_id", "deployment_id"),
    )


def logbook_tables(
    metadata: sa.MetaData, prefix: str
) -> tuple[sa.Table, sa.Table, sa.Table]:
    """TaskFlow's three logbook tables, named ``<prefix>tf_<name>``.

    The columns are TaskFlow's own (``taskflow.persistence.backends.
    sqlalchemy.tables``), so its SQL backend reads and writes them as it
    would its unprefixed tables; a unit test compares the two.  Two columns
    differ in type only: ``atom_type`` and ``intention`` are strings where
    TaskFlow declares enums, whose PostgreSQL type names (``atom_types``,
    ``intentions``) cannot carry a prefix.  The version table is the
    store's: these are created by the store's migrations, never by
    TaskFlow's own (which would take ``alembic_version``).
    """
    from oslo_utils import timeutils
    from taskflow.persistence.backends.sqlalchemy.tables import JSONType

    def stamps() -> list[sa.Column[Any]]:
        return [
            sa.Column("created_at", timestamp(), default=timeutils.utcnow),
            sa.Column("updated_at", timestamp(), onupdate=timeutils.utcnow),
        ]

    def uuid() -> sa.Column[Any]:
        return sa.Column(
            "uuid", sa.String(TF_UUID_LENGTH), primary_key=True, nullable=False
        )

    logbooks = sa.Table(
        f"{prefix}tf_logbooks",
        metadata,
        *stamps(),
        sa.Column("meta", JSONType()),
        sa.Column("name", sa.String(NAME_LENGTH)),
        uuid(),
    )
    flowdetails = sa.Table(
        f"{prefix}tf_flowdetails",
        metadata,
        *stamps(),
        sa.Column(
            "parent_uuid",
            sa.String(TF_UUID_LENGTH),
            sa.ForeignKey(
                logbooks.c.uuid,
                ondelete="CASCADE",
                name=f"fk_{prefix}tf_flowdetails_parent",
            ),
        ),
        sa.Column("meta", JSONType()),
        sa.Column("name", sa.String(NAME_LENGTH)),
        sa.Column("state", sa.String(NAME_LENGTH)),
        uuid(),
        sa.Index(f"ix_{prefix}tf_flowdetails_parent_uuid", "parent_uuid"),
    )
    atomdetails = sa.Table(
        f"{prefix}tf_atomdetails",
        metadata,
        *stamps(),
        sa.Column("meta", JSONType()),
        sa.Column(
            "parent_uuid",
            sa.String(TF_UUID_LENGTH),
            sa.ForeignKey(
                flowdetails.c.uuid,
                ondelete="CASCADE",
                name=f"fk_{prefix}tf_atomdetails_parent",
            ),
        ),
        sa.Column("name", sa.String(NAME_LENGTH)),
        sa.Column("version", sa.String(TF_VERSION_LENGTH)),
        sa.Column("state", sa.String(NAME_LENGTH)),
        uuid(),
        sa.Column("failure", JSONType()),
        sa.Column("results", JSONType()),
        sa.Column("revert_results", JSONType()),
        sa.Column("revert_failure", JSONType()),
        sa.Column("atom_type", sa.String(STATUS_LENGTH)),
        sa.Column("intention", sa.String(STATUS_LENGTH)),
        sa.Index(f"ix_{prefix}tf_atomdetails_parent_uuid", "parent_uuid"),
    )
    return logbooks, flowdetails, atomdetails
