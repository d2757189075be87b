"""Flows composed from swflows' catalogue, run by the test suite
(``tests/functional/test_examples.py``, ``tests/crash/test_examples.py``)
and shown in ``docs/composing.md``."""
