"""Run by the server virtualenv's Python before the servers start: build the
Swift rings and create Zaqar's management tables.

Usage: prepare.py SWIFT_ETC ACCOUNT_PORT CONTAINER_PORT OBJECT_PORT ZAQAR_DB_URI
"""

import os
import sys

import sqlalchemy
from swift.common.ring import RingBuilder
from zaqar.storage.sqlalchemy import tables


def build_rings(etc, ports):
    # The RingBuilder API takes ~0.5 s; nine swift-ring-builder runs take ~5 s.
    for name, port in ports.items():
        builder = RingBuilder(6, 1, 1)  # part power 6, 1 replica, 1 h
        builder.add_dev(
            {
                "id": 0,
                "region": 1,
                "zone": 1,
                "ip": "127.0.0.1",
                "port": port,
                "device": "sdb1",
                "weight": 1,
            }
        )
        builder.rebalance()
        builder.save(os.path.join(etc, name + ".builder"))
        builder.get_ring().save(os.path.join(etc, name + ".ring.gz"))


def create_zaqar_tables(uri):
    # zaqar-sql-db-manage's migrations use MySQL-only SQL; on SQLite create
    # the tables from the model directly.
    tables.metadata.create_all(sqlalchemy.create_engine(uri))


def main(argv):
    etc, account, container, obj, zaqar_db = argv
    build_rings(
        etc, {"account": int(account), "container": int(container), "object": int(obj)}
    )
    create_zaqar_tables(zaqar_db)


if __name__ == "__main__":
    main(sys.argv[1:])
