"""``--os-cloud``: [identity]'s login taken from a clouds.yaml entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from swflows import conf as sw_conf
from swflows.cli import cloud, parsing

CLOUDS = """\
clouds:
  lab:
    auth:
      auth_url: http://keystone.test:5000/v3
      username: ops
      password: s3cret-pass
      project_name: ops
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionTwo
    verify: false
"""


@pytest.fixture
def clouds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "clouds.yaml"
    path.write_text(CLOUDS)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    for name in ("OS_CLOUD", "OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_a_cloud_becomes_the_identity_login(clouds: Path) -> None:
    conf = sw_conf.get_conf()
    cloud.apply(conf, "lab")
    group = conf.identity
    assert group.auth_type == "password"
    assert group.auth_url == "http://keystone.test:5000/v3"
    assert (group.username, group.password) == ("ops", "s3cret-pass")
    assert group.project_name == "ops"
    assert group.region_name == "RegionTwo"
    assert group.insecure is True


def test_an_unknown_cloud_is_bad_input(clouds: Path) -> None:
    with pytest.raises(parsing.BadInput, match="os-cloud"):
        cloud.apply(sw_conf.get_conf(), "nowhere")
