"""The store: configs, deployments and server metadata on SQLAlchemy.

:class:`Store` is the API; :mod:`swflows.persistence.logbook` is TaskFlow's
logbook on the same database (``Store.taskflow_backend()``).
"""

from swflows.persistence.store import ServerMetadata, ServerRecord, Store

__all__ = ["ServerMetadata", "ServerRecord", "Store"]
