"""The store: configs, deployments and server metadata in one SQL database.

Every public method is one transaction: it either does all it says or
nothing.  Transient database errors (deadlock, serialization failure, SQLite
"database is locked") and the integrity errors two racing writers can cause
are retried a few times with a random backoff; if they persist the call
raises :class:`~swflows.exceptions.ConcurrentUpdate` (``retryable``).

Errors name what is wrong:

* an unknown id asked for directly raises the ``*NotFound`` of its kind;
* a config *referenced* by a deployment that does not exist raises
  :class:`~swflows.exceptions.ConfigNotFound` too, with ``field`` set to
  ``config_id`` or ``source_config_id``;
* a value that cannot be stored raises
  :class:`~swflows.exceptions.ValidationError` naming the field;
* a forbidden status change raises
  :class:`~swflows.exceptions.InvalidTransition`; a failed ``expected_*``
  check raises :class:`~swflows.exceptions.ConcurrentUpdate` carrying the
  current values.

Concurrency.  Every write that changes what a server sees (a deployment
created or deleted, its ``config_id`` changed, or its action cancelled,
which withdraws it: :func:`swflows.states.withdrawn`) locks the server's row
(``SELECT ... FOR UPDATE``; SQLite: the whole database, ``BEGIN IMMEDIATE``)
and bumps its ``metadata_version`` in the same transaction, so versions
count those writes exactly and :meth:`Store.server_metadata` reads a
document and its version together.

Secrets.  Values of secret inputs (``swflows.derive.SECRET_INPUTS``, at
least ``deploy_password``) in configs and in deployment ``input_values``,
and server channels, are Fernet-encrypted before they are written.
"""

from __future__ import annotations

from swflows.persistence.database import (
    DB_ATTEMPTS,
    FALLBACK_SECRET_INPUTS,
    SECRET_MARK,
    SQLITE_BUSY_TIMEOUT_MS,
    create_engine,
)
from swflows.persistence.deployments import UPDATABLE_FIELDS, DeploymentRows
from swflows.persistence.owners import OwnerRows
from swflows.persistence.results import PendingResult, ResultRows
from swflows.persistence.servers import PUBLISH_ATTEMPTS, ServerMetadata, ServerRecord


class Store(DeploymentRows, OwnerRows, ResultRows):
    """Configs, deployments and server metadata in one SQL database.

    Opened as a :class:`~swflows.persistence.database.Database` (its
    ``url``, ``table_prefix``, secret keys and ``engine`` say where the
    tables are and how secrets are sealed), with each entity's rows
    (configs, servers and their metadata, deployments, owners, results
    waited for outside) composed in.
    """


__all__ = [
    "DB_ATTEMPTS",
    "FALLBACK_SECRET_INPUTS",
    "PUBLISH_ATTEMPTS",
    "SECRET_MARK",
    "SQLITE_BUSY_TIMEOUT_MS",
    "UPDATABLE_FIELDS",
    "PendingResult",
    "ServerMetadata",
    "ServerRecord",
    "Store",
    "create_engine",
]
