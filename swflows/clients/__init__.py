"""Thin typed adapters over the OpenStack client libraries.

Each adapter takes an already-built client (or a keystoneauth1 session),
turns client errors into :class:`~swflows.exceptions.CloudError` (never with
a secret in the message), retries retryable failures through tenacity, and
makes creates find-or-create and deletes of missing things return False.
"""

from swflows.clients.base import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from swflows.clients.compute import Compute, ServerInfo
from swflows.clients.identity import (
    Ec2Credential,
    ProjectInfo,
    StackUsers,
    UserInfo,
    derive_password,
)
from swflows.clients.messaging import Message, Messaging, SignedUrlClient
from swflows.clients.object_store import ObjectInfo, ObjectStore, StoredObject

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "Compute",
    "Ec2Credential",
    "Message",
    "Messaging",
    "ObjectInfo",
    "ObjectStore",
    "ProjectInfo",
    "RetryPolicy",
    "ServerInfo",
    "SignedUrlClient",
    "StackUsers",
    "StoredObject",
    "UserInfo",
    "derive_password",
]
