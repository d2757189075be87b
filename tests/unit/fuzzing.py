"""What the fuzz tests (``tests/unit/test_fuzz_*.py``) share.

Settings: a deterministic profile for CI (``fuzz-ci``: derandomized, no
deadline, no example database), or ``fuzz-deep`` (random, ten times the
examples) with ``SWFLOWS_FUZZ_PROFILE=fuzz-deep``; ``SWFLOWS_FUZZ_SCALE``
multiplies the example counts of either.

Counts: every fuzz test calls :func:`case` once per generated case; the
unit tests' ``conftest.py`` adds the counts up (across pytest-xdist workers
too) and prints ``fuzz cases: signals=N config=N metadata=N cli=N total=N``
at the end of the run.

Strategies: JSON values and text that include what breaks parsers and
databases (NUL, lone surrogates, a byte-order mark, line separators).
"""

from __future__ import annotations

import collections
import json
import math
import os
from collections.abc import Mapping
from typing import Any, Final

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

#: the areas counted, in the order the summary line lists them
AREAS: Final = ("signals", "config", "metadata", "cli")

settings.register_profile(
    "fuzz-ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
settings.register_profile(
    "fuzz-deep", settings.get_profile("fuzz-ci"), derandomize=False
)
PROFILE: Final = os.environ.get("SWFLOWS_FUZZ_PROFILE", "fuzz-ci")
SCALE: Final = float(os.environ.get("SWFLOWS_FUZZ_SCALE", "1")) * (
    10 if PROFILE == "fuzz-deep" else 1
)

#: cases run in this process, by area (read by conftest.py)
counts: collections.Counter[str] = collections.Counter()


def fuzz(examples: int, *, shrink: bool = True) -> settings:
    """Settings of one fuzz test: the profile, ``examples`` cases (scaled).

    ``shrink=False`` for a test expected to fail (xfail): it reports the
    first failing case instead of spending seconds on a smaller one.
    """
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.reuse, Phase.generate)
    return settings(
        settings.get_profile(PROFILE),
        max_examples=max(1, int(examples * SCALE)),
        phases=phases,
    )


def case(area: str) -> None:
    """Count one generated case of ``area``."""
    assert area in AREAS, area
    counts[area] += 1


# -- storable ----------------------------------------------------------------
def unstorable(value: Any, path: str = "$") -> list[str]:
    """Where ``value`` holds what a database refuses (empty: storable).

    'Storable' means: every string, key or value, at any depth, is free of
    NUL (PostgreSQL refuses it in text and JSON) and of lone surrogates
    (not UTF-8: no database driver can send them); every number is finite.
    """
    found: list[str] = []
    if isinstance(value, str):
        if "\x00" in value:
            found.append(f"{path}: NUL")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            found.append(f"{path}: lone surrogate")
    elif isinstance(value, float):
        if not math.isfinite(value):
            found.append(f"{path}: {value}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            found += unstorable(key, f"{path}.<key {key!r}>")
            found += unstorable(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found += unstorable(item, f"{path}[{index}]")
    return found


# -- strategies --------------------------------------------------------------
#: characters that break parsers and databases, mixed into generated text
NASTY_CHARS: Final = (
    "\x00",
    "\ud800",
    "\udfff",
    "\ufeff",
    "\u2028",
    "\x7f",
    "\x1b",
    "\n",
    "=",
    "-",
    '"',
    "\\",
)

nasty_text = st.text(
    st.one_of(st.characters(), st.sampled_from(NASTY_CHARS)), max_size=24
)
#: text a JSON document can carry: anything, escaped as JSON escapes it
json_text = nasty_text
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    json_text,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(json_text, children, max_size=5),
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(json_text, json_values, max_size=6)


def json_bytes(value: Any, *, ascii_only: bool = True) -> bytes:
    """``value``'s JSON text as bytes (lone surrogates only escaped)."""
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
