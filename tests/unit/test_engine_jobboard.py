"""The jobboard's URL: what TaskFlow's board is given, and what is refused."""

from __future__ import annotations

import pytest
from taskflow.jobs import backends as job_backends

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


class FlakyBoard:
    """A TaskFlow board whose connect fails while ``failures`` last (shared
    by every client made, as a board's server is)."""

    def __init__(self, failures: list[int]) -> None:
        self.failures = failures
        self.closed = False

    def connect(self) -> None:
        if self.failures[0]:
            self.failures[0] -= 1
            raise RuntimeError("Failed to do post-connection initialization")

    def close(self) -> None:
        self.closed = True


def flaky(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[FlakyBoard]:
    """Every client :class:`jobboard.Board` makes, failing ``failures`` times."""
    left = [failures]
    made: list[FlakyBoard] = []

    def fetch(name: str, conf: dict[str, object]) -> FlakyBoard:
        made.append(FlakyBoard(left))
        return made[-1]

    monkeypatch.setattr(job_backends, "fetch", fetch)
    monkeypatch.setattr(jobboard, "CONNECT_PAUSE", 0.01)
    return made


def test_a_board_out_of_reach_is_one_clear_error_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = flaky(monkeypatch, failures=1)
    board = jobboard.Board("redis://127.0.0.1:6379/0", 30)
    says = r"jobboard redis at 127\.0\.0\.1:6379 unreachable"
    with pytest.raises(exceptions.SwflowsError, match=says):
        board.connect()
    assert len(made) == 1


def test_with_patience_a_failed_connect_is_made_again_on_a_new_client(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    made = flaky(monkeypatch, failures=2)
    board = jobboard.Board("zookeeper://127.0.0.1:2181/sw", 30)
    assert board.connect(patience=30) is board
    assert len(made) == 3 and made[0].closed and made[1].closed
    assert board._board is made[2] and not made[2].closed
    assert "trying again" in caplog.text


def test_patience_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    made = flaky(monkeypatch, failures=10**6)
    board = jobboard.Board("redis://127.0.0.1:6379/0", 30)
    with pytest.raises(exceptions.SwflowsError, match="unreachable"):
        board.connect(patience=0.2)
    assert 2 <= len(made) < 10**6
