"""Keystone's WSGI application for gunicorn.

Keystone reads its configuration from ``$OS_KEYSTONE_CONFIG_DIR``; oslo.config
would also parse ``sys.argv``, which holds gunicorn's options, so hide them.
"""

import sys

sys.argv = sys.argv[:1]

from keystone.wsgi.api import application  # noqa: E402

__all__ = ["application"]
