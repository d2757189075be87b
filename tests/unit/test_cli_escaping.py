"""What the command prints from the store cannot drive the terminal: a
name stored with ESC codes (before names were checked) is shown escaped
in a table and ``-f value``, and kept as it is in ``-f json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swflows import model
from swflows.cli import base, main
from swflows.persistence.store import Store

NAME = "red\x1b[31m\x07\x9b"


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    store = Store(url, secret_key_file=tmp_path / "secret.key")
    try:
        store.create_config(model.Config.create(NAME, "#!/bin/sh\necho\tx\n"))
    finally:
        store.close()
    path = tmp_path / "swflows.conf"
    path.write_text(
        f"[database]\nconnection = {url}\nsecret_key_file = {tmp_path / 'secret.key'}\n"
    )
    return path


def test_terminal_safe_escapes_controls_but_keeps_lines() -> None:
    assert base.terminal_safe(NAME) == "red\\x1b[31m\\x07\\x9b"
    assert base.terminal_safe("a\n\tb") == "a\n\tb"


@pytest.mark.parametrize("form", ["table", "value"])
def test_a_stored_name_with_escapes_is_shown_escaped(
    conf: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--config-file", str(conf), "config", "list", "-f", form, "-c", "name"]
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "red\\x1b[31m\\x07\\x9b" in out


def test_json_keeps_the_name_as_stored(
    conf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--config-file", str(conf), "config", "list", "-f", "json"]
    assert main.main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out  # JSON escapes it itself
    assert json.loads(out)[0]["name"] == NAME
    config_id = json.loads(out)[0]["id"]
    argv = ["--config-file", str(conf), "config", "show", config_id, "--config-only"]
    assert main.main([*argv, "-f", "value"]) == 0
    assert capsys.readouterr().out == "#!/bin/sh\necho\tx\n\n"
