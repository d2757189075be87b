"""Helpers of ``tools/devcloud``: a local cloud on 127.0.0.1 for swflows tests.

Everything here is standard library only and runs under any Python 3.11;
the servers themselves run from their own virtualenv under ``.devcloud/``.
"""
