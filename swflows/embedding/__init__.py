"""Embedding swflows in an orchestrator (Heat, Mistral, others).

* :func:`from_session`: swflows on the embedder's Keystone session and its
  own database (or the embedder's, under a table prefix);
* :class:`Lifecycle`: CREATE/UPDATE/DELETE/SUSPEND/RESUME as
  ``handle_*`` and ``check_*_complete``, as a Heat resource drives them;
* :class:`Completions`: a callback when a deployment's flows end;
* :mod:`swflows.embedding.mistral`: Mistral actions (needs the
  ``mistral`` extra, so it is not imported here).

Signals (HEAT_SIGNAL, CFN-style) the embedder's API receives go to
:meth:`swflows.api.Swflows.signal`; POLL_SERVER_HEAT metadata is served
from :meth:`swflows.api.Swflows.server_metadata`.  See docs/embedding.md.
"""

from swflows.embedding.completion import Callback, Completion, Completions
from swflows.embedding.instance import from_session, session_clients
from swflows.embedding.lifecycle import ACTIONS, DeploymentFailed, Lifecycle

__all__ = [
    "ACTIONS",
    "Callback",
    "Completion",
    "Completions",
    "DeploymentFailed",
    "Lifecycle",
    "from_session",
    "session_clients",
]
