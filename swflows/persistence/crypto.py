"""Secrets at rest: Fernet encryption and the default key and state folder.

Without a configured key, a SQLite store keeps its key in ``secret.key``
(mode 0600) beside the database file; the default database lives in
``$XDG_STATE_HOME/swflows/`` (else ``~/.local/state/swflows/``), a folder
created with mode 0700.  A server database (PostgreSQL, MySQL) is shared by
hosts, so it needs a key every host has: ``[database] secret_key`` or
``secret_key_file``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import tempfile
from collections.abc import Sequence
from typing import Any, Final

from cryptography import fernet

from swflows import exceptions

STATE_DIR_NAME: Final = "swflows"
KEY_FILE_NAME: Final = "secret.key"
DATABASE_FILE_NAME: Final = "swflows.sqlite"


def state_dir() -> pathlib.Path:
    """``$XDG_STATE_HOME/swflows``, else ``~/.local/state/swflows`` (not created).

    As the XDG spec says, a relative ``$XDG_STATE_HOME`` is ignored.
    """
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        return pathlib.Path.home() / ".local" / "state" / STATE_DIR_NAME
    return pathlib.Path(base) / STATE_DIR_NAME


def ensure_private_dir(path: pathlib.Path) -> pathlib.Path:
    """Create ``path`` (and parents) if missing; a new leaf folder gets 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def default_database_path() -> pathlib.Path:
    """The default SQLite file, ``<state dir>/swflows.sqlite`` (folder created)."""
    return ensure_private_dir(state_dir()) / DATABASE_FILE_NAME


def generate_key() -> bytes:
    return fernet.Fernet.generate_key()


def load_key_file(path: pathlib.Path | str, *, create: bool = False) -> bytes:
    """Read a Fernet key file; with ``create``, make a new 0600 one if absent.

    Creation is atomic (a private temporary file hard-linked into place), so
    two processes starting together end up with the same key.
    """
    path = pathlib.Path(path)
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        if not create:
            raise exceptions.ValidationError(
                "secret_key_file", f"{path} does not exist"
            ) from None
    ensure_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=".secret-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, generate_key() + b"\n")
        os.fsync(fd)
        os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return path.read_bytes().strip()


class SecretBox:
    """Encrypts JSON values with Fernet.

    ``keys`` is one key, or several (a sequence, or one string joined by
    commas): the first encrypts, any decrypts, so keys can be rotated.
    """

    def __init__(self, keys: bytes | str | Sequence[bytes | str]) -> None:
        if isinstance(keys, bytes):
            keys = keys.decode("ascii", "replace")
        if isinstance(keys, str):
            keys = [k.strip() for k in keys.split(",") if k.strip()]
        if not keys:
            raise exceptions.ValidationError("secret_key", "must not be empty")
        try:
            self._fernet = fernet.MultiFernet([fernet.Fernet(k) for k in keys])
        except (ValueError, TypeError):
            raise exceptions.ValidationError(
                "secret_key", "not a valid Fernet key (32 url-safe base64 bytes)"
            ) from None

        self._derivation = hashlib.sha256(
            b"swflows-derivation\0" + str(keys[0]).encode()
        ).digest()

    def __repr__(self) -> str:
        return "SecretBox(<keys hidden>)"

    def derivation_key(self) -> bytes:
        """Key material for secrets re-derived instead of stored (not the key)."""
        return self._derivation

    def encrypt(self, value: Any) -> str:
        """A Fernet token (ASCII text) of ``value``'s JSON."""
        data = json.dumps(value, separators=(",", ":"), sort_keys=True)
        return self._fernet.encrypt(data.encode()).decode("ascii")

    def decrypt(self, token: str) -> Any:
        try:
            data = self._fernet.decrypt(token.encode("ascii"))
        except (fernet.InvalidToken, UnicodeEncodeError):
            raise exceptions.ValidationError(
                "secret_key",
                "cannot decrypt a stored secret: the key differs from the one "
                "it was written with",
            ) from None
        return json.loads(data)
