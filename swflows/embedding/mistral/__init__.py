"""Mistral actions: ``swflows.deploy``, ``redeploy``, ``undeploy``, ``trigger``,
``show`` and ``cancel``; for deployment groups ``swflows.group_deploy``,
``group_show`` and ``group_delete``.

Registered under the ``mistral.actions`` entry points (the ``mistral``
extra installs mistral-lib), so a Mistral executor with swflows installed
finds them as it finds its own.  Inputs and results are plain JSON:

* a result is the deployment as :meth:`~swflows.model.Deployment.to_dict`
  gives it (``undeploy``: ``{"id": ..., "undeployed": true}``);
* an error is a mistral-lib error result, ``Result(error={"kind": ...,
  "message": ...})``: ``kind`` is the deployment's reason kind when its
  action ended FAILED (``exit_code``, ``timeout``, ``cancelled``...,
  with the deployment under ``deployment``), else the kind of error
  (``invalid_input``, ``not_found``, ``invalid_transition``,
  ``wait_timeout``, ``not_supported``, ``cloud_error``...).  Never a
  traceback; no secret.

**Synchronous** by default: the action returns when the deployment is
COMPLETE or FAILED, or after ``wait_timeout`` seconds (default: the
deployment's timeout plus :data:`WAIT_GRACE`), an error of kind
``wait_timeout`` that leaves the deployment running.  With ``wait: false``
the action is **asynchronous** (``is_sync()`` is false): it starts the flow
and returns; when the deployment is terminal, the result is PUT to the
action execution (``/v2/action_executions/<id>``, body ``{"state":
"SUCCESS" | "ERROR", "output": ...}``) at Mistral's API, found in the
caller's service catalog (``workflowv2``) unless ``callback_base_url`` or
``SWFLOWS_MISTRAL_URL`` names it, with the caller's token.  ``show`` and
``cancel`` are always synchronous.

**Which swflows**: one :class:`~swflows.api.Swflows` per configuration
file and per executor process, opened on first use and kept.  The file is
the action's ``config_file`` input, else ``$SWFLOWS_CONFIG_FILE``; a
``config_file`` input must lie in a directory of ``$SWFLOWS_CONFIG_DIRS``
(``:``-separated; default ``/etc/swflows`` and the folder of
``$SWFLOWS_CONFIG_FILE``), so a workflow cannot make the executor read
any file.  An embedder may instead :func:`use` an instance it built: actions
without ``config_file`` then use it, whatever ``$SWFLOWS_CONFIG_FILE`` says.
"""

from swflows.embedding.mistral.actions import (
    WAIT_GRACE,
    CancelAction,
    DeployAction,
    RedeployAction,
    ShowAction,
    TriggerAction,
    UndeployAction,
)
from swflows.embedding.mistral.callback import (
    MISTRAL_URL_ENV,
    callback_url,
    mistral_endpoint,
)
from swflows.embedding.mistral.groups import (
    GroupDeleteAction,
    GroupDeployAction,
    GroupShowAction,
    group_outcome,
)
from swflows.embedding.mistral.instances import (
    CONFIG_DIRS_ENV,
    CONFIG_FILE_ENV,
    DEFAULT_CONFIG_DIR,
    close_all,
    instance,
    use,
)
from swflows.embedding.mistral.results import error_of, failure_of, outcome_of

__all__ = [
    "CONFIG_DIRS_ENV",
    "CONFIG_FILE_ENV",
    "DEFAULT_CONFIG_DIR",
    "MISTRAL_URL_ENV",
    "WAIT_GRACE",
    "CancelAction",
    "DeployAction",
    "GroupDeleteAction",
    "GroupDeployAction",
    "GroupShowAction",
    "RedeployAction",
    "ShowAction",
    "TriggerAction",
    "UndeployAction",
    "callback_url",
    "close_all",
    "error_of",
    "failure_of",
    "group_outcome",
    "instance",
    "mistral_endpoint",
    "outcome_of",
    "use",
]
