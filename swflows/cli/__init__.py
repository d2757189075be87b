"""``swflows``: the operator command line (cliff), shaped like
``openstack software config|deployment``."""
