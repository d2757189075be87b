"""``python -m swflows.cli``: the same as the ``swflows`` command."""

from swflows.cli.main import main

raise SystemExit(main())
