"""``python -m swflows.agent``: the same as the ``swflows-agent`` command."""

import sys

from swflows.agent.main import main

sys.exit(main())
