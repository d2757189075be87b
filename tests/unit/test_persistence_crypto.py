"""Fernet helpers and the key file."""

from __future__ import annotations

import pathlib
import stat
import threading

import pytest
from cryptography import fernet

from swflows import exceptions
from swflows.persistence import crypto


def test_round_trip_any_json() -> None:
    box = crypto.SecretBox(fernet.Fernet.generate_key())
    for value in ["pw", {"a": [1, None]}, 3, None]:
        token = box.encrypt(value)
        assert isinstance(token, str)
        assert box.decrypt(token) == value
    # long enough that base64 of random bytes cannot hold it by chance
    secret = "a-long-stack-user-password"
    assert secret not in box.encrypt(secret)
    assert "keys hidden" in repr(box)


def test_tokens_differ_each_time() -> None:
    box = crypto.SecretBox(fernet.Fernet.generate_key())
    assert box.encrypt("x") != box.encrypt("x")


def test_several_keys_first_encrypts() -> None:
    old, new = fernet.Fernet.generate_key(), fernet.Fernet.generate_key()
    token = crypto.SecretBox(old).encrypt("x")
    both = crypto.SecretBox([new, old])
    assert both.decrypt(token) == "x"
    assert fernet.Fernet(new).decrypt(both.encrypt("y").encode()) == b'"y"'
    assert crypto.SecretBox(f" {new.decode()} , {old.decode()}").decrypt(token) == "x"


@pytest.mark.parametrize("key", ["", "short", b"\xff", []])
def test_invalid_keys(key: object) -> None:
    with pytest.raises(exceptions.ValidationError) as err:
        crypto.SecretBox(key)  # type: ignore[arg-type]
    assert err.value.field == "secret_key"


def test_wrong_key_or_garbage() -> None:
    token = crypto.SecretBox(fernet.Fernet.generate_key()).encrypt("x")
    other = crypto.SecretBox(fernet.Fernet.generate_key())
    for bad in (token, "garbage", "é"):
        with pytest.raises(exceptions.ValidationError):
            other.decrypt(bad)


def test_key_file_created_private_and_reused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "a" / "secret.key"
    key = crypto.load_key_file(path, create=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert crypto.load_key_file(path) == key
    fernet.Fernet(key)
    assert list(path.parent.iterdir()) == [path]  # no temporary left behind


def test_key_file_race_yields_one_key(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "secret.key"
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def make() -> None:
        barrier.wait()
        keys.append(crypto.load_key_file(path, create=True))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys) == 8


def test_missing_key_file(tmp_path: pathlib.Path) -> None:
    with pytest.raises(exceptions.ValidationError) as err:
        crypto.load_key_file(tmp_path / "none")
    assert err.value.field == "secret_key_file"


def test_state_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert crypto.state_dir() == tmp_path / "swflows"
    assert not (tmp_path / "swflows").exists()
    assert crypto.default_database_path() == tmp_path / "swflows" / "swflows.sqlite"
    assert stat.S_IMODE((tmp_path / "swflows").stat().st_mode) == 0o700
