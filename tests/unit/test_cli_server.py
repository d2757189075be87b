"""``swflows server``'s files holding a channel's secret."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from swflows.cli import server


class Printed(server._Secret):
    def text(self, parsed_args: argparse.Namespace) -> str:
        return "the secret\n"


def test_output_is_0600_even_over_a_readable_file(tmp_path: Path) -> None:
    out = tmp_path / "agent.conf"
    out.write_text("old\n")
    os.chmod(out, 0o644)
    command = object.__new__(Printed)
    assert command.take_action(argparse.Namespace(output=str(out))) == 0
    assert out.read_text() == "the secret\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
