"""Which installation made a metadata channel: a tag written with it.

Every metadata object and queue swflows writes carries a tag derived from
its store's key and table prefix, which are the same on every host of one
installation and differ between installations.  The metadata sweep removes
only channels that carry its own tag, never those of another installation
sharing the Swift account or the Zaqar project.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from swflows.transports import base

#: the content-type parameter of a metadata object, and the queue metadata key
PARAM: Final = "swflows_owner"
CONTENT_TYPE: Final = "application/json"


def tag(services: base.Context) -> str:
    """This installation's tag (no secret can be recovered from it)."""
    message = b"metadata-channel-owner\0" + services.store.table_prefix.encode()
    return hmac.new(services.secret, message, hashlib.sha256).hexdigest()[:24]


def content_type(owner: str) -> str:
    """The content type a metadata object is written with."""
    return f"{CONTENT_TYPE}; {PARAM}={owner}"


def of_content_type(value: str) -> str | None:
    """The tag in a content type (as written, or as a listing shows it)."""
    for part in value.split(";")[1:]:
        key, _, found = part.strip().partition("=")
        if key.strip().lower() == PARAM and found.strip():
            return found.strip().strip('"')
    return None
