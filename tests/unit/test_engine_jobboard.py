"""The jobboard's URL: what TaskFlow's board is given, and what is refused."""

from __future__ import annotations

import pytest

from swflows import exceptions
from swflows.engine import jobboard


def test_redis_url_with_database_password_and_namespace() -> None:
    conf = jobboard.board_conf("redis://:s%40cret@10.0.0.5:6380/3?namespace=prod")
    assert conf == {
        "board": "redis",
        "host": "10.0.0.5",
        "port": 6380,
        "db": 3,
        "namespace": "prod",
        "password": "s@cret",
    }


def test_redis_url_defaults() -> None:
    conf = jobboard.board_conf("redis://127.0.0.1")
    assert (conf["port"], conf["db"], conf["namespace"]) == (6379, 0, "swflows")
    assert "password" not in conf


def test_zookeeper_url_hosts_path_and_session_timeout() -> None:
    conf = jobboard.board_conf("zookeeper://zk1:2181,zk2:2181/site-a?timeout=4")
    assert conf == {
        "board": "zookeeper",
        "hosts": "zk1:2181,zk2:2181",
        "path": "/site-a/jobs",
        "timeout": 4.0,
        "check_compatible": False,
    }
    assert jobboard.board_conf("zookeeper://zk1:2181")["path"] == "/swflows/jobs"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("etcd://127.0.0.1:2379", "'etcd' is not a jobboard backend"),
        ("127.0.0.1:6379", "is not a jobboard backend"),
        ("redis://127.0.0.1/zero", "redis database 'zero' is not a number"),
    ],
)
def test_a_bad_url_is_refused_naming_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(exceptions.ValidationError, match=says) as caught:
        jobboard.board_conf(url)
    assert caught.value.field == "backend_url"


@pytest.mark.parametrize(
    ("board", "tooz"),
    [
        ("redis://127.0.0.1:6379/2?namespace=x", "redis://127.0.0.1:6379?db=2"),
        ("redis://:p%40ss@redis.example", "redis://:p%40ss@redis.example:6379?db=0"),
        ("zookeeper://zk1:2181,zk2:2181/sw?timeout=4", "zookeeper://zk1:2181,zk2:2181"),
    ],
)
def test_the_watchers_elect_on_the_boards_server(board: str, tooz: str) -> None:
    assert jobboard.election_url(board) == tooz
