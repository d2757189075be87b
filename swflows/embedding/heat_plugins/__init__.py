"""A directory for Heat's ``plugin_dirs``: it holds one module,
``swflows_deployment``, which registers ``OS::Swflows::Deployment``.

Print it for ``heat.conf``::

    python -c "import swflows.embedding.heat_plugins as p; print(p.PATH)"

It also holds ``environment.yaml`` (:data:`ENVIRONMENT`), a Heat
environment mapping ``OS::Heat::SoftwareDeployment`` onto swflows'
resource, so that templates written for Heat run unedited.
"""

from pathlib import Path
from typing import Final

#: the directory to add to Heat's ``plugin_dirs``
PATH: Final = str(Path(__file__).resolve().parent)

#: the Heat environment file mapping Heat's SoftwareDeployment to swflows'
ENVIRONMENT: Final = str(Path(PATH) / "environment.yaml")

__all__ = ["ENVIRONMENT", "PATH"]
