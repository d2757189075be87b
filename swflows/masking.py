"""Masking the secrets a server may echo back in its signal.

Pure: no I/O.  A hook that prints its inputs or its environment (Heat's
script hook does when it crashes) sends back the signal URL with its
TempURL signature, the stack user's password or a Zaqar signed URL's
signature in ``deploy_stdout``, ``deploy_stderr`` or an output.  Whoever
reads them could forge the server's signal or log in as its stack user, so
they are masked before the outcome is stored or logged: the secrets the
deployment's derived config holds (:func:`known_secrets`: swflows' own and
the values of the config's hidden inputs), and whatever looks like a
signature or a token (:data:`PATTERNS`) in any text.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, Final

from swflows import derive, model

#: what a masked secret becomes
MASK: Final = "***"
#: known secrets shorter than this are left alone: masking every "a" or
#: "1" would garble the text and hide nothing worth hiding
MIN_SECRET_LENGTH: Final = 6

#: signed-URL parameters whose value lets its holder forge a request
_SIGNATURE_PARAMS: Final = ("temp_url_sig", "Signature", "signature")

#: secrets in any text: a signed URL's signature, a token or signature
#: header; the first group is kept, what follows it is masked
PATTERNS: Final = (
    # TempURL and EC2 (CFN) signatures, as URL query parameters
    re.compile(r"(?i)((?:^|[?&;\s\"'])(?:temp_url_sig|signature)=)[^&;#\s\"']+"),
    # headers and their dict or JSON forms: X-Auth-Token: x, "X-Auth-Token": "x"
    re.compile(
        r"(?i)((?:x-auth-token|x-subject-token|url-signature)[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',}]+"
    ),
    # a Zaqar signed URL's JSON or repr: "signature": "abc"
    re.compile(r"(?i)([\"']signature[\"']\s*:\s*[\"'])[^\"']+"),
)


def known_secrets(
    values: Mapping[str, Any], hidden: Iterable[str] = ()
) -> frozenset[str]:
    """The secret strings among a derived config's input values (name ->
    value, as :func:`input_values` gives them, or as an agent reads them).

    The password and signed URL signature inputs (:data:`derive.SECRET_INPUTS`),
    and the signature of the signal URL (``deploy_signal_id``) in its raw
    and URL-decoded forms; a signal URL without a signature swflows knows
    is a secret as a whole.  The values of the inputs named in ``hidden``
    (:func:`hidden_names`) as a hook may print them: a string as it is, a
    number as its text, a list or map as its JSON text and each of its
    strings and numbers.  Any shorter than :data:`MIN_SECRET_LENGTH` are
    left out.
    """
    hidden = frozenset(hidden)
    found: set[str] = set()
    for name, value in values.items():
        if value is None:
            continue
        if name in hidden:
            found.update(_value_texts(value))
        elif name == derive.DEPLOY_QUEUE_SIGNED_URL and isinstance(value, Mapping):
            found.add(str(value.get("signature") or ""))
        elif name in derive.SECRET_INPUTS:
            found.add(value if isinstance(value, str) else str(value))
        elif name == derive.DEPLOY_SIGNAL_ID and isinstance(value, str):
            found.update(_url_secrets(value))
    return frozenset(s for s in found if len(s) >= MIN_SECRET_LENGTH)


def input_values(inputs: Iterable[model.InputSpec]) -> dict[str, Any]:
    """A derived config's inputs as name -> value."""
    return {spec.name: spec.value for spec in inputs}


def hidden_names(inputs: Iterable[Any]) -> set[str]:
    """The names of the hidden inputs among ``inputs``: specs, or the raw
    mappings of a published document (``hidden`` true; anything else in
    the list is passed over)."""
    found: set[str] = set()
    for spec in inputs:
        if isinstance(spec, model.InputSpec):
            if spec.hidden:
                found.add(spec.name)
        elif isinstance(spec, Mapping) and spec.get("hidden") is True:
            name = spec.get("name")
            if isinstance(name, str):
                found.add(name)
    return found


def mask_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets``, and every :data:`PATTERNS` match,
    replaced by :data:`MASK`."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, MASK)
    for pattern in PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def mask(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON value whose strings are :func:`mask_text`-ed (keys
    included); other values are kept."""
    known = frozenset(secrets)
    return _mask(value, known)


def mask_outputs(
    values: Mapping[str, Any], secrets: Iterable[str] = ()
) -> dict[str, Any]:
    """A copy of a signal's values (or a deployment's outputs), masked."""
    known = frozenset(secrets)
    return {key: _mask(item, known) for key, item in values.items()}


def _mask(value: Any, secrets: frozenset[str]) -> Any:
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            (mask_text(k, secrets) if isinstance(k, str) else k): _mask(v, secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask(item, secrets) for item in value]
    return value


def _value_texts(value: Any) -> set[str]:
    if isinstance(value, bool):
        return set()  # "true" and "false" are too short to mask
    if isinstance(value, str):
        return {value}
    if isinstance(value, int | float):
        return {str(value)}
    if not isinstance(value, Mapping | list | tuple):
        return set()
    found: set[str] = set()
    try:
        found.update((json.dumps(value), json.dumps(value, separators=(",", ":"))))
    except (TypeError, ValueError, RecursionError):
        pass
    items = list(value.values()) if isinstance(value, Mapping) else list(value)
    if items and all(isinstance(item, str) for item in items):
        found.add(",".join(items))  # a CommaDelimitedList as a hook reads it
    for item in items:
        found.update(_value_texts(item))
    return found


def _url_secrets(url: str) -> set[str]:
    try:
        query = urllib.parse.urlsplit(url).query
    except ValueError:
        return {url}
    found: set[str] = set()
    for part in query.split("&"):
        name, _, raw = part.partition("=")
        if name in _SIGNATURE_PARAMS and raw:
            found.update(
                (raw, urllib.parse.unquote(raw), urllib.parse.unquote_plus(raw))
            )
    return found or {url}


__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "PATTERNS",
    "hidden_names",
    "input_values",
    "known_secrets",
    "mask",
    "mask_outputs",
    "mask_text",
]
