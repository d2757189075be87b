"""Run the keystone-manage steps of a fresh Keystone from one interpreter.

Every keystone-manage run spends ~1.7 s importing Keystone. Here Keystone is
imported once and each step runs in a forked child, through the same entry
point as the keystone-manage command: the database made afresh, then
db_sync, fernet_setup and credential_setup in parallel, then bootstrap
(which needs the schema). The bootstrap password comes from
$OS_BOOTSTRAP_PASSWORD.

Usage: keystone_init.py CONFIG_FILE LOG_DIR USER GROUP BOOTSTRAP_ARG...
"""

import configparser
import os
import sys
import traceback

import sqlalchemy as sa
from keystone.cmd import cli


def fresh_database(config_file):
    """Drop and create the configured PostgreSQL database (a clean start)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(config_file)
    url = sa.engine.make_url(parser["database"]["connection"])
    if not url.drivername.startswith("postgresql"):
        return
    server = sa.create_engine(
        url.set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    with server.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')
        conn.exec_driver_sql(f'CREATE DATABASE "{url.database}"')
    server.dispose()


def fork_step(config_file, log, args):
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        cli.main(argv=["keystone-manage", "--config-file", config_file, *args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(bool(exc.code))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run(config_file, log_dir, steps):
    """Run the steps in parallel; each logs to keystone-<step>.log."""
    logs = {}
    for args in steps:
        log = os.path.join(log_dir, f"keystone-{args[0].replace('_', '-')}.log")
        logs[fork_step(config_file, log, args)] = log
    failed = []
    for pid, log in logs.items():
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(log)
    if failed:
        sys.exit("keystone-manage failed; see " + ", ".join(failed))


def main(argv):
    config_file, log_dir, user, group, *bootstrap = argv
    owner = ["--keystone-user", user, "--keystone-group", group]
    fresh_database(config_file)
    run(
        config_file,
        log_dir,
        [["db_sync"], ["fernet_setup", *owner], ["credential_setup", *owner]],
    )
    run(config_file, log_dir, [["bootstrap", *bootstrap]])


if __name__ == "__main__":
    main(sys.argv[1:])
