"""A directory for Heat's ``plugin_dirs``: it holds one module,
``swflows_deployment``, which registers ``OS::Swflows::Deployment``.

Print it for ``heat.conf``::

    python -c "import swflows.embedding.heat_plugins as p; print(p.PATH)"
"""

from pathlib import Path
from typing import Final

#: the directory to add to Heat's ``plugin_dirs``
PATH: Final = str(Path(__file__).resolve().parent)

__all__ = ["PATH"]
