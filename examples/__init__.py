"""Runnable examples, each executed by the test suite.

The composed flows (``backup_verify``, ``rolling``, ``maintenance``) are
shown in ``docs/composing.md`` and run by ``tests/functional/
test_examples.py`` and ``tests/crash/test_examples.py``.
"""
