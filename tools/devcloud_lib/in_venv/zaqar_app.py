"""Zaqar's WSGI application for gunicorn, configured from
``$ZAQAR_CONFIG_FILE`` (zaqar's own WSGI module only searches /etc/zaqar and
~/.zaqar, and oslo.config would parse gunicorn's argv)."""

import os
import sys

sys.argv = sys.argv[:1]

from oslo_config import cfg  # noqa: E402
from oslo_log import log  # noqa: E402
from zaqar import bootstrap  # noqa: E402
from zaqar.common import consts  # noqa: E402

CONF = cfg.CONF
log.register_options(CONF)
CONF(
    project="zaqar",
    prog="zaqar-queues",
    args=[],
    default_config_files=[os.environ["ZAQAR_CONFIG_FILE"]],
)
log.setup(CONF, "zaqar")
_boot = bootstrap.Bootstrap(CONF)  # registers [drivers]: before reading it
CONF.drivers.transport = consts.TRANSPORT_WSGI
application = _boot.transport.app
