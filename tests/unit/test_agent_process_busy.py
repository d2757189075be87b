"""A script refused as busy ("Text file busy") is started once it is not.

Hooks written just before they run meet this when another thread forks
meanwhile: its child holds the fresh file open for writing until its own
exec.  Another process holding the script open for writing stands for
that child here, for a known time.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swflows.agent import process

#: how long the other process keeps the script open for writing
HELD = 0.5


def script(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text("#!/bin/sh\necho ran\n")
    path.chmod(0o700)
    return path


def holding(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    """A process holding ``path`` open for writing for ``seconds``."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "f = open(sys.argv[1], 'a')\n"
            "print('open', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n",
            str(path),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == b"open\n"
    return holder


def test_a_busy_script_runs_once_its_writer_let_go(tmp_path: Path) -> None:
    path = script(tmp_path)
    holder = holding(path, HELD)
    try:
        with pytest.raises(OSError) as refused:
            subprocess.run([str(path)], check=False)
        assert refused.value.errno == errno.ETXTBSY  # the case at hand
        started = time.monotonic()
        finished = process.run(
            [str(path)], env=dict(os.environ), out_base=tmp_path / "o"
        )
    finally:
        holder.wait(30)
    assert finished.returncode == 0
    assert finished.stdout == "ran\n"
    assert time.monotonic() - started < HELD + process.BUSY_RETRY_FOR


def test_a_script_busy_for_longer_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "BUSY_RETRY_FOR", 0.2)
    path = script(tmp_path)
    holder = holding(path, 5.0)
    try:
        with pytest.raises(OSError) as refused:
            process.run([str(path)], env=dict(os.environ), out_base=tmp_path / "o")
    finally:
        holder.kill()
        holder.wait(30)
    assert refused.value.errno == errno.ETXTBSY
